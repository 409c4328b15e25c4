"""bodyFormat / bodySchema: the sink packs columns into msgpack or JSON bodies, the source
decodes them back into typed columns, in a real local Spark session against real servers."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest

from aiorocketmq.protocol.body_codec import CONTENT_TYPE_PROPERTY
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.message import Message
from aiorocketmq.spark_sink.options import parse_sink_options, parse_source_options
from tests.spark.conftest import produce

pytestmark = pytest.mark.spark

DDL = ("id long, name string, amount double, items array<struct<sku:string,qty:int>>, "
       "attrs map<string,bigint>, at timestamp, day date, price decimal(10,2), raw binary, "
       "matrix array<array<int>>")
ROWS: list[tuple[Any, ...]] = [
    (1, "first ✓", 12.5, [{"sku": "a", "qty": 1}, {"sku": "b", "qty": None}],
     {"x": 1, "y": None}, datetime(2024, 1, 2, 3, 4, 5, 678901), date(2024, 2, 29),
     Decimal("1234.50"), b"\x00\xff", [[1, 2], [], [None]], "TagA"),
    (2, None, None, [], {}, None, None, None, None, None, "TagB"),
    (3, "", -0.25, None, None, datetime(1999, 12, 31, 23, 59, 59), date(1970, 1, 1),
     Decimal("-0.01"), b"", [[-(2**31)]], None),
]


def read_back(spark: Any, name_server: str, topic: str, fmt: str) -> dict[Any, Any]:
    df = (spark.read.format("rocketmq").option("nameServer", name_server).option("topic", topic)
          .option("bodyFormat", fmt).option("bodySchema", DDL)
          .option("includeProperties", "true").load())
    assert df.columns[-10:] == ["id", "name", "amount", "items", "attrs", "at", "day", "price",
                                "raw", "matrix"]
    return {r.id: r for r in df.collect()}


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_sink_packs_rows_and_source_decodes_them_to_typed_columns(
        spark: Any, name_server: str, fmt: str) -> None:
    topic = f"SparkBody_{fmt}"
    df = spark.createDataFrame(ROWS, DDL + ", tags string").repartition(2)
    (df.write.format("rocketmq").option("nameServer", name_server).option("topic", topic)
     .option("bodyFormat", fmt).mode("append").save())
    # A message that is not the format: its bodySchema columns are null, its body is kept.
    produce(name_server, topic, [b"\xc1 not a body {"], tags="Bad")
    back = read_back(spark, name_server, topic, fmt)

    bad = back.pop(None)
    assert bad.tags == "Bad" and bytes(bad.body) == b"\xc1 not a body {"
    assert all(bad[c] is None for c in ("name", "amount", "items", "attrs", "matrix"))
    assert sorted(back) == [1, 2, 3]
    for row in ROWS:
        got = back[row[0]]
        assert got.properties[CONTENT_TYPE_PROPERTY] == f"application/{fmt}"
        assert got.tags == row[-1]
        items = None if got["items"] is None else [i.asDict() for i in got["items"]]
        raw = None if got.raw is None else bytes(got.raw)
        assert (got.id, got.name, got.amount, items, got.attrs, got.at, got.day, got.price,
                raw, got.matrix) == row[:-1]
        # What the sink wrote is what the client's decode() sees, too.
        body = Message(topic, bytes(got.body), properties=dict(got.properties)).decode()
        assert body["id"] == row[0] and "tags" not in body


def test_body_options_are_checked_before_anything_runs() -> None:
    base = {"nameServer": "127.0.0.1:9876", "topic": "T"}
    with pytest.raises(MQClientError, match="bodyFormat=msgpack needs the option bodySchema"):
        parse_source_options({**base, "bodyFormat": "msgpack"}, streaming=True)
    with pytest.raises(MQClientError, match="bodySchema needs the option bodyFormat"):
        parse_source_options({**base, "bodySchema": "id long"}, streaming=True)
    with pytest.raises(MQClientError, match="bodyFormat='xml' must be one of raw, msgpack, json"):
        parse_sink_options({**base, "bodyFormat": "xml"})
    opts = parse_source_options({**base, "BODYFORMAT": "JSON", "bodySchema": "id long"},
                                streaming=False)
    assert (opts.body_format, opts.body_schema) == ("json", "id long")


def test_sink_refuses_what_it_cannot_pack(spark: Any, name_server: str) -> None:
    writer = (spark.createDataFrame([(b"x", 1)], "body binary, id long").write
              .format("rocketmq").option("nameServer", name_server).option("topic", "T")
              .option("bodyFormat", "msgpack").mode("append"))
    with pytest.raises(Exception, match="drop the column\\(s\\) body or use bodyFormat=raw"):
        writer.save()
    clash = (spark.read.format("rocketmq").option("nameServer", name_server).option("topic", "T")
             .option("bodyFormat", "json").option("bodySchema", "msgId string").load())
    with pytest.raises(Exception, match="bodySchema field 'msgId' repeats a column name"):
        clash.collect()
