"""The examples run as written (``make run`` runs examples.quickstart)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_quickstart(data_dir: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "examples.quickstart", "--data-dir", str(data_dir)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_quickstart_produces_and_consumes_then_resumes(tmp_path: Path) -> None:
    first = run_quickstart(tmp_path)
    assert "done: produced 9 messages and consumed 9" in first
    assert first.count("SEND_OK") == 5  # 4 sync + 1 async; oneway has no result
    ordered = re.findall(r"sent order \w+\s+queue=(\d+)", first)
    assert len(ordered) == 3 and len(set(ordered)) == 1  # one key, one queue
    consumed_bodies = re.findall(r"body='([^']*)'", first)
    assert sorted(b for b in consumed_bodies if b.startswith("order-42")) == [
        "order-42 created", "order-42 paid", "order-42 shipped"]

    # Same store again: the group resumes after what it consumed, so it sees only the new 9.
    second = run_quickstart(tmp_path)
    assert "done: produced 9 messages and consumed 9" in second
    offsets = [int(x) for x in re.findall(r"consumed\s+queue=\d+ offset=(\d+)", second)]
    assert len(offsets) == 9 and max(offsets) >= 1


def test_spark_pipeline_missing_source_topic_is_one_line(tmp_path: Path) -> None:
    # It used to die with a 141-line JVM/py4j trace once Spark had started; now the topic
    # is looked up first (no Spark needed for this test).
    from tests.procs import namesrv_process

    ns = namesrv_process(tmp_path).start()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "examples.spark_pipeline", "--name-server", ns.address,
             "--source-topic", "NoSuchPipelineIn", "--available-now",
             "--checkpoint", str(tmp_path / "ckpt")],
            cwd=REPO, capture_output=True, text=True, timeout=120)
    finally:
        ns.stop()
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "NoSuchPipelineIn" in proc.stderr and "mqadmin updateTopic" in proc.stderr


def test_spark_pipeline_help_describes_every_option() -> None:
    from examples.spark_pipeline import build_parser

    for action in build_parser()._actions:
        assert action.help, action.option_strings
