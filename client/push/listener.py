"""Listener statuses and per-call contexts of the push consumer.

Upstream ``consumer.listener.{ConsumeConcurrentlyStatus,ConsumeOrderlyStatus,
ConsumeConcurrentlyContext,ConsumeOrderlyContext,MessageListener}``. A listener is
``listener(msgs, context)``, a plain function or a coroutine function, and returns a
``ConsumeConcurrentlyStatus`` (concurrent consumer) or a ``ConsumeOrderlyStatus``
(orderly consumer); ``client.push_consumer`` re-exports every name here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.message import MessageExt

__all__ = [
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyStatus",
    "ConsumeConcurrentlyContext",
    "ConsumeOrderlyContext",
    "MessageListener",
]


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    ROLLBACK = "ROLLBACK"
    COMMIT = "COMMIT"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


class ConsumeConcurrentlyContext:
    """Per-call context: set ``delay_level_when_next_consume`` (-1 DLQ, 0 broker decides,
    >0 a level) or ``ack_index`` (messages after it are retried) to steer retries."""

    __slots__ = ("message_queue", "delay_level_when_next_consume", "ack_index")

    def __init__(self, message_queue: MessageQueue) -> None:
        self.message_queue = message_queue
        self.delay_level_when_next_consume = 0
        self.ack_index = 2**31 - 1


class ConsumeOrderlyContext:
    __slots__ = ("message_queue", "auto_commit", "suspend_current_queue_time_ms")

    def __init__(self, message_queue: MessageQueue) -> None:
        self.message_queue = message_queue
        self.auto_commit = True
        self.suspend_current_queue_time_ms = -1


MessageListener = Callable[[list[MessageExt], Any], Any]
