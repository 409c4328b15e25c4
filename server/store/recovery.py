"""Start-up recovery: the commit log is the truth, and nothing derived from it is trusted blindly.

Contract (``StoreRecovery(store).run()`` on a loaded store, off the event loop):

* **Commit log.** Every record of the last three segments is checked (lengths, magic
  code, PHYSICALOFFSET, and the body CRC when ``check_crc_on_recover``, on by default as
  upstream's ``checkCRCOnRecover``), and further back to the checkpoint's oldest offset,
  to the first segment after a crash without a readable checkpoint, and from a segment
  found cut short (padded with zeros by the loader). The first record that is not whole
  ends the log: it and everything after it is cut (zeroed), whatever the checkpoint
  says. A damaged checkpoint reads as absent; one claiming more than the log holds is
  not trusted for the tail.
* **Consume queues.** Each is trimmed to its last valid unit and cut at the new end of
  the log; the first and last unit of every segment must name a record of that queue
  at that queue offset, and every queue with a record in the checked segments must
  reach that record's queue offset. A queue that fails (a zeroed or foreign segment, a
  hole, no unit at all), one whose files are gone while the log still has its
  records, and one whose units stop short of a record re-dispatched for it are
  rebuilt from the commit log (upstream keeps such a queue as it is, or refuses to
  start).
* **Index.** An index file that cannot be one this store wrote is deleted with the
  newer ones; the records after the last file kept are re-indexed (so a deleted index
  is rebuilt whole).
* **Report.** ``RecoveryReport``; when anything was dropped or rebuilt the store logs it
  in one line, ``store.recovery_dropped``, and serves everything before the damage.

Limits: damage older than the checked segments is found only where a consume-queue
check or a re-dispatch reads it (a record that does not decode is skipped with the
rest of its segment, not served); units are not checksummed (as upstream's), so a
queue missing its last units with no record in the checked segments looks shorter,
and garbage written over units between a segment's first and last is served as the
log's bytes at the offsets it names.

Upstream: ``DefaultMessageStore.recover`` / ``recoverConsumeQueue`` /
``recoverTopicQueueTable``, ``CommitLog.recoverNormally`` / ``recoverAbnormally`` /
``checkMessageAndReturnSize``, ``IndexService.load``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.message import MessageDecodeError

from .consume_queue import ConsumeQueueGapError
from .dispatcher import DispatchRequest, dispatch_request_from_record

if TYPE_CHECKING:
    from .message_store import MessageStore

__all__ = ["RecoveryReport", "StoreRecovery"]

log = get_logger("aiorocketmq.store")

_ROLLBACK = 0xC  # MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_MAX_NAMED = 8  # queues named in the report line; the count covers the rest


@dataclasses.dataclass
class RecoveryReport:
    """What one start's recovery found, kept, dropped and rebuilt."""

    last_exit_ok: bool
    end: int = 0
    commit_log_damage: str = ""
    damage_offset: int = -1
    dropped_bytes: int = 0
    dropped_segments: int = 0
    padded_segment: int | None = None
    checkpoint: str = ""
    queue_damage: dict[str, str] = dataclasses.field(default_factory=dict)
    rebuilt_queues: list[str] = dataclasses.field(default_factory=list)
    index_damage: str = ""
    dispatched_from: int = 0
    redispatched: int = 0

    @property
    def damaged(self) -> bool:
        return bool(self.commit_log_damage or self.dropped_bytes or self.dropped_segments
                    or self.padded_segment is not None or self.checkpoint or self.rebuilt_queues
                    or self.index_damage)

    def log_line(self) -> None:
        """The one line that says what this start dropped and rebuilt (nothing when clean)."""
        if not self.damaged:
            return
        named = self.rebuilt_queues[:_MAX_NAMED]
        log.warn(
            "store.recovery_dropped",
            commit_log=(f"{self.commit_log_damage} at {self.damage_offset}"
                        if self.commit_log_damage else "intact"),
            log_end=self.end, dropped_bytes=self.dropped_bytes,
            dropped_segments=self.dropped_segments,
            padded_segment=self.padded_segment, checkpoint=self.checkpoint or "ok",
            rebuilt_queues=len(self.rebuilt_queues),
            queues=",".join(named) + (",..." if len(self.rebuilt_queues) > len(named) else ""),
            index=self.index_damage or "ok", last_exit_ok=self.last_exit_ok,
        )


def _queue_name(key: tuple[str, int]) -> str:
    return f"{key[0]}:{key[1]}"


class StoreRecovery:
    """One recovery pass over a loaded store (its files mapped, nothing checked yet)."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.commit_log = store.commit_log
        self.table = store.consume_queue_table
        self.index = store.index
        assert store.checkpoint is not None
        self.checkpoint = store.checkpoint
        self.dispatcher = store.dispatcher
        self.report = RecoveryReport(last_exit_ok=store.last_exit_ok)
        self.broken: set[tuple[str, int]] = set()

    # ------------------------------------------------------------------ the pass

    def run(self) -> RecoveryReport:
        """Recover; the caller has handled the store without commit-log segments."""
        store, cl, cp, report = self.store, self.commit_log, self.checkpoint, self.report
        for key, cq in self.table.items():
            why = cq.recover()
            if why:
                self._mark_broken(key, why)
        files = cl.mfq.files
        end_of_files = files[-1].file_from_offset + cl.file_size
        cp_ok = cp.loaded_ok
        if not cp_ok and os.path.exists(cp.path):
            report.checkpoint = "unreadable, ignored"
        elif cp_ok and cp.physic_offset > end_of_files:
            report.checkpoint = f"claims offset {cp.physic_offset} beyond the log, ignored"
            cp_ok = False
        check_from = files[max(len(files) - 3, 0)].file_from_offset
        if cp_ok:
            oldest = cl.mfq.find_mapped_file_by_offset(
                min(cp.physic_offset, cp.logics_offset, cp.index_offset))
            if oldest is not None:
                check_from = min(check_from, oldest.file_from_offset)
        elif not store.last_exit_ok or report.checkpoint:
            check_from = files[0].file_from_offset
        report.padded_segment = cl.mfq.padded_from
        if cl.mfq.padded_from is not None:
            check_from = min(check_from, cl.mfq.padded_from)
        seen: dict[tuple[bytes, int], int] = {}
        found = cl.recover(check_from=check_from, zero_tail=not store.last_exit_ok, seen=seen)
        process = report.end = found.end
        report.commit_log_damage = found.damage
        report.damage_offset = process if found.damage else -1
        report.dropped_bytes = found.dropped_bytes
        report.dropped_segments = found.dropped_segments
        if cp_ok and not found.damage and cp.physic_offset > process:
            # The log ends cleanly before what the checkpoint calls durable: trust it no further
            # than the records just checked.
            report.checkpoint = f"claims offset {cp.physic_offset} beyond the log end {process}"

        for cq in self.table.values():
            if cq.max_physic_offset > process:
                cq.truncate_dirty_logic_files(process)
        for (topic_b, queue_id), queue_offset in seen.items():
            key = (topic_b.decode("utf-8", "replace"), queue_id)
            found_cq = self.table.get(key)
            if found_cq is None:
                self._mark_broken(key, f"no files, the log has unit {queue_offset}")
            elif found_cq.max_offset <= queue_offset:
                self._mark_broken(key, f"units end at {found_cq.max_offset}, the log has unit {queue_offset}")
        min_phy = cl.min_offset
        for key, cq in self.table.items():
            if key not in self.broken:
                why = cq.check_against_log(self._record_at, min_phy)
                if why:
                    self._mark_broken(key, why)
        for key in self.broken:
            self._drop_queue(key)
        loaded = set(self.table)

        logics_from = min(cp.logics_offset, process) if cp_ok else min_phy
        if report.checkpoint:
            logics_from = min(logics_from, check_from)
        dispatch_from = logics_from
        if self.index is not None:
            report.index_damage = self.index.damage
            last_indexed = self.index.recover(min(cp.index_offset, process) if cp_ok else 0)
            dispatch_from = min(dispatch_from, last_indexed if last_indexed >= 0 else min_phy)
        dispatch_from = max(dispatch_from, min_phy)
        report.dispatched_from = dispatch_from
        report.redispatched = self._redispatch(dispatch_from, process, loaded)
        if self.broken:
            self._rebuild_queues(min_phy, process)
        return report

    # ------------------------------------------------------------------ consume queues

    def _record_at(self, offset: int, size: int) -> tuple[str, int, int] | None:
        """(topic, queueId, queueOffset) of the whole record of ``size`` bytes at ``offset``."""
        view = self.commit_log.get_message(offset, size) if size > 0 else None
        if view is None:
            return None
        try:
            if int.from_bytes(view[:4], "big", signed=True) != size:
                return None
            req = dispatch_request_from_record(view, 0, self.store.delay_levels)
        except MessageDecodeError:
            return None
        finally:
            view.release()
        return req.topic, req.queue_id, req.consume_queue_offset

    def _mark_broken(self, key: tuple[str, int], why: str) -> None:
        if key not in self.broken:
            self.broken.add(key)
            self.report.queue_damage[_queue_name(key)] = why
            log.info("store.consume_queue_damaged", queue=_queue_name(key), reason=why)

    def _drop_queue(self, key: tuple[str, int]) -> None:
        cq = self.table.pop(key, None)
        if cq is not None:
            cq.destroy()

    def _redispatch(self, start: int, end: int, loaded: set[tuple[str, int]]) -> int:
        """Re-dispatch ``[start, end)``; queues found short on the way join ``broken``."""
        dispatcher = self.dispatcher
        dispatcher.dispatched_offset = start
        count = 0
        for req in self.commit_log.iter_dispatch_requests(start, end):
            count += 1
            key = (req.topic, req.queue_id)
            if req.has_queue_unit and key not in self.broken and key not in self.table \
                    and key not in loaded and req.consume_queue_offset > 0:
                # A queue without files whose earlier records are in the log (or were cleaned:
                # the rebuild starts where the log does, which tells the two apart).
                self._mark_broken(key, f"no files, log has unit {req.consume_queue_offset}")
            if key in self.broken or not req.has_queue_unit:
                self._index_only(req)
                continue
            try:
                dispatcher.dispatch(req)
            except ConsumeQueueGapError as exc:
                self._mark_broken(key, str(exc))
                self._drop_queue(key)
                self._index_only(req)
        dispatcher.dispatched_offset = max(dispatcher.dispatched_offset, end)
        return count

    def _index_only(self, req: DispatchRequest) -> None:
        if self.index is not None and req.sys_flag & 0xC != _ROLLBACK:
            self.index.build_index(req.topic, req.keys, req.uniq_key, req.commit_log_offset,
                                   req.store_timestamp)
        end = req.commit_log_offset + req.msg_size
        if end > self.dispatcher.dispatched_offset:
            self.dispatcher.dispatched_offset = end
            self.dispatcher.dispatched_timestamp = req.store_timestamp

    def _rebuild_queues(self, start: int, end: int) -> None:
        """Write the units of every broken queue anew from the whole commit log."""
        for key in self.broken:
            self._drop_queue(key)
        failed: set[tuple[str, int]] = set()
        for req in self.commit_log.iter_dispatch_requests(start, end):
            key = (req.topic, req.queue_id)
            if key not in self.broken or key in failed or not req.has_queue_unit:
                continue
            cq = self.store.find_or_create_consume_queue(*key)
            try:
                cq.put_unit(req.commit_log_offset, req.msg_size, req.tags_code,
                            req.consume_queue_offset)
            except ConsumeQueueGapError as exc:
                # The log itself misses records of it (a segment skipped as undecodable):
                # keep the units up to the hole.
                failed.add(key)
                log.warn("store.consume_queue_rebuild_stopped", queue=_queue_name(key), error=str(exc))
        self.report.rebuilt_queues = sorted(_queue_name(k) for k in self.broken)
