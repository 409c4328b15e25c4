"""Rows/s of the rocketmq Spark source into a no-op sink, beside a trivial in-memory
Python data source producing rows of the same shape (the ceiling of the Python Data Source
API; until the C record decoder its strings were shorter: "T", "ID", "127.0.0.1:1"),
and of the rocketmq sink beside our Producer's batch sends of as many messages.

Starts a nameserver and a broker on 127.0.0.1 (or uses ``--name-server``), produces
``--messages`` bodies of ``--body-size`` bytes with the client's Producer (batch sends),
then times ``spark.read.format(...).load().write.format("noop")`` for both sources on a
``local[2]`` session, twice each, alternating, and ``df.write.format("rocketmq")`` of as
many rows (``async=true``; ``--sink-messages 0`` skips it) beside our Producer's batch sends,
``--runs`` times each, alternating. Prints one line per run and
the source's share of the in-memory source's rows/s (median of the runs' ratios, and best
runs). Each run also prints the CPU seconds it took in the broker (when the bench started
it), the Spark JVM and its Python workers: on a shared two-core machine the wall-clock
figures swing with other load, the CPU per row much less.

``--max-transfer-count`` sets the broker's ``maxTransferCountOnMessageInMemory`` (stock
default 32 records per pull; a bulk reader gains from more).

Run: ``python -m aiorocketmq.bench.spark_source_bench --messages 1000000``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _produce(name_server: str, topic: str, n: int, size: int, batch: int) -> float:
    from aiorocketmq.client.producer import Producer
    from aiorocketmq.protocol.message import Message

    async def run() -> None:
        producer = Producer("bench-spark-producer", name_server)
        await producer.start()
        try:
            sent = 0
            pad = b"x" * size
            while sent < n:
                k = min(batch, n - sent)
                msgs = [Message(topic, (b"%012d" % (sent + i)) + pad[12:]) for i in range(k)]
                await producer.send(msgs)
                sent += k
        finally:
            await producer.shutdown()

    t0 = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - t0


def _memory_source(n: int, size: int, partitions: int, topic: str) -> Any:
    """The ceiling: a Python data source yielding Arrow batches of rows shaped as the
    rocketmq source's (same topic, a 32-character msgId, a host with a 5-digit port,
    ``size``-byte bodies), so that the JVM side converts as many bytes per row."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from aiorocketmq.spark_sink.rows import arrow_schema, source_schema

    class Part(InputPartition):
        def __init__(self, start: int, end: int) -> None:
            self.start, self.end = start, end

    class Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            step = -(-n // partitions)
            return [Part(i, min(i + step, n)) for i in range(0, n, step)]

        def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
            schema = arrow_schema(False)
            body = b"x" * size
            for s in range(partition.start, partition.end, 4096):
                e = min(s + 4096, partition.end)
                k = e - s
                cols = [[topic] * k, ["broker-a"] * k, [0] * k, list(range(s, e)),
                        ["7F00000100002A9F0000000000004F9C"] * k, [None] * k, [None] * k,
                        [body] * k, [0] * k, [0] * k, ["127.0.0.1:50192"] * k, [0] * k]
                yield pa.RecordBatch.from_arrays(
                    [pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)],
                    schema=schema)

    class Memory(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_memory"

        def schema(self) -> str:
            return source_schema(False)

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader()

    return Memory


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its reaped children (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _is_java(pid: int) -> bool:
    """Whether ``pid`` runs java (not the nameserver or broker this bench started)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"java" in f.read().split(b"\0")[0]
    except OSError:
        return False


def _spark_pids() -> tuple[list[int], list[int]]:
    """The Spark JVM(s) this process started, and every process below them (the Python
    daemons and workers); empty where /proc is not there."""
    parent: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return [], []
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parent[int(name)] = int(f.read().rpartition(")")[2].split()[1])
            except OSError:
                continue
    jvms = [pid for pid, pp in parent.items() if pp == os.getpid() and _is_java(pid)]
    below: list[int] = []
    todo = list(jvms)
    while todo:
        kids = [pid for pid, pp in parent.items() if pp in todo]
        below += kids
        todo = kids
    return jvms, below


class _CpuMeter:
    """CPU seconds of the broker, the Spark JVM and its Python workers over one run."""

    def __init__(self, broker_pid: int | None) -> None:
        self.broker_pid = broker_pid

    def sample(self) -> dict[str, float]:
        jvms, workers = _spark_pids()
        out = {"jvm": sum(_cpu_seconds(p) for p in jvms),
               "python": sum(_cpu_seconds(p) for p in workers)}
        if self.broker_pid is not None:
            out["broker"] = _cpu_seconds(self.broker_pid)
        return out

    @staticmethod
    def text(before: dict[str, float], after: dict[str, float]) -> str:
        return ", ".join(f"{k} {after[k] - before.get(k, 0.0):.2f}" for k in after)


def _time_noop(df: Any) -> float:
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def _time_sink(spark: Any, name_server: str, topic: str, n: int, size: int) -> float:
    df = spark.range(0, n, numPartitions=2).selectExpr(
        f"cast(lpad(cast(id as string), {size}, 'x') as binary) as body")
    t0 = time.perf_counter()
    (df.write.format("rocketmq").option("nameServer", name_server).option("topic", topic)
     .option("async", "true").mode("append").save())
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spark_source_bench")
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--body-size", type=int, default=128)
    p.add_argument("--name-server", default=None, help="use running servers instead")
    p.add_argument("--topic", default="SparkBench")
    p.add_argument("--pull-batch-size", default="32")
    p.add_argument("--skip-produce", action="store_true")
    p.add_argument("--sink-messages", type=int, default=None,
                   help="rows written through the sink (default --messages; 0: no sink run)")
    p.add_argument("--max-transfer-count", type=int, default=32,
                   help="broker maxTransferCountOnMessageInMemory (stock default 32)")
    p.add_argument("--runs", type=int, default=2, help="timed runs per source, alternating")
    args = p.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    procs = []
    broker_pid: int | None = None
    name_server = args.name_server
    if name_server is None:
        from aiorocketmq.bench._procs import broker_process, namesrv_process

        tmp = Path(tempfile.mkdtemp(prefix="spark-bench-"))
        ns = namesrv_process(tmp).start()
        procs.append(ns)
        broker = broker_process(tmp, ns.address, conf={
            "mappedFileSizeCommitLog": str(256 * 1024 * 1024),
            "mappedFileSizeConsumeQueue": str(20 * 300_000),
            "maxTransferCountOnMessageInMemory": str(args.max_transfer_count),
            "maxTransferBytesOnMessageInMemory": str(max(256 * 1024,
                                                         args.max_transfer_count * 1024))})
        procs.append(broker.start())
        broker_pid = broker.pid
        name_server = ns.address
    try:
        if not args.skip_produce:
            secs = _produce(name_server, args.topic, args.messages, args.body_size, 128)
            print(f"produced {args.messages} x {args.body_size} B in {secs:.1f} s "
                  f"({args.messages / secs:,.0f} msg/s)")

        from pyspark.sql import SparkSession

        from aiorocketmq.spark_sink import register

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        spark.dataSource.register(_memory_source(args.messages, args.body_size, 4, args.topic))
        rmq = (spark.read.format("rocketmq").option("nameServer", name_server)
               .option("topic", args.topic).option("pullBatchSize", args.pull_batch_size)
               .option("minPartitions", "4").load())
        mem = spark.read.format("bench_memory").load()
        count = rmq.count()  # warms the workers up, and the count is the row count
        mem.count()
        meter = _CpuMeter(broker_pid)
        rates: dict[str, list[float]] = {"rocketmq": [], "memory": []}
        for run in range(args.runs):
            for name, df, n in (("rocketmq", rmq, count), ("memory", mem, args.messages)):
                before = meter.sample()
                secs = _time_noop(df)
                rates[name].append(n / secs)
                print(f"run {run} {name:<8} source: {n:>9} rows in {secs:6.2f} s = "
                      f"{n / secs:>10,.0f} rows/s (CPU s: "
                      f"{meter.text(before, meter.sample())})", flush=True)
        ratios = [r / m for r, m in zip(rates["rocketmq"], rates["memory"], strict=True)]
        print(f"rocketmq source at {100 * statistics.median(ratios):.1f}% of the in-memory "
              f"source (median of {args.runs} runs' ratios; best runs: "
              f"{100 * max(rates['rocketmq']) / max(rates['memory']):.1f}%)")
        sink_n = args.messages if args.sink_messages is None else args.sink_messages
        sink_rates: list[float] = []
        for run in range(args.runs if sink_n else 0):
            before = meter.sample()
            secs = _time_sink(spark, name_server, args.topic + "Sink", sink_n, args.body_size)
            sink_rates.append(sink_n / secs)
            print(f"run {run} rocketmq sink : {sink_n:>9} rows in {secs:6.2f} s = "
                  f"{sink_n / secs:>10,.0f} rows/s (async=true; CPU s: "
                  f"{meter.text(before, meter.sample())})", flush=True)
            before = meter.sample()
            cpu0 = time.process_time()
            secs = _produce(name_server, args.topic + "Sink", sink_n, args.body_size, 128)
            print(f"run {run} Producer batch: {sink_n:>9} msgs in {secs:6.2f} s = "
                  f"{sink_n / secs:>10,.0f} msg/s (send(list of 128); CPU s: producer "
                  f"{time.process_time() - cpu0:.2f}, {meter.text(before, meter.sample())})",
                  flush=True)
            sink_rates[-1] /= sink_n / secs
        if sink_rates:
            print(f"rocketmq sink at {statistics.median(sink_rates):.2f}x our Producer's batch "
                  f"sends (median of {len(sink_rates)} runs' ratios)")
        spark.stop()
    finally:
        for proc in reversed(procs):
            proc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
