"""Which Python runs the data source's Spark workers, chosen or checked at ``register``.

Spark starts ``PYSPARK_PYTHON``, else ``python3`` from ``PATH``, for the Python workers that
run a data source (``SparkContext.pythonExec``, read when the context is created; the
``spark.pyspark.python`` conf reaches it only through ``spark-submit``, which sets the
variable). A job run as ``.venv/bin/python job.py`` without it used to have its workers
start the system's ``python3`` and die with ``ModuleNotFoundError: No module named
'aiorocketmq'`` in a 39-line trace from the JVM.

``worker_python(spark)`` wraps the registration (the data source's pickled function
carries the interpreter, pyspark ``_wrap_function``):

* a local master (``local``, ``local[N]``, ``local-cluster[...]``: workers on this
  machine) with no ``PYSPARK_PYTHON``: the data source's workers run ``sys.executable``,
  the interpreter that imported this package; nothing else of the application changes;
* a local master with ``PYSPARK_PYTHON`` set: that interpreter must find ``aiorocketmq``,
  else ``WorkerPythonError``, one line saying what to set;
* any other master: the executors' machines decide, as ever (the container image or the
  cluster's ``PYSPARK_PYTHON``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from aiorocketmq.logs import get_logger

__all__ = ["WorkerPythonError", "worker_python"]

log = get_logger("aiorocketmq.spark")

_DEFAULT_EXEC = "python3"  # pyspark's SparkContext: os.environ.get("PYSPARK_PYTHON", "python3")
_FINDS_US = "import importlib.util, sys; sys.exit(importlib.util.find_spec('aiorocketmq') is None)"


class WorkerPythonError(RuntimeError):
    """Spark's Python workers would run an interpreter that cannot import aiorocketmq."""


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith(("local[", "local-cluster["))


def _finds_aiorocketmq(python: str) -> bool:
    try:
        proc = subprocess.run([python, "-c", _FINDS_US], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


@contextlib.contextmanager
def worker_python(spark: Any) -> Iterator[None]:
    """Within the block, functions registered with ``spark`` run in a Python that has us.

    Raises:
        WorkerPythonError: a local master whose ``PYSPARK_PYTHON`` cannot import aiorocketmq.
    """
    sc = spark.sparkContext
    chosen = sc.pythonExec
    if not _is_local(sc.master):
        yield
        return
    if os.environ.get("PYSPARK_PYTHON") is None and chosen == _DEFAULT_EXEC:
        log.debug("spark.worker_python", python=sys.executable, master=sc.master,
                  reason="PYSPARK_PYTHON unset: the driver's interpreter, not PATH's python3")
        sc.pythonExec = sys.executable
        try:
            yield
        finally:
            sc.pythonExec = chosen
        return
    if chosen != sys.executable and not _finds_aiorocketmq(chosen):
        raise WorkerPythonError(
            f"Spark's Python workers would run {chosen} (PYSPARK_PYTHON), which cannot import "
            f"aiorocketmq: set PYSPARK_PYTHON to a Python that has it (this one is "
            f"{sys.executable}) before the SparkSession starts, or leave it unset")
    yield
