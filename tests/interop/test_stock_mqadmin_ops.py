"""mqadmin's operations commands across implementations: wipeWritePerm, addWritePerm,
updateOrderConf, cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic,
brokerConsumeStats, queryCq, exportMetrics, skipAccumulatedMessage.

Two stacks, prepared alike: OUR nameserver + broker and the STOCK 4.9.7 ones. Each has topic
``OpsT`` (4 queues) holding 20 messages put queue by queue in the same order, so the consume
queues and commit-log offsets of both are the same; group ``OpsG1`` is online and has
consumed all 20, group ``OpsG2`` consumed the first 16 and went away (lag 1 per queue).

* The stock ``mqadmin`` against our servers prints what it prints against the stock ones
  (addresses and times aside): our servers answer these requests as stock's.
* Our ``mqadmin`` against either stack prints what the stock tool prints against the same
  stack: the commands keep stock's options and output.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Producer,
    PushConsumer,
)
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import MessageQueue, TopicConfig
from aiorocketmq.protocol.message import Message, MessageExt
from tests.interop import stock
from tests.interop.checks import FAST_BROKER_CONF, our_mqadmin
from tests.interop.stock import JavaEnv, start_stock_broker, start_stock_namesrv, stop_all
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

TOPIC = "OpsT"
QUEUES = 4
ONLINE = "OpsG1"
GONE = "OpsG2"
SIDES = ("ours", "stock")


@dataclass
class Side:
    name: str
    namesrv: str
    broker: str
    tmp: Path
    stop_consumer: threading.Event = field(default_factory=threading.Event)
    consumer_thread: threading.Thread | None = None

    def stock_tool(self, command: str, *args: str, check: bool = True) -> str:
        """The stock mqadmin against this side: stdout, plus stderr's exception line."""
        result = stock.mqadmin(self.tmp, self.namesrv, command, *args)
        if check:
            assert result.returncode == 0 and "Exception" not in result.stdout + result.stderr, \
                result.describe()
        return result.stdout

    def ours(self, command: str, *args: str) -> str:
        return our_mqadmin(self.namesrv, command, *args)

    def normalize(self, text: str) -> str:
        """Addresses as names, so both stacks' outputs compare."""
        return text.replace(self.broker, "<broker>").replace(self.namesrv, "<namesrv>")


def _on_queue(mqs: list[MessageQueue], _msg: Message, arg: Any) -> MessageQueue:
    return next(mq for mq in mqs if mq.queue_id == arg)


async def _send(namesrv: str, indexes: range) -> None:
    cfg = ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1")
    async with Producer("OpsPG", config=cfg) as p:
        for i in indexes:
            tag = "TagA" if i % 2 else "TagB"
            await p.send(Message(TOPIC, f"ops-{i:03d}".encode(), tags=tag), selector=_on_queue,
                         arg=i % QUEUES)


async def _offsets(admin: MQAdmin, broker: str, group: str) -> list[int]:
    stats = await admin.broker_consume_stats(broker)
    for entry in stats.consume_stats_list:
        for cs in entry.get(group, []):
            table = {mq.queue_id: w.consumer_offset for mq, w in cs.offset_table.items()
                     if mq.topic == TOPIC}
            if table:
                return [table.get(q, 0) for q in range(QUEUES)]
    return [0] * QUEUES


async def _wait_offsets(side: Side, group: str, want: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with MQAdmin(side.namesrv) as admin:
        while True:
            got = await _offsets(admin, side.broker, group)
            if got == [want] * QUEUES:
                return
            assert time.monotonic() < deadline, f"{side.name} {group} offsets {got}, want {want}"
            await asyncio.sleep(0.3)


def _consume(side: Side, group: str, stop: threading.Event) -> None:
    """A push consumer of ``group`` (TagA || TagB) in its own loop until ``stop``."""

    async def run() -> None:
        consumer = PushConsumer(group, config=ClientConfig(namesrv_addr=side.namesrv,
                                                           client_ip="127.0.0.1"),
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe(TOPIC, "TagA || TagB")

        def listener(_msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            await asyncio.get_running_loop().run_in_executor(None, stop.wait)
            await consumer.persist_consumer_offset()
        finally:
            await consumer.shutdown()

    asyncio.run(run())


def _prepare(side: Side) -> None:
    async def topic() -> None:
        async with MQAdmin(side.namesrv) as admin:
            await admin.create_topic(side.broker, TopicConfig(TOPIC, QUEUES, QUEUES, 6))
            deadline = time.monotonic() + 30
            while True:
                try:
                    await admin.topic_route(TOPIC)
                    return
                except Exception:
                    assert time.monotonic() < deadline, "no route for the topic"
                    await asyncio.sleep(0.2)

    asyncio.run(topic())
    asyncio.run(_send(side.namesrv, range(16)))
    gone_stop = threading.Event()
    gone = threading.Thread(target=_consume, args=(side, GONE, gone_stop))
    gone.start()
    try:
        asyncio.run(_wait_offsets(side, GONE, 4))
    finally:
        gone_stop.set()
        gone.join()
    side.consumer_thread = threading.Thread(target=_consume,
                                            args=(side, ONLINE, side.stop_consumer))
    side.consumer_thread.start()
    asyncio.run(_wait_offsets(side, ONLINE, 4))
    asyncio.run(_send(side.namesrv, range(16, 20)))
    asyncio.run(_wait_offsets(side, ONLINE, 5))


# registrations every 10 s (the shortest either broker allows): test_order_conf_reaches_the_brokers
_CONF = {**FAST_BROKER_CONF, "registerNameServerPeriod": "10000"}


@pytest.fixture(scope="module")
def sides(stock_java: JavaEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    tmp_ours, tmp_stock = (tmp_path_factory.mktemp(f"ops-{name}") for name in SIDES)
    stock_servers: list[ServerProcess] = []
    made: list[Side] = []
    try:
        ns_j = start_stock_namesrv(tmp_stock)
        stock_servers.append(ns_j)
        br_j = start_stock_broker(tmp_stock, ns_j.address, conf=_CONF)
        stock_servers.append(br_j)
        with namesrv_and_broker(tmp_ours, conf=_CONF) as (ns, br):
            made = [Side("ours", ns.address, br.address, tmp_ours),
                    Side("stock", ns_j.address, br_j.address, tmp_stock)]
            for s in made:
                _prepare(s)
            yield {s.name: s for s in made}
            for s in made:
                s.stop_consumer.set()
                if s.consumer_thread is not None:
                    s.consumer_thread.join()
    finally:
        stop_all(stock_servers)


def _both(sides: dict[str, Side], command: str, *args: str) -> tuple[str, str]:
    """The stock tool's output against our stack and against the stock one, normalized."""
    out = {name: s.normalize(s.stock_tool(command, *(a.replace("@broker", s.broker)
                                                      for a in args)))
           for name, s in sides.items()}
    return out["ours"], out["stock"]


_COUNT = re.compile(r"(?<=OK, )\d+")
_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


# -- the stock tool against our servers, as against stock's -------------------------------


def test_stock_tool_write_perm(sides: dict[str, Side]) -> None:
    # the count is the broker's topics: ours has one more system topic (the timer wheel's)
    ours, theirs = (_COUNT.sub("<n>", t) for t in _both(sides, "wipeWritePerm", "-b", "broker-a"))
    assert ours == theirs
    assert re.fullmatch(r"wipe write perm of broker\[broker-a\] in name server\[<namesrv>\] OK, "
                        r"<n>\n", ours), ours

    async def perm() -> int:
        async with MQAdmin(sides["ours"].namesrv) as admin:
            route = await admin.topic_route(TOPIC)
            return route.queue_datas[0].perm

    assert asyncio.run(perm()) == 4  # read only
    ours, theirs = (_COUNT.sub("<n>", t) for t in _both(sides, "addWritePerm", "-b", "broker-a"))
    assert ours == theirs and "add write perm of broker[broker-a] in name server[<namesrv>] OK" in ours
    assert asyncio.run(perm()) == 6


# A topic no broker has: a stock broker's periodic registration sets the order flag of the
# topics in the nameserver's ORDER_TOPIC_CONFIG table, which would change OpsT's stats.
ORDER_TOPIC = "OpsOrderT"


def test_stock_tool_order_conf(sides: dict[str, Side]) -> None:
    for args in (("-m", "put", "-v", "broker-a:4"), ("-m", "get"), ("-m", "delete")):
        ours, theirs = _both(sides, "updateOrderConf", "-t", ORDER_TOPIC, *args)
        assert ours == theirs, args
    assert ours == f"delete orderConf success. topic=[{ORDER_TOPIC}]"


@pytest.mark.parametrize("command", ["cleanExpiredCQ", "deleteExpiredCommitLog", "cleanUnusedTopic"])
@pytest.mark.parametrize("target", [("-b", "@broker"), ("-c", "DefaultCluster"), ()])
def test_stock_tool_housekeeping(sides: dict[str, Side], command: str, target: tuple[str, ...]) -> None:
    assert _both(sides, command, *target) == ("success", "success")


@pytest.mark.parametrize("args", [(), ("-l", "1"), ("-o", "true"), ("-l", "2")])
def test_stock_tool_broker_consume_stats(sides: dict[str, Side], args: tuple[str, ...]) -> None:
    ours, theirs = _both(sides, "brokerConsumeStats", "-b", "@broker", *args)
    assert _TIME.sub("<time>", ours) == _TIME.sub("<time>", theirs)
    if not args:
        assert f"\nDiff Total: {QUEUES}\n" in ours and ours.count(ONLINE) == QUEUES, ours


_SUB_VERSION = re.compile(r'"subVersion":\d+')


@pytest.mark.parametrize("args", [
    ("-q", "0", "-i", "0", "-c", "3"),
    ("-q", "1", "-i", "2", "-g", ONLINE, "-b", "@broker"),
    ("-q", "3", "-i", "4", "-g", GONE),
    ("-q", "2", "-i", "1", "-c", "0"),
])
def test_stock_tool_query_cq(sides: dict[str, Side], args: tuple[str, ...]) -> None:
    ours, theirs = _both(sides, "queryCq", "-t", TOPIC, *args)
    assert _SUB_VERSION.sub("", ours) == _SUB_VERSION.sub("", theirs)
    assert "Queue data: \nmax: 5, min: 0\n" in ours, ours


@pytest.mark.parametrize("args", [("-q", "7", "-i", "0"), ("-q", "0", "-i", "100"),
                                  ("-q", "0", "-i", "5"), ("-q", "0", "-i", "-1")])
def test_stock_tool_query_cq_refused(sides: dict[str, Side], args: tuple[str, ...]) -> None:
    """A queue the store never made: SYSTEM_ERROR; an index past the queue: SUCCESS with a
    remark and no body, which the stock tool fails to decode (a stack trace, no output)."""
    out = {name: s.normalize(stock.mqadmin(s.tmp, s.namesrv, "queryCq", "-t", TOPIC, *args).stderr)
           for name, s in sides.items()}
    first = {name: text.strip().splitlines()[0] for name, text in out.items()}
    assert first["ours"] == first["stock"], out


def test_stock_tool_export_metrics(sides: dict[str, Side]) -> None:
    got: dict[str, Any] = {}
    ratios: dict[str, list[float]] = {}
    for name, s in sides.items():
        out = s.tmp / "export"
        assert s.stock_tool("exportMetrics", "-c", "DefaultCluster", "-f", str(out)) == \
            f"export {out}/metrics.json success"
        got[name] = json.loads((out / "metrics.json").read_text())
        quota = got[name]["evaluateReport"]["broker-a"]["runtimeQuota"]
        ratios[name] = []
        for key in ("commitLogDiskRatio", "consumeQueueDiskRatio"):
            # the used share of the partition, rounded up to hundredths (both on one disk)
            value = quota["diskRatio"].pop(key)
            assert re.fullmatch(r"0\.\d\d?|1\.0", value), (name, key, value)
            ratios[name].append(float(value))
    assert got["ours"] == got["stock"]
    assert all(abs(a - b) <= 0.01 for a, b in zip(ratios["ours"], ratios["stock"], strict=True)), ratios


# -- our mqadmin against each stack, as the stock tool against the same stack --------------


@pytest.fixture(params=SIDES)
def side(request: pytest.FixtureRequest, sides: dict[str, Side]) -> Side:
    return sides[request.param]


def _pair(side: Side, command: str, *args: str) -> tuple[str, str]:
    """(the stock tool's output, ours) for one command against ``side``, stock's first."""
    args = tuple(a.replace("@broker", side.broker) for a in args)
    return side.stock_tool(command, *args), side.ours(command, *args)


def _our_failure(side: Side, command: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "aiorocketmq.client.admin.cli", command,
                           "-n", side.namesrv, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr)
    return proc.stderr


def test_ours_write_perm(side: Side) -> None:
    for command in ("wipeWritePerm", "addWritePerm"):
        theirs, ours = _pair(side, command, "-b", "broker-a")
        assert ours == theirs, command


def test_ours_order_conf(side: Side) -> None:
    for args in (("-m", "put", "-v", "broker-a:4;broker-b:2"), ("-m", "get"),
                 ("-m", "delete")):
        theirs, ours = _pair(side, "updateOrderConf", "-t", ORDER_TOPIC, *args)
        assert ours == theirs, args
    # gone now: the nameserver's remark, as the stock tool's exception carries it
    assert f"No config item, Namespace: ORDER_TOPIC_CONFIG Key: {ORDER_TOPIC}" in _our_failure(
        side, "updateOrderConf", "-t", ORDER_TOPIC, "-m", "get")


@pytest.mark.parametrize("command", ["cleanExpiredCQ", "deleteExpiredCommitLog", "cleanUnusedTopic"])
@pytest.mark.parametrize("target", [("-b", "@broker"), ("-c", "DefaultCluster"), (),
                                    ("-c", "NoSuchCluster")])
def test_ours_housekeeping(side: Side, command: str, target: tuple[str, ...]) -> None:
    theirs, ours = _pair(side, command, *target)
    assert ours == theirs == ("false" if "NoSuchCluster" in target else "success")


@pytest.mark.parametrize("args", [(), ("-l", "1"), ("-o", "true"), ("-l", "2", "-t", "5000")])
def test_ours_broker_consume_stats(side: Side, args: tuple[str, ...]) -> None:
    theirs, ours = _pair(side, "brokerConsumeStats", "-b", "@broker", *args)
    assert ours == theirs


@pytest.mark.parametrize("args", [
    ("-q", "0", "-i", "0", "-c", "3"),
    ("-q", "1", "-i", "2", "-g", ONLINE, "-b", "@broker"),
    ("-q", "3", "-i", "4", "-g", GONE),
    ("-q", "2", "-i", "1", "-c", "0"),
    ("-q", "2", "-i", "3", "-c", "99"),
])
def test_ours_query_cq(side: Side, args: tuple[str, ...]) -> None:
    theirs, ours = _pair(side, "queryCq", "-t", TOPIC, *args)
    assert ours == theirs


def test_ours_query_cq_refused(side: Side) -> None:
    assert "7@OpsT is not exist!" in _our_failure(side, "queryCq", "-t", TOPIC, "-q", "7", "-i", "0")
    for index in ("100", "5", "-1"):
        assert f"Index {index} of 0@OpsT is not exist!" in _our_failure(
            side, "queryCq", "-t", TOPIC, "-q", "0", "-i", index)


# what moves between two runs: disk usage, this minute's rates; and the tool's own version
_VOLATILE = re.compile(r'("\w*DiskRatio":|"\w*Tps":|"rocketmqVersion":)[^,\n]*')


def test_ours_export_metrics(side: Side) -> None:
    texts = []
    for tool in ("stock", "ours"):
        out = side.tmp / f"export-{tool}"
        run = side.stock_tool if tool == "stock" else side.ours
        assert run("exportMetrics", "-c", "DefaultCluster", "-f", str(out)) == \
            f"export {out}/metrics.json success"
        texts.append((out / "metrics.json").read_text())
    theirs, ours = (_VOLATILE.sub(r"\1<v>", t) for t in texts)
    assert ours == theirs
    assert '"groupSize":2' in ours and '"topicSize":1' in ours, ours


# last: these move the groups' offsets


def test_ours_skip_accumulated_online(side: Side) -> None:
    theirs, ours = _pair(side, "skipAccumulatedMessage", "-g", ONLINE, "-t", TOPIC)
    assert ours == theirs
    assert ours.splitlines()[1].split() == ["broker-a", "0", "5"], ours


def test_ours_skip_accumulated_offline(side: Side) -> None:
    """No consumer of the group online: the stored offsets are rewritten; the table shows
    each queue's offset before (stock's run moved them first, so ours sees 5, not 4)."""
    theirs, ours = _pair(side, "skipAccumulatedMessage", "-g", GONE, "-t", TOPIC, "-f", "true")
    assert [r.split() for r in theirs.splitlines()[1:]] == [
        ["broker-a", str(q), "5", "4", "5", "5"] for q in range(QUEUES)], theirs
    assert ours == theirs.replace("5                     4    ", "5                     5    ")


def test_ours_start_monitoring(side: Side) -> None:
    """One round at once (stock's tool runs until killed and writes to its log): the online
    group's lag per topic in upstream's ``UndoneMsgs`` form; the group with no consumer
    online is left out, as upstream's round leaves it."""
    out = side.ours("startMonitoring", "--delay", "0", "--rounds", "1")
    lines = out.splitlines()
    assert lines[0] == "[MONITOR] =========================================beginRound", out
    assert lines[-1] == "[MONITOR] =========================================endRound", out
    assert (f"[MONITOR] reportUndoneMsgs: UndoneMsgs [consumerGroup={ONLINE}, topic={TOPIC}, "
            f"undoneMsgsTotal=0, undoneMsgsSingleMQ=0, undoneMsgsDelayTimeMills=0]") in lines, out
    assert all(line.startswith(f"[MONITOR] reportUndoneMsgs: UndoneMsgs [consumerGroup={ONLINE}, ")
               for line in lines[1:-1]), out


async def _wait_order(sides: dict[str, Side], want: bool, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    got: dict[str, bool | None] = {}
    while True:
        for s in sides.values():
            async with MQAdmin(s.namesrv) as admin:
                tc = await admin.topic_config(s.broker, TOPIC)
                got[s.name] = None if tc is None else tc.order
        if all(v is want for v in got.values()):
            return
        assert time.monotonic() < deadline, f"order flags {got}, want {want}"
        await asyncio.sleep(0.5)


def test_order_conf_reaches_the_brokers(sides: dict[str, Side]) -> None:
    """Last (OpsT becomes ordered for a while): a broker's periodic registration takes the
    nameserver's ORDER_TOPIC_CONFIG keys as its ordered topics (upstream's checkOrderConfig),
    so ``updateOrderConf -m put`` makes OpsT ordered on the broker and ``delete`` undoes it."""
    for s in sides.values():
        s.stock_tool("updateOrderConf", "-t", TOPIC, "-m", "put", "-v", "broker-a:4")
    asyncio.run(_wait_order(sides, True))
    for s in sides.values():
        assert f"{TOPIC} " in s.ours("brokerConsumeStats", "-b", s.broker, "-o", "true")
        s.stock_tool("updateOrderConf", "-t", TOPIC, "-m", "delete")
    asyncio.run(_wait_order(sides, False))
