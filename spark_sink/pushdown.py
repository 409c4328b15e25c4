"""Filter pushdown of the batch source: which of Spark's filters narrow what is pulled.

Contract (pure: no I/O; ``source.RocketMQPushdownReader`` does the lookups):

* ``push_filters(filters, expression_type)`` takes the filters Spark offers a batch read
  (PySpark's ``DataSourceReader.pushFilters``, ANDed) and returns the ``Pushdown`` they
  amount to and the filters Spark must still evaluate after the scan:

  ==================================  =====================================================
  ``topic`` / ``brokerName`` /        ``=`` or ``IN``: only those queues are planned; exact,
  ``queueId``                         so Spark drops the filter
  ``tags``                            ``=`` or ``IN`` (subExpression TAG only): the broker's
                                      tag filter (a subscription of those tags, re-checked
                                      by the reader as every tag subscription is); exact
  ``storeTimestamp``                  ``>``, ``>=``, ``<``, ``<=``, ``=``: each queue's range
                                      is cut with SEARCH_OFFSET_BY_TIMESTAMP; Spark keeps
                                      the filter (store times are milliseconds, Spark's
                                      microseconds)
  ``keys``                            ``=`` or ``IN``: QUERY_MESSAGE (the broker's key
                                      index) finds the messages; only their offsets are
                                      read. The column is the whole ``KEYS`` property, the
                                      index has each key, so the first word of each value
                                      is looked up and Spark keeps the filter
  ==================================  =====================================================

  Anything else (``NOT``, ``OR``, other columns, values of another type) goes back to
  Spark unchanged. Filters on one column intersect (``queueId IN (1, 2) AND queueId = 2``
  is queue 2; two disjoint ones plan nothing).
* ``Pushdown.admits(queue)`` says whether a queue survives the topic / broker / queue id
  sets; ``tag_expression(sub_expression)`` is the subscription a read uses (None: none of
  the tags can match, so nothing is read).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from aiorocketmq.protocol.bodies import build_subscription_data

from .offsets import QueueKey

__all__ = ["Pushdown", "push_filters"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Pushdown:
    """What the pushed filters leave to read; None: that part is not narrowed."""

    topics: frozenset[str] | None = None
    brokers: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    tags: frozenset[str] | None = None
    keys: frozenset[str] | None = None  # KEYS index lookups; a message with any of them
    from_ms: int | None = None  # storeTimestamp >= from_ms
    until_ms: int | None = None  # storeTimestamp < until_ms

    def admits(self, queue: QueueKey) -> bool:
        return ((self.topics is None or queue.topic in self.topics)
                and (self.brokers is None or queue.broker_name in self.brokers)
                and (self.queue_ids is None or queue.queue_id in self.queue_ids))

    def tag_expression(self, sub_expression: str) -> str | None:
        """The tag subscription of a read: ``sub_expression``'s tags narrowed to the pushed
        ones; None when no tag is left."""
        if self.tags is None:
            return sub_expression
        own = build_subscription_data("", sub_expression, "TAG").tags_set
        tags = sorted(self.tags & set(own)) if own else sorted(self.tags)
        return " || ".join(tags) if tags else None

    @property
    def empty(self) -> bool:
        """Nothing can match (disjoint sets or an empty time range)."""
        return (any(s is not None and not s
                    for s in (self.topics, self.brokers, self.queue_ids, self.tags, self.keys))
                or (self.from_ms is not None and self.until_ms is not None
                    and self.from_ms >= self.until_ms))


def _micros(value: Any) -> int | None:
    """An aware datetime (what Spark hands over for a timestamp) as epoch microseconds."""
    if not isinstance(value, datetime) or value.tzinfo is None:
        return None
    return (value - _EPOCH) // timedelta(microseconds=1)


def _values(f: Filter, kind: type) -> list[Any] | None:
    """The values of an ``=`` / ``IN`` filter when all are of ``kind`` (nulls dropped)."""
    raw: Sequence[Any]
    if isinstance(f, EqualTo):
        raw = [f.value]
    elif isinstance(f, In):
        raw = list(f.value)
    else:
        return None
    values = [v for v in raw if v is not None]
    if any(isinstance(v, bool) or not isinstance(v, kind) for v in values):
        return None
    return values


def _intersect(current: frozenset[Any] | None, values: Iterable[Any]) -> frozenset[Any]:
    new = frozenset(values)
    return new if current is None else current & new


def push_filters(filters: Iterable[Filter], expression_type: str = "TAG"
                 ) -> tuple[Pushdown, list[Filter]]:
    """The ``Pushdown`` of ``filters`` and the filters Spark still evaluates (module
    docstring)."""
    p = Pushdown()
    rest: list[Filter] = []
    for f in filters:
        column = getattr(f, "attribute", None)
        name = column[0] if isinstance(column, tuple) and len(column) == 1 else None
        if name in ("topic", "brokerName", "tags", "queueId", "keys"):
            values = _values(f, int if name == "queueId" else str)
            if values is None or (name == "tags" and expression_type != "TAG"):
                rest.append(f)
            elif name == "topic":
                p = dataclasses.replace(p, topics=_intersect(p.topics, values))
            elif name == "brokerName":
                p = dataclasses.replace(p, brokers=_intersect(p.brokers, values))
            elif name == "queueId":
                p = dataclasses.replace(p, queue_ids=_intersect(p.queue_ids, values))
            elif name == "tags":
                p = dataclasses.replace(p, tags=_intersect(p.tags, values))
            else:
                words = [v.split(" ")[0] for v in values]
                if any(not w.strip() for w in words):
                    rest.append(f)  # an empty key is not in the index
                    continue
                p = dataclasses.replace(p, keys=_intersect(p.keys, words))
                rest.append(f)
        elif name == "storeTimestamp":
            p = _time_bound(p, f)
            rest.append(f)
        else:
            rest.append(f)
    return p, rest


def _time_bound(p: Pushdown, f: Filter) -> Pushdown:
    """``p`` with a storeTimestamp comparison applied (microseconds to ms, rounded so that
    no row the filter keeps is cut)."""
    us = _micros(getattr(f, "value", None))
    if us is None:
        return p
    lo: int | None = None
    hi: int | None = None
    if isinstance(f, GreaterThanOrEqual):
        lo = -(-us // 1000)
    elif isinstance(f, GreaterThan):
        lo = us // 1000 + 1
    elif isinstance(f, LessThan):
        hi = -(-us // 1000)
    elif isinstance(f, LessThanOrEqual):
        hi = us // 1000 + 1
    elif isinstance(f, EqualTo):
        lo, hi = -(-us // 1000), us // 1000 + 1
    if lo is not None:
        p = dataclasses.replace(p, from_ms=lo if p.from_ms is None else max(p.from_ms, lo))
    if hi is not None:
        p = dataclasses.replace(p, until_ms=hi if p.until_ms is None else min(p.until_ms, hi))
    return p
