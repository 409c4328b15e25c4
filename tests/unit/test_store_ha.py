"""Replication pieces without sockets: the HA wire codec, the SYNC_MASTER group transfer,
and a slave store rebuilt from a master's commit-log bytes (server/store/ha)."""

from __future__ import annotations

import asyncio
import os
import random
import struct
from collections.abc import AsyncIterator, Callable

import pytest

from aiorocketmq.server.store.ha.group_transfer import GroupTransferService
from aiorocketmq.server.store.ha.wire import (
    HAWireError,
    OffsetReportDecoder,
    SlaveFrameDecoder,
    encode_frame_header,
    encode_offset_report,
)
from aiorocketmq.server.store.inner import PutMessageStatus
from aiorocketmq.server.store.message_store import MessageStore
from tests.unit.test_store_message_store import HOST, make_config, msg, pull_all

pytestmark = pytest.mark.timeout(60)


# -- wire -------------------------------------------------------------------------------


def test_offset_reports_byte_by_byte_and_last_wins() -> None:
    stream = encode_offset_report(7) + encode_offset_report(1 << 40) + encode_offset_report(99)[:5]
    d = OffsetReportDecoder()
    seen = [r for b in stream if (r := d.feed(bytes([b]))) is not None]
    assert seen == [7, 1 << 40]
    assert d.feed(encode_offset_report(99)[5:]) == 99
    # Several whole reports in one read: only the last counts (ReadSocketService).
    d = OffsetReportDecoder()
    assert d.feed(encode_offset_report(1) + encode_offset_report(2) + b"\x00") == 2


def test_wire_layout_is_big_endian_offset_then_size() -> None:
    assert encode_offset_report(0x0102030405060708) == bytes(range(1, 9))
    assert encode_frame_header(5, 3) == struct.pack(">qi", 5, 3) and len(encode_frame_header(0, 0)) == 12


@pytest.mark.parametrize("chunk", [1, 5, 12, 13, 1000])
def test_slave_frames_in_any_chunking(chunk: int) -> None:
    frames = [(0, b"abc"), (3, b""), (3, os.urandom(300)), (303, b"z")]
    stream = b"".join(encode_frame_header(o, len(b)) + b for o, b in frames)
    d = SlaveFrameDecoder()
    got: list[tuple[int, bytes]] = []
    bodies = []
    for i in range(0, len(stream), chunk):
        d.feed(stream[i:i + chunk])
        while (f := d.next_frame()) is not None:
            bodies.append(f[1])  # views stay valid across later feeds
            got.append((f[0], bytes(f[1])))
    assert got == frames
    assert [bytes(b) for b in bodies] == [b for _, b in frames]
    assert d.buffered == 0


def test_slave_frame_with_negative_size_is_refused() -> None:
    d = SlaveFrameDecoder()
    d.feed(struct.pack(">qi", 0, -1))
    with pytest.raises(HAWireError):
        d.next_frame()


# -- group transfer ---------------------------------------------------------------------


async def test_group_transfer_wakes_in_order_and_times_out() -> None:
    gt = GroupTransferService(timeout_ms=200)
    waited: list[float] = []
    gt.wait_observer = waited.append
    a, b, c = gt.submit(100), gt.submit(200), gt.submit(300)
    gt.notify_acked(150)
    await asyncio.sleep(0)
    assert a.result() is True and not b.done() and len(gt) == 2
    gt.notify_acked(200)
    assert b.result() is True and not c.done()
    assert gt.submit(50).result() is True  # already covered
    assert await asyncio.wait_for(c, 2) is False  # slaveTimeout
    assert len(gt) == 0 and len(waited) == 3


async def test_group_transfer_resolves_with_the_callers_values() -> None:
    gt = GroupTransferService(timeout_ms=200)
    a, b = gt.submit_result(100, "a-ok", "a-late"), gt.submit_result(200, "b-ok", "b-late")
    gt.notify_acked(100)
    assert a.result() == "a-ok" and not b.done()
    assert await asyncio.wait_for(b, 2) == "b-late"  # slaveTimeout
    assert gt.submit_result(50, "covered", "no").result() == "covered"
    c = gt.submit_result(300, "c-ok", "c-closed")
    gt.close()
    assert c.result() == "c-closed"
    assert gt.submit_result(400, "d-ok", "d-closed").result() == "d-closed"


async def test_group_transfer_timer_outlives_acks_but_never_fires_a_wait_early() -> None:
    """Acknowledgements leave the timer armed for an earlier deadline; when it fires it
    expires nothing younger than the timeout and re-arms for the new head."""
    loop = asyncio.get_running_loop()
    gt = GroupTransferService(timeout_ms=300)
    gt.notify_acked(1)
    a = gt.submit(100)
    gt.notify_acked(100)  # the queue is empty, the timer for a's deadline still armed
    assert a.result() is True
    await asyncio.sleep(0.15)
    b = gt.submit(200)
    b_submitted = loop.time()
    await asyncio.sleep(0.2)  # a's deadline has passed, b's not
    assert not b.done() and len(gt) == 1
    assert await asyncio.wait_for(b, 2) is False
    assert loop.time() - b_submitted >= 0.29  # not before its own slaveTimeout


async def test_group_transfer_close_fails_waiters() -> None:
    gt = GroupTransferService(timeout_ms=10_000)
    f = gt.submit(10)
    gt.close()
    assert f.result() is False
    assert gt.submit(20).result() is False


# -- a slave store fed the master's bytes -------------------------------------------------


@pytest.fixture
async def stores(tmp_path) -> AsyncIterator[Callable[..., object]]:
    opened: list[MessageStore] = []

    async def factory(name: str, **kw: object) -> MessageStore:
        store = MessageStore(make_config(str(tmp_path / name), **kw), store_host=HOST,
                             disk_used_ratio=lambda p: 0.1)
        await store.start()
        opened.append(store)
        return store

    yield factory
    for s in opened:
        await s.shutdown()


def read(directory: str, name: str) -> bytes:
    with open(os.path.join(directory, name), "rb") as f:
        return f.read()


def transfer(master: MessageStore, slave: MessageStore, rng: random.Random, batch: int = 700) -> None:
    """What HAConnection + HAClient do, in process: frames of at most ``batch`` bytes."""
    offset = slave.get_max_phy_offset()
    while (data := master.get_commit_log_data(offset)) is not None:
        size = min(len(data), rng.randint(1, batch))
        assert slave.append_to_commit_log(offset, data[:size])
        data.release()
        offset += size


async def test_slave_log_is_byte_identical_and_dispatched(stores: Callable[..., object]) -> None:
    master: MessageStore = await stores("m")  # type: ignore[misc]
    slave: MessageStore = await stores("s", broker_role="SLAVE")  # type: ignore[misc]
    rng = random.Random(7)
    for i in range(120):
        r = await master.put_message(msg(i, queue_id=i % 3, keys=f"k{i}",
                                         body=os.urandom(rng.randint(1, 900))))
        assert r.status is PutMessageStatus.PUT_OK
        if i % 17 == 0:
            transfer(master, slave, rng)
    transfer(master, slave, rng)
    assert slave.get_max_phy_offset() == master.get_max_phy_offset()
    files = sorted(os.listdir(master.config.commit_log_dir))
    assert len(files) > 3 and files == sorted(os.listdir(slave.config.commit_log_dir))
    for name in files:
        assert read(master.config.commit_log_dir, name) == read(slave.config.commit_log_dir, name), name
    for qid in range(3):
        assert slave.get_max_offset_in_queue("T", qid) == master.get_max_offset_in_queue("T", qid)
        assert [m.msg_id for m in pull_all(slave, "T", qid)] == [m.msg_id for m in pull_all(master, "T", qid)]
    assert slave.query_message("T", "k33", 4, 0, 1 << 62).message_buffers
    # The slave refuses puts (checkStoreStatus).
    assert (await slave.put_message(msg(0))).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


async def test_half_record_waits_and_wrong_offset_is_refused(stores: Callable[..., object]) -> None:
    master: MessageStore = await stores("m")  # type: ignore[misc]
    slave: MessageStore = await stores("s", broker_role="SLAVE")  # type: ignore[misc]
    await master.put_message(msg(1))
    await master.put_message(msg(2))
    data = master.get_commit_log_data(0)
    assert data is not None
    whole = bytes(data)
    data.release()
    first = struct.unpack_from(">i", whole)[0]
    assert slave.append_to_commit_log(0, whole[:first + 10])
    assert slave.get_max_offset_in_queue("T", 0) == 1  # the second record is incomplete
    assert not slave.append_to_commit_log(5, whole[first + 10:])  # not the slave's end
    assert slave.append_to_commit_log(first + 10, whole[first + 10:])
    assert slave.get_max_offset_in_queue("T", 0) == 2


async def test_new_slave_starts_at_the_masters_segment(stores: Callable[..., object]) -> None:
    """A slave that reported 0 gets the master's last segment first; its log starts there."""
    master: MessageStore = await stores("m")  # type: ignore[misc]
    slave: MessageStore = await stores("s", broker_role="SLAVE")  # type: ignore[misc]
    for i in range(60):
        await master.put_message(msg(i, body=os.urandom(300)))
    end = master.get_max_phy_offset()
    start = end - end % master.config.mapped_file_size_commit_log
    assert start > 0
    data = master.get_commit_log_data(start)
    assert data is not None
    assert slave.append_to_commit_log(start, data)
    data.release()
    assert slave.get_min_phy_offset() == start and slave.get_max_phy_offset() == end
    units = pull_all(slave, "T", 0, start=slave.get_min_offset_in_queue("T", 0))
    assert units and units[-1].body == pull_all(master, "T", 0)[-1].body


# -- the slave's dispatch ------------------------------------------------------------------


async def test_reput_fields_match_the_full_decoder(stores: Callable[..., object]) -> None:
    """``record_dispatch_fields`` (the slave's reput) reads what the full decoder reads, and a
    record it does not read itself (IPv6 hosts) or a bad one goes to the full decoder."""
    from aiorocketmq.protocol.codes import MessageSysFlag
    from aiorocketmq.protocol.message import MessageDecodeError, socket_address_to_bytes
    from aiorocketmq.server.store.dispatcher import dispatch_request_from_record
    from aiorocketmq.server.store.reput import record_dispatch_fields

    master: MessageStore = await stores("m", mapped_file_size_commit_log=1 << 20)  # type: ignore[misc]
    rng = random.Random(3)
    sent = [
        msg(0), msg(1, tags=None), msg(2, keys="a b  c", tags="t\u00e9"),
        msg(3, topic="SCHEDULE_TOPIC_XXXX", queue_id=2, DELAY="3"),
        msg(4, topic="SCHEDULE_TOPIC_XXXX", DELAY="x"),
        msg(5, topic="T" * 127, body=b""),
    ]
    for i, flag in enumerate((MessageSysFlag.TRANSACTION_PREPARED_TYPE,
                              MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
                              MessageSysFlag.TRANSACTION_COMMIT_TYPE)):
        m = msg(10 + i)
        m.sys_flag = flag
        sent.append(m)
    v6 = msg(20, keys="six")
    v6.sys_flag = MessageSysFlag.BORNHOST_V6_FLAG
    v6.born_host = socket_address_to_bytes("[::1]:5555")
    sent.append(v6)
    sent += [msg(30 + i, queue_id=i % 3, keys=f"k{i}", body=os.urandom(rng.randint(0, 300)))
             for i in range(20)]
    for m in sent:
        assert (await master.put_message(m)).status is PutMessageStatus.PUT_OK
    data = master.get_commit_log_data(0)
    assert data is not None
    log = bytes(data)
    data.release()
    levels = master.delay_levels
    pos = seen = 0
    while pos < len(log):
        total = struct.unpack_from(">i", log, pos)[0]
        req = dispatch_request_from_record(log, pos, levels)
        assert record_dispatch_fields(log, pos, total, levels) == (
            req.topic, req.queue_id, req.commit_log_offset, req.msg_size, req.tags_code,
            req.store_timestamp, req.consume_queue_offset, req.keys, req.uniq_key, req.sys_flag)
        bad = bytearray(log[pos:pos + total])
        bad[total - 3:] = b"\xff\xff\xff"  # properties that are not UTF-8: replaced, as the full decoder
        req = dispatch_request_from_record(bytes(bad), 0, levels)
        assert record_dispatch_fields(bytes(bad), 0, total, levels)[-3:] == (
            req.keys, req.uniq_key, req.sys_flag)
        if not req.sys_flag & MessageSysFlag.BORNHOST_V6_FLAG:
            bad[84:88] = struct.pack(">i", total)  # BODYLENGTH past TOTALSIZE
            with pytest.raises(MessageDecodeError):
                record_dispatch_fields(bytes(bad), 0, total, levels)
        pos += total
        seen += 1
    assert seen == len(sent)
