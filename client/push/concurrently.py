"""The concurrent consume service: listener calls in parallel, failures sent back.

Upstream ``impl.consumer.ConsumeMessageConcurrentlyService``. Contract: the messages of
a pull are cut into requests of ``consume_message_batch_max_size`` and consumed by any
free worker. A listener's CONSUME_SUCCESS acknowledges the messages up to the context's
``ack_index``; RECONSUME_LATER, an exception or ``None`` acknowledges none (the exception,
or a return value that is not a status, is alerted: ``client.push_consumer.listener_failed``
with its traceback, ``listener_bad_status``). Unacknowledged messages of a clustering
consumer go back to the broker (``PushConsumer.send_message_back``: CONSUMER_SEND_MSG_BACK
with the context's delay level, else a direct send to ``%RETRY%<group>``); those that
cannot be sent back are consumed again locally 5 s later. A broadcasting consumer drops
them with a warning. Settled messages leave the process queue and the queue's consume
offset moves to the lowest offset still cached. A queue dropped meanwhile is not settled.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.codes import MessageConst
from aiorocketmq.protocol.message import MessageExt

from ..process_queue import ProcessQueue
from ..rebalance import MessageModel
from .consume_service import (
    CONSUME_REQUEST_LATER,
    ConsumeMessageService,
    ConsumeRequest,
    return_type,
)
from .listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus

__all__ = ["ConsumeMessageConcurrentlyService"]

log = get_logger("aiorocketmq.client.push_consumer")

_CONSUME_SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
_CONSUME_START = MessageConst.PROPERTY_CONSUME_START_TIMESTAMP


class ConsumeMessageConcurrentlyService(ConsumeMessageService):
    """Upstream ``ConsumeMessageConcurrentlyService``."""

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
               dispatch: bool) -> None:
        size = self.consumer.consume_message_batch_max_size
        for i in range(0, len(msgs), size):
            self.enqueue(ConsumeRequest(msgs[i:i + size], pq, mq))

    async def consume(self, request: ConsumeRequest) -> None:
        c = self.consumer
        pq, mq = request.pq, request.mq
        msgs = request.msgs
        assert msgs is not None
        if pq.dropped:
            return
        ctx = ConsumeConcurrentlyContext(mq)
        self.reset_retry_and_namespace(msgs)
        tracer = c._tracer
        trace = tracer.consume_before(msgs) if tracer is not None else None
        began = time.monotonic()
        now = str(time.time_ns() // 1_000_000)
        for m in msgs:
            m.properties[_CONSUME_START] = now
        raised = False
        try:
            if c._listener_is_async:  # awaited here: no call_listener frame per call
                status = await c._listener(msgs, ctx)  # type: ignore[misc]
            else:
                status = await self.call_listener(msgs, ctx)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The application's own code: on stderr even with no logging configured.
            log.alert(logging.ERROR, "client.push_consumer.listener_failed", group=c.group,
                      mq=str(mq), msg_ids=[m.msg_id for m in msgs], exc_info=True)
            status = None
            raised = True
        if tracer is not None:
            tracer.consume_after(trace, msgs, status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
                                 return_type(status, raised, began,
                                             ConsumeConcurrentlyStatus.CONSUME_SUCCESS))
        if not isinstance(status, ConsumeConcurrentlyStatus):
            if not raised:  # None too: a listener that forgot to return a status
                log.alert(logging.WARNING, "client.push_consumer.listener_bad_status",
                          group=c.group, status=repr(status),
                          result="RECONSUME_LATER: the messages will be delivered again")
            status = ConsumeConcurrentlyStatus.RECONSUME_LATER
        if pq.dropped:
            log.warning("client.push_consumer.dropped_after_consume", group=c.group, mq=str(mq))
            return
        if status is _CONSUME_SUCCESS and ctx.ack_index >= len(msgs) - 1 and msgs:
            # Every message acknowledged (the usual case): nothing to send back, so the
            # result is settled here without a coroutine (process_consume_result's
            # success branch).
            self.consume_ok += len(msgs)
            self._settle(pq, mq, msgs)
            return
        await self.process_consume_result(status, ctx, request)

    async def process_consume_result(self, status: ConsumeConcurrentlyStatus,
                                     ctx: ConsumeConcurrentlyContext,
                                     request: ConsumeRequest) -> None:
        """``processConsumeResult``: count, send back the unacknowledged, settle."""
        c = self.consumer
        msgs = request.msgs
        assert msgs is not None
        if not msgs:
            return
        ack = ctx.ack_index
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            ack = min(ack, len(msgs) - 1)
            self.consume_ok += ack + 1
            self.consume_failed += len(msgs) - ack - 1
        else:
            ack = -1
            self.consume_failed += len(msgs)
        failed: list[MessageExt] = []
        if c.message_model is MessageModel.BROADCASTING:
            for m in msgs[ack + 1:]:
                log.warning("client.push_consumer.broadcast_consume_failed_dropped", msg_id=m.msg_id)
        else:
            for m in msgs[ack + 1:]:
                if not await c.send_message_back(m, ctx.delay_level_when_next_consume,
                                                 ctx.message_queue.broker_name):
                    m.reconsume_times += 1
                    failed.append(m)
        done = msgs if not failed else [m for m in msgs if m not in failed]
        if failed:
            c._later(CONSUME_REQUEST_LATER, self.enqueue,
                     ConsumeRequest(failed, request.pq, request.mq))
        self._settle(request.pq, request.mq, done)

    def _settle(self, pq: ProcessQueue, mq: MessageQueue, done: list[MessageExt]) -> None:
        """``done`` leaves the process queue; the queue's consume offset moves to what is left."""
        offset = pq.remove_message(done)
        if offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, offset, True)
