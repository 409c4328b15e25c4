"""The timer store's two hooks into a broker: the store put hook and the send hook.

Contract:

* ``TimerMessageStore.check_and_transform`` is registered as a ``MessageStore`` put hook
  (upstream ``putMessageHookList`` / ``HookUtils.handleScheduleMessage``): every single
  put, whatever its path (sends, committed transactions, replies, retries), is parked or
  refused there. A refusal is a WHEEL_TIMER_* ``PutMessageStatus``.
* ``TimerSendHook`` runs the same check in the send path's hooks (after the retry/DLQ and
  transaction hooks), so that a send is answered with upstream's code and remark for each
  WHEEL_TIMER_* status (``SendMessageProcessor.handlePutMessageResult``): code 13
  MESSAGE_ILLEGAL for an illegal timer message, code 1 SYSTEM_ERROR when
  ``timerWheelEnable`` is false or the slot is under flow control. A message it parks is
  on ``rmq_sys_wheel_timer`` already, which the put hook leaves alone. Batches are not
  timed (their members keep their TIMER_* properties and are stored as they are).
* A parked message's answer carries upstream's ``recallHandle`` extField
  (``attachRecallHandle``, 5.3): URL-safe base64 of ``v1 <real topic> <broker name>
  <TIMER_OUT_MS + 1> <UNIQ_KEY>``, not for ``%RETRY%`` topics. (RECALL_MESSAGE itself is
  not served.)

Upstream: ``broker/BrokerController.java`` (``registerMessageStoreHook``),
``broker/processor/SendMessageProcessor.java``.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from aiorocketmq.protocol.codes import MessageConst, MixAll
from aiorocketmq.protocol.command import RemotingCommand

from ..inner import MessageExtBrokerInner
from .timer_store import TIMER_TOPIC, TimerMessageStore, refusal

if TYPE_CHECKING:
    from aiorocketmq.server.broker.processors.send import SendContext

__all__ = ["TimerSendHook", "recall_handle"]

_OUT_MS = MessageConst.PROPERTY_TIMER_OUT_MS
_REAL_TOPIC = MessageConst.PROPERTY_REAL_TOPIC
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


def recall_handle(topic: str, broker_name: str, timestamp: str, message_id: str | None) -> str:
    """``RecallMessageHandle.HandleV1.buildHandle`` (Java's ``String.join`` writes null as "null")."""
    raw = " ".join(("v1", topic, broker_name, timestamp, "null" if message_id is None else message_id))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")


class TimerSendHook:
    """A ``SendHook`` answering a refused timer message with upstream's code and remark."""

    __slots__ = ("_timer", "_broker_name")

    def __init__(self, timer: TimerMessageStore, broker_name: str) -> None:
        self._timer = timer
        self._broker_name = broker_name

    def __call__(self, ctx: SendContext) -> RemotingCommand | None:
        inner = ctx.inner
        if not isinstance(inner, MessageExtBrokerInner):
            return None  # a batch
        before = inner.topic
        status = self._timer.check_and_transform(inner)
        response = ctx.response
        if status is None:
            parked = before != TIMER_TOPIC and inner.topic == TIMER_TOPIC
            if parked and response.ext_fields is not None:
                props = inner.properties
                real_topic = props.get(_REAL_TOPIC, "")
                if not real_topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
                    response.ext_fields["recallHandle"] = recall_handle(
                        real_topic, self._broker_name, str(int(props[_OUT_MS]) + 1), props.get(_UNIQ))
            return None
        response.code, response.remark = refusal(status, self._timer.config)
        return response
