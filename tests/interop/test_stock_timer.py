"""Timer messages from the stock Apache RocketMQ 4.9.7 Java client through OUR broker.

4.9.7's ``MessageConst.STRING_HASH_SET`` has no TIMER_* names, so its producer sets
``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS`` / ``TIMER_DELIVER_MS`` as user properties
(``putUserProperty``, the driver's ``--props``) and a 5.x broker times the message. Checked
with the stock producer and push consumer: SEND_OK with the client's msgId and the queue it
chose; each message delivered once to that queue, never before its time nor before one
precision after its slot; upstream's added properties (TIMER_OUT_MS, TIMER_ENQUEUE_MS,
TIMER_DEQUEUE_MS, REAL_TOPIC/REAL_QID); code 13 with upstream's remark for an illegal
timer message, code 1 with a broker whose wheel is off.

Beside a stock 5.3.3 broker (``java5/``, :mod:`tests.interop.stock5`): the same raw sends get
the same codes, remarks, recall handles and parked / delivered records from both brokers (the
property names compared without ``MSG_REGION``, ``TRACE_ON`` and ``WAIT``, which a 5.x broker
stores on every send and 4.9.7 on none), and the stock 5.3.3 producer's ``setDelayTimeSec`` /
``setDelayTimeMs`` / ``setDeliverTimeMs`` messages arrive alike from either broker, never early.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.headers import SendMessageResponseHeader
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import route, send
from tests.integration.test_broker_timer import (
    assert_never_early,
    find_delivered,
    next_messages,
    view,
)
from tests.interop.checks import Spec, check_message, check_sent
from tests.interop.flows import Flows
from tests.interop.stock import (
    DriverResult,
    JavaEnv,
    JavaServer,
    StockHarnessError,
    run_driver,
    stop_all,
)
from tests.interop.stock5 import (
    require_java5,
    run_timer5,
    start_stock5_broker,
    start_stock5_namesrv,
)
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

TIMEOUT_MS = 45000
CONF = {"mappedFileSizeTimerLog": str(1024 * 1024)}
ADDED = ("TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS")
ILLEGAL = ("timer message illegal, the delay time should not be bigger than the max delay "
           "259200000ms; or if set del msg, the delay time should be bigger than the current time")
NOT_ENABLED = "accurate timer message is not enabled, timerWheelEnable is false"


def ways() -> dict[str, tuple[dict[str, str], int]]:
    """name -> (the timer property, the delay in ms after the send it asks for; -1: absolute)."""
    return {
        "Sec": ({"TIMER_DELAY_SEC": "3"}, 3000),
        "Ms": ({"TIMER_DELAY_MS": "2500"}, 2500),
        # Absolute, far enough ahead for the producer's JVM to start first.
        "At": ({"TIMER_DELIVER_MS": str(int(time.time() * 1000) + 12_000)}, -1),
    }


def spec(name: str, props: dict[str, str]) -> Spec:
    return Spec(f"StockTimer{name}", 6, props={"color": "blue", **props})


def timer_flow(name: str, props: dict[str, str]) -> Any:
    def flow(f: Flows) -> tuple[DriverResult, DriverResult]:
        s = spec(name, props)
        sent = f.run("produce-sync", group=f"PG-timer-{name}", timeout_ms=TIMEOUT_MS,
                     **s.driver_options())
        received = f.run("consume-push", topic=s.topic, group=f"CG-timer-{name}", count=s.count,
                         linger_ms=1500, timeout_ms=TIMEOUT_MS)
        return sent, received
    return flow


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with namesrv_and_broker(tmp_path_factory.mktemp("timer-ours"), conf=CONF) as servers:
        yield servers


@pytest.fixture(scope="module")
def flows(stock_java: JavaEnv, pair: tuple[ServerProcess, ServerProcess],
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Flows, dict[str, Any]]]:
    f = Flows(tmp_path_factory.mktemp("timer-flows"), pair[0].address)
    chosen = ways()
    for name, (props, _) in chosen.items():
        f.submit(name, timer_flow(name, props))
    try:
        yield f, chosen
    finally:
        f.close()


@pytest.mark.parametrize("name", ["Sec", "Ms", "At"])
def test_stock_producer_timer_delivered_once_on_time(flows: tuple[Flows, dict[str, Any]], name: str) -> None:
    f, chosen = flows
    props, delay = chosen[name]
    s = spec(name, props)
    sent_result, received_result = f.result(name, timeout=200)
    sent = check_sent(sent_result, s)
    events = received_result.of("received")
    by_index: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        by_index.setdefault(e["index"], []).append(e)
    assert sorted(by_index) == list(s.indexes), received_result.describe()
    for i, evs in by_index.items():
        assert len(evs) == 1, f"message {i} delivered {len(evs)} times"
        e = evs[0]
        # The message as sent (key, tag, body, every user property), plus upstream's three.
        user = dict(e["userProperties"])
        added = {k: user.pop(k) for k in ADDED}
        check_message({**e, "userProperties": user}, s)
        s_event = sent[s.key(i)]
        assert e["msgId"] == s_event["msgId"] and e["queueId"] == s_event["queueId"]
        p = e["properties"]
        assert p["REAL_TOPIC"] == s.topic and p["REAL_QID"] == str(e["queueId"])
        out = int(added["TIMER_OUT_MS"])
        earliest = int(props["TIMER_DELIVER_MS"]) if delay < 0 else e["bornTimestamp"] + delay
        assert e["storeTimestamp"] >= earliest, (e["storeTimestamp"], earliest)
        assert e["storeTimestamp"] >= out + 1000 and out % 1000 == 0
        assert int(added["TIMER_ENQUEUE_MS"]) <= int(added["TIMER_DEQUEUE_MS"]) <= e["storeTimestamp"]


def test_stock_producer_illegal_timer_is_code_13(stock_java: JavaEnv, tmp_path: Path,
                                                 pair: tuple[ServerProcess, ServerProcess]) -> None:
    for props in ({"TIMER_DELAY_SEC": "soon"}, {"TIMER_DELAY_SEC": str(4 * 86400)}):
        result = run_driver(tmp_path, "produce-sync", namesrv=pair[0].address, topic="StockTimerBad",
                            count=1, retry_times=0, props=props, timeout_ms=20000)
        err = result.error
        assert result.returncode == 1 and err is not None, result.describe()
        assert err["responseCode"] == 13 and err["errorMessage"] == ILLEGAL, result.describe()


def test_stock_producer_wheel_off_is_code_1(stock_java: JavaEnv, tmp_path: Path) -> None:
    with namesrv_and_broker(tmp_path / "off", conf={**CONF, "timerWheelEnable": "false"}) as (ns, _):
        result = run_driver(tmp_path, "produce-sync", namesrv=ns.address, topic="StockTimerOff",
                            count=1, retry_times=0, props={"TIMER_DELAY_SEC": "3"}, timeout_ms=20000)
    err = result.error
    assert result.returncode == 1 and err is not None, result.describe()
    assert err["responseCode"] == 1, result.describe()
    assert any(NOT_ENABLED in c for c in [err.get("errorMessage") or "", *err["causes"]]), result.describe()


# -- beside a stock 5.3.3 broker: the same sends, the same answers and records ----------------


@pytest.fixture(scope="module")
def stock5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JavaServer, JavaServer]]:
    """A stock 5.3.3 nameserver + broker (FAILS, never skips, without ``make java-deps``)."""
    try:
        require_java5()
    except StockHarnessError as exc:
        pytest.fail(str(exc), pytrace=False)
    tmp = tmp_path_factory.mktemp("timer-stock5")
    ns = start_stock5_namesrv(tmp)
    servers = [ns]
    try:
        servers.append(start_stock5_broker(tmp, ns.address))
        asyncio.run(_wait_route(ns.address, "TBW102"))  # 5.x registers a moment after its boot line
        yield ns, servers[1]
    finally:
        stop_all(reversed(servers))
        for s in servers:
            for path in s.logs:
                text = path.read_text(errors="replace") if path.exists() else "(no log)"
                print(f"---- stock 5.3.3 {path} ----\n" + "\n".join(text.splitlines()[-30:]))


async def _wait_route(namesrv: str, topic: str, within: float = 60.0) -> None:
    """Until the nameserver has a route for ``topic`` (a loaded machine has seen a stock 5.3.3
    broker's first registration take 10 s)."""
    client = RemotingClient()
    deadline = time.monotonic() + within
    try:
        while True:
            r = await route(client, namesrv, topic)
            if r.code == ResponseCode.SUCCESS:
                return
            assert time.monotonic() < deadline, f"no route for {topic} in {within}s: {r.remark}"
            await asyncio.sleep(0.2)
    finally:
        await client.close()


# Stored by a 5.x broker on every send, by 4.9.7 (and ours) on none: not a timer matter.
FIVE_X_SEND_PATH = frozenset({"MSG_REGION", "TRACE_ON", "WAIT"})


def keys(props: dict[str, str]) -> list[str]:
    return sorted(set(props) - FIVE_X_SEND_PATH)


async def _observe(addr: str, broker_name: str) -> dict[str, Any]:
    """What a broker answers and stores for the timer sends every broker gets here (property
    names without ``FIVE_X_SEND_PATH``)."""
    client = RemotingClient()
    seen: dict[str, Any] = {}
    try:
        topic = "Cmp5Timer"
        for name, props in {"not-a-long": {"TIMER_DELAY_SEC": "soon"},
                            "fraction": {"TIMER_DELAY_MS": "1.5"},
                            "too-far": {"TIMER_DELAY_SEC": str(259200 + 1)},
                            "too-far-abs": {"TIMER_DELIVER_MS": str(int(time.time() * 1000) + 4 * 86400_000)},
                            "del-in-past": {"TIMER_DELIVER_MS": "1", "TIMER_DEL_UNIQKEY": "x+y"}}.items():
            r = await send(client, addr, topic, b"x", props={**props, "WAIT": "true"}, queue_id=1)
            seen[name] = (r.code, r.remark)
        # Due already: stored in its topic as sent.
        r = await send(client, addr, topic, b"past", queue_id=2,
                       props={"TIMER_DELIVER_MS": "1", "UNIQ_KEY": "CMP-PAST", "WAIT": "true"})
        [plain] = await next_messages(client, addr, topic, 2, 0)
        seen["past"] = (r.code, plain.topic, keys(plain.properties), "recallHandle" in (r.ext_fields or {}))
        # A delay level wins.
        r = await send(client, addr, topic, b"level", queue_id=3,
                       props={"DELAY": "1", "TIMER_DELAY_SEC": "100", "UNIQ_KEY": "CMP-LEVEL", "WAIT": "true"})
        parked = await view(client, addr, SendMessageResponseHeader.from_ext_fields(r.ext_fields).msg_id)
        seen["level"] = (r.code, parked.topic, keys(parked.properties))
        # A timer message: parked, then delivered.
        born = int(time.time() * 1000)
        r = await send(client, addr, topic, b"timed", queue_id=1,
                       props={"TIMER_DELAY_MS": "1500", "UNIQ_KEY": "CMP-TIMED", "TAGS": "T",
                              "KEYS": "k1", "color": "red", "WAIT": "true"})
        h = SendMessageResponseHeader.from_ext_fields(r.ext_fields)
        parked = await view(client, addr, h.msg_id)
        handle = base64.urlsafe_b64decode((r.ext_fields or {})["recallHandle"]).decode().split(" ")
        out = int(parked.properties["TIMER_OUT_MS"])
        assert handle == ["v1", topic, broker_name, str(out + 1), "CMP-TIMED"], handle
        delivered = await find_delivered(client, addr, topic, 1, "CMP-TIMED")
        assert_never_early(delivered, born + 1500)
        seen["timed"] = {
            "answer": (r.code, h.queue_id),
            "parked": (parked.topic, parked.queue_id, keys(parked.properties)),
            "parked-values": {k: parked.properties[k] for k in ("REAL_TOPIC", "REAL_QID", "color")},
            "delivered": (delivered.topic, delivered.queue_id, delivered.body, keys(delivered.properties)),
            "delivered-values": {k: delivered.properties[k]
                                 for k in ("REAL_TOPIC", "REAL_QID", "color", "TAGS", "KEYS")},
            "out-kept": delivered.properties["TIMER_OUT_MS"] == str(out),
            "enqueue<=dequeue<=store": int(delivered.properties["TIMER_ENQUEUE_MS"])
            <= int(delivered.properties["TIMER_DEQUEUE_MS"]) <= delivered.store_timestamp,
        }
    finally:
        await client.close()
    return seen


async def test_same_answers_and_records_as_stock_533(stock5: tuple[JavaServer, JavaServer],
                                                     pair: tuple[ServerProcess, ServerProcess]) -> None:
    theirs = await _observe(stock5[1].address, "broker5-a")
    ours = await _observe(pair[1].address, pair[1].match.group("name") if pair[1].match else "")
    diffs = [(name, ours[name], theirs[name]) for name in theirs if ours[name] != theirs[name]]
    assert not diffs, "\n".join(map(str, diffs))
    assert theirs["too-far"] == (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL)


@pytest.mark.parametrize("way", ["sec", "ms", "at"])
def test_stock_533_client_beside_stock_533_broker(way: str, tmp_path: Path,
                                                  stock5: tuple[JavaServer, JavaServer],
                                                  pair: tuple[ServerProcess, ServerProcess]) -> None:
    """The 5.3.3 producer's setDelayTimeSec / setDelayTimeMs / setDeliverTimeMs, sent to each broker."""
    results = {}
    for who, (ns, br) in (("stock", stock5), ("ours", pair)):
        value = {"sec": 2, "ms": 1800, "at": int(time.time() * 1000) + 9000}[way]
        r = run_timer5(tmp_path, namesrv=ns.address, topic=f"T5{way}", way=way, value=value, count=3)
        assert r.returncode == 0 and r.done is not None, r.describe()
        sent = r.of("sent")
        assert [e["status"] for e in sent] == ["SEND_OK"] * 3 and all(e["recallHandle"] for e in sent)
        delivered = asyncio.run(_delivered(br.address, f"T5{way}", sent))
        rows = []
        for e, m in zip(sent, delivered, strict=True):
            earliest = value if way == "at" else e["sentAt"] + value * (1000 if way == "sec" else 1)
            assert_never_early(m, earliest)
            assert m.queue_id == e["queueId"] and m.msg_id == e["msgId"]
            rows.append((m.topic, m.body, keys(m.properties), m.properties["idx"]))
        results[who] = rows
    assert results["ours"] == results["stock"]


async def _delivered(addr: str, topic: str, sent: list[dict[str, Any]]) -> list[MessageExt]:
    client = RemotingClient()
    try:
        return [await find_delivered(client, addr, topic, e["queueId"], e["msgId"]) for e in sent]
    finally:
        await client.close()
