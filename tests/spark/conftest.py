"""Fixtures for the Spark connector tests: one local[2] Spark session and one nameserver +
broker pair per test session (real processes on 127.0.0.1), and a producer helper."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from aiorocketmq.client.producer import Producer
from aiorocketmq.protocol.message import Message
from tests.procs import ServerProcess, broker_process, namesrv_process

# Spark's Python workers must run this interpreter (docs/DESIGN.md, Spark source and sink).
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp = tmp_path_factory.mktemp("rmq")
    ns = namesrv_process(tmp).start()
    broker = broker_process(tmp, ns.address)
    try:
        broker.start()
        yield ns, broker
    finally:
        broker.stop()
        ns.stop()
        print(f"---- {broker.log_path} ----\n{broker.log_tail(60)}")


@pytest.fixture(scope="session")
def name_server(servers: tuple[ServerProcess, ServerProcess]) -> str:
    return servers[0].address


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    from aiorocketmq.spark_sink import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("aiorocketmq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


def produce(name_server: str, topic: str, bodies: Sequence[bytes], *, tags: str | None = None,
            keys_prefix: str | None = None, group: str = "spark-test-producer") -> None:
    """Send ``bodies`` to ``topic`` and wait for every acknowledgement."""

    async def run() -> None:
        producer = Producer(group, name_server)
        await producer.start()
        try:
            for i, body in enumerate(bodies):
                keys = f"{keys_prefix}{i}" if keys_prefix else None
                await producer.send(Message(topic, body, tags=tags, keys=keys))
        finally:
            await producer.shutdown()

    asyncio.run(run())


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"
