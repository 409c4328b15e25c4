"""The connector on a ``local-cluster`` master: executors in JVMs of their own, as on a real
cluster, each with its own Python workers (issue #26's acceptance: the round trip still
passes there).

``local[2]`` runs every task in the driver's JVM, so it cannot catch what only breaks across
processes: options that do not survive being pickled to an executor, a producer or
connection assumed to live in the driver, a module the executors' Python cannot import.
The job runs in a child process because one Python process holds one SparkContext, and the
session fixture's is ``local[2]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(420)]

ROWS = 2000

JOB = textwrap.dedent("""
    import json, sys, time
    from pyspark.sql import SparkSession
    from aiorocketmq.spark_sink import register

    name_server, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
             .appName("aiorocketmq-local-cluster").config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    df = spark.range(0, n, numPartitions=4).selectExpr(
        "cast(id as string) as value", "concat('k', id) as keys", "'TagA' as tags",
        "map('p', cast(id as string)) as properties",
        "timestamp_millis(unix_millis(current_timestamp()) + 1000) as deliverTime")
    (df.write.format("rocketmq").option("nameServer", name_server).option("topic", topic)
       .option("async", "true").mode("append").save())
    deadline = time.monotonic() + 120
    while True:
        rows = (spark.read.format("rocketmq").option("nameServer", name_server)
                .option("topic", topic).option("includeProperties", "true").load().collect())
        if len(rows) >= n or time.monotonic() > deadline:
            break
        time.sleep(1)
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    print("RESULT " + json.dumps({
        "executors": executors,
        "rows": [[bytes(r.body).decode(), r.keys, r.tags, r.properties.get("p"),
                  "TIMER_DELIVER_MS" in r.properties] for r in rows],
    }))
    spark.stop()
""")


def test_round_trip_on_a_local_cluster(name_server: str) -> None:
    topic = "SparkLocalCluster"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, "-c", JOB, name_server, topic, str(ROWS)],
                          capture_output=True, text=True, timeout=400, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.returncode, proc.stdout[-3000:], proc.stderr[-5000:])
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["executors"] == 2
    rows = result["rows"]
    assert sorted(int(body) for body, *_ in rows) == list(range(ROWS))
    for body, keys, tags, prop, timed in rows:
        assert (keys, tags, prop, timed) == (f"k{body}", "TagA", body, True)
