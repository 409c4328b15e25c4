"""The Spark source with ``expressionType=SQL92``: a batch and a streaming read against a broker
run with ``enablePropertyFilter=true`` get exactly the rows whose properties the selector
matches (the broker filters; the connector re-checks no tags)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client.producer import Producer
from aiorocketmq.protocol.message import Message
from tests.procs import namesrv_and_broker

pytestmark = pytest.mark.spark

EXPRESSION = "n >= 3 AND color IN ('red', 'blue') OR TAGS = 'TagZ'"


@pytest.fixture(scope="module")
def filtering_name_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("spark-sql92")
    with namesrv_and_broker(tmp, conf={"enablePropertyFilter": "true"}) as (ns, _):
        yield ns.address


def _send(name_server: str, topic: str) -> set[bytes]:
    """Ten messages; the bodies the expression selects."""
    colors = ["red", "blue", "green"]

    async def run() -> None:
        async with Producer("spark-sql92-producer", name_server) as producer:
            for i in range(10):
                await producer.send(Message(topic, f"m{i}".encode(), tags="TagZ" if i == 9 else "T",
                                            properties={"n": str(i), "color": colors[i % 3]}))

    asyncio.run(run())
    return {f"m{i}".encode() for i in range(10) if (i >= 3 and i % 3 != 2) or i == 9}


def test_batch_and_stream_read_by_sql92(spark: Any, filtering_name_server: str,
                                        tmp_path: Path) -> None:
    topic = "SparkSql92"
    want = _send(filtering_name_server, topic)
    batch = (spark.read.format("rocketmq").option("nameServer", filtering_name_server)
             .option("topic", topic).option("expressionType", "SQL92")
             .option("subExpression", EXPRESSION).load().collect())
    assert sorted(bytes(r.body) for r in batch) == sorted(want)
    stream = (spark.readStream.format("rocketmq").option("nameServer", filtering_name_server)
              .option("topic", topic).option("startingOffsets", "earliest")
              .option("expressionType", "SQL92").option("subExpression", EXPRESSION).load())
    query = (stream.writeStream.format("memory").queryName("sql92_rows")
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    assert query.exception() is None
    rows = spark.sql("SELECT * FROM sql92_rows").collect()
    assert sorted(bytes(r.body) for r in rows) == sorted(want)
