"""RemotingCommand: the one message type of the remoting protocol, and its two header encodings.

A frame on the wire (docs/PROTOCOL.md 1) is::

    int32 totalLength | int32 (serializeType << 24 | headerLength) | header | body

``RemotingCommand.encode()`` produces a whole frame; ``RemotingCommand.decode(payload)``
takes the frame *without* its 4-byte length prefix (what ``FrameDecoder`` hands out).

JSON headers are written as fastjson writes ``RemotingCommand`` (docs/PROTOCOL.md 2.2):
keys alphabetical, nulls omitted, ``language`` by name, ``serializeTypeCurrentRPC``
present, ``extFields`` values strings in Java ``HashMap`` order. ROCKETMQ headers follow
``RocketMQSerializable`` byte for byte (docs/PROTOCOL.md 2.3); where the optional C module
``_command`` (protocol/_command.c) is built it reads and writes them, handing anything
unusual back to ``_decode_rocketmq_header_py`` / ``_encode_rocketmq_header_py``, which stay
the reference (and raise the errors).
"""

from __future__ import annotations

import itertools
import json
import struct
from typing import TYPE_CHECKING, Any

from aiorocketmq import refuse_extension

from .codes import CURRENT_VERSION, LanguageCode, RpcFlag, SerializeType
from .errors import HeaderError, ProtocolError
from .javautil import java_hashmap_order

if TYPE_CHECKING:
    from .headers import CommandHeader

try:
    refuse_extension("aiorocketmq.protocol._command")
    from ._command import decode_rocketmq_header as _c_decode_rocketmq
    from ._command import encode_rocketmq_header as _c_encode_rocketmq
except ImportError:  # no C compiler, or AIOROCKETMQ_NO_EXTENSIONS: the codec runs in Python
    _c_decode_rocketmq = None  # type: ignore[assignment]
    _c_encode_rocketmq = None  # type: ignore[assignment]

__all__ = ["RemotingCommand", "next_opaque"]

_INT = struct.Struct(">i")
_PREFIX = struct.Struct(">ii")
_BIN_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remarkLength
_SHORT = struct.Struct(">h")

_opaque_counter = itertools.count()


def next_opaque() -> int:
    """Next request id from the process-wide counter (upstream ``RemotingCommand.requestId``)."""
    return next(_opaque_counter) & 0x7FFFFFFF


_LANG_BY_NAME = {lc.name: lc for lc in LanguageCode}
_JSON = SerializeType.JSON
_ROCKETMQ = SerializeType.ROCKETMQ
_new_command = object.__new__
_str_type = str
_RESPONSE_FLAG = int(RpcFlag.RESPONSE)  # ints: Flag arithmetic is Python code in enum
_ONEWAY_FLAG = int(RpcFlag.ONEWAY)
_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]  # "..." with escapes, non-ASCII raw
_json_loads = json.loads
# The C scanner behind json.loads, called directly for the common case (a UTF-8 object with
# nothing around it); anything else goes through json.loads for its exact leniency and errors.
_scan_once = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]

# A request type always carries the same extFields key set, so the Java HashMap order of
# each key tuple is computed once (bounded: distinct key sets are few), together with each
# key already written as JSON (``"key":``), so a header costs one escape per value.
_order_cache: dict[tuple[str, ...], list[tuple[str, str]]] = {}
_LANG_NAME_BY_VALUE = {lc.value: lc.name for lc in LanguageCode}


def _all_str(values: Any) -> bool:
    for v in values:
        if type(v) is not _str_type:
            return False
    return True


def _json_key_order(ef: dict[str, str]) -> list[tuple[str, str]]:
    keys = tuple(ef)
    order = _order_cache.get(keys)
    if order is None:
        names = java_hashmap_order(keys) if len(keys) > 1 else list(keys)
        order = [(k, _encode_str(k) + ":") for k in names]
        if len(_order_cache) < 4096:
            _order_cache[keys] = order
    return order


class _EdgeDecoded:
    """``header``: a request's typed custom header, set by the server's edge before the
    handler runs (``protocol.validation.guard``; read it with ``headers.decode_header``).
    Unset on any other command (reading it then raises ``AttributeError``). Kept out of
    ``RemotingCommand.__slots__``, which lists the wire fields the codecs (the C one
    included) read and write."""

    __slots__ = ("header",)

    header: CommandHeader


class RemotingCommand(_EdgeDecoded):
    """A request or response; ``ext_fields`` is the flattened custom header (all values ``str``).

    ``body`` is ``bytes`` (or any bytes-like object for zero-copy sends) or ``None``.
    ``serialize_type`` is how this command is (or was) encoded; responses should use
    the request's (see ``create_response``).
    """

    __slots__ = (
        "code",
        "language",
        "version",
        "opaque",
        "flag",
        "remark",
        "ext_fields",
        "body",
        "serialize_type",
    )

    def __init__(
        self,
        code: int,
        *,
        language: int = LanguageCode.JAVA,
        version: int = CURRENT_VERSION,
        opaque: int | None = None,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes | bytearray | memoryview | None = None,
        serialize_type: int = SerializeType.JSON,
    ) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = next_opaque() if opaque is None else opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields
        self.body = body
        self.serialize_type = serialize_type

    # -- construction helpers -------------------------------------------------------------

    @classmethod
    def create_request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | bytearray | memoryview | None = None,
        *,
        language: int = LanguageCode.JAVA,
        serialize_type: int = SerializeType.JSON,
    ) -> RemotingCommand:
        return cls(code, ext_fields=ext_fields, body=body, language=language,
                   serialize_type=serialize_type)

    def create_response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes | bytearray | memoryview | None = None,
        *,
        language: int = LanguageCode.JAVA,
    ) -> RemotingCommand:
        """A response to this request: its opaque, the response flag, its serialize type."""
        # One per request: the slots filled directly, without __init__'s keyword parsing.
        cmd: RemotingCommand = _new_command(RemotingCommand)
        cmd.code = code
        cmd.language = language
        cmd.version = CURRENT_VERSION
        cmd.opaque = self.opaque
        cmd.flag = _RESPONSE_FLAG  # a plain int: Flag arithmetic runs Python code per response
        cmd.remark = remark
        cmd.ext_fields = ext_fields
        cmd.body = body
        cmd.serialize_type = self.serialize_type
        return cmd

    # -- flags ----------------------------------------------------------------------------

    @property
    def is_response(self) -> bool:
        return bool(self.flag & _RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & _ONEWAY_FLAG)

    def mark_oneway(self) -> None:
        self.flag |= _ONEWAY_FLAG

    def mark_response(self) -> None:
        self.flag |= _RESPONSE_FLAG

    def ext(self, key: str, default: str | None = None) -> str | None:
        """One ext field, or ``default``."""
        ef = self.ext_fields
        if ef is None:
            return default
        return ef.get(key, default)

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        blen = 0 if self.body is None else len(self.body)
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"remark={self.remark!r} ext_fields={self.ext_fields!r} body={blen}B "
            f"serialize={SerializeType(self.serialize_type).name})"
        )

    # -- encoding -------------------------------------------------------------------------

    def encode_header(self) -> bytes:
        """The header bytes in this command's serialize type."""
        if self.serialize_type == SerializeType.ROCKETMQ:
            return self._encode_rocketmq_header()
        return self._encode_json_header()

    def _encode_json_header(self) -> bytes:
        ef = self.ext_fields
        if ef is None:
            ext = ""
        else:
            fields = []
            for key, key_json in _json_key_order(ef):
                value = ef[key]
                if value is None:
                    continue
                fields.append(key_json + _encode_str(value if isinstance(value, str) else str(value)))
            ext = ',"extFields":{' + ",".join(fields) + "}"
        remark = "" if self.remark is None else ',"remark":' + _encode_str(self.remark)
        return (
            f'{{"code":{int(self.code)}{ext},"flag":{int(self.flag)},"language":"'
            f'{_LANG_NAME_BY_VALUE.get(self.language, "JAVA")}","opaque":{int(self.opaque)}'
            f'{remark},"serializeTypeCurrentRPC":"JSON","version":{int(self.version)}}}'
        ).encode()

    def _encode_rocketmq_header(self) -> bytes:
        if _c_encode_rocketmq is not None:
            header = _c_encode_rocketmq(self)
            if header is not None:
                return header
        return self._encode_rocketmq_header_py()

    def _encode_rocketmq_header_py(self) -> bytes:
        """The ROCKETMQ header in Python: the reference, and what the C encoder leaves."""
        remark = self.remark.encode("utf-8") if self.remark else b""
        out = bytearray(
            _BIN_FIXED.pack(self.code, self.language, self.version, self.opaque, self.flag,
                            len(remark))
        )
        out += remark
        ef = self.ext_fields
        if ef:
            area = bytearray()
            for key, value in ef.items():
                if key is None or value is None:
                    continue
                kb = key.encode("utf-8")
                vb = (value if isinstance(value, str) else str(value)).encode("utf-8")
                area += _SHORT.pack(len(kb))
                area += kb
                area += _INT.pack(len(vb))
                area += vb
            out += _INT.pack(len(area))
            out += area
        else:
            out += b"\x00\x00\x00\x00"
        return bytes(out)

    def encode_parts(self) -> tuple[bytes, bytes | bytearray | memoryview | None]:
        """(length prefix + header-length word + header, body): write both, in order."""
        header = self.encode_header()
        body = self.body
        blen = 0 if body is None else len(body)
        hlen = len(header)
        if hlen > 0xFFFFFF:
            raise HeaderError(f"header of {hlen} bytes does not fit the 24-bit length field")
        prefix = _PREFIX.pack(4 + hlen + blen, (self.serialize_type << 24) | hlen)
        return prefix + header, (body if blen else None)

    def encode(self) -> bytes:
        """The whole frame, length prefix included."""
        head, body = self.encode_parts()
        return head + bytes(body) if body is not None else head

    # -- decoding -------------------------------------------------------------------------

    @classmethod
    def decode(cls, payload: bytes | bytearray | memoryview) -> RemotingCommand:
        """Decode a frame without its 4-byte length prefix.

        Raises ``ProtocolError`` (or its subclass ``HeaderError``) for anything malformed;
        any other exception is a bug.
        """
        n = len(payload)
        if n < 4:
            raise ProtocolError(f"frame of {n} bytes has no header-length word")
        word = _INT.unpack_from(payload, 0)[0]
        stype = (word >> 24) & 0xFF
        hlen = word & 0xFFFFFF
        if hlen > n - 4:
            raise ProtocolError(f"header length {hlen} exceeds frame payload {n - 4}")
        mv = memoryview(payload)
        header = mv[4 : 4 + hlen]
        if stype == _JSON:
            cmd = cls._decode_json_header(header)
        elif stype == _ROCKETMQ:
            # _decode_rocketmq_header inlined: the C decoder, then Python for what it leaves.
            c_cmd = None if _c_decode_rocketmq is None else _c_decode_rocketmq(header, cls, _ROCKETMQ)
            cmd = c_cmd if c_cmd is not None else cls._decode_rocketmq_header_py(header)
        else:
            raise ProtocolError(f"unknown serialize type {stype}")
        if n > 4 + hlen:
            cmd.body = bytes(mv[4 + hlen :])
        return cmd

    @classmethod
    def _decode_json_header(cls, header: memoryview) -> RemotingCommand:
        obj: Any = None
        try:
            text = str(header, "utf-8")
            obj, end = _scan_once(text, 0)
            if end != len(text):
                obj = None
        except (ValueError, StopIteration, RecursionError):
            obj = None
        if type(obj) is dict:
            # What Java writes (every request and response): int fields in range, the
            # language by name, extFields all strings. Filled in place of __init__'s
            # keyword parsing; anything else takes the general path below.
            get = obj.get
            code = get("code", 0)
            flag = get("flag", 0)
            version = get("version", 0)
            opaque = get("opaque")
            lang_raw = get("language", "JAVA")
            lang = _LANG_BY_NAME.get(lang_raw) if type(lang_raw) is _str_type else None
            remark = get("remark")
            ext_raw = get("extFields")
            if (type(code) is int and type(flag) is int and type(version) is int
                    and type(opaque) is int and lang is not None
                    and -0x80000000 <= opaque <= 0x7FFFFFFF and -0x80000000 <= code <= 0x7FFFFFFF
                    and -0x80000000 <= flag <= 0x7FFFFFFF
                    and -0x80000000 <= version <= 0x7FFFFFFF
                    and (remark is None or type(remark) is str)
                    and (ext_raw is None or (type(ext_raw) is dict
                                             and _all_str(ext_raw.values())))):
                cmd = _new_command(cls)
                cmd.code = code
                cmd.language = lang
                cmd.version = version
                cmd.opaque = opaque
                cmd.flag = flag
                cmd.remark = remark
                cmd.ext_fields = ext_raw
                cmd.body = None
                cmd.serialize_type = _JSON
                return cmd
        if obj is None:
            data = bytes(header)
            try:
                obj = _json_loads(data)
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                raise HeaderError(f"JSON header does not parse: {exc.__class__.__name__}") from None
        if not isinstance(obj, dict):
            raise HeaderError("JSON header is not an object")
        get = obj.get
        code = get("code", 0)
        flag = get("flag", 0)
        version = get("version", 0)
        opaque = get("opaque")
        # Java writes plain ints; anything else (strings, out of range) takes the checked path.
        if not (type(code) is int and type(flag) is int and type(version) is int
                and type(opaque) is int and -0x80000000 <= opaque <= 0x7FFFFFFF
                and -0x80000000 <= code <= 0x7FFFFFFF and -0x80000000 <= flag <= 0x7FFFFFFF
                and -0x80000000 <= version <= 0x7FFFFFFF):
            try:
                code = _as_int(code)
                flag = _as_int(flag)
                version = _as_int(version)
                opaque = next_opaque() if opaque is None else _as_int(opaque)
            except (TypeError, ValueError) as exc:
                raise HeaderError(f"JSON header field has the wrong type: {exc}") from None
        lang_raw = obj.get("language", "JAVA")
        if isinstance(lang_raw, str):
            language: int = _LANG_BY_NAME.get(lang_raw, LanguageCode.OTHER)
        elif isinstance(lang_raw, int) and not isinstance(lang_raw, bool):
            language = lang_raw
        else:
            language = LanguageCode.OTHER
        remark = obj.get("remark")
        if remark is not None and not isinstance(remark, str):
            remark = str(remark)
        ext_raw = obj.get("extFields")
        ext: dict[str, str] | None
        if ext_raw is None:
            ext = None
        elif isinstance(ext_raw, dict):
            for v in ext_raw.values():
                if type(v) is not str:
                    break
            else:
                ext = ext_raw  # all strings (Java's case): the parsed dict is ours to keep
                return cls(code, language=language, version=version, opaque=opaque, flag=flag,
                           remark=remark, ext_fields=ext, serialize_type=SerializeType.JSON)
            ext = {}
            for k, v in ext_raw.items():
                if v is None:
                    continue
                # Some clients (ali-ons) send JSON numbers and booleans: coerce as Java does.
                if isinstance(v, str):
                    ext[k] = v
                elif isinstance(v, bool):
                    ext[k] = "true" if v else "false"
                elif isinstance(v, (int, float)):
                    ext[k] = str(v)
                else:
                    ext[k] = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
        else:
            raise HeaderError("JSON header extFields is not an object")
        return cls(
            code,
            language=language,
            version=version,
            opaque=opaque,
            flag=flag,
            remark=remark,
            ext_fields=ext,
            serialize_type=SerializeType.JSON,
        )

    @classmethod
    def _decode_rocketmq_header(cls, header: memoryview) -> RemotingCommand:
        if _c_decode_rocketmq is not None:
            cmd = _c_decode_rocketmq(header, cls, _ROCKETMQ)
            if cmd is not None:
                return cmd
        return cls._decode_rocketmq_header_py(header)

    @classmethod
    def _decode_rocketmq_header_py(cls, header: memoryview) -> RemotingCommand:
        """The ROCKETMQ header in Python: the reference, and what the C decoder leaves."""
        data = bytes(header)  # one small copy; bytes slicing beats memoryview objects here
        hlen = len(data)
        if hlen < _BIN_FIXED.size + 4:
            raise HeaderError(f"ROCKETMQ header of {hlen} bytes is shorter than its fixed part")
        code, language, version, opaque, flag, rlen = _BIN_FIXED.unpack_from(data, 0)
        pos = _BIN_FIXED.size
        unpack_int = _INT.unpack_from
        remark: str | None = None
        try:
            if rlen < 0 or rlen > hlen - pos - 4:
                raise HeaderError(f"remark length {rlen} exceeds header length {hlen}")
            if rlen:
                remark = data[pos : pos + rlen].decode("utf-8")
                pos += rlen
            elen = unpack_int(data, pos)[0]
            pos += 4
            if elen < 0 or elen > hlen - pos:
                raise HeaderError(f"extFields length {elen} exceeds header length {hlen}")
            ext: dict[str, str] | None = None
            if elen:
                ext = {}
                end = pos + elen
                while pos < end:
                    if pos + 2 > end:
                        raise HeaderError("truncated extFields key length")
                    klen = (data[pos] << 8) | data[pos + 1]
                    pos += 2
                    if klen >= 0x8000 or pos + klen + 4 > end:
                        raise HeaderError(f"extFields key length {klen} runs past the map")
                    key = data[pos : pos + klen].decode("utf-8")
                    pos += klen
                    vlen = unpack_int(data, pos)[0]
                    pos += 4
                    if vlen < 0 or pos + vlen > end:
                        raise HeaderError(f"extFields value length {vlen} runs past the map")
                    ext[key] = data[pos : pos + vlen].decode("utf-8")
                    pos += vlen
        except UnicodeDecodeError as exc:
            raise HeaderError(f"ROCKETMQ header string is not UTF-8: {exc}") from None
        if pos != hlen:
            raise HeaderError(f"ROCKETMQ header has {hlen - pos} trailing bytes")
        return cls(
            code,
            language=language,
            version=version,
            opaque=opaque,
            flag=flag,
            remark=remark,
            ext_fields=ext,
            serialize_type=SerializeType.ROCKETMQ,
        )


def _as_int(v: Any) -> int:
    if isinstance(v, bool):
        raise TypeError("boolean where an int was expected")
    if isinstance(v, str):
        v = int(v)
    if isinstance(v, int):
        if not -0x80000000 <= v <= 0x7FFFFFFF:
            raise ValueError(f"{v} is outside the int32 range")
        return v
    raise TypeError(f"{type(v).__name__} where an int was expected")
