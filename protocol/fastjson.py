"""A reader and writer for the JSON dialect fastjson 1.x speaks (docs/PROTOCOL.md 7).

Every RocketMQ body is ``JSON.toJSONString(obj)`` / ``JSON.parseObject(bytes, cls)``
(upstream ``RemotingSerializable``). fastjson's output is JSON except for map keys:
a ``Map`` whose key type is not ``String`` gets the key's own JSON form, unquoted
(``{0:"10.0.0.1:10911"}``, ``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``).

Contract:

* ``loads(data)`` returns plain Python values (``dict``, ``list``, ``str``, ``int``,
  ``float``, ``bool``, ``None``). A bare number key decodes to ``int`` (or ``float``),
  an object key to an :class:`ObjectKey`, an array key to a ``tuple``, ``true``/``false``/
  ``null`` keys to ``True``/``False``/``None``; quoted keys stay ``str``. Bytes are
  decoded as UTF-8 with replacement, as Java's ``new String(bytes, UTF_8)`` does.
  Malformed input raises :class:`JSONDecodeError` (a ``ProtocolError``); any other
  exception is a bug. Nesting is bounded by ``MAX_DEPTH``. Standard JSON goes through
  the C-accelerated stdlib decoder; only what it rejects reaches the tolerant parser.
* ``dumps(obj, standard=False)`` writes fastjson's output with no whitespace: ``None``
  dict values omitted, doubles in Java ``Double.toString`` form, enums by name, objects
  with ``to_json()`` as their dict. Legacy mode (plain ``JSON.toJSONString``) writes
  non-string keys bare and non-ASCII raw; ``standard=True`` is fastjson's
  ``BrowserCompatible`` + ``MapSortField`` (the route-data form for clients >= V4_9_4):
  every key quoted, map keys sorted, non-ASCII as ``\\uXXXX``, longs beyond +/-(2^53-1)
  as strings.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any, cast

from .errors import ProtocolError

__all__ = ["JSONDecodeError", "ObjectKey", "loads", "dumps", "MAX_DEPTH", "java_double_str"]

MAX_DEPTH = 512
"""Deepest nesting ``loads`` and ``dumps`` accept; RocketMQ bodies nest about 6 deep."""


class JSONDecodeError(ProtocolError):
    """A JSON body that neither JSON nor fastjson's dialect accepts."""


class ObjectKey(tuple):  # type: ignore[type-arg]
    """A JSON object used as a map key, e.g. a ``MessageQueue`` in ``ConsumeStats.offsetTable``.

    An immutable, hashable tuple of ``(name, value)`` pairs sorted by name, so two keys
    with the same fields are equal whatever order they were written in. Nested objects
    become ``ObjectKey`` and arrays ``tuple``. ``dumps`` writes the pairs in their sorted
    order, which is fastjson's bean order for the RocketMQ key classes.
    """

    __slots__ = ()

    def __new__(cls, fields: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = ()) -> ObjectKey:
        items = fields.items() if isinstance(fields, Mapping) else fields
        pairs = [(k, _freeze(v)) for k, v in items]
        pairs.sort(key=_pair_order)
        return tuple.__new__(cls, pairs)

    @classmethod
    def presorted(cls, pairs: tuple[tuple[str, Any], ...]) -> ObjectKey:
        """Wrap pairs that are already sorted by name and hold only hashable values (hot path)."""
        return tuple.__new__(cls, pairs)

    def as_dict(self) -> dict[Any, Any]:
        """The fields as a ``dict`` (nested objects stay ``ObjectKey``)."""
        return dict(self)

    def get(self, name: Any, default: Any = None) -> Any:
        for k, v in self:
            if k == name:
                return v
        return default

    def to_json(self) -> dict[Any, Any]:
        return dict(self)

    def __repr__(self) -> str:
        return f"ObjectKey({dict(self)!r})"


def _pair_order(pair: tuple[Any, Any]) -> tuple[int, str]:
    k = pair[0]
    return (0, k) if isinstance(k, str) else (1, repr(k))


def _freeze(v: Any) -> Any:
    """Make a parsed JSON value hashable so it can sit inside a key."""
    if isinstance(v, dict):
        return ObjectKey(v)
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


# ---------------------------------------------------------------------------------------
# Reading


def _reject_constant(name: str) -> Any:
    # NaN / Infinity are not JSON and fastjson never writes them (it writes null).
    raise ValueError(f"non-JSON constant {name}")


_std_decode = json.JSONDecoder(strict=False, parse_constant=_reject_constant).decode
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]  # C-accelerated
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")

# Parser frame states.
_IN_LIST = 0
_WANT_KEY = 1
_WANT_VALUE = 2


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse a fastjson body.

    Raises:
        JSONDecodeError: the input is not JSON, not even with fastjson's map keys, or
            nests deeper than ``MAX_DEPTH``.
    """
    if isinstance(data, str):
        text = data
    elif isinstance(data, (bytes, bytearray)):
        text = data.decode("utf-8", "replace")
    elif isinstance(data, memoryview):
        text = bytes(data).decode("utf-8", "replace")
    else:
        raise TypeError(f"loads() takes bytes or str, not {type(data).__name__}")
    try:
        return _std_decode(text)
    except (ValueError, RecursionError):
        # Not standard JSON (or too deep for the C scanner): the tolerant parser
        # accepts fastjson's keys and reports a precise error for anything else.
        pass
    try:
        return _parse(text)
    except IndexError:
        raise JSONDecodeError("unexpected end of JSON input") from None


def _fail(msg: str, pos: int) -> JSONDecodeError:
    return JSONDecodeError(f"{msg} (char {pos})")


def _parse(s: str) -> Any:
    """Iterative JSON parser that accepts any JSON value as an object key."""
    # _WS matches the empty string too, so this never returns None.
    ws = cast(Callable[[str, int], re.Match[str]], _WS.match)
    num = _NUMBER.match
    n = len(s)
    i = ws(s, 1 if s.startswith("\ufeff") else 0).end()
    # Each frame is [container, state, pending key].
    stack: list[list[Any]] = []
    while True:
        # -- one value starting at s[i] ------------------------------------------------
        if i >= n:
            raise _fail("expected a value", i)
        c = s[i]
        value: Any
        if c == '"':
            try:
                value, i = _scanstring(s, i + 1, False)
            except json.JSONDecodeError as exc:
                raise _fail(exc.msg, exc.pos) from None
        elif c == "{" or c == "[":
            if len(stack) >= MAX_DEPTH:
                raise _fail(f"nesting deeper than {MAX_DEPTH}", i)
            j = ws(s, i + 1).end()
            if c == "{":
                if s[j : j + 1] == "}":
                    value, i = {}, j + 1
                else:
                    stack.append([{}, _WANT_KEY, None])
                    i = j
                    continue
            else:
                if s[j : j + 1] == "]":
                    value, i = [], j + 1
                else:
                    stack.append([[], _IN_LIST, None])
                    i = j
                    continue
        elif c == "t" and s.startswith("true", i):
            value, i = True, i + 4
        elif c == "f" and s.startswith("false", i):
            value, i = False, i + 5
        elif c == "n" and s.startswith("null", i):
            value, i = None, i + 4
        else:
            m = num(s, i)
            if m is None:
                raise _fail(f"unexpected character {c!r}", i)
            text = m.group()
            try:
                value = float(text) if (m.group(1) or m.group(2)) else int(text)
            except ValueError:
                raise _fail("number out of range", i) from None
            i = m.end()
        # -- hand the value to its container, closing containers as they end ----------
        while True:
            i = ws(s, i).end()
            if not stack:
                if i != n:
                    raise _fail("extra data after the JSON value", i)
                return value
            frame = stack[-1]
            state = frame[1]
            if state == _WANT_KEY:
                if s[i : i + 1] != ":":
                    raise _fail("expected ':' after an object key", i)
                frame[2] = _freeze(value)
                frame[1] = _WANT_VALUE
                i = ws(s, i + 1).end()
                break
            if state == _WANT_VALUE:
                frame[0][frame[2]] = value
                c = s[i : i + 1]
                if c == ",":
                    frame[1] = _WANT_KEY
                    i = ws(s, i + 1).end()
                    break
                if c == "}":
                    value = stack.pop()[0]
                    i += 1
                    continue
                raise _fail("expected ',' or '}' in an object", i)
            frame[0].append(value)
            c = s[i : i + 1]
            if c == ",":
                i = ws(s, i + 1).end()
                break
            if c == "]":
                value = stack.pop()[0]
                i += 1
                continue
            raise _fail("expected ',' or ']' in an array", i)


# ---------------------------------------------------------------------------------------
# Writing

_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]  # non-ASCII raw
_encode_str_ascii = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
_MAX_SAFE_LONG = 9007199254740991


def java_double_str(x: float) -> str:
    """``Double.toString(x)``: ``0.0``, ``1.5``, ``0.025``, ``1.0E10``, ``1.0E-5``.

    Plain notation for 1e-3 <= |x| < 1e7, computerized scientific notation otherwise,
    with the shortest digits that round-trip (what JDK 19+ prints; older JDKs print an
    extra digit for a few values such as ``Double.MIN_VALUE``). NaN and infinities
    return ``"null"``, which is what fastjson writes for them.
    """
    if x != x or x in (math.inf, -math.inf):
        return "null"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    r = repr(x)
    sign = ""
    if r[0] == "-":
        sign, r = "-", r[1:]
    mant, _, exp_s = r.partition("e")
    ip, _, fp = mant.partition(".")
    all_digits = ip + fp
    stripped = all_digits.lstrip("0")
    point = len(ip) + (int(exp_s) if exp_s else 0) - (len(all_digits) - len(stripped))
    digits = stripped.rstrip("0") or "0"
    a = abs(x)
    if 1e-3 <= a < 1e7:
        if point <= 0:
            body = "0." + "0" * -point + digits
        elif point >= len(digits):
            body = digits + "0" * (point - len(digits)) + ".0"
        else:
            body = digits[:point] + "." + digits[point:]
    else:
        body = digits[0] + "." + (digits[1:] or "0") + "E" + str(point - 1)
    return sign + body


def _java_str_order(s: str) -> str:
    """Sort key giving Java ``String.compareTo`` order (UTF-16 code units)."""
    if s.isascii() or max(s) <= "\uffff":
        return s
    out = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append(chr(0xD800 + (cp >> 10)))
            out.append(chr(0xDC00 + (cp & 0x3FF)))
        else:
            out.append(ch)
    return "".join(out)


def _sorted_key_order(item: tuple[Any, Any]) -> tuple[int, Any]:
    # MapSortField copies the map into a TreeMap: strings in Java order, numbers by
    # value. Mixed key types would make Java throw; we just group them by kind.
    k = item[0]
    if isinstance(k, str):
        return (1, _java_str_order(k))
    if isinstance(k, (int, float)):
        return (0, k)
    if k is None:
        return (-1, 0)
    return (2, _dumps_str(k, False, 0))


def dumps(obj: Any, *, standard: bool = False) -> bytes:
    """Serialize ``obj`` as fastjson does (UTF-8 bytes, no whitespace).

    Args:
        obj: dicts (any ``Mapping``), lists/tuples/sets, str, int, float, bool, None,
            ``Enum`` (written by name), bytes (base64, as fastjson writes ``byte[]``),
            ``ObjectKey`` and objects with a ``to_json()`` method.
        standard: write BrowserCompatible + MapSortField output (see module docstring).

    Raises:
        TypeError: a value of an unsupported type.
        ValueError: nesting deeper than ``MAX_DEPTH`` (e.g. a reference cycle).
    """
    return _dumps_str(obj, standard, 0).encode("utf-8")


def _dumps_str(obj: Any, standard: bool, depth: int) -> str:
    out: list[str] = []
    _write(obj, out, standard, depth)
    return "".join(out)


def _write(obj: Any, out: list[str], std: bool, depth: int) -> None:
    t = type(obj)
    if t is str:
        out.append(_encode_str_ascii(obj) if std else _encode_str(obj))
    elif t is int:
        if std and (obj > _MAX_SAFE_LONG or obj < -_MAX_SAFE_LONG):
            out.append(f'"{obj}"')
        else:
            out.append(str(obj))
    elif t is bool:
        out.append("true" if obj else "false")
    elif obj is None:
        out.append("null")
    elif t is float:
        out.append(java_double_str(obj))
    elif t is dict or isinstance(obj, Mapping):
        _write_map(obj, out, std, depth + 1)
    elif t is ObjectKey:
        _write_map(dict(obj), out, std, depth + 1)
    elif t is list or t is tuple or isinstance(obj, (list, tuple, set, frozenset)):
        if depth >= MAX_DEPTH:
            raise ValueError(f"nesting deeper than {MAX_DEPTH} (a reference cycle?)")
        out.append("[")
        first = True
        for item in obj:
            if first:
                first = False
            else:
                out.append(",")
            _write(item, out, std, depth + 1)
        out.append("]")
    elif isinstance(obj, Enum):
        out.append(_encode_str(obj.name))
    elif isinstance(obj, str):
        _write(str(obj), out, std, depth)
    elif isinstance(obj, bool):
        out.append("true" if obj else "false")
    elif isinstance(obj, int):
        _write(int(obj), out, std, depth)
    elif isinstance(obj, float):
        out.append(java_double_str(float(obj)))
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        out.append('"' + base64.b64encode(bytes(obj)).decode("ascii") + '"')
    elif hasattr(obj, "to_json"):
        _write(obj.to_json(), out, std, depth + 1)
    else:
        raise TypeError(f"cannot serialize {t.__name__} as fastjson")


def _write_map(obj: Mapping[Any, Any], out: list[str], std: bool, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"nesting deeper than {MAX_DEPTH} (a reference cycle?)")
    items: Iterable[tuple[Any, Any]] = obj.items()
    if std and len(obj) > 1:
        items = sorted(items, key=_sorted_key_order)
    out.append("{")
    first = True
    for k, v in items:
        if v is None:
            continue  # fastjson skips null values (no WriteMapNullValue)
        if first:
            first = False
        else:
            out.append(",")
        if type(k) is str:
            out.append(_encode_str_ascii(k) if std else _encode_str(k))
        else:
            _write_key(k, out, std, depth)
        out.append(":")
        _write(v, out, std, depth)
    out.append("}")


def _write_key(k: Any, out: list[str], std: bool, depth: int) -> None:
    if isinstance(k, Enum):
        # MapSerializer writes enum keys through the enum serializer: the quoted name.
        out.append(_encode_str(k.name))
    elif isinstance(k, str):
        out.append(_encode_str_ascii(k) if std else _encode_str(k))
    elif std:
        # BrowserCompatible implies WriteNonStringKeyAsString: the key's plain fastjson
        # text (JSON.toJSONString(key)), written as a string.
        if isinstance(k, bool):
            text = "true" if k else "false"
        elif isinstance(k, int):
            text = str(int(k))
        else:
            text = _dumps_str(k, False, depth)
        out.append(_encode_str_ascii(text))
    elif k is None:
        out.append("null")
    else:
        _write(k, out, False, depth)


def dumps_pretty(obj: Any) -> str:
    """``JSON.toJSONString(obj, true)``: fastjson's PrettyFormat (tab indents, no space after
    ``:``), one line per entry of an object (bean or map). Arrays stay on one line, as
    fastjson's ``CollectionCodec`` writes a ``Set`` (``SubscriptionData.tagsSet``)."""
    out: list[str] = []
    _write_pretty(obj, out, 0)
    return "".join(out)


def _write_pretty(obj: Any, out: list[str], indent: int) -> None:
    if hasattr(obj, "to_json") and not isinstance(obj, Mapping):
        obj = obj.to_json()
    if not isinstance(obj, Mapping):
        out.append(_dumps_str(obj, False, 0))
    elif not obj:
        out.append("{}")
    else:
        out.append("{")
        for i, (k, v) in enumerate(obj.items()):
            out.append(("," if i else "") + "\n" + "\t" * (indent + 1))
            out.append(_dumps_str(str(k), False, 0) + ":")
            _write_pretty(v, out, indent + 1)
        out.append("\n" + "\t" * indent + "}")
