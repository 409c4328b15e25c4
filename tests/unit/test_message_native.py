"""The C record decoder (``protocol/_message.c``) gives exactly ``decode_messages``' Python
objects, or hands the body back (None) for the Python path.

On the captured 4.9.7 pull bodies, on generated records (properties of every shape, unicode,
separators in odd places, repeated keys, IPv6 hosts, compressed bodies, text that is not
UTF-8) and on bodies with bytes overwritten anywhere. The C decoder is expected to be built
here: a C compiler is part of this project's toolchain (setup.py).
"""

from __future__ import annotations

import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq import NO_EXTENSIONS
from aiorocketmq.protocol import message as message_module
from aiorocketmq.protocol.codes import MessageSysFlag
from aiorocketmq.protocol.message import (
    MessageDecodeError,
    MessageExt,
    _decode_messages_py,
    decode_messages,
    encode_properties,
    encode_stored_record,
    socket_address_to_bytes,
)
from tests.vectors import load_frames

BORN = socket_address_to_bytes("127.0.0.1:50192")
STORE = socket_address_to_bytes("10.1.2.3:10911")
BORN6 = socket_address_to_bytes("[fd00::2]:50193")
FIELDS = ("topic", "body", "flag", "properties", "transaction_id") + MessageExt.__slots__


def _native():
    """The built decoder itself: under AIOROCKETMQ_NO_EXTENSIONS message.py leaves it unused,
    and these tests still hold it to the Python decoder."""
    try:
        from aiorocketmq.protocol._message import decode_records
    except ImportError as exc:  # pragma: no cover - the suite fails, never skips
        raise AssertionError("aiorocketmq.protocol._message is not built: pip install -e . "
                             "builds it where a C compiler is found") from exc
    return decode_records


def test_decode_messages_uses_c_unless_switched_off() -> None:
    if NO_EXTENSIONS:  # the switch: records are read in Python though C is built
        assert message_module._decode_records is None
    else:
        assert message_module._decode_records is _native()


def _record(i: int, *, props: str = "", body: bytes | None = None, topic: str = "T",
            born: bytes = BORN, sys_flag: int = 0) -> bytes:
    if len(born) == 20:
        sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG
    return bytes(encode_stored_record(
        topic=topic, queue_id=3, flag=i % 7 - 2, queue_offset=i, physical_offset=1000 + 250 * i,
        sys_flag=sys_flag, born_timestamp=1795318960714 + i, born_host=born,
        store_timestamp=-5 + i, store_host=STORE, reconsume_times=i % 3,
        prepared_transaction_offset=-1, body=b"body-%d" % i if body is None else body,
        properties=props))


def _same(body: bytes) -> list[MessageExt] | None:
    """C and Python on ``body``: the same objects, or C hands it back (None) and
    ``decode_messages`` gives Python's objects or raises its error. Returns C's answer."""
    got = _native()(body, MessageExt)
    try:
        expected = _decode_messages_py(body)
    except MessageDecodeError:
        assert got is None
        return None
    if got is None:
        assert [_fields(m) for m in decode_messages(body)] == [_fields(m) for m in expected]
        return None
    assert [_fields(m) for m in got] == [_fields(m) for m in expected]
    for m in got:
        assert type(m) is MessageExt
        assert list(m.properties) == list(next(e for e in expected
                                               if e.queue_offset == m.queue_offset).properties)
    return got


def _fields(m: MessageExt) -> dict[str, object]:
    return {name: getattr(m, name) for name in FIELDS}


def test_captured_pull_bodies() -> None:
    bodies = [bytes.fromhex(f["body_hex"]) for f in load_frames()
              if f.get("body_format") == "stored-messages"]
    assert len(bodies) > 10
    handed_back = sum(_same(b) is None for b in bodies)
    assert handed_back == 1  # frame 439: a compressed body, inflated in Python


def test_message_ids_hosts_and_signed_fields() -> None:
    plain = [_record(i, props=encode_properties({"KEYS": f"k{i}"})) for i in range(5)]
    got = _same(b"".join(plain))
    assert got is not None
    assert got[0].msg_id == "0A01020300002A9F00000000000003E8"
    assert got[0].born_host == "127.0.0.1:50192" and got[0].store_host == "10.1.2.3:10911"
    assert got[0].flag == -2 and got[0].store_timestamp == -5
    uniq = _record(9, props=encode_properties({"UNIQ_KEY": "U1", "TAGS": "a"}))
    assert (_same(uniq) or [None])[0].msg_id == "U1"  # type: ignore[union-attr]
    assert _same(b"") == []


def test_what_is_handed_back_to_python() -> None:
    v6 = _record(0, born=BORN6, props="TAGS\x01A")
    compressed = _record(1, body=zlib.compress(b"x" * 5000),
                         sys_flag=MessageSysFlag.COMPRESSED_FLAG, props="TAGS\x01A")
    latin = _record(3, props="TAGS\x01A").replace(b"TAGS\x01A", b"TAGS\x01\xe9")
    topic = _record(4, topic="T\u00e9").replace("T\u00e9".encode(), b"T\xe9\x00")
    for rec in (v6, compressed, latin, topic, _record(5) + v6):
        assert _native()(rec, MessageExt) is None
        _same(rec)
    # repeated keys: first place, last value
    for props in ("TAGS\x01A\x02k\x01v\x02TAGS\x01B", "A\x01\x02AA\x01A\x02A\x01A",
                  "k" * 40 + "\x01v\x02TAGS\x01A\x02" + "k" * 40 + "\x01w"):
        assert _same(_record(2, props=props)) is not None


_text = st.text(alphabet=st.sampled_from("ab\x01\x02 é世TAGSKEYUNIQ_"), max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(_text, _text), max_size=4), st.binary(max_size=40),
                          st.booleans(), st.sampled_from(["T", "Topic", "T\u00e9"])),
                min_size=1, max_size=12))
def test_generated_records(recs: list[tuple[list[tuple[str, str]], bytes, bool, str]]) -> None:
    body = b"".join(
        _record(i, props="\x02".join(f"{k}\x01{v}" for k, v in pairs), body=b, topic=topic,
                born=BORN6 if v6 and i % 3 == 2 else BORN)
        for i, (pairs, b, v6, topic) in enumerate(recs))
    _same(body)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=10_000), st.integers(0, 255)),
                min_size=1, max_size=6), st.integers(min_value=0, max_value=40))
def test_mutated_bodies(flips: list[tuple[int, int]], cut: int) -> None:
    """Bytes overwritten anywhere (lengths, flags, separators, UTF-8) and a cut tail: C
    gives Python's objects or hands the body back, never a crash or a read past the end."""
    body = bytearray(b"".join(
        _record(i, props=encode_properties({"UNIQ_KEY": f"U{i}", "TAGS": "T\u00e9g"}))
        for i in range(3)) + _record(3, props="KEYS\x01a b\x02TAGS\x01x"))
    for pos, value in flips:
        body[pos % len(body)] = value
    _same(bytes(body[:len(body) - cut]))


def test_a_type_without_those_slots_is_refused() -> None:
    import pytest

    class NotIt:
        __slots__ = ("topic",)

    with pytest.raises(AttributeError):
        _native()(_record(0), NotIt)
    assert _same(_record(0)) is not None  # the real type still works afterwards
