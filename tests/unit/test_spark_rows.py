"""Rows and Arrow batches of the Spark source; row -> message mapping of the sink."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.client.producer import SelectMessageQueueByHash
from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.codes import MessageConst
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.message import MessageExt, decode_message, encode_message
from aiorocketmq.spark_sink.rows import RowBatchBuilder, message_to_tuple, source_schema
from aiorocketmq.spark_sink.sink_mapping import (
    PROP_BATCH_ID,
    PROP_PARTITION_ID,
    PROP_ROW_INDEX,
    SinkColumns,
    dedup_key,
    row_to_message,
)


def _msg(i: int, tags: str | None = "TagA", keys: str | None = "k1 k2") -> MessageExt:
    props = {"UNIQ_KEY": f"ID{i}", "user": "v"}
    if tags:
        props[MessageConst.PROPERTY_TAGS] = tags
    if keys:
        props[MessageConst.PROPERTY_KEYS] = keys
    return MessageExt("T", f"body{i}".encode(), 0, props, queue_id=3, queue_offset=100 + i,
                      born_timestamp=1_700_000_000_123, store_timestamp=1_700_000_000_456,
                      born_host="10.0.0.1:5555", msg_id=f"ID{i}", reconsume_times=1)


def test_schema_ddl() -> None:
    assert source_schema(False).startswith("topic string, brokerName string, queueId int")
    assert source_schema(False).endswith("reconsumeTimes int")
    assert source_schema(True).endswith("properties map<string,string>")


@pytest.mark.parametrize("include", [False, True])
def test_arrow_batch_matches_tuples(include: bool) -> None:
    msgs = [_msg(i) for i in range(3)] + [_msg(9, tags=None, keys=None)]
    b = RowBatchBuilder("broker-a", include)
    for m in msgs:
        b.add(m)
    batch = b.flush()
    assert b.rows == 0 and batch.num_rows == 4
    rows = batch.to_pylist()
    for m, row in zip(msgs, rows, strict=True):
        tup = message_to_tuple(m, "broker-a", include)
        values = list(row.values())
        assert values[:12] == list(tup[:12])
        if include:
            assert dict(values[12]) == tup[12]
        assert row["brokerName"] == "broker-a" and row["queueOffset"] == m.queue_offset
        assert row["bornTimestamp"] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
        assert row["body"] == m.body and row["tags"] == m.properties.get("TAGS")
        if include:
            assert dict(row["properties"]) == m.properties
    assert rows[3]["tags"] is None and rows[3]["keys"] is None


@given(st.binary(max_size=200), st.text(max_size=20).filter(lambda s: "\x01" not in s
                                                              and "\x02" not in s))
def test_decoded_stored_records_become_rows(body: bytes, tag: str) -> None:
    src = _msg(1, tags=tag or None)
    src.body = body
    msg, _ = decode_message(encode_message(src))
    b = RowBatchBuilder("b", True)
    b.add(msg)
    (row,) = b.flush().to_pylist()
    assert row["body"] == body and row["queueOffset"] == 101
    assert row["tags"] == (msg.properties.get("TAGS"))


def test_sink_columns_validation() -> None:
    cols = SinkColumns.from_schema([("value", "string"), ("tags", "string"),
                                    ("properties", "map<string,string>"), ("queueId", "int")],
                                   topic_option="T")
    assert cols.body == "value" and cols.body_is_string and cols.queue_id and not cols.topic
    for fields, message in [
        ([("body", "binary"), ("value", "binary")], "exactly one"),
        ([("tags", "string")], "exactly one"),
        ([("body", "int")], "binary or string"),
        ([("body", "binary"), ("tags", "int")], "must be string"),
        ([("body", "binary"), ("extra", "string")], "cannot write column"),
        ([("body", "binary"), ("properties", "map<string,int>")], "map<string,string>"),
    ]:
        with pytest.raises(MQClientError, match=message):
            SinkColumns.from_schema(fields, topic_option="T")
    with pytest.raises(MQClientError, match="option topic"):
        SinkColumns.from_schema([("body", "binary")], topic_option=None)


def test_row_to_message_and_lineage() -> None:
    cols = SinkColumns.from_schema([("body", "string"), ("topic", "string"), ("tags", "string"),
                                    ("keys", "string"), ("properties", "map<string,string>"),
                                    ("queueId", "int")], topic_option="Fallback")
    lineage = {PROP_BATCH_ID: "7", PROP_PARTITION_ID: "2"}
    msg, qid = row_to_message({"body": "héllo", "topic": None, "tags": "TagA", "keys": "a b",
                               "properties": {"x": "1", "y": None}, "queueId": 5},
                              cols, default_topic="Fallback", lineage=lineage, row_index=11)
    assert msg.topic == "Fallback" and msg.body == "héllo".encode() and qid == 5
    assert msg.tags == "TagA" and msg.keys == "a b" and msg.properties["x"] == "1"
    assert "y" not in msg.properties and msg.properties[PROP_ROW_INDEX] == "11"
    assert dedup_key(msg.properties) == ("", 7, 2, 11)
    with pytest.raises(MQClientError, match="system key"):
        row_to_message({"body": b"x", "topic": "T", "tags": None, "keys": None,
                        "properties": {"KEYS": "k"}, "queueId": None}, cols,
                       default_topic=None, lineage=lineage, row_index=0)
    with pytest.raises(MQClientError, match="is null"):
        row_to_message({"body": None, "topic": "T", "tags": None, "keys": None,
                        "properties": None, "queueId": None}, cols,
                       default_topic=None, lineage=lineage, row_index=0)
    assert dedup_key({}) is None


def test_delay_level_and_sharding_key_columns() -> None:
    lineage = {PROP_BATCH_ID: "-1", PROP_PARTITION_ID: "0"}
    cols = SinkColumns.from_schema([("body", "binary"), ("delayLevel", "int"),
                                    ("orderId", "string")], topic_option="T",
                                   sharding_key="orderId")
    assert cols.delay_level and cols.sharding_key == "orderId" and not cols.sharding_long
    msg, hint = row_to_message({"body": b"x", "delayLevel": 3, "orderId": "order-7"}, cols,
                               default_topic="T", lineage=lineage, row_index=0)
    assert msg.delay_time_level == 3 and "orderId" not in msg.properties
    # SelectMessageQueueByHash's queue, for any number of queues.
    mqs = [MessageQueue("T", "b", i) for i in range(7)]
    assert mqs[hint % 7] == SelectMessageQueueByHash().select(mqs, msg, "order-7")
    msg, hint = row_to_message({"body": b"x", "delayLevel": None, "orderId": None}, cols,
                               default_topic="T", lineage=lineage, row_index=1)
    assert hint is None and msg.delay_time_level == 0
    with pytest.raises(MQClientError, match="row 2: delayLevel -1 must be >= 0"):
        row_to_message({"body": b"x", "delayLevel": -1, "orderId": "a"}, cols,
                       default_topic="T", lineage=lineage, row_index=2)
    # An int column hashes as a Java Integer (as the producer hashes an int32), a bigint
    # column as a Java Long, whatever its value.
    ints = SinkColumns.from_schema([("body", "binary"), ("id", "int")], topic_option="T",
                                   sharding_key="id")
    longs = SinkColumns.from_schema([("body", "binary"), ("id", "bigint")], topic_option="T",
                                    sharding_key="id")
    for key in (5, -5, 2**31 - 1, -(2**31)):
        _, hint = row_to_message({"body": b"x", "id": key}, ints, default_topic="T",
                                 lineage=lineage, row_index=0)
        assert mqs[hint % 7] == SelectMessageQueueByHash().select(mqs, msg, key)
    for key in (5, -5, 2**40 + 3, -(2**40)):
        _, hint = row_to_message({"body": b"x", "id": key}, longs, default_topic="T",
                                 lineage=lineage, row_index=0)
        assert hint == abs(_java_long_hash(key))
    for fields, key, message in [
        ([("body", "binary")], "nope", "names no column"),
        ([("body", "binary"), ("k", "double")], "k", "must be a string or an integer"),
        ([("body", "binary"), ("k", "string"), ("queueId", "int")], "k", "drop one of them"),
        ([("body", "binary"), ("delayLevel", "string")], None, "delayLevel must be an integer"),
    ]:
        with pytest.raises(MQClientError, match=message):
            SinkColumns.from_schema(fields, topic_option="T", sharding_key=key)


def _java_long_hash(v: int) -> int:
    """``Long.hashCode``, written out the long way."""
    u = v % 2**64
    h = (u ^ (u >> 32)) % 2**32
    return h - 2**32 if h >= 2**31 else h
