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
"""

from __future__ import annotations

import argparse
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spark_pipeline", description=__doc__.splitlines()[0])
    p.add_argument("--name-server", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"))
    p.add_argument("--source-topic", default="PipelineIn")
    p.add_argument("--sink-topic", default="PipelineOut")
    p.add_argument("--checkpoint", default="/tmp/spark-pipeline-checkpoint")
    p.add_argument("--master", default=None,
                   help="Spark master URL (default: spark-submit's --master, else "
                        "$SPARK_MASTER, else local[2])")
    p.add_argument("--max-offsets-per-trigger", default="10000")
    p.add_argument("--available-now", action="store_true",
                   help="process what is there at start, then stop")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Spark's Python workers start `python3` from PATH unless told otherwise.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

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
    def publish(batch, batch_id: int) -> None:
        # Updated window counts change between micro-batches, so the query runs in update
        # mode; Spark's Python data-source sinks take appends only, hence foreachBatch with
        # the batch sink. The micro-batch id travels as a property for downstream dedup.
        (batch.withColumn("properties",
                          F.create_map(F.lit("pipeline.batchId"), F.lit(str(batch_id))))
         .write.format("rocketmq")
         .option("nameServer", args.name_server)
         .option("topic", args.sink_topic)
         .option("async", "true")
         .mode("append")
         .save())

    writer = (out.writeStream.outputMode("update")
              .foreachBatch(publish)
              .option("checkpointLocation", args.checkpoint))
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
