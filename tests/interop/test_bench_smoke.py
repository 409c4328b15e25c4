"""bench/compare.py and bench/scale.py run end to end with tiny sizes and print their tables.

Measuring tools rot when nothing runs them: these start the stock 4.9.7 servers and ours,
exactly as a real run does, and check the output's shape. No figure is asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.stock import JavaEnv

REPO = Path(__file__).resolve().parents[2]


def _run(*argv: str, timeout: float) -> str:
    done = subprocess.run([sys.executable, "-m", *argv], cwd=str(REPO), capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.timeout(600)
def test_compare_prints_its_table(stock_java: JavaEnv) -> None:
    out = _run("aiorocketmq.bench.compare", "--messages", "300", "--backlog", "300", "--runs", "1",
               timeout=580)
    table = out[out.index("scenario client broker"):]
    assert "serialize=ROCKETMQ" in out
    for scenario in ("sync", "async", "batch", "consume"):
        for client in ("stock", "ours"):
            for broker in ("stock", "ours"):
                assert any(line.split()[:3] == [scenario, client, broker]
                           for line in table.splitlines()), (scenario, client, broker, out)
    assert "ours-on-ours / stock-on-stock" in out
    assert "load average" in out


@pytest.mark.timeout(600)
def test_scale_prints_its_tables(stock_java: JavaEnv) -> None:
    out = _run("aiorocketmq.bench.scale", "--topics", "50", "--lookup-seconds", "0.5",
               "--messages", "500", "--connections", "20", "--idle-seconds", "1",
               "--members", "2", "--queues", "4", timeout=580)
    for title in ("(a) topics", "(b) store of 500", "(c) idle clients", "(d) one group of 2"):
        assert title in out, out
    assert "timeout" not in out.split("(d) one group")[-1], out
