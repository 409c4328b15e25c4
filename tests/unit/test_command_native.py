"""The C ROCKETMQ header codec (``protocol/_command.c``) gives exactly what command.py's
Python codec gives, or hands the input back (None) for the Python path, which raises.

Decode: on every captured 4.9.7 ROCKETMQ header, on generated headers (codes, versions,
opaques, flags, remarks and ext fields of every shape, non-ASCII included), on headers
with lying length words, and on valid headers truncated, extended or with bytes
overwritten anywhere. Encode: on generated commands, and on what only Python writes
(non-str values, str subclasses) or refuses (numbers out of range, lone surrogates, keys
over 32767 bytes). The C module is expected to be built here: a C compiler is part of
this project's toolchain (setup.py).
"""

from __future__ import annotations

import ctypes
import enum
import mmap
import struct
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq import NO_EXTENSIONS
from aiorocketmq.protocol import command as command_module
from aiorocketmq.protocol.codes import LanguageCode, RequestCode, RpcFlag, SerializeType
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import HeaderError
from tests.vectors import frame_bytes, frames_where

DETERMINISTIC = settings(derandomize=True, deadline=None, database=None, max_examples=300)

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT16 = st.integers(min_value=-(2**15), max_value=2**15 - 1)
INT8 = st.integers(min_value=-128, max_value=127)
TEXT = st.one_of(st.text(max_size=40), st.sampled_from(["", "a", "é", "\u4e2d\u6587", "\U0001f600"]))
FIELDS = RemotingCommand.__slots__
ROCKETMQ = SerializeType.ROCKETMQ


def _c_module() -> Any:
    """The built module itself: under AIOROCKETMQ_NO_EXTENSIONS command.py leaves it unused,
    and these tests still hold it to the Python codec."""
    try:
        from aiorocketmq.protocol import _command
    except ImportError as exc:  # pragma: no cover - the suite fails, never skips
        raise AssertionError("aiorocketmq.protocol._command is not built: pip install -e . "
                             "builds it where a C compiler is found") from exc
    return _command


def _decode_c() -> Any:
    return _c_module().decode_rocketmq_header


def _encode_c() -> Any:
    return _c_module().encode_rocketmq_header


def test_the_codec_is_c_unless_switched_off() -> None:
    if NO_EXTENSIONS:  # the switch: the Python codec runs though C is built
        assert command_module._c_decode_rocketmq is None
        assert command_module._c_encode_rocketmq is None
    else:
        assert command_module._c_decode_rocketmq is _decode_c()
        assert command_module._c_encode_rocketmq is _encode_c()


def _guard_page() -> mmap.mmap | None:
    """An anonymous map whose last page cannot be read (Linux: mprotect by ctypes), so a
    header written to end just before it makes the C decoder crash on any read past its
    end (a bytes object has its NUL, and malloc its slack, for such a read to land in)."""
    mm = mmap.mmap(-1, _GUARDED + mmap.PAGESIZE)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        start = ctypes.c_char.from_buffer(mm)
        addr = ctypes.addressof(start)
        del start
        if libc.mprotect(ctypes.c_void_p(addr + _GUARDED), mmap.PAGESIZE, 0) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return mm


_GUARDED = 256 * 1024
_GUARD = _guard_page()


def _decode_c_at_guard(header: bytes | bytearray | memoryview) -> RemotingCommand | None:
    """The C decoder on ``header`` copied to end where the guard page begins."""
    n = len(header)
    if _GUARD is None or n > _GUARDED:
        return _decode_c()(header, RemotingCommand, ROCKETMQ)  # type: ignore[no-any-return]
    _GUARD[_GUARDED - n : _GUARDED] = header
    with memoryview(_GUARD) as mv, mv[_GUARDED - n : _GUARDED] as view:
        return _decode_c()(view, RemotingCommand, ROCKETMQ)  # type: ignore[no-any-return]


def _fields(cmd: RemotingCommand) -> list[tuple[str, type, Any]]:
    out = [(name, type(getattr(cmd, name)), getattr(cmd, name)) for name in FIELDS]
    if cmd.ext_fields is not None:  # the order too, and every key and value a str
        out.append(("ext order", list, list(cmd.ext_fields.items())))
        out.append(("ext types", set, {(type(k), type(v)) for k, v in cmd.ext_fields.items()}))
    return out


def _same_decode(header: bytes | bytearray | memoryview) -> RemotingCommand | None:
    """C and Python on ``header``: the same command, or C hands it back (None) exactly when
    Python raises, and the dispatching decoder raises Python's error. Returns C's answer."""
    got = _decode_c()(header, RemotingCommand, ROCKETMQ)
    guarded = _decode_c_at_guard(header)
    assert (guarded is None) == (got is None)
    if got is not None:
        assert _fields(guarded) == _fields(got)  # type: ignore[arg-type]
    try:
        expected = RemotingCommand._decode_rocketmq_header_py(memoryview(header))
    except HeaderError as exc:
        assert got is None
        with pytest.raises(HeaderError) as raised:
            RemotingCommand._decode_rocketmq_header(memoryview(header))
        assert str(raised.value) == str(exc)
        return None
    assert got is not None, "C handed back a header Python reads"
    assert type(got) is RemotingCommand
    assert _fields(got) == _fields(expected)
    assert got.serialize_type is ROCKETMQ
    return got


def _header(code: int = 310, language: int = 0, version: int = 407, opaque: int = 1,
            flag: int = 0, remark: bytes = b"", ext: bytes = b"",
            remark_len: int | None = None, ext_len: int | None = None) -> bytes:
    """A header from raw parts; the length words may lie."""
    return (struct.pack(">hbhiii", code, language, version, opaque, flag,
                        len(remark) if remark_len is None else remark_len)
            + remark + struct.pack(">i", len(ext) if ext_len is None else ext_len) + ext)


def _entry(key: bytes, value: bytes, klen: int | None = None, vlen: int | None = None) -> bytes:
    return (struct.pack(">H", len(key) if klen is None else klen) + key
            + struct.pack(">i", len(value) if vlen is None else vlen) + value)


commands = st.builds(
    lambda code, language, version, opaque, flag, remark, ext: RemotingCommand(
        code, language=language, version=version, opaque=opaque, flag=flag, remark=remark,
        ext_fields=ext, serialize_type=ROCKETMQ),
    INT16, INT8, INT16, INT32, INT32, st.none() | TEXT,
    st.none() | st.dictionaries(TEXT, TEXT, max_size=40))


# -- decode -----------------------------------------------------------------------------------


def _captured_headers() -> list[bytes]:
    out = []
    for rec in frames_where(serialize="ROCKETMQ"):
        frame = frame_bytes(rec["id"])
        hlen = struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF
        out.append(frame[8 : 8 + hlen])
    return out


def test_guard_page_is_armed() -> None:
    assert _GUARD is not None, "mprotect unavailable: the guarded reads are not checked"


def test_captured_headers() -> None:
    headers = _captured_headers()
    assert len(headers) > 200
    for header in headers:
        cmd = _same_decode(header)
        assert cmd is not None
        # Written back byte for byte, by both encoders.
        assert _encode_c()(cmd) == header == cmd._encode_rocketmq_header_py()


def test_captured_send_v2_through_decode() -> None:
    (rec,) = frames_where(code=RequestCode.SEND_MESSAGE_V2, is_response=False,
                          serialize="ROCKETMQ")[:1]
    cmd = RemotingCommand.decode(frame_bytes(rec["id"])[4:])
    assert cmd.serialize_type is ROCKETMQ and cmd.body is not None
    assert cmd.ext_fields is not None and cmd.ext_fields["b"] == "TestTopicBin"
    assert cmd.remark is None and cmd.code == RequestCode.SEND_MESSAGE_V2


@DETERMINISTIC
@given(commands)
def test_generated_headers(cmd: RemotingCommand) -> None:
    header = cmd._encode_rocketmq_header_py()
    got = _same_decode(header)
    assert got is not None
    assert got.remark == (cmd.remark or None)
    assert got.ext_fields == (cmd.ext_fields or None)
    # Every buffer type the decoder may see: bytes, bytearray, a view into a larger buffer.
    padded = b"xx" + header + b"yy"
    for buf in (bytearray(header), memoryview(padded)[2:-2]):
        assert _fields(_same_decode(buf)) == _fields(got)  # type: ignore[arg-type]


@DETERMINISTIC
@given(commands, st.data())
def test_mutated_headers(cmd: RemotingCommand, data: st.DataObject) -> None:
    header = bytearray(cmd._encode_rocketmq_header_py())
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(header) - 1))
        header[pos] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xC3, 0xED, 0xFF])
                                | st.integers(0, 255))
    _same_decode(bytes(header))


@DETERMINISTIC
@given(commands, st.data())
def test_truncated_and_extended_headers(cmd: RemotingCommand, data: st.DataObject) -> None:
    header = cmd._encode_rocketmq_header_py()
    cut = data.draw(st.integers(0, len(header)))
    assert _same_decode(header[:cut]) is None or cut == len(header)
    assert _same_decode(header + data.draw(st.binary(min_size=1, max_size=8))) is None


LENGTHS = st.one_of(st.integers(-3, 40), st.sampled_from(
    [-(2**31), -1, 0x7FFF, 0x8000, 0xFFFF, 2**31 - 1, 2**31 - 17, 2**31 - 21]))


@DETERMINISTIC
@given(remark=st.binary(max_size=12), remark_len=st.none() | LENGTHS,
       entries=st.lists(st.tuples(st.binary(max_size=6), st.binary(max_size=6),
                                  st.none() | LENGTHS, st.none() | LENGTHS), max_size=4),
       ext_len=st.none() | LENGTHS, tail=st.binary(max_size=3))
def test_lying_lengths(remark: bytes, remark_len: int | None,
                       entries: list[tuple[bytes, bytes, int | None, int | None]],
                       ext_len: int | None, tail: bytes) -> None:
    # A key length word is 16 bits: a drawn length outside them writes the true one.
    ext = b"".join(_entry(k, v, kl if kl is None or 0 <= kl <= 0xFFFF else None, vl)
                   for k, v, kl, vl in entries)
    _same_decode(_header(remark=remark, remark_len=remark_len, ext=ext + tail, ext_len=ext_len))


@DETERMINISTIC
@given(st.binary(max_size=64))
def test_random_bytes(data: bytes) -> None:
    _same_decode(data)
    _same_decode(_header()[:17] + data)


@pytest.mark.parametrize("header", [
    _header(remark=b"\xff"),  # not UTF-8
    _header(remark=b"\xed\xa0\x80"),  # a surrogate
    _header(remark=b"\xc0\x80"),  # overlong
    _header(ext=_entry(b"\xf4\x90\x80\x80", b"v")),  # past U+10FFFF
    _header(ext=_entry(b"k", b"\xe4\xb8")),  # truncated sequence
    _header(ext=_entry(b"k", b"v", klen=0x8000)),
    _header(ext=_entry(b"k" * 0x8000, b"v")),  # Java's short goes negative
    _header(ext=_entry(b"k" * 0xFFFF, b"")),
    _header(ext=_entry(b"k", b"v", vlen=-1)),
    _header(ext=_entry(b"k", b"v") + b"\x00"),  # a key length cut short
    _header(ext=_entry(b"k", b"v"), ext_len=0),  # trailing bytes
    _header(remark=b"r", remark_len=2**31 - 1),
    _header()[:-1],
    b"",
])
def test_malformed_headers(header: bytes) -> None:
    assert _same_decode(header) is None


def test_edge_values() -> None:
    ext = _entry(b"", b"") + _entry(b"k", b"1") + _entry(b"k", b"2") + _entry(b"", b"x")
    cmd = _same_decode(_header(code=-32768, language=-128, version=32767, opaque=-(2**31),
                               flag=2**31 - 1, remark=b"\xe4\xb8\xad", ext=ext))
    assert cmd is not None
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (
        -32768, -128, 32767, -(2**31), 2**31 - 1)
    assert cmd.remark == "\u4e2d"
    assert list(cmd.ext_fields.items()) == [("", "x"), ("k", "2")]  # type: ignore[union-attr]
    empty = _same_decode(_header(ext=b"", remark=b""))
    assert empty is not None and empty.remark is None and empty.ext_fields is None


def test_many_fields() -> None:
    ext = {f"key-{i}": "v" * i for i in range(300)}
    cmd = RemotingCommand(1, ext_fields=ext, serialize_type=ROCKETMQ)
    header = _encode_c()(cmd)
    assert header == cmd._encode_rocketmq_header_py()
    assert _same_decode(header).ext_fields == ext  # type: ignore[union-attr]


def test_subclasses() -> None:
    header = _header(ext=_entry(b"k", b"v"))

    class Slotted(RemotingCommand):
        __slots__ = ()

    class WithDict(RemotingCommand):
        pass

    got = _decode_c()(header, Slotted, ROCKETMQ)
    assert type(got) is Slotted and got.ext_fields == {"k": "v"}
    assert _decode_c()(header, WithDict, ROCKETMQ) is None  # its __init__ may matter
    assert type(WithDict._decode_rocketmq_header(memoryview(header))) is WithDict
    assert _decode_c()(header, RemotingCommand, ROCKETMQ) is not None
    # Not a buffer, or not a contiguous one: Python decides.
    assert _decode_c()(memoryview(header * 2)[::2], RemotingCommand, ROCKETMQ) is None
    assert _decode_c()("text", RemotingCommand, ROCKETMQ) is None
    with pytest.raises(TypeError):
        _decode_c()(header, RemotingCommand)


# -- encode -----------------------------------------------------------------------------------


@DETERMINISTIC
@given(commands)
def test_generated_encode(cmd: RemotingCommand) -> None:
    got = _encode_c()(cmd)
    assert type(got) is bytes
    assert got == cmd._encode_rocketmq_header_py() == cmd.encode_header()


@DETERMINISTIC
@given(commands, st.data())
def test_encode_none_entries(cmd: RemotingCommand, data: st.DataObject) -> None:
    ext: dict[Any, Any] = dict(cmd.ext_fields or {})
    for _ in range(data.draw(st.integers(1, 3))):
        ext[data.draw(st.none() | TEXT)] = data.draw(st.none() | TEXT)
    cmd.ext_fields = ext
    assert _encode_c()(cmd) == cmd._encode_rocketmq_header_py()


class _Str(str):
    pass


class _Code(enum.IntEnum):
    X = 310


@pytest.mark.parametrize("changes", [
    {"ext_fields": {"k": 5}},
    {"ext_fields": {"k": _Str("v")}},
    {"ext_fields": {_Str("k"): "v"}},
    {"ext_fields": OrderedDict(k="v")},
    {"remark": _Str("r")},
    {"remark": 0},
])
def test_encode_hands_back_what_only_python_writes(changes: dict[str, Any]) -> None:
    cmd = RemotingCommand(310, opaque=7, serialize_type=ROCKETMQ)
    for name, value in changes.items():
        setattr(cmd, name, value)
    assert _encode_c()(cmd) is None
    assert cmd.encode_header() == cmd._encode_rocketmq_header_py()


@pytest.mark.parametrize("changes", [
    {"code": 2**15}, {"code": -(2**15) - 1}, {"language": 128}, {"version": 2**15},
    {"opaque": 2**31}, {"flag": -(2**31) - 1}, {"code": 2**70}, {"code": "1"},
    {"code": 1.0}, {"remark": "\ud800"}, {"ext_fields": {"k": "\udfff"}},
    {"ext_fields": {"\ud800": "v"}}, {"ext_fields": {"k" * 0x8000: "v"}},
    {"ext_fields": {1: "v"}}, {"remark": 5}, {"ext_fields": ["k"]},
])
def test_encode_hands_back_what_python_refuses(changes: dict[str, Any]) -> None:
    cmd = RemotingCommand(310, opaque=7, serialize_type=ROCKETMQ)
    for name, value in changes.items():
        setattr(cmd, name, value)
    assert _encode_c()(cmd) is None
    with pytest.raises(Exception) as expected:
        cmd._encode_rocketmq_header_py()
    with pytest.raises(type(expected.value)):
        cmd.encode_header()


def test_encode_int_subclasses_and_unset_slots() -> None:
    cmd = RemotingCommand(_Code.X, language=LanguageCode.PYTHON, opaque=True,
                          flag=RpcFlag.RESPONSE, remark="", ext_fields={},
                          serialize_type=ROCKETMQ)
    assert _encode_c()(cmd) == cmd._encode_rocketmq_header_py()
    bare = object.__new__(RemotingCommand)
    assert _encode_c()(bare) is None
    with pytest.raises(AttributeError):
        bare.encode_header()
