"""Source options end to end: a real local[2] Spark session against real ``mqnamesrv`` +
``mqbroker`` processes (the session fixtures of ``conftest.py``), one streaming query per
option: topicPattern, startingTimestamp, minOffsetsPerTrigger + maxTriggerDelay,
commitOffsetsToGroup, includeProperties, subExpression, and a broker that leaves the route
while a query runs (failOnDataLoss both ways).

Queries finish through ``Trigger.AvailableNow`` or ``processAllAvailable()``; the only waits
are deadline-bounded polls of what the query has written.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming.datasource import ReadAllAvailable

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.producer import Producer
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.headers import QueryConsumerOffsetRequestHeader
from aiorocketmq.protocol.message import Message
from aiorocketmq.spark_sink.link import BlockingLink
from aiorocketmq.spark_sink.offsets import QueueKey, offsets_from_json, offsets_to_json
from aiorocketmq.spark_sink.options import parse_source_options
from aiorocketmq.spark_sink.source import (
    QueueRangePartition,
    ReadSettings,
    RocketMQStreamReader,
    read_partition,
)
from tests.logs import capture_logs
from tests.procs import ServerProcess, broker_process
from tests.spark.conftest import produce

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


# -- helpers ---------------------------------------------------------------------------------


def _bodies(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _stream(spark: Any, name_server: str, **options: str) -> Any:
    reader = spark.readStream.format("rocketmq").option("nameServer", name_server)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _to_memory(df: Any, name: str, checkpoint: Path, **trigger: Any) -> Any:
    writer = (df.writeStream.format("memory").queryName(name)
              .option("checkpointLocation", str(checkpoint / name)))
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


def _run_available_now(spark: Any, df: Any, name: str, checkpoint: Path) -> list[Any]:
    query = _to_memory(df, name, checkpoint, availableNow=True)
    assert query.awaitTermination(180), f"query {name} did not finish"
    assert query.exception() is None
    return spark.sql(f"SELECT * FROM {name}").collect()


def _end_offsets(query: Any) -> dict[QueueKey, int]:
    raw = query.lastProgress["sources"][0]["endOffset"]
    return offsets_from_json(json.loads(raw) if isinstance(raw, str) else raw)


def _poll(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)  # polling interval of a deadline-bounded wait


def _admin(name_server: str, fn: Callable[[MQAdmin], Any]) -> Any:
    async def run() -> Any:
        async with MQAdmin(name_server) as admin:
            return await fn(admin)

    return asyncio.run(run())


def _create_topic(name_server: str, topic: str, brokers: Sequence[str], queues: int) -> None:
    """The topic on each broker address in ``brokers``, ``queues`` read/write queues each."""
    config = TopicConfig(topic_name=topic, read_queue_nums=queues, write_queue_nums=queues)

    async def create(admin: MQAdmin) -> None:
        for addr in brokers:
            await admin.create_topic(addr, config)

    _admin(name_server, create)


def _send(name_server: str, messages: Sequence[Message]) -> None:
    async def run() -> None:
        producer = Producer("spark-options-producer", name_server)
        await producer.start()
        try:
            for msg in messages:
                await producer.send(msg)
        finally:
            await producer.shutdown()

    asyncio.run(run())


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("options-checkpoints")


@pytest.fixture
def extra_broker(servers: tuple[ServerProcess, ServerProcess], tmp_path: Path
                 ) -> Iterator[Callable[..., ServerProcess]]:
    """Start more brokers on the session nameserver; stopped after the test. They do not
    auto-create topics, so no other test's topic lands on them."""
    started: list[ServerProcess] = []

    def start(name: str, cluster: str = "DefaultCluster") -> ServerProcess:
        proc = broker_process(tmp_path, servers[0].address, name=name, conf={
            "brokerClusterName": cluster, "autoCreateTopicEnable": "false"})
        started.append(proc)
        return proc.start()

    try:
        yield start
    finally:
        for proc in started:
            proc.stop()
            print(f"---- {proc.log_path} ----\n{proc.log_tail(40)}")


# -- topicPattern ----------------------------------------------------------------------------


def test_topic_pattern_reads_matching_topics_only(
        spark: Any, name_server: str, servers: tuple[ServerProcess, ServerProcess],
        extra_broker: Callable[..., ServerProcess], checkpoints: Path) -> None:
    # Its cluster and broker names are topics on the nameserver that the pattern matches.
    extra_broker("broker-Pattern", cluster="PatternCluster")
    topics = _admin(name_server, lambda admin: admin.topic_list())
    assert {"PatternCluster", "broker-Pattern"} <= set(topics)
    broker_a = servers[1].address
    for topic in ("SparkPatternA", "SparkPatternB", "SparkOther"):
        _create_topic(name_server, topic, [broker_a], 2)
    produce(name_server, "SparkPatternA", _bodies("pa", 6))
    produce(name_server, "SparkPatternB", _bodies("pb", 4))
    produce(name_server, "SparkOther", _bodies("other", 3))

    df = _stream(spark, name_server, topicPattern=".*Pattern.*", startingOffsets="earliest")
    query = _to_memory(df, "pattern_rows", checkpoints)
    try:
        query.processAllAvailable()
        rows = spark.sql("SELECT topic, body FROM pattern_rows").collect()
        assert sorted(bytes(r.body) for r in rows) == sorted(_bodies("pa", 6) + _bodies("pb", 4))
        assert {k.topic for k in _end_offsets(query)} == {"SparkPatternA", "SparkPatternB"}

        # A topic created while the query runs joins it, read from its earliest offset.
        _create_topic(name_server, "SparkPatternC", [broker_a], 2)
        produce(name_server, "SparkPatternC", _bodies("pc", 5))
        query.processAllAvailable()
        rows = spark.sql("SELECT topic, body FROM pattern_rows").collect()
        assert sorted(bytes(r.body) for r in rows if r.topic == "SparkPatternC") == sorted(
            _bodies("pc", 5))
        assert {r.topic for r in rows} == {"SparkPatternA", "SparkPatternB", "SparkPatternC"}
        assert query.exception() is None
    finally:
        query.stop()


# -- startingTimestamp -----------------------------------------------------------------------


def test_starting_timestamp_skips_messages_stored_before_it(
        spark: Any, name_server: str, checkpoints: Path) -> None:
    topic = "SparkTimestamp"
    old, new = _bodies("old", 10), _bodies("new", 8)
    produce(name_server, topic, old)
    # Every old message is acknowledged, so stored at or before ``cut - 1``; wait for the
    # clock to reach ``cut`` so that every new message is stored at or after it.
    cut = _now_ms() + 1
    while _now_ms() < cut:
        pass
    produce(name_server, topic, new)

    df = _stream(spark, name_server, topic=topic, startingTimestamp=str(cut))
    rows = _run_available_now(spark, df, "timestamp_rows", checkpoints)
    assert sorted(bytes(r.body) for r in rows) == sorted(new)
    assert all(r.storeTimestamp.timestamp() * 1000 >= cut for r in rows)

    batch = (spark.read.format("rocketmq").option("nameServer", name_server)
             .option("topic", topic).option("startingTimestamp", str(cut)).load())
    assert sorted(bytes(r.body) for r in batch.select("body").collect()) == sorted(new)


# -- minOffsetsPerTrigger + maxTriggerDelay --------------------------------------------------


def test_min_offsets_per_trigger_waits_for_enough_messages(
        spark: Any, name_server: str, checkpoints: Path) -> None:
    topic = "SparkMinRows"
    produce(name_server, topic, _bodies("m", 4))
    df = _stream(spark, name_server, topic=topic, startingOffsets="earliest",
                 minOffsetsPerTrigger="10", maxTriggerDelay="1h")
    query = _to_memory(df, "min_rows", checkpoints)
    try:
        query.processAllAvailable()  # 4 < 10 and the hour is not over: no batch
        assert spark.sql("SELECT * FROM min_rows").count() == 0
        produce(name_server, topic, _bodies("n", 6))
        query.processAllAvailable()
        assert spark.sql("SELECT * FROM min_rows").count() == 10
        assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [10]
    finally:
        query.stop()


def test_max_trigger_delay_releases_a_smaller_batch(
        spark: Any, name_server: str, checkpoints: Path) -> None:
    topic = "SparkMinDelay"
    produce(name_server, topic, _bodies("d", 3))
    df = _stream(spark, name_server, topic=topic, startingOffsets="earliest",
                 minOffsetsPerTrigger="1000", maxTriggerDelay="1s")
    query = _to_memory(df, "delay_rows", checkpoints)
    try:
        _poll("the delayed batch", lambda: spark.sql("SELECT * FROM delay_rows").count() == 3)
        assert query.exception() is None
    finally:
        query.stop()


# -- commitOffsetsToGroup --------------------------------------------------------------------


def test_commit_offsets_to_group_stores_the_end_offsets(
        spark: Any, name_server: str, checkpoints: Path) -> None:
    topic, group = "SparkCommit", "spark-commit-group"
    produce(name_server, topic, _bodies("c", 12))
    df = _stream(spark, name_server, topic=topic, startingOffsets="earliest",
                 consumerGroup=group)
    query = _to_memory(df, "commit_rows", checkpoints, availableNow=True)
    assert query.awaitTermination(180)
    assert spark.sql("SELECT * FROM commit_rows").count() == 12
    end = _end_offsets(query)
    assert sum(end.values()) == 12

    async def committed(admin: MQAdmin) -> dict[QueueKey, int]:
        out = {}
        for key in end:
            addr = await admin.broker_addr_of(key.topic, key.broker_name)
            header = QueryConsumerOffsetRequestHeader(
                consumer_group=group, topic=key.topic, queue_id=key.queue_id)
            out[key] = await admin.api.query_consumer_offset(addr, header)
        return out

    assert _admin(name_server, committed) == end

    produce(name_server, topic, _bodies("lag", 5))
    out = subprocess.run(
        [sys.executable, "-m", "aiorocketmq.client.admin.cli", "consumerProgress", "-n", name_server,
         "-g", group, "--json"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    progress = json.loads(out.stdout)
    assert progress["diffTotal"] == 5
    assert {(q["brokerName"], q["queueId"]): q["consumerOffset"] for q in progress["queues"]
            } == {(k.broker_name, k.queue_id): v for k, v in end.items()}


# -- includeProperties and subExpression -----------------------------------------------------


def test_stream_include_properties_map(spark: Any, name_server: str, checkpoints: Path) -> None:
    topic = "SparkStreamProps"
    _send(name_server, [Message(topic, f"p{i}".encode(), tags="TagP", keys=f"key{i} common",
                                properties={"color": "red" if i % 2 else "blue", "n": str(i)})
                        for i in range(8)])
    df = _stream(spark, name_server, topic=topic, startingOffsets="earliest",
                 includeProperties="true")
    rows = _run_available_now(spark, df, "props_rows", checkpoints)
    assert len(rows) == 8
    for r in rows:
        i = int(bytes(r.body).decode()[1:])
        props = r.properties
        assert props["n"] == str(i) and props["color"] == ("red" if i % 2 else "blue")
        assert props["TAGS"] == r.tags == "TagP"
        assert props["KEYS"] == r.keys == f"key{i} common"
        assert props["UNIQ_KEY"] == r.msgId


def test_stream_sub_expression_filters_tags(spark: Any, name_server: str, checkpoints: Path
                                            ) -> None:
    topic = "SparkStreamTags"
    for tag in ("TagA", "TagB", "TagC"):
        produce(name_server, topic, _bodies(tag, 5), tags=tag)
    df = _stream(spark, name_server, topic=topic, startingOffsets="earliest",
                 subExpression="TagA || TagC")
    rows = _run_available_now(spark, df, "tag_rows", checkpoints)
    assert sorted(bytes(r.body) for r in rows) == sorted(_bodies("TagA", 5) + _bodies("TagC", 5))
    assert {r.tags for r in rows} == {"TagA", "TagC"}


# -- a broker leaves the route ---------------------------------------------------------------


def _two_broker_topic(name_server: str, servers: tuple[ServerProcess, ServerProcess],
                      gone: ServerProcess, topic: str, n: int) -> list[bytes]:
    _create_topic(name_server, topic, [servers[1].address, gone.address], 2)
    bodies = _bodies("g", n)
    produce(name_server, topic, bodies)
    return bodies


def test_broker_gone_fails_the_query_naming_the_broker(
        spark: Any, name_server: str, servers: tuple[ServerProcess, ServerProcess],
        extra_broker: Callable[..., ServerProcess], checkpoints: Path) -> None:
    topic = "SparkGoneFail"
    gone = extra_broker("broker-gone-1")
    _two_broker_topic(name_server, servers, gone, topic, 8)
    df = _stream(spark, name_server, topic=topic, startingOffsets="earliest")
    query = _to_memory(df, "gone_fail_rows", checkpoints)
    try:
        query.processAllAvailable()
        rows = spark.sql("SELECT brokerName FROM gone_fail_rows").collect()
        assert len(rows) == 8 and {r.brokerName for r in rows} == {"broker-a", "broker-gone-1"}
        assert gone.stop() == 0  # SIGTERM: a clean stop unregisters it from the nameserver
        with pytest.raises(StreamingQueryException) as info:
            query.awaitTermination(120)
        text = str(info.value)
        assert "DataLossError" in text
        assert "broker broker-gone-1 is not in the topic route" in text
        assert "failOnDataLoss=false" in text
    finally:
        query.stop()


def test_broker_gone_is_logged_and_the_query_goes_on(
        spark: Any, name_server: str, servers: tuple[ServerProcess, ServerProcess],
        extra_broker: Callable[..., ServerProcess], checkpoints: Path) -> None:
    topic = "SparkGoneSkip"
    gone = extra_broker("broker-gone-2")
    first = _two_broker_topic(name_server, servers, gone, topic, 8)
    df = _stream(spark, name_server, topic=topic, startingOffsets="earliest",
                 failOnDataLoss="false")
    query = _to_memory(df, "gone_skip_rows", checkpoints)
    try:
        query.processAllAvailable()
        before = _end_offsets(query)
        assert gone.stop() == 0
        later = _bodies("later", 6)  # only broker-a is in the route now
        produce(name_server, topic, later)
        query.processAllAvailable()
        rows = spark.sql("SELECT body FROM gone_skip_rows").collect()
        assert sorted(bytes(r.body) for r in rows) == sorted(first + later)
        assert query.isActive and query.exception() is None
        # The gone broker's queues keep their offsets, to resume if it comes back.
        after = _end_offsets(query)
        assert {k: v for k, v in after.items() if k.broker_name == "broker-gone-2"} == {
            k: v for k, v in before.items() if k.broker_name == "broker-gone-2"}
    finally:
        query.stop()

    # The same planning step in this process, to see what it logs: once per queue.
    opts = parse_source_options({"nameServer": name_server, "topic": topic,
                                 "failOnDataLoss": "false"}, streaming=True)
    reader = RocketMQStreamReader(opts)
    try:
        start = offsets_to_json(after)
        with capture_logs() as logs:
            first_end = reader.latestOffset(start, reader.getDefaultReadLimit())
            reader.latestOffset(first_end, reader.getDefaultReadLimit())
        gone_logs = [e for e in logs if e["event"] == "spark.broker_gone"]
        assert sorted(e["queue"] for e in gone_logs) == sorted(
            str(k) for k in after if k.broker_name == "broker-gone-2")
    finally:
        reader.stop()


def test_unresponsive_broker_in_the_route_holds_its_queues(
        name_server: str, servers: tuple[ServerProcess, ServerProcess],
        extra_broker: Callable[..., ServerProcess]) -> None:
    # A stopping broker refuses connections for a while before it leaves the route; a
    # SIGSTOPped one stays in the route (its nameserver connection stays open) and never
    # answers, which makes that state last for the test.
    topic = "SparkUnresponsive"
    hung = extra_broker("broker-hung")
    _two_broker_topic(name_server, servers, hung, topic, 8)
    opts = parse_source_options({"nameServer": name_server, "topic": topic,
                                 "startingOffsets": "earliest", "pullTimeoutMs": "1000"},
                                streaming=True)
    reader = RocketMQStreamReader(opts)
    try:
        start = reader.initialOffset()
        os.kill(hung.pid, signal.SIGSTOP)
        try:
            with capture_logs() as logs:
                end = reader.latestOffset(start, ReadAllAvailable())
                again = reader.latestOffset(start, ReadAllAvailable())
        finally:
            os.kill(hung.pid, signal.SIGCONT)
        assert end == again
        begin, after = offsets_from_json(start), offsets_from_json(end)
        assert {k: v for k, v in after.items() if k.broker_name == "broker-hung"} == {
            k: v for k, v in begin.items() if k.broker_name == "broker-hung"}
        on_a = [k for k in after if k.broker_name == "broker-a"]
        with BlockingLink(name_server) as link:
            view = link.call(lambda lk: lk.routes([topic]))
            maxs = link.call(lambda lk: lk.max_offsets(view, on_a))
        assert {k: after[k] for k in on_a} == maxs and sum(maxs.values()) > 0
        events = [e for e in logs if e["event"] == "spark.broker_unreachable"]
        assert [e["broker"] for e in events] == ["broker-hung"]
    finally:
        reader.stop()


# -- executor side: one loop thread per read, closed before read() returns ----------------------


def test_read_partition_closes_its_loop_thread_and_objects_pickle(name_server: str) -> None:
    topic = "SparkPickle"
    produce(name_server, topic, _bodies("k", 6))
    opts = parse_source_options({"nameServer": name_server, "topic": topic,
                                 "startingOffsets": "earliest"}, streaming=True)
    reader = RocketMQStreamReader(opts)
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        parts = reader.partitions(start, end)
        clone = pickle.loads(pickle.dumps(reader))  # the driver's open link is not pickled
        assert isinstance(clone, RocketMQStreamReader)
    finally:
        reader.stop()
    before = {t.ident for t in threading.enumerate()}
    got = 0
    for part in parts:
        part = pickle.loads(pickle.dumps(part))
        assert isinstance(part, QueueRangePartition) and isinstance(part.settings, ReadSettings)
        got += sum(batch.num_rows for batch in read_partition(part))
    assert got == 6
    assert {t.ident for t in threading.enumerate()} <= before
    with BlockingLink(name_server) as link:
        assert link.is_open
    assert not link.is_open
