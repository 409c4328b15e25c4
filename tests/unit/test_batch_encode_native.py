"""The C batch encoder (``protocol/_message.c`` ``encode_batch``) gives exactly
``encode_batch_py``'s bytes, or hands the batch back (None) for the Python path, which
raises the errors.

On generated batches (bodies of any length, flags over the int32 range, properties of
every shape: unicode, separators, None values, empty dicts, sizes about the 32767-byte
limit), every member's TOTALSIZE, BODY length and properties length read back and checked
against the message, and on what the C path must refuse. The C encoder is expected to be
built here, as the record decoder (tests/unit/test_message_native.py).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol.message import (
    MAX_PROPERTIES_LENGTH,
    Message,
    MessageEncodeError,
    MessageTooLargeError,
    decode_batch,
    encode_batch,
    encode_batch_py,
    encode_properties,
)


def _native() -> Any:
    try:
        from aiorocketmq.protocol._message import encode_batch as native
    except ImportError as exc:  # pragma: no cover - the suite fails, never skips
        raise AssertionError("aiorocketmq.protocol._message is not built (or has no "
                             "encode_batch): pip install -e . builds it") from exc
    return native


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_PROPS = st.dictionaries(_TEXT, st.one_of(_TEXT, st.none()), max_size=6)
_MSG = st.builds(
    lambda body, flag, props: _message(body, flag, props),
    st.binary(max_size=300), st.integers(-(2 ** 31), 2 ** 31 - 1), _PROPS)


def _message(body: bytes, flag: int, props: dict[str, str | None]) -> Message:
    m = Message("BatchTopic", body, flag=flag)
    m.properties.clear()
    m.properties.update(props)  # type: ignore[arg-type]
    return m


def _check_members(data: bytes, msgs: list[Message]) -> None:
    """Every length in ``data`` against the messages it came from."""
    pos = 0
    for m in msgs:
        total, magic, crc, flag, body_len = struct.unpack_from(">iiiii", data, pos)
        props = encode_properties(m.properties).encode("utf-8")
        assert (magic, crc, flag, body_len) == (0, 0, m.flag, len(m.body))
        assert total == 20 + len(m.body) + 2 + len(props)
        assert data[pos + 20: pos + 20 + body_len] == m.body
        (props_len,) = struct.unpack_from(">h", data, pos + 20 + body_len)
        assert props_len == len(props)
        assert data[pos + 22 + body_len: pos + total] == props
        pos += total
    assert pos == len(data)


@given(st.lists(_MSG, max_size=20))
@settings(max_examples=300, deadline=None)
def test_native_equals_python(msgs: list[Message]) -> None:
    native = _native()(msgs)
    assert native is not None
    assert native == encode_batch_py(msgs) == encode_batch(msgs)
    _check_members(native, msgs)
    back = decode_batch(native, topic="BatchTopic")
    assert [(b.body, b.flag) for b in back] == [(m.body, m.flag) for m in msgs]
    assert _native()(tuple(msgs)) == native


@given(st.integers(MAX_PROPERTIES_LENGTH - 40, MAX_PROPERTIES_LENGTH + 40),
       st.integers(0, 3), st.sampled_from(["a", "é", "\U0001f600"]))
@example(MAX_PROPERTIES_LENGTH, 0, "a").via("the limit, one property")
@example(MAX_PROPERTIES_LENGTH + 1, 0, "a").via("one over, one property")
@example(MAX_PROPERTIES_LENGTH, 1, "a").via("the limit, the big one second")
@example(MAX_PROPERTIES_LENGTH + 1, 1, "a").via("one over, the big one second")
@example(MAX_PROPERTIES_LENGTH + 1, 3, "a").via("one over, the big one last of four")
@settings(max_examples=200, deadline=None)
def test_properties_length_limit(size: int, extra: int, ch: str) -> None:
    """Near 32767 bytes: C encodes what Python encodes and hands back what Python refuses."""
    width = len(ch.encode("utf-8"))
    props = {f"k{i}": "v" for i in range(extra)}
    props["big"] = ch * max(0, (size - 4 - 5 * extra) // width)
    msgs = [_message(b"x", 0, {}), _message(b"body", 1, props)]  # type: ignore[arg-type]
    try:
        expected = encode_batch_py(msgs)
    except MessageTooLargeError:
        assert _native()(msgs) is None
        with pytest.raises(MessageTooLargeError):
            encode_batch(msgs)
        return
    assert _native()(msgs) == expected
    _check_members(expected, msgs)


@pytest.mark.parametrize(("change", "error"), [
    (lambda m: setattr(m, "flag", 2 ** 31), MessageEncodeError),
    (lambda m: setattr(m, "flag", -(2 ** 31) - 1), MessageEncodeError),
    (lambda m: m.properties.__setitem__("k", "\ud800"), MessageEncodeError),
    (lambda m: m.properties.__setitem__("\udfff", "v"), MessageEncodeError),
    (lambda m: m.properties.__setitem__("k", "x" * MAX_PROPERTIES_LENGTH),
     MessageTooLargeError),
    (lambda m: m.properties.__setitem__("k", 5), TypeError),
    (lambda m: setattr(m, "body", bytearray(b"ba")), None),
    (lambda m: setattr(m, "body", memoryview(b"mv")), None),
    (lambda m: setattr(m, "flag", True), None),
])
def test_native_hands_back_the_uncommon(change: Any, error: type[Exception] | None) -> None:
    msgs = [Message("T", b"first"), Message("T", b"second")]
    change(msgs[1])
    assert _native()(msgs) is None
    if error is None:
        assert encode_batch(msgs) == encode_batch_py(msgs)
        _check_members(encode_batch(msgs), msgs)
    else:
        with pytest.raises(error):
            encode_batch(msgs)


def test_native_hands_back_other_sequences() -> None:
    msgs = [Message("T", b"a")]
    assert _native()(iter(msgs)) is None
    assert _native()([object()]) is None
    assert _native()([]) == b""
