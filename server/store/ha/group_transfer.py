"""SYNC_MASTER waits: a put is answered once a slave has acknowledged its end offset.

Contract (upstream ``HAService.GroupTransferService`` and ``CommitLog.submitReplicaRequest``):

* ``submit(end_offset)`` returns a future: True as soon as the acknowledged offset
  (``push2SlaveMaxOffset``, the largest offset any slave reported) reaches
  ``end_offset``, False after ``timeout_ms`` (upstream ``slaveTimeout``, 3 s; the put
  then answers FLUSH_SLAVE_TIMEOUT) or when the service closes.
* ``notify_acked(offset)`` wakes every waiter at or below ``offset``.

No task or timer per request: puts run on the event loop one after another, so their end
offsets and deadlines both grow in submission order and one deque holds them sorted by
both. An acknowledgement pops from the left while offsets are covered; one timer, armed
for the head's deadline, pops the expired head(s). ``wait_observer`` (metrics) gets the
seconds each request waited.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

__all__ = ["GroupTransferService"]


class GroupTransferService:
    __slots__ = ("_timeout", "_queue", "_timer", "_acked", "_closed", "wait_observer")

    def __init__(self, timeout_ms: int) -> None:
        self._timeout = timeout_ms / 1000
        # (end_offset, submitted_at, deadline, future), in submission order.
        self._queue: deque[tuple[int, float, float, asyncio.Future[bool]]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._acked = 0
        self._closed = False
        self.wait_observer: Callable[[float], None] | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def submit(self, end_offset: int) -> asyncio.Future[bool]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if self._closed:
            fut.set_result(False)
            return fut
        if end_offset <= self._acked:
            fut.set_result(True)
            return fut
        now = loop.time()
        self._queue.append((end_offset, now, now + self._timeout, fut))
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
        now = asyncio.get_running_loop().time() if self.wait_observer is not None else 0.0
        while queue and queue[0][0] <= offset:
            _, started, _, fut = queue.popleft()
            self._complete(fut, True, now - started)
        self._rearm()

    def _complete(self, fut: asyncio.Future[bool], ok: bool, waited: float) -> None:
        if not fut.done():
            fut.set_result(ok)
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
        while queue and queue[0][2] <= now:
            _, started, _, fut = queue.popleft()
            self._complete(fut, False, now - started)
        self._rearm()

    def close(self) -> None:
        """Fail every waiter (the puts answer FLUSH_SLAVE_TIMEOUT); later submits fail at once."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        queue, self._queue = self._queue, deque()
        for _, _, _, fut in queue:
            if not fut.done():
                fut.set_result(False)
