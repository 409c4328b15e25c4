"""Pending timers per topic on a real ``mqbroker``: GET_TIMER_METRICS (61, stock 5.x), the
runtime info's ``timer*`` keys and ``mqadmin timerMetrics``.

Timer messages of two topics, some due in 2 s and some in an hour: the counts are each
topic's timers still waiting, go down as they are delivered, and come back after a graceful
restart (``config/timermetrics``). Every wait is a condition under a deadline.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client import Message, Producer
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.errors import MQBrokerError
from tests.procs import ServerProcess, broker_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

Factory = Callable[[ServerProcess], ServerProcess]
CONF = {"mappedFileSizeTimerLog": str(1024 * 1024), "defaultTopicQueueNums": "4"}


async def until(check: Callable[[], Coroutine[Any, Any, Any]], what: str, within: float = 60.0) -> Any:
    """``await check()`` until it returns something true (deadline ``within`` s)."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what}: not within {within}s (last {last!r})")


async def mqadmin(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiorocketmq.client.admin.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_pending_timers_per_topic(tmp_path: Path, namesrv: ServerProcess,
                                        server_factory: Factory) -> None:
    def start() -> ServerProcess:
        return server_factory(broker_process(tmp_path, namesrv.address, name="broker-tm", conf=CONF))

    broker = start()
    async with MQAdmin(namesrv.address) as admin:
        assert await admin.timer_metrics(broker.address) == {}
        info = await admin.broker_runtime_info(broker.address)
        assert {k: info[k] for k in ("timerOffsetBehind", "timerCongestNum")} == \
            {"timerOffsetBehind": "0", "timerCongestNum": "0"}
        async with Producer("PG_timer_metrics", namesrv.address) as producer:
            for topic, soon, later in (("TimerMA", 2, 3), ("TimerMB", 0, 2)):
                await producer.send(Message(topic, b"create"))
                for i in range(soon + later):
                    msg = Message(topic, f"{topic}-{i}".encode())
                    msg.delay_sec = 2 if i < soon else 3600
                    await producer.send(msg)

        async def counts() -> dict[str, int]:
            return {t: c for t, (c, _ts) in (await admin.timer_metrics(broker.address)).items()}

        async def counts_are(expected: dict[str, int]) -> bool:
            return await counts() == expected

        # The two due in 2 s are delivered; each of the seven counted +1 when enqueued, the two
        # -1 when put back (the DataVersion moves on with every change: 9).
        await until(lambda: counts_are({"TimerMA": 3, "TimerMB": 2}), "the two due ones delivered")
        raw = await admin.invoke(broker.address, RequestCode.GET_TIMER_METRICS)
        body = json.loads(raw.body or b"{}")
        assert body["dataVersion"]["counter"] == 9, body
        assert set(body["timingCount"]["TimerMA"]) == {"count", "timeStamp"}, body
        info = await admin.broker_runtime_info(broker.address)
        assert info["timerCongestNum"] == "5" and info["timerOffsetBehind"] == "0", info
        assert float(info["timerEnqueueTps"]) >= 0 and int(info["timerReadBehind"]) >= 0

        code, out, err = await mqadmin("timerMetrics", "-n", namesrv.address, "-b", broker.address)
        assert code == 0, err
        rows = {line.split()[1]: line.split()[2] for line in out.splitlines()[1:]
                if line.split()[1].startswith("TimerM")}
        assert rows == {"TimerMA": "3", "TimerMB": "2"}, out
        assert any("#Timer(Progress)" in line and line.rstrip().endswith(")") for line in out.splitlines()), out
        code, out, err = await mqadmin("timerMetrics", "-n", namesrv.address, "-c", "DefaultCluster",
                                       "-t", "TimerMB", "--json")
        assert code == 0, err
        [entry] = json.loads(out)
        assert [(r["topic"], r["pending"]) for r in entry["topics"]] == [("TimerMB", 2)], out

        # The counts survive a graceful restart (config/timermetrics).
        broker.stop()
        broker = start()
        assert await counts() == {"TimerMA": 3, "TimerMB": 2}
        assert (tmp_path / "broker-tm" / "store" / "config" / "timermetrics").is_file()


async def test_disabled_wheel_answers_system_error(tmp_path: Path, namesrv: ServerProcess,
                                                   server_factory: Factory) -> None:
    """As stock 5.3.3, which builds no timer store with ``timerWheelEnable=false``."""
    broker = server_factory(broker_process(tmp_path, namesrv.address, name="broker-off-tm",
                                           conf={**CONF, "timerWheelEnable": "false"}))
    async with MQAdmin(namesrv.address) as admin:
        info = await admin.broker_runtime_info(broker.address)
        assert (info["timerCongestNum"], info["timerEnqueueTps"]) == ("0", "0.0")
        with pytest.raises(MQBrokerError) as err:
            await admin.timer_metrics(broker.address)
        assert (err.value.code, err.value.remark) == (ResponseCode.SYSTEM_ERROR,
                                                      "The timer message store is null")
