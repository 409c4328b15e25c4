"""Properties of the frame codec (docs/PROTOCOL.md 1, 2.2, 2.3, 9).

* ``RemotingCommand`` round-trips in both serialize types for arbitrary fields.
* ``FrameDecoder`` fed anything (random bytes, truncated or mutated valid frames) only
  ever yields commands or raises ``ProtocolError``: never another exception, never an
  unbounded buffer, and a hostile length word is refused before anything is buffered.
* ali-ons style JSON headers (numbers and booleans inside ``extFields``, no
  ``serializeTypeCurrentRPC``) decode with the values coerced to strings.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol.codes import LanguageCode, RpcFlag, SerializeType
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import FrameTooLargeError, HeaderError, ProtocolError
from aiorocketmq.protocol.frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder
from aiorocketmq.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from tests.vectors import frame_bytes, frames_where

# Same examples on every run: the suite must be deterministic.
DETERMINISTIC = settings(derandomize=True, deadline=None, database=None)

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT16 = st.integers(min_value=-(2**15), max_value=2**15 - 1)
_PREFIX = struct.Struct(">iI")  # length, (serialize type << 24 | header length)

# A few captured frames of each encoding, to truncate and mutate.
SAMPLE_IDS = [f["id"] for f in frames_where(serialize="ROCKETMQ")[:40:4]] + [
    f["id"] for f in frames_where(serialize="JSON")[:200:10]
]


def _frame(header: bytes, serialize_byte: int = 0, body: bytes = b"",
           header_length: int | None = None, total_length: int | None = None) -> bytes:
    hlen = len(header) if header_length is None else header_length
    total = 4 + len(header) + len(body) if total_length is None else total_length
    return _PREFIX.pack(total, (serialize_byte << 24) | hlen) + header + body


def _drain(dec: FrameDecoder, chunks: list[bytes]) -> tuple[list[RemotingCommand], ProtocolError | None]:
    """Feed chunks, collecting commands until the stream ends or the decoder refuses it."""
    out: list[RemotingCommand] = []
    try:
        for chunk in chunks:
            out.extend(dec.feed_and_decode(chunk))
    except ProtocolError as exc:
        return out, exc
    return out, None


def _chunked(data: bytes, sizes: list[int]) -> list[bytes]:
    chunks, pos, i = [], 0, 0
    while pos < len(data):
        n = sizes[i % len(sizes)]
        chunks.append(data[pos : pos + n])
        pos += n
        i += 1
    return chunks


# -- RemotingCommand round trip ------------------------------------------------------------


@st.composite
def commands(draw: st.DrawFn, serialize_type: int) -> RemotingCommand:
    rocketmq = serialize_type == SerializeType.ROCKETMQ
    text = st.text(max_size=30)
    return RemotingCommand(
        draw(INT16 if rocketmq else INT32),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(INT16 if rocketmq else INT32),
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=draw(st.none() | text),
        ext_fields=draw(st.none() | st.dictionaries(text, text, max_size=8)),
        body=draw(st.none() | st.binary(max_size=300)),
        serialize_type=serialize_type,
    )


@pytest.mark.parametrize("serialize_type", list(SerializeType), ids=lambda s: s.name)
@settings(DETERMINISTIC, max_examples=300)
@given(data=st.data())
def test_command_round_trip(serialize_type: SerializeType, data: st.DataObject) -> None:
    cmd = data.draw(commands(serialize_type))
    wire = cmd.encode()
    back = RemotingCommand.decode(wire[4:])
    assert back.serialize_type == serialize_type
    assert (back.code, back.language, back.version, back.opaque, back.flag) == (
        cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag
    )
    assert back.is_response == bool(cmd.flag & RpcFlag.RESPONSE)
    assert back.is_oneway == bool(cmd.flag & RpcFlag.ONEWAY)
    if serialize_type == SerializeType.ROCKETMQ:
        # an empty remark or map is written as length 0 and reads back as absent
        assert back.remark == (cmd.remark or None)
        assert back.ext_fields == (cmd.ext_fields or None)
        assert list(back.ext_fields or {}) == list(cmd.ext_fields or {})
    else:
        assert back.remark == cmd.remark
        assert back.ext_fields == cmd.ext_fields
    assert (back.body or b"") == (cmd.body or b"")
    assert back.encode() == wire
    # the same bytes through the incremental decoder, whole and byte by byte
    for chunks in ([wire], [wire[i : i + 1] for i in range(len(wire))]):
        got, err = _drain(FrameDecoder(), chunks)
        assert err is None and len(got) == 1 and got[0].encode() == wire


def test_non_ascii_and_control_characters_survive_json() -> None:
    cmd = RemotingCommand(
        17, remark="No topic\nSee héllo-世界 \x01\x02\"\\", opaque=5,
        ext_fields={"i": "KEYS\x01k1\x02color\x01héllo-世界", "ключ": "значение"},
    )
    wire = cmd.encode()
    assert b"\\n" in wire and b"\\u0001" in wire and "世界".encode() in wire
    back = RemotingCommand.decode(wire[4:])
    assert back.remark == cmd.remark and back.ext_fields == cmd.ext_fields


# -- FrameDecoder: anything in, commands or ProtocolError out ---------------------------------


@settings(DETERMINISTIC, max_examples=300)
@given(data=st.binary(max_size=2000), sizes=st.lists(st.integers(1, 300), min_size=1, max_size=8))
def test_random_bytes_give_commands_or_protocol_error(data: bytes, sizes: list[int]) -> None:
    dec = FrameDecoder()
    _, err = _drain(dec, _chunked(data, sizes))
    if err is None:
        assert dec.buffered <= len(data)
    else:
        assert dec.buffered == 0


@st.composite
def plausible_frames(draw: st.DrawFn) -> bytes:
    """A consistent length prefix around a random header: reaches the header parsers."""
    serialize = draw(st.sampled_from([0, 1, 0, 1, 2, 0x7F, 0xFF]))
    header = draw(
        st.one_of(
            st.binary(max_size=200),
            st.builds(lambda o: json.dumps(o).encode(), st.dictionaries(
                st.sampled_from(["code", "flag", "language", "opaque", "remark", "version",
                                 "extFields", "serializeTypeCurrentRPC"]),
                st.recursive(
                    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8,
                ),
            )),
        )
    )
    body = draw(st.binary(max_size=50))
    return _frame(header, serialize, body)


@settings(DETERMINISTIC, max_examples=300)
@given(frames=st.lists(plausible_frames(), min_size=1, max_size=4))
def test_plausible_frames_give_commands_or_protocol_error(frames: list[bytes]) -> None:
    data = b"".join(frames)
    dec = FrameDecoder()
    got, err = _drain(dec, [data])
    assert len(got) <= len(frames)
    if err is None:
        assert len(got) == len(frames) and dec.buffered == 0
        for raw, cmd in zip(frames, got, strict=True):
            assert cmd.serialize_type == raw[4]


@settings(DETERMINISTIC, max_examples=200)
@given(frame_id=st.sampled_from(SAMPLE_IDS), data=st.data())
def test_truncated_valid_frames_wait_for_more(frame_id: int, data: st.DataObject) -> None:
    raw = frame_bytes(frame_id)
    cut = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    dec = FrameDecoder()
    got, err = _drain(dec, [raw[:cut]])
    assert got == [] and err is None and dec.buffered == cut
    got, err = _drain(dec, [raw[cut:]])
    assert err is None and [c.encode() for c in got] == [raw]


@settings(DETERMINISTIC, max_examples=300)
@given(
    frame_id=st.sampled_from(SAMPLE_IDS),
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1,
                   max_size=6),
)
def test_mutated_valid_frames_give_commands_or_protocol_error(
    frame_id: int, edits: list[tuple[int, int]]
) -> None:
    raw = bytearray(frame_bytes(frame_id))
    for pos, value in edits:
        # mostly hit the header, where the parsers are
        raw[pos % min(len(raw), 120)] = value
    dec = FrameDecoder()
    _, err = _drain(dec, [bytes(raw)])
    assert dec.buffered <= len(raw)
    if err is not None:
        assert dec.buffered == 0


def test_huge_length_word_is_refused_before_buffering() -> None:
    for length in (2**31 - 1, DEFAULT_MAX_FRAME_LENGTH - 3, DEFAULT_MAX_FRAME_LENGTH):
        dec = FrameDecoder()
        dec.feed(struct.pack(">i", length))
        with pytest.raises(FrameTooLargeError):
            dec.next_command()
        assert dec.buffered == 0
    # the limit counts the length word itself, as Netty's LengthFieldBasedFrameDecoder
    dec = FrameDecoder()
    dec.feed(struct.pack(">i", DEFAULT_MAX_FRAME_LENGTH - 4))
    assert dec.next_command() is None and dec.buffered == 4


@pytest.mark.parametrize("max_len", [64, 1024])
def test_configured_limit(max_len: int) -> None:
    cmd = RemotingCommand(34, opaque=1, body=b"x" * 2000)
    dec = FrameDecoder(max_frame_length=max_len)
    with pytest.raises(FrameTooLargeError, match=str(max_len)):
        dec.feed_and_decode(cmd.encode()[:8])
    assert dec.buffered == 0


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 3])
def test_length_below_header_word_is_protocol_error(length: int) -> None:
    dec = FrameDecoder()
    with pytest.raises(ProtocolError) as info:
        dec.feed_and_decode(struct.pack(">i", length) + b"\x00" * 8)
    assert not isinstance(info.value, FrameTooLargeError)
    assert dec.buffered == 0


def test_decoder_is_poisoned_after_an_error() -> None:
    dec = FrameDecoder()
    with pytest.raises(ProtocolError):
        dec.feed_and_decode(_frame(b"{}", serialize_byte=9))
    with pytest.raises(ProtocolError):
        dec.feed(RemotingCommand(34, opaque=1).encode())
    with pytest.raises(ProtocolError):
        dec.next_command()


@settings(DETERMINISTIC, max_examples=200)
@given(data=st.data())
def test_header_length_beyond_frame_is_protocol_error(data: st.DataObject) -> None:
    cmd = data.draw(commands(data.draw(st.sampled_from(list(SerializeType)))))
    wire = cmd.encode()
    total, word = _PREFIX.unpack_from(wire)
    hlen = word & 0xFFFFFF
    bad = data.draw(st.integers(min_value=total - 4 + 1, max_value=0xFFFFFF))
    assert bad > hlen
    mutated = _PREFIX.pack(total, (word & ~0xFFFFFF) | bad) + wire[8:]
    with pytest.raises(ProtocolError, match="header length"):
        FrameDecoder().feed_and_decode(mutated)


@pytest.mark.parametrize("serialize_byte", [2, 3, 0x10, 0x7F, 0x80, 0xFF])
def test_unknown_serialize_type_is_protocol_error(serialize_byte: int) -> None:
    wire = RemotingCommand(105, opaque=1, ext_fields={"topic": "T"}).encode()
    total, word = _PREFIX.unpack_from(wire)
    mutated = _PREFIX.pack(total, (serialize_byte << 24) | (word & 0xFFFFFF)) + wire[8:]
    with pytest.raises(ProtocolError, match="serialize type"):
        FrameDecoder().feed_and_decode(mutated)


def _rocketmq_header(ext: dict[str, str], remark: str | None = None) -> bytes:
    cmd = RemotingCommand(11, opaque=7, remark=remark, ext_fields=ext,
                          serialize_type=SerializeType.ROCKETMQ)
    return cmd.encode_header()


_FIXED = 2 + 1 + 2 + 4 + 4  # code, language, version, opaque, flag


@settings(DETERMINISTIC, max_examples=300)
@given(
    ext=st.dictionaries(st.text(max_size=10), st.text(max_size=10), min_size=1, max_size=5),
    remark=st.none() | st.text(min_size=1, max_size=10),
    data=st.data(),
)
def test_truncated_rocketmq_maps_are_protocol_errors(
    ext: dict[str, str], remark: str | None, data: st.DataObject
) -> None:
    header = _rocketmq_header(ext, remark)
    cut = data.draw(st.integers(min_value=0, max_value=len(header) - 1))
    # a header cut anywhere, framed consistently: the header parser must refuse it
    with pytest.raises(HeaderError):
        FrameDecoder().feed_and_decode(_frame(header[:cut], serialize_byte=1))
    # the full header with a body: the map length word must still be obeyed
    got = FrameDecoder().feed_and_decode(_frame(header, serialize_byte=1, body=b"BODY"))
    assert got[0].ext_fields == ext and got[0].body == b"BODY"


@settings(DETERMINISTIC, max_examples=200)
@given(
    ext=st.dictionaries(st.text(max_size=10), st.text(max_size=10), min_size=1, max_size=5),
    extra=st.integers(min_value=1, max_value=2**31 - 1),
)
def test_rocketmq_map_length_past_the_header_is_protocol_error(
    ext: dict[str, str], extra: int
) -> None:
    header = bytearray(_rocketmq_header(ext))
    (rlen,) = struct.unpack_from(">i", header, _FIXED)
    pos = _FIXED + 4 + rlen
    (elen,) = struct.unpack_from(">i", header, pos)
    struct.pack_into(">i", header, pos, min(elen + extra, 2**31 - 1))
    with pytest.raises(HeaderError):
        FrameDecoder().feed_and_decode(_frame(bytes(header), serialize_byte=1, body=b"xyz"))


def test_rocketmq_trailing_header_bytes_are_protocol_error() -> None:
    header = _rocketmq_header({"topic": "T"}) + b"\x00"
    with pytest.raises(HeaderError, match="trailing"):
        FrameDecoder().feed_and_decode(_frame(header, serialize_byte=1))


def test_rocketmq_invalid_utf8_is_protocol_error() -> None:
    header = bytearray(_rocketmq_header({"topic": "T"}))
    header[-1] = 0xFF  # the value byte "T"
    with pytest.raises(HeaderError, match="UTF-8"):
        FrameDecoder().feed_and_decode(_frame(bytes(header), serialize_byte=1))


@pytest.mark.parametrize(
    "header",
    [b"", b"not json", b"[1,2]", b'"x"', b'{"code":1.5}', b'{"code":true}', b'{"opaque":"x"}',
     b'{"extFields":[1]}', b'{"code":1', b"\xff\xfe{}"],
)
def test_malformed_json_headers_are_protocol_errors(header: bytes) -> None:
    with pytest.raises(HeaderError):
        FrameDecoder().feed_and_decode(_frame(header))


# -- ali-ons style JSON headers (docs/PROTOCOL.md 9) --------------------------------------------

_JS_VALUE = st.one_of(
    st.text(max_size=12),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.booleans(),
)


def _java_string(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


@settings(DETERMINISTIC, max_examples=300)
@given(
    code=st.integers(0, 400),
    opaque=st.integers(1, 2**31 - 1),
    ext=st.dictionaries(st.text(max_size=10), _JS_VALUE, max_size=10),
    remark=st.none() | st.text(max_size=10),
)
def test_ali_ons_json_headers_coerce_values(
    code: int, opaque: int, ext: dict[str, Any], remark: str | None
) -> None:
    obj: dict[str, Any] = {"code": code, "language": "JAVA", "opaque": opaque, "flag": 0,
                           "version": 121}
    if remark is not None:
        obj["remark"] = remark
    obj["extFields"] = ext
    header = json.dumps(obj, ensure_ascii=False).encode()
    (cmd,) = FrameDecoder().feed_and_decode(_frame(header, body=b"payload"))
    assert (cmd.code, cmd.opaque, cmd.version, cmd.flag) == (code, opaque, 121, 0)
    assert cmd.language == LanguageCode.JAVA and cmd.remark == remark
    assert cmd.ext_fields == {k: _java_string(v) for k, v in ext.items()}
    assert all(type(v) is str for v in cmd.ext_fields.values())
    assert cmd.body == b"payload"
    # our answer to it is plain JSON in the same serialize type
    resp = cmd.create_response(0, ext_fields={"offset": "5"})
    assert resp.serialize_type == SerializeType.JSON
    json.loads(resp.encode_header())


def test_ali_ons_pull_and_send_headers_decode() -> None:
    pull = (
        b'{"code":11,"language":"JAVA","opaque":3,"flag":0,"version":121,"extFields":'
        b'{"consumerGroup":"CG","topic":"T","queueId":0,"queueOffset":123,"maxMsgNums":32,'
        b'"sysFlag":7,"commitOffset":-1,"suspendTimeoutMillis":15000,"subscription":"*",'
        b'"subVersion":1700000000000}}'
    )
    (cmd,) = FrameDecoder().feed_and_decode(_frame(pull))
    h = PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    assert (h.queue_offset, h.sys_flag, h.commit_offset, h.subscription) == (123, 7, -1, "*")
    assert h.expression_type is None and h.bname is None
    send = (
        b'{"code":310,"language":"JAVA","opaque":4,"flag":0,"version":121,"extFields":'
        b'{"a":"PG","b":"T","c":"TBW102","d":4,"e":1,"f":0,"g":1700000000000,"h":0,'
        b'"i":"TAGS\\u0001A","j":0,"k":false,"l":16}}'
    )
    (cmd,) = FrameDecoder().feed_and_decode(_frame(send))
    v2 = SendMessageRequestHeaderV2.from_ext_fields(cmd.ext_fields)
    assert (v2.queue_id, v2.unit_mode, v2.batch, v2.max_reconsume_times) == (1, False, False, 16)


def test_deeply_nested_json_header_is_protocol_error() -> None:
    with pytest.raises(HeaderError):
        FrameDecoder().feed_and_decode(_frame(b"[" * 100_000))


def test_json_header_number_outside_int32_is_protocol_error() -> None:
    with pytest.raises(HeaderError):
        FrameDecoder().feed_and_decode(_frame(b'{"code":4294967296,"opaque":1}'))
