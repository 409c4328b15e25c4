"""Trace records batched into trace messages, sent in the background (upstream 4.9.7
``AsyncTraceDispatcher``).

Contract:

* ``append(ctx)`` never blocks and never raises: it puts the record on a bounded queue
  (``QUEUE_SIZE``, 1024 as upstream) and returns ``False`` when the queue is full or the
  dispatcher is not running; such records are counted in ``dropped`` (logged every
  ``DROP_LOG_EVERY`` drops). A user's send or consume never waits for tracing. Call it on
  the dispatcher's event loop.
* One routine owned by the dispatcher encodes records (``data.encode``) into a segment per
  trace topic and sends a segment as one trace message when it reaches ``max_msg_size - 10
  000`` characters or its oldest record is ``WAIT_THRESHOLD`` (0.5 s) old, as upstream. The
  message's keys are every record's msgId and message keys (so ``QUERY_MESSAGE`` by msgId on
  the trace topic finds it), its body the records' text.
* Trace messages go through a ``Producer`` of its own: group
  ``_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>``, instance name
  ``PID_CLIENT_INNER_TRACE_PRODUCER_<namesrv>`` (a client instance shared by the process's
  tracing), send timeout 5 s, at most ``MAX_IN_FLIGHT`` sends at once; a failed send is
  logged and counted in ``send_failed``, never retried.
* ``stop()`` sends what is queued (bounded by ``FLUSH_TIMEOUT``), waits for the sends in
  flight and stops the producer. Idempotent.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import SystemTopic
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.message import Message
from aiorocketmq.protocol.routine import cancel_and_wait

from ..config import ClientConfig
from .data import GROUP_NAME_PREFIX, TRACE_INSTANCE_NAME, TraceContext, encode

if TYPE_CHECKING:
    from ..producer import Producer

__all__ = ["AsyncTraceDispatcher", "QUEUE_SIZE", "WAIT_THRESHOLD"]

log = get_logger("aiorocketmq.client.trace")

QUEUE_SIZE = 1024  # traceContextQueue
MAX_MSG_SIZE = 128_000  # the trace producer's maxMessageSize
WAIT_THRESHOLD = 0.5  # waitTimeThresholdMil
SEND_TIMEOUT_MS = 5000
MAX_IN_FLIGHT = 20  # the send executor's maximum threads
FLUSH_TIMEOUT = 5.0
DROP_LOG_EVERY = 100

_counter = itertools.count(1)


class _Segment:
    __slots__ = ("first_add", "size", "data", "keys")

    def __init__(self) -> None:
        self.first_add = 0.0
        self.size = 0
        self.data: list[str] = []
        self.keys: dict[str, None] = {}


class AsyncTraceDispatcher:
    """See the module docstring. ``kind`` is ``PRODUCE`` or ``CONSUME`` (upstream ``Type``)."""

    def __init__(self, group: str, kind: str, trace_topic: str | None,
                 config: ClientConfig) -> None:
        self.trace_topic = trace_topic or SystemTopic.TRACE_TOPIC
        self.group = group
        self.kind = kind
        self._config = config
        self._queue: deque[TraceContext] = deque()
        self._segments: dict[str, _Segment] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self._permits = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._producer: Producer | None = None
        self._producer_group = ""
        self._running = False
        self.dropped = 0
        self.sent = 0
        self.send_failed = 0

    @property
    def producer_group(self) -> str:
        return self._producer_group

    async def start(self) -> None:
        from ..producer import Producer  # the producer module imports this one

        if self._task is not None:
            return
        namesrv = self._config.namesrv_addr or ""
        self._producer_group = (f"{GROUP_NAME_PREFIX}-{self.group}-{self.kind}-"
                                f"{next(_counter)}")
        producer = Producer(self._producer_group, config=self._config.with_options(
            instance_name=f"{TRACE_INSTANCE_NAME}_{namesrv}"),
            send_msg_timeout_ms=SEND_TIMEOUT_MS, max_message_size=MAX_MSG_SIZE)
        await producer.start()
        self._producer = producer
        self._running = True
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"AsyncTraceDispatcher[{self._producer_group}]")

    def append(self, ctx: TraceContext) -> bool:
        """Queue one record; ``False`` (and counted in ``dropped``) when it cannot be."""
        if not self._running or len(self._queue) >= QUEUE_SIZE:
            self.dropped += 1
            if self.dropped % DROP_LOG_EVERY == 1:
                log.warning("client.trace.dropped", group=self.group, dropped=self.dropped,
                            running=self._running)
            return False
        self._queue.append(ctx)
        self._wakeup.set()
        return True

    # -- the routine -----------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._drain(loop.time())
            await self._send_due(loop.time(), force=not self._running)
            if not self._running and not self._queue:
                return
            timeout = None
            if self._segments:
                oldest = min(s.first_add for s in self._segments.values())
                timeout = max(0.0, oldest + WAIT_THRESHOLD - loop.time())
            self._wakeup.clear()
            if self._queue:
                continue
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                pass

    def _drain(self, now: float) -> None:
        queue = self._queue
        while queue:
            ctx = queue.popleft()
            if not ctx.beans:
                continue
            data, keys = encode(ctx)
            seg = self._segments.get(self.trace_topic)
            if seg is None:
                seg = self._segments[self.trace_topic] = _Segment()
            if not seg.data:
                seg.first_add = now
            seg.data.append(data)
            seg.size += len(data)
            for k in keys:
                seg.keys[k] = None
            if seg.size >= MAX_MSG_SIZE - 10_000:
                seg.first_add = -1.0  # due now

    async def _send_due(self, now: float, *, force: bool) -> None:
        for topic, seg in list(self._segments.items()):
            if seg.data and (force or seg.first_add < 0 or now - seg.first_add >= WAIT_THRESHOLD):
                del self._segments[topic]
                await self._permits.acquire()
                task = asyncio.get_running_loop().create_task(self._send(topic, seg))
                self._sends.add(task)
                task.add_done_callback(self._sends.discard)

    async def _send(self, topic: str, seg: _Segment) -> None:
        producer = self._producer
        assert producer is not None
        body = "".join(seg.data).encode("utf-8")
        msg = Message(topic, body, keys=list(seg.keys))
        try:
            await producer.send(msg)
            self.sent += 1
        except (RocketMQError, OSError) as exc:
            self.send_failed += 1
            log.warning("client.trace.send_failed", topic=topic, group=self.group,
                        records=len(seg.data), error=str(exc))
        finally:
            self._permits.release()

    # -- lifecycle -------------------------------------------------------------------------

    async def stop(self) -> None:
        """Send what is queued (within ``FLUSH_TIMEOUT``), then stop. Idempotent."""
        task = self._task
        if task is None or not self._running:
            return
        self._running = False
        self._wakeup.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), FLUSH_TIMEOUT)
        except TimeoutError:
            log.warning("client.trace.flush_timeout", group=self.group, queued=len(self._queue))
            await cancel_and_wait((task,))
        if self._sends:
            _, pending = await asyncio.wait(list(self._sends), timeout=FLUSH_TIMEOUT)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending)
        if self._producer is not None:
            await self._producer.shutdown()
