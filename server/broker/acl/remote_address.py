"""White-list address patterns of plain_acl.yml, as upstream ``RemoteAddressStrategyFactory``.

Contract: ``remote_address_strategy(pattern)`` returns a predicate over the peer's IP (no
port) or raises ``AclError`` for a malformed pattern. Spellings (4.9.7):

* blank -> matches nothing; ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*`` -> matches everything;
* ``192.168.1.{1,2,3}`` / ``1050::0005:{1,2}`` -> a set of addresses;
* ``192.168.1.1,192.168.1.2`` -> a set of addresses;
* ``192.168.*.*``, ``192.168.1.1-100``, ``192.168.1-10.*`` (and IPv6 ``1050::*``,
  ``1050::1-ff:*``) -> a range in the first segment holding ``*`` or ``a-b``, the segments
  before it fixed;
* one literal IPv4 or IPv6 address.

IPv6 addresses are compared expanded (``AclUtils.expandIP``: eight upper-case, zero-padded
groups). Validation of literal addresses follows commons-validator's ``InetAddressValidator``
(Python's ``ipaddress``, which also refuses IPv4 segments with leading zeros).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from .errors import AclError

__all__ = ["RemoteAddressStrategy", "remote_address_strategy", "expand_ip"]

RemoteAddressStrategy = Callable[[str | None], bool]


def _parses(kind: type[ipaddress.IPv4Address] | type[ipaddress.IPv6Address],
            addr: str | None) -> bool:
    if not addr:
        return False
    try:
        kind(addr)
    except ValueError:
        return False
    return True


def _is_v4(addr: str | None) -> bool:
    return _parses(ipaddress.IPv4Address, addr)


def _is_v6(addr: str | None) -> bool:
    return _parses(ipaddress.IPv6Address, addr)


def expand_ip(addr: str, parts: int) -> str:
    """``AclUtils.expandIP``: fill ``::`` up to ``parts`` groups, pad each to 4, upper-case."""
    addr = addr.upper()
    pad = parts - addr.count(":")
    if pad > 0:
        addr = addr.replace("::", ":" * (pad + 1))
    return ":".join(g.rjust(4, "0") for g in addr.split(":"))


def _match_nothing(addr: str | None) -> bool:
    return False


def _match_all(addr: str | None) -> bool:
    return True


def _split(text: str, sep: str) -> list[str]:
    """commons-lang ``StringUtils.split``: empty tokens dropped."""
    return [t for t in text.split(sep) if t]


def _multiple(addresses: list[str]) -> RemoteAddressStrategy:
    allowed: set[str] = set()
    for a in addresses:
        if _is_v4(a):
            allowed.add(a)
        elif _is_v6(a):
            allowed.add(expand_ip(a, 8))
        else:
            raise AclError(f"Netaddress examine Exception netaddress is {a}")

    def match(addr: str | None) -> bool:
        if addr is not None and _is_v6(addr):
            addr = expand_ip(addr, 8)
        return addr in allowed

    return match


def _one(pattern: str) -> RemoteAddressStrategy:
    if not (_is_v4(pattern) or _is_v6(pattern)):
        raise AclError(f"Netaddress examine Exception netaddress is {pattern}")
    want = expand_ip(pattern, 8).upper()

    def match(addr: str | None) -> bool:
        return addr is not None and expand_ip(addr, 8).upper() == want

    return match


def _check_range(start: int, end: int, hi: int) -> None:
    if not (0 <= start <= hi and 0 <= end <= hi and start <= end):
        raise AclError("RangeRemoteAddressStrategy netaddress examine scope Exception "
                       f"start is {start} , end is {end}")


def _segment_range(value: str, base: int, hi: int) -> tuple[int, int] | None:
    value = value.strip()
    if value == "*":
        return 0, hi
    if "-" in value:
        if value.startswith("-"):
            raise AclError("RangeRemoteAddressStrategy netaddress examine scope Exception "
                           f"value {value} ")
        items = _split(value, "-")
        try:
            start, end = int(items[0], base), int(items[1], base)
        except (ValueError, IndexError) as exc:
            raise AclError(f"Netaddress examine scope Exception netaddress is {value}") from exc
        _check_range(start, end, hi)
        return start, end
    return None


def _range(pattern: str) -> RemoteAddressStrategy:
    if ":" in pattern:
        return _range_v6(pattern)
    parts = _split(pattern, ".")
    if len(parts) != 4:  # AclUtils.verify -> isScope: four segments
        raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
    for index in (1, 2, 3):
        found = _segment_range(parts[index], 10, 255)
        if found is not None and found[1] > 0:
            for seg in parts[:index]:
                if not seg.strip().isdigit() or not 0 <= int(seg) <= 255:
                    raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
            head = "".join(p.strip() + "." for p in parts[:index])
            start, end = found
            return _v4_range_match(head, index, start, end)
    raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")


def _v4_range_match(head: str, index: int, start: int, end: int) -> RemoteAddressStrategy:
    def match(addr: str | None) -> bool:
        if not _is_v4(addr) or addr is None or not addr.startswith(head):
            return False
        value = addr[len(head):].split(".")[0]
        return start <= int(value) <= end

    return match


def _range_v6(pattern: str) -> RemoteAddressStrategy:
    star, minus = "*" in pattern, "-" in pattern
    if star and pattern.index("*") != len(pattern) - 1:
        raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
    parts = _split(pattern, ":")
    for index in range(1, len(parts)):
        found = _segment_range(parts[index], 16, 0xFFFF)
        if found is not None and found[1] > 0:
            if star and minus:
                last = pattern.rfind(":")
                sub = pattern[:pattern[:last].rfind(":")]
                head = expand_ip(sub, 6)
            elif not star and not minus:
                head = expand_ip(pattern, 8)
            else:
                head = expand_ip(pattern[:pattern.rfind(":")], 7)
            start, end = found
            return _v6_range_match(head, len(_split(head, ":")), start, end)
    raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")


def _v6_range_match(head: str, n: int, start: int, end: int) -> RemoteAddressStrategy:
    def match(addr: str | None) -> bool:
        if addr is None or not _is_v6(addr):
            return False
        full = expand_ip(addr, 8).upper()
        if not full.startswith(head):
            return False
        return start <= int(full[5 * n:5 * n + 4], 16) <= end

    return match


def remote_address_strategy(pattern: str | None) -> RemoteAddressStrategy:
    """The predicate for one white-list pattern (module docstring)."""
    if pattern is None or not pattern.strip():
        return _match_nothing
    if pattern in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return _match_all
    if pattern.endswith("}"):
        sep = ":" if ":" in pattern else "."
        parts = _split(pattern, sep)
        if sep == "." and len(parts) < 4:
            raise AclError("MultipleRemoteAddressStrategy has got a/some wrong format IP(s) ")
        last = parts[-1]
        if not last.startswith("{"):
            raise AclError("MultipleRemoteAddressStrategy netaddress examine scope Exception "
                           "netaddress")
        prefix = pattern[:pattern.index("{")]
        return _multiple([prefix + x for x in _split(last[1:-1], ",")])
    if "," in pattern:
        return _multiple(_split(pattern, ","))
    if "*" in pattern or "-" in pattern:
        return _range(pattern)
    return _one(pattern)
