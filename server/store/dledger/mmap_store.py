"""``DLedgerMmapFileStore``: the durable ``RaftLog``, in DLedger's own files.

Layout (``<storePathRootDir>/dledger-<selfId>/``, what stock 4.9.7 writes)::

    data/<20-digit offset>    entries (entry.py), ``mappedFileSizeCommitLog`` per segment
    index/<20-digit offset>   32-byte units, unit i at i * 32, 160 MiB per segment
    checkpoint                ``endIndex=<n>`` / ``committedIndex=<n>`` (Java properties)
    currterm                  the member's term and vote (member_state.py)

Contract:

* ``load_and_recover()`` (a worker thread, before anything else): maps the segments and
  walks the entries from the third-to-last data segment on (from the first when that one
  does not start with an entry its index unit agrees with), checking each header (magic,
  sizes, ``pos`` equal to its offset, consecutive indexes, non-decreasing terms); the
  first entry that fails ends the log, and everything after it is cut (the rest of that
  segment zeroed, later segments deleted). Index units that disagree with the data are
  rewritten from it. ``committedIndex`` from the checkpoint, clamped to the log end, is the
  starting commit point. Raises ``LogError`` when data and index files cannot be
  reconciled (segments out of order) and ``ValueError`` for segments of another size.
* ``append`` writes the entry then its index unit (the event loop, a memcpy into the
  mappings; ``OSError`` when the disk is full, before anything is written), with the
  filler rule of entry.py at a segment's end; ``truncate_after`` cuts both files (zeroing
  the cut data) and never cuts below the committed index.
* ``get`` decodes an entry; ``entry_view(pos, size)`` and the data ``mfq`` give zero-copy
  reads to the commit log built on top (dledger/commit_log.py).
* ``flush()`` (a worker thread) makes data and index durable; ``persist_checkpoint()``
  writes the checkpoint (the flusher calls both, as upstream's ``FlushDataService``
  every ``flushFileInterval`` / ``checkPointInterval``).
* ``detach_expired(expired_ms, now_ms, force, keep_pos)`` (retention, upstream
  ``CleanSpaceService``: ``deleteExpiredFileByTime`` then ``reviseLedgerBeginIndex``):
  takes out (and returns) the leading data segments last written ``expired_ms`` or more ago (any age
  when ``force``), never the last one nor one reaching ``keep_pos`` (the caller keeps the
  committed entry and everything not yet dispatched), then the index segments wholly
  below the new first entry; ``begin_index`` becomes that entry's index and ``data``'s
  ``min_offset`` its position. The caller destroys the returned files off the loop.
  Recovery takes the log's begin from the first segment's first entry. ``reset_to(entry)``
  begins an empty or outdated log at a leader's first entry (a follower that fell behind
  the leader's retention).

Upstream: ``store/file/DLedgerMmapFileStore.java`` (``recover``, ``appendAsLeader``,
``appendAsFollower``, ``truncate``, ``persistCheckPoint``), ``MmapFileList``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.atomic_file import write_file_atomic
from aiorocketmq.protocol.dledger.entry import (
    BLANK_MAGIC_CODE,
    BODY_OFFSET,
    CURRENT_MAGIC,
    HEADER,
    INDEX_UNIT,
    INDEX_UNIT_SIZE,
    MIN_BLANK_LEN,
    DLedgerEntry,
    EntryDecodeError,
    decode_entry,
    encode_entry,
    encode_index_unit,
    next_entry_pos,
)
from aiorocketmq.server.store.mapped_file import MappedFile, MappedFileQueue

from .log import LogError

__all__ = ["DLedgerMmapFileStore", "INDEX_FILE_SIZE", "CHECKPOINT_FILE"]

log = get_logger("aiorocketmq.store.dledger")

INDEX_FILE_SIZE = INDEX_UNIT_SIZE * 5 * 1024 * 1024  # DLedgerConfig.mappedFileSizeForEntryIndex
CHECKPOINT_FILE = "checkpoint"
_END_INDEX_KEY = "endIndex"
_COMMITTED_INDEX_KEY = "committedIndex"


def _read_properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip()
        if out:
            return out
    return out


def _zero(mf: MappedFile, start: int, end: int) -> None:
    """Zero ``[start, end)`` of a segment, a chunk at a time."""
    chunk = 1024 * 1024
    while start < end:
        n = min(chunk, end - start)
        mf.mm[start:start + n] = bytes(n)
        start += n


class DLedgerMmapFileStore:
    """Entries and their index on mapped segments (module docstring)."""

    def __init__(self, base_dir: str, data_file_size: int, *,
                 data_dir: str | None = None, index_file_size: int = INDEX_FILE_SIZE) -> None:
        self.base_dir = base_dir
        self.file_size = data_file_size
        self.data = MappedFileQueue(data_dir or os.path.join(base_dir, "data"), data_file_size)
        self.index = MappedFileQueue(os.path.join(base_dir, "index"), index_file_size)
        self._begin = -1
        self._end = -1
        self._end_term = -1
        self._end_pos = 0
        self._committed = -1
        self._committed_pos = 0
        self.checkpoint_path = Path(base_dir) / CHECKPOINT_FILE
        self.recovered_from_index = -1

    # ------------------------------------------------------------------ RaftLog

    @property
    def begin_index(self) -> int:
        return self._begin

    @property
    def end_index(self) -> int:
        return self._end

    @property
    def end_term(self) -> int:
        return self._end_term

    @property
    def end_pos(self) -> int:
        return self._end_pos

    @property
    def committed_index(self) -> int:
        return self._committed

    @property
    def committed_pos(self) -> int:
        return self._committed_pos

    def _unit(self, index: int) -> tuple[int, int, int, int, int] | None:
        """(magic, pos, size, index, term) of ``index``'s unit, or None when not written."""
        off = index * INDEX_UNIT_SIZE
        mf = self.index.find_mapped_file_by_offset(off)
        if mf is None:
            return None
        rel = off - mf.file_from_offset
        if rel + INDEX_UNIT_SIZE > mf.wrote_position:
            return None
        return INDEX_UNIT.unpack_from(mf.mm, rel)

    def pos_size(self, index: int) -> tuple[int, int] | None:
        if not self._begin <= index <= self._end or index < 0:
            return None
        unit = self._unit(index)
        if unit is None:
            return None
        return unit[1], unit[2]

    def get(self, index: int) -> DLedgerEntry | None:
        found = self.pos_size(index)
        if found is None:
            return None
        pos, size = found
        mf = self.data.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel + size > mf.wrote_position:
            return None
        try:
            return decode_entry(mf.mm, rel)
        except EntryDecodeError:
            return None

    def term_at(self, index: int) -> int:
        unit = self._unit(index) if self._begin <= index <= self._end and index >= 0 else None
        return unit[4] if unit is not None else -1

    def next_pos(self, size: int) -> int:
        return next_entry_pos(self._end_pos, size, self.file_size)

    def append(self, entry: DLedgerEntry) -> None:
        if entry.index != self._end + 1:
            raise LogError(f"append index {entry.index}, log ends at {self._end}")
        if entry.magic != CURRENT_MAGIC:
            raise LogError(f"append magic {entry.magic}")
        size = entry.size
        pos = self.next_pos(size)
        if entry.pos != pos:
            raise LogError(f"append pos {entry.pos}, the data ends at {self._end_pos} (next {pos})")
        if size > self.file_size - MIN_BLANK_LEN:
            raise LogError(f"entry of {size} bytes does not fit a {self.file_size}-byte segment")
        data = encode_entry(entry)
        unit = encode_index_unit(pos, size, entry.index, entry.term)
        # Create (and reserve) every segment first: a full disk fails before any write.
        self.data.reserve(pos + size, self._end_pos)
        unit_off = entry.index * INDEX_UNIT_SIZE
        self.index.reserve(unit_off + INDEX_UNIT_SIZE, unit_off)
        mf = self._data_segment(pos)
        mf.write_at(pos - mf.file_from_offset, data)
        mf.wrote_position = pos - mf.file_from_offset + size
        mf.last_modified_ms = int(time.time() * 1000)  # retention's age of the segment
        imf = self.index.get_last_mapped_file(unit_off)
        assert imf is not None and imf.file_from_offset + imf.wrote_position == unit_off, \
            f"index unit {entry.index} at {unit_off}, index ends at {self.index.max_offset}"
        imf.append(unit)
        self._end = entry.index
        self._end_term = entry.term
        self._end_pos = pos + size
        if self._begin < 0:
            self._begin = entry.index

    def _data_segment(self, pos: int) -> MappedFile:
        """The segment ``pos`` is in, ending the current one with a filler when ``pos`` is
        in the next one."""
        mfq = self.data
        last = mfq.last
        if last is not None and pos >= last.file_from_offset + self.file_size:
            free = last.file_size - last.wrote_position
            if free >= MIN_BLANK_LEN:
                last.write_at(last.wrote_position, HEADER.pack(
                    BLANK_MAGIC_CODE, free, 0, 0, 0, 0, 0, 0, 0)[:8])
            last.wrote_position = last.file_size
        mf = mfq.get_last_mapped_file(pos)
        assert mf is not None and mf.file_from_offset <= pos < mf.file_from_offset + self.file_size
        return mf

    def truncate_after(self, index: int) -> None:
        if index >= self._end:
            return
        if index < self._committed:
            raise LogError(f"truncating after {index} would cut committed entry {self._committed}")
        if index < 0:
            data_end = self._begin_pos()
        else:
            found = self.pos_size(index)
            if found is None:
                raise LogError(f"no entry {index} to truncate after")
            data_end = found[0] + found[1]
        self._cut_data(data_end)
        self._cut_index((index + 1) * INDEX_UNIT_SIZE)
        self._end = index
        self._end_pos = data_end
        self._end_term = self.term_at(index) if index >= 0 else -1
        if index < self._begin:
            self._begin = -1

    def _begin_pos(self) -> int:
        first = self.data.first
        return first.file_from_offset if first is not None else 0

    def _cut_data(self, end: int) -> None:
        """Drop the data from ``end`` on, zeroing what was written there."""
        mf = self.data.find_mapped_file_by_offset(end)
        if mf is not None:
            _zero(mf, end - mf.file_from_offset, mf.wrote_position)
        self.data.truncate_dirty_files(end, zero_tail=False)

    def _cut_index(self, end: int) -> None:
        old_end = (self._end + 1) * INDEX_UNIT_SIZE
        mf = self.index.find_mapped_file_by_offset(end)
        if mf is not None:
            _zero(mf, end - mf.file_from_offset, min(mf.wrote_position, old_end - mf.file_from_offset))
        self.index.truncate_dirty_files(end, zero_tail=False)

    def detach_expired(self, expired_ms: int, now_ms: int, force: bool, keep_pos: int,
                       max_batch: int = 10) -> tuple[list[MappedFile], list[MappedFile]]:
        """Take out the expired leading segments (module docstring): (data, index) segments,
        for the caller to destroy."""
        files = self.data.files
        n = 0
        for mf in files[:-1]:
            if n >= max_batch or mf.file_from_offset + self.file_size > keep_pos:
                break
            if not (force or now_ms >= mf.last_modified_ms + expired_ms):
                break  # no hole in the middle
            n += 1
        if n == 0:
            return [], []
        begin = self._first_entry_index(files[n])
        if begin < 0 or begin > self._end:
            return [], []  # the segment kept first holds no entry to begin with
        data = files[:n]
        del files[:n]
        self.data.flushed_where = max(self.data.flushed_where, files[0].file_from_offset)
        index_begin = begin * INDEX_UNIT_SIZE
        ifiles = self.index.files
        k = 0
        while k < len(ifiles) - 1 and ifiles[k].file_from_offset + self.index.file_size <= index_begin:
            k += 1
        index = ifiles[:k]
        del ifiles[:k]
        self.index.flushed_where = max(self.index.flushed_where, ifiles[0].file_from_offset)
        self._begin = begin
        log.info("dledger.segments_deleted", dir=self.base_dir, count=n, begin=begin,
                 min_offset=files[0].file_from_offset)
        return data, index

    def reset_to(self, entry: DLedgerEntry) -> None:
        """Drop the whole log and begin it anew with ``entry`` (a follower whose log ends
        before the leader's first entry, the leader having deleted what lies between:
        upstream ``truncate`` rebuilding the files at the entry's position). ``entry.pos``
        must start a data segment (a leader's first entry always does).

        Raises:
            LogError: ``entry`` not past this log's end, or not at a segment's start.
        """
        if entry.index <= self._end or entry.pos % self.file_size or entry.pos < 0:
            raise LogError(f"cannot begin the log at entry {entry.index} (pos {entry.pos}), "
                           f"the log ends at {self._end}")
        for mfq in (self.data, self.index):
            for mf in (*mfq.files, *mfq.spares):
                mf.destroy()
            mfq.files = []
            mfq.spares = []
        unit_off = entry.index * INDEX_UNIT_SIZE
        self.index.reserve(unit_off + INDEX_UNIT_SIZE, unit_off)
        imf = self.index.get_last_mapped_file(unit_off)
        assert imf is not None
        imf.wrote_position = imf.flushed_position = unit_off - imf.file_from_offset
        self.index.flushed_where = unit_off
        self.data.flushed_where = entry.pos
        self._begin = -1
        self._end = entry.index - 1
        self._end_term = -1
        self._end_pos = entry.pos
        self._committed = -1
        self._committed_pos = 0
        log.warn("dledger.log_reset", dir=self.base_dir, begin=entry.index, pos=entry.pos)
        self.append(entry)

    def set_committed(self, index: int) -> None:
        index = min(index, self._end)
        if index <= self._committed:
            return
        found = self.pos_size(index)
        if found is None:
            return
        self._committed = index
        self._committed_pos = found[0] + found[1]

    # ------------------------------------------------------------------ recovery

    def load_and_recover(self) -> None:
        """Map and check the files (module docstring). A worker thread, before serving."""
        self.data.load()
        self.index.load()
        files = self.data.files
        if not files:
            self.index.truncate_dirty_files(0)
            self._end_pos = 0
            return
        for i in range(1, len(files)):
            if files[i].file_from_offset - files[i - 1].file_from_offset != self.file_size:
                raise LogError(f"data segments out of order at {files[i].path}")
        start = max(len(files) - 3, 0)
        first_index = -1
        while True:
            first_index = self._first_entry_index(files[start])
            if first_index >= 0 or start == 0:
                break
            start -= 1
        pos = files[start].file_from_offset
        last_index = first_index - 1 if first_index >= 0 else -1
        last_term = -1
        rewrite_index = first_index < 0
        expect_index = first_index if first_index >= 0 else self._header_index(files[start])
        if rewrite_index:
            self.index.truncate_dirty_files(0)
        while True:
            mf = self.data.find_mapped_file_by_offset(pos)
            if mf is None:
                break
            rel = pos - mf.file_from_offset
            if rel + 8 > self.file_size:
                pos = mf.file_from_offset + self.file_size
                continue
            magic, size = HEADER.unpack_from(mf.mm, rel)[:2]
            if magic == BLANK_MAGIC_CODE:
                pos = mf.file_from_offset + self.file_size
                continue
            if rel + BODY_OFFSET > self.file_size:
                break
            _, size, e_index, e_term, e_pos, _, _, _, body_size = HEADER.unpack_from(mf.mm, rel)
            if (magic != CURRENT_MAGIC or size != BODY_OFFSET + body_size or body_size < 0
                    or rel + size > self.file_size or e_pos != pos or e_index != expect_index
                    or e_term < last_term):
                break
            if not rewrite_index:
                unit = self._unit(e_index)
                if unit != (magic, pos, size, e_index, e_term):
                    log.warn("dledger.index_rebuilt", from_index=e_index)
                    self.index.truncate_dirty_files(e_index * INDEX_UNIT_SIZE)
                    rewrite_index = True
            if rewrite_index:
                off = e_index * INDEX_UNIT_SIZE
                self.index.reserve(off + INDEX_UNIT_SIZE, off)
                imf = self.index.get_last_mapped_file(off)
                assert imf is not None
                if imf.wrote_position == 0 and imf.file_from_offset < off:
                    imf.wrote_position = off - imf.file_from_offset  # a log not begun at 0
                imf.append(encode_index_unit(pos, size, e_index, e_term, magic))
            last_index, last_term = e_index, e_term
            expect_index = e_index + 1
            pos += size
        self.recovered_from_index = first_index
        # Cut (and zero) what follows the last good entry.
        end = pos if last_index >= 0 else files[start].file_from_offset
        self.data.truncate_dirty_files(end, zero_tail=True)
        self.data.reset_positions(end)
        self._end = last_index
        self._end_term = last_term
        self._end_pos = end
        self._begin = self._first_entry_index(self.data.files[0]) if self.data.files else -1
        if self._begin < 0 and last_index >= 0:
            self._begin = first_index
        index_end = (last_index + 1) * INDEX_UNIT_SIZE
        self.index.truncate_dirty_files(index_end, zero_tail=True)
        self.index.reset_positions(index_end)
        committed = _read_properties(self.checkpoint_path).get(_COMMITTED_INDEX_KEY, "")
        try:
            self.set_committed(int(committed))
        except ValueError:
            pass
        log.info("dledger.store_recovered", dir=self.base_dir, begin=self._begin, end=self._end,
                 end_term=self._end_term, end_pos=self._end_pos, committed=self._committed)

    @staticmethod
    def _header_index(mf: MappedFile) -> int:
        """The index the entry header at the segment's start names (0 when there is none)."""
        try:
            magic, _, index, _, pos = HEADER.unpack_from(mf.mm, 0)[:5]
        except Exception:
            return 0
        return index if magic == CURRENT_MAGIC and pos == mf.file_from_offset and index >= 0 else 0

    def _first_entry_index(self, mf: MappedFile) -> int:
        """The index of the entry at the segment's start when its unit agrees, else -1."""
        try:
            magic, size, index, term, pos, _, _, _, body_size = HEADER.unpack_from(mf.mm, 0)
        except Exception:
            return -1
        if (magic != CURRENT_MAGIC or pos != mf.file_from_offset or size != BODY_OFFSET + body_size
                or index < 0):
            return -1
        if self._unit(index) != (magic, pos, size, index, term):
            return -1
        return index

    # ------------------------------------------------------------------ durability

    def flush(self) -> int:
        """Data then index to disk (a worker thread); the data's flushed offset."""
        where = self.data.flush(0)
        self.index.flush(0)
        return where

    def persist_checkpoint(self) -> None:
        text = f"{_END_INDEX_KEY}={self._end}\n{_COMMITTED_INDEX_KEY}={self._committed}\n"
        write_file_atomic(self.checkpoint_path, text.encode("utf-8"), backup=True)

    def close(self) -> None:
        self.data.close()
        self.index.close()

    # ------------------------------------------------------------------ reads for the commit log

    def entry_view(self, pos: int, size: int) -> memoryview | None:
        mf = self.data.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        return mf.view(pos - mf.file_from_offset, size)
