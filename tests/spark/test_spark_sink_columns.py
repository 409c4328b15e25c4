"""Sink columns and ordered sends end to end, against a real ``mqbroker``: a per-row
``delayLevel`` (the broker's delay levels), a per-row ``deliverTime`` (timer messages), and ``shardingKeyColumn`` (rows with one key go to
one queue, ``SelectMessageQueueByHash``'s, in row order, ``async=true`` included)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.javautil import java_string_hash
from tests.procs import ServerProcess

pytestmark = pytest.mark.spark


def _poll(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)  # polling interval of a deadline-bounded wait


def _create_topic(name_server: str, addr: str, topic: str, queues: int) -> None:
    async def run() -> None:
        async with MQAdmin(name_server) as admin:
            await admin.create_topic(addr, TopicConfig(topic_name=topic, read_queue_nums=queues,
                                                       write_queue_nums=queues))

    asyncio.run(run())


def _read(spark: Any, name_server: str, topic: str) -> list[Any]:
    return (spark.read.format("rocketmq").option("nameServer", name_server)
            .option("topic", topic).option("includeProperties", "true").load().collect())


def test_delay_level_column(spark: Any, name_server: str,
                            servers: tuple[ServerProcess, ServerProcess]) -> None:
    topic = "SparkSinkDelay"
    _create_topic(name_server, servers[1].address, topic, 2)
    df = spark.createDataFrame([(f"now-{i}", None if i % 2 else 0) for i in range(4)]
                               + [(f"later-{i}", 1) for i in range(3)],
                               "value string, delayLevel int")
    (df.write.format("rocketmq").option("nameServer", name_server).option("topic", topic)
     .option("async", "true").mode("append").save())

    _poll("the delayed rows", lambda: len(_read(spark, name_server, topic)) == 7)
    rows = {bytes(r.body).decode(): r for r in _read(spark, name_server, topic)}
    for i in range(4):
        assert "DELAY" not in rows[f"now-{i}"].properties
    for i in range(3):
        r = rows[f"later-{i}"]
        assert r.properties["DELAY"] == "1"
        # Level 1 is 1 s: stored again in the topic at least that long after it was born.
        assert (r.storeTimestamp - r.bornTimestamp).total_seconds() >= 1.0

    bad = spark.createDataFrame([("x", -1)], "value string, delayLevel int")
    with pytest.raises(Exception, match="row 0: delayLevel -1 must be >= 0"):
        (bad.write.format("rocketmq").option("nameServer", name_server).option("topic", topic)
         .mode("append").save())


def test_deliver_time_column(spark: Any, name_server: str,
                             servers: tuple[ServerProcess, ServerProcess]) -> None:
    topic = "SparkSinkDeliverTime"
    _create_topic(name_server, servers[1].address, topic, 2)
    _read(spark, name_server, topic)  # Spark's first job is slow on a loaded machine
    due_ms = int(time.time() * 1000) + 10_000
    # A timestamp column: timed rows and a null (at once).
    df = spark.createDataFrame([(f"ts-{i}", due_ms + 500 * i) for i in range(3)]
                               + [("now", None)], "value string, deliverMs bigint")
    (df.selectExpr("value", "timestamp_millis(deliverMs) AS deliverTime")
     .write.format("rocketmq").option("nameServer", name_server).option("topic", topic)
     .option("async", "true").mode("append").save())
    # A bigint column of epoch ms.
    (spark.createDataFrame([(f"ms-{i}", due_ms + 500 * i) for i in range(3)],
                           "value string, deliverTime bigint")
     .write.format("rocketmq").option("nameServer", name_server).option("topic", topic)
     .mode("append").save())

    _poll("the timed rows", lambda: len(_read(spark, name_server, topic)) == 7)
    rows = {bytes(r.body).decode(): r for r in _read(spark, name_server, topic)}
    assert "TIMER_DELIVER_MS" not in rows["now"].properties
    timed = 0
    for prefix in ("ts", "ms"):
        for i in range(3):
            r = rows[f"{prefix}-{i}"]
            due = due_ms + 500 * i
            assert r.properties["TIMER_DELIVER_MS"] == str(due)
            # Not early: stored in the topic at or after its delivery time.
            assert r.storeTimestamp.timestamp() * 1000 >= due
            # Sent before it was due, it waited on the timing wheel.
            if r.bornTimestamp.timestamp() * 1000 < due - 1000:
                timed += 1
                assert "TIMER_DEQUEUE_MS" in r.properties
    assert timed, "no row was sent before its delivery time"

    writer = (spark.createDataFrame([("x", -5)], "value string, deliverTime bigint")
              .write.format("rocketmq").option("nameServer", name_server)
              .option("topic", topic).mode("append"))
    with pytest.raises(Exception, match="row 0: deliverTime -5 must be after the epoch"):
        writer.save()
    bad_type = spark.createDataFrame([("x", "tomorrow")], "value string, deliverTime string")
    with pytest.raises(Exception, match="column deliverTime must be a timestamp or a bigint"):
        (bad_type.write.format("rocketmq").option("nameServer", name_server)
         .option("topic", topic).mode("append").save())


@pytest.mark.parametrize("async_send", ["true", "false"])
def test_sharding_key_column_keeps_each_key_in_one_queue_in_order(
        spark: Any, name_server: str, servers: tuple[ServerProcess, ServerProcess],
        async_send: str) -> None:
    topic = f"SparkSinkSharded{async_send.title()}"
    queues = 4
    _create_topic(name_server, servers[1].address, topic, queues)
    keys = [f"order-{k}" for k in range(10)]
    rows = [(keys[i % 10], i) for i in range(600)]  # keys interleaved, seq ascending
    df = (spark.createDataFrame(rows, "orderId string, seq int")
          .repartition(2, "orderId").sortWithinPartitions("seq")
          .selectExpr("orderId", "concat(orderId, ':', seq) AS value"))
    (df.write.format("rocketmq").option("nameServer", name_server).option("topic", topic)
     .option("shardingKeyColumn", "orderId").option("async", async_send)
     .option("maxInFlight", "64").mode("append").save())

    got = _read(spark, name_server, topic)
    assert len(got) == 600
    by_key: dict[str, list[tuple[int, int, int]]] = {}
    for r in got:
        key, seq = bytes(r.body).decode().split(":")
        by_key.setdefault(key, []).append((r.queueOffset, int(seq), r.queueId))
    for key, seen in by_key.items():
        # One queue per key: SelectMessageQueueByHash's over the topic's 4 write queues.
        assert {q for _, _, q in seen} == {abs(java_string_hash(key)) % queues}
        # In that queue, in row order.
        seqs = [seq for _, seq, _ in sorted(seen)]
        assert seqs == sorted(seqs) and len(seqs) == 60
    # The orderId column routes the rows and is not sent.
    assert all("orderId" not in r.properties for r in got)


def test_sharding_key_column_errors(spark: Any, name_server: str) -> None:
    df = spark.createDataFrame([("x", 1.5)], "value string, weight double")
    writer = (df.write.format("rocketmq").option("nameServer", name_server)
              .option("topic", "SparkSinkShardErr").mode("append"))
    with pytest.raises(Exception, match="option shardingKeyColumn='orderId' names no column"):
        writer.option("shardingKeyColumn", "orderId").save()
    with pytest.raises(Exception, match="column weight must be a string or an integer"):
        writer.option("shardingKeyColumn", "weight").save()
