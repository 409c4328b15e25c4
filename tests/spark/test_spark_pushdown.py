"""Filter pushdown of the batch source against a real ``mqbroker``: with
``spark.sql.python.filterPushdown.enabled`` on, ``queueId`` / ``brokerName`` / ``topic``
filters plan only their queues, ``storeTimestamp`` ranges only the offsets stored in them,
``keys =`` only the messages the broker's index finds, and ``tags =`` subscribes to those tags;
the rows are those Spark's own filtering gives with it off.

``maxRecordsPerPartition=1`` makes one Spark partition per planned offset, so the partition
count shows how much the broker is asked for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.producer import Producer
from aiorocketmq.protocol.bodies import MessageQueue, TopicConfig
from aiorocketmq.protocol.message import Message
from aiorocketmq.spark_sink.options import parse_source_options
from aiorocketmq.spark_sink.source import QueueRangePartition, RocketMQPushdownReader
from tests.procs import ServerProcess

pytestmark = pytest.mark.spark

TOPIC = "SparkPushdown"
BROKER = "broker-a"
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture(scope="module")
def cut(name_server: str, servers: tuple[ServerProcess, ServerProcess]) -> int:
    """TOPIC on 4 queues: 5 messages each (tags TagA, TagB, ...; key k-<queue>-<i>), then,
    from the returned time on, 3 more each (TagA; key late-<queue>-<i>)."""

    async def run() -> int:
        async with MQAdmin(name_server) as admin:
            await admin.create_topic(servers[1].address, TopicConfig(
                topic_name=TOPIC, read_queue_nums=4, write_queue_nums=4))
        async with Producer("spark-pushdown", name_server) as producer:
            for q in range(4):
                for i in range(5):
                    await producer.send(Message(TOPIC, f"early-{q}-{i}".encode(),
                                                tags="TagA" if i % 2 == 0 else "TagB",
                                                keys=f"k-{q}-{i}"), MessageQueue(TOPIC, BROKER, q))
            cut = _now_ms() + 1
            while _now_ms() < cut:
                pass
            for q in range(4):
                for i in range(3):
                    await producer.send(Message(TOPIC, f"late-{q}-{i}".encode(), tags="TagA",
                                                keys=f"late-{q}-{i}"), MessageQueue(TOPIC, BROKER, q))
        return cut

    return asyncio.run(run())


@pytest.fixture
def pushdown(spark: Any) -> Iterator[None]:
    spark.conf.set(PUSHDOWN, "true")
    try:
        yield
    finally:
        spark.conf.unset(PUSHDOWN)


def _read(spark: Any, name_server: str, condition: Any) -> tuple[list[str], int]:
    df = (spark.read.format("rocketmq").option("nameServer", name_server).option("topic", TOPIC)
          .option("maxRecordsPerPartition", "1").load().filter(condition))
    return sorted(bytes(r.body).decode() for r in df.collect()), df.rdd.getNumPartitions()


def _at(ms: int) -> Any:
    return F.lit(datetime.fromtimestamp(ms / 1000, UTC))


def _conditions(cut: int) -> list[tuple[str, Any, list[str], int]]:
    """(what, filter, expected bodies, planned offsets with pushdown)."""
    early = [f"early-{q}-{i}" for q in range(4) for i in range(5)]
    late = [f"late-{q}-{i}" for q in range(4) for i in range(3)]
    return [
        ("queueId IN", F.col("queueId").isin(1, 2),
         [b for b in early + late if b.split("-")[1] in "12"], 16),
        ("brokerName and queueId", (F.col("brokerName") == BROKER) & (F.col("queueId") == 3),
         [b for b in early + late if b.split("-")[1] == "3"], 8),
        ("topic", F.col("topic") == "SomeOtherTopic", [], 0),
        ("storeTimestamp >=", F.col("storeTimestamp") >= _at(cut), late, 12),
        ("storeTimestamp <", F.col("storeTimestamp") < _at(cut), early, 20),
        ("keys =", F.col("keys") == "k-2-3", ["early-2-3"], 1),
        ("keys IN", F.col("keys").isin("k-1-0", "late-3-2"), ["early-1-0", "late-3-2"], 2),
        ("queueId, storeTimestamp and tags",
         (F.col("queueId") == 0) & (F.col("storeTimestamp") >= _at(cut)) & (F.col("tags") == "TagA"),
         ["late-0-0", "late-0-1", "late-0-2"], 3),
        ("tags =", F.col("tags") == "TagB",
         [f"early-{q}-{i}" for q in range(4) for i in (1, 3)], 32),
    ]


def test_pushed_filters_plan_only_what_they_keep(spark: Any, name_server: str, cut: int,
                                                 pushdown: None) -> None:
    for what, condition, bodies, planned in _conditions(cut):
        rows, partitions = _read(spark, name_server, condition)
        assert rows == sorted(bodies), what
        # An empty plan still runs one (empty) task.
        assert partitions == max(planned, 1), what


def test_without_pushdown_spark_filters_the_same_rows(spark: Any, name_server: str,
                                                      cut: int) -> None:
    assert spark.conf.get(PUSHDOWN, "false") != "true"
    for what, condition, bodies, _ in _conditions(cut):
        rows, partitions = _read(spark, name_server, condition)
        assert rows == sorted(bodies), what
        assert partitions == 32, what  # every offset planned


def test_tags_become_the_broker_subscription(name_server: str, cut: int) -> None:
    opts = parse_source_options({"nameServer": name_server, "topic": TOPIC}, streaming=False)
    tags = EqualTo(("tags",), "TagB")
    reader = RocketMQPushdownReader(opts)
    assert list(reader.pushFilters([tags])) == []
    parts = reader.partitions()
    assert all(isinstance(p, QueueRangePartition) for p in parts)
    assert {p.settings.sub_expression for p in parts} == {"TagB"}  # type: ignore[attr-defined]
    bodies = sorted(body.as_py().decode() for p in parts for batch in reader.read(p)
                    for body in batch.column("body"))
    assert bodies == sorted(f"early-{q}-{i}" for q in range(4) for i in (1, 3))

    # With a time bound too: only the 3 offsets of each queue stored from ``cut`` on.
    reader = RocketMQPushdownReader(opts)
    since = GreaterThanOrEqual(("storeTimestamp",), datetime.fromtimestamp(cut / 1000, UTC))
    assert list(reader.pushFilters([tags, since])) == [since]
    parts = reader.partitions()
    assert sorted((p.queue.queue_id, p.start, p.end) for p in parts) == [  # type: ignore[attr-defined]
        (q, 5, 8) for q in range(4)]
