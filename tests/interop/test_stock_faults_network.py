"""The network faults of ``tests/integration/test_faults_network.py`` on stock 4.9.7, in the
same harness (tests/faultproxy.py), with the same settings and the same checks.

1. Master <-> slave partition, stock master and stock slave: what stock answers is what
   ours answers (SYNC_MASTER: FLUSH_SLAVE_TIMEOUT after slaveTimeout while the connection
   is up, then SLAVE_NOT_AVAILABLE; ASYNC_MASTER: SEND_OK), and the stock slave catches up
   byte-identical after the heal. One difference on the way: a stock slave times its
   housekeeping from its own last write (``HAClient.lastWriteTimestamp``), so in the black
   hole it keeps its dead connection; it notices the master closed it only when the heal
   delivers the FIN. Ours times it from its last read and dials again during the partition.
2. Broker <-> nameserver partition, stock nameserver, stock brokers and a stock producer
   (the driver's produce-paced): the stock nameserver drops broker-a after its fixed
   ``BROKER_CHANNEL_EXPIRED_TIME`` (120 s, scanned every 10 s; not configurable in 4.9.7),
   the stock producer moves to broker-b without a failed send, and broker-a registers again
   within a registration period of the heal. Ours does the same with the expiry configurable
   (``brokerChannelExpiredTime``; 15 s in the test).
3. Client <-> broker black hole, stock brokers with a stock producer (produce-paced) and a
   stock push consumer (consume-push), behind the same registrar and proxy (our nameservers:
   the fault is between clients and broker). Stock does what ours does: a send() that picks
   one of broker-a's queues fails when its whole budget (sendMsgTimeout, 3 s) is spent on the
   one attempt (``RemotingTooMuchRequestException: sendDefaultImpl call timeout``, or
   MQClientException wrapping the timeout), so nothing is left to retry another broker in
   that call; with sendLatencyFaultEnable off (the default) the next send() takes the next
   queue round-robin, so broker-a's four queues fail in a row and broker-b's four succeed.
   The push consumer resumes on broker-a 0-2.2 s after the heal (three runs); it delivered
   one or two keys twice in those runs (ours none).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.faultproxy import ThreadedFaultProxy
from tests.integration.test_faults_network import (
    BH_TOPIC,
    NS_TOPIC,
    SEND_TIMEOUT_MS,
    Factory,
    Registrar,
    SendRecord,
    blackhole_client_and_broker,
    broker_conf,
    check_all_stored,
    check_blackhole,
    check_partition_answers,
    check_stores,
    create_topic,
    ha_settings,
    partition_broker_and_namesrv,
    partition_master_and_slave,
    partition_summary,
    wait_caught_up,
    wait_consumed,
)
from tests.interop.stock import DriverProcess, JavaServer
from tests.procs import ServerProcess, namesrv_process

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]


@pytest.mark.parametrize("role", ["SYNC_MASTER", "ASYNC_MASTER"])
async def test_stock_master_slave_partition(namesrv: ServerProcess,
                                            stock_broker: Callable[..., JavaServer], role: str) -> None:
    sync = role == "SYNC_MASTER"
    master = stock_broker(namesrv.address, name="stock-master", conf=ha_settings(role, 0, "ha-fault"))
    with ThreadedFaultProxy(f"127.0.0.1:{master.port + 1}") as proxy:
        slave = stock_broker(namesrv.address, name="stock-slave",
                             conf=ha_settings("SLAVE", 1, "ha-fault") | {"haMasterAddress": proxy.address})
        client = RemotingClient()
        try:
            report = await partition_master_and_slave(client, master.address, slave.address, proxy, sync)
            end = await wait_caught_up(client, master.address, slave.address)
        finally:
            await client.close()
        stats = proxy.stats()
        print(f"stock 4.9.7, {role}: {partition_summary(report)}; proxy {stats}")
    check_partition_answers(report, sync)
    check_stores(report, master.home / "store", slave.home / "store", end)





class DriverSendLog:
    """The SendRecords of a stock produce-paced driver, read from its events."""

    def __init__(self, driver: DriverProcess, stop_file: Path) -> None:
        self.driver = driver
        self.stop_file = stop_file

    def records(self) -> list[SendRecord]:
        out = []
        for e in self.driver.events():
            if e.get("event") == "sent":
                out.append(SendRecord(e["index"], e["key"], e["brokerName"], e["ms"] / 1000))
            elif e.get("event") == "send-error":
                out.append(SendRecord(e["index"], e["key"], None, e["ms"] / 1000, e.get("error")))
        return out

    def stop(self) -> list[SendRecord]:
        self.stop_file.touch()
        result = self.driver.wait(60).check()
        assert result.done is not None
        return self.records()


def paced_driver(java_driver: Callable[..., DriverProcess], tmp_path: Path, namesrv: str, topic: str,
                 *, name: str, timeout_ms: int, **options: object) -> DriverSendLog:
    stop_file = tmp_path / f"{name}.stop"
    driver = java_driver("produce-paced", namesrv=namesrv, name=name, topic=topic, group=f"{name}-pg",
                         count=20000, interval_ms=50, timeout_ms=timeout_ms, stop_file=str(stop_file),
                         **options)
    driver.wait_for("started", timeout=60)
    return DriverSendLog(driver, stop_file)


STOCK_EXPIRY_S = 120  # RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME
STOCK_SCAN_S = 10


@pytest.mark.timeout(450)
async def test_stock_broker_namesrv_partition(tmp_path: Path, stock_namesrv: Callable[..., JavaServer],
                                              stock_broker: Callable[..., JavaServer],
                                              java_driver: Callable[..., DriverProcess]) -> None:
    namesrv = stock_namesrv()
    with ThreadedFaultProxy(namesrv.address) as proxy:
        a = stock_broker(proxy.address, name="broker-a", conf=broker_conf("broker-a"))
        b = stock_broker(namesrv.address, name="broker-b", conf=broker_conf("broker-b"))
        client = RemotingClient()
        try:
            for addr in (a.address, b.address):
                await create_topic(client, addr, NS_TOPIC)
            sends = paced_driver(java_driver, tmp_path, namesrv.address, NS_TOPIC, name="ns-paced",
                                 timeout_ms=360_000)
            report = await partition_broker_and_namesrv(
                client, namesrv.address, proxy, sends, expire_within=STOCK_EXPIRY_S + STOCK_SCAN_S + 30)
            report.sends = sends.stop()
            print(f"stock 4.9.7: {report.describe()}; proxy {proxy.stats()}")
            assert not report.failures(), report.describe()
            assert report.expired_after >= STOCK_EXPIRY_S - 10, report.describe()  # registerNameServerPeriod
            await check_all_stored(client, {"broker-a": a.address, "broker-b": b.address}, report.sends)
        finally:
            await client.close()


class DriverReceipts:
    """The keys a stock push consumer driver received, one per delivery."""

    def __init__(self, driver: DriverProcess) -> None:
        self.driver = driver

    def keys(self) -> list[str]:
        return [e.get("keys") or "" for e in self.driver.events() if e.get("event") == "received"]


async def test_stock_client_broker_blackhole(tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
                                             stock_broker: Callable[..., JavaServer],
                                             java_driver: Callable[..., DriverProcess]) -> None:
    hidden = server_factory(namesrv_process(tmp_path, name="namesrv-a"))  # broker-a's own
    a = stock_broker(hidden.address, name="broker-a", conf=broker_conf("broker-a"))
    b = stock_broker(namesrv.address, name="broker-b", conf=broker_conf("broker-b"))
    client = RemotingClient()
    with ThreadedFaultProxy(a.address) as proxy:
        for addr in (a.address, b.address):
            await create_topic(client, addr, BH_TOPIC)
        registrar = await Registrar(namesrv.address, a.address, proxy.address, "broker-a").start()
        consumer = java_driver("consume-push", namesrv=namesrv.address, name="bh-consumer", topic=BH_TOPIC,
                               group="FaultCG", count=0, timeout_ms=240_000, pull_batch_size=32)
        receipts = DriverReceipts(consumer)
        sends = paced_driver(java_driver, tmp_path, namesrv.address, BH_TOPIC, name="bh-paced",
                             timeout_ms=240_000, send_timeout_ms=SEND_TIMEOUT_MS)
        try:
            report = await blackhole_client_and_broker(proxy, sends, receipts)
            report.sends = sends.stop()
            await wait_consumed(report, receipts)
        finally:
            consumer.kill()
            consumer.wait(10)
            await registrar.stop()
            await client.close()
        print(f"stock 4.9.7: {report.describe()}; proxy {proxy.stats()}")
    check_blackhole(report)
