"""``StoreCleaner``: the store's retention (upstream ``DefaultMessageStore.CleanCommitLogService``
and ``DefaultMessageStore.CleanConsumeQueueService``).

Contract:

* One per ``MessageStore`` (``store.cleaner``), started and stopped by the store: ``start()``
  runs the clean routine, one pass every ``clean_resource_interval_ms``, each pass the
  store's ``clean_once()`` (so a store subclass that overrides a step, the DLedger store's
  commit-log step, is honoured); ``await stop()`` cancels it and waits for it.
* ``delete_expired_commit_log_files`` (``CleanCommitLogService.deleteExpiredFiles``):
  commit-log segments older than ``file_reserved_time`` hours are deleted at the
  ``delete_when`` hour(s) (``;``-separated), at once when the commit-log partition is over
  ``disk_max_used_ratio`` (or its usage cannot be read), or for the next 20 passes after
  ``execute_delete_files_manually()``; past ``disk_space_clean_forcibly_ratio`` with
  ``clean_file_forcibly_enable`` they go whatever their age. The last segment is never
  deleted. Returns the number deleted.
* ``update_disk_state`` (part of ``isSpaceToDelete``): every pass reads the partition's
  usage; over ``disk_space_warning_level_ratio`` ``disk_full`` is set and the store refuses
  puts (SERVICE_NOT_AVAILABLE) until a later pass finds it below again.
* ``clean_consume_queues`` (``CleanConsumeQueueService.deleteExpiredFiles``): once the log's
  minimum offset has moved, consume-queue and index files wholly below it are deleted
  and the queues' minimum offsets corrected.
* Files are detached on the event loop and unmapped/unlinked on the store's worker
  threads; nothing here blocks the loop on the disk.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiorocketmq.logs import get_logger

from .mapped_file import MappedFile

if TYPE_CHECKING:
    from .message_store import MessageStore

__all__ = ["StoreCleaner", "disk_used_ratio", "is_it_time_to_do"]

log = get_logger("aiorocketmq.store")


def disk_used_ratio(path: str) -> float:
    """``UtilAll.getDiskPartitionSpaceUsedPercent`` (4.9.7): used / (used + usable to this
    user), rounded up to hundredths (``0.37``); -1 on error. Blocks not counted as usable
    (root's reserve) are left out of both, as stock leaves them."""
    try:
        os.makedirs(path, exist_ok=True)
        st = os.statvfs(path)
    except OSError:
        return -1.0
    if st.f_blocks == 0:
        return -1.0
    used = st.f_blocks - st.f_bfree
    entire = used + st.f_bavail
    if entire <= 0:
        return -1.0
    return -(-used * 100 // entire) / 100.0


def is_it_time_to_do(when: str, hour: int) -> bool:
    """``UtilAll.isItTimeToDo``: ``when`` is hours separated by ``;``."""
    for item in when.split(";"):
        item = item.strip()
        if item.isdigit() and int(item) == hour:
            return True
    return False


class StoreCleaner:
    """A store's retention. See the module docstring for the contract."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self._task: asyncio.Task[None] | None = None
        # Over disk_space_warning_level_ratio at the last pass: the store refuses puts.
        self.disk_full = False
        self.manual_delete_times = 0
        # The log's minimum offset the consume queues and the index were last cleaned to.
        self.last_physical_min_offset = 0

    # ------------------------------------------------------------------ routine

    def start(self) -> None:
        self._task = asyncio.create_task(self._routine(), name="store-clean")
        self._task.add_done_callback(self._on_done)

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("store.clean_routine_failed", error=repr(task.exception()))

    async def _routine(self) -> None:
        interval = self._store.config.clean_resource_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)  # a period, not a synchronisation
            await self._store.clean_once()

    # ------------------------------------------------------------------ commit log

    def execute_delete_files_manually(self) -> None:
        """Delete expired files on the next passes regardless of the hour (``executeDeleteFilesManually``)."""
        self.manual_delete_times = 20

    def update_disk_state(self) -> tuple[bool, bool]:
        """(space_full, clean_immediately) from the commit-log partition's usage."""
        cfg = self._store.config
        ratio = self._store.commit_log_disk_ratio()
        full = ratio > cfg.disk_space_warning_level_ratio
        if full != self.disk_full:
            log.warn("store.disk_full" if full else "store.disk_ok", ratio=ratio)
        self.disk_full = full
        clean_immediately = ratio > cfg.disk_space_clean_forcibly_ratio
        space_full = ratio < 0 or ratio > cfg.disk_max_used_ratio
        return space_full, clean_immediately

    async def delete_expired_commit_log_files(self, *, now_ms: int | None = None) -> int:
        """``CleanCommitLogService.deleteExpiredFiles``: delete old commit-log segments when due."""
        space_full, clean_immediately = self.update_disk_state()
        store = self._store
        cfg = store.config
        now = int(time.time() * 1000) if now_ms is None else now_ms
        time_up = is_it_time_to_do(cfg.delete_when, time.localtime(now / 1000).tm_hour)
        manual = self.manual_delete_times > 0
        if not (time_up or space_full or manual):
            return 0
        if manual:
            self.manual_delete_times -= 1
        at_once = cfg.clean_file_forcibly_enable and clean_immediately
        files = store.commit_log.mfq.detach_expired_by_time(
            cfg.file_reserved_time * 3600 * 1000, now, at_once)
        await self.destroy_off_loop(files)
        if files:
            log.info("store.commit_log_files_deleted", count=len(files),
                     min_phy_offset=store.commit_log.min_offset)
        return len(files)

    # ------------------------------------------------------------------ queues and index

    async def clean_consume_queues(self) -> None:
        """``CleanConsumeQueueService``: drop queue and index files below the log's minimum."""
        store = self._store
        min_phy = store.commit_log.min_offset
        if min_phy <= self.last_physical_min_offset:
            return
        self.last_physical_min_offset = min_phy
        doomed: list[Any] = []
        for cq in store.consume_queue_table.values():
            doomed.extend(cq.detach_expired(min_phy))
        if store.index is not None:
            doomed.extend(store.index.detach_expired(min_phy))
        await self.destroy_off_loop(doomed)

    async def destroy_off_loop(self, files: Sequence[MappedFile | Any]) -> None:
        """Unmap and unlink detached files on the store's worker threads."""
        if not files:
            return

        def destroy_all() -> None:
            for f in files:
                f.destroy()

        executor = self._store._executor
        assert executor is not None
        await asyncio.get_running_loop().run_in_executor(executor, destroy_all)
