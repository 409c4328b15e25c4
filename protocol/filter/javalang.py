"""The ``java.lang`` conversions and orderings that upstream's SQL92 filter relies on.

Message properties are strings; upstream's ``ComparisonExpression.__compare`` converts
them with ``Integer.valueOf``, ``Long.valueOf``, ``Double.valueOf`` and
``Boolean.valueOf`` and orders values with each boxed type's ``compareTo``. A filter that
must give the same answers as a stock 4.9.7 broker has to accept and refuse the same
strings and order the same values (``NaN`` above ``Infinity``, ``-0.0`` below ``0.0``), so
this module reproduces those methods rather than using Python's ``int()`` / ``float()``
directly (which accept ``"1_000"``, ``" 5"``, ``"inf"`` ...).

Contract:

* ``JavaLong`` marks a ``long`` constant (a literal outside the ``int`` range); a plain
  ``int`` is a Java ``Integer``; ``float`` is ``Double``; ``bool`` is ``Boolean``; ``str``
  is ``String``. Type identity matters: it picks the conversion, as in Java.
* ``parse_int`` / ``parse_long`` / ``parse_double`` raise ``NumberFormatError`` (a
  ``ValueError``) where Java throws ``NumberFormatException``.
"""

from __future__ import annotations

import math
import re
import struct
from decimal import Decimal

__all__ = [
    "JavaLong",
    "NumberFormatError",
    "parse_int",
    "parse_long",
    "parse_double",
    "parse_boolean",
    "double_compare",
    "string_compare",
    "double_to_string",
]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

_JAVA_TRIM = "".join(chr(c) for c in range(0x21))  # String.trim(): every char <= U+0020
_DECIMAL_DOUBLE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?", re.ASCII)
_HEX_DOUBLE = re.compile(
    r"([+-]?)0[xX]([0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP]([+-]?\d+)[fFdD]?", re.ASCII)
_SPECIAL_DOUBLE = {"NaN": math.nan, "+NaN": math.nan, "-NaN": math.nan,
                   "Infinity": math.inf, "+Infinity": math.inf, "-Infinity": -math.inf}
_bits = struct.Struct(">q")
_dbl = struct.Struct(">d")


class JavaLong(int):
    """An ``int`` that is a Java ``Long`` (a ``long`` literal), not an ``Integer``."""

    __slots__ = ()

    def __neg__(self) -> JavaLong:
        return JavaLong(-int(self))

    def __repr__(self) -> str:
        return f"{int(self)}L"


class NumberFormatError(ValueError):
    """``java.lang.NumberFormatException``."""


def _parse_integral(s: str, lo: int, hi: int) -> int:
    # Integer.parseInt / Long.parseLong: an optional sign, then Character.digit(c, 10)
    # digits, which include every Unicode decimal digit (Python's isdecimal()).
    body = s[1:] if s[:1] in ("-", "+") else s
    if not body or not body.isdecimal():
        raise NumberFormatError(f'For input string: "{s}"')
    value = int(s)
    if value < lo or value > hi:
        raise NumberFormatError(f'For input string: "{s}"')
    return value


def parse_int(s: str) -> int:
    """``Integer.valueOf(String)``."""
    return _parse_integral(s, INT_MIN, INT_MAX)


def parse_long(s: str) -> JavaLong:
    """``Long.valueOf(String)``."""
    return JavaLong(_parse_integral(s, LONG_MIN, LONG_MAX))


def parse_double(s: str) -> float:
    """``Double.valueOf(String)`` (``FloatingDecimal.readJavaFormatString``).

    Leading and trailing chars <= U+0020 are ignored; ``NaN``, ``Infinity`` (signed),
    decimal and hexadecimal forms, with an optional ``f``/``F``/``d``/``D`` suffix.
    """
    t = s.strip(_JAVA_TRIM)
    special = _SPECIAL_DOUBLE.get(t)
    if special is not None:
        return special
    if _DECIMAL_DOUBLE.fullmatch(t):
        if t[-1] in "fFdD":
            t = t[:-1]
        return float(t)
    m = _HEX_DOUBLE.fullmatch(t)
    if m is not None:
        sign, mantissa, exp = m.groups()
        try:
            value = float.fromhex(f"0x{mantissa or '0'}p{exp}")
        except OverflowError:
            value = math.inf
        return -value if sign == "-" else value
    raise NumberFormatError(f'For input string: "{s}"' if t else "empty String")


def parse_boolean(s: str) -> bool:
    """``Boolean.valueOf(String)``: ``"true"`` ignoring case; anything else is false."""
    return len(s) == 4 and s.lower() == "true"


def _double_bits(d: float) -> int:
    # Double.doubleToLongBits: every NaN collapses to the canonical 0x7ff8000000000000.
    if d != d:
        return 0x7FF8000000000000
    return _bits.unpack(_dbl.pack(d))[0]


def double_compare(a: float, b: float) -> int:
    """``Double.compare``: ``-0.0 < 0.0`` and ``NaN`` equal to itself, above everything."""
    if a < b:
        return -1
    if a > b:
        return 1
    ba = _double_bits(a)
    bb = _double_bits(b)
    return 0 if ba == bb else (-1 if ba < bb else 1)


def string_compare(a: str, b: str) -> int:
    """``String.compareTo``: UTF-16 code units, compared as unsigned."""
    if a == b:
        return 0
    if a.isascii() and b.isascii():
        return -1 if a < b else 1
    ea = a.encode("utf-16-be")
    eb = b.encode("utf-16-be")
    return -1 if ea < eb else 1


def double_to_string(d: float) -> str:
    """``Double.toString`` (for messages): ``1.0``, ``1.5E10``, ``1.0E-5``, ``NaN``."""
    if d != d:
        return "NaN"
    if d in (math.inf, -math.inf):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    a = abs(d)
    if 1e-3 <= a < 1e7:
        r = repr(d)
        return r if "." in r or "e" in r else r + ".0"
    t = Decimal(repr(a)).normalize().as_tuple()
    digits = "".join(map(str, t.digits))
    exponent = len(digits) - 1 + int(t.exponent)
    sign = "-" if d < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"
