"""Smoke tests of the stock Apache RocketMQ 4.9.7 harness (``make java-deps``; tests/interop/stock.py).

(a) stock nameserver + stock broker + stock producer/consumer: proves the harness itself;
(b) stock producer and push consumer against OUR nameserver + broker, in both serialize types;
(c) stock ``mqadmin clusterList`` against our nameserver lists our broker.

Messages are the driver's deterministic ones (``Messages.java``, mirrored in stock.py), so
every key, tag, body and user property is checked exactly, and counts are exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.interop.stock import (
    DriverProcess,
    DriverResult,
    JavaServer,
    message_body,
    message_key,
    message_tag,
    message_user_properties,
    received_body,
)
from tests.procs import ServerProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

COUNT = 20
TAGS = ["TagA", "TagB"]
PROPS = {"color": "blue", "size": "7"}


def produce_then_consume(java_driver: Callable[..., DriverProcess], namesrv: str, *, topic: str,
                         body_size: int, serialize_type: str | None = None) -> tuple[DriverResult, DriverResult]:
    common: dict[str, Any] = dict(namesrv=namesrv, topic=topic, serialize_type=serialize_type,
                                  tags=TAGS, props=PROPS, body_size=body_size)
    sent = java_driver("produce-sync", group=f"{topic}-pg", count=COUNT, timeout_ms=30000,
                       **common).wait(60).check()
    common.pop("tags"), common.pop("props"), common.pop("body_size")
    received = java_driver("consume-push", group=f"{topic}-cg", count=COUNT, timeout_ms=30000,
                           **common).wait(60).check()
    print(f"JVM runs ({serialize_type or 'default'}): produce-sync {sent.seconds:.2f}s, "
          f"consume-push {received.seconds:.2f}s")
    return sent, received


def check_round_trip(sent: DriverResult, received: DriverResult, *, topic: str, body_size: int,
                     broker_addr: str) -> None:
    sends = sent.of("sent")
    assert [e["index"] for e in sends] == list(range(COUNT)), sent.describe()
    assert all(e["status"] == "SEND_OK" for e in sends), sent.describe()
    by_key = {e["key"]: e for e in sends}

    got = received.of("received")
    assert len(got) == COUNT, received.describe()  # exact: no redelivery in a clean run
    assert len({e["msgId"] for e in got}) == COUNT
    assert sorted(e["keys"] for e in got) == sorted(by_key)
    for e in got:
        i = e["index"]
        key = message_key(i)
        s = by_key[key]
        assert e["keys"] == key
        assert e["topic"] == topic
        assert e["tags"] == message_tag(i, TAGS)
        assert received_body(e) == message_body(i, body_size=body_size), e
        assert e["userProperties"] == message_user_properties(i, PROPS), e
        assert e["reconsumeTimes"] == 0
        assert e["consumeResult"] == "CONSUME_SUCCESS"
        assert (e["msgId"], e["brokerName"], e["queueId"], e["queueOffset"]) == \
            (s["msgId"], s["brokerName"], s["queueId"], s["queueOffset"]), (e, s)
        assert e["offsetMsgId"] == s["offsetMsgId"], (e, s)
        assert e["storeHost"] == f"/{broker_addr}"
        assert e["offsetMsgId"][:16] == "7F000001" + f"{int(broker_addr.rsplit(':', 1)[1]):08X}"
    assert received.done is not None and received.done["distinct"] == COUNT


def test_stock_cluster_round_trip(stock_namesrv: Callable[..., JavaServer],
                                  stock_broker: Callable[..., JavaServer],
                                  java_driver: Callable[..., DriverProcess]) -> None:
    """The harness itself: stock nameserver, stock broker, stock clients."""
    ns = stock_namesrv()
    br = stock_broker(ns.address)
    print(f"JVM starts: stock namesrv {ns.startup_seconds:.2f}s, stock broker {br.startup_seconds:.2f}s")
    sent, received = produce_then_consume(java_driver, ns.address, topic="StockSmoke", body_size=0)
    check_round_trip(sent, received, topic="StockSmoke", body_size=0, broker_addr=br.address)
    assert {e["brokerName"] for e in sent.of("sent")} == {"broker-a"}


@pytest.mark.parametrize("serialize_type", ["JSON", "ROCKETMQ"])
def test_stock_clients_against_our_servers(namesrv: ServerProcess, broker: ServerProcess,
                                           java_driver: Callable[..., DriverProcess],
                                           serialize_type: str) -> None:
    """Stock DefaultMQProducer (sync sends) and DefaultMQPushConsumer against our servers."""
    topic = f"OurSmoke{serialize_type}"
    sent, received = produce_then_consume(java_driver, namesrv.address, topic=topic, body_size=200,
                                          serialize_type=serialize_type)
    check_round_trip(sent, received, topic=topic, body_size=200, broker_addr=broker.address)
    assert {e["brokerName"] for e in sent.of("sent")} == {"broker-a"}


def test_stock_mqadmin_cluster_list(namesrv: ServerProcess, broker: ServerProcess,
                                    mqadmin: Callable[..., Any]) -> None:
    result = mqadmin(namesrv.address, "clusterList")
    print(f"JVM run: mqadmin clusterList {result.seconds:.2f}s")
    assert result.returncode == 0, result.describe()
    assert "Exception" not in result.stdout + result.stderr, result.describe()
    rows = [line.split() for line in result.stdout.splitlines() if not line.startswith("#") and line.strip()]
    assert [row[:4] for row in rows] == [["DefaultCluster", "broker-a", "0", broker.address]], result.describe()
