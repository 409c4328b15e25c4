"""A Structured Streaming job: count messages per tag on one topic, publish the counts to another.

Reads ``--source-topic`` with ``format("rocketmq")``, counts messages per tag in
one-minute windows of store time, and writes each updated count as a message
(``body`` = JSON, ``tags`` = the tag, ``keys`` = window start) to ``--sink-topic``.
The query restarts from ``--checkpoint`` exactly where it stopped; the sink is at least
once, with ``pipeline.batchId`` and the sink's ``spark.partitionId`` / ``spark.rowIndex``
on every message for deduplication downstream.

Run: ``python -m examples.spark_pipeline --name-server 127.0.0.1:9876`` (Spark in local
mode), or through ``spark-submit --master spark://HOST:7077 examples/spark_pipeline.py ...``
on a standalone cluster, as docker-compose.yml's ``spark-driver`` service does (the package
must be installed where the executors run: the compose file's workers use the same image).
The master is ``--master`` if given, else spark-submit's, else ``$SPARK_MASTER``, else
``local[2]``.

Before Spark starts, the source topic is looked up on the nameserver: a missing topic or
an unreachable nameserver is one line on stderr and exit code 1 (not a JVM stack trace).
When the query ends (``--available-now`` done, Ctrl-C, SIGTERM) one summary line goes to
stdout: rows read, micro-batches, messages written.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from typing import Any


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spark_pipeline", description=__doc__.splitlines()[0])
    p.add_argument("--name-server", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
                   help="name server address list, host:port;host:port (default: $NAMESRV_ADDR, "
                        "else 127.0.0.1:9876)")
    p.add_argument("--source-topic", default="PipelineIn",
                   help="topic to read and count per tag (default PipelineIn); it must exist")
    p.add_argument("--sink-topic", default="PipelineOut",
                   help="topic the per-tag counts are written to (default PipelineOut)")
    p.add_argument("--checkpoint", default="/tmp/spark-pipeline-checkpoint",
                   help="Spark checkpoint directory: a rerun resumes where the last one "
                        "stopped (default /tmp/spark-pipeline-checkpoint)")
    p.add_argument("--master", default=None,
                   help="Spark master URL (default: spark-submit's --master, else "
                        "$SPARK_MASTER, else local[2])")
    p.add_argument("--max-offsets-per-trigger", default="10000",
                   help="messages read per micro-batch at most (default 10000)")
    p.add_argument("--available-now", action="store_true",
                   help="process what is there at start, then stop")
    return p


def check_source_topic(name_server: str, topic: str) -> str | None:
    """Why the job cannot read ``topic`` (one line), or None when its route exists."""
    from aiorocketmq.client.admin.api import MQAdmin
    from aiorocketmq.protocol.errors import RocketMQError, TopicNotExistError

    async def lookup() -> None:
        async with MQAdmin(name_server) as admin:
            await admin.topic_route(topic)

    try:
        asyncio.run(lookup())
    except TopicNotExistError:
        return (f"source topic '{topic}' does not exist on name server {name_server} "
                f"(create it: mqadmin updateTopic -n {name_server} -c DefaultCluster -t {topic})")
    except (RocketMQError, OSError, TimeoutError) as exc:
        return f"cannot look up topic '{topic}' on name server {name_server}: {exc}"
    return None


class Tally:
    """Rows read per micro-batch (from query progress) and messages written (by ``publish``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows_read: dict[int, int] = {}
        self.written = 0
        self.batches: set[int] = set()

    def progress(self, batch_id: int, rows: int) -> None:
        with self.lock:
            self.rows_read[batch_id] = rows

    def published(self, batch_id: int, rows: int) -> None:
        with self.lock:
            self.batches.add(batch_id)
            self.written += rows

    def summary(self, args: argparse.Namespace, query: Any) -> str:
        for p in query.recentProgress if query is not None else ():
            self.progress(int(p["batchId"]), int(p["numInputRows"]))
        with self.lock:
            read = sum(self.rows_read.values())
            batches = len(set(self.rows_read) | self.batches)
            return (f"spark_pipeline: read {read} rows from {args.source_topic} in {batches} "
                    f"micro-batches, wrote {self.written} messages to {args.sink_topic}")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = check_source_topic(args.name_server, args.source_topic)
    if problem is not None:
        print(f"spark_pipeline: {problem}", file=sys.stderr)
        return 1
    # Spark's Python workers start `python3` from PATH unless told otherwise.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.errors import StreamingQueryException
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StreamingQueryListener

    from aiorocketmq.spark_sink import register

    builder = (SparkSession.builder.appName("rocketmq-pipeline")
               .config("spark.sql.shuffle.partitions", "4"))
    # spark-submit starts the JVM itself and hands it over in PYSPARK_GATEWAY_PORT
    # (pyspark/java_gateway.py, launch_gateway). builder.master() would override the master
    # it was given: set one only when asked to, or under a plain `python -m` run.
    if args.master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(args.master or os.environ.get("SPARK_MASTER", "local[2]"))
    spark = builder.getOrCreate()
    register(spark)
    tally = Tally()

    class Progress(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            tally.progress(event.progress.batchId, event.progress.numInputRows)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    spark.streams.addListener(Progress())

    messages = (spark.readStream.format("rocketmq")
                .option("nameServer", args.name_server)
                .option("topic", args.source_topic)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
                .load())
    counts = (messages
              .withWatermark("storeTimestamp", "2 minutes")
              .groupBy(F.window("storeTimestamp", "1 minute"), F.coalesce("tags", F.lit("")).alias("tag"))
              .count())
    out = counts.select(
        F.to_json(F.struct(F.col("window.start").alias("windowStart"), "tag", "count")).alias("body"),
        F.when(F.col("tag") != "", F.col("tag")).alias("tags"),
        F.date_format("window.start", "yyyyMMddHHmm").alias("keys"),
    )
    def publish(batch: Any, batch_id: int) -> None:
        # Updated window counts change between micro-batches, so the query runs in update
        # mode; Spark's Python data-source sinks take appends only, hence foreachBatch with
        # the batch sink. The micro-batch id travels as a property for downstream dedup.
        batch = batch.persist()
        try:
            (batch.withColumn("properties",
                              F.create_map(F.lit("pipeline.batchId"), F.lit(str(batch_id))))
             .write.format("rocketmq")
             .option("nameServer", args.name_server)
             .option("topic", args.sink_topic)
             .option("async", "true")
             .mode("append")
             .save())
            tally.published(batch_id, batch.count())
        finally:
            batch.unpersist()

    writer = (out.writeStream.outputMode("update")
              .foreachBatch(publish)
              .option("checkpointLocation", args.checkpoint))
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    # SIGTERM (docker stop) ends the query like Ctrl-C: stop, summarise, exit.
    signal.signal(signal.SIGTERM, _interrupt)
    code = 0
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    except StreamingQueryException as exc:
        first = (exc.getMessage() if hasattr(exc, "getMessage") else str(exc)).strip()
        print(f"spark_pipeline: the query failed: {first.splitlines()[0] if first else exc!r}",
              file=sys.stderr)
        code = 1
    print(tally.summary(args, query), flush=True)
    spark.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
