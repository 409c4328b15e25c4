"""Consume queue units and the key index, on their own (no commit log)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.server.store.consume_queue import CQ_UNIT, ConsumeQueue
from aiorocketmq.server.store.index import IndexService, index_key_hash


def _queue(tmp_path, units_per_file: int = 4) -> ConsumeQueue:
    return ConsumeQueue("T", 0, str(tmp_path), units_per_file * 20)


def test_units_round_trip_across_files(tmp_path) -> None:
    cq = _queue(tmp_path)
    for i in range(10):
        cq.reserve(i, 1)
        assert cq.put_unit(i * 100, 100, i - 5, i)
    assert (cq.min_offset, cq.max_offset) == (0, 10)
    assert len(cq.mfq) == 3
    assert [cq.get_unit(i) for i in (0, 5, 9)] == [(0, 100, -5), (500, 100, 0), (900, 100, 4)]
    assert cq.get_unit(10) is None
    buf = cq.get_index_buffer(5)
    assert buf is not None and len(buf) == 3 * 20  # to the end of that segment
    assert CQ_UNIT.unpack_from(buf, 0) == (500, 100, 0)
    buf.release()
    assert cq.roll_next_file(5) == 8
    # A unit already written (recovery re-dispatch) is ignored.
    assert cq.put_unit(300, 100, 0, 3)
    assert cq.max_offset == 10
    cq.close()


def test_recover_trims_to_last_valid_unit(tmp_path) -> None:
    cq = _queue(tmp_path)
    for i in range(6):
        cq.reserve(i, 1)
        cq.put_unit(1000 + i * 100, 100, 7, i)
    cq.close()
    again = _queue(tmp_path)
    again.load()
    again.recover()
    assert again.max_offset == 6
    assert again.max_physic_offset == 1600
    again.truncate_dirty_logic_files(1300)
    assert again.max_offset == 3 and again.max_physic_offset == 1300
    again.truncate_dirty_logic_files(1000)
    assert again.max_offset == 0
    again.close()


def test_pre_blank_and_min_offset_correction(tmp_path) -> None:
    cq = _queue(tmp_path)
    cq.reserve(6, 1)
    cq.put_unit(5000, 100, 0, 6)  # first unit of a queue whose head was cleaned
    assert (cq.min_offset, cq.max_offset) == (6, 7)
    assert cq.get_unit(4) is None  # below the min offset
    assert CQ_UNIT.unpack_from(cq.mfq.files[0].mm, 0) == (0, 0x7FFFFFFF, 0)  # a pre-blank unit
    cq.reserve(7, 3)
    for i in range(7, 10):
        cq.put_unit(5000 + (i - 6) * 100, 100, 0, i)
    cq.correct_min_offset(5250)
    assert cq.min_offset == 9
    dropped = cq.detach_expired(5250)
    assert [f.file_from_offset for f in dropped] == [80]  # units 4..7 lie below 5250
    for f in dropped:
        f.destroy()
    assert cq.min_offset == 9
    cq.close()


def test_offset_by_time_lower_boundary(tmp_path) -> None:
    cq = _queue(tmp_path)
    times = {0: 100, 100: 200, 200: 200, 300: 300, 400: 500}
    for i, phy in enumerate(sorted(times)):
        cq.reserve(i, 1)
        cq.put_unit(phy, 100, 0, i)
    at = lambda phy, size: times[phy]  # noqa: E731
    assert cq.get_offset_in_queue_by_time(50, at, 0) == 0
    assert cq.get_offset_in_queue_by_time(200, at, 0) == 1
    assert cq.get_offset_in_queue_by_time(201, at, 0) == 3
    assert cq.get_offset_in_queue_by_time(500, at, 0) == 4
    assert cq.get_offset_in_queue_by_time(501, at, 0) == 5
    assert cq.get_offset_in_queue_by_time(50, at, 200) == 2  # units below the log's min are gone
    cq.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4 * 1024 * 1024), st.integers(-2**63, 2**63 - 1)),
                min_size=1, max_size=30))
def test_units_survive_reload(tmp_path_factory, units) -> None:
    root = tmp_path_factory.mktemp("cq")
    cq = ConsumeQueue("T", 1, str(root), 7 * 20)
    phy = 0
    expected = []
    for i, (size, tags) in enumerate(units):
        cq.reserve(i, 1)
        cq.put_unit(phy, size, tags, i)
        expected.append((phy, size, tags))
        phy += size
    cq.close()
    again = ConsumeQueue("T", 1, str(root), 7 * 20)
    again.load()
    again.recover()
    assert again.max_offset == len(units)
    assert [again.get_unit(i) for i in range(len(units))] == expected
    again.close()


def test_index_put_query_and_roll(tmp_path) -> None:
    idx = IndexService(str(tmp_path), hash_slot_num=4, index_num=5)
    for i in range(10):
        idx.ensure_capacity(2)
        idx.build_index("T", f"k{i} shared", None, i * 100, 1_000_000 + i * 1000)
    assert len(idx.files) >= 3
    found = idx.query("T", "shared", 64, 0, 2**62)
    assert sorted(found.phy_offsets) == [i * 100 for i in range(10)]
    assert found.index_last_update_phyoffset == 900
    assert idx.query("T", "k3", 64, 0, 2**62).phy_offsets == [300]
    assert idx.query("Other", "k3", 64, 0, 2**62).phy_offsets == []
    assert sorted(idx.query("T", "shared", 64, 1_004_000, 1_006_000).phy_offsets) == [400, 500, 600]
    assert len(idx.query("T", "shared", 3, 0, 2**62).phy_offsets) == 3
    # Re-indexing an offset already indexed is a no-op.
    idx.build_index("T", "shared", None, 500, 1_005_000)
    assert len(idx.query("T", "shared", 64, 0, 2**62).phy_offsets) == 10
    idx.close()


def test_index_recover_drops_untrusted_files(tmp_path) -> None:
    idx = IndexService(str(tmp_path), hash_slot_num=4, index_num=3)
    for i in range(6):
        idx.ensure_capacity(1)
        idx.build_index("T", None, f"U{i}", i * 100, 5000 + i)
    names = [f.path for f in idx.files]
    idx.close()
    again = IndexService(str(tmp_path), hash_slot_num=4, index_num=3)
    again.load()
    assert [f.path for f in again.files] == names
    last = again.recover(trusted_offset=350)
    # Files whose newest entry is at or beyond 350 are gone; re-indexing resumes after `last`.
    assert last == 300 or last == 100
    assert all(f.end_phy_offset < 350 for f in again.files)
    assert again.query("T", "U5", 64, 0, 2**62).phy_offsets == []
    again.close()


def test_index_key_hash_is_non_negative() -> None:
    assert index_key_hash("T#key") >= 0
    assert index_key_hash("polygenelubricants") == 0  # hashCode() is Integer.MIN_VALUE
