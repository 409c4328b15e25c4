"""The timer store's files: wheel slot arithmetic and precision flooring (hypothesis), the
timer log's units, blanks and recovery, the checkpoint's write-through page.

Upstream: ``store/timer/TimerWheel.java``, ``TimerLog.java``, ``TimerCheckpoint.java``,
``MessageStoreConfig.setTimerPrecisionMs``, ``HookUtils.transformTimerMessage``.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.server.store.config import MessageStoreConfig
from aiorocketmq.server.store.timer.checkpoint import INFLIGHT_NONE, INFLIGHT_UNIT, TimerCheckpoint
from aiorocketmq.server.store.timer.log import (
    BLANK_MAGIC_CODE,
    MAGIC_DEFAULT,
    MAGIC_ROLL,
    UNIT_SIZE,
    TimerLog,
    encode_unit,
    is_magic_ok,
)
from aiorocketmq.server.store.timer.wheel import (
    EMPTY_SLOT,
    IGNORE,
    SLOT_SIZE,
    TimerWheel,
    floor_deliver_ms,
    slot_index,
    snap_precision,
)

PRECISIONS = st.sampled_from([100, 200, 500, 1000])
EPOCH_MS = st.integers(min_value=1, max_value=4_102_444_800_000)  # up to 2100


# -- precision and flooring ----------------------------------------------------------------


@given(st.integers(min_value=-10, max_value=100_000))
def test_snap_precision_is_the_largest_candidate_not_above(value: int) -> None:
    snapped = snap_precision(value)
    assert snapped in (100, 200, 500, 1000)
    assert snapped == max([p for p in (100, 200, 500, 1000) if p <= value], default=100)
    assert MessageStoreConfig(timer_precision_ms=value).timer_precision_ms == snapped


@given(EPOCH_MS, PRECISIONS)
def test_floor_is_a_multiple_before_the_delivery_time(deliver: int, p: int) -> None:
    slot = floor_deliver_ms(deliver, p)
    assert slot % p == 0
    assert slot < deliver <= slot + p
    # The slot is read once the floored clock passes it: at slot + p, never early.
    read_at = slot + p
    assert read_at >= deliver and read_at - deliver < p


@given(EPOCH_MS, PRECISIONS)
def test_exact_multiple_moves_one_step_back(k: int, p: int) -> None:
    deliver = k * p
    assert floor_deliver_ms(deliver, p) == deliver - p


# -- the wheel ----------------------------------------------------------------------------


@given(EPOCH_MS, PRECISIONS, st.integers(min_value=1, max_value=1000))
def test_slot_index_wraps_every_two_turns(t: int, p: int, slots: int) -> None:
    idx = slot_index(t, p, slots)
    assert 0 <= idx < 2 * slots
    assert slot_index(t + 2 * slots * p, p, slots) == idx
    assert slot_index(t // p * p, p, slots) == idx


def test_wheel_file_is_sparse_and_its_size_checked(tmp_path: Path) -> None:
    path = str(tmp_path / "timerwheel")
    wheel = TimerWheel(path, 1000, 1000)
    assert os.path.getsize(path) == 1000 * 2 * SLOT_SIZE
    wheel.close()
    with pytest.raises(ValueError, match="Timer wheel length"):
        TimerWheel(path, 999, 1000)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=6000), min_size=1, max_size=40),
       PRECISIONS, st.integers(min_value=0, max_value=10**6),
       st.integers(min_value=0, max_value=6000), st.integers(min_value=0, max_value=2100))
def test_live_slots_match_a_brute_force_scan(tmp_path_factory: pytest.TempPathFactory,
                                             offsets: list[int], p: int, base_units: int,
                                             start_off: int, length: int) -> None:
    slots = 1024  # 2048 slots in the wheel
    wheel = TimerWheel(str(tmp_path_factory.mktemp("w") / "timerwheel"), slots, p)
    try:
        base = (1_700_000_000_000 // p + base_units) * p
        for i, off in enumerate(offsets):
            wheel.put_slot(base + off * p, i, i, 1)
        # A window of at most one turn, from a start that need not be a multiple.
        start = base + start_off * p + (start_off % p)
        end = start + min(length, 2 * slots) * p
        live = list(wheel.live_slots(start, end))
        first = start // p * p
        brute = [t for t in range(first, end, p) if wheel.get_slot(t) != EMPTY_SLOT]
        assert live == brute
        # What was put last into an index is live at its time; what it replaced reads empty.
        latest = {slot_index(base + off * p, p, slots): base + off * p for off in offsets}
        assert live == sorted(t for t in set(latest.values()) if first <= t < end)
    finally:
        wheel.close()


def test_slot_of_another_turn_reads_empty_and_revise(tmp_path: Path) -> None:
    wheel = TimerWheel(str(tmp_path / "timerwheel"), 100, 1000)
    t = 1_700_000_000_000
    wheel.put_slot(t, 52, 104, 2, 0)
    assert wheel.get_slot(t) == (t, 52, 104, 2, 0)
    later = t + 200 * 1000  # one turn: same index
    assert wheel.get_slot(later) == EMPTY_SLOT
    assert wheel.get_raw_slot(later).time_ms == t
    wheel.revise_slot(t, IGNORE, 156, False)
    assert wheel.get_slot(t) == (t, 52, 156, 2, 0)
    wheel.revise_slot(later, IGNORE, 208, False)  # another time, no force: unchanged
    assert wheel.get_slot(t).last_pos == 156
    wheel.revise_slot(later, IGNORE, 208, True)
    assert wheel.get_slot(later) == (later, 208, 208, 0, 0)
    assert wheel.get_num(later) == 0 and wheel.get_num(t) == 0
    wheel.put_slot(t + 1000, 0, 0, 5)
    assert wheel.get_all_num(t) == 5
    assert wheel.check_phy_pos(t, 100) == (1 << 63) - 1  # t+1000 ends at 0 <= 100: none beyond
    assert wheel.check_phy_pos(later, 100) == 208
    wheel.close()
    reopened = TimerWheel(str(tmp_path / "timerwheel"), 100, 1000)
    assert reopened.get_slot(later) == (later, 208, 208, 0, 0)
    reopened.close()


def test_slot_layout_is_upstreams(tmp_path: Path) -> None:
    path = tmp_path / "timerwheel"
    wheel = TimerWheel(str(path), 10, 1000)
    wheel.put_slot(5000, 7, 9, 3, 1)
    wheel.flush()
    wheel.close()
    raw = path.read_bytes()[5 * SLOT_SIZE:6 * SLOT_SIZE]
    assert struct.unpack(">qqqii", raw) == (5, 7, 9, 3, 1)  # time / precision first


# -- the log ------------------------------------------------------------------------------


def _unit(i: int, prev: int = -1, magic: int = MAGIC_DEFAULT) -> bytes:
    return encode_unit(prev, magic, 1_000_000 + i, 2000, 1000 * i, 100 + i, 17)


def test_units_fill_segments_with_blanks_and_read_back(tmp_path: Path) -> None:
    tlog = TimerLog(str(tmp_path / "timerlog"), 4096)
    per_file = (4096 - 16) // UNIT_SIZE  # a unit plus 16 bytes of blank must fit
    positions = [tlog.append(_unit(i)) for i in range(per_file * 2 + 3)]
    assert positions[:2] == [0, UNIT_SIZE]
    assert positions[per_file] == 4096  # the next segment
    files = sorted(os.listdir(tmp_path / "timerlog"))
    assert files == [f"{0:020d}", f"{4096:020d}", f"{8192:020d}"]
    blank = (tmp_path / "timerlog" / files[0]).read_bytes()[per_file * UNIT_SIZE:]
    size, zero, magic = struct.unpack_from(">iqi", blank)
    assert (size, zero, magic) == (4096 - per_file * UNIT_SIZE, 0, BLANK_MAGIC_CODE)
    unit = tlog.read_unit(positions[5])
    assert unit is not None and unit.offset_py == 5000 and unit.size_py == 105
    assert unit.slot_time_ms == 1_000_005 + 2000 and unit.delivered_ms == 0
    tlog.mark_delivered(positions[5], 42)
    assert tlog.read_unit(positions[5]).delivered_ms == 42  # type: ignore[union-attr]
    assert [u.pos for u in tlog.iter_units(positions[per_file - 2])] == positions[per_file - 2:]
    tlog.flush(tlog.take_marked())
    tlog.close()


def test_blank_magic_is_upstreams_constant() -> None:
    # Java: 0xBBCCDDEE ^ 1880681586 + 8, addition first, as an int.
    assert BLANK_MAGIC_CODE == struct.unpack(">i", struct.pack(">I", 0xBBCCDDEE ^ 1880681594))[0]
    assert is_magic_ok(MAGIC_DEFAULT | MAGIC_ROLL) and not is_magic_ok(BLANK_MAGIC_CODE)


@pytest.mark.parametrize("torn", [False, True])
def test_recover_finds_the_end_and_cuts_a_torn_unit(tmp_path: Path, torn: bool) -> None:
    path = str(tmp_path / "timerlog")
    tlog = TimerLog(path, 4096)
    positions = [tlog.append(_unit(i)) for i in range(100)]  # two segments
    end = positions[-1] + UNIT_SIZE
    if torn:  # the size of one more unit written, its magic not
        mf = tlog.mfq.last
        assert mf is not None
        mf.write_at(mf.wrote_position, struct.pack(">iq", UNIT_SIZE, 5))
    tlog.close()
    again = TimerLog(path, 4096)
    again.load()
    found, beyond, last = again.recover(positions[97])
    assert found == end
    assert [u.pos for u in beyond] == positions[97:]
    assert last is not None and last.pos == positions[-1]
    assert again.max_offset == end
    assert again.append(_unit(100)) == end  # appends continue at the end
    again.close()


def test_recover_rechecks_a_segment_when_the_log_lost_its_tail(tmp_path: Path) -> None:
    path = str(tmp_path / "timerlog")
    tlog = TimerLog(path, 4096)
    positions = [tlog.append(_unit(i)) for i in range(20)]
    mf = tlog.mfq.last
    assert mf is not None
    mf.zero_from(positions[10])  # the units from 10 on never reached the disk
    tlog.close()
    again = TimerLog(path, 4096)
    again.load()
    found, beyond, last = again.recover(positions[19] + UNIT_SIZE)  # a checkpoint ahead of the log
    assert found == positions[10] and beyond == [] and last is not None and last.pos == positions[9]
    again.close()


def test_expired_segments_are_detached_by_commit_log_offset(tmp_path: Path) -> None:
    tlog = TimerLog(str(tmp_path / "timerlog"), 4096)
    for i in range(200):  # offset_py = 1000 * i; ~78 units per segment
        tlog.append(_unit(i))
    assert len(tlog.mfq.files) == 3
    assert tlog.detach_expired(1000) == []
    gone = tlog.detach_expired(78 * 1000)  # the first segment's last unit points at 77000
    assert [mf.file_from_offset for mf in gone] == [0]
    for mf in gone:
        mf.destroy()
    assert tlog.detach_expired(10**9)[0].file_from_offset == 4096  # never the last one
    tlog.close()


# -- the checkpoint -------------------------------------------------------------------------


def test_checkpoint_writes_through_at_upstreams_offsets(tmp_path: Path) -> None:
    path = tmp_path / "config" / "timercheck"
    ckpt = TimerCheckpoint(str(path))
    assert not ckpt.existed and ckpt.last_read_time_ms == 0 and ckpt.inflight[0] == INFLIGHT_NONE
    ckpt.last_read_time_ms = 1_700_000_000_000
    ckpt.last_timer_log_flush_pos = 520
    ckpt.last_timer_queue_offset = 9
    ckpt.next_version(123)
    ckpt.set_inflight(INFLIGHT_UNIT, 468, 4096)
    # No flush, no close: another mapping of the file sees every field (what a SIGKILL keeps).
    raw = path.read_bytes()
    assert len(raw) == 4096
    assert struct.unpack_from(">qqqqqqq", raw) == (1_700_000_000_000, 520, 9, 9, 0, 123, 1)
    other = TimerCheckpoint(str(path))
    assert other.existed and other.inflight == (INFLIGHT_UNIT, 468, 4096)
    other.clear_inflight()
    assert ckpt.inflight[0] == INFLIGHT_NONE
    assert ckpt.master_timer_queue_offset == 9 and ckpt.data_version == (0, 123, 1)
    other.close()
    ckpt.flush()
    ckpt.close()
