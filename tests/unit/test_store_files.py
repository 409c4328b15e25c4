"""Store building blocks: config parsing, delay levels, mapped files, checkpoint."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.server.store.checkpoint import AbortFile, StoreCheckpoint
from aiorocketmq.server.store.config import MessageStoreConfig
from aiorocketmq.server.store.dispatcher import compute_tags_code, parse_delay_levels
from aiorocketmq.server.store.mapped_file import MappedFile, MappedFileQueue, offset_to_file_name


def test_config_defaults_are_upstream() -> None:
    c = MessageStoreConfig(store_path_root_dir="/r")
    assert c.mapped_file_size_commit_log == 1024 ** 3
    assert c.mapped_file_size_consume_queue == 300000 * 20
    assert c.flush_disk_type == "ASYNC_FLUSH"
    assert c.flush_interval_commit_log_ms == 500
    assert c.flush_commit_log_least_pages == 4
    assert c.sync_flush_timeout_ms == 5000
    assert c.file_reserved_time == 72
    assert c.delete_when == "04"
    assert c.disk_max_used_space_ratio == 75
    assert c.max_message_size == 4 * 1024 * 1024
    assert (c.max_transfer_count_on_message_in_memory, c.max_transfer_bytes_on_message_in_memory) == (32, 256 * 1024)
    assert (c.max_transfer_count_on_message_in_disk, c.max_transfer_bytes_on_message_in_disk) == (8, 64 * 1024)
    assert c.commit_log_dir == os.path.join("/r", "commitlog")
    assert c.consume_queue_dir == os.path.join("/r", "consumequeue")
    assert c.checkpoint_path == os.path.join("/r", "checkpoint")


def test_config_from_upstream_properties() -> None:
    c = MessageStoreConfig.from_properties({
        "storePathRootDir": "/data/store",
        "mapedFileSizeCommitLog": "65536",
        "mappedFileSizeConsumeQueue": "2000",
        "flushDiskType": "SYNC_FLUSH",
        "fileReservedTime": "48",
        "deleteWhen": "04;05",
        "flushIntervalCommitLog": "200",
        "syncFlushTimeout": "100",
        "messageIndexEnable": "false",
        "brokerName": "ignored-by-the-store",
        "maxHashSlotNum": "100",
    })
    assert c.store_path_root_dir == "/data/store"
    assert c.mapped_file_size_commit_log == 65536
    assert c.consume_queue_file_size == 2000
    assert c.is_sync_flush
    assert c.file_reserved_time == 48
    assert c.delete_when == "04;05"
    assert c.flush_interval_commit_log_ms == 200
    assert c.sync_flush_timeout_ms == 100
    assert c.message_index_enable is False
    assert c.max_hash_slot_num == 100
    with pytest.raises(ValueError, match="fileReservedTime"):
        MessageStoreConfig.from_properties({"fileReservedTime": "soon"})
    with pytest.raises(ValueError, match="flushDiskType"):
        MessageStoreConfig.from_properties({"flushDiskType": "NOW"})


def test_consume_queue_file_size_rounds_up_to_units() -> None:
    assert MessageStoreConfig(mapped_file_size_consume_queue=41).consume_queue_file_size == 60


def test_parse_delay_levels_default_table() -> None:
    levels = parse_delay_levels(MessageStoreConfig().message_delay_level)
    assert len(levels) == 18
    assert levels[1] == 1000 and levels[2] == 5000 and levels[5] == 60000
    assert levels[17] == 3600 * 1000 and levels[18] == 2 * 3600 * 1000
    assert parse_delay_levels("2d 3s") == {1: 2 * 86400 * 1000, 2: 3000}
    with pytest.raises(ValueError):
        parse_delay_levels("1s 5x")


def test_tags_code_is_java_hash_or_delivery_time() -> None:
    levels = parse_delay_levels("1s 5s")
    assert compute_tags_code("T", {"TAGS": "TagA"}, 1000, levels) == 2598919  # "TagA".hashCode()
    assert compute_tags_code("T", {}, 1000, levels) == 0
    assert compute_tags_code("SCHEDULE_TOPIC_XXXX", {"DELAY": "2", "TAGS": "x"}, 1000, levels) == 6000
    assert compute_tags_code("SCHEDULE_TOPIC_XXXX", {"DELAY": "9"}, 1000, levels) == 6000  # clamped


def test_mapped_file_append_view_flush(tmp_path) -> None:
    q = MappedFileQueue(str(tmp_path / "q"), 4096)
    mf = q.get_last_mapped_file(0)
    assert mf is not None and os.path.basename(mf.path) == offset_to_file_name(0) == "0" * 20
    assert os.path.getsize(mf.path) == 4096
    assert mf.append(b"a" * 4000)
    assert not mf.append(b"b" * 200)
    view = mf.view(10, 5)
    assert view is not None and bytes(view) == b"aaaaa"
    view.release()
    assert mf.view(3990, 20) is None  # not written
    assert mf.flush(0) == 4000
    mf.wrote_position = 4096
    nxt = q.get_last_mapped_file(0)
    assert nxt is not None and nxt.file_from_offset == 4096
    assert os.path.basename(nxt.path) == "00000000000000004096"
    assert q.find_mapped_file_by_offset(5000) is nxt
    assert q.find_mapped_file_by_offset(100) is mf
    assert q.find_mapped_file_by_offset(9000) is None
    nxt.append(b"c" * 10)
    assert q.max_offset == 4106
    assert q.flush(0) == 4106
    q.close()


def test_mapped_file_queue_load_truncate_and_expire(tmp_path) -> None:
    q = MappedFileQueue(str(tmp_path), 4096)
    for _ in range(3):
        mf = q.get_last_mapped_file(0)
        assert mf is not None
        mf.append(b"x" * 4096)
    q.close()
    q = MappedFileQueue(str(tmp_path), 4096)
    q.load()
    assert [f.file_from_offset for f in q] == [0, 4096, 8192]
    q.truncate_dirty_files(4096 + 100)
    assert [f.file_from_offset for f in q] == [0, 4096]
    last = q.last
    assert last is not None and last.wrote_position == 100
    assert bytes(last.mm[100:200]) == bytes(100)  # the tail was zeroed
    assert not os.path.exists(tmp_path / offset_to_file_name(8192))
    gone = q.detach_expired_by_time(0, now_ms=2**62, clean_immediately=False)
    assert [f.file_from_offset for f in gone] == [0]  # never the last segment
    for f in gone:
        f.destroy()
    assert q.min_offset == 4096
    q.close()


def test_mapped_file_refuses_wrong_size(tmp_path) -> None:
    path = tmp_path / offset_to_file_name(0)
    path.write_bytes(b"x" * 100)
    with pytest.raises(ValueError, match="expected 4096"):
        MappedFile(str(path), 0, 4096, create=False)


def test_segment_appears_only_at_full_size(tmp_path, monkeypatch) -> None:
    """A segment is preallocated under ``<name>.creating`` and linked into place; a crash in
    between leaves only the ``.creating`` file, which the next load deletes."""
    q = MappedFileQueue(str(tmp_path), 4096)
    mf = q.get_last_mapped_file(0)
    assert mf is not None and os.path.getsize(mf.path) == 4096
    assert sorted(os.listdir(tmp_path)) == [offset_to_file_name(0)]
    with pytest.raises(FileExistsError):
        MappedFile(mf.path, 0, 4096, create=True)  # an existing segment is never replaced
    mf.append(b"x" * 4096)
    q.close()
    # What SIGKILL between the create and the preallocation leaves behind.
    (tmp_path / (offset_to_file_name(4096) + ".creating")).write_bytes(b"")
    q = MappedFileQueue(str(tmp_path), 4096)
    q.load()
    assert [f.file_from_offset for f in q] == [0]
    assert sorted(os.listdir(tmp_path)) == [offset_to_file_name(0)]
    # A failed preallocation (a full disk) leaves nothing either.
    def full(fd: int, offset: int, size: int) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(OSError, match="No space"):
        q.get_last_mapped_file(0)
    assert sorted(os.listdir(tmp_path)) == [offset_to_file_name(0)]
    q.close()


def test_reserve_creates_segments_ahead(tmp_path) -> None:
    q = MappedFileQueue(str(tmp_path), 100)
    q.reserve(250, 0)
    assert [f.file_from_offset for f in q.spares] == [0, 100, 200]
    assert q.files == []
    mf = q.get_last_mapped_file(0)
    assert mf is not None and mf.file_from_offset == 0 and len(q.spares) == 2
    q.destroy()


@given(st.integers(0, 2**40), st.integers(0, 2**40), st.integers(0, 2**40),
       st.integers(-2**40, 2**40), st.integers(0, 2**40), st.integers(0, 2**40))
def test_checkpoint_round_trip(tmp_path_factory, a, b, c, d, e, f) -> None:
    path = str(tmp_path_factory.mktemp("cp") / "checkpoint")
    cp = StoreCheckpoint(path)
    assert not cp.loaded_ok
    (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp,
     cp.physic_offset, cp.logics_offset, cp.index_offset) = a, b, c, d, e, f
    cp.flush()
    again = StoreCheckpoint(path)
    assert again.loaded_ok
    assert (again.physic_msg_timestamp, again.logics_msg_timestamp, again.index_msg_timestamp,
            again.physic_offset, again.logics_offset, again.index_offset) == (a, b, c, d, e, f)


def test_checkpoint_corrupt_reads_as_zero(tmp_path) -> None:
    path = str(tmp_path / "checkpoint")
    cp = StoreCheckpoint(path)
    cp.physic_offset = 1234
    cp.physic_msg_timestamp = 10_000
    cp.logics_msg_timestamp = 20_000
    cp.flush()
    assert StoreCheckpoint(path).min_timestamp == 7000
    data = bytearray((tmp_path / "checkpoint").read_bytes())
    data[3] ^= 0xFF
    (tmp_path / "checkpoint").write_bytes(bytes(data))
    bad = StoreCheckpoint(path)
    assert not bad.loaded_ok and bad.physic_offset == 0
    assert not os.path.exists(path + ".tmp")


def test_abort_file(tmp_path) -> None:
    a = AbortFile(str(tmp_path / "abort"))
    assert not a.exists()
    a.create()
    assert a.exists()
    a.remove()
    a.remove()
    assert not a.exists()
