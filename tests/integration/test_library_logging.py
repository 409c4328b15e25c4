"""The client is a quiet library (issue #11): it logs through stdlib ``logging`` only.

A small application, run as its own process against real servers, sends to a topic the
broker creates on first send (TBW102) and consumes it with a push consumer. With no logging
configured it prints nothing at all; with ``logging.basicConfig(level=logging.INFO)`` our
events arrive as stdlib records under ``aiorocketmq.*`` loggers, and none of this ordinary
run is a warning.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.procs import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

APP = '''
import asyncio, json, logging, sys

from aiorocketmq import Message, Producer, PushConsumer
from aiorocketmq.client import ConsumeConcurrentlyStatus, ConsumeFromWhere

namesrv, mode = sys.argv[1], sys.argv[2]
records = []
if mode == "info":
    logging.basicConfig(level=logging.INFO)

    class Keep(logging.Handler):
        def emit(self, record):
            records.append([record.name, record.levelname, record.msg.get("event")
                            if isinstance(record.msg, dict) else record.getMessage()])

    logging.getLogger().addHandler(Keep())


async def main():
    got = asyncio.Event()
    bodies = set()

    def listener(msgs, ctx):
        bodies.update(m.body for m in msgs)
        if len(bodies) == 5:
            got.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async with Producer("PG_quiet", namesrv) as producer:
        for i in range(5):
            await producer.send(Message("QuietLibraryT", b"m%d" % i))
    consumer = PushConsumer("CG_quiet", namesrv,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("QuietLibraryT", "*")
    consumer.register_message_listener(listener)
    async with consumer:
        await asyncio.wait_for(got.wait(), 60)


asyncio.run(main())
if mode == "info":
    print(json.dumps(records))
'''


def run_app(tmp_path: Path, namesrv: ServerProcess, mode: str) -> subprocess.CompletedProcess[str]:
    app = tmp_path / "app.py"
    app.write_text(APP)
    # cwd is not the repository: the application imports the installed package.
    proc = subprocess.run([sys.executable, str(app), namesrv.address, mode], cwd=tmp_path,
                          capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_unconfigured_application_sees_no_output(tmp_path: Path, namesrv: ServerProcess,
                                                 broker: ServerProcess) -> None:
    proc = run_app(tmp_path, namesrv, "none")
    assert proc.stdout == ""
    assert proc.stderr == ""


def test_configured_logging_receives_our_records(tmp_path: Path, namesrv: ServerProcess,
                                                 broker: ServerProcess) -> None:
    proc = run_app(tmp_path, namesrv, "info")
    records = json.loads(proc.stdout)
    ours = [r for r in records if r[0].startswith("aiorocketmq.")]
    events = {r[2] for r in ours}
    assert ["aiorocketmq.client.instance", "INFO", "client.instance.started"] in ours
    assert {"client.producer.started", "client.push_consumer.started",
            "client.instance.shutdown"} <= events
    # The first send's missing route (the broker creates the topic) is debug, not noise.
    assert [r for r in ours if r[1] not in ("DEBUG", "INFO")] == []
    # basicConfig's handler printed them as "event key=value ...".
    assert "INFO:aiorocketmq.client.instance:client.instance.started client_id=" in proc.stderr
