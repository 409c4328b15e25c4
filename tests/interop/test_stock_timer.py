"""Timer messages from the stock Apache RocketMQ 4.9.7 Java client through OUR broker.

4.9.7's ``MessageConst.STRING_HASH_SET`` has no TIMER_* names, so its producer sets
``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS`` / ``TIMER_DELIVER_MS`` as user properties
(``putUserProperty``, the driver's ``--props``) and a 5.x broker times the message. Checked
with the stock producer and push consumer: SEND_OK with the client's msgId and the queue it
chose; each message delivered once to that queue, never before its time nor before one
precision after its slot; upstream's added properties (TIMER_OUT_MS, TIMER_ENQUEUE_MS,
TIMER_DEQUEUE_MS, REAL_TOPIC/REAL_QID); code 13 with upstream's remark for an illegal
timer message, code 1 with a broker whose wheel is off.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.checks import Spec, check_message, check_sent
from tests.interop.flows import Flows
from tests.interop.stock import DriverResult, JavaEnv, run_driver
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
