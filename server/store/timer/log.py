"""The timer log ``<storeRoot>/timerlog/`` (upstream ``TimerLog``).

Contract:

* An append-only stream of 52-byte units in fixed-size segments
  (``mappedFileSizeTimerLog``, named by their start offset as the commit log's). A unit,
  big-endian, as upstream: size (int32, 52), position of the previous unit of the same
  slot (int64, -1 for the first), magic (int32: 1 default, | 2 roll, | 4 delete), write
  time (int64: the wheel's write time when the unit was added), delay (int32: slot time
  minus write time), commit-log offset and size of the parked record (int64, int32), hash
  of its real topic (int32, ``String.hashCode``), and upstream's reserved int64, which we
  use as the delivery mark: 0 until the unit's message has been put back, then the time
  of that put. A delivered unit is skipped when its slot is read again (after a restart).
* A segment that cannot take a unit plus 16 bytes ends with a blank
  (``size, 0L, BLANK_MAGIC_CODE``) and the next unit starts the next segment.
* ``recover(begin)`` finds the end of the stream after a restart: units are checked
  forward from the segment holding ``begin``; the first one with a bad size or magic
  ends the stream and everything after it is zeroed (``truncateDirtyFiles``). It returns
  the end and the units it walked (so the wheel can be revised for them).
* Segments whose last unit points below the commit log's first offset are deleted
  (``deleteExpiredFileByOffsetForTimerLog``; never the last one).
* Writes (appends, marks) go straight into the mappings on the event loop; ``flush``
  (msync + fdatasync of what was appended, msync of segments with new marks) may run on
  a worker thread.

Upstream: ``store/timer/TimerLog.java``, ``TimerMessageStore.recoverAndRevise``,
``MappedFileQueue.deleteExpiredFileByOffsetForTimerLog``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from aiorocketmq.logs import get_logger

from ..mapped_file import MappedFile, MappedFileQueue

__all__ = ["TimerLog", "TimerUnit", "UNIT_SIZE", "MIN_BLANK_LEN", "BLANK_MAGIC_CODE",
           "MAGIC_DEFAULT", "MAGIC_ROLL", "MAGIC_DELETE", "is_magic_ok", "encode_unit"]

log = get_logger("aiorocketmq.store.timer")

UNIT_SIZE = 52  # TimerLog.UNIT_SIZE
MIN_BLANK_LEN = 4 + 8 + 4
UNIT_PRE_SIZE_FOR_MSG = 28  # offset of the commit-log offset in a unit
_MARK_AT = 44  # the reserved int64: our delivery mark
MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


# Java: 0xBBCCDDEE ^ 1880681586 + 8 (the addition binds first), as an int.
BLANK_MAGIC_CODE = _int32(0xBBCCDDEE ^ (1880681586 + 8))
_UNIT = struct.Struct(">iqiqiqiiq")
_BLANK = struct.Struct(">iqi")
_MARK = struct.Struct(">q")


def is_magic_ok(magic: int) -> bool:
    """``isMagicOK``: only the low four bits may be set."""
    return (magic | 0xF) == 0xF


class TimerUnit(NamedTuple):
    """One timer-log unit (``pos`` is where it is, not part of its bytes)."""

    pos: int
    prev_pos: int
    magic: int
    write_time_ms: int
    delay_ms: int  # slot time - write time
    offset_py: int
    size_py: int
    topic_hash: int
    delivered_ms: int  # 0: not yet put back

    @property
    def slot_time_ms(self) -> int:
        return self.write_time_ms + self.delay_ms

    @property
    def is_roll(self) -> bool:
        return bool(self.magic & MAGIC_ROLL)

    @property
    def is_delete(self) -> bool:
        return bool(self.magic & MAGIC_DELETE)


def encode_unit(prev_pos: int, magic: int, write_time_ms: int, delay_ms: int, offset_py: int,
                size_py: int, topic_hash: int) -> bytes:
    return _UNIT.pack(UNIT_SIZE, prev_pos, magic, write_time_ms, delay_ms, offset_py, size_py,
                      topic_hash, 0)


class TimerLog:
    """The segments of the timer log; see the module docstring."""

    __slots__ = ("path", "file_size", "mfq", "_marked")

    def __init__(self, path: str, file_size: int) -> None:
        if file_size < 4096:
            raise ValueError("mappedFileSizeTimerLog must be at least 4096 bytes")
        self.path = path
        self.file_size = file_size
        self.mfq = MappedFileQueue(path, file_size)
        self._marked: set[MappedFile] = set()  # segments with marks not yet msynced

    # -- lifecycle ------------------------------------------------------------------------

    def load(self) -> None:
        """Map the segments on disk (all marked written until ``recover`` trims them)."""
        self.mfq.load()

    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset

    @property
    def min_offset(self) -> int:
        return self.mfq.min_offset

    # -- writing --------------------------------------------------------------------------

    def append(self, unit: bytes) -> int:
        """Append one encoded unit; its position. Raises OSError when a segment cannot be created."""
        mfq = self.mfq
        mf = mfq.get_last_mapped_file(0)
        assert mf is not None
        if len(unit) + MIN_BLANK_LEN > mf.free_space:
            nxt = mfq.create_file(mf.file_from_offset + self.file_size)  # first: a full disk changes nothing
            mf.write_at(mf.wrote_position, _BLANK.pack(mf.free_space, 0, BLANK_MAGIC_CODE))
            mf.wrote_position = mf.file_size
            mf = nxt
        pos = mf.file_from_offset + mf.wrote_position
        mf.append(unit)
        return pos

    def mark_delivered(self, pos: int, when_ms: int) -> None:
        """Record that the message of the unit at ``pos`` has been put back."""
        mf = self.mfq.find_mapped_file_by_offset(pos)
        if mf is None:
            return
        _MARK.pack_into(mf.mm, pos - mf.file_from_offset + _MARK_AT, when_ms)
        self._marked.add(mf)

    # -- reading --------------------------------------------------------------------------

    def read_unit(self, pos: int) -> TimerUnit | None:
        """The unit at ``pos``, or None when ``pos`` is not a written unit position."""
        mf = self.mfq.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel < 0 or rel + UNIT_SIZE > mf.wrote_position:
            return None
        size, prev, magic, wt, delay, off, sz, h, mark = _UNIT.unpack_from(mf.mm, rel)
        if size != UNIT_SIZE:
            return None
        return TimerUnit(pos, prev, magic, wt, delay, off, sz, h, mark)

    def iter_units(self, begin: int) -> Iterator[TimerUnit]:
        """Written units from the segment holding ``begin`` (from ``begin`` itself) to the end."""
        for mf in list(self.mfq.files):
            end = mf.file_from_offset + self.file_size
            if end <= begin:
                continue
            rel = max(begin - mf.file_from_offset, 0)
            rel -= rel % UNIT_SIZE
            while rel + UNIT_SIZE <= mf.wrote_position:
                size, prev, magic, wt, delay, off, sz, h, mark = _UNIT.unpack_from(mf.mm, rel)
                if magic == BLANK_MAGIC_CODE or size != UNIT_SIZE:
                    break
                yield TimerUnit(mf.file_from_offset + rel, prev, magic, wt, delay, off, sz, h, mark)
                rel += UNIT_SIZE

    # -- recovery and retention -----------------------------------------------------------

    def recover(self, begin: int) -> tuple[int, list[TimerUnit], TimerUnit | None]:
        """Find the end of the stream and cut everything after it.

        Units below ``begin`` are trusted when the unit just before ``begin`` is whole;
        otherwise (the log lost its tail) the check starts at the segment holding
        ``begin``. Returns ``(end, the units at or beyond begin, the last unit)``.
        """
        files = self.mfq.files
        if not files:
            return 0, [], None
        index = len(files) - 1
        while index > 0 and files[index].file_from_offset > begin:
            index -= 1
        first = files[index]
        rel = begin - first.file_from_offset
        if rel < 0 or rel >= self.file_size or rel % UNIT_SIZE:
            rel = 0
        last: TimerUnit | None = None
        if rel:
            before = self._unit_at(first, rel - UNIT_SIZE)
            if before is None:
                rel = 0  # not whole: check the segment from its start
            else:
                last = before
        beyond: list[TimerUnit] = []
        end = first.file_from_offset + rel
        for i, mf in enumerate(files[index:]):
            if i:
                rel = 0
            stop = False
            while rel + UNIT_SIZE <= self.file_size:
                size, prev, magic, wt, delay, off, sz, h, mark = _UNIT.unpack_from(mf.mm, rel)
                if magic == BLANK_MAGIC_CODE and size == self.file_size - rel:
                    rel = self.file_size  # the segment ends with its blank
                    break
                if size != UNIT_SIZE or not is_magic_ok(magic) or magic == 0:
                    stop = True
                    break
                last = TimerUnit(mf.file_from_offset + rel, prev, magic, wt, delay, off, sz, h, mark)
                if last.pos >= begin:
                    beyond.append(last)
                rel += UNIT_SIZE
            end = mf.file_from_offset + rel
            if stop or rel < self.file_size:
                break
        self.mfq.truncate_dirty_files(end)
        self.mfq.reset_positions(end)
        return end, beyond, last

    @staticmethod
    def _unit_at(mf: MappedFile, rel: int) -> TimerUnit | None:
        size, prev, magic, wt, delay, off, sz, h, mark = _UNIT.unpack_from(mf.mm, rel)
        if size != UNIT_SIZE or not is_magic_ok(magic) or magic == 0:
            return None
        return TimerUnit(mf.file_from_offset + rel, prev, magic, wt, delay, off, sz, h, mark)

    def last_unit_offset_py(self, mf: MappedFile) -> int | None:
        """Commit-log offset in the last unit a full segment can hold (``getOffsetForLastUnit``)."""
        rel = self.file_size - (self.file_size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE
        size, _prev, magic = struct.unpack_from(">iqi", mf.mm, rel)
        if size != UNIT_SIZE or magic == BLANK_MAGIC_CODE:
            # The segment's blank came earlier: find its last unit by walking back.
            while rel >= 0:
                size, _prev, magic = struct.unpack_from(">iqi", mf.mm, rel)
                if size == UNIT_SIZE and is_magic_ok(magic) and magic != 0:
                    break
                rel -= UNIT_SIZE
            if rel < 0:
                return None
        return int(struct.unpack_from(">q", mf.mm, rel + UNIT_PRE_SIZE_FOR_MSG)[0])

    def detach_expired(self, min_commit_log_offset: int) -> list[MappedFile]:
        """Remove the leading segments whose last unit points below ``min_commit_log_offset``
        (their records are gone from the commit log); the caller destroys them."""
        out: list[MappedFile] = []
        for mf in self.mfq.files[:-1]:
            last = self.last_unit_offset_py(mf)
            if last is None or last >= min_commit_log_offset:
                break
            out.append(mf)
        if out:
            del self.mfq.files[:len(out)]
            for mf in out:
                self._marked.discard(mf)
        return out

    # -- durability -----------------------------------------------------------------------

    def take_marked(self) -> list[MappedFile]:
        """The segments with marks since the last call (event loop), for ``flush``."""
        marked = list(self._marked)
        self._marked.clear()
        return marked

    def flush(self, marked: list[MappedFile]) -> int:
        """Make appended units and the marks in ``marked`` durable (worker thread).
        Returns the flushed end of the stream."""
        where = self.mfq.flush(0)
        for mf in marked:
            if not mf.destroyed and not mf.mm.closed:
                mf.mm.flush()
        return where

    def close(self) -> None:
        self.mfq.close()
