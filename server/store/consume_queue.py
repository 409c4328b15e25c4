"""Per-(topic, queueId) consume queue: the index from queue offset to commit-log record.

Contract (docs/PROTOCOL.md 6.1): the queue is an array of 20-byte units (commit-log offset
int64, record size int32, tags code int64, big-endian) in fixed-size mapped files under
``consumequeue/<topic>/<queueId>/``. Queue offset N is unit N; ``max_offset`` is one
past the last unit written, ``min_offset`` the first unit whose record still exists.

* ``put_unit`` is idempotent: a unit whose record lies below what the queue already
  covers is ignored, so recovery can re-dispatch a stretch of the log twice.
* A queue whose first unit is not 0 (the commit log was cleaned before the queue was
  first written here) has its leading slots filled with blank units, as upstream's
  ``fillPreBlank`` (offset 0, size ``Integer.MAX_VALUE``, tags 0).
* Readers get units, or a ``memoryview`` over the units from an index to the end of
  that index's segment (``get_index_buffer``; the pull path scans it).

Upstream: ``store/ConsumeQueue.java``.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable

from aiorocketmq import refuse_extension

from .config import CQ_STORE_UNIT_SIZE
from .mapped_file import MappedFile, MappedFileQueue

# A batch's units written by one C call (server/store/_put.c); without it (or under
# AIOROCKETMQ_NO_EXTENSIONS) put_units declines and each unit takes put_unit.
try:
    refuse_extension("aiorocketmq.server.store._put")
    from ._put import cq_units as _cq_units
except ImportError:
    _cq_units = None  # type: ignore[assignment]

__all__ = ["ConsumeQueue", "ConsumeQueueGapError", "CQ_STORE_UNIT_SIZE", "CQ_UNIT"]

CQ_UNIT = struct.Struct(">qiq")
_pack_unit = CQ_UNIT.pack
_pack_unit_into = CQ_UNIT.pack_into
_time = time.time
_unpack_unit = CQ_UNIT.unpack_from
_ZERO_UNIT = bytes(CQ_STORE_UNIT_SIZE)
_BLANK_UNIT = _pack_unit(0, 0x7FFFFFFF, 0)
_BLANK_SIZE = 0x7FFFFFFF


class ConsumeQueueGapError(RuntimeError):
    """A unit arrived for a queue offset beyond the queue's end (units are missing)."""


class ConsumeQueue:
    """One consume queue. All methods run on the event loop except ``flush``."""

    __slots__ = ("topic", "queue_id", "file_size", "mfq", "min_logic_offset", "max_physic_offset")

    def __init__(self, topic: str, queue_id: int, root_dir: str, file_size: int, *,
                 preallocate: bool = False) -> None:
        if file_size % CQ_STORE_UNIT_SIZE:
            raise ValueError("consume queue file size must be a multiple of 20")
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.mfq = MappedFileQueue(os.path.join(root_dir, topic, str(queue_id)), file_size,
                                   preallocate=preallocate)
        self.min_logic_offset = 0  # in bytes, as upstream
        self.max_physic_offset = -1  # end (offset + size) of the last record indexed

    # -- load and recovery --

    def load(self) -> None:
        self.mfq.load()

    def _valid_units_in(self, mf: MappedFile) -> int:
        """Count the leading valid units of a segment (``recover``'s scan, done with ``find``).

        No run of 20 zero bytes can occur inside valid units (the size field is never
        zero and at most 4 MiB), so the first such run marks the first empty unit.
        """
        mm = mf.mm
        hit = mm.find(_ZERO_UNIT, 0, self.file_size)
        count = self.file_size // CQ_STORE_UNIT_SIZE if hit < 0 else -(-hit // CQ_STORE_UNIT_SIZE)
        # Guard against a torn unit just before the hole.
        while count > 0:
            offset, size, _ = _unpack_unit(mm, (count - 1) * CQ_STORE_UNIT_SIZE)
            if offset >= 0 and size > 0:
                break
            count -= 1
        return count

    def recover(self) -> str:
        """Trim the queue to its last valid unit, scanning the last three segments.

        Returns why the queue looks damaged ("" when it does not): a segment that ends
        before a later one begins, or a last segment with no unit at all (a queue's
        files exist only once a unit was written to them; a crash before its flush is
        the benign case, and rebuilding such a queue costs only time).
        """
        files = self.mfq.files
        if not files:
            return ""
        index = max(len(files) - 3, 0)
        process = files[index].file_from_offset
        damage = ""
        while index < len(files):
            mf = files[index]
            units = self._valid_units_in(mf)
            process = mf.file_from_offset + units * CQ_STORE_UNIT_SIZE
            if units * CQ_STORE_UNIT_SIZE < self.file_size:
                if index + 1 < len(files):
                    damage = f"segment {os.path.basename(mf.path)} ends at unit {units}, a later one follows"
                elif units == 0:
                    damage = f"segment {os.path.basename(mf.path)} holds no unit"
                break
            index += 1
        self.mfq.truncate_dirty_files(process)
        self.mfq.reset_positions(process)
        self._refresh_max_physic_offset()
        return damage

    def check_against_log(self, record_at: Callable[[int, int], tuple[str, int, int] | None],
                          min_phy_offset: int) -> str:
        """Check the first and last unit of every segment against the commit log.

        ``record_at(offset, size)`` returns the (topic, queueId, queueOffset) of the whole
        record of that size at that offset, or None. Returns "" when every checked unit
        names its own record, else what disagrees (a zeroed or foreign segment).
        """
        for mf in self.mfq.files:
            n = mf.wrote_position // CQ_STORE_UNIT_SIZE
            base = mf.file_from_offset // CQ_STORE_UNIT_SIZE
            for i in ((0, n - 1) if n > 1 else (0,) if n else ()):
                offset, size, _ = _unpack_unit(mf.mm, i * CQ_STORE_UNIT_SIZE)
                if size == _BLANK_SIZE and offset == 0:
                    continue  # a pre-blank unit (the log was cleaned before the queue began)
                if offset < min_phy_offset and offset >= 0 and size > 0:
                    continue  # its record was cleaned
                got = record_at(offset, size)
                if got != (self.topic, self.queue_id, base + i):
                    return f"unit {base + i} -> {offset}/{size} names {got}"
        return ""

    def _refresh_max_physic_offset(self) -> None:
        self.max_physic_offset = -1
        for mf in reversed(self.mfq.files):
            if mf.wrote_position >= CQ_STORE_UNIT_SIZE:
                offset, size, _ = _unpack_unit(mf.mm, mf.wrote_position - CQ_STORE_UNIT_SIZE)
                if size != 0x7FFFFFFF:  # a pre-blank unit covers no record
                    self.max_physic_offset = offset + size
                return

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop every unit whose record starts at or beyond ``phy_offset`` (commit log was cut)."""
        while True:
            last = self.mfq.last
            if last is None:
                break
            keep = last.wrote_position // CQ_STORE_UNIT_SIZE
            while keep > 0 and _unpack_unit(last.mm, (keep - 1) * CQ_STORE_UNIT_SIZE)[0] >= phy_offset:
                keep -= 1
            if keep == 0 and len(self.mfq) > 1:
                self.mfq.delete_last_mapped_file()
                continue
            self.mfq.truncate_dirty_files(last.file_from_offset + keep * CQ_STORE_UNIT_SIZE)
            break
        self._refresh_max_physic_offset()

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """``correctMinOffset``: the first unit whose record still exists.

        Upstream looks at the first segment only; we continue into later segments so the
        minimum never names a unit whose record is gone.
        """
        # Units are in commit-log order (leading pre-blank units have offset 0), so the
        # predicate "record still exists" is monotone: binary search each segment.
        for mf in self.mfq.files:
            mm = mf.mm
            lo, hi = 0, mf.wrote_position // CQ_STORE_UNIT_SIZE
            if hi == 0:
                continue
            last_offset, last_size, _ = _unpack_unit(mm, (hi - 1) * CQ_STORE_UNIT_SIZE)
            if last_offset < phy_min_offset or last_size == 0x7FFFFFFF:
                continue
            while lo < hi:
                mid = (lo + hi) // 2
                offset, size, _ = _unpack_unit(mm, mid * CQ_STORE_UNIT_SIZE)
                if offset >= phy_min_offset and size != 0x7FFFFFFF:
                    hi = mid
                else:
                    lo = mid + 1
            self.min_logic_offset = mf.file_from_offset + lo * CQ_STORE_UNIT_SIZE
            return
        if self.mfq.files:
            self.min_logic_offset = self.mfq.max_offset

    # -- writing --

    def reserve(self, cq_offset: int, count: int) -> None:
        """Create the segments units ``cq_offset .. cq_offset+count-1`` need. Raises OSError."""
        self.mfq.reserve((cq_offset + count) * CQ_STORE_UNIT_SIZE, cq_offset * CQ_STORE_UNIT_SIZE)

    def put_unit(self, phy_offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Write unit ``cq_offset``; ignore one already written. Raises OSError on segment creation."""
        if phy_offset + size <= self.max_physic_offset:
            return True
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        files = self.mfq.files
        if files:
            # The usual unit: the next one of the segment being written, its blocks already
            # reserved (``reserve`` ran before the record was appended). What
            # ``MappedFile.append`` does, packed straight into the mapping.
            mf = files[-1]
            pos = mf.wrote_position
            end = pos + CQ_STORE_UNIT_SIZE
            if (mf.file_from_offset + pos == expect and end <= mf.allocated
                    and end <= mf.file_size and not (mf.first_create_in_queue and pos == 0)):
                self.max_physic_offset = phy_offset + size
                _pack_unit_into(mf.mm, pos, phy_offset, size, tags_code)
                mf.wrote_position = end
                mf.last_modified_ms = int(_time() * 1000)
                return True
        last = self.mfq.get_last_mapped_file(expect)
        assert last is not None
        mf = last
        if mf.first_create_in_queue and cq_offset != 0 and mf.wrote_position == 0:
            self.min_logic_offset = expect
            self.mfq.flushed_where = mf.file_from_offset
            for _ in range((expect - mf.file_from_offset) // CQ_STORE_UNIT_SIZE):
                mf.append(_BLANK_UNIT)
        current = mf.file_from_offset + mf.wrote_position
        if expect < current:
            return True
        if expect > current:
            # A hole in the queue would misnumber every later message; refuse loudly.
            raise ConsumeQueueGapError(
                f"consume queue {self.topic}:{self.queue_id} expected unit {current // CQ_STORE_UNIT_SIZE},"
                f" got {cq_offset}"
            )
        self.max_physic_offset = phy_offset + size
        return mf.append(_pack_unit(phy_offset, size, tags_code))

    def put_units(self, offsets: list[int], end: int, tags_codes: list[int], cq_offset: int) -> bool:
        """``put_unit`` for records lying back to back at ``offsets`` (the last ending at
        ``end``), queue offsets ``cq_offset`` on, in one C call: only when every unit is the
        next one of the segment being written, its blocks reserved, none already held.
        Returns False, nothing written, for any other case (the caller puts each unit)."""
        files = self.mfq.files
        if _cq_units is None or not files or not offsets or offsets[0] < self.max_physic_offset:
            return False
        mf = files[-1]
        pos = mf.wrote_position
        stop = pos + len(offsets) * CQ_STORE_UNIT_SIZE
        if (mf.file_from_offset + pos != cq_offset * CQ_STORE_UNIT_SIZE or stop > mf.allocated
                or stop > mf.file_size or (mf.first_create_in_queue and pos == 0)):
            return False
        _cq_units(mf.mm, pos, offsets, end, tags_codes)
        self.max_physic_offset = end
        mf.wrote_position = stop
        mf.last_modified_ms = int(_time() * 1000)
        return True

    # -- reading --

    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset // CQ_STORE_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_unit(self, index: int) -> tuple[int, int, int] | None:
        pos = index * CQ_STORE_UNIT_SIZE
        if pos < self.min_logic_offset:
            return None
        mf = self.mfq.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel + CQ_STORE_UNIT_SIZE > mf.wrote_position:
            return None
        return _unpack_unit(mf.mm, rel)

    def get_index_buffer(self, start_index: int) -> memoryview | None:
        """Units from ``start_index`` to the end of its segment's written data, or None."""
        pos = start_index * CQ_STORE_UNIT_SIZE
        if pos < self.min_logic_offset:
            return None
        mf = self.mfq.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        return mf.view(rel, mf.wrote_position - rel)

    def roll_next_file(self, index: int) -> int:
        """First index of the segment after the one holding ``index`` (``rollNextFile``)."""
        per_file = self.file_size // CQ_STORE_UNIT_SIZE
        return index + per_file - index % per_file

    def get_offset_in_queue_by_time(self, timestamp: int,
                                    store_time_of: Callable[[int, int], int],
                                    min_phy_offset: int) -> int:
        """Lower boundary: the first queue offset whose message was stored at or after ``timestamp``.

        ``store_time_of(phy_offset, size)`` reads a record's store timestamp (-1 when gone).
        Units whose record was cleaned count as older than any timestamp. Returns
        ``max_offset`` when every message is older, and 0 for an empty queue.

        Divergence: 4.9.7 ``getOffsetInQueueByTime`` picks the segment by file mtime and
        returns the nearer of the two neighbours; this is 5.x's ``BoundaryType.LOWER``,
        the offset a consumer starting "from this time" wants.
        """
        lo, hi = self.min_offset, self.max_offset
        if lo >= hi:
            return 0
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self.get_unit(mid)
            if unit is None:
                lo = mid + 1
                continue
            offset, size, _ = unit
            if offset < min_phy_offset:
                lo = mid + 1
                continue
            t = store_time_of(offset, size)
            if t < timestamp:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- retention and lifecycle --

    def detach_expired(self, phy_min_offset: int) -> list[MappedFile]:
        """Detach leading segments wholly below ``phy_min_offset`` and correct the min offset.

        The caller destroys the returned files off the event loop.
        """
        files = self.mfq.detach_expired_by_offset(phy_min_offset, CQ_STORE_UNIT_SIZE)
        self.correct_min_offset(phy_min_offset)
        return files

    def flush(self, least_pages: int = 0) -> int:
        return self.mfq.flush(least_pages)

    def close(self) -> None:
        self.mfq.close()

    def destroy(self) -> None:
        self.mfq.destroy()
        self.min_logic_offset = 0
        self.max_physic_offset = -1
        topic_dir = os.path.dirname(self.mfq.store_path)
        try:
            os.rmdir(topic_dir)
        except OSError:
            pass
