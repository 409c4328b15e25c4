"""Java behaviours the wire depends on: ``String.hashCode``, ``HashMap`` iteration order, and
the one mapping between our snake_case names and Java's camelCase keys.

``String.hashCode`` gives consume-queue tag codes and HEART_BEAT ``codeSet``
(docs/PROTOCOL.md 4.6, 6.1). ``HashMap`` order is the order fastjson writes
``extFields`` in (docs/PROTOCOL.md 2.2); we reproduce it so our JSON headers are
byte-identical to Java's, which the captured vectors check.

``camel_case`` / ``snake_case`` are the mechanical spelling of a Java field or getter name
from our attribute and back: custom headers, the broker's and the store's config keys
use them, each with its own table of the names upstream spells otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["java_string_hash", "java_hashmap_order", "camel_case", "snake_case"]

_hash_cache: dict[str, int] = {}


def java_string_hash(s: str) -> int:
    """``java.lang.String.hashCode()`` as a signed 32-bit int (UTF-16 code units)."""
    cached = _hash_cache.get(s)
    if cached is not None:
        return cached
    h = 0
    if s.isascii():
        for b in s.encode("ascii"):
            h = (31 * h + b) & 0xFFFFFFFF
    else:
        data = s.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    if len(_hash_cache) < 65536:
        _hash_cache[s] = h
    return h


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """Keys in the order a ``java.util.HashMap`` filled in this insertion order iterates them.

    Buckets are ``(h ^ (h >>> 16)) & (capacity - 1)`` with capacity 16, doubled
    while the size exceeds 3/4 of it; keys sharing a bucket keep insertion order
    (resizes split buckets stably).
    """
    keys = list(keys)
    n = len(keys)
    if n <= 1:
        return keys
    capacity = 16
    while n > capacity * 3 // 4:
        capacity *= 2
    mask = capacity - 1
    indexed = [(_spread(java_string_hash(k)) & mask, i, k) for i, k in enumerate(keys)]
    indexed.sort()
    return [k for _, _, k in indexed]


def java_concurrent_hashmap_order(keys: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """Keys in the order a ``java.util.concurrent.ConcurrentHashMap(initial_capacity)`` filled
    in this insertion order iterates them: its table holds the next power of two of
    ``1.5 * initial_capacity + 1`` buckets, doubled while the size exceeds 3/4 of it; keys
    sharing a bucket keep insertion order. (``SubscriptionGroupManager``'s table is
    ``ConcurrentHashMap(1024)``: 2048 buckets.)"""
    keys = list(keys)
    capacity = 1
    while capacity < initial_capacity + (initial_capacity >> 1) + 1:
        capacity *= 2
    while len(keys) > capacity * 3 // 4:
        capacity *= 2
    mask = capacity - 1
    indexed = [((_spread(java_string_hash(k)) & 0x7FFFFFFF) & mask, i, k)
               for i, k in enumerate(keys)]
    indexed.sort()
    return [k for _, _, k in indexed]


def camel_case(name: str) -> str:
    """``consumer_group`` -> ``consumerGroup``; ``body_crc32`` -> ``bodyCrc32``."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


_UPPER = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake_case(key: str) -> str:
    """``flushDiskType`` -> ``flush_disk_type``: ``camel_case`` read backwards."""
    return _UPPER.sub(r"_\1", key).lower()
