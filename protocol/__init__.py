"""The floor both the servers and the clients stand on (docs/ARCHITECTURE.md "Layers").

The RocketMQ remoting wire format, sans-IO (frames, commands, headers, bodies, messages), and
what both sides run it with: ``channel`` (one asyncio connection), the two endpoints
``remoting_server`` and ``remoting_client`` with ``tls_acceptor``, the processes' ``runtime``,
``atomic_file`` and ``routine``. Nothing here imports ``server`` or ``client``.
"""

if __name__ != "aiorocketmq.protocol":  # one name per module: docs/ARCHITECTURE.md
    raise ImportError(f"import aiorocketmq.protocol, not {__name__}: the top-level protocol/ is "
                      "the aiorocketmq package's part, and a second name would load a second "
                      "copy of each of its modules and classes")

from .codes import (
    CURRENT_VERSION,
    LanguageCode,
    MessageConst,
    MessageSysFlag,
    MixAll,
    Perm,
    PullSysFlag,
    RequestCode,
    ResponseCode,
    SerializeType,
    SystemTopic,
)
from .command import RemotingCommand
from .errors import (
    ConnectionClosedError,
    FrameTooLargeError,
    HeaderError,
    MQBrokerError,
    MQClientError,
    ProtocolError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
    RocketMQError,
)
from .frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder

__all__ = [
    "CURRENT_VERSION",
    "DEFAULT_MAX_FRAME_LENGTH",
    "ConnectionClosedError",
    "FrameDecoder",
    "FrameTooLargeError",
    "HeaderError",
    "LanguageCode",
    "MQBrokerError",
    "MQClientError",
    "MessageConst",
    "MessageSysFlag",
    "MixAll",
    "Perm",
    "ProtocolError",
    "PullSysFlag",
    "RemotingCommand",
    "RemotingConnectError",
    "RemotingError",
    "RemotingTimeoutError",
    "RemotingTooMuchRequestError",
    "RequestCode",
    "ResponseCode",
    "RocketMQError",
    "SerializeType",
    "SystemTopic",
]
