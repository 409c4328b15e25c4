"""SYNC_MASTER waits: a put is answered once a slave has acknowledged its end offset.

Contract (upstream ``HAService.GroupTransferService`` and ``CommitLog.submitReplicaRequest``):

* ``submit(end_offset)`` returns a future: True as soon as the acknowledged offset
  (``push2SlaveMaxOffset``, the largest offset any slave reported) reaches
  ``end_offset``, False after ``timeout_ms`` (upstream ``slaveTimeout``, 3 s; the put
  then answers FLUSH_SLAVE_TIMEOUT) or when the service closes.
  ``submit_result(end_offset, ok, failed)`` is the same wait resolved with ``ok`` or
  ``failed`` instead of True or False: the store hands its put result over directly, so a
  waiting send costs one future, not a coroutine and a task (``CommitLog.submitReplicaRequest``
  likewise completes the put's own future). Timeouts are logged (``ha.sync_wait_timeout``,
  once per expiry with how many puts timed out).
* ``notify_acked(offset)`` wakes every waiter at or below ``offset``.

No task or timer per request: puts run on the event loop one after another, so their end
offsets and deadlines both grow in submission order and one deque holds them sorted by
both. An acknowledgement pops from the left while offsets are covered; one timer, armed
for the deadline of the head when it was armed (never later than the current head's),
pops the expired head(s) and re-arms for the new head. ``wait_observer`` (metrics) gets the
seconds each request waited.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from aiorocketmq.logs import get_logger

__all__ = ["GroupTransferService"]

log = get_logger("aiorocketmq.store.ha")

T = TypeVar("T")


class GroupTransferService:
    __slots__ = ("_timeout", "_queue", "_timer", "_acked", "_closed", "wait_observer")

    def __init__(self, timeout_ms: int) -> None:
        self._timeout = timeout_ms / 1000
        # (end_offset, submitted_at, deadline, future, ok, failed), in submission order.
        self._queue: deque[tuple[int, float, float, asyncio.Future[Any], Any, Any]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._acked = 0
        self._closed = False
        self.wait_observer: Callable[[float], None] | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def submit(self, end_offset: int) -> asyncio.Future[bool]:
        return self.submit_result(end_offset, True, False)

    def submit_result(self, end_offset: int, ok: T, failed: T) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        if self._closed:
            fut.set_result(failed)
            return fut
        if end_offset <= self._acked:
            fut.set_result(ok)
            return fut
        now = loop.time()
        self._queue.append((end_offset, now, now + self._timeout, fut, ok, failed))
        if self._timer is None:
            self._timer = loop.call_at(now + self._timeout, self._expire)
        return fut

    def notify_acked(self, offset: int) -> None:
        if offset <= self._acked:
            return
        self._acked = offset
        queue = self._queue
        if not queue or queue[0][0] > offset:
            return
        # The timer is left alone: armed for a deadline no later than the new head's, it
        # fires, finds nothing expired and re-arms for the head then (one timer per
        # ``timeout`` instead of a cancel and a new timer per acknowledgement).
        if self.wait_observer is None:
            while queue and queue[0][0] <= offset:
                _, _, _, fut, ok, _ = queue.popleft()
                if not fut.done():
                    fut.set_result(ok)
            return
        now = asyncio.get_running_loop().time()
        while queue and queue[0][0] <= offset:
            _, started, _, fut, ok, _ = queue.popleft()
            self._complete(fut, ok, now - started)

    def _complete(self, fut: asyncio.Future[Any], value: Any, waited: float) -> None:
        if not fut.done():
            fut.set_result(value)
        observe = self.wait_observer
        if observe is not None:
            observe(waited)

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._queue and not self._closed:
            self._timer = asyncio.get_running_loop().call_at(self._queue[0][2], self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = asyncio.get_running_loop().time()
        queue = self._queue
        expired = 0
        while queue and queue[0][2] <= now:
            end, started, _, fut, _, failed = queue.popleft()
            self._complete(fut, failed, now - started)
            expired += 1
        if expired:
            log.warning("ha.sync_wait_timeout", puts=expired, last_end_offset=end, acked=self._acked,
                        timeout_ms=int(self._timeout * 1000))
        self._rearm()

    def close(self) -> None:
        """Fail every waiter (the puts answer FLUSH_SLAVE_TIMEOUT); later submits fail at once."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        queue, self._queue = self._queue, deque()
        for _, _, _, fut, _, failed in queue:
            if not fut.done():
                fut.set_result(failed)
