"""protocol.body_codec and Message.of / decode, without a broker."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.protocol.body_codec import (
    CONTENT_TYPE_PROPERTY,
    BodyDecodeError,
    BodyEncodeError,
    UnknownCodecError,
    codec_for,
    decode_body,
)
from aiorocketmq.protocol.message import Message

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
MSGPACK_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text() | st.binary()
    | st.floats(allow_nan=False)
    | st.datetimes(timezones=st.just(UTC), min_value=datetime(1900, 1, 1)),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text() | st.integers(-5, 5), inner, max_size=4),
    max_leaves=20,
)


@given(MSGPACK_VALUES)
def test_msgpack_round_trip(obj: Any) -> None:
    msg = Message.of(obj, topic="T")
    assert msg.properties[CONTENT_TYPE_PROPERTY] == "application/msgpack"
    assert msg.decode() == obj


@given(JSON_VALUES)
def test_json_round_trip(obj: Any) -> None:
    msg = Message.of(obj, "json", topic="T", tags="a", keys=["k1", "k2"])
    assert msg.properties[CONTENT_TYPE_PROPERTY] == "application/json"
    assert (msg.tags, msg.keys) == ("a", "k1 k2")
    assert msg.decode() == obj


def test_content_types_other_clients_write_are_understood() -> None:
    assert codec_for("application/json; charset=UTF-8").name == "json"
    assert codec_for("Application/X-MsgPack").name == "msgpack"
    assert codec_for("application/vnd.msgpack").name == "msgpack"
    assert decode_body(b'{"a":1}', "application/json;charset=utf-8") == {"a": 1}
    assert Message("T", b"\x81\xa1a\x01").decode("msgpack") == {"a": 1}


def test_errors_say_what_and_why() -> None:
    with pytest.raises(UnknownCodecError, match="unknown body codec 'xml'"):
        Message.of({}, "xml", topic="T")
    with pytest.raises(BodyEncodeError, match="cannot encode set as msgpack"):
        Message.of({1, 2}, topic="T")
    with pytest.raises(BodyEncodeError, match="cannot encode bytes as json"):
        Message.of(b"x", "json", topic="T")
    with pytest.raises(BodyEncodeError, match="as json"):
        Message.of(float("nan"), "json", topic="T")
    with pytest.raises(UnknownCodecError, match="has no contentType property"):
        Message("T", b"\x01").decode()
    unknown = Message("T", b"x", properties={CONTENT_TYPE_PROPERTY: "text/csv"})
    with pytest.raises(UnknownCodecError, match="'text/csv'"):
        unknown.decode()
    truncated = Message.of({"a": "long enough"}, topic="T")
    truncated.body = truncated.body[:-3]
    with pytest.raises(BodyDecodeError, match="topic 'T': body of 12 bytes is not valid msgpack: .*incomplete"):
        truncated.decode()
    with pytest.raises(BodyDecodeError, match="not valid msgpack: ExtraData"):
        Message("T", b"\x01\x02").decode("msgpack")
    with pytest.raises(BodyDecodeError, match="not valid json"):
        Message("T", b"\xff").decode("json")
    assert isinstance(BodyDecodeError("x"), ValueError)
