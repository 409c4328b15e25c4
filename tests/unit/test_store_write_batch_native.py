"""The C batch write (``_put.write_batch``) writes what the per-record path writes.

``write_batch`` against ``write_record`` called once a member (itself held to
``pack_stored_record`` by test_store_put_native.py) on generated batches: every member's
bytes, offset msg id and size, queue offsets counted or not; and its refusals (a batch
that does not fit by one byte, a bad member anywhere in the list), each leaving the buffer
untouched. Then the commit log's ``append_batch`` four ways, both C functions (stamping the
members at once, or later through ``stamp_members`` as the store's deferred dispatch does,
uniform batches then vouched for as ``UniformBatch``, as the send path does),
only ``write_record``, and the Python packer (the reference): the same segment bytes, results,
stamped members and queue table, on batches that share their fields (the C batch write)
and batches that do not (the per-record path), in segments that roll over. Under
AIOROCKETMQ_NO_EXTENSIONS=1 the store leaves the C module unused and these tests still
compare it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq import NO_EXTENSIONS
from aiorocketmq.protocol.message import create_offset_msg_id, encode_properties
from aiorocketmq.server.store import commit_log as commit_log_module
from aiorocketmq.server.store.commit_log import CommitLog
from aiorocketmq.server.store.config import MessageStoreConfig
from aiorocketmq.server.store.inner import MessageExtBrokerInner, UniformBatch
from tests.unit.test_store_put_native import _native

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
HOST = st.one_of(st.binary(min_size=8, max_size=8), st.binary(min_size=20, max_size=20))
MEMBERS = st.lists(st.tuples(I32, st.binary(max_size=600), st.binary(max_size=300)),
                   min_size=0, max_size=20)



def test_the_store_uses_the_c_batch_write() -> None:
    if NO_EXTENSIONS:
        assert commit_log_module._write_batch is None
    else:
        assert commit_log_module._write_batch is _native().write_batch


def _shared(draw: Any) -> tuple[Any, ...]:
    # topic_b, queue_id, queue_offset, counted, phys, sys_flag, born_ts, born, store_ts,
    # store, reconsume, prep
    return (draw(st.binary(max_size=127)), draw(I32), draw(st.integers(0, 2**62)),
            draw(st.booleans()), draw(st.integers(0, 2**62)), draw(I32), draw(I64),
            draw(HOST), draw(I64), draw(HOST), draw(I32), draw(I64))


shared = st.composite(_shared)


@settings(max_examples=300, deadline=None)
@given(shared(), MEMBERS, st.integers(0, 64), st.integers(0, 64))
def test_write_batch_is_write_record_per_member(f: tuple[Any, ...], members: list[Any],
                                                pos: int, tail: int) -> None:
    (topic_b, queue_id, queue_offset, counted, phys, sys_flag, born_ts, born, store_ts, store,
     reconsume, prep) = f
    want = bytearray(b"\xee" * pos)
    want_ids, want_sizes = [], []
    at, offset = phys, queue_offset
    for flag, body, props_b in members:
        record = bytearray(1 << 16)
        size, msg_id = _native().write_record(
            record, 0, topic_b, queue_id, flag, offset, at, sys_flag, born_ts, born,
            store_ts, store, reconsume, prep, body, props_b)
        want += record[:size]
        want_ids.append(msg_id)
        want_sizes.append(size)
        at += size
        offset += 1 if counted else 0
    want += b"\xee" * tail
    buf = bytearray(b"\xee" * len(want))
    ids, sizes = _native().write_batch(buf, pos, topic_b, queue_id, queue_offset, counted, phys,
                                       sys_flag, born_ts, born, store_ts, store, reconsume,
                                       prep, list(members))
    assert (ids, sizes) == (want_ids, want_sizes)
    assert buf == want
    assert ids == [create_offset_msg_id(store, p)
                   for p in (phys + sum(want_sizes[:i]) for i in range(len(members)))]


def _batch_args(buf: Any, pos: int, members: list[Any], **changes: Any) -> list[Any]:
    base = dict(buf=buf, pos=pos, topic_b=b"T", queue_id=0, queue_offset=0, counted=True,
                phys=0, sys_flag=0, born_ts=0, born=bytes(8), store_ts=0, store=bytes(8),
                reconsume=0, prep=0, members=members)
    base.update(changes)
    return list(base.values())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=8), st.integers(0, 50))
def test_a_batch_that_does_not_fit_is_refused_untouched(bodies: list[bytes], pos: int) -> None:
    members = [(0, b, b"a\x01b") for b in bodies]
    total = sum(91 + 1 + len(b) + 3 for b in bodies)
    for start, length in ((pos, pos + total - 1), (-1, total + 10), (pos + 1, pos + total)):
        buf = bytearray(b"\xee" * length)
        with pytest.raises(IndexError):
            _native().write_batch(*_batch_args(buf, start, members))
        assert buf == b"\xee" * length
    buf = bytearray(pos + total)  # exactly enough
    assert sum(_native().write_batch(*_batch_args(buf, pos, members))[1]) == total


@pytest.mark.parametrize(("bad", "error", "changes"), [
    ((0, b"x", b"p" * 32768), ValueError, {}),
    ((2**31, b"x", b""), OverflowError, {}),
    (("0", b"x", b""), TypeError, {}),
    ((0, "x", b""), TypeError, {}),
    ((0, b"x", bytearray()), TypeError, {}),
    ((0, b"x"), TypeError, {}),
    (None, ValueError, {"born": bytes(9)}),
    (None, ValueError, {"topic_b": b"t" * 128}),
    (None, OverflowError, {"queue_id": 2**31}),
    (None, OverflowError, {"reconsume": -(2**31) - 1}),
    (None, OverflowError, {"sys_flag": 2**31}),
])
def test_write_batch_refuses_a_bad_member_anywhere_untouched(bad: Any, error: type,
                                                              changes: dict[str, Any]) -> None:
    good = (0, b"body", b"a\x01b")
    for where in range(3):
        members: list[Any] = [good, good]
        if bad is not None:
            members.insert(where, bad)
        buf = bytearray(b"\xee" * 70000)
        with pytest.raises(error):
            _native().write_batch(*_batch_args(buf, 0, members, **changes))
        assert buf == b"\xee" * 70000


def test_write_batch_needs_a_writable_buffer_and_a_list() -> None:
    with pytest.raises(TypeError):
        _native().write_batch(*_batch_args(bytes(500), 0, [(0, b"x", b"")]))
    with pytest.raises(TypeError):
        _native().write_batch(*_batch_args(bytearray(500), 0, ((0, b"x", b""),)))


# -- the commit log's append_batch, three ways --

_member = st.tuples(st.integers(0, 3), st.binary(max_size=700),
                    st.dictionaries(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "a"]),
                                    st.text(min_size=1, max_size=12), max_size=3))
# A change to one member's shared field: the batch is not the plain one.
_odd = st.one_of(st.none(), st.tuples(
    st.sampled_from(["sys_flag", "born_host", "store_host", "born_timestamp",
                     "reconsume_times", "prepared_transaction_offset", "body"]),
    st.integers(0, 30)))
_batch = st.tuples(st.sampled_from(["T1", "SCHEDULE_TOPIC_XXXX", "%RETRY%g"]),
                   st.integers(0, 3), st.sampled_from([0, 1, 4, 8, 12, 2]), HOST,
                   st.booleans(), st.lists(_member, min_size=1, max_size=12), _odd)


def _inners(spec: Any) -> list[MessageExtBrokerInner]:
    topic, queue_id, sys_flag, born, v6_store, members, odd = spec
    inners = [MessageExtBrokerInner(
        topic=topic, queue_id=queue_id, body=body, flag=flag, properties=dict(props),
        sys_flag=sys_flag, born_timestamp=5, born_host=born, reconsume_times=1,
        store_host=bytes(range(20)) if v6_store else None)
        for flag, body, props in members]
    if odd is not None:
        field, i = odd
        inner = inners[i % len(inners)]
        if field == "body":
            inner.body = bytearray(inner.body)  # type: ignore[assignment]
        elif field in ("born_host", "store_host"):
            setattr(inner, field, bytes(range(1, 21)))
        elif field == "sys_flag":
            inner.sys_flag ^= 4
        else:
            setattr(inner, field, getattr(inner, field) + 1)
    return inners


_MODES = {"c_batch": ("write_batch", "write_record"), "c_record": (None, "write_record"),
          "python": (None, None), "c_batch_stamped_later": ("write_batch", "write_record")}


@settings(max_examples=100, deadline=None)
@given(st.lists(_batch, min_size=1, max_size=10), st.sampled_from([4096, 16384]))
def test_append_batch_writes_the_same_log_three_ways(
        tmp_path_factory: pytest.TempPathFactory, batches: list[Any], file_size: int) -> None:
    logs = []
    for mode, (batch_fn, record_fn) in _MODES.items():
        root = tmp_path_factory.mktemp(mode)
        config = MessageStoreConfig(store_path_root_dir=str(root),
                                    mapped_file_size_commit_log=file_size)
        cl = CommitLog(config, bytes(8), {1: 1000, 2: 5000},
                       clock_ms=lambda: 1_700_000_000_000)
        saved = commit_log_module._write_batch, commit_log_module._write_record
        commit_log_module._write_batch = getattr(_native(), batch_fn) if batch_fn else None
        commit_log_module._write_record = getattr(_native(), record_fn) if record_fn else None
        stamped = []
        try:
            for spec in batches:
                inners = _inners(spec)
                later = mode.endswith("_later")
                batch: list[MessageExtBrokerInner] | UniformBatch = inners
                if later and spec[-1] is None:  # truly uniform: vouched for, as send.py does
                    first = inners[0]
                    batch = UniformBatch(
                        first.topic, first.queue_id, first.sys_flag, first.born_timestamp,
                        first.born_host, first.store_host, first.reconsume_times,
                        [(m.flag, m.body, m.properties, encode_properties(m.properties))
                         for m in inners])
                    inners = batch.inners()
                r = cl.append_batch(batch, stamp=not later)
                if r.stamp_members is not None:
                    # Left for the store's deferred dispatch: nothing stamped yet.
                    assert later and all(m.msg_id == "" for m in inners)
                    r.stamp_members()
                    r.stamp_members = None
                stamped.append((r.status, r.wrote_offset, r.wrote_bytes, r.msg_id,
                                r.store_timestamp, r.logics_offset, r.msg_num, r.msg_ids,
                                [(m.sys_flag, m.store_timestamp, m.queue_offset,
                                  m.commit_log_offset, m.msg_id, m.tags_code)
                                 for m in inners]))
        finally:
            commit_log_module._write_batch, commit_log_module._write_record = saved
        files = sorted(Path(root, "commitlog").iterdir())
        logs.append((stamped, [(p.name, p.read_bytes()) for p in files],
                     dict(cl.topic_queue_table), [mf.wrote_position for mf in cl.mfq.files]))
        cl.mfq.close()
    assert logs[0] == logs[2]
    assert logs[1] == logs[2]
    assert logs[3] == logs[2]
