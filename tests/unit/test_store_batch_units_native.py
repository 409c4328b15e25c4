"""A batch's consume-queue units written by one C call (``_put.cq_units``) as ``put_unit`` writes them.

``cq_units`` against ``put_unit``'s packing on generated records, and its refusals (lists
of different lengths, a size out of range, units that do not fit), each leaving the
buffer untouched. Then ``MessageStore.put_messages_nowait`` two ways on the same generated
batches: with ``ConsumeQueue.put_units`` (the C call) and with each member dispatched by
``_dispatch_inner`` (the reference): the same consume-queue and index file bytes, queue
offsets, index lookups by key and by UNIQ_KEY, dispatch position and arriving-listener
calls, across consume-queue segment boundaries, several queues, transactional batches
(no units), and single puts in between. Under AIOROCKETMQ_NO_EXTENSIONS=1 the store
leaves the C module unused and these tests still compare it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq import NO_EXTENSIONS
from aiorocketmq.protocol.message import socket_address_to_bytes
from aiorocketmq.server.store import consume_queue as cq_module
from aiorocketmq.server.store.consume_queue import CQ_UNIT
from aiorocketmq.server.store.inner import MessageExtBrokerInner, PutMessageStatus
from aiorocketmq.server.store.message_store import MessageStore
from tests.unit.test_store_message_store import Clock, make_config
from tests.unit.test_store_put_native import _native

pytestmark = pytest.mark.timeout(600)

HOST = "127.0.0.1:10911"



def test_the_store_uses_the_c_units_write() -> None:
    if NO_EXTENSIONS:
        assert cq_module._cq_units is None
    else:
        assert cq_module._cq_units is _native().cq_units


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**62), st.lists(st.tuples(st.integers(1, 2**31 - 1), st.integers(-(2**63), 2**63 - 1)),
                                       max_size=30), st.integers(0, 40))
def test_cq_units_is_put_units_packing(start: int, records: list[tuple[int, int]], pos: int) -> None:
    offsets = []
    at = start
    expected = bytearray(pos)
    for size, code in records:
        offsets.append(at)
        expected += CQ_UNIT.pack(at, size, code)
        at += size
    buf = bytearray(pos + 20 * len(records) + 7)
    _native().cq_units(buf, pos, offsets, at, [code for _, code in records])
    assert bytes(buf) == bytes(expected) + bytes(7)


@pytest.mark.parametrize("offsets,end,tags,error", [
    ([0, 10], 20, [1], TypeError),
    ([0, 10], 10, [1, 2], ValueError),  # the last record's size 0
    ([10, 5], 20, [1, 2], ValueError),  # offsets going down
    ([0], 2**31, [1], ValueError),  # a size over 2^31-1
    ([0, 10, 20], 30, [1, 2, 3], IndexError),  # one unit too many for the buffer
    ([0, 10], 20, [1, 2**64], OverflowError),
    ([0, "x"], 20, [1, 2], TypeError),
])
def test_cq_units_refuses_before_writing(offsets: list[Any], end: int, tags: list[Any],
                                         error: type) -> None:
    buf = bytearray(b"\xee" * 45)
    with pytest.raises(error):
        _native().cq_units(buf, 5, offsets, end, tags)
    assert buf == b"\xee" * 45
    with pytest.raises(TypeError):
        _native().cq_units(bytes(45), 0, [0], 1, [0])  # not writable
    with pytest.raises(TypeError):
        _native().cq_units(bytearray(45), 0, (0,), 1, [0])  # not a list


_KEY = st.text("abc", min_size=1, max_size=3)
_member = st.tuples(
    st.binary(max_size=200),
    st.one_of(st.none(), st.text("AB", min_size=1, max_size=2)),  # TAGS
    st.one_of(st.none(), st.lists(_KEY, min_size=1, max_size=3).map(" ".join)),  # KEYS
    st.booleans(),  # a UNIQ_KEY
)
# (queue id, sys flag, members, a member of another sys flag, a single put after it)
_batch = st.tuples(st.integers(0, 2), st.sampled_from([0, 0, 0, 4, 8, 12]),
                   st.lists(_member, min_size=1, max_size=12),
                   st.one_of(st.none(), st.integers(0, 11)), st.booleans())


def _inners(batch_no: int, spec: Any) -> tuple[list[MessageExtBrokerInner], MessageExtBrokerInner | None]:
    queue_id, sys_flag, members, odd, single = spec
    inners = []
    for i, (body, tags, keys, uniq) in enumerate(members):
        props = {}
        if tags:
            props["TAGS"] = tags
        if keys:
            props["KEYS"] = keys
        if uniq:
            props["UNIQ_KEY"] = f"U{batch_no:03d}{i:03d}"
        inners.append(MessageExtBrokerInner(
            topic="T", queue_id=queue_id, body=body, properties=props, sys_flag=sys_flag,
            born_timestamp=1000 + batch_no, born_host=socket_address_to_bytes("10.0.0.1:5555")))
    if odd is not None:
        inners[odd % len(inners)].sys_flag ^= 4
    after = None
    if single:
        after = MessageExtBrokerInner(
            topic="T", queue_id=queue_id, body=b"one", properties={"UNIQ_KEY": f"S{batch_no:03d}"},
            born_timestamp=1, born_host=socket_address_to_bytes("10.0.0.1:5555"))
    return inners, after


def _files(root: Path) -> list[tuple[str, bytes]]:
    return [(str(p.relative_to(root)), p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()]


async def _run(root: Path, batches: list[Any]) -> tuple[Any, ...]:
    store = MessageStore(make_config(str(root), mapped_file_size_consume_queue=20 * 7,
                                     mapped_file_size_commit_log=64 * 1024),
                         store_host=HOST, clock_ms=Clock(), disk_used_ratio=lambda p: 0.1)
    await store.start()
    arrived: list[Any] = []
    store.set_message_arriving_listener(lambda *a: arrived.append(a))
    keys: set[str] = set()
    try:
        results = []
        for n, spec in enumerate(batches):
            inners, after = _inners(n, spec)
            r = store.put_messages_nowait(inners)
            assert not asyncio.isfuture(r) and not hasattr(r, "__await__")
            assert r.status is PutMessageStatus.PUT_OK  # type: ignore[union-attr]
            results.append([(m.queue_offset, m.commit_log_offset, m.tags_code) for m in inners])
            for m in inners:
                keys.update(m.properties.get("KEYS", "").split())
                if "UNIQ_KEY" in m.properties:
                    keys.add(m.properties["UNIQ_KEY"])
            if after is not None:
                assert store.put_message_nowait(after).status is PutMessageStatus.PUT_OK  # type: ignore[union-attr]
        queues = {q: (store.get_min_offset_in_queue("T", q), store.get_max_offset_in_queue("T", q),
                      [store.consume_queue_table[("T", q)].get_unit(i)
                       for i in range(store.get_max_offset_in_queue("T", q))])
                  for q in range(3) if ("T", q) in store.consume_queue_table}
        lookups = {}
        for key in sorted(keys):
            found = store.query_message("T", key, 64, 0, 2**62)
            lookups[key] = sorted(bytes(v) for v in found.message_buffers)
            for v in found.message_buffers:
                v.release()
        state = (results, queues, lookups, arrived, store.dispatcher.dispatched_offset,
                 store.dispatcher.dispatched_timestamp)
    finally:
        await store.shutdown()
    cq_files = _files(root / "consumequeue")
    index_files = [data for _, data in _files(root / "index")]  # named by wall clock
    return state, cq_files, index_files


@settings(max_examples=40, deadline=None)
@given(st.lists(_batch, min_size=1, max_size=12))
def test_batch_units_dispatch_as_each_member(tmp_path_factory: pytest.TempPathFactory,
                                             batches: list[Any]) -> None:
    calls = []
    saved = cq_module._cq_units

    def counted(*args: Any) -> None:
        calls.append(len(args[2]))
        saved(*args)

    runs = []
    for mode in ("c", "python"):
        cq_module._cq_units = counted if mode == "c" and saved is not None else None  # type: ignore[assignment]
        try:
            runs.append(asyncio.run(_run(tmp_path_factory.mktemp(mode), batches)))
        finally:
            cq_module._cq_units = saved  # type: ignore[assignment]
    assert runs[0] == runs[1]


def test_plain_batches_take_the_c_call(tmp_path: Path) -> None:
    if NO_EXTENSIONS:
        pytest.skip("the C module is not used under AIOROCKETMQ_NO_EXTENSIONS")
    calls = []
    saved = cq_module._cq_units

    def counted(*args: Any) -> None:
        calls.append(len(args[2]))
        saved(*args)

    member = (b"x", "A", "k", True)
    plain = (0, 0, [member] * 3, None, False)
    cq_module._cq_units = counted  # type: ignore[assignment]
    try:
        asyncio.run(_run(tmp_path / "s", [plain, plain, plain, (0, 4, [member] * 2, None, False),
                                          (0, 0, [member] * 2, 0, False), plain]))
    finally:
        cq_module._cq_units = saved  # type: ignore[assignment]
    # The queue's first unit goes through put_unit (its first segment); the second batch
    # fits the segment (units 3..5 of 7); the third crosses into the next one; the
    # transactional and the mixed batches are per member; the last batch lies in one.
    assert calls == [3, 3]
