"""MessageStore end to end on real files in a temp dir: puts, pulls, queries, restarts, retention."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import AsyncIterator, Callable

import pytest

from aiorocketmq.protocol.codes import MessageSysFlag, SystemTopic
from aiorocketmq.protocol.message import (
    BLANK_MAGIC_CODE,
    create_offset_msg_id,
    decode_message,
    decode_messages,
    socket_address_to_bytes,
    tags_to_tags_code,
)
from aiorocketmq.server.store.config import MessageStoreConfig
from aiorocketmq.server.store.consume_queue import ConsumeQueue
from aiorocketmq.server.store.inner import MessageExtBrokerInner, PutMessageStatus
from aiorocketmq.server.store.message_store import GetMessageStatus, MessageStore

pytestmark = pytest.mark.timeout(120)

HOST = "127.0.0.1:10911"


class Clock:
    """Store timestamps that advance 10 ms per record, so time searches are deterministic."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 10
        return self.now


def make_config(root: str, **kw: object) -> MessageStoreConfig:
    opts: dict[str, object] = dict(
        store_path_root_dir=root,
        mapped_file_size_commit_log=4096,
        mapped_file_size_consume_queue=20 * 16,
        max_hash_slot_num=64,
        max_index_num=128,
        flush_interval_commit_log_ms=20,
        flush_interval_consume_queue_ms=20,
        clean_resource_interval_ms=3_600_000,
    )
    opts.update(kw)
    return MessageStoreConfig(**opts)  # type: ignore[arg-type]


@pytest.fixture
async def open_store(tmp_path) -> AsyncIterator[Callable[..., object]]:
    opened: list[MessageStore] = []

    async def factory(root: str | None = None, *, clock: Clock | None = None,
                      disk: Callable[[str], float] | None = None, **kw: object) -> MessageStore:
        cfg = make_config(root or str(tmp_path / "store"), **kw)
        store = MessageStore(cfg, store_host=HOST, clock_ms=clock, disk_used_ratio=disk or (lambda p: 0.1))
        await store.start()
        opened.append(store)
        return store

    yield factory
    for s in opened:
        await s.shutdown()


def msg(i: int, *, topic: str = "T", queue_id: int = 0, tags: str | None = "A", keys: str | None = None,
        body: bytes | None = None, **props: str) -> MessageExtBrokerInner:
    p = {"UNIQ_KEY": f"UNIQ{i:06d}"}
    if tags:
        p["TAGS"] = tags
    if keys:
        p["KEYS"] = keys
    p.update(props)
    return MessageExtBrokerInner(topic=topic, queue_id=queue_id, body=body if body is not None else f"body-{i}".encode() * 5,
                                 properties=p, born_timestamp=1000 + i,
                                 born_host=socket_address_to_bytes("10.0.0.1:5555"))


async def put_many(store: MessageStore, n: int, **kw: object) -> list[MessageExtBrokerInner]:
    out = []
    for i in range(n):
        m = msg(i, **kw)  # type: ignore[arg-type]
        r = await store.put_message(m)
        assert r.status is PutMessageStatus.PUT_OK, r
        out.append(m)
    return out


def pull_all(store: MessageStore, topic: str, queue_id: int, start: int = 0) -> list:
    out = []
    offset = start
    while True:
        r = store.get_message("g", topic, queue_id, offset, 32)
        if r.status is not GetMessageStatus.FOUND:
            r.release()
            return out
        out.extend(decode_messages(r.body()))
        offset = r.next_begin_offset
        r.release()


# ---------------------------------------------------------------- append / read


async def test_put_and_read_back_across_segments(open_store) -> None:
    store = await open_store()
    sent = await put_many(store, 120)
    assert len(store.commit_log.mfq.files) > 3  # 4 KiB segments rolled
    got = pull_all(store, "T", 0)
    assert [m.body for m in got] == [m.body for m in sent]
    assert [m.queue_offset for m in got] == list(range(120))
    for m, s in zip(got, sent, strict=True):
        assert m.commit_log_offset == s.commit_log_offset
        assert m.properties["UNIQ_KEY"] == s.properties["UNIQ_KEY"]
        assert m.store_host == HOST and m.born_host == "10.0.0.1:5555"
        assert m.offset_msg_id == s.msg_id == create_offset_msg_id(socket_address_to_bytes(HOST), s.commit_log_offset)
    # Every segment ends with the blank filler; no record straddles two segments.
    for mf in store.commit_log.mfq.files[:-1]:
        pos = 0
        while True:
            total = int.from_bytes(mf.mm[pos:pos + 4], "big", signed=True)
            magic = int.from_bytes(mf.mm[pos + 4:pos + 8], "big", signed=True)
            if magic == BLANK_MAGIC_CODE:
                assert pos + total == mf.file_size
                break
            pos += total
    assert store.look_message_by_offset(sent[50].commit_log_offset).body == sent[50].body
    raw = store.select_one_message_by_offset(sent[7].commit_log_offset)
    assert raw is not None and decode_message(raw)[0].properties["UNIQ_KEY"] == "UNIQ000007"
    assert store.look_message_by_offset(store.get_max_phy_offset()) is None
    assert store.get_commit_log_offset_in_queue("T", 0, 5) == sent[5].commit_log_offset


async def test_batch_gets_consecutive_offsets(open_store) -> None:
    store = await open_store()
    await put_many(store, 3, queue_id=1)
    batch = [msg(100 + i, queue_id=1, keys=f"bk{i}") for i in range(5)]
    r = await store.put_messages(batch)
    assert r.status is PutMessageStatus.PUT_OK
    ar = r.append_result
    assert ar is not None and ar.msg_num == 5 and ar.logics_offset == 3
    assert ar.msg_id == ",".join(ar.msg_ids) and len(ar.msg_ids) == 5
    assert [m.queue_offset for m in batch] == [3, 4, 5, 6, 7]
    got = pull_all(store, "T", 1)
    assert [m.queue_offset for m in got] == list(range(8))
    assert [m.commit_log_offset for m in got[3:]] == [m.commit_log_offset for m in batch]
    mixed = [msg(1, queue_id=1), msg(2, queue_id=2)]
    assert (await store.put_messages(mixed)).status is PutMessageStatus.MESSAGE_ILLEGAL


async def test_illegal_messages_are_refused(open_store) -> None:
    store = await open_store(max_message_size=1024)
    assert (await store.put_message(msg(1, topic="x" * 128))).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert (await store.put_message(msg(1, body=b"x" * 2000))).status is PutMessageStatus.MESSAGE_ILLEGAL
    big = msg(1, BIG="v" * 33000)
    assert (await store.put_message(big)).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.get_max_phy_offset() == 0


# ---------------------------------------------------------------- consume queue, filters, statuses


async def test_tags_codes_and_filter(open_store) -> None:
    store = await open_store()
    for i in range(10):
        await store.put_message(msg(i, tags="A" if i % 2 else "B"))
    await store.put_message(msg(10, tags=None))
    cq = store.find_consume_queue("T", 0)
    assert cq is not None
    assert cq.get_unit(1)[2] == tags_to_tags_code("A") and cq.get_unit(0)[2] == tags_to_tags_code("B")
    assert cq.get_unit(10)[2] == 0
    code_a = tags_to_tags_code("A")
    r = store.get_message("g", "T", 0, 0, 32, lambda code: code == code_a)
    assert r.status is GetMessageStatus.FOUND
    assert [m.properties["TAGS"] for m in decode_messages(r.body())] == ["A"] * 5
    assert r.next_begin_offset == 11
    r.release()


async def test_get_message_status_table(open_store) -> None:
    """Every row of docs/PROTOCOL.md 6.2's store lookup table."""
    store = await open_store(mapped_file_size_consume_queue=20 * 4)
    S = GetMessageStatus
    r = store.get_message("g", "nope", 0, 5, 32)
    assert (r.status, r.next_begin_offset) == (S.NO_MATCHED_LOGIC_QUEUE, 0)
    store.find_or_create_consume_queue("T", 3)
    r = store.get_message("g", "T", 3, 5, 32)
    assert (r.status, r.next_begin_offset) == (S.NO_MESSAGE_IN_QUEUE, 0)
    await put_many(store, 40)
    assert len(store.commit_log.mfq.files) > 1
    r = store.get_message("g", "T", 0, 40, 32)
    assert (r.status, r.next_begin_offset, r.max_offset) == (S.OFFSET_OVERFLOW_ONE, 40, 40)
    r = store.get_message("g", "T", 0, 50, 32)
    assert (r.status, r.next_begin_offset) == (S.OFFSET_OVERFLOW_BADLY, 40)
    r = store.get_message("g", "T", 0, 1, 32)
    assert (r.status, r.next_begin_offset, r.message_count) == (S.FOUND, 4, 3)  # to the segment's end
    r.release()
    r = store.get_message("g", "T", 0, 0, 32, lambda code: False)
    assert (r.status, r.next_begin_offset, r.message_count) == (S.NO_MATCHED_MESSAGE, 4, 0)
    # A unit whose segment is unreadable.
    cq = store.find_consume_queue("T", 0)
    assert cq is not None
    middle = cq.mfq.files.pop(1)
    r = store.get_message("g", "T", 0, 5, 32)
    assert (r.status, r.next_begin_offset) == (S.OFFSET_FOUND_NULL, 8)
    cq.mfq.files.insert(1, middle)
    # Commit-log segments deleted before the queue minimum was corrected.
    store.execute_delete_files_manually()
    store.config.file_reserved_time = 0
    assert await store.delete_expired_commit_log_files() > 0
    r = store.get_message("g", "T", 0, 0, 32)
    assert r.status is S.MESSAGE_WAS_REMOVING
    await store.clean_consume_queues()
    r = store.get_message("g", "T", 0, 0, 32)
    assert r.status is S.OFFSET_TOO_SMALL
    assert r.next_begin_offset == r.min_offset == store.get_min_offset_in_queue("T", 0) > 0


async def test_transfer_limits_and_scan_cap(open_store) -> None:
    store = await open_store(mapped_file_size_commit_log=1024 * 1024, mapped_file_size_consume_queue=20 * 2000,
                             max_transfer_bytes_on_message_in_memory=1500)
    await put_many(store, 1000, body=b"z" * 100)
    r = store.get_message("g", "T", 0, 0, 64)
    assert r.message_count == 6 and r.buffer_total_size <= 1500  # the byte limit
    r.release()
    store.config.max_transfer_bytes_on_message_in_memory = 256 * 1024
    r = store.get_message("g", "T", 0, 0, 64)
    assert r.message_count == 32  # maxTransferCountOnMessageInMemory
    r.release()
    r = store.get_message("g", "T", 0, 0, 5)
    assert (r.message_count, r.next_begin_offset) == (5, 5)
    r.release()
    store.config.max_transfer_bytes_on_message_in_memory = 10
    r = store.get_message("g", "T", 0, 0, 64)
    assert r.message_count == 1  # always at least one message
    r.release()
    r = store.get_message("g", "T", 0, 0, 32, lambda code: False)
    assert (r.status, r.next_begin_offset) == (GetMessageStatus.NO_MATCHED_MESSAGE, 800)  # 16000 bytes of units


async def test_transactional_and_delayed_dispatch(open_store) -> None:
    store = await open_store()
    prepared = msg(1, keys="txkey")
    prepared.sys_flag = MessageSysFlag.TRANSACTION_PREPARED_TYPE
    assert (await store.put_message(prepared)).status is PutMessageStatus.PUT_OK
    rollback = msg(2, keys="txkey")
    rollback.sys_flag = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    await store.put_message(rollback)
    assert store.get_max_offset_in_queue("T", 0) == 0 and prepared.queue_offset == 0
    q = store.query_message("T", "txkey", 32, 0, 2**62)
    assert [decode_message(v)[0].commit_log_offset for v in q.message_buffers] == [prepared.commit_log_offset]
    q.release()
    delayed = msg(3, queue_id=2, DELAY="3")
    await store.put_message(delayed)
    assert (delayed.topic, delayed.queue_id) == (SystemTopic.SCHEDULE_TOPIC, 2)
    unit = store.find_consume_queue(SystemTopic.SCHEDULE_TOPIC, 2).get_unit(0)
    assert unit[2] == delayed.store_timestamp + 10_000
    parked = store.look_message_by_offset(delayed.commit_log_offset)
    assert parked.properties["REAL_TOPIC"] == "T" and parked.properties["REAL_QID"] == "2"


async def test_arriving_listener(open_store) -> None:
    store = await open_store()
    seen: list[tuple] = []
    store.set_message_arriving_listener(lambda *a: seen.append(a[:5]))
    m = msg(0, queue_id=4, tags="X")
    await store.put_message(m)
    assert seen == [("T", 4, 1, tags_to_tags_code("X"), m.store_timestamp)]


async def test_search_offset_by_timestamp(open_store) -> None:
    clock = Clock()
    store = await open_store(clock=clock)
    sent = await put_many(store, 30)
    times = [m.store_timestamp for m in sent]
    assert store.get_offset_in_queue_by_time("T", 0, times[0] - 1000) == 0
    assert store.get_offset_in_queue_by_time("T", 0, times[17]) == 17
    assert store.get_offset_in_queue_by_time("T", 0, times[17] - 5) == 17
    assert store.get_offset_in_queue_by_time("T", 0, times[-1] + 1) == 30
    assert store.get_offset_in_queue_by_time("none", 0, 0) == 0
    assert store.get_earliest_message_time("T", 0) == times[0]
    assert store.get_message_store_timestamp("T", 0, 9) == times[9]
    assert store.get_earliest_message_time("none", 0) == -1


async def test_query_by_key_and_unique_key(open_store) -> None:
    store = await open_store()
    for i in range(40):
        await store.put_message(msg(i, queue_id=i % 4, keys=f"order-{i % 5} k{i}"))
    q = store.query_message("T", "order-3", 32, 0, 2**62)
    got = decode_messages(q.body())
    assert sorted(int(m.properties["UNIQ_KEY"][4:]) for m in got) == [i for i in range(40) if i % 5 == 3]
    assert q.index_last_update_phyoffset == store.get_max_phy_offset() - store.look_message_by_offset(
        q.index_last_update_phyoffset).store_size
    q.release()
    q = store.query_message("T", "UNIQ000017", 32, 0, 2**62)
    assert [m.msg_id for m in decode_messages(q.body())] == ["UNIQ000017"]
    q.release()
    assert store.query_message("Other", "order-3", 32, 0, 2**62).message_buffers == []
    assert len(store.query_message("T", "order-1", 3, 0, 2**62).message_buffers) == 3


# ---------------------------------------------------------------- restarts


async def test_clean_restart_keeps_everything(open_store, tmp_path) -> None:
    root = str(tmp_path / "s")
    store = await open_store(root)
    sent = await put_many(store, 80, keys="kk")
    for i in range(20):
        await store.put_message(msg(i, queue_id=1))
    await store.shutdown()
    assert not _exists(os.path.join(root, "abort"))
    again = await open_store(root)
    assert again.last_exit_ok
    assert again.get_max_offset_in_queue("T", 0) == 80 and again.get_max_offset_in_queue("T", 1) == 20
    assert [m.body for m in pull_all(again, "T", 0)] == [m.body for m in sent]
    assert len(again.query_message("T", "kk", 64, 0, 2**62).message_buffers) == 64
    m = msg(500)
    await again.put_message(m)
    assert m.queue_offset == 80 and m.commit_log_offset > sent[-1].commit_log_offset
    assert again.get_max_offset_in_queue("T", 0) == 81


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _overwrite(path: str, pos: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)


async def _crash_copy(store: MessageStore) -> None:
    """Stop a store the way a crash would leave it: files flushed, abort file still there."""
    await store.shutdown()
    store.abort_file.create()


async def test_abnormal_restart_cuts_garbage_and_torn_record(open_store, tmp_path) -> None:
    root = str(tmp_path / "s")
    store = await open_store(root)
    sent = await put_many(store, 50, keys="kk")
    end = store.get_max_phy_offset()
    await _crash_copy(store)
    last = sent[-1]
    # Tear the last record (zero its second half) and leave garbage after it.
    seg = os.path.join(root, "commitlog", f"{(end // 4096) * 4096:020d}")
    mid = last.commit_log_offset % 4096 + 60
    _overwrite(seg, mid, bytes(end % 4096 - mid) + b"\xde\xad\xbe\xef" * 10)
    os.unlink(os.path.join(root, "checkpoint"))  # nothing is known durable: recheck all
    again = await open_store(root)
    assert not again.last_exit_ok
    assert again.get_max_phy_offset() == last.commit_log_offset
    assert again.get_max_offset_in_queue("T", 0) == 49
    assert [m.body for m in pull_all(again, "T", 0)] == [m.body for m in sent[:49]]
    assert len(again.query_message("T", "kk", 64, 0, 2**62).message_buffers) == 49
    m = msg(999)
    assert (await again.put_message(m)).status is PutMessageStatus.PUT_OK
    assert (m.queue_offset, m.commit_log_offset) == (49, last.commit_log_offset)


async def test_abnormal_restart_rebuilds_queues_and_index_from_log(open_store, tmp_path) -> None:
    root = str(tmp_path / "s")
    store = await open_store(root)
    sent = await put_many(store, 60, keys="kk")
    await put_many(store, 10, queue_id=3)
    await _crash_copy(store)
    import shutil

    shutil.rmtree(os.path.join(root, "consumequeue"))
    shutil.rmtree(os.path.join(root, "index"))
    os.unlink(os.path.join(root, "checkpoint"))
    seg = os.path.join(root, "commitlog", f"{(sent[-1].commit_log_offset // 4096) * 4096:020d}")
    _overwrite(seg, 4096 - 16, b"\x01" * 16)  # garbage at the very end of the last segment
    again = await open_store(root)
    assert not again.last_exit_ok
    assert [m.body for m in pull_all(again, "T", 0)] == [m.body for m in sent]
    assert again.get_max_offset_in_queue("T", 3) == 10
    q = again.query_message("T", "UNIQ000033", 32, 0, 2**62)
    assert [m.queue_offset for m in decode_messages(q.body())] == [33]
    q.release()


async def test_abnormal_restart_from_checkpoint_redispatches_tail(open_store, tmp_path) -> None:
    root = str(tmp_path / "s")
    store = await open_store(root)
    first = await put_many(store, 20)
    await store._flush._flush_logics_once()  # the checkpoint now covers the first 20
    checkpoint_bytes = (tmp_path / "s" / "checkpoint").read_bytes()
    later = [msg(100 + i) for i in range(15)]
    for m in later:
        await store.put_message(m)
    await _crash_copy(store)
    # Put back the older checkpoint and forget the queue units written after it, as a
    # crash before the next consume-queue flush would.
    (tmp_path / "s" / "checkpoint").write_bytes(checkpoint_bytes)
    cq = ConsumeQueue("T", 0, os.path.join(root, "consumequeue"), store.config.consume_queue_file_size)
    cq.load()
    cq.recover()
    cq.truncate_dirty_logic_files(later[0].commit_log_offset)
    assert cq.max_offset == 20
    cq.close()
    again = await open_store(root)
    assert not again.last_exit_ok
    assert [m.body for m in pull_all(again, "T", 0)] == [m.body for m in first + later]
    q = again.query_message("T", "UNIQ000107", 32, 0, 2**62)
    assert [m.queue_offset for m in decode_messages(q.body())] == [27]
    q.release()


async def test_abnormal_restart_redispatches_only_past_the_checkpoint(open_store, tmp_path) -> None:
    # A crash leaves the one index file holding entries newer than the checkpoint. The
    # store used to destroy it and re-dispatch the whole log (every record since offset
    # 0); it now cuts the file back to the checkpoint and re-dispatches only the tail.
    root = str(tmp_path / "s")
    store = await open_store(root, max_index_num=4096)
    first = await put_many(store, 60, keys="old")
    await store._flush._flush_logics_once()
    checkpoint_bytes = (tmp_path / "s" / "checkpoint").read_bytes()
    later = [msg(100 + i, keys="new") for i in range(15)]
    for m in later:
        await store.put_message(m)
    await _crash_copy(store)
    (tmp_path / "s" / "checkpoint").write_bytes(checkpoint_bytes)
    again = await open_store(root, max_index_num=4096)
    assert not again.last_exit_ok
    assert again.recovery_redispatched <= len(later) + 1
    assert [m.body for m in pull_all(again, "T", 0)] == [m.body for m in first + later]
    for key, n in (("old", 60), ("new", 15), ("UNIQ000010", 1), ("UNIQ000107", 1)):
        q = again.query_message("T", key, 100, 0, 2**62)
        assert len(decode_messages(q.body())) == n, key
        q.release()
    m = msg(200, keys="new")
    assert (await again.put_message(m)).status is PutMessageStatus.PUT_OK
    q = again.query_message("T", "new", 100, 0, 2**62)
    assert len(decode_messages(q.body())) == 16
    q.release()


def _block_store_threads(store: MessageStore, gate: threading.Event) -> None:
    """Occupy every store I/O thread, so no flush can run until ``gate`` is set."""
    assert store._executor is not None
    for _ in range(store._executor._max_workers):
        store._executor.submit(gate.wait, 30)


# ---------------------------------------------------------------- flushing


async def test_sync_flush_group_commit(open_store) -> None:
    store = await open_store(flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=1024 * 1024)
    before = store.fsync_count
    results = await asyncio.gather(*(store.put_message(msg(i, queue_id=i % 4)) for i in range(300)))
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    flushes = store.fsync_count - before
    assert 1 <= flushes < 30  # one fsync served many puts
    assert store.commit_log.mfq.flushed_where >= store.get_max_phy_offset()
    no_wait = msg(1000, WAIT="false")
    assert (await store.put_message(no_wait)).status is PutMessageStatus.PUT_OK


async def test_sync_flush_timeout(open_store) -> None:
    store = await open_store(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=50)
    gate = threading.Event()
    _block_store_threads(store, gate)
    try:
        r = await store.put_message(msg(1))
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert r.is_ok  # written, just not known durable
        assert store.get_max_offset_in_queue("T", 0) == 1
    finally:
        gate.set()


async def test_async_flush_put_does_not_wait(open_store) -> None:
    store = await open_store()
    gate = threading.Event()
    # Every store thread held until the gate opens, with no time limit, and the gate opens
    # only after the puts returned: a put that waited for a flush would never return.
    assert store._executor is not None
    for _ in range(store._executor._max_workers):
        store._executor.submit(gate.wait)
    try:
        await asyncio.wait_for(put_many(store, 50), 20)  # each PUT_OK
    finally:
        gate.set()


# ---------------------------------------------------------------- retention and disk


async def test_retention_deletes_old_files_and_moves_min_offsets(open_store) -> None:
    store = await open_store(file_reserved_time=0, mapped_file_size_consume_queue=20 * 8)
    sent = await put_many(store, 100, keys="kk")
    files_before = len(store.commit_log.mfq.files)
    store.execute_delete_files_manually()
    deleted = await store.clean_once()
    assert deleted == files_before - 1
    min_phy = store.get_min_phy_offset()
    assert min_phy == store.commit_log.mfq.files[0].file_from_offset > 0
    min_q = store.get_min_offset_in_queue("T", 0)
    assert sent[min_q].commit_log_offset >= min_phy > sent[min_q - 1].commit_log_offset
    cq = store.find_consume_queue("T", 0)
    assert cq.mfq.files[0].file_from_offset // 20 > 0  # queue files below the minimum are gone
    got = pull_all(store, "T", 0, start=min_q)
    assert [m.body for m in got] == [m.body for m in sent[min_q:]]
    q = store.query_message("T", "kk", 64, 0, 2**62)
    assert all(decode_message(v)[0].commit_log_offset >= min_phy for v in q.message_buffers)
    q.release()


async def test_retention_waits_for_the_hour(open_store) -> None:
    store = await open_store(file_reserved_time=0, delete_when="99")
    await put_many(store, 60)
    assert await store.clean_once() == 0
    assert store.get_min_phy_offset() == 0


async def test_full_disk_refuses_puts(open_store) -> None:
    ratio = {"v": 0.5}
    store = await open_store(disk=lambda p: ratio["v"])
    await put_many(store, 3)
    ratio["v"] = 0.95
    await store.clean_once()
    before = store.get_max_phy_offset()
    assert (await store.put_message(msg(9))).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert store.get_max_phy_offset() == before
    ratio["v"] = 0.5
    await store.clean_once()
    assert (await store.put_message(msg(9))).status is PutMessageStatus.PUT_OK


async def test_enospc_on_new_segment_keeps_data(open_store, monkeypatch) -> None:
    store = await open_store()
    sent = await put_many(store, 10)

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    statuses = []
    for i in range(60):
        statuses.append((await store.put_message(msg(100 + i))).status)
    assert PutMessageStatus.CREATE_MAPEDFILE_FAILED in statuses
    ok = statuses.index(PutMessageStatus.CREATE_MAPEDFILE_FAILED)
    assert all(s is PutMessageStatus.CREATE_MAPEDFILE_FAILED for s in statuses[ok:])
    monkeypatch.undo()
    got = pull_all(store, "T", 0)
    assert [m.body for m in got[:10]] == [m.body for m in sent]
    assert len(got) == 10 + ok
    r = await store.put_message(msg(999))
    assert r.status is PutMessageStatus.PUT_OK and r.append_result.logics_offset == 10 + ok


async def test_put_refused_when_not_running(tmp_path) -> None:
    store = MessageStore(make_config(str(tmp_path)), store_host=HOST)
    assert (await store.put_message(msg(1))).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    await store.start()
    await store.shutdown()
    await store.shutdown()
    assert (await store.put_message(msg(1))).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


async def test_one_store_per_directory(open_store, tmp_path) -> None:
    root = str(tmp_path / "s")
    await open_store(root)
    second = MessageStore(make_config(root), store_host=HOST)
    with pytest.raises(RuntimeError, match="in use"):
        await second.start()


async def test_delete_topics_and_runtime_info(open_store) -> None:
    store = await open_store()
    await put_many(store, 5, topic="A")
    await put_many(store, 5, topic="B")
    assert store.clean_unused_topic({"A"}) == 1
    assert store.get_max_offset_in_queue("B", 0) == 0
    assert store.get_max_offset_in_queue("A", 0) == 5
    info = store.runtime_info()
    assert info["commitLogMaxOffset"] == str(store.get_max_phy_offset())
    assert store.dispatch_behind_bytes() == 0


# -- deferred batch dispatch (defer_batch_dispatch, as the broker runs the store) --------


async def test_deferred_batch_is_dispatched_on_the_next_iteration(open_store) -> None:
    store = await open_store()
    store.defer_batch_dispatch = True
    arrived: list[int] = []
    store.set_message_arriving_listener(
        lambda topic, qid, max_offset, tags_code, ts, props: arrived.append(max_offset))
    batch = [msg(i) for i in range(5)]
    r = store.put_messages_nowait(batch)
    assert r.status is PutMessageStatus.PUT_OK  # type: ignore[union-attr]
    assert r.append_result.logics_offset == 0 and r.append_result.msg_num == 5  # type: ignore[union-attr]
    # Answered before the units are written ...
    assert store.get_max_offset_in_queue("T", 0) == 0 and arrived == []
    await asyncio.sleep(0)
    # ... and written, with the index and the arriving calls, one iteration later.
    assert store.get_max_offset_in_queue("T", 0) == 5 and arrived == [1, 2, 3, 4, 5]
    assert [m.body for m in pull_all(store, "T", 0)] == [m.body for m in batch]
    found = store.query_message("T", "UNIQ000003", 32, 0, 2**62)
    assert len(found.message_buffers) == 1
    found.release()


async def test_a_later_put_dispatches_the_deferred_batch_first(open_store) -> None:
    """A single put to the same queue in the same iteration: the queue stays in order."""
    store = await open_store()
    store.defer_batch_dispatch = True
    assert store.put_messages_nowait([msg(i) for i in range(3)]).status is PutMessageStatus.PUT_OK  # type: ignore[union-attr]
    single = msg(3)
    assert store.put_message_nowait(single).status is PutMessageStatus.PUT_OK  # type: ignore[union-attr]
    assert single.queue_offset == 3
    assert store.get_max_offset_in_queue("T", 0) == 4
    assert [m.body for m in pull_all(store, "T", 0)] == [msg(i).body for i in range(4)]
    await asyncio.sleep(0)
    assert store.get_max_offset_in_queue("T", 0) == 4


async def test_deleting_a_topic_dispatches_its_deferred_batch_first(open_store) -> None:
    """Deleted in the same iteration as its batch's put: the topic's queue stays deleted."""
    store = await open_store()
    store.defer_batch_dispatch = True
    store.put_messages_nowait([msg(i) for i in range(4)])
    assert store.delete_topics(["T"]) == 1
    await asyncio.sleep(0)
    assert ("T", 0) not in store.consume_queue_table
    assert store.get_max_offset_in_queue("T", 0) == 0


@pytest.mark.parametrize("units_in_one_call", [True, False])
async def test_batch_listener_is_called_once_with_the_stamped_members(
        open_store, monkeypatch: pytest.MonkeyPatch, units_in_one_call: bool) -> None:
    """Units written by one call (``_put.cq_units``): the batch listener once; else (no C
    module) the per-put listener for each member, as before."""
    from aiorocketmq.server.store import consume_queue
    from tests.unit.test_store_put_native import _native
    monkeypatch.setattr(consume_queue, "_cq_units",
                        _native().cq_units if units_in_one_call else None)
    store = await open_store()
    singles: list[int] = []
    batches: list[tuple[str, int, list[tuple[int, int]]]] = []
    store.set_message_arriving_listener(
        lambda topic, qid, max_offset, tags_code, ts, props: singles.append(max_offset),
        lambda topic, qid, members: batches.append(
            (topic, qid, [(m.queue_offset, m.tags_code) for m in members])))
    assert (await store.put_message(msg(0))).status is PutMessageStatus.PUT_OK
    assert singles == [1]  # a single put: the per-put listener
    tags = ["A", "B", "A"]
    r = store.put_messages_nowait([msg(i, tags=t) for i, t in enumerate(tags, 1)])
    assert r.status is PutMessageStatus.PUT_OK  # type: ignore[union-attr]
    if units_in_one_call:
        assert batches == [("T", 0, [(i, tags_to_tags_code(t)) for i, t in enumerate(tags, 1)])]
        assert singles == [1]
    else:
        assert batches == [] and singles == [1, 2, 3, 4]
