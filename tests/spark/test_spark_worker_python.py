"""A PySpark job run as ``.venv/bin/python job.py``: which Python its workers run.

Spark starts ``PYSPARK_PYTHON``, else ``python3`` from ``PATH``, for the data source's
workers. Without the variable such a job used to die with ``ModuleNotFoundError: No module
named 'aiorocketmq'`` in a 39-line trace. Each job here is its own process with its own
Spark session (local master), and ``PATH`` starts with a ``python3`` that lacks aiorocketmq
(the venv's base interpreter), as on a machine whose system Python is not the venv's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.conftest import produce

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(300)]

JOB = '''
import sys
from pyspark.sql import SparkSession
from aiorocketmq.spark_sink import register

spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
register(spark)
df = (spark.read.format("rocketmq").option("nameServer", sys.argv[1])
      .option("topic", sys.argv[2]).load())
print("rows", df.count(), flush=True)
spark.stop()
'''


def foreign_python3(tmp_path: Path) -> Path:
    """A directory whose ``python3`` is an interpreter without aiorocketmq."""
    base = Path(getattr(sys, "_base_executable", "") or "")
    assert base.is_file() and base != Path(sys.executable)
    probe = subprocess.run([str(base), "-c", "import aiorocketmq"], capture_output=True,
                           timeout=60, cwd=tmp_path)  # not the checkout, where '' finds it
    assert probe.returncode != 0, "the base interpreter must not find aiorocketmq"
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").symlink_to(base)
    return shim


def run_job(tmp_path: Path, name_server: str, topic: str,
            env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    return subprocess.run([sys.executable, str(job), name_server, topic], cwd=tmp_path,
                          capture_output=True, text=True, timeout=240, env=env)


def job_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{foreign_python3(tmp_path)}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def test_a_job_without_pyspark_python_runs_its_workers_here(tmp_path: Path,
                                                           name_server: str) -> None:
    produce(name_server, "SparkWorkerPy", [b"a", b"b", b"c"])
    proc = run_job(tmp_path, name_server, "SparkWorkerPy", job_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rows 3" in proc.stdout, proc.stdout + proc.stderr[-3000:]


def test_a_pyspark_python_without_aiorocketmq_fails_in_one_line(tmp_path: Path,
                                                                name_server: str) -> None:
    env = job_env(tmp_path)
    env["PYSPARK_PYTHON"] = str(Path(env["PATH"].split(os.pathsep)[0]) / "python3")
    proc = run_job(tmp_path, name_server, "SparkWorkerPy2", env)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("aiorocketmq.spark_sink.workers.WorkerPythonError: Spark's Python "
                           f"workers would run {env['PYSPARK_PYTHON']} (PYSPARK_PYTHON), which "
                           "cannot import aiorocketmq: set PYSPARK_PYTHON"), last
    assert sys.executable in last
    assert "ModuleNotFoundError" not in proc.stderr and "py4j" not in proc.stderr, proc.stderr
