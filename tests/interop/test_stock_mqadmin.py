"""mqadmin across implementations (issue #17, part 3): the STOCK 4.9.7 ``mqadmin`` against OUR
nameserver + broker, and OUR ``mqadmin`` (``python -m aiorocketmq.client.admin.cli``) against the
STOCK nameserver + broker. The same commands and the same content checks on both sides:

clusterList, topicList, topicRoute, topicStatus, updateTopic, deleteTopic, updateSubGroup,
consumerProgress, consumerConnection, brokerStatus, getBrokerConfig, queryMsgByKey,
queryMsgById, queryMsgByUniqueKey, resetOffsetByTime.

Both sides are set up at once (module scope), each with a known history: two batches of messages on
``AdminT`` (sent by our producer, 1.2 s apart) and a live stock push consumer of group ``AdminCG``
that consumed them all. ``resetOffsetByTime`` to the second batch's start sends that consumer
back exactly to the second batch, which it then gets again. Stock mqadmin exits 0 even when a
command failed, so every output is checked for ``Exception`` as well.
"""

from __future__ import annotations

import asyncio
import functools
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aiorocketmq.client import ClientConfig, Producer
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol import fastjson
from tests.interop import stock
from tests.interop.checks import FAST_BROKER_CONF, Spec, check_received, our_mqadmin
from tests.interop.stock import (
    DriverProcess,
    Event,
    JavaEnv,
    start_driver,
    start_stock_broker,
    start_stock_namesrv,
    stop_all,
)
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

TOPIC = "AdminT"
GROUP = "AdminCG"
FIRST_BATCH = 8
SPEC = Spec(TOPIC, 16)


@dataclass
class Side:
    name: str
    namesrv: str
    broker: str
    tmp: Path
    run_admin: Callable[..., str]
    sent: dict[int, Event] = field(default_factory=dict)  # index -> msgId, offsetMsgId, queueId, queueOffset
    reset_ms: int = 0  # the second batch's first born timestamp
    consumer: DriverProcess | None = None
    reset_output: str | None = None
    events_before_reset: int = 0

    def admin(self, command: str, *args: str) -> str:
        return self.run_admin(command, *args)

    def per_queue(self, indexes: range | None = None) -> dict[int, int]:
        counts: dict[int, int] = {}
        for i, e in self.sent.items():
            if indexes is None or i in indexes:
                counts[e["queueId"]] = counts.get(e["queueId"], 0) + 1
        return counts

    def reset(self) -> str:
        """resetOffsetByTime to the second batch, once (two tests look at its effects)."""
        if self.reset_output is None:
            assert self.consumer is not None
            self.events_before_reset = len(self.consumer.events())
            self.reset_output = self.admin("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", str(self.reset_ms))
        return self.reset_output


def _stock_admin(tmp: Path, namesrv: str) -> Callable[..., str]:
    def run(command: str, *args: str) -> str:
        result = stock.mqadmin(tmp, namesrv, command, *args)
        out = result.stdout + result.stderr
        assert result.returncode == 0 and "Exception" not in out, result.describe()
        return result.stdout
    return run


def _our_admin(namesrv: str) -> Callable[..., str]:
    return functools.partial(our_mqadmin, namesrv)


async def _produce(namesrv: str) -> tuple[dict[int, Event], int]:
    sent: dict[int, Event] = {}
    reset_ms = 0
    cfg = ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1")
    async with Producer("PG-admin", config=cfg) as p:
        for i in SPEC.indexes:
            if i == FIRST_BATCH:
                await asyncio.sleep(1.2)
                reset_ms = time.time_ns() // 1_000_000
                await asyncio.sleep(0.2)
            r = await p.send(SPEC.message(i))
            sent[i] = {"msgId": r.msg_id, "offsetMsgId": r.offset_msg_id, "queueId": r.message_queue.queue_id,
                       "queueOffset": r.queue_offset}
    return sent, reset_ms


async def _wait_consumed(namesrv: str, total: int, timeout: float = 30.0) -> None:
    """Until the broker has AdminCG's committed offsets at the end of every queue."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    admin = MQAdmin(namesrv)
    try:
        while True:
            try:
                stats = await admin.consume_stats(GROUP, TOPIC)
                table = stats.offset_table
                if sum(w.broker_offset for w in table.values()) == total and stats.compute_total_diff() == 0:
                    return
            except Exception:
                pass
            assert loop.time() < deadline, "AdminCG never committed its offsets"
            await asyncio.sleep(0.3)
    finally:
        await admin.close()


async def _prepare(sides: list[Side]) -> None:
    """Both sides' history: the two batches, then a live stock consumer that consumed them."""
    produced = await asyncio.gather(*(_produce(s.namesrv) for s in sides))
    for s, (sent, reset_ms) in zip(sides, produced, strict=True):
        s.sent, s.reset_ms = sent, reset_ms
        s.consumer = start_driver(s.tmp, "consume-push", namesrv=s.namesrv, name=f"admin-consumer-{s.name}",
                                  topic=TOPIC, group=GROUP, count=SPEC.count, persist_offset_ms=500,
                                  linger_ms=600000, timeout_ms=600000)
    await asyncio.gather(*(_wait_consumed(s.namesrv, SPEC.count) for s in sides))


SIDES = ["stock-mqadmin-our-servers", "our-mqadmin-stock-servers"]


@pytest.fixture(scope="module")
def sides(stock_java: JavaEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    """Both sides at once: our servers for the stock mqadmin, stock servers (started in a
    thread meanwhile) for ours."""
    tmp_ours, tmp_stock = (tmp_path_factory.mktemp(name) for name in SIDES)
    stock_servers: list[ServerProcess] = []
    stock_error: list[BaseException] = []

    def start_stock() -> None:
        try:
            ns = start_stock_namesrv(tmp_stock)
            stock_servers.append(ns)
            stock_servers.append(start_stock_broker(tmp_stock, ns.address, conf=FAST_BROKER_CONF))
        except BaseException as exc:
            stock_error.append(exc)

    starter = threading.Thread(target=start_stock, name="stock-servers")
    starter.start()
    made: list[Side] = []
    try:
        with namesrv_and_broker(tmp_ours, conf=FAST_BROKER_CONF) as (ns, br):
            starter.join()
            if stock_error:
                raise stock_error[0]
            ns_j, br_j = stock_servers
            made = [Side(SIDES[0], ns.address, br.address, tmp_ours, _stock_admin(tmp_ours, ns.address)),
                    Side(SIDES[1], ns_j.address, br_j.address, tmp_stock, _our_admin(ns_j.address))]
            asyncio.run(_prepare(made))
            yield {s.name: s for s in made}
    finally:
        starter.join()
        for s in made:
            if s.consumer is not None:
                s.consumer.kill()
        stop_all(reversed(stock_servers))


@pytest.fixture(params=SIDES)
def side(request: pytest.FixtureRequest, sides: dict[str, Side]) -> Side:
    return sides[request.param]


def rows(text: str) -> list[list[str]]:
    """The table rows of a listing (header lines start with '#')."""
    return [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def fields(text: str) -> dict[str, str]:
    """``Name:   value`` lines (queryMsgById, brokerStatus)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z][\w /_.-]*?)\s*:\s(.*)$", line)
        if m and m.group(1) not in out:
            out[m.group(1).strip()] = m.group(2).strip()
    return out


# -- nameserver views ----------------------------------------------------------------------


def test_cluster_list(side: Side) -> None:
    got = rows(side.admin("clusterList"))
    assert len(got) == 1 and got[0][:4] == ["DefaultCluster", "broker-a", "0", side.broker], got
    assert got[0][4].startswith("V4_9_"), got


def test_topic_list(side: Side) -> None:
    topics = {line.strip() for line in side.admin("topicList").splitlines() if line.strip()}
    assert {TOPIC, f"%RETRY%{GROUP}", "TBW102", "DefaultCluster", "broker-a", "SCHEDULE_TOPIC_XXXX"} <= topics, topics


def test_topic_route(side: Side) -> None:
    route = fastjson.loads(side.admin("topicRoute", "-t", TOPIC))
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-a"]
    assert {int(k): v for k, v in route["brokerDatas"][0]["brokerAddrs"].items()} == {0: side.broker}
    assert route["brokerDatas"][0]["cluster"] == "DefaultCluster"
    (qd,) = route["queueDatas"]
    assert (qd["brokerName"], qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == ("broker-a", 4, 4, 6)


def test_topic_status(side: Side) -> None:
    got = {int(r[1]): (r[0], int(r[2]), int(r[3])) for r in rows(side.admin("topicStatus", "-t", TOPIC))}
    assert got == {q: ("broker-a", 0, n) for q, n in side.per_queue().items()}, got


# -- topics and groups -----------------------------------------------------------------------


def test_update_then_delete_topic(side: Side) -> None:
    topic = "AdminNewT"
    out = side.admin("updateTopic", "-b", side.broker, "-t", topic, "-r", "3", "-w", "2", "-p", "6")
    assert f"create topic to {side.broker} success." in out, out
    assert f"TopicConfig [topicName={topic}, readQueueNums=3, writeQueueNums=2, perm=RW-" in out, out
    (qd,) = fastjson.loads(side.admin("topicRoute", "-t", topic))["queueDatas"]
    assert (qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == (3, 2, 6), qd
    assert topic in side.admin("topicList").split()
    out = side.admin("deleteTopic", "-t", topic, "-c", "DefaultCluster")
    assert f"delete topic [{topic}] from cluster [DefaultCluster] success." in out, out
    assert f"delete topic [{topic}] from NameServer success." in out, out
    assert topic not in side.admin("topicList").split()


def test_update_sub_group(side: Side) -> None:
    group = "AdminNewG"
    out = side.admin("updateSubGroup", "-b", side.broker, "-g", group, "-q", "2", "-r", "5")
    assert f"create subscription group to {side.broker} success." in out, out
    assert f"SubscriptionGroupConfig [groupName={group}, consumeEnable=true" in out, out
    assert "retryQueueNums=2, retryMaxTimes=5" in out, out

    async def stored() -> tuple[int, int]:
        async with MQAdmin(side.namesrv) as admin:
            cfg = (await admin.subscription_groups(side.broker))[group]
            return cfg.retry_queue_nums, cfg.retry_max_times

    assert asyncio.run(stored()) == (2, 5)


# -- consumers ---------------------------------------------------------------------------------


def test_consumer_progress(side: Side) -> None:
    got = {(r[0], int(r[2])): (r[1], int(r[3]), int(r[4]), int(r[5]))
           for r in rows(side.admin("consumerProgress", "-g", GROUP)) if len(r) >= 6 and r[0] == TOPIC}
    assert got == {(TOPIC, q): ("broker-a", n, n, 0) for q, n in side.per_queue().items()}, got
    out = side.admin("consumerProgress", "-g", GROUP)
    assert "Diff Total: 0" in out, out
    listing = [r for r in rows(side.admin("consumerProgress")) if r and r[0] == GROUP]
    assert len(listing) == 1 and listing[0][1:2] + listing[0][3:5] == ["1", "PUSH", "CLUSTERING"], listing


def test_consumer_connection(side: Side) -> None:
    assert side.consumer is not None
    client_id = side.consumer.wait_for("started")["clientId"]
    out = side.admin("consumerConnection", "-g", GROUP)
    table = rows(out)
    assert table[0][0] == client_id and table[0][2:4] == ["JAVA", "V4_9_7"], out
    assert ["%RETRY%" + GROUP, "*"] in table and [TOPIC, "*"] in table, out
    assert "ConsumeType: CONSUME_PASSIVELY" in out and "MessageModel: CLUSTERING" in out, out
    assert "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET" in out, out


# -- broker views ------------------------------------------------------------------------------


def test_broker_status(side: Side) -> None:
    status = fields(side.admin("brokerStatus", "-b", side.broker))
    assert status["msgPutTotalTodayNow"] == str(SPEC.count), status
    assert int(status["msgGetTotalTodayNow"]) >= SPEC.count, status
    assert int(status["commitLogMaxOffset"]) > 0 and status["commitLogMinOffset"] == "0", status
    assert status["brokerVersionDesc"].startswith("V4_9_"), status


def test_get_broker_config(side: Side) -> None:
    out = side.admin("getBrokerConfig", "-b", side.broker)
    assert out.splitlines()[0] == f"============{side.broker}============", out[:200]
    conf = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in out.splitlines()[1:]) if _}
    assert conf["brokerName"] == "broker-a" and conf["brokerClusterName"] == "DefaultCluster", conf
    assert conf["brokerId"] == "0" and conf["listenPort"] == side.broker.rsplit(":", 1)[1], conf
    for key, value in FAST_BROKER_CONF.items():
        assert conf[key] == value, (key, conf.get(key))


# -- messages ----------------------------------------------------------------------------------


def _check_message_view(side: Side, text: str, i: int) -> None:
    f = fields(text)
    s = side.sent[i]
    assert f["Topic"] == TOPIC and f["Tags"] == f"[{SPEC.tag(i)}]" and f["Keys"] == f"[{SPEC.key(i)}]", f
    assert (int(f["Queue ID"]), int(f["Queue Offset"])) == (s["queueId"], s["queueOffset"]), f
    assert f["Reconsume Times"] == "0" and f["Store Host"] == side.broker, f
    props = f["Properties"]
    for k, v in {**SPEC.user_properties(i), "KEYS": SPEC.key(i), "TAGS": SPEC.tag(i), "UNIQ_KEY": s["msgId"]}.items():
        assert f"{k}={v}" in props, (k, props)
    assert f"MessageTrack [consumerGroup={GROUP}, trackType=CONSUMED, exceptionDesc=null]" in text, text


def test_query_msg_by_key(side: Side) -> None:
    for i in (3, 12):
        got = rows(side.admin("queryMsgByKey", "-t", TOPIC, "-k", SPEC.key(i)))
        s = side.sent[i]
        assert got == [[s["msgId"], str(s["queueId"]), str(s["queueOffset"])]], got


def test_query_msg_by_id(side: Side) -> None:
    i = 5
    out = side.admin("queryMsgById", "-i", side.sent[i]["offsetMsgId"])
    assert fields(out)["OffsetID"] == side.sent[i]["offsetMsgId"], out
    _check_message_view(side, out, i)


def test_query_msg_by_unique_key(side: Side) -> None:
    i = 9
    _check_message_view(side, side.admin("queryMsgByUniqueKey", "-t", TOPIC, "-i", side.sent[i]["msgId"]), i)


def test_reset_offset_by_time(side: Side) -> None:
    """Back to the second batch's start: each queue's new offset is the number of first-batch
    messages on it."""
    out = side.reset()
    assert f"group[{GROUP}], topic[{TOPIC}], force[true]" in out, out
    first = side.per_queue(range(FIRST_BATCH))
    got = {int(r[1]): (r[0], int(r[2])) for r in rows(out) if len(r) == 3}
    assert got == {q: ("broker-a", first.get(q, 0)) for q in side.per_queue()}, out


def test_reset_offset_reaches_the_live_consumer(side: Side) -> None:
    """The broker told the live stock consumer (RESET_CONSUMER_CLIENT_OFFSET): it gets exactly
    the second batch again (the stock client pauses 10 s before it resumes; both sides' resets
    run before either test waits)."""
    side.reset()
    assert side.consumer is not None
    second = range(FIRST_BATCH, SPEC.count)
    deadline = time.monotonic() + 30
    while True:
        again = [e for e in side.consumer.events()[side.events_before_reset:] if e.get("event") == "received"]
        if len(again) >= len(second) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    time.sleep(0.5)
    again = [e for e in side.consumer.events()[side.events_before_reset:] if e.get("event") == "received"]
    check_received(again, SPEC, indexes=second)
