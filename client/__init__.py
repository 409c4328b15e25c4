"""aiorocketmq's asyncio client: producers and consumers wire-compatible with RocketMQ 4.9.x.

The public surface is what this module exports; everything under ``client.*`` modules
is internal unless listed here. See ``client.producer`` and ``client.push_consumer``
for the behaviour each class reproduces from the Java client.
"""

if __name__ != "aiorocketmq.client":  # one name per module: docs/ARCHITECTURE.md
    raise ImportError(f"import aiorocketmq.client, not {__name__}: the top-level client/ is "
                      "the aiorocketmq package's part, and a second name would load a second "
                      "copy of each of its modules and classes")

from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.message import Message, MessageExt

from .allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
)
from .api import PullResult, PullStatus, SendResult, SendStatus
from .config import ClientConfig
from .producer import Producer, SelectMessageQueueByHash, SelectMessageQueueByRandom
from .pull_consumer import LitePullConsumer, PullConsumer
from .push_consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    PushConsumer,
)
from .rebalance import ConsumeFromWhere, MessageModel
from .request_reply import RequestProducer, RequestTimeoutError, create_reply_message
from .selector import MessageSelector
from .transaction_producer import (
    LocalTransactionState,
    TransactionProducer,
    TransactionSendResult,
)

__all__ = [
    "Producer",
    "TransactionProducer",
    "LocalTransactionState",
    "TransactionSendResult",
    "RequestProducer",
    "RequestTimeoutError",
    "create_reply_message",
    "PushConsumer",
    "PullConsumer",
    "LitePullConsumer",
    "MessageSelector",
    "Message",
    "MessageExt",
    "MessageQueue",
    "SendResult",
    "SendStatus",
    "PullResult",
    "PullStatus",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyStatus",
    "ConsumeConcurrentlyContext",
    "ConsumeOrderlyContext",
    "MessageModel",
    "ConsumeFromWhere",
    "ClientConfig",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
]
