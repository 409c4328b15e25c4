"""Which of Spark's filters the batch source pushes, and what they leave to read
(``spark_sink.pushdown``, pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from aiorocketmq.spark_sink.offsets import QueueKey
from aiorocketmq.spark_sink.pushdown import Pushdown, push_filters


def _ts(ms: int, us: int = 0) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC) + timedelta(microseconds=us)


def test_queue_columns_and_tags_are_pushed_exactly() -> None:
    filters = [IsNotNull(("queueId",)), EqualTo(("topic",), "T"), In(("queueId",), [1, 2, None]),
               EqualTo(("queueId",), 2), In(("brokerName",), ["a", "b"]),
               In(("tags",), ["TagA", "TagB"]), EqualTo(("tags",), "TagB")]
    p, rest = push_filters(filters)
    assert rest == [filters[0]] and rest[0] is filters[0]
    assert p == Pushdown(topics=frozenset({"T"}), brokers=frozenset({"a", "b"}),
                         queue_ids=frozenset({2}), tags=frozenset({"TagB"}))
    assert p.admits(QueueKey("T", "a", 2))
    assert not p.admits(QueueKey("T", "a", 1)) and not p.admits(QueueKey("U", "a", 2))
    assert p.tag_expression("*") == "TagB"
    assert p.tag_expression("TagA || TagB || TagC") == "TagB"
    assert p.tag_expression("TagA") is None  # no tag left: nothing to read
    # Under SQL92 the tags go back to Spark; so do values of another type.
    sql, rest = push_filters([EqualTo(("tags",), "A"), EqualTo(("queueId",), "1"),
                              EqualTo(("queueId",), True)], "SQL92")
    assert sql == Pushdown() and len(rest) == 3


def test_disjoint_filters_plan_nothing() -> None:
    p, _ = push_filters([EqualTo(("queueId",), 1), EqualTo(("queueId",), 2)])
    assert p.empty
    p, _ = push_filters([GreaterThan(("storeTimestamp",), _ts(5000)),
                         LessThan(("storeTimestamp",), _ts(5000))])
    assert p.empty
    assert not push_filters([EqualTo(("queueId",), 1)])[0].empty


def test_store_timestamp_bounds_round_outwards() -> None:
    ts = _ts(1_700_000_000_123, 400)  # .123400 s
    cases = [
        (GreaterThanOrEqual(("storeTimestamp",), ts), 1_700_000_000_124, None),
        (GreaterThan(("storeTimestamp",), ts), 1_700_000_000_124, None),
        (LessThan(("storeTimestamp",), ts), None, 1_700_000_000_124),
        (LessThanOrEqual(("storeTimestamp",), ts), None, 1_700_000_000_124),
        (EqualTo(("storeTimestamp",), _ts(1_700_000_000_123)), 1_700_000_000_123,
         1_700_000_000_124),
        (GreaterThanOrEqual(("storeTimestamp",), _ts(1_700_000_000_123)), 1_700_000_000_123,
         None),
        (GreaterThan(("storeTimestamp",), _ts(1_700_000_000_123)), 1_700_000_000_124, None),
        (LessThan(("storeTimestamp",), _ts(1_700_000_000_123)), None, 1_700_000_000_123),
    ]
    for f, lo, hi in cases:
        p, rest = push_filters([f])
        assert (p.from_ms, p.until_ms) == (lo, hi), f
        assert rest == [f]  # Spark keeps every storeTimestamp filter
    # Any time zone; the tighter of two bounds wins.
    east = datetime(2024, 1, 1, 8, tzinfo=timezone(timedelta(hours=8)))
    p, _ = push_filters([GreaterThanOrEqual(("storeTimestamp",), east),
                         GreaterThanOrEqual(("storeTimestamp",), _ts(0))])
    assert p.from_ms == int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)


def test_keys_are_looked_up_by_their_first_word_and_kept() -> None:
    f1, f2 = EqualTo(("keys",), "order-1 extra"), In(("keys",), ["order-1", "order-2"])
    p, rest = push_filters([f1, f2])
    assert p.keys == frozenset({"order-1"}) and rest == [f1, f2]
    p, rest = push_filters([EqualTo(("keys",), " x")])
    assert p.keys is None and len(rest) == 1


def test_what_goes_back_to_spark() -> None:
    filters = [Not(EqualTo(("queueId",), 1)), StringStartsWith(("tags",), "Tag"),
               EqualNullSafe(("queueId",), 1), EqualTo(("body",), b"x"),
               EqualTo(("properties", "k"), "v"), GreaterThan(("storeTimestamp",), "soon")]
    p, rest = push_filters(filters)
    assert p == Pushdown() and rest == filters
