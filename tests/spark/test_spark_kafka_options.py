"""Source options named as Spark's Kafka source's, end to end: a real local[2] Spark session
against real ``mqnamesrv`` + ``mqbroker`` processes (``conftest.py``): endingTimestamp,
startingOffsetsByTimestamp / endingOffsetsByTimestamp, startingOffsetsByTimestampStrategy,
assign, maxRecordsPerPartition and maxBytesPerTrigger; and the one-line errors of their
malformed values, raised where the query is defined.

Times are cut between two sends: every message of the first is acknowledged before the
clock reaches the cut, so each is stored before it and each of the second at or after it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.producer import Producer
from aiorocketmq.protocol.bodies import MessageQueue, TopicConfig
from aiorocketmq.protocol.message import Message
from aiorocketmq.spark_sink.options import parse_source_options
from aiorocketmq.spark_sink.source import RocketMQStreamReader
from tests.procs import ServerProcess

pytestmark = pytest.mark.spark

BROKER = "broker-a"


def _bodies(prefix: str, n: int, size: int = 0) -> list[bytes]:
    return [f"{prefix}-{i}".encode().ljust(size, b".") for i in range(n)]


def _now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000


def _cut() -> int:
    """A time after every message acknowledged so far, and before every later one."""
    cut = _now_ms() + 1
    while _now_ms() < cut:
        pass
    return cut


def _create_topic(name_server: str, addr: str, topic: str, queues: int) -> None:
    async def run() -> None:
        async with MQAdmin(name_server) as admin:
            await admin.create_topic(addr, TopicConfig(topic_name=topic, read_queue_nums=queues,
                                                       write_queue_nums=queues))

    asyncio.run(run())


def _send_to(name_server: str, topic: str, per_queue: dict[int, Sequence[bytes]]) -> None:
    """Each queue id's bodies to that queue of broker-a, in order, acknowledged."""

    async def run() -> None:
        async with Producer("spark-kafka-options", name_server) as producer:
            for qid, bodies in sorted(per_queue.items()):
                for body in bodies:
                    await producer.send(Message(topic, body), MessageQueue(topic, BROKER, qid))

    asyncio.run(run())


def _batch(spark: Any, name_server: str, **options: str) -> Any:
    reader = spark.read.format("rocketmq").option("nameServer", name_server)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _stream(spark: Any, name_server: str, **options: str) -> Any:
    reader = spark.readStream.format("rocketmq").option("nameServer", name_server)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _bodies_of(df: Any) -> list[bytes]:
    return sorted(bytes(r.body) for r in df.select("body").collect())


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kafka-options-checkpoints")


@pytest.fixture(scope="module")
def broker_addr(servers: tuple[ServerProcess, ServerProcess]) -> str:
    return servers[1].address


# -- endingTimestamp, startingTimestamp ------------------------------------------------------


def test_ending_timestamp_reads_what_was_stored_before_it(
        spark: Any, name_server: str, broker_addr: str) -> None:
    topic = "SparkEndingTs"
    _create_topic(name_server, broker_addr, topic, 2)
    old, new = _bodies("old", 6), _bodies("new", 4)
    _send_to(name_server, topic, {0: old[:3], 1: old[3:]})
    cut = _cut()
    _send_to(name_server, topic, {0: new[:2], 1: new[2:]})

    assert _bodies_of(_batch(spark, name_server, topic=topic, endingTimestamp=str(cut))) == sorted(
        old)
    both = _batch(spark, name_server, topic=topic, startingTimestamp=str(cut),
                  endingTimestamp=str(_cut()))
    assert _bodies_of(both) == sorted(new)
    # A time after every message: each queue is read to its latest offset (Kafka's rule).
    assert _bodies_of(_batch(spark, name_server, topic=topic,
                             endingTimestamp=str(_now_ms() + 3_600_000))) == sorted(old + new)


# -- startingOffsetsByTimestamp / endingOffsetsByTimestamp -----------------------------------


def test_offsets_by_timestamp_per_queue(spark: Any, name_server: str, broker_addr: str) -> None:
    topic = "SparkTsPerQueue"
    _create_topic(name_server, broker_addr, topic, 3)
    first = {0: _bodies("q0a", 3), 1: _bodies("q1a", 3), 2: _bodies("q2a", 3)}
    _send_to(name_server, topic, first)
    cut1 = _cut()
    second = {0: _bodies("q0b", 2), 1: _bodies("q1b", 2), 2: _bodies("q2b", 2)}
    _send_to(name_server, topic, second)
    cut2 = _cut()
    third = {0: _bodies("q0c", 2), 1: _bodies("q1c", 2), 2: _bodies("q2c", 2)}
    _send_to(name_server, topic, third)

    # Queue 0 from cut1, queue 1 from cut2, queue 2 unnamed (earliest, a batch's default);
    # queue 0 up to cut2, the others to their latest offsets.
    starting = f'{{"{topic}": {{"{BROKER}": {{"0": {cut1}, "1": {cut2}}}}}}}'
    ending = f'{{"{topic}": {{"{BROKER}": {{"0": {cut2}}}}}}}'
    df = _batch(spark, name_server, topic=topic, startingOffsetsByTimestamp=starting,
                endingOffsetsByTimestamp=ending)
    assert _bodies_of(df) == sorted(second[0] + third[1] + first[2] + second[2] + third[2])

    # The same starting map in a stream; unnamed queues start at latest there.
    reader = RocketMQStreamReader(parse_source_options(
        {"nameServer": name_server, "topic": topic, "startingOffsetsByTimestamp": starting},
        streaming=True))
    try:
        offsets = reader.initialOffset()
    finally:
        reader.stop()
    assert offsets == {topic: {BROKER: {"0": 3, "1": 5, "2": 7}}}


def test_starting_timestamp_strategy(spark: Any, name_server: str, broker_addr: str,
                                     checkpoints: Path) -> None:
    topic = "SparkTsStrategy"
    _create_topic(name_server, broker_addr, topic, 2)
    _send_to(name_server, topic, {0: _bodies("before", 3), 1: _bodies("before1", 2)})
    cut = _cut()  # nothing is stored at or after it yet

    df = _stream(spark, name_server, topic=topic, startingTimestamp=str(cut))
    query = df.writeStream.format("memory").queryName("ts_strategy_error").option(
        "checkpointLocation", str(checkpoints / "error")).start()
    try:
        with pytest.raises(StreamingQueryException) as info:
            query.awaitTermination(120)
    finally:
        query.stop()
    text = str(info.value)
    assert f"startingTimestamp: queue {topic}/{BROKER}/0 holds no message stored at or after " \
           f"{cut}" in text
    assert "startingOffsetsByTimestampStrategy=latest" in text

    # latest: such queues start at their latest offset and read what comes after.
    df = _stream(spark, name_server, topic=topic, startingTimestamp=str(cut),
                 startingOffsetsByTimestampStrategy="latest")
    query = df.writeStream.format("memory").queryName("ts_strategy_latest").option(
        "checkpointLocation", str(checkpoints / "latest")).start()
    try:
        query.processAllAvailable()
        after = _bodies("after", 4)
        _send_to(name_server, topic, {0: after[:2], 1: after[2:]})
        query.processAllAvailable()
        assert _bodies_of(spark.sql("SELECT body FROM ts_strategy_latest")) == sorted(after)
        assert query.exception() is None
    finally:
        query.stop()


def test_starting_timestamp_strategy_is_for_the_start_only(name_server: str,
                                                           broker_addr: str) -> None:
    # With assignment=group a running query takes on queues by startingOffsets' rules; a
    # queue the topic gains later, empty, starts at its end instead of failing the query.
    topic = "SparkTsStrategyLater"
    _create_topic(name_server, broker_addr, topic, 2)
    cut = _cut()
    _send_to(name_server, topic, {0: _bodies("a", 2), 1: _bodies("b", 2)})
    reader = RocketMQStreamReader(parse_source_options(
        {"nameServer": name_server, "topic": topic, "startingTimestamp": str(cut),
         "consumerGroup": "spark-ts-later", "assignment": "group"}, streaming=True))
    try:
        start = reader.initialOffset()
        assert start == {topic: {BROKER: {"0": 0, "1": 0}}}
        _create_topic(name_server, broker_addr, topic, 4)
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        assert end == {topic: {BROKER: {"0": 2, "1": 2, "2": 0, "3": 0}}}
    finally:
        reader.stop()


# -- assign ------------------------------------------------------------------------------------


def test_assign_reads_only_the_named_queues(spark: Any, name_server: str, broker_addr: str,
                                            checkpoints: Path) -> None:
    topic = "SparkAssign"
    _create_topic(name_server, broker_addr, topic, 4)
    per_queue = {q: _bodies(f"q{q}", 5) for q in range(4)}
    _send_to(name_server, topic, per_queue)
    assign = f'{{"{topic}": {{"{BROKER}": [1, 3]}}}}'

    df = _batch(spark, name_server, assign=assign)
    rows = df.select("queueId", "body").collect()
    assert {r.queueId for r in rows} == {1, 3}
    assert sorted(bytes(r.body) for r in rows) == sorted(per_queue[1] + per_queue[3])

    stream = _stream(spark, name_server, assign=assign, startingOffsets="earliest")
    query = stream.writeStream.format("memory").queryName("assign_rows").trigger(
        availableNow=True).option("checkpointLocation", str(checkpoints / "assign")).start()
    assert query.awaitTermination(180) and query.exception() is None
    rows = spark.sql("SELECT queueId, body FROM assign_rows").collect()
    assert sorted(bytes(r.body) for r in rows) == sorted(per_queue[1] + per_queue[3])
    end = query.lastProgress["sources"][0]["endOffset"]
    end = json.loads(end) if isinstance(end, str) else end
    assert end == {topic: {BROKER: {"1": 5, "3": 5}}}

    with pytest.raises(Exception, match=f"option assign: queue {topic}/{BROKER}/9 is not in the "
                                        f"topic route"):
        _batch(spark, name_server, assign=f'{{"{topic}": {{"{BROKER}": [1, 9]}}}}').collect()
    with pytest.raises(Exception, match="exactly one of the options topic, topicPattern and "
                                        "assign"):
        _batch(spark, name_server, assign=assign, topic=topic).collect()


# -- maxRecordsPerPartition --------------------------------------------------------------------


def test_max_records_per_partition_splits_a_queue(spark: Any, name_server: str,
                                                  broker_addr: str) -> None:
    topic = "SparkMaxRecords"
    _create_topic(name_server, broker_addr, topic, 2)
    per_queue = {0: _bodies("big", 25), 1: _bodies("small", 4)}
    _send_to(name_server, topic, per_queue)

    df = _batch(spark, name_server, topic=topic, maxRecordsPerPartition="10")
    assert df.rdd.getNumPartitions() == 4  # queue 0 in 9 + 8 + 8, queue 1 whole
    rows = df.selectExpr("queueId", "queueOffset", "spark_partition_id() AS part").collect()
    assert sorted((r.queueId, r.queueOffset) for r in rows) == sorted(
        [(0, i) for i in range(25)] + [(1, i) for i in range(4)])
    spans: dict[int, list[int]] = {}
    for r in rows:
        spans.setdefault(r.part, []).append(r.queueOffset if r.queueId == 0 else -1 - r.queueOffset)
    sizes = sorted(len(v) for v in spans.values())
    assert sizes == [4, 8, 8, 9]
    for offsets in spans.values():
        assert max(offsets) - min(offsets) == len(offsets) - 1  # contiguous ranges


# -- maxBytesPerTrigger ------------------------------------------------------------------------


def test_max_bytes_per_trigger_caps_each_micro_batch(spark: Any, name_server: str,
                                                     broker_addr: str, checkpoints: Path) -> None:
    topic = "SparkMaxBytes"
    _create_topic(name_server, broker_addr, topic, 2)
    bodies = _bodies("kb", 40, size=1000)
    _send_to(name_server, topic, {0: bodies[:20], 1: bodies[20:]})

    df = _stream(spark, name_server, topic=topic, startingOffsets="earliest",
                 maxBytesPerTrigger="10k")
    query = df.writeStream.format("memory").queryName("max_bytes_rows").trigger(
        availableNow=True).option("checkpointLocation", str(checkpoints / "bytes")).start()
    assert query.awaitTermination(180) and query.exception() is None
    rows = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(rows) == 40
    # Each stored record is over 1,000 bytes, so 10 KiB admits at most 10 of them.
    assert max(rows) <= 10 and len(rows) >= 4
    assert _bodies_of(spark.sql("SELECT body FROM max_bytes_rows")) == sorted(bodies)

    # Spark hands the limit over as its ReadMaxBytes.
    reader = RocketMQStreamReader(parse_source_options(
        {"nameServer": name_server, "topic": topic, "maxBytesPerTrigger": "10k"},
        streaming=True))
    try:
        assert type(reader.getDefaultReadLimit()).__name__ == "ReadMaxBytes"
    finally:
        reader.stop()


# -- malformed values ----------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "message"), [
    ({"assign": "{nope"}, "option assign is not JSON"),
    ({"topic": "T", "endingTimestamp": "yesterday"}, "option endingTimestamp='yesterday' is not "
                                                     "an integer"),
    ({"topic": "T", "startingOffsetsByTimestamp": '{"T": {"b": {"0": "x"}}}'},
     "option startingOffsetsByTimestamp: offset 'x' of T/b/0 is not an int"),
    ({"topic": "T", "startingTimestamp": "1", "startingOffsetsByTimestampStrategy": "oldest"},
     "option startingOffsetsByTimestampStrategy='oldest' must be 'error' or 'latest'"),
    ({"topic": "T", "maxRecordsPerPartition": "-1"}, "option maxRecordsPerPartition=-1 must be "
                                                     ">= 1"),
    ({"topic": "T", "maxBytesPerTrigger": "much"}, "option maxBytesPerTrigger='much' is not a "
                                                   "positive size"),
])
def test_malformed_values_fail_before_anything_is_read(
        spark: Any, name_server: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(Exception, match=message):
        _batch(spark, name_server, **options).collect()
