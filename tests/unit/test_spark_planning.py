"""Pure planning logic of the Spark source: offsets JSON, options, rate limit, ranges."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.spark_sink.offsets import (
    EARLIEST,
    LATEST,
    QueueKey,
    offsets_from_json,
    offsets_to_json,
    parse_offset_spec,
    resolve_spec,
)
from aiorocketmq.spark_sink.options import (
    parse_duration_ms,
    parse_sink_options,
    parse_size_bytes,
    parse_source_options,
)
from aiorocketmq.spark_sink.planning import (
    backlog,
    byte_limit,
    plan_ranges,
    rate_limit,
    should_wait,
)

queue_keys = st.builds(
    QueueKey,
    st.sampled_from(["TopicA", "TopicB", "t-10"]),
    st.sampled_from(["broker-a", "broker-b"]),
    st.integers(0, 15),
)
offset_maps = st.dictionaries(queue_keys, st.integers(0, 2**40), max_size=12)


@given(offset_maps)
def test_offsets_json_round_trip_and_sorted(offsets: dict[QueueKey, int]) -> None:
    obj = offsets_to_json(offsets)
    text = json.dumps(obj)
    assert text == json.dumps(obj, sort_keys=True)
    assert offsets_from_json(json.loads(text)) == offsets
    assert offsets_from_json(text) == offsets


@pytest.mark.parametrize("bad", ['[1]', '{"t": 1}', '{"t": {"b": {"x": 1}}}',
                                 '{"t": {"b": {"0": "1"}}}', '{"t": {"b": {"0": true}}}', "nope"])
def test_offsets_from_json_refuses_other_shapes(bad: str) -> None:
    with pytest.raises(MQClientError):
        offsets_from_json(bad)


def test_offset_spec_and_resolution() -> None:
    a0, a1 = QueueKey("T", "a", 0), QueueKey("T", "a", 1)
    mins, maxs = {a0: 5, a1: 0}, {a0: 50, a1: 40}
    assert resolve_spec(parse_offset_spec("earliest", "o"), [a0, a1], mins, maxs,
                        default=LATEST) == {a0: 5, a1: 0}
    assert resolve_spec(parse_offset_spec("LATEST", "o"), [a0, a1], mins, maxs,
                        default=EARLIEST) == {a0: 50, a1: 40}
    spec = parse_offset_spec('{"T": {"a": {"0": -2, "1": 99}}}', "o")
    assert resolve_spec(spec, [a0, a1], mins, maxs, default=LATEST) == {a0: 5, a1: 40}
    spec = parse_offset_spec('{"T": {"a": {"0": 3}}}', "o")
    # Explicit offsets below min are kept so the data-loss check sees them.
    assert resolve_spec(spec, [a0, a1], mins, maxs, default=LATEST) == {a0: 3, a1: 40}
    with pytest.raises(MQClientError, match="must be >= 0"):
        parse_offset_spec('{"T": {"a": {"0": -3}}}', "startingOffsets")


def test_source_options_defaults_and_validation() -> None:
    o = parse_source_options({"nameserver": "127.0.0.1:9876", "TOPIC": "b, a,a"}, streaming=True)
    assert o.topics == ("a", "b") and o.sub_expression == "*"
    assert o.starting_offsets.kind == "latest" and o.fail_on_data_loss
    assert o.reader_group == "spark-rocketmq-reader" and not o.commit_offsets_to_group
    assert o.max_trigger_delay_ms == 15 * 60_000
    b = parse_source_options({"nameServer": "x:1", "topic": "a"}, streaming=False)
    assert b.starting_offsets.kind == "earliest"
    g = parse_source_options({"nameServer": "x:1", "topic": "a", "consumerGroup": "g",
                              "assignment": "group", "maxTriggerDelay": "30s"}, streaming=True)
    assert g.commit_offsets_to_group and g.assignment == "group"
    assert g.max_trigger_delay_ms == 30_000
    base = {"nameServer": "x:1", "topic": "a"}
    for extra, message in [
        ({"topicPattern": "a.*"}, "exactly one"),
        ({"endingOffsets": "latest"}, "batch queries"),
        ({"assignment": "group"}, "consumerGroup"),
        ({"commitOffsetsToGroup": "true"}, "consumerGroup"),
        ({"maxOffsetsPerTrigger": "0"}, ">= 1"),
        ({"maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "6"}, "above"),
        ({"failOnDataLoss": "maybe"}, "'true' or 'false'"),
        ({"startingOffsets": "earliest", "startingTimestamp": "1"}, "at most one of"),
        ({"startingTimestamp": "1", "startingOffsetsByTimestamp": '{"a": {"b": {"0": 1}}}'},
         "at most one of"),
        ({"startingOffsetsByTimestamp": '{"a": {"b": {"0": -1}}}'}, "must be >= 0"),
        ({"startingOffsetsByTimestamp": '{"a": {"b": [1]}}'}, "startingOffsetsByTimestamp"),
        ({"startingOffsetsByTimestamp": '{"c": {"b": {"0": 1}}}'}, "names topic c"),
        ({"startingOffsetsByTimestampStrategy": "earliest"}, "'error' or 'latest'"),
        ({"endingTimestamp": "5"}, "batch queries"),
        ({"endingOffsetsByTimestamp": '{"a": {"b": {"0": 1}}}'}, "batch queries"),
        ({"assign": '{"a": {"b": [0]}}'}, "exactly one"),
        ({"maxRecordsPerPartition": "0"}, "maxRecordsPerPartition=0 must be >= 1"),
        ({"maxBytesPerTrigger": "lots"}, "maxBytesPerTrigger='lots' is not a positive size"),
        ({"maxBytesPerTrigger": "0"}, "not a positive size"),
        ({"tlsCaFile": "/ca.pem"}, "tlsCaFile needs the option tls=true"),
        ({"tls": "yes"}, "tls='yes' must be 'true' or 'false'"),
        ({"tls": "true", "tlsKeyFile": "k.pem"}, "need the option tlsCertFile"),
        ({"maxTriggerDelay": "soon"}, "duration"),
        ({"maxOfsetsPerTrigger": "5"}, "unknown option"),
    ]:
        with pytest.raises(MQClientError, match=message):
            parse_source_options({**base, **extra}, streaming=True)
    with pytest.raises(MQClientError, match="nameServer"):
        parse_source_options({"topic": "a"}, streaming=True)
    assert parse_duration_ms("250", "x") == 250 and parse_duration_ms("2h", "x") == 7_200_000
    assert parse_size_bytes("512k", "x") == 512 << 10 and parse_size_bytes("10", "x") == 10
    assert parse_size_bytes("1G", "x") == 1 << 30


def test_source_options_assign_timestamps_and_connection() -> None:
    o = parse_source_options({"nameServer": "x:1", "assign": '{"T": {"b": [2, 0, 2]}, "U": {"c": [1]}}',
                              "startingOffsetsByTimestamp": '{"T": {"b": {"0": 5, "2": 7}}}',
                              "startingOffsetsByTimestampStrategy": "LATEST",
                              "maxBytesPerTrigger": "1m", "maxRecordsPerPartition": "100",
                              "tls": "true", "tlsVerify": "true", "tlsCaFile": "/ca.pem",
                              "tlsCertFile": "/c.pem", "tlsKeyFile": "/k.pem",
                              "tlsKeyPassword": "hush"}, streaming=True)
    assert o.assign == (QueueKey("T", "b", 0), QueueKey("T", "b", 2), QueueKey("U", "c", 1))
    assert o.topics == ("T", "U")
    assert o.starting_timestamps == ((QueueKey("T", "b", 0), 5), (QueueKey("T", "b", 2), 7))
    assert o.starting_timestamp_strategy == "latest"
    assert o.max_bytes_per_trigger == 1 << 20 and o.max_records_per_partition == 100
    assert o.tls is not None and o.tls.verify and o.tls.ca_file == "/ca.pem"
    assert "hush" not in repr(o)
    config = o.client_config()
    assert config.use_tls and config.tls_verify and config.tls_key_password == "hush"
    assert config.namesrv_addr == "x:1"
    b = parse_source_options({"nameServer": "x:1", "topic": "T", "endingTimestamp": "9",
                              "startingTimestamp": "3"}, streaming=False)
    assert b.ending_timestamp_ms == 9 and b.starting_timestamp_ms == 3
    assert b.starting_timestamp_strategy == "error" and b.tls is None
    for raw, message in [
        ("[1]", "names no queue"),
        ("{}", "names no queue"),
        ('{"T": [0]}', "must map broker names"),
        ('{"T": {"b": []}}', "non-empty list"),
        ('{"T": {"b": [-1]}}', "non-empty list"),
        ('{"T": {"b": ["0"]}}', "non-empty list"),
        ("{T", "option assign is not JSON"),
    ]:
        with pytest.raises(MQClientError, match=message):
            parse_source_options({"nameServer": "x:1", "assign": raw}, streaming=True)
    with pytest.raises(MQClientError, match="does not go with assignment=group"):
        parse_source_options({"nameServer": "x:1", "assign": '{"T": {"b": [0]}}',
                              "consumerGroup": "g", "assignment": "group"}, streaming=True)
    with pytest.raises(MQClientError, match="startingTimestamp=9 is after endingTimestamp=3"):
        parse_source_options({"nameServer": "x:1", "topic": "T", "startingTimestamp": "9",
                              "endingTimestamp": "3"}, streaming=False)


def test_sink_options() -> None:
    o = parse_sink_options({"nameServer": "x:1", "async": "true"})
    assert o.async_send and o.topic is None and o.send_timeout_ms == 3000
    assert o.tls is None and o.sharding_key_column is None
    t = parse_sink_options({"nameServer": "x:1", "tls": "true", "tlsCaFile": "/ca.pem",
                            "shardingKeyColumn": "orderId"})
    assert t.client_config().use_tls and t.client_config().tls_ca_file == "/ca.pem"
    assert t.sharding_key_column == "orderId"
    with pytest.raises(MQClientError, match="tlsVerify needs the option tls=true"):
        parse_sink_options({"nameServer": "x:1", "tlsVerify": "true"})
    with pytest.raises(MQClientError, match="unknown option"):
        parse_sink_options({"nameServer": "x:1", "tpoic": "a"})


@given(offset_maps, st.data(), st.integers(1, 10_000))
def test_rate_limit_invariants(start: dict[QueueKey, int], data: st.DataObject,
                               max_total: int) -> None:
    latest = {k: v + data.draw(st.integers(0, 5000)) for k, v in start.items()}
    end = rate_limit(start, latest, max_total)
    assert end.keys() == latest.keys()
    for k in latest:
        assert start[k] <= end[k] <= latest[k]
    assert backlog(start, end) == min(max_total, backlog(start, latest))
    assert rate_limit(start, latest, max_total) == end  # deterministic


def test_rate_limit_is_proportional_to_backlog() -> None:
    a, b = QueueKey("T", "a", 0), QueueKey("T", "a", 1)
    assert rate_limit({a: 0, b: 0}, {a: 300, b: 100}, 100) == {a: 75, b: 25}
    new = QueueKey("T", "b", 0)
    # A queue new in this batch stays where it starts.
    assert rate_limit({a: 0}, {a: 10, new: 7}, 5) == {a: 5, new: 7}


def test_should_wait() -> None:
    assert not should_wait(5, None, 0, 10, 100)
    assert should_wait(5, 10, 0, 10, 100)
    assert not should_wait(5, 10, 0, 100, 100)
    assert not should_wait(10, 10, 0, 10, 100)


def test_byte_limit() -> None:
    a, b, new = QueueKey("T", "a", 0), QueueKey("T", "a", 1), QueueKey("T", "b", 0)
    start, latest = {a: 0, b: 0}, {a: 100, b: 100, new: 3}
    # 100 x 10 B + 100 x 30 B = 4000 B; a 2000 B cap is half the backlog, split by backlog.
    assert byte_limit(start, latest, {a: 10.0, b: 30.0}, 2000) == {a: 50, b: 50, new: 3}
    assert byte_limit(start, latest, {a: 10.0, b: 30.0}, 4000) == latest
    # b unmeasured takes a's size; nothing measured means no cap; at least one offset.
    assert byte_limit(start, latest, {a: 10.0}, 1000) == {a: 50, b: 50, new: 3}
    assert byte_limit(start, latest, {}, 1) == latest
    assert backlog(start, byte_limit(start, latest, {a: 10.0, b: 30.0}, 1)) == 1
    assert byte_limit(start, {a: 0, b: 0}, {a: 10.0}, 1) == {a: 0, b: 0}


@given(offset_maps, st.data(), st.one_of(st.none(), st.integers(1, 10_000)),
       st.integers(1, 10_000))
def test_byte_limit_invariants(start: dict[QueueKey, int], data: st.DataObject,
                               size: int | None, max_bytes: int) -> None:
    latest = {k: v + data.draw(st.integers(0, 500)) for k, v in start.items()}
    sizes = {k: float(size) for k in start} if size is not None else {}
    end = byte_limit(start, latest, sizes, max_bytes)
    for k in latest:
        assert start[k] <= end[k] <= latest[k]
    rows = backlog(start, end)
    if size is not None and backlog(start, latest):
        assert rows >= 1 and (rows == 1 or rows * size <= max_bytes)


def test_plan_ranges_max_records() -> None:
    a, b = QueueKey("T", "a", 0), QueueKey("T", "a", 1)
    got = [(r.queue.queue_id, r.start, r.end) for r in plan_ranges({a: 0, b: 10}, {a: 25, b: 14},
                                                                   max_records=10)]
    assert got == [(0, 0, 9), (0, 9, 17), (0, 17, 25), (1, 10, 14)]
    # minPartitions splits on top of it.
    assert len(plan_ranges({a: 0, b: 10}, {a: 25, b: 14}, 8, max_records=10)) >= 8


@given(offset_maps, st.data(), st.one_of(st.none(), st.integers(1, 40)),
       st.one_of(st.none(), st.integers(1, 100)))
def test_plan_ranges_cover_exactly(start: dict[QueueKey, int], data: st.DataObject,
                                   min_partitions: int | None, max_records: int | None) -> None:
    end = {k: v + data.draw(st.integers(0, 300)) for k, v in start.items()}
    ranges = plan_ranges(start, end, min_partitions, max_records)
    covered: dict[QueueKey, list[tuple[int, int]]] = {}
    for r in ranges:
        assert r.end > r.start
        covered.setdefault(r.queue, []).append((r.start, r.end))
    for k in start:
        spans = sorted(covered.get(k, []))
        pos = start[k]
        for s, e in spans:
            assert s == pos
            pos = e
        assert pos == end[k]
    non_empty = sum(1 for k in start if end[k] > start[k])
    total = sum(end[k] - start[k] for k in start)
    if min_partitions and non_empty:
        assert len(ranges) >= min(min_partitions, total)
    if max_records:
        assert all(r.size <= max_records for r in ranges)


def test_plan_ranges_skips_new_queues() -> None:
    a, new = QueueKey("T", "a", 0), QueueKey("T", "a", 1)
    assert [(r.queue, r.start, r.end) for r in plan_ranges({a: 0}, {a: 4, new: 9})] == [(a, 0, 4)]
