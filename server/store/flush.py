"""Making appended data durable without blocking the event loop.

Contract:

* ASYNC_FLUSH (``FlushRealTimeService``): a routine wakes every
  ``flush_interval_commit_log_ms`` and flushes the commit log on a worker thread when at
  least ``flush_commit_log_least_pages`` pages are dirty (everything, every
  ``flush_commit_log_thorough_interval_ms``). Puts never wait for it.
* SYNC_FLUSH (``GroupCommitService``): ``request_flush(end_offset)`` returns a future
  that becomes True once an fsync covering ``end_offset`` has completed, or False after
  ``sync_flush_timeout_ms`` (the put then answers FLUSH_DISK_TIMEOUT) or if the flusher
  died. Requests that arrive while an fsync runs are served together by the next one,
  so one fsync serves every put that was waiting (group commit).
* The logics routine (``FlushConsumeQueueService``) flushes every consume queue and
  the index each ``flush_interval_consume_queue_ms`` and then writes the checkpoint,
  recording only what was dispatched *before* that flush began.
* ``stop()`` cancels the routines, then flushes everything and writes a final
  checkpoint; pending group-commit futures are completed by that last flush.

A routine that fails (an I/O error from msync/fsync) logs once, fails every waiting
put, and stays dead; ``MessageStore`` reports it through ``flush_error``.

Upstream: ``CommitLog.FlushRealTimeService``, ``CommitLog.GroupCommitService``,
``DefaultMessageStore.FlushConsumeQueueService``, ``StoreCheckpoint``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.routine import cancel_and_wait

from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .config import MessageStoreConfig
from .consume_queue import ConsumeQueue
from .dispatcher import Dispatcher
from .index import IndexService

__all__ = ["FlushService"]

log = get_logger("aiorocketmq.store")


class _GroupCommitRequest:
    __slots__ = ("end_offset", "future", "timer")

    def __init__(self, end_offset: int, future: asyncio.Future[bool], timer: asyncio.TimerHandle) -> None:
        self.end_offset = end_offset
        self.future = future
        self.timer = timer


def _complete(fut: asyncio.Future[bool], ok: bool) -> None:
    if not fut.done():
        fut.set_result(ok)


class FlushService:
    """Owns the flush routines of one store (created in ``start``, awaited in ``stop``)."""

    def __init__(self, config: MessageStoreConfig, commit_log: CommitLog,
                 queues: Callable[[], Iterable[ConsumeQueue]], index: IndexService | None,
                 dispatcher: Dispatcher, checkpoint: StoreCheckpoint, executor: Executor) -> None:
        self._config = config
        self._commit_log = commit_log
        self._queues = queues
        self._index = index
        self._dispatcher = dispatcher
        self._checkpoint = checkpoint
        self._executor = executor
        self._pending: list[_GroupCommitRequest] = []
        self._wakeup = asyncio.Event()
        self._commit_task: asyncio.Task[None] | None = None
        self._logics_task: asyncio.Task[None] | None = None
        self.flush_error: BaseException | None = None
        self.fsync_count = 0  # commit-log flushes that wrote something (observability, tests)

    # -- lifecycle --

    def start(self) -> None:
        if self._config.is_sync_flush:
            self._commit_task = asyncio.create_task(self._group_commit_routine(), name="store-group-commit")
        else:
            self._commit_task = asyncio.create_task(self._flush_real_time_routine(), name="store-flush")
        self._logics_task = asyncio.create_task(self._flush_logics_routine(), name="store-flush-logics")
        for task in (self._commit_task, self._logics_task):
            task.add_done_callback(self._on_routine_done)

    def _on_routine_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.flush_error = exc
            log.error("store.flush_routine_failed", routine=task.get_name(), error=repr(exc))
            self._fail_pending()

    def _fail_pending(self) -> None:
        pending, self._pending = self._pending, []
        for req in pending:
            req.timer.cancel()
            _complete(req.future, False)

    async def stop(self) -> None:
        """Stop the routines, flush everything, write the final checkpoint."""
        await cancel_and_wait(task for task in (self._commit_task, self._logics_task)
                              if task is not None and not task.done())
        loop = asyncio.get_running_loop()
        flushed = await loop.run_in_executor(self._executor, self._commit_log.mfq.flush, 0)
        self._complete_up_to(flushed)
        self._fail_pending()
        await self._flush_logics_once()

    # -- commit log --

    def request_flush(self, end_offset: int) -> asyncio.Future[bool]:
        """SYNC_FLUSH: a future that is True once ``end_offset`` is durable, False on timeout."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if self.flush_error is not None or self._commit_task is None or self._commit_task.done():
            fut.set_result(False)
            return fut
        timer = loop.call_later(self._config.sync_flush_timeout_ms / 1000, _complete, fut, False)
        fut.add_done_callback(lambda _f: timer.cancel())
        self._pending.append(_GroupCommitRequest(end_offset, fut, timer))
        self._wakeup.set()
        return fut

    def _complete_up_to(self, flushed: int) -> None:
        keep = []
        for req in self._pending:
            if req.end_offset <= flushed:
                req.timer.cancel()
                _complete(req.future, True)
            elif not req.future.done():
                keep.append(req)
        self._pending = keep

    async def _group_commit_routine(self) -> None:
        loop = asyncio.get_running_loop()
        flush = self._commit_log.mfq.flush
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if not self._pending:
                continue
            # Everything appended so far is covered by this one fsync, including puts
            # that queue up while it runs; they are answered by the next round.
            flushed = await loop.run_in_executor(self._executor, flush, 0)
            self.fsync_count += 1
            self._complete_up_to(flushed)
            if self._pending:
                self._wakeup.set()

    async def _flush_real_time_routine(self) -> None:
        loop = asyncio.get_running_loop()
        flush = self._commit_log.mfq.flush
        interval = self._config.flush_interval_commit_log_ms / 1000
        thorough_ms = self._config.flush_commit_log_thorough_interval_ms
        least = self._config.flush_commit_log_least_pages
        last_thorough = time.monotonic() * 1000
        while True:
            await asyncio.sleep(interval)  # a period, not a synchronisation
            now = time.monotonic() * 1000
            pages = least
            if now - last_thorough >= thorough_ms:
                last_thorough = now
                pages = 0
            before = self._commit_log.mfq.flushed_where
            after = await loop.run_in_executor(self._executor, flush, pages)
            if after != before:
                self.fsync_count += 1

    # -- consume queues, index, checkpoint --

    def _flush_logics_blocking(self, physic_offset: int, physic_ts: int, dispatched: int,
                               dispatched_ts: int) -> None:
        for cq in list(self._queues()):
            cq.flush(0)
        if self._index is not None:
            self._index.flush()
        cp = self._checkpoint
        cp.physic_offset = physic_offset
        cp.physic_msg_timestamp = physic_ts
        cp.logics_offset = dispatched
        cp.logics_msg_timestamp = dispatched_ts
        cp.index_offset = dispatched
        cp.index_msg_timestamp = dispatched_ts
        cp.flush()

    async def _flush_logics_once(self) -> None:
        # Snapshot before flushing: what was dispatched by now is what the flush covers.
        dispatched = self._dispatcher.dispatched_offset
        dispatched_ts = self._dispatcher.dispatched_timestamp
        physic = min(self._commit_log.mfq.flushed_where, self._commit_log.max_offset)
        if self._config.is_slave:
            # A slave's log may end inside a record still being transferred; recovery must
            # start on a record boundary, and the dispatched offset always is one.
            physic = min(physic, dispatched)
        physic_ts = dispatched_ts if physic >= dispatched else self._checkpoint.physic_msg_timestamp
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._flush_logics_blocking, physic, physic_ts,
                                   dispatched, dispatched_ts)

    async def _flush_logics_routine(self) -> None:
        interval = self._config.flush_interval_consume_queue_ms / 1000
        while True:
            await asyncio.sleep(interval)  # a period, not a synchronisation
            await self._flush_logics_once()
