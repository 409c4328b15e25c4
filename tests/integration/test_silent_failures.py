"""What an application that configured no logging sees when something goes wrong.

The library is quiet by default (``test_library_logging.py``), but three failures used to
vanish: an unreachable nameserver surfaced as "No route info of this topic", the words of a
missing topic; a PushConsumer against a dead nameserver started and said nothing; an
exception raised in the application's listener went to a logger nobody had configured.
Each application here is its own process, started outside the repository.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.procs import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

DEAD = "127.0.0.1:1"  # nothing listens there: connections are refused

SEND = '''
import asyncio, sys
from aiorocketmq import Message, Producer
from aiorocketmq.protocol.errors import MQClientError

async def main():
    async with Producer("PG_dead", sys.argv[1]) as producer:
        try:
            await producer.send(Message("SilentT", b"x"))
        except MQClientError as exc:
            print(type(exc).__name__, exc)
            print("cause", type(exc.__cause__).__name__)

asyncio.run(main())
'''

CONSUME = '''
import asyncio, logging, sys
from aiorocketmq import Message, Producer, PushConsumer
from aiorocketmq.client import ConsumeConcurrentlyStatus, ConsumeFromWhere

namesrv, mode = sys.argv[1], sys.argv[2]
if mode == "configured":
    logging.basicConfig(level=logging.WARNING)


async def main():
    calls = 0
    failed = asyncio.Event()

    def listener(msgs, ctx):
        nonlocal calls
        calls += 1
        if calls == 1:
            failed.set()
            raise ZeroDivisionError("the application's bug")
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("CG_silent", namesrv,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("SilentListenerT", "*")
    consumer.register_message_listener(listener)
    if mode == "dead":
        async with consumer:
            await asyncio.sleep(3)  # the route refresh runs again meanwhile: still one line
        return
    async with Producer("PG_silent", namesrv) as producer:
        await producer.send(Message("SilentListenerT", b"boom"))
    async with consumer:
        await asyncio.wait_for(failed.wait(), 60)
        await asyncio.sleep(0.5)

asyncio.run(main())
'''


def run_app(tmp_path: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    app = tmp_path / "app.py"
    app.write_text(code)
    proc = subprocess.run([sys.executable, str(app), *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_an_unreachable_nameserver_is_not_a_missing_topic(tmp_path: Path) -> None:
    proc = run_app(tmp_path, SEND, DEAD)
    out = proc.stdout
    assert "No route info" not in out, out
    assert "MQClientError cannot get the route of topic SilentT from the name server:" in out
    assert DEAD in out and "[Errno 111]" in out, out  # ECONNREFUSED
    assert "cause RemotingConnectError" in out, out
    # Said once on stderr too, although the application configured no logging.
    assert proc.stderr.count("client.instance.namesrv_unreachable") == 1, proc.stderr


def test_a_push_consumer_against_a_dead_nameserver_says_so(tmp_path: Path) -> None:
    proc = run_app(tmp_path, CONSUME, DEAD, "dead")
    lines = [ln for ln in proc.stderr.splitlines() if "namesrv_unreachable" in ln]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("client.instance.namesrv_unreachable namesrv=127.0.0.1:1 ")
    assert "[Errno 111]" in lines[0]  # ECONNREFUSED


def test_a_listener_exception_is_printed_without_logging(tmp_path: Path, namesrv: ServerProcess,
                                                         broker: ServerProcess) -> None:
    proc = run_app(tmp_path, CONSUME, namesrv.address, "unconfigured")
    err = proc.stderr
    assert err.count("client.push_consumer.listener_failed group=CG_silent") == 1, err
    assert "Traceback (most recent call last)" in err
    assert "ZeroDivisionError: the application's bug" in err
    assert proc.stdout == ""


def test_a_configured_application_gets_it_once_through_its_handler(
        tmp_path: Path, namesrv: ServerProcess, broker: ServerProcess) -> None:
    proc = run_app(tmp_path, CONSUME, namesrv.address, "configured")
    err = proc.stderr
    # basicConfig's format, once: not printed a second time by the last-resort handler.
    assert err.count("ERROR:aiorocketmq.client.push_consumer:client.push_consumer.listener_failed") == 1, err
    assert err.count("listener_failed") == 1, err
    assert "ZeroDivisionError: the application's bug" in err
