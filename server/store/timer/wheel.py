"""The timing wheel file ``<storeRoot>/timerwheel`` (upstream ``TimerWheel`` and ``Slot``).

Contract:

* The wheel has ``2 * slots_total`` slots of 32 bytes, one per ``precision_ms`` of time,
  memory-mapped from a file of exactly ``2 * slots_total * 32`` bytes (sparse: created
  with ``ftruncate``; a file of another non-zero size is refused with ``ValueError``, as
  upstream's "Timer wheel length" check). A slot is upstream's layout, big-endian:
  ``time_ms // precision`` (int64), first and last timer-log position of its chain
  (int64 each), number of messages (int32), magic (int32, unused).
* Time ``t`` lives in slot ``(t // precision) % (2 * slots_total)``; a slot belongs to
  ``t`` only when its stored time equals ``t // precision`` (``get_slot`` answers the
  empty slot ``(-1, -1, -1, 0, 0)`` otherwise), so an entry of an earlier turn of the
  wheel reads as empty and is simply overwritten.
* Writes go straight into the mapping (no heap copy as upstream keeps): a process killed
  with SIGKILL loses nothing the kernel has; ``flush`` (msync) makes it survive a power
  loss. Reads and writes run on the event loop; ``flush`` may run on a worker thread.
* ``live_slots(start, end)`` lists the times in ``[start, end)`` whose slot is in use,
  reading the mapping in chunks (a broker that was down for days skips its empty slots
  in well under a second).

Pure parts used by the send path: ``snap_precision`` (``setTimerPrecisionMs``: 100, 200,
500 or 1000) and ``floor_deliver_ms`` (``transformTimerMessage``: a delivery time is
floored to the precision, an exact multiple moved one step back, so that the slot is
read, one precision later, never before the delivery time).

Upstream: ``store/timer/TimerWheel.java``, ``store/timer/Slot.java``,
``MessageStoreConfig.setTimerPrecisionMs``, ``HookUtils.transformTimerMessage``.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

__all__ = ["TimerWheel", "Slot", "EMPTY_SLOT", "SLOT_SIZE", "BLANK", "IGNORE",
           "snap_precision", "floor_deliver_ms", "slot_index"]

SLOT_SIZE = 32  # Slot.SIZE
BLANK = -1  # TimerWheel.BLANK: no position
IGNORE = -2  # TimerWheel.IGNORE: leave this position as it is (reviseSlot)
_SLOT = struct.Struct(">qqqii")
_TIME = struct.Struct(">q")
_LAST = struct.Struct(">q")
_PRECISIONS = (100, 200, 500, 1000)
_CHUNK = 4096  # slots read at once by live_slots


class Slot(NamedTuple):
    """One slot: its time (ms, or -1 when empty), chain ends, count, magic."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0


EMPTY_SLOT = Slot(-1, -1, -1, 0, 0)


def snap_precision(value: int) -> int:
    """``setTimerPrecisionMs``: the largest of 100/200/500/1000 not above ``value`` (100 below)."""
    for i in range(1, len(_PRECISIONS)):
        if value < _PRECISIONS[i]:
            return _PRECISIONS[i - 1]
    return _PRECISIONS[-1]


def floor_deliver_ms(deliver_ms: int, precision_ms: int) -> int:
    """The slot time of a delivery at ``deliver_ms``: floored, an exact multiple one step back.

    The slot at ``t`` is read once the wall clock reaches ``t + precision_ms``, which is
    never before ``deliver_ms`` and less than one precision after it.
    """
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


def slot_index(time_ms: int, precision_ms: int, slots_total: int) -> int:
    """``getSlotIndex``: where ``time_ms`` lives in a wheel of ``2 * slots_total`` slots."""
    return time_ms // precision_ms % (slots_total * 2)


class TimerWheel:
    """The mapped wheel file; see the module docstring."""

    __slots__ = ("path", "slots_total", "precision_ms", "length", "_fd", "mm")

    def __init__(self, path: str, slots_total: int, precision_ms: int) -> None:
        """Map ``path`` (created empty when missing).

        Raises:
            ValueError: the file exists with another non-zero length (a wheel of another
                size or precision setting: upstream refuses it the same way).
            OSError: the file cannot be created or mapped.
        """
        if slots_total <= 0 or precision_ms <= 0:
            raise ValueError("slots_total and precision_ms must be positive")
        self.path = path
        self.slots_total = slots_total
        self.precision_ms = precision_ms
        self.length = slots_total * 2 * SLOT_SIZE
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size not in (0, self.length):
                raise ValueError(f"Timer wheel length:{size} != expected:{self.length} ({path})")
            if size == 0:
                os.ftruncate(fd, self.length)
            self.mm = mmap.mmap(fd, self.length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    # -- slots ----------------------------------------------------------------------------

    def slot_index(self, time_ms: int) -> int:
        return time_ms // self.precision_ms % (self.slots_total * 2)

    def get_raw_slot(self, time_ms: int) -> Slot:
        """The slot where ``time_ms`` lives, whatever time it holds (``getRawSlot``)."""
        t, first, last, num, magic = _SLOT.unpack_from(self.mm, self.slot_index(time_ms) * SLOT_SIZE)
        return Slot(t * self.precision_ms, first, last, num, magic)

    def get_slot(self, time_ms: int) -> Slot:
        """The slot of ``time_ms``, or ``EMPTY_SLOT`` when it holds another time (``getSlot``)."""
        slot = self.get_raw_slot(time_ms)
        if slot.time_ms != time_ms // self.precision_ms * self.precision_ms:
            return EMPTY_SLOT
        return slot

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int = 0, magic: int = 0) -> None:
        """``putSlot``: the slot of ``time_ms`` now holds this chain."""
        _SLOT.pack_into(self.mm, self.slot_index(time_ms) * SLOT_SIZE,
                        time_ms // self.precision_ms, first_pos, last_pos, num, magic)

    def revise_slot(self, time_ms: int, first_pos: int, last_pos: int, force: bool) -> None:
        """``reviseSlot``: set the chain ends of ``time_ms``'s slot (``IGNORE`` keeps one);
        a slot holding another time is replaced only with ``force``."""
        base = self.slot_index(time_ms) * SLOT_SIZE
        (stored,) = _TIME.unpack_from(self.mm, base)
        if stored != time_ms // self.precision_ms:
            if force:
                self.put_slot(time_ms, first_pos if first_pos != IGNORE else last_pos, last_pos)
            return
        if first_pos != IGNORE:
            _LAST.pack_into(self.mm, base + 8, first_pos)
        if last_pos != IGNORE:
            _LAST.pack_into(self.mm, base + 16, last_pos)

    def get_num(self, time_ms: int) -> int:
        """Messages recorded in ``time_ms``'s slot (``getNum``; 0 when it holds another time)."""
        return self.get_slot(time_ms).num

    # -- scans ----------------------------------------------------------------------------

    def live_slots(self, start_ms: int, end_ms: int) -> Iterator[int]:
        """Times ``t`` in ``[start_ms, end_ms)`` (multiples of the precision from a floored
        ``start_ms``) whose slot holds ``t``, in order. Covers at most one turn of the wheel."""
        p = self.precision_ms
        total = self.slots_total * 2
        first = start_ms // p
        last = min(-(-end_ms // p), first + total)  # exclusive, in precision units
        unit = first
        mm = self.mm
        while unit < last:
            idx = unit % total
            n = min(_CHUNK, total - idx, last - unit)
            values = struct.unpack_from(f">{4 * n}q", mm, idx * SLOT_SIZE)
            stored = values[0::4]
            expected = range(unit, unit + n)
            if not set(stored).isdisjoint(expected):
                for k, t in enumerate(stored):
                    if t == unit + k:
                        yield t * p
            unit += n

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> int:
        """``checkPhyPos``: the least first position of the live slots from ``time_start_ms``
        whose last position is beyond ``max_offset`` (a wheel ahead of a damaged log), or
        the largest int64."""
        least = (1 << 63) - 1
        p = self.precision_ms
        for t in self.live_slots(time_start_ms, time_start_ms + self.slots_total * 2 * p):
            slot = self.get_raw_slot(t)
            if slot.last_pos > max_offset and slot.first_pos < least:
                least = slot.first_pos
        return least

    def get_all_num(self, time_start_ms: int) -> int:
        """``getAllNum``: messages in every live slot from ``time_start_ms`` (one wheel turn)."""
        p = self.precision_ms
        return sum(self.get_raw_slot(t).num
                   for t in self.live_slots(time_start_ms, time_start_ms + self.slots_total * 2 * p))

    # -- durability -----------------------------------------------------------------------

    def flush(self) -> None:
        """msync the mapping (safe on a worker thread while the loop writes slots)."""
        if not self.mm.closed:
            self.mm.flush()

    def close(self) -> None:
        if not self.mm.closed:
            self.mm.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
