"""The rocketmq source and sink in a real local Spark session against real servers."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from aiorocketmq.spark_sink.offsets import offsets_from_json
from aiorocketmq.spark_sink.options import parse_source_options
from aiorocketmq.spark_sink.sink_mapping import PROP_BATCH_ID, PROP_PARTITION_ID, PROP_ROW_INDEX
from aiorocketmq.spark_sink.source import RocketMQStreamReader
from tests.spark.conftest import produce

pytestmark = pytest.mark.spark


def _bodies(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def _stream(spark: Any, name_server: str, topic: str, **options: str) -> Any:
    reader = spark.readStream.format("rocketmq").option("nameServer", name_server).option(
        "topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_stream_reads_everything_exactly_once_across_restart(
        spark: Any, name_server: str, checkpoint: Path, tmp_path: Path) -> None:
    topic = "SparkRestart"
    before, during, after = _bodies("b", 120), _bodies("d", 80), _bodies("a", 60)
    produce(name_server, topic, before)
    out = str(tmp_path / "out")

    def start(trigger: dict[str, Any]) -> Any:
        df = _stream(spark, name_server, topic, startingOffsets="earliest",
                     maxOffsetsPerTrigger="50")
        return (df.writeStream.format("parquet").option("path", out)
                .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())

    query = start({"processingTime": "0 seconds"})
    try:
        query.processAllAvailable()
        produce(name_server, topic, during)
        query.processAllAvailable()
        rows_per_batch = [p["numInputRows"] for p in query.recentProgress]
    finally:
        query.stop()
    assert max(rows_per_batch) <= 50
    assert sum(rows_per_batch) == 200

    produce(name_server, topic, after)
    query = start({"availableNow": True})
    assert query.awaitTermination(180), "the availableNow query did not finish"
    assert query.exception() is None
    assert all(p["numInputRows"] <= 50 for p in query.recentProgress)

    df = spark.read.parquet(out)
    rows = df.select("body", "queueId", "queueOffset", "brokerName").collect()
    assert sorted(bytes(r.body) for r in rows) == sorted(before + during + after)
    assert len({(r.brokerName, r.queueId, r.queueOffset) for r in rows}) == len(rows)


def test_available_now_stops_at_latest_offsets_seen_at_start(name_server: str) -> None:
    topic = "SparkAvailableNow"
    produce(name_server, topic, _bodies("x", 40))
    opts = parse_source_options({"nameServer": name_server, "topic": topic,
                                 "startingOffsets": "earliest", "maxOffsetsPerTrigger": "15"},
                                streaming=True)
    reader = RocketMQStreamReader(opts)
    try:
        start = reader.initialOffset()
        reader.prepareForTriggerAvailableNow()
        produce(name_server, topic, _bodies("late", 20))
        end = reader.latestOffset(start, ReadAllAvailable())
        assert sum(offsets_from_json(end).values()) - sum(offsets_from_json(start).values()) == 40
        # With the option limit, batches step towards the same target and stop there.
        seen = 0
        offsets = start
        for _ in range(10):
            nxt = reader.latestOffset(offsets, reader.getDefaultReadLimit())
            step = sum(offsets_from_json(nxt).values()) - sum(offsets_from_json(offsets).values())
            assert step <= 15
            seen += step
            if nxt == offsets:
                break
            offsets = nxt
        assert seen == 40 and offsets == end
    finally:
        reader.stop()


def test_batch_read_between_starting_and_ending_offsets(spark: Any, name_server: str) -> None:
    topic = "SparkBatchRange"
    produce(name_server, topic, _bodies("r", 40), tags="TagR", keys_prefix="key")
    full = (spark.read.format("rocketmq").option("nameServer", name_server)
            .option("topic", topic).option("includeProperties", "true").load())
    rows = full.collect()
    assert len(rows) == 40
    row = rows[0]
    assert row.tags == "TagR" and row.keys.startswith("key") and row.topic == topic
    assert row.properties["TAGS"] == "TagR" and row.msgId == row.properties["UNIQ_KEY"]
    broker = row.brokerName
    starting = {topic: {broker: {"0": 2, "1": -2}}}
    ending = {topic: {broker: {"0": 5, "1": 3, "2": -1, "3": 0}}}
    part = (spark.read.format("rocketmq").option("nameServer", name_server)
            .option("topic", topic).option("startingOffsets", json.dumps(starting))
            .option("endingOffsets", json.dumps(ending)).option("minPartitions", "5").load())
    got = sorted((r.queueId, r.queueOffset) for r in part.collect())
    per_queue = {q: sum(1 for r in rows if r.queueId == q) for q in range(4)}
    expected = ([(0, o) for o in range(2, 5)] + [(1, o) for o in range(0, 3)]
                + [(2, o) for o in range(0, per_queue[2])])
    assert got == sorted(expected)
    tagged = (spark.read.format("rocketmq").option("nameServer", name_server)
              .option("topic", topic).option("subExpression", "Other").load())
    assert tagged.count() == 0
    # An empty plan (every queue from its end): pyspark still runs one read task, with a
    # bare InputPartition(None), which reads nothing.
    empty = (spark.read.format("rocketmq").option("nameServer", name_server)
             .option("topic", topic).option("startingOffsets", "latest").load())
    assert empty.collect() == []


def test_sink_writes_rows_with_tags_keys_and_properties(spark: Any, name_server: str) -> None:
    topic = "SparkSinkOut"
    data = [(f"v{i}", "TagS" if i % 2 else "TagT", f"k{i}", {"n": str(i)}) for i in range(30)]
    df = spark.createDataFrame(data, "value string, tags string, keys string, "
                                     "properties map<string,string>").repartition(2)
    (df.write.format("rocketmq").option("nameServer", name_server).option("topic", topic)
     .option("async", "true").mode("append").save())
    back = (spark.read.format("rocketmq").option("nameServer", name_server)
            .option("topic", topic).option("includeProperties", "true").load().collect())
    assert len(back) == 30
    by_body = {bytes(r.body).decode(): r for r in back}
    lineage = set()
    for value, tags, keys, props in data:
        r = by_body[value]
        assert (r.tags, r.keys, r.properties["n"]) == (tags, keys, props["n"])
        assert r.properties[PROP_BATCH_ID] == "-1"
        lineage.add((r.properties[PROP_PARTITION_ID], r.properties[PROP_ROW_INDEX]))
    assert len(lineage) == 30
    odd = (spark.read.format("rocketmq").option("nameServer", name_server)
           .option("topic", topic).option("subExpression", "TagS").load())
    assert odd.count() == 15


def test_sink_batches_keep_row_order_per_queue(spark: Any, name_server: str) -> None:
    """Synchronous sink, queueId column: consecutive rows of a queue go out as batches, and
    each queue holds its rows in row order, each row its own message with its lineage."""
    topic = "SparkSinkOrdered"
    df = spark.range(0, 300, numPartitions=1).selectExpr(
        "cast(id as string) AS value", "cast(id div 100 AS int) AS queueId")
    (df.write.format("rocketmq").option("nameServer", name_server).option("topic", topic)
     .mode("append").save())
    back = (spark.read.format("rocketmq").option("nameServer", name_server)
            .option("topic", topic).option("includeProperties", "true").load().collect())
    assert len(back) == 300
    for q in range(3):
        rows = sorted((r for r in back if r.queueId == q), key=lambda r: r.queueOffset)
        assert [int(bytes(r.body)) for r in rows] == list(range(100 * q, 100 * q + 100))
        assert [int(r.properties[PROP_ROW_INDEX]) for r in rows] == list(range(100 * q, 100 * q + 100))
    assert len({r.msgId for r in back}) == 300


def test_streaming_sink_records_the_batch_id(spark: Any, name_server: str, checkpoint: Path
                                             ) -> None:
    src, dst = "SparkPipeIn", "SparkPipeOut"
    produce(name_server, src, _bodies("p", 25))
    df = _stream(spark, name_server, src, startingOffsets="earliest")
    query = (df.selectExpr("body", "'Copied' AS tags").writeStream.format("rocketmq")
             .option("nameServer", name_server).option("topic", dst)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert query.awaitTermination(180), "the availableNow query did not finish"
    assert query.exception() is None
    back = (spark.read.format("rocketmq").option("nameServer", name_server)
            .option("topic", dst).option("includeProperties", "true").load().collect())
    assert sorted(bytes(r.body) for r in back) == sorted(_bodies("p", 25))
    assert {r.tags for r in back} == {"Copied"}
    assert {r.properties["spark.queryId"] for r in back} == {str(query.id)}
    assert all(int(r.properties[PROP_BATCH_ID]) >= 0 for r in back)


def test_group_assignment_splits_queues_between_two_queries(
        spark: Any, name_server: str, tmp_path: Path) -> None:
    topic, group = "SparkShared", "spark-shared-group"
    first = _bodies("g1", 40)
    produce(name_server, topic, first)

    def start(name: str) -> Any:
        df = _stream(spark, name_server, topic, startingOffsets="earliest",
                     consumerGroup=group, assignment="group")
        return (df.writeStream.format("memory").queryName(name)
                .option("checkpointLocation", str(tmp_path / name)).start())

    qa = start("shared_a")
    qb = start("shared_b")
    try:
        for _ in range(2):  # both are members once each has planned a batch
            qa.processAllAvailable()
            qb.processAllAvailable()
        second = _bodies("g2", 80)
        produce(name_server, topic, second)
        qa.processAllAvailable()
        qb.processAllAvailable()
        qa.processAllAvailable()
        qb.processAllAvailable()

        def rows(name: str) -> list[Any]:
            return spark.sql(f"SELECT body, queueId FROM {name}").collect()

        a, b = rows("shared_a"), rows("shared_b")
        # Each query reads a message at most once; together they read every message. The
        # first messages of a queue handed over while both joined may be read by both (the
        # newcomer starts it at earliest when the group has no commit for it yet); the late
        # ones, sent once both were members, are read exactly once (below).
        for got in (a, b):
            twice = [body for body, n in Counter(bytes(r.body) for r in got).items() if n > 1]
            assert twice == [], twice
        assert {bytes(r.body) for r in a + b} == set(first + second)
        late_a = {r.queueId for r in a if bytes(r.body).startswith(b"g2")}
        late_b = {r.queueId for r in b if bytes(r.body).startswith(b"g2")}
        assert late_a and late_b and not late_a & late_b
        late = [bytes(r.body) for r in a + b if bytes(r.body).startswith(b"g2")]
        assert sorted(late) == sorted(second)
    finally:
        qa.stop()
        qb.stop()
