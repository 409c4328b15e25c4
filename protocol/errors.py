"""The error tree of aiorocketmq, split by who is at fault.

::

    RocketMQError                      root of everything we raise on purpose
    ├── ProtocolError                  bytes from a peer that break the wire format
    │   ├── FrameTooLargeError         frame length over the configured maximum
    │   └── HeaderError                a header that does not decode (bad JSON, bad field)
    ├── RemotingError                  the transport failed (no answer from the peer)
    │   ├── RemotingConnectError       could not connect / connection refused
    │   ├── ConnectionClosedError      the connection closed with the request pending
    │   ├── RemotingTimeoutError       no response in time (also a builtin TimeoutError)
    │   └── RemotingTooMuchRequestError  no semaphore permit in time (oneway/async)
    ├── MQClientError                  misuse by the caller: bad config, bad state (also ValueError)
    ├── RequestTimeoutError            a request was sent, no reply came in time (request-reply;
    │                                  also a builtin TimeoutError)
    └── MQBrokerError                  the peer answered with a non-success response code;
                                       subclasses per ResponseCode via ``MQBrokerError.for_code``

``ProtocolError`` is what the sans-IO codec raises; any other exception escaping a
decoder is a bug. ``MQBrokerError.retriable`` drives producer retries (upstream
``DefaultMQProducer.retryResponseCodes``), so no caller keeps its own list.
"""

from __future__ import annotations

from typing import ClassVar

from .codes import ResponseCode

__all__ = [
    "RocketMQError",
    "ProtocolError",
    "FrameTooLargeError",
    "HeaderError",
    "RemotingError",
    "RemotingConnectError",
    "ConnectionClosedError",
    "RemotingTimeoutError",
    "RemotingTooMuchRequestError",
    "MQClientError",
    "RequestTimeoutError",
    "MQBrokerError",
    "BrokerSystemError",
    "SystemBusyError",
    "RequestCodeNotSupportedError",
    "MessageIllegalError",
    "ServiceNotAvailableError",
    "NoPermissionError",
    "TopicNotExistError",
    "PullNotFoundError",
    "QueryNotFoundError",
    "SubscriptionParseFailedError",
    "SubscriptionNotExistError",
    "SubscriptionNotLatestError",
    "SubscriptionGroupNotExistError",
    "NoBuyerIdError",
    "NotInCurrentUnitError",
    "ConsumerNotOnlineError",
    "ConsumeMsgTimeoutError",
    "FlowControlError",
]


class RocketMQError(Exception):
    """Root of the errors aiorocketmq raises on purpose."""


class ProtocolError(RocketMQError):
    """A peer sent bytes that do not follow the remoting wire format."""


class FrameTooLargeError(ProtocolError):
    """A frame's length word exceeds the decoder's ``max_frame_length``."""


class HeaderError(ProtocolError):
    """A RemotingCommand header or custom header that cannot be decoded.

    The server answers these with a non-zero response code and this message as
    the remark (upstream ``RemotingCommand.checkFields``: "the custom field <x> is null").
    """


class RemotingError(RocketMQError):
    """The transport failed: the peer did not answer (usable) bytes."""


class RemotingConnectError(RemotingError):
    """Connecting to ``addr`` failed."""


class ConnectionClosedError(RemotingError):
    """The connection closed while a request on it was pending."""


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No response arrived within the request's timeout."""


class RemotingTooMuchRequestError(RemotingError):
    """No async/oneway semaphore permit became free in time (upstream RemotingTooMuchRequestException)."""


class MQClientError(RocketMQError, ValueError):
    """The caller misused the client: bad configuration, wrong state, bad argument."""


class RequestTimeoutError(RocketMQError, TimeoutError):
    """A request-reply request was sent but no reply arrived in time (upstream
    ``RequestTimeoutException``; docs/PROTOCOL.md 3.5)."""


class MQBrokerError(RocketMQError):
    """A nameserver or broker answered with a non-success response code.

    ``code`` is the response code (an int even when unknown to us), ``remark`` the
    peer's text, ``addr`` the peer. ``MQBrokerError.for_code(code, ...)`` returns an
    instance of the most specific registered subclass.
    """

    code: int
    retriable: ClassVar[bool] = False
    _registry: ClassVar[dict[int, type[MQBrokerError]]] = {}
    response_code: ClassVar[int | None] = None

    def __init__(self, code: int, remark: str | None = None, addr: str | None = None) -> None:
        self.code = code
        self.remark = remark
        self.addr = addr
        try:
            name = ResponseCode(code).name
        except ValueError:
            name = "UNKNOWN"
        where = f" from {addr}" if addr else ""
        super().__init__(f"CODE: {code} ({name}){where}, DESC: {remark}")

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.response_code is not None:
            MQBrokerError._registry[cls.response_code] = cls

    @classmethod
    def for_code(cls, code: int, remark: str | None = None, addr: str | None = None) -> MQBrokerError:
        klass = MQBrokerError._registry.get(code, MQBrokerError)
        return klass(code, remark, addr)


# One class per response code a caller may want to catch. ``retriable`` marks upstream
# DefaultMQProducer.retryResponseCodes: 17, 14, 1, 16, 204, 205.


class BrokerSystemError(MQBrokerError):
    response_code = ResponseCode.SYSTEM_ERROR
    retriable = True


class SystemBusyError(MQBrokerError):
    response_code = ResponseCode.SYSTEM_BUSY


class RequestCodeNotSupportedError(MQBrokerError):
    response_code = ResponseCode.REQUEST_CODE_NOT_SUPPORTED


class MessageIllegalError(MQBrokerError):
    response_code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailableError(MQBrokerError):
    response_code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True


class NoPermissionError(MQBrokerError):
    response_code = ResponseCode.NO_PERMISSION
    retriable = True


class TopicNotExistError(MQBrokerError):
    response_code = ResponseCode.TOPIC_NOT_EXIST
    retriable = True


class PullNotFoundError(MQBrokerError):
    response_code = ResponseCode.PULL_NOT_FOUND


class QueryNotFoundError(MQBrokerError):
    response_code = ResponseCode.QUERY_NOT_FOUND


class SubscriptionParseFailedError(MQBrokerError):
    response_code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class SubscriptionNotExistError(MQBrokerError):
    response_code = ResponseCode.SUBSCRIPTION_NOT_EXIST


class SubscriptionNotLatestError(MQBrokerError):
    response_code = ResponseCode.SUBSCRIPTION_NOT_LATEST


class SubscriptionGroupNotExistError(MQBrokerError):
    response_code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


class NoBuyerIdError(MQBrokerError):
    response_code = ResponseCode.NO_BUYER_ID
    retriable = True


class NotInCurrentUnitError(MQBrokerError):
    response_code = ResponseCode.NOT_IN_CURRENT_UNIT
    retriable = True


class ConsumerNotOnlineError(MQBrokerError):
    response_code = ResponseCode.CONSUMER_NOT_ONLINE


class ConsumeMsgTimeoutError(MQBrokerError):
    response_code = ResponseCode.CONSUME_MSG_TIMEOUT


class FlowControlError(MQBrokerError):
    response_code = ResponseCode.FLOW_CONTROL
