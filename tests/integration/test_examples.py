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
