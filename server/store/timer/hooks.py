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

Upstream: ``broker/BrokerController.java`` (``registerMessageStoreHook``),
``broker/processor/SendMessageProcessor.java``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiorocketmq.protocol.command import RemotingCommand

from ..inner import MessageExtBrokerInner
from .timer_store import TimerMessageStore, refusal

if TYPE_CHECKING:
    from aiorocketmq.server.broker.processors.send import SendContext

__all__ = ["TimerSendHook"]


class TimerSendHook:
    """A ``SendHook`` answering a refused timer message with upstream's code and remark."""

    __slots__ = ("_timer",)

    def __init__(self, timer: TimerMessageStore) -> None:
        self._timer = timer

    def __call__(self, ctx: SendContext) -> RemotingCommand | None:
        inner = ctx.inner
        if not isinstance(inner, MessageExtBrokerInner):
            return None  # a batch
        status = self._timer.check_and_transform(inner)
        if status is None:
            return None
        response = ctx.response
        response.code, response.remark = refusal(status, self._timer.config)
        return response
