"""The source's columnar decode gives exactly the rows of the per-message path.

``ColumnarDecoder.decode`` (pull bodies straight into Arrow columns) against its reference,
the per-message path (``_per_message``: ``decode_messages`` + ``RowBatchBuilder``) with the
records read by the pure-Python decoder (``_decode_messages_py``; ``decode_messages`` takes
the C ``_message`` where it is built, whose record checks ``_stored_record.h`` shares with
the code under test), on the captured 4.9.7 pull bodies and on generated records: properties of every shape (unicode, separators in odd
places, repeated keys), IPv6 hosts, compressed bodies, records of one size and of many,
window ends inside a body, tag filters, and bodies that do not decode.
"""

from __future__ import annotations

import zlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq import NO_EXTENSIONS
from aiorocketmq.protocol.codes import MessageSysFlag
from aiorocketmq.protocol.message import (
    MessageDecodeError,
    _decode_messages_py,
    encode_batch,
    encode_properties,
    encode_stored_record,
    socket_address_to_bytes,
)
from aiorocketmq.spark_sink import columnar
from aiorocketmq.spark_sink.columnar import ColumnarDecoder
from aiorocketmq.spark_sink.rows import RowBatchBuilder
from tests.vectors import load_frames

BORN = socket_address_to_bytes("127.0.0.1:50192")
STORE = socket_address_to_bytes("127.0.0.1:10911")
BORN6 = socket_address_to_bytes("[fd00::2]:50193")
FAR = 10**15
# The C decoder (``_records``, built by pip) and the numpy path, on the same records; the C
# one is expected to be built here (a C compiler is part of this project's toolchain).
# Under AIOROCKETMQ_NO_EXTENSIONS=1 the "c" cases check that the decoder refuses C and then
# run the numpy path (``_decoder``).
_BOTH = pytest.mark.parametrize("native", [True, False], ids=["c", "numpy"])
_NOT_COLUMNAR = (MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.BORNHOST_V6_FLAG
                 | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)


def _record(i: int, *, props: str = "", body: bytes | None = None, topic: str = "T",
            born: bytes = BORN, store: bytes = STORE, sys_flag: int = 0) -> bytes:
    if len(born) == 20:
        sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG
    if len(store) == 20:
        sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    return bytes(encode_stored_record(
        topic=topic, queue_id=3, flag=i % 7, queue_offset=i, physical_offset=1000 + 250 * i,
        sys_flag=sys_flag, born_timestamp=1795318960714 + i, born_host=born,
        store_timestamp=1795318960733 + i, store_host=store, reconsume_times=i % 3,
        prepared_transaction_offset=0, body=b"body-%d" % i if body is None else body,
        properties=props))


def _uniform(i: int, tags: str = "TagA") -> bytes:
    return _record(i, props=encode_properties({
        "UNIQ_KEY": f"7F0000010000{i:020X}", "WAIT": "true", "TAGS": tags}), body=b"%08d" % i)


def _reference(windows: list[tuple[bytes, int]], include: bool,
               tags: frozenset[str] | None) -> pa.RecordBatch | None:
    """``ColumnarDecoder._per_message`` with every record read in Python."""
    builder = RowBatchBuilder("broker-a", include)
    for body, end in windows:
        for m in _decode_messages_py(body):
            if m.queue_offset >= end:
                break
            if tags is None or m.properties.get("TAGS") in tags:
                builder.add(m)
    return builder.flush() if builder.rows else None


def _decoder(include: bool, tags: frozenset[str] | None, native: bool) -> ColumnarDecoder:
    if native and NO_EXTENSIONS:
        with pytest.raises(RuntimeError, match="AIOROCKETMQ_NO_EXTENSIONS is set"):
            ColumnarDecoder("broker-a", include, tags, native=True)
        assert not columnar.NATIVE and ColumnarDecoder("broker-a", include).native is False
        native = False
    return ColumnarDecoder("broker-a", include, tags, native=native)


def _same(windows: list[tuple[bytes, int]], include: bool,
          tags: frozenset[str] | None = None, *, native: bool) -> ColumnarDecoder:
    """The columnar path (C or numpy) and the per-message path on ``windows``: the same
    batch, or the same error."""
    fast = _decoder(include, tags, native)
    try:
        expected = _reference(windows, include, tags)
    except (MessageDecodeError, OverflowError) as exc:  # Overflow: a timestamp past int64 µs
        with pytest.raises(type(exc)) as got:
            fast.decode(windows)
        assert str(got.value) == str(exc)
        return fast
    batch = fast.decode(windows)
    if expected is None or expected.num_rows == 0:
        assert batch is None
    else:
        assert batch is not None
        assert batch.schema == expected.schema
        if not batch.equals(expected):  # rows to show where (a year past 9999 has no datetime)
            assert batch.to_pylist() == expected.to_pylist()
            raise AssertionError("the batches differ")
    return fast


def _stored_bodies() -> list[tuple[int, bytes]]:
    return [(f["id"], bytes.fromhex(f["body_hex"])) for f in load_frames()
            if f.get("body_format") == "stored-messages"]


@_BOTH
@pytest.mark.parametrize("include", [False, True])
def test_captured_pull_bodies(include: bool, native: bool) -> None:
    bodies = _stored_bodies()
    assert len(bodies) > 10
    fallbacks = 0
    for _fid, body in bodies:
        for tags in (None, frozenset({"TagA", "TagB"})):
            fallbacks += _same([(body, FAR)], include, tags, native=native).fallbacks
    # all in one call too, cut at a window end inside a body
    _same([(body, FAR if i % 2 else 5) for i, (_fid, body) in enumerate(bodies)], include,
          native=native)
    # the compressed message (frame 439) is the per-message path's; the rest are columnar
    slow = sum(1 for _fid, b in bodies if any(m.sys_flag & _NOT_COLUMNAR for m in _decode_messages_py(b)))
    assert 1 <= slow < len(bodies)
    assert fallbacks == 2 * slow  # the batch members' repeated WAIT (frame 503) is merged


@_BOTH
@pytest.mark.parametrize("include", [False, True])
def test_uniform_records_take_the_guessed_stride(include: bool, native: bool) -> None:
    windows = [(b"".join(_uniform(i) for i in range(w * 32, w * 32 + 32)), FAR)
               for w in range(8)]
    assert _same(windows, include, native=native).fallbacks == 0
    # one record of another size in the middle: the walk, same rows
    odd = list(windows)
    odd[3] = (b"".join([_uniform(96), _record(97, props="TAGS\x01TagB"), _uniform(98)]), FAR)
    assert _same(odd, include, native=native).fallbacks == 0
    # window ends cut bodies; tags filter
    cut = [(body, 32 * w + 10) for w, (body, _) in enumerate(windows)]
    _same(cut, include, frozenset({"TagA"}), native=native)
    _same(cut, include, frozenset({"TagB"}), native=native)


@_BOTH
def test_message_ids_without_uniq_key_and_mixed(native: bool) -> None:
    plain = [_record(i, props=encode_properties({"KEYS": f"k{i}"})) for i in range(5)]
    assert _same([(b"".join(plain), FAR)], True, native=native).fallbacks == 0
    mixed = plain[:2] + [_uniform(2)] + plain[3:]
    assert _same([(b"".join(mixed), FAR)], True, native=native).fallbacks == 0


@_BOTH
def test_what_the_columnar_path_leaves_to_the_per_message_path(native: bool) -> None:
    v6 = _record(0, born=BORN6, props="TAGS\x01A")
    compressed = _record(1, body=zlib.compress(b"x" * 5000),
                         sys_flag=MessageSysFlag.COMPRESSED_FLAG, props="TAGS\x01A")
    latin = _record(3, props="TAGS\x01A").replace(b"TAGS\x01A", b"TAGS\x01\xe9")
    topic = _record(4, topic="T\u00e9").replace("T\u00e9".encode(), b"T\xe9\x00")
    for rec in (v6, compressed, latin, topic):
        for include in (False, True):
            d = _same([(rec, FAR)], include, native=native)
            assert d.fallbacks == 1
    # born timestamps whose microseconds leave int64, at both ends (the reference raises)
    for born in (-2**63, -(2**63 - 1) // 1000 - 1, (2**63 - 1) // 1000 + 1):
        rec = bytearray(_record(5, props="TAGS\x01A"))
        rec[40:48] = born.to_bytes(8, "big", signed=True)
        assert _same([(bytes(rec), FAR)], False, native=native).fallbacks == 1
    # a repeated key: first place, last value (stock batch members repeat WAIT)
    for props in ("TAGS\x01A\x02k\x01v\x02TAGS\x01B", "k\x01v\x02TAGS\x01A\x02k\x01w\x02k\x01x",
                  "WAIT\x01true\x02a\x01b\x02WAIT\x01false"):
        for include in (False, True):
            assert _same([(_record(2, props=props), FAR)], include, native=native).fallbacks == 0
    long_key = "k" * 17
    other = _record(5, props=f"{long_key}\x01v\x02TAGS\x01A\x02{long_key}\x01w")
    assert _same([(other, FAR)], False, native=native).fallbacks == 0
    # the numpy path tells keys apart by their first and last 8 bytes; C compares them whole
    d = _same([(other, FAR)], True, native=native)
    assert d.fallbacks == (0 if d.native else 1)


@_BOTH
def test_batch_members_stored_as_records(native: bool) -> None:
    """SEND_BATCH_MESSAGE members are stored one record each, with their own properties."""
    from aiorocketmq.protocol.message import Message, decode_batch

    members = decode_batch(encode_batch([
        Message("T", b"m%d" % i, properties={"UNIQ_KEY": f"U{i:031d}", "TAGS": "TagA",
                                              "KEYS": "a b"}) for i in range(10)]), topic="T")
    body = b"".join(_record(i, props=encode_properties(m.properties), body=m.body)
                    for i, m in enumerate(members))
    for include in (False, True):
        assert _same([(body, FAR)], include, native=native).fallbacks == 0


@pytest.mark.parametrize("bad", [
    b"\x00\x00\x00\x05", b"\x00" * 95, None, "props-len", "magic",
])
@_BOTH
def test_bodies_that_do_not_decode_raise_the_same_error(bad: bytes | str | None,
                                                        native: bool) -> None:
    good = _uniform(0)
    if bad is None:
        body = good[:-1]
    elif bad == "props-len":
        p = len(good) - len("UNIQ_KEY\x017F0000010000" + "0" * 20 + "\x02WAIT\x01true\x02TAGS\x01TagA")
        body = good[:p - 2] + (9999).to_bytes(2, "big") + good[p:]
    elif bad == "magic":
        body = good[:4] + b"\x00\x00\x00\x01" + good[8:]
    else:
        assert isinstance(bad, bytes)
        body = good + bad
    _same([(body, FAR)], False, native=native)


_text = st.text(alphabet=st.sampled_from("ab\x01\x02 é世TAGSKEYUNIQ_"), max_size=12)


@_BOTH
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(_text, _text), max_size=4), st.binary(max_size=40),
                          st.booleans(), st.sampled_from(["T", "Topic", "T\u00e9"])),
                min_size=1, max_size=12),
       st.integers(min_value=1, max_value=4), st.integers(min_value=0, max_value=14),
       st.booleans(), st.sampled_from([None, frozenset({"a"}), frozenset({"TagA", "b"})]))
def test_generated_records(native: bool,
                           recs: list[tuple[list[tuple[str, str]], bytes, bool, str]],
                           per_body: int, end: int, include: bool,
                           tags: frozenset[str] | None) -> None:
    records = []
    for i, (pairs, body, v6, topic) in enumerate(recs):
        # properties strings as a peer may write them, separators and all
        props = "\x02".join(f"{k}\x01{v}" for k, v in pairs)
        records.append(_record(i, props=props, body=body, topic=topic,
                               born=BORN6 if v6 and i % 2 else BORN))
    windows = [(b"".join(records[i:i + per_body]), end if i == 0 else FAR)
               for i in range(0, len(records), per_body)]
    _same(windows, include, tags, native=native)



@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=40),
                          st.integers(min_value=0, max_value=1100)), max_size=40),
       st.integers(min_value=0, max_value=3))
def test_gather_paths_agree_with_slices(parts: list[tuple[int, int]], tail: int) -> None:
    """``_gather`` (one length: rows; lengths alike: masked rows; else slices) joins exactly
    the slices it is given, up to the end of the buffer."""
    import numpy as np

    from aiorocketmq.spark_sink.columnar import _gather

    starts, lengths, pos = [], [], 0
    for gap, length in parts:
        pos += gap
        starts.append(pos)
        lengths.append(length)
        pos += length
    buf = bytes(i * 7 % 251 for i in range(pos + tail))
    a = np.frombuffer(buf, dtype=np.uint8)
    s = np.array(starts, dtype=np.int64)
    n = np.array(lengths, dtype=np.int64)
    assert _gather(buf, a, s, n) == b"".join(buf[x:x + k] for x, k in zip(starts, lengths, strict=True))
    same = np.full(len(starts), min(lengths, default=0), dtype=np.int64)
    assert _gather(buf, a, s, same) == b"".join(buf[x:x + k] for x, k in
                                                zip(starts, same.tolist(), strict=True))


@_BOTH
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=10_000), st.integers(0, 255)),
                min_size=1, max_size=6),
       st.integers(min_value=0, max_value=40), st.booleans())
def test_mutated_bodies(native: bool, flips: list[tuple[int, int]], cut: int,
                        include: bool) -> None:
    """Bytes overwritten anywhere in a body (lengths, flags, separators, UTF-8) and a cut
    tail: the columnar path gives the per-message path's rows or its error, never a crash
    or a read past the body (the C decoder bounds every length by TOTALSIZE)."""
    body = bytearray(b"".join(_uniform(i, tags="T\u00e9g") for i in range(3))
                     + _record(3, props="KEYS\x01a b\x02TAGS\x01x"))
    for pos, value in flips:
        body[pos % len(body)] = value
    _same([(bytes(body[:len(body) - cut]), FAR)], include, native=native)
