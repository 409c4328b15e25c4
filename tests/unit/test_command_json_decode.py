"""JSON header decoding: the direct-scanner path and the json.loads path give the same commands."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import HeaderError


def _payload(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">i", len(header)) + header + body


def _fields(cmd: RemotingCommand) -> tuple:
    return (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark,
            cmd.ext_fields, cmd.body)


BASE = {"code": 310, "flag": 0, "language": "JAVA", "opaque": 7, "version": 395,
        "serializeTypeCurrentRPC": "JSON", "extFields": {"a": "1", "b": "x"}}


@pytest.mark.parametrize("header", [
    json.dumps(BASE).encode(),                       # spaces between tokens
    b"  " + json.dumps(BASE).encode() + b"\n",        # whitespace around the object
    b"\xef\xbb\xbf" + json.dumps(BASE).encode(),     # UTF-8 byte order mark
    json.dumps(BASE).encode("utf-16"),               # another encoding json.loads detects
    json.dumps(dict(BASE, code="310", opaque="7")).encode(),  # numbers as strings
])
def test_lenient_headers_decode_like_compact_ones(header: bytes) -> None:
    compact = json.dumps(BASE, separators=(",", ":")).encode()
    assert _fields(RemotingCommand.decode(_payload(header, b"B"))) == \
        _fields(RemotingCommand.decode(_payload(compact, b"B")))


def test_non_string_ext_values_are_coerced() -> None:
    header = json.dumps(dict(BASE, extFields={"n": 3, "t": True, "f": 1.5, "s": "s"})).encode()
    cmd = RemotingCommand.decode(_payload(header))
    assert cmd.ext_fields == {"n": "3", "t": "true", "f": "1.5", "s": "s"}


@pytest.mark.parametrize("header", [
    b'{"code":1} trailing', b'[1,2]', b'{"code":1', b'{"code":2147483648,"opaque":1}',
    b'{"code":true,"opaque":1}', b'\xff\xfe\x00',
])
def test_bad_headers_raise_header_error(header: bytes) -> None:
    with pytest.raises(HeaderError):
        RemotingCommand.decode(_payload(header))


@given(code=st.integers(-2**31, 2**31 - 1), opaque=st.integers(0, 2**31 - 1),
       ext=st.dictionaries(st.text(max_size=8), st.text(max_size=16), max_size=6),
       remark=st.none() | st.text(max_size=20))
def test_encode_decode_round_trip(code: int, opaque: int, ext: dict[str, str],
                                  remark: str | None) -> None:
    cmd = RemotingCommand(code, opaque=opaque, ext_fields=ext, remark=remark, body=b"xy")
    back = RemotingCommand.decode(cmd.encode()[4:])
    assert _fields(back) == _fields(cmd)
