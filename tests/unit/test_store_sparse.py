"""A store's disk footprint: sparse segments with blocks reserved ahead of the writes.

A broker with the default sizes (1 GiB commit-log segments, 6 MB consume-queue files, a
~420 MB index file) used to reserve all of it with ``posix_fallocate`` at creation: ~1.5 GB
of real disk for a handful of messages. Stock 4.9.7's files are sparse. Ours now are too,
and a full disk still fails a put with CREATE_MAPEDFILE_FAILED before any byte of it is
written (never SIGBUS in the mapping); ``warmMapedFileEnable=true`` reserves whole files.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from aiorocketmq.server.broker.config import load_broker_configs
from aiorocketmq.server.store.config import MessageStoreConfig
from aiorocketmq.server.store.inner import MessageExtBrokerInner, PutMessageStatus
from aiorocketmq.server.store.mapped_file import MappedFile, allocation_chunk
from aiorocketmq.server.store.message_store import MessageStore

pytestmark = pytest.mark.timeout(120)

HOST = "127.0.0.1:10911"
MiB = 1024 * 1024


def allocated_bytes(root: Path) -> int:
    """Disk blocks the files under ``root`` hold (what ``du`` counts), in bytes."""
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def apparent_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def inner(i: int, body: bytes = b"x" * 100, topic: str = "T") -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=topic, queue_id=i % 4, body=body,
                                 properties={"UNIQ_KEY": f"U{i:08d}", "KEYS": f"k{i}", "TAGS": "A"})


async def open_store(root: Path, **props: str) -> MessageStore:
    _, config = load_broker_configs({"storePathRootDir": str(root), **props})
    store = MessageStore(config, store_host=HOST, disk_used_ratio=lambda p: 0.1)
    await store.start()
    return store


async def test_default_sizes_take_a_few_mib_of_disk(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = await open_store(root)
    try:
        config = store.config
        assert config.mapped_file_size_commit_log == 1024 * MiB  # stock's default sizes
        assert config.max_index_num == 20_000_000
        for i in range(20):
            assert (await store.put_message(inner(i))).status is PutMessageStatus.PUT_OK
    finally:
        await store.shutdown()
    # Segment and index files keep their full (apparent) sizes: the on-disk format is stock's.
    segment = root / "commitlog" / f"{0:020d}"
    assert segment.stat().st_size == 1024 * MiB
    assert apparent_bytes(root) > 1400 * MiB
    # ... but they hold blocks only for what was written and the chunk ahead of it: 4 MiB of
    # commit log, the index's 20 MB of hash slots, 64 KiB per consume queue.
    used = allocated_bytes(root)
    assert used < 40 * MiB, f"{used / MiB:.1f} MiB on disk"
    # It restarts on those files and serves what was written.
    store = await open_store(root)
    try:
        assert store.get_max_offset_in_queue("T", 0) == 5
        assert (await store.put_message(inner(99))).status is PutMessageStatus.PUT_OK
    finally:
        await store.shutdown()


async def test_warm_mapped_file_enable_reserves_whole_files(tmp_path: Path) -> None:
    root = tmp_path / "store"
    small = {"mappedFileSizeCommitLog": str(16 * MiB), "mappedFileSizeConsumeQueue": "200000",
             "maxHashSlotNum": "50000", "maxIndexNum": "200000"}
    store = await open_store(root, warmMapedFileEnable="true", **small)
    try:
        assert store.config.warm_maped_file_enable
        assert (await store.put_message(inner(0))).status is PutMessageStatus.PUT_OK
    finally:
        await store.shutdown()
    assert allocated_bytes(root) >= apparent_bytes(root) - MiB  # the metadata files are small
    sparse = tmp_path / "sparse"
    store = await open_store(sparse, **small)
    try:
        assert (await store.put_message(inner(0))).status is PutMessageStatus.PUT_OK
    finally:
        await store.shutdown()
    assert allocated_bytes(sparse) < allocated_bytes(root) / 4


async def test_a_full_disk_fails_the_put_before_writing(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # 1 MiB segments reserve 64 KiB chunks: the disk fills in the middle of a segment.
    root = tmp_path / "store"
    store = await open_store(root, mappedFileSizeCommitLog=str(MiB))
    assert allocation_chunk(MiB) == 64 * 1024
    try:
        body = b"y" * 1000
        sent = 0
        while store.get_max_phy_offset() < 40 * 1024:
            assert (await store.put_message(inner(sent, body))).status is PutMessageStatus.PUT_OK
            sent += 1

        def full(fd: int, offset: int, length: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "posix_fallocate", full)
        statuses = []
        for i in range(60):  # 60 KB more: past the first 64 KiB chunk
            statuses.append((await store.put_message(inner(1000 + i, body))).status)
        refused = statuses.index(PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        assert all(s is PutMessageStatus.CREATE_MAPEDFILE_FAILED for s in statuses[refused:])
        end = store.get_max_phy_offset()
        assert end <= 64 * 1024  # nothing written past the reserved blocks
        monkeypatch.undo()
        # Everything acknowledged is there, and the log goes on once there is disk again.
        assert (await store.put_message(inner(5000, body))).status is PutMessageStatus.PUT_OK
        assert store.get_max_phy_offset() > end
        total = sum(store.get_max_offset_in_queue("T", q) for q in range(4))
        assert total == sent + refused + 1
    finally:
        await store.shutdown()


def test_mapped_file_reserves_ahead_of_appends(tmp_path: Path) -> None:
    size = 1024 * 1024
    mf = MappedFile(str(tmp_path / f"{0:020d}"), 0, size, create=True)
    try:
        chunk = allocation_chunk(size)
        assert mf.allocated == chunk
        assert os.stat(mf.path).st_size == size
        assert os.stat(mf.path).st_blocks * 512 <= chunk + 4096
        mf.append(b"z" * (chunk + 1))
        assert mf.allocated == 2 * chunk
        assert os.stat(mf.path).st_blocks * 512 >= 2 * chunk
    finally:
        mf.destroy()
    whole = MappedFile(str(tmp_path / f"{size:020d}"), size, size, create=True, preallocate=True)
    try:
        assert whole.allocated == size
        assert os.stat(whole.path).st_blocks * 512 >= size
    finally:
        whole.destroy()


def test_store_config_key_is_stocks() -> None:
    assert MessageStoreConfig().warm_maped_file_enable is False  # stock's default
    _, config = load_broker_configs({"warmMapedFileEnable": "true"})
    assert config.warm_maped_file_enable is True
