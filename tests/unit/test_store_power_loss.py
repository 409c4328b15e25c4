"""SYNC_FLUSH: a put is acknowledged only after its bytes are on disk, and survives power loss.

kill -9 keeps the page cache, so it cannot tell an fsync from none. Here the store's
``MappedFile.durable_observer`` records, per file, how far msync + fdatasync have made
it durable. Every put that answers PUT_OK must find its record's bytes inside that range
at the moment it returns. Then power loss is simulated on a copy of the store: every
byte of every mapped file beyond what was made durable is zeroed (the page cache is
lost), the abort file stays, and the restarted store must serve every acknowledged
message. ASYNC_FLUSH is the control: its puts do not wait, so the first check must see
acknowledgements ahead of the disk.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from aiorocketmq.protocol.message import socket_address_to_bytes
from aiorocketmq.server.store.config import MessageStoreConfig
from aiorocketmq.server.store.inner import MessageExtBrokerInner, PutMessageStatus
from aiorocketmq.server.store.mapped_file import MappedFile
from aiorocketmq.server.store.message_store import GetMessageStatus, MessageStore

pytestmark = pytest.mark.timeout(300)

HOST = "127.0.0.1:10911"
SEGMENT = 64 * 1024


class Durable:
    """path -> end of the bytes made durable, fed by the store's flushing threads."""

    def __init__(self) -> None:
        self.ends: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, path: str, end: int) -> None:
        with self._lock:
            if end > self.ends.get(path, 0):
                self.ends[path] = end

    def covers(self, path: str, end: int) -> bool:
        with self._lock:
            return self.ends.get(path, 0) >= end


@contextmanager
def observing() -> Iterator[Durable]:
    durable = Durable()
    MappedFile.durable_observer = durable
    try:
        yield durable
    finally:
        MappedFile.durable_observer = None


def config(root: str, flush: str) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=root, flush_disk_type=flush, mapped_file_size_commit_log=SEGMENT,
        mapped_file_size_consume_queue=20 * 50, max_hash_slot_num=64, max_index_num=400,
        flush_interval_commit_log_ms=200, flush_interval_consume_queue_ms=50,
        clean_resource_interval_ms=3_600_000)


def inner(i: int) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(
        topic="Power", queue_id=i % 3, body=f"payload-{i:05d}".encode() * 20,
        properties={"UNIQ_KEY": f"P{i:06d}", "KEYS": f"k{i}"},
        born_host=socket_address_to_bytes("10.0.0.1:5555"))


def segment_path(root: str, offset: int) -> str:
    return os.path.join(root, "commitlog", f"{offset - offset % SEGMENT:020d}")


async def put_and_check(store: MessageStore, root: str, durable: Durable, n: int
                        ) -> tuple[list[tuple[int, MessageExtBrokerInner]], int]:
    """Concurrent puts; returns the acknowledged ones and how many were not yet durable."""
    acked: list[tuple[int, MessageExtBrokerInner]] = []
    ahead = 0

    async def put(i: int) -> None:
        nonlocal ahead
        m = inner(i)
        r = await store.put_message(m)
        if r.status is PutMessageStatus.PUT_OK:
            assert r.append_result is not None
            end = m.commit_log_offset + r.append_result.wrote_bytes
            rel_end = end - (m.commit_log_offset - m.commit_log_offset % SEGMENT)
            if not durable.covers(segment_path(root, m.commit_log_offset), rel_end):
                ahead += 1
            acked.append((i, m))

    for start in range(0, n, 8):
        await asyncio.gather(*(put(i) for i in range(start, min(start + 8, n))))
    return acked, ahead


def lose_power(src: str, dst: str, durable: Durable) -> None:
    """Copy the store as a power cut leaves it: beyond each file's durable end, zeros."""
    shutil.copytree(src, dst)
    for dirpath, _dirs, names in os.walk(dst):
        for name in names:
            path = os.path.join(dirpath, name)
            original = os.path.join(src, os.path.relpath(path, dst))
            if not (name.isdigit() and len(name) in (17, 20)):
                continue  # checkpoint, abort, lock: written with their own fsync
            keep = durable.ends.get(original, 0)
            size = os.path.getsize(path)
            with open(path, "r+b") as fh:
                fh.seek(keep)
                fh.write(bytes(size - keep))


async def test_sync_flush_acknowledges_only_durable_bytes_and_survives_power_loss(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    with observing() as durable:
        store = MessageStore(config(root, "SYNC_FLUSH"), store_host=HOST, disk_used_ratio=lambda p: 0.1)
        await store.start()
        try:
            acked, ahead = await put_and_check(store, root, durable, 600)
            assert len(acked) == 600
            assert ahead == 0, f"{ahead} SEND_OKs came before their bytes were flushed"
            # Power is cut while the store runs: whatever the flushers made durable is all.
            lose_power(root, str(tmp_path / "after"), durable)
        finally:
            await store.shutdown()
    after = str(tmp_path / "after")
    assert Path(after, "abort").exists()  # noqa: ASYNC240
    again = MessageStore(config(after, "SYNC_FLUSH"), store_host=HOST, disk_used_ratio=lambda p: 0.1)
    await again.start()
    try:
        assert not again.last_exit_ok
        for i, m in acked:
            got = again.look_message_by_offset(m.commit_log_offset)
            assert got is not None and got.body == inner(i).body, f"acknowledged message {i} lost"
            r = again.get_message("g", "Power", m.queue_id, m.queue_offset, 1)
            assert r.status is GetMessageStatus.FOUND, (i, r.status)
            r.release()
    finally:
        await again.shutdown()


async def test_async_flush_acknowledges_ahead_of_the_disk(tmp_path: Path) -> None:
    # The control: the observation above can see an acknowledgement that precedes its flush.
    root = str(tmp_path / "s")
    with observing() as durable:
        store = MessageStore(config(root, "ASYNC_FLUSH"), store_host=HOST, disk_used_ratio=lambda p: 0.1)
        await store.start()
        try:
            acked, ahead = await put_and_check(store, root, durable, 200)
        finally:
            await store.shutdown()
    assert len(acked) == 200 and ahead > 0
