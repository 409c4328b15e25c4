"""What the concurrent and the orderly consume services share.

Upstream ``impl.consumer.ConsumeMessageService`` (the interface both services
implement) with the part of their bodies they have in common: a bounded queue of consume
requests read by ``consume_thread_max`` worker tasks, the thread pool of a plain-function
listener (an ``async def`` listener runs on the loop), the listener call, and
``resetRetryAndNamespace``.

Contract: ``start()`` creates the queue, the pool and the workers; ``submit`` takes the
messages a pull just cached (``submitConsumeRequest``); ``enqueue`` queues a request, and
when the queue is full queues it again 5 s later (``submitConsumeRequestLater``), never
after the consumer began to stop. ``stop_workers(budget)`` throws away queued requests,
lets running ones finish within ``budget`` seconds and then cancels the workers;
``shutdown()`` releases the pool. A listener's exception never stops a worker. Timers and
one-off tasks belong to the consumer (``PushConsumer._later`` / ``_spawn``), which cancels
them at shutdown. Log events keep the ``client.push_consumer.*`` names.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import TYPE_CHECKING, Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.codes import MessageConst, MixAll
from aiorocketmq.protocol.message import MessageExt

from ..config import ClientConfig
from ..process_queue import ProcessQueue
from ..trace.data import ConsumeReturnType
from .listener import MessageListener

if TYPE_CHECKING:
    from ..push_consumer import PushConsumer

__all__ = ["ConsumeMessageService", "ConsumeRequest", "call_listener", "return_type",
           "reset_retry_and_namespace",
           "CONSUME_REQUEST_LATER", "CONSUME_TIMEOUT_S"]

log = get_logger("aiorocketmq.client.push_consumer")

CONSUME_REQUEST_LATER = 5.0  # submitConsumeRequestLater
CONSUME_TIMEOUT_S = 15 * 60  # consumeTimeout (15 minutes): a slower listener is TIME_OUT
_RETRY_TOPIC_KEY = MessageConst.PROPERTY_RETRY_TOPIC


def return_type(status: object, raised: bool, began: float, *ok: object) -> ConsumeReturnType:
    """``ConsumeReturnType`` of one listener call, as the consume services work it out."""
    if status is None:
        return ConsumeReturnType.EXCEPTION if raised else ConsumeReturnType.RETURNNULL
    if time.monotonic() - began >= CONSUME_TIMEOUT_S:
        return ConsumeReturnType.TIME_OUT
    return ConsumeReturnType.SUCCESS if status in ok else ConsumeReturnType.FAILED


async def call_listener(listener: MessageListener | None, is_async: bool,
                        executor: concurrent.futures.Executor | None,
                        msgs: list[MessageExt], ctx: Any) -> Any:
    """One listener call: awaited when ``async def``, else run on ``executor``."""
    assert listener is not None
    if is_async:
        return await listener(msgs, ctx)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, listener, msgs, ctx)


def reset_retry_and_namespace(config: ClientConfig, group: str, msgs: list[MessageExt]) -> None:
    """``resetRetryAndNamespace``: messages of ``%RETRY%<group>`` get their original topic
    back, and every topic loses the namespace."""
    retry_topic: str | None = None
    namespace = config.namespace
    for m in msgs:
        real = m.properties.get(_RETRY_TOPIC_KEY)
        if real is not None:
            if retry_topic is None:
                retry_topic = MixAll.retry_topic(group)
            if m.topic == retry_topic:
                m.topic = real
        if namespace:
            m.topic = config.without_namespace(m.topic)


class ConsumeRequest:
    __slots__ = ("msgs", "pq", "mq")

    def __init__(self, msgs: list[MessageExt] | None, pq: ProcessQueue, mq: MessageQueue) -> None:
        self.msgs = msgs  # None for an orderly request: the worker takes from the pq
        self.pq = pq
        self.mq = mq


class ConsumeMessageService:
    """Base of ``ConsumeMessageConcurrentlyService`` and ``ConsumeMessageOrderlyService``."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        self.consume_ok = 0
        self.consume_failed = 0
        self.executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._queue: asyncio.Queue[ConsumeRequest] | None = None
        self._workers: list[asyncio.Task[None]] = []

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        c = self.consumer
        self._queue = asyncio.Queue(maxsize=c.consume_thread_max * 64)
        if not c._listener_is_async:
            self.executor = concurrent.futures.ThreadPoolExecutor(
                c.consume_thread_max, thread_name_prefix=f"consume-{c.group}")
        for i in range(c.consume_thread_max):
            self._workers.append(asyncio.create_task(self._consume_routine(),
                                                     name=f"consume[{c.group}#{i}]"))

    async def stop_workers(self, budget: float) -> None:
        """Let running listeners finish within ``budget`` seconds, then stop the workers."""
        workers = self._workers
        if workers and self._queue is not None:
            _drain(self._queue)
            try:
                async with asyncio.timeout(budget):
                    await self._queue.join()
            except TimeoutError:
                log.warning("client.push_consumer.listeners_still_running",
                            group=self.consumer.group, await_termination=budget)
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    async def shutdown(self) -> None:
        """After ``stop_workers``: release the listener's thread pool."""
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)

    # -- requests ---------------------------------------------------------------------------

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
               dispatch: bool) -> None:
        """``submitConsumeRequest``: ``msgs`` were just cached in ``pq``."""
        raise NotImplementedError

    async def consume(self, request: ConsumeRequest) -> None:
        """Run one consume request (``ConsumeRequest.run``)."""
        raise NotImplementedError

    def enqueue(self, request: ConsumeRequest) -> None:
        q = self._queue
        if q is None or self.consumer._stopping:
            return
        try:
            q.put_nowait(request)
        except asyncio.QueueFull:
            self.consumer._later(CONSUME_REQUEST_LATER, self.enqueue, request)

    async def _consume_routine(self) -> None:
        q = self._queue
        assert q is not None
        while True:
            request = await q.get()
            try:
                await self.consume(request)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("client.push_consumer.consume_request_failed",
                              group=self.consumer.group, mq=str(request.mq))
            finally:
                q.task_done()

    # -- shared by both services ------------------------------------------------------------

    async def call_listener(self, msgs: list[MessageExt], ctx: Any) -> Any:
        c = self.consumer
        return await call_listener(c._listener, c._listener_is_async, self.executor, msgs, ctx)

    def reset_retry_and_namespace(self, msgs: list[MessageExt]) -> None:
        reset_retry_and_namespace(self.consumer.config, self.consumer.group, msgs)

def _drain(q: asyncio.Queue[Any]) -> None:
    """Throw away queued (not yet started) work so ``join`` waits only for running items."""
    while True:
        try:
            q.get_nowait()
        except asyncio.QueueEmpty:
            return
        q.task_done()
