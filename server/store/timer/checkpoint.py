"""The timer checkpoint ``<storeRoot>/config/timercheck`` (upstream ``TimerCheckpoint``).

Contract:

* One memory-mapped page (4096 bytes), big-endian int64 fields at upstream's offsets:
  0 ``last_read_time_ms`` (the first slot not yet wholly delivered), 8
  ``last_timer_log_flush_pos`` (the wheel accounts for every unit below it), 16
  ``last_timer_queue_offset`` (the next unit of ``rmq_sys_wheel_timer`` queue 0 to add to
  the wheel), 24 ``master_timer_queue_offset`` (the same on a master), then the
  DataVersion (state version, timestamp, counter) at 32, 40, 48.
* Ours, at 64, 72, 80: the delivery in flight (kind: 0 none, 1 a timer-log unit, 2 a unit
  of the timer topic delivered at once because it was already due; its key: the unit's
  position or the queue offset; the commit-log offset where the put was to land). It is
  written before such a put and cleared after its mark, so that a restart after SIGKILL
  can tell whether that one put happened (``TimerMessageStore`` recovery).
* Ours, at 88: ``verify_below`` (parked records below this commit-log offset may have been
  put back by another master: 0 none).
* Every field is written through to the mapping when set: a process killed with SIGKILL
  loses none of it; ``flush`` (msync) makes it survive a power loss. A new file reads as
  zeros (nothing delivered, nothing read).

Upstream: ``store/timer/TimerCheckpoint.java``.
"""

from __future__ import annotations

import mmap
import os
import struct

__all__ = ["TimerCheckpoint", "INFLIGHT_NONE", "INFLIGHT_UNIT", "INFLIGHT_EXPIRED"]

_PAGE = 4096
_Q = struct.Struct(">q")
INFLIGHT_NONE = 0
INFLIGHT_UNIT = 1
INFLIGHT_EXPIRED = 2

_READ_TIME, _LOG_POS, _QUEUE_OFFSET, _MASTER_OFFSET = 0, 8, 16, 24
_STATE_VERSION, _TIMESTAMP, _COUNTER = 32, 40, 48
_INFLIGHT_KIND, _INFLIGHT_KEY, _INFLIGHT_EXPECT = 64, 72, 80
_VERIFY_BELOW = 88


class TimerCheckpoint:
    """The mapped checkpoint page; see the module docstring."""

    __slots__ = ("path", "existed", "_fd", "mm")

    def __init__(self, path: str) -> None:
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        self.path = path
        self.existed = os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < _PAGE:
                os.ftruncate(fd, _PAGE)
            self.mm = mmap.mmap(fd, _PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _get(self, at: int) -> int:
        return int(_Q.unpack_from(self.mm, at)[0])

    def _set(self, at: int, value: int) -> None:
        _Q.pack_into(self.mm, at, value)

    @property
    def last_read_time_ms(self) -> int:
        return self._get(_READ_TIME)

    @last_read_time_ms.setter
    def last_read_time_ms(self, value: int) -> None:
        self._set(_READ_TIME, value)

    @property
    def last_timer_log_flush_pos(self) -> int:
        return self._get(_LOG_POS)

    @last_timer_log_flush_pos.setter
    def last_timer_log_flush_pos(self, value: int) -> None:
        self._set(_LOG_POS, value)

    @property
    def last_timer_queue_offset(self) -> int:
        return self._get(_QUEUE_OFFSET)

    @last_timer_queue_offset.setter
    def last_timer_queue_offset(self, value: int) -> None:
        self._set(_QUEUE_OFFSET, value)
        self._set(_MASTER_OFFSET, value)

    @property
    def master_timer_queue_offset(self) -> int:
        return self._get(_MASTER_OFFSET)

    @property
    def data_version(self) -> tuple[int, int, int]:
        """(state version, timestamp, counter)."""
        return self._get(_STATE_VERSION), self._get(_TIMESTAMP), self._get(_COUNTER)

    def next_version(self, now_ms: int) -> None:
        """``DataVersion.nextVersion``: a new timestamp and counter + 1."""
        self._set(_TIMESTAMP, now_ms)
        self._set(_COUNTER, self._get(_COUNTER) + 1)

    @property
    def verify_below(self) -> int:
        return self._get(_VERIFY_BELOW)

    @verify_below.setter
    def verify_below(self, value: int) -> None:
        self._set(_VERIFY_BELOW, value)

    def encode(self) -> bytes:
        """Upstream's ``TimerCheckpoint.encode``: the first seven fields, 56 bytes (the body
        of GET_TIMER_CHECK_POINT)."""
        return bytes(self.mm[:_COUNTER + 8])

    # -- the delivery in flight ---------------------------------------------------------

    @property
    def inflight(self) -> tuple[int, int, int]:
        """(kind, key, expected commit-log offset); kind ``INFLIGHT_NONE`` when none."""
        return self._get(_INFLIGHT_KIND), self._get(_INFLIGHT_KEY), self._get(_INFLIGHT_EXPECT)

    def set_inflight(self, kind: int, key: int, expected_offset: int) -> None:
        self._set(_INFLIGHT_KEY, key)
        self._set(_INFLIGHT_EXPECT, expected_offset)
        self._set(_INFLIGHT_KIND, kind)  # last: a kind names a whole record

    def clear_inflight(self) -> None:
        self._set(_INFLIGHT_KIND, INFLIGHT_NONE)

    # -- durability -----------------------------------------------------------------------

    def flush(self) -> None:
        if not self.mm.closed:
            self.mm.flush()

    def close(self) -> None:
        if not self.mm.closed:
            self.mm.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
