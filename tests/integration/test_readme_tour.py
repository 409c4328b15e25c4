"""The README's five-minute tour runs as written.

Every ``$`` command of the tour and its Python block are taken from README.md itself and
run against real servers: the servers are the tour's own ``mqnamesrv`` / ``mqbroker``
commands with port 0 instead of 9876 / 10911 (so a busy port on the machine cannot break
the test), and ``127.0.0.1:9876`` in the other commands becomes that nameserver's address.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.procs import BROKER_READY, NAMESRV_READY, ServerProcess

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def tour() -> tuple[list[str], str]:
    section = README[README.index("## A five-minute tour"):README.index("## What is here")]
    commands = [line.strip()[2:] for line in section.splitlines()
                if line.startswith("    $ ")]
    python_block = section[section.index("```python") + len("```python"):]
    python_block = python_block[:python_block.index("```")]
    return commands, python_block


def localize(command: str, namesrv: str, tmp: Path) -> str:
    return (command.replace(".venv/bin/", f"{BIN}/")
            .replace("127.0.0.1:9876", namesrv)
            .replace("./data/tour", str(tmp / "store"))
            .replace("/tmp/broker-a.conf", str(tmp / "broker-a.conf")))


def run(command: str, timeout: float = 120) -> str:
    proc = subprocess.run(command, shell=True, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"$ {command}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_the_tour_runs_as_written(tmp_path: Path) -> None:
    commands, python_block = tour()
    starts = [c for c in commands if c.endswith("&")]
    assert [c.split()[0] for c in starts] == [".venv/bin/mqnamesrv", ".venv/bin/mqbroker"]
    others = [c for c in commands if not c.endswith("&")]

    namesrv_cmd = starts[0].rstrip("& ").replace("-p 9876", "-p 0").split()
    namesrv = ServerProcess([str(BIN / Path(namesrv_cmd[0]).name), *namesrv_cmd[1:],
                             "--kv-path", str(tmp_path / "kv.json")],
                            NAMESRV_READY, tmp_path / "namesrv.log")
    broker: ServerProcess | None = None
    try:
        namesrv.start()
        addr = namesrv.address
        conf_cmd = others.pop(0)
        assert conf_cmd.startswith("printf ")
        run(localize(conf_cmd, addr, tmp_path).replace("listenPort=10911", "listenPort=0"))
        broker_cmd = localize(starts[1].rstrip("& "), addr, tmp_path).split()
        broker = ServerProcess(broker_cmd, BROKER_READY, tmp_path / "broker.log").start()

        outputs = {}
        python_done = False
        for command in others:
            if not python_done and "clusterList" in command:
                # The tour consumes with the Python block before it inspects the cluster.
                out = run(f"{sys.executable} -c {shlex.quote(python_block.replace('127.0.0.1:9876', addr))}")
                assert "from python" in out and "hello tour" in out, out
                python_done = True
            local = localize(command, addr, tmp_path)
            timeout = 120.0
            if "spark_pipeline" in command:
                timeout = 240.0
                local += f" --checkpoint {tmp_path / 'checkpoint'}"  # a fresh query
            outputs[command] = run(local, timeout)
        assert python_done

        by_name = {re.search(r"(mqadmin \w+|spark_pipeline)", c).group(1): out  # type: ignore[union-attr]
                   for c, out in outputs.items()}
        assert by_name["mqadmin topicStatus"].count("broker-a") == 4  # one line per queue
        assert "broker-a" in by_name["mqadmin clusterList"]
        assert "TourTopic" in by_name["mqadmin consumerProgress"]
        rows = by_name["mqadmin queryMsgByKey"].strip().splitlines()
        assert rows[0].startswith("#Message ID") and len(rows) == 2, rows  # one message has key order-1
        # The job's summary line: rows read (the tour sent 2), batches, messages written.
        summary = re.search(r"spark_pipeline: read (\d+) rows from TourTopic in (\d+) "
                            r"micro-batches, wrote (\d+) messages to PipelineOut",
                            by_name["spark_pipeline"])
        assert summary is not None, by_name["spark_pipeline"]
        read, batches, written = (int(x) for x in summary.groups())
        assert read == 2 and batches >= 1 and written >= 1, summary.group(0)
        # The Spark job published its per-tag counts to PipelineOut.
        published = run(f"{BIN}/mqadmin consumeMessage -n {addr} -t PipelineOut -c 10")
        assert '"tag": "TagA"' in published or '"tag":"TagA"' in published, published
    finally:
        if broker is not None:
            broker.stop()
            print(broker.log_tail(60))
        namesrv.stop()
        print(namesrv.log_tail(30))
