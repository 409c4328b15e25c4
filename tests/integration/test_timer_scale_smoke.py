"""bench/timer_scale.py runs end to end with tiny sizes and prints its table (ours only).

A measuring tool rots when nothing runs it: this starts a nameserver and our broker exactly as
a real run does and checks the output's shape. No figure is asserted, only that every row is
there, no send failed and every timer was still pending after both restarts.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
TIMERS = 300


def test_timer_scale_prints_its_table(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aiorocketmq.bench.timer_scale", "--timers", str(TIMERS),
         "--plain", "200", "--window", "32", "--tmp", str(tmp_path)],
        cwd=str(REPO), capture_output=True, text=True, timeout=580, check=False)
    assert done.returncode == 0, f"exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    out = done.stdout
    table = out[out.index("ours broker"):]
    rows = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in table.splitlines()[1:]
                if line.startswith("  "))
    for key in ("RSS ready", "RSS with the timers pending", "disk timerwheel", "disk timerlog",
                "restart after SIGTERM: ready", "restart after SIGKILL: ready",
                "restart after SIGKILL: first send"):
        assert key in rows, (key, out)
    for key in ("plain sends (200)", f"timer sends ({TIMERS}, 3 days)", "plain sends, timers pending"):
        assert rows[key].endswith(", 0 failed"), (key, out)
    for key in ("pending (timerCongestNum)", "pending after SIGTERM restart", "pending after SIGKILL restart"):
        assert rows[key] == str(TIMERS), (key, out)
