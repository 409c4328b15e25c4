"""The orderly consume service: one listener call at a time per queue, in offset order.

Upstream ``impl.consumer.ConsumeMessageOrderlyService``. Contract: a clustering consumer
consumes a queue only while it holds the broker's lock on it (LOCK_BATCH_MQ; every lock is
renewed every 20 s by the lock routine, and a queue found unlocked is re-locked and
retried, 10 ms after a success, 3 s after a failure). A worker takes up to
``consume_message_batch_max_size`` messages from the process queue in offset order and
calls the listener under the queue's consume lock; after 60 s of continuous consuming it
hands the queue back to the request queue. SUCCESS / COMMIT (and ROLLBACK with
``auto_commit``) commit the batch; SUSPEND_CURRENT_QUEUE_A_MOMENT, an exception or a
value that is not a status put the batch back and re-deliver it after the context's
``suspend_current_queue_time_ms`` (else the consumer's, bounded to [10, 30000] ms); a
message past ``max_reconsume_times`` goes to ``%RETRY%<group>`` instead. The commit offset
is the end of the last committed batch. ``shutdown()`` unlocks the queues of a clustering
consumer.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.codes import MessageConst
from aiorocketmq.protocol.message import MessageExt

from ..process_queue import REBALANCE_LOCK_INTERVAL_MS, ProcessQueue
from ..rebalance import MessageModel
from .consume_service import ConsumeMessageService, ConsumeRequest, return_type
from .listener import ConsumeOrderlyContext, ConsumeOrderlyStatus

__all__ = ["ConsumeMessageOrderlyService", "MAX_TIME_CONSUME_CONTINUOUSLY"]

log = get_logger("aiorocketmq.client.push_consumer")

MAX_TIME_CONSUME_CONTINUOUSLY = 60.0  # orderly: yield the worker after this long


class ConsumeMessageOrderlyService(ConsumeMessageService):
    """Upstream ``ConsumeMessageOrderlyService``."""

    def start(self) -> None:
        super().start()
        c = self.consumer
        if c.message_model is MessageModel.CLUSTERING:
            c._spawn(self._lock_routine(), f"relock[{c.group}]")

    async def shutdown(self) -> None:
        await super().shutdown()
        c = self.consumer
        if c.message_model is MessageModel.CLUSTERING and c.rebalance is not None:
            await c.rebalance.unlock_all(False)

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
               dispatch: bool) -> None:
        if dispatch:
            self.enqueue(ConsumeRequest(None, pq, mq))

    async def consume(self, request: ConsumeRequest) -> None:
        """``ConsumeMessageOrderlyService.ConsumeRequest.run`` for one queue."""
        c = self.consumer
        pq, mq = request.pq, request.mq
        if pq.dropped:
            return
        clustering = c.message_model is MessageModel.CLUSTERING
        if clustering and (not pq.locked or pq.is_lock_expired()):
            self._try_lock_later_and_reconsume(pq, mq, 0.1)
            return
        begin = time.monotonic()
        batch = c.consume_message_batch_max_size
        while True:
            if pq.dropped:
                return
            if clustering and (not pq.locked or pq.is_lock_expired()):
                self._try_lock_later_and_reconsume(pq, mq, 0.01)
                return
            if time.monotonic() - begin > MAX_TIME_CONSUME_CONTINUOUSLY:
                c._later(0.01, self.enqueue, ConsumeRequest(None, pq, mq))
                return
            msgs = pq.take_messages(batch)
            if not msgs:
                return
            self.reset_retry_and_namespace(msgs)
            ctx = ConsumeOrderlyContext(mq)
            tracer = c._tracer
            trace = tracer.consume_before(msgs) if tracer is not None else None
            began = time.monotonic()
            raised = False
            async with pq.consume_lock:
                if pq.dropped:
                    return
                try:
                    status = await self.call_listener(msgs, ctx)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.alert(logging.ERROR, "client.push_consumer.listener_failed",
                              group=c.group, mq=str(mq), exc_info=True)
                    status = None
                    raised = True
            if tracer is not None:
                tracer.consume_after(
                    trace, msgs, status in (ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.COMMIT),
                    return_type(status, raised, began, ConsumeOrderlyStatus.SUCCESS,
                                ConsumeOrderlyStatus.COMMIT, ConsumeOrderlyStatus.ROLLBACK))
            if not isinstance(status, ConsumeOrderlyStatus):
                if not raised:
                    log.alert(logging.WARNING, "client.push_consumer.listener_bad_status",
                              group=c.group, status=repr(status),
                              result="SUSPEND_CURRENT_QUEUE_A_MOMENT: delivered again")
                status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            if not await self.process_consume_result(msgs, status, ctx, pq, mq):
                return

    async def process_consume_result(self, msgs: list[MessageExt], status: ConsumeOrderlyStatus,
                                     ctx: ConsumeOrderlyContext, pq: ProcessQueue,
                                     mq: MessageQueue) -> bool:
        """``processConsumeResult``; False: stop consuming this queue for now."""
        commit_offset = -1
        cont = True
        if ctx.auto_commit:
            if status in (ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.COMMIT,
                          ConsumeOrderlyStatus.ROLLBACK):
                commit_offset = pq.commit()
                self.consume_ok += len(msgs)
            else:
                self.consume_failed += len(msgs)
                if await self._check_reconsume_times(msgs):
                    pq.make_message_to_consume_again(msgs)
                    self._suspend_later(pq, mq, ctx)
                    cont = False
                else:
                    commit_offset = pq.commit()
        else:
            if status is ConsumeOrderlyStatus.COMMIT or status is ConsumeOrderlyStatus.SUCCESS:
                commit_offset = pq.commit()
            elif status is ConsumeOrderlyStatus.ROLLBACK:
                pq.rollback()
                self._suspend_later(pq, mq, ctx)
                cont = False
            else:
                if await self._check_reconsume_times(msgs):
                    pq.make_message_to_consume_again(msgs)
                    self._suspend_later(pq, mq, ctx)
                    cont = False
        if commit_offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, commit_offset, False)
        return cont

    def _suspend_later(self, pq: ProcessQueue, mq: MessageQueue, ctx: ConsumeOrderlyContext) -> None:
        c = self.consumer
        delay_ms = ctx.suspend_current_queue_time_ms
        if delay_ms < 10 or delay_ms > 30000:
            delay_ms = c.suspend_current_queue_time_ms
        delay_ms = min(max(delay_ms, 10), 30000)
        c._later(delay_ms / 1000, self.enqueue, ConsumeRequest(None, pq, mq))

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """True: suspend and retry locally; False: every message went to the retry topic."""
        c = self.consumer
        suspend = False
        limit = c.effective_max_reconsume_times
        for m in msgs:
            if m.reconsume_times >= limit:
                m.properties[MessageConst.PROPERTY_RECONSUME_TIME] = str(m.reconsume_times)
                try:
                    await c._resend_to_retry_topic(m, 3 + m.reconsume_times, m.reconsume_times,
                                                   limit)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("client.push_consumer.orderly_send_back_failed", msg_id=m.msg_id,
                                error=repr(exc))
                    suspend = True
                    m.reconsume_times += 1
            else:
                suspend = True
                m.reconsume_times += 1
        return suspend

    def _try_lock_later_and_reconsume(self, pq: ProcessQueue, mq: MessageQueue,
                                      delay: float) -> None:
        c = self.consumer

        async def relock() -> None:
            assert c.rebalance is not None
            ok = await c.rebalance.lock(mq)
            c._later(0.01 if ok else 3.0, self.enqueue, ConsumeRequest(None, pq, mq))

        c._later(delay, lambda: c._spawn(relock(), f"relock[{mq}]"))

    async def _lock_routine(self) -> None:
        """``lockMQPeriodically``: renew every owned queue's lock every 20 s."""
        c = self.consumer
        await asyncio.sleep(1.0)
        while True:
            if c.rebalance is not None:
                try:
                    await c.rebalance.lock_all()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("client.push_consumer.lock_all_failed", group=c.group,
                                error=repr(exc))
            await asyncio.sleep(REBALANCE_LOCK_INTERVAL_MS / 1000)
