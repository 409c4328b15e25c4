"""Network faults between our processes, through tests/faultproxy.py, on 127.0.0.1.

1. Master <-> slave partition (the slave's HA connection, ``haMasterAddress`` = the proxy,
   black-holed): a SYNC_MASTER answers every send, FLUSH_SLAVE_TIMEOUT after
   ``slaveTimeout`` while its slave's connection is up, SLAVE_NOT_AVAILABLE once it expired
   the connection (``haHousekeepingInterval`` without an offset report); an ASYNC_MASTER
   answers SEND_OK throughout. After the heal the slave catches up: its commit log is
   byte-identical to the master's and every message answered SEND_OK is at its offset on
   both.
2. Broker <-> nameserver partition (broker-a's ``namesrvAddr`` = the proxy, black-holed;
   broker-b registers directly): the nameserver keeps broker-a for
   ``brokerChannelExpiredTime`` after its last registration, then drops it from the route;
   a producer sending all along moves to broker-b and no send() fails; after the heal
   broker-a registers again (``registerNameServerPeriod``) and the producer sends to it
   again. Every message answered SEND_OK is stored.
3. Client <-> broker black hole (broker-a's address in the clients' route is the proxy; the
   sockets stay open, nothing arrives, for longer than a pull's 30 s timeout): each send()
   that picks broker-a times out at the producer's send timeout, never later, and broker-b
   goes on taking the others; the push consumer's pulls from broker-a fail and resume
   within seconds of the heal; every message acknowledged to the producer is consumed, and
   duplicates stay within what at-least-once allows.

How clients reach broker-a through the proxy: broker-a registers itself with a nameserver
no client uses, and a registrar in the test registers it with the clients' nameserver
under the proxy's address, with the topic table it reads from broker-a (as a broker behind
a NAT or a load balancer advertises the address clients can reach). broker-b registers
directly. The same works for stock brokers.

``tests/interop/test_stock_faults_network.py`` runs the same scenarios on stock 4.9.7 (its
docstring says what stock does); each scenario is one function used by both.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pytest

from aiorocketmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from aiorocketmq.protocol.bodies import (
    KVTable,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RemotingError
from aiorocketmq.protocol.headers import RegisterBrokerRequestHeader
from aiorocketmq.protocol.message import decode_message, decode_messages, decode_offset_msg_id
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.faultproxy import ThreadedFaultProxy
from tests.integration.test_broker_send_pull import pull, pull_header, route, send
from tests.interop.stock import free_port
from tests.logs import capture_logs
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

Factory = Callable[[ServerProcess], ServerProcess]

# -- 1. master <-> slave partition ------------------------------------------------------------

SEGMENT = 1024 * 1024
SLAVE_TIMEOUT_MS = 3000
HOUSEKEEPING_MS = 5000
HA_TOPIC = "FaultHa"
SEND_TIMEOUT = 15.0  # a hang detector: every answer is due after slaveTimeout or syncFlushTimeout
MAX_SENDS = 400  # in the partition, per scenario


def ha_settings(role: str, broker_id: int, name: str) -> dict[str, str]:
    """The same replication settings for our brokers and stock ones."""
    return {"brokerName": name, "brokerRole": role, "brokerId": str(broker_id),
            "mappedFileSizeCommitLog": str(SEGMENT), "haSendHeartbeatInterval": "1000",
            "haHousekeepingInterval": str(HOUSEKEEPING_MS), "slaveTimeout": str(SLAVE_TIMEOUT_MS),
            "syncFlushTimeout": "5000"}


@dataclass
class Answer:
    code: int
    seconds: float
    index: int


@dataclass
class PartitionReport:
    """What a master answered before, during and after its slave's partition."""

    during: list[Answer] = field(default_factory=list)
    acked: dict[int, bytes] = field(default_factory=dict)  # commit-log offset -> body of SEND_OK

    def pattern(self) -> list[int]:
        """The codes answered in the partition, repeats folded: [FLUSH_SLAVE_TIMEOUT,
        SLAVE_NOT_AVAILABLE] for a SYNC_MASTER."""
        out: list[int] = []
        for a in self.during:
            if not out or out[-1] != a.code:
                out.append(a.code)
        return out

    def describe(self) -> str:
        """``code x count (slowest answer)`` per run of equal answers."""
        runs: list[list[Answer]] = []
        for a in self.during:
            if runs and runs[-1][0].code == a.code:
                runs[-1].append(a)
            else:
                runs.append([a])
        return "; ".join(f"code {r[0].code} x{len(r)} (slowest {max(a.seconds for a in r):.2f}s)"
                         for r in runs)


def body_of(i: int) -> bytes:
    return (f"fault-{i}-".encode() * (1 + (i * 37) % 40))[: 16 + (i * 131) % 700]


async def timed_send(client: RemotingClient, master: str, i: int) -> tuple[int, float, str | None]:
    began = time.monotonic()
    try:
        r = await send(client, master, HA_TOPIC, body_of(i), queue_id=i % 4,
                       props={"WAIT": "true", "KEYS": f"k{i}"})
    except RemotingError as exc:
        raise AssertionError(f"send {i} got no answer: {exc}") from exc
    seconds = time.monotonic() - began
    assert seconds < SEND_TIMEOUT
    msg_id = (r.ext_fields or {}).get("msgId") if r.code == ResponseCode.SUCCESS else None
    return r.code, seconds, msg_id


async def send_until_attached(client: RemotingClient, master: str, report: PartitionReport,
                              first: int, timeout: float = 60) -> int:
    """Send until a SYNC_MASTER answers SEND_OK (its slave attached and acknowledging);
    the index of the next message."""
    deadline = time.monotonic() + timeout
    i = first
    while True:
        code, _, msg_id = await timed_send(client, master, i)
        if code == ResponseCode.SUCCESS:
            assert msg_id
            report.acked[decode_offset_msg_id(msg_id)[1]] = body_of(i)
            return i + 1
        assert code in (ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT), code
        assert time.monotonic() < deadline, "the slave never attached"
        i += 1
        await asyncio.sleep(0.2)


async def send_acked(client: RemotingClient, master: str, report: PartitionReport, first: int,
                     count: int) -> int:
    for i in range(first, first + count):
        code, _, msg_id = await timed_send(client, master, i)
        assert code == ResponseCode.SUCCESS, (i, code)
        assert msg_id
        report.acked[decode_offset_msg_id(msg_id)[1]] = body_of(i)
    return first + count


async def partition_master_and_slave(client: RemotingClient, master: str, slave: str,
                                     proxy: ThreadedFaultProxy, sync: bool) -> PartitionReport:
    """Traffic before, during and after a black hole on the slave's HA connection; returns
    what the master answered. The caller compares the stores."""
    report = PartitionReport()
    i = await send_until_attached(client, master, report, 0) if sync else 0
    i = await send_acked(client, master, report, i, 40)
    await wait_caught_up(client, master, slave)

    proxy.blackhole()
    # Long enough for both sides to give the connection up (no offset report, no frame, for
    # haHousekeepingInterval) and for the slave to dial again, into the black hole.
    ends = time.monotonic() + HOUSEKEEPING_MS / 1000 + 4
    for _ in range(MAX_SENDS):
        if time.monotonic() > ends:
            break
        code, seconds, msg_id = await timed_send(client, master, i)
        report.during.append(Answer(code, seconds, i))
        if msg_id is not None:
            report.acked[decode_offset_msg_id(msg_id)[1]] = body_of(i)
        i += 1
        await asyncio.sleep(0.05)
    assert time.monotonic() > ends, f"{MAX_SENDS} sends before the partition ended"
    assert proxy.stats().held_down > 0, "the master sent nothing into the partition"

    proxy.heal()
    if sync:
        i = await send_until_attached(client, master, report, i)
    i = await send_acked(client, master, report, i, 40)
    await wait_caught_up(client, master, slave)
    return report


async def max_phy(client: RemotingClient, addr: str) -> int:
    """The commit log's max offset (GET_BROKER_RUNTIME_INFO); -1 while a stock broker with
    an empty store fails the call (``LinkedList.getLast`` on no segment)."""
    r = await client.invoke(addr, RemotingCommand.create_request(RequestCode.GET_BROKER_RUNTIME_INFO),
                            SEND_TIMEOUT)
    if r.code != ResponseCode.SUCCESS:
        return -1
    return int(KVTable.decode(r.body or b"").table["commitLogMaxOffset"])


async def wait_caught_up(client: RemotingClient, master: str, slave: str, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while True:
        m, s = await max_phy(client, master), await max_phy(client, slave)
        if m == s and m > 0:
            return m
        assert time.monotonic() < deadline, f"slave at {s}, master at {m}"
        await asyncio.sleep(0.1)


def check_partition_answers(report: PartitionReport, sync: bool) -> None:
    during = report.during
    assert during, "no send in the partition"
    if not sync:
        assert {a.code for a in during} == {ResponseCode.SUCCESS}, report.describe()
        return
    assert report.pattern() == [ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE], \
        report.describe()
    for a in during:
        if a.code == ResponseCode.FLUSH_SLAVE_TIMEOUT:  # waited for the slave, no less
            assert a.seconds >= SLAVE_TIMEOUT_MS / 1000 * 0.9, report.describe()


def commit_log(store: Path) -> dict[str, bytes]:
    d = store / "commitlog"
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def check_stores(report: PartitionReport, master_store: Path, slave_store: Path, end: int) -> None:
    """The slave's commit log is the master's, byte for byte, up to ``end`` (a segment only
    one side has must be all zeros: stock preallocates the next one); every SEND_OK is at
    its offset on both."""
    m_log, s_log = commit_log(master_store), commit_log(slave_store)
    assert set(m_log) & set(s_log), (sorted(m_log), sorted(s_log))
    for name in sorted(set(m_log) | set(s_log)):
        if name in m_log and name in s_log:
            assert m_log[name] == s_log[name], f"commit-log segment {name} differs"
        else:
            data = m_log.get(name) or s_log[name]
            assert int(name) >= end and data.count(0) == len(data), f"segment {name} on one side only"
    assert report.acked
    for log in (m_log, s_log):
        for offset, body in report.acked.items():
            start = offset - offset % SEGMENT
            msg, _ = decode_message(log[f"{start:020d}"], offset - start)
            assert msg.body == body and msg.commit_log_offset == offset


def partition_summary(report: PartitionReport) -> str:
    return f"{report.pattern()} ({report.describe()})"


@pytest.mark.parametrize("role", ["SYNC_MASTER", "ASYNC_MASTER"])
async def test_master_slave_partition(tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
                                      role: str) -> None:
    sync = role == "SYNC_MASTER"
    port = free_port(offsets=(-2, 0, 1))
    master = server_factory(broker_process(tmp_path, namesrv.address, name="master",
                                           conf=ha_settings(role, 0, "ha-fault") | {"listenPort": str(port)}))
    with ThreadedFaultProxy(f"127.0.0.1:{port + 1}") as proxy:
        slave = server_factory(broker_process(
            tmp_path, namesrv.address, name="slave",
            conf=ha_settings("SLAVE", 1, "ha-fault") | {"haMasterAddress": proxy.address}))
        client = RemotingClient()
        try:
            report = await partition_master_and_slave(client, master.address, slave.address, proxy, sync)
            end = await wait_caught_up(client, master.address, slave.address)
        finally:
            await client.close()
        print(f"ours, {role}: {partition_summary(report)}; proxy {proxy.stats()}")
    check_partition_answers(report, sync)
    check_stores(report, tmp_path / "master" / "store", tmp_path / "slave" / "store", end)





# -- producers the scenarios watch: ours in-process, stock's in a JVM (tests/interop) ----------


@dataclass(frozen=True)
class SendRecord:
    """One send() of a paced producer: ``broker`` None when it raised."""

    index: int
    key: str
    broker: str | None
    seconds: float
    error: str | None = None


class SendLog(Protocol):
    def records(self) -> list[SendRecord]: ...


class PacedProducer:
    """Our Producer sending one message every ``interval`` seconds until stopped (at most
    ``max_sends``), going on after a failed send; each send() is one SendRecord."""

    def __init__(self, namesrv: str, topic: str, *, group: str = "FaultPG", interval: float = 0.05,
                 send_timeout_ms: int = 3000, latency_fault: bool = False, max_sends: int = 4000,
                 key_prefix: str = "k-") -> None:
        self.producer = Producer(group, config=ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1",
                                                            poll_name_server_interval_ms=1000),
                                 send_msg_timeout_ms=send_timeout_ms,
                                 send_latency_fault_enable=latency_fault)
        self.topic = topic
        self.interval = interval
        self.max_sends = max_sends
        self.key_prefix = key_prefix
        self._records: list[SendRecord] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def records(self) -> list[SendRecord]:
        return list(self._records)

    async def start(self) -> PacedProducer:
        await self.producer.start()
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        for i in range(self.max_sends):
            if self._stop.is_set():
                return
            key = f"{self.key_prefix}{i}"
            began = time.monotonic()
            try:
                r = await self.producer.send(Message(self.topic, f"body-{key}".encode(), keys=key))
            except Exception as exc:  # every failure is a record
                self._records.append(SendRecord(i, key, None, time.monotonic() - began,
                                                f"{type(exc).__name__}: {exc}"))
            else:
                self._records.append(SendRecord(i, key, r.message_queue.broker_name,
                                                time.monotonic() - began))
            try:
                async with asyncio.timeout(self.interval):
                    await self._stop.wait()
            except TimeoutError:
                pass

    async def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._task is not None:
            await self._task
        await self.producer.shutdown()


async def wait_for(cond: Callable[[], object], what: str, timeout: float) -> float:
    """Poll ``cond`` (a function or coroutine function) until true; the seconds it took."""
    began = time.monotonic()
    while True:
        value = cond()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return time.monotonic() - began
        assert time.monotonic() - began < timeout, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.2)


async def route_brokers(client: RemotingClient, namesrv: str, topic: str) -> set[str]:
    r = await route(client, namesrv, topic)
    if r.code != ResponseCode.SUCCESS:
        return set()
    return {b.broker_name for b in TopicRouteData.decode(r.body or b"").broker_datas}


async def create_topic(client: RemotingClient, addr: str, topic: str, queues: int = 4) -> None:
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
           "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": "0", "order": "false"}
    r = await client.invoke(addr, RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext),
                            SEND_TIMEOUT)
    assert r.code == ResponseCode.SUCCESS, r.remark


async def stored_keys(client: RemotingClient, addr: str, topic: str, queues: int = 4) -> list[str]:
    """Every message key in ``topic`` on one broker (duplicates kept)."""
    keys: list[str] = []
    for qid in range(queues):
        offset = 0
        for _ in range(10_000):
            r = await pull(client, addr, "FaultAudit", topic, qid, offset)
            if r.code != ResponseCode.SUCCESS:
                break
            keys += [m.keys or "" for m in decode_messages(r.body)]
            offset = pull_header(r).next_begin_offset
    return keys


# -- 2. broker <-> nameserver partition --------------------------------------------------------

NS_TOPIC = "FaultNs"
REGISTER_PERIOD_MS = 10_000  # registerNameServerPeriod, the smallest a broker accepts
OUR_EXPIRY_MS = 15_000  # our nameserver's brokerChannelExpiredTime in this test


@dataclass
class NamesrvPartitionReport:
    expired_after: float = 0.0  # seconds from the black hole to broker-a leaving the route
    back_after: float = 0.0  # seconds from the heal to broker-a back in the route
    sends: list[SendRecord] = field(default_factory=list)
    to_a_while_expired: int = 0  # sends that went to broker-a after the producer saw the route

    def failures(self) -> list[SendRecord]:
        return [r for r in self.sends if r.broker is None]

    def describe(self) -> str:
        by: dict[str | None, int] = {}
        for r in self.sends:
            by[r.broker] = by.get(r.broker, 0) + 1
        return (f"broker-a expired {self.expired_after:.1f}s into the partition, back in the route "
                f"{self.back_after:.1f}s after the heal; sends per broker {by}; failed: "
                f"{[(r.index, r.error) for r in self.failures()][:5]}")


async def partition_broker_and_namesrv(client: RemotingClient, namesrv: str, proxy: ThreadedFaultProxy,
                                       sends: SendLog, expire_within: float) -> NamesrvPartitionReport:
    """broker-a's link to the nameserver black-holed until the nameserver drops it and the
    producer has moved to broker-b, then healed until the producer sends to broker-a again."""
    report = NamesrvPartitionReport()
    await wait_for(lambda: route_brokers(client, namesrv, NS_TOPIC), "a route", 60)
    await wait_for(lambda: {"broker-a", "broker-b"} <= {r.broker for r in sends.records()[-20:]},
                   "sends to both brokers", 60)

    proxy.blackhole()
    report.expired_after = await wait_for(
        lambda: _without_a(client, namesrv), "the nameserver to drop broker-a", expire_within)
    expired_at = len(sends.records())
    # The producer follows the route (1 s poll): then every send goes to broker-b.
    await wait_for(lambda: _only_b_since(sends, expired_at, 20), "the producer to move to broker-b", 30)
    moved = sends.records()[expired_at:]
    last_a = max((n for n, r in enumerate(moved) if r.broker == "broker-a"), default=-1)
    report.to_a_while_expired = last_a + 1
    assert proxy.stats().held_up > 0, "broker-a sent nothing into the partition"

    proxy.heal()
    healed_at = len(sends.records())
    report.back_after = await wait_for(
        lambda: _with_a(client, namesrv), "broker-a back in the route", REGISTER_PERIOD_MS / 1000 + 20)
    await wait_for(lambda: any(r.broker == "broker-a" for r in sends.records()[healed_at:]),
                   "a send to broker-a after the heal", 30)
    return report


async def _without_a(client: RemotingClient, namesrv: str) -> bool:
    return (await route_brokers(client, namesrv, NS_TOPIC)) == {"broker-b"}


async def _with_a(client: RemotingClient, namesrv: str) -> bool:
    return (await route_brokers(client, namesrv, NS_TOPIC)) == {"broker-a", "broker-b"}


def _only_b_since(sends: SendLog, first: int, count: int) -> bool:
    tail = sends.records()[first:]
    return len(tail) >= count and all(r.broker == "broker-b" for r in tail[-count:])


async def check_all_stored(client: RemotingClient, brokers: dict[str, str], sends: list[SendRecord]) -> None:
    """Every send answered SEND_OK is in its broker's queues."""
    stored = {name: set(await stored_keys(client, addr, NS_TOPIC)) for name, addr in brokers.items()}
    missing = [r.key for r in sends if r.broker is not None and r.key not in stored[r.broker]]
    assert not missing, f"{len(missing)} acknowledged messages not stored: {missing[:10]}"


def broker_conf(name: str) -> dict[str, str]:
    return {"brokerName": name, "registerNameServerPeriod": str(REGISTER_PERIOD_MS),
            "autoCreateTopicEnable": "false"}


async def test_broker_namesrv_partition(tmp_path: Path, server_factory: Factory) -> None:
    namesrv = server_factory(namesrv_process(tmp_path, "--broker-expired-ms", str(OUR_EXPIRY_MS),
                                             "--scan-interval-ms", "1000"))
    with ThreadedFaultProxy(namesrv.address) as proxy:
        a = server_factory(broker_process(tmp_path, proxy.address, name="broker-a", conf=broker_conf("broker-a")))
        b = server_factory(broker_process(tmp_path, namesrv.address, name="broker-b", conf=broker_conf("broker-b")))
        client = RemotingClient()
        producer: PacedProducer | None = None
        try:
            for addr in (a.address, b.address):
                await create_topic(client, addr, NS_TOPIC)
            producer = await PacedProducer(namesrv.address, NS_TOPIC).start()
            report = await partition_broker_and_namesrv(client, namesrv.address, proxy, producer,
                                                        expire_within=OUR_EXPIRY_MS / 1000 + 15)
            await producer.stop()
            report.sends = producer.records()
            print(f"ours: {report.describe()}; proxy {proxy.stats()}")
            assert not report.failures(), report.describe()
            # Not before brokerChannelExpiredTime after its last registration (at most one
            # period before the black hole).
            assert report.expired_after >= (OUR_EXPIRY_MS - REGISTER_PERIOD_MS) / 1000, report.describe()
            await check_all_stored(client, {"broker-a": a.address, "broker-b": b.address}, report.sends)
        finally:
            if producer is not None:
                await producer.stop()
            await client.close()


# -- 3. client <-> broker black hole ------------------------------------------------------------

BH_TOPIC = "FaultBh"
BLACKHOLE_S = 40.0  # longer than a pull's timeout (30 s) and many send timeouts
SEND_TIMEOUT_MS = 3000
PULL_BATCH = 32
RESUME_WITHIN = 30.0


class Registrar:
    """Registers ``broker_name`` (master) with ``namesrv`` under ``advertised`` every
    ``period`` seconds, with the topic table read from the broker at ``real``."""

    def __init__(self, namesrv: str, real: str, advertised: str, broker_name: str,
                 period: float = 3.0) -> None:
        self.namesrv, self.real, self.advertised, self.broker_name = namesrv, real, advertised, broker_name
        self.period = period
        self.client = RemotingClient()
        self.registered = 0
        self._task: asyncio.Task[None] | None = None

    async def register(self) -> None:
        r = await self.client.invoke(self.real, RemotingCommand.create_request(RequestCode.GET_ALL_TOPIC_CONFIG),
                                     SEND_TIMEOUT)
        assert r.code == ResponseCode.SUCCESS, r.remark
        body = RegisterBrokerBody(TopicConfigSerializeWrapper.decode(r.body or b""), []).encode()
        header = RegisterBrokerRequestHeader(
            broker_name=self.broker_name, broker_addr=self.advertised, cluster_name="DefaultCluster",
            ha_server_addr=self.advertised, broker_id=0, body_crc32=zlib.crc32(body) & 0x7FFFFFFF)
        r = await self.client.invoke(self.namesrv, RemotingCommand.create_request(
            RequestCode.REGISTER_BROKER, header.to_ext_fields(), body), SEND_TIMEOUT)
        assert r.code == ResponseCode.SUCCESS, r.remark
        self.registered += 1

    async def start(self) -> Registrar:
        await self.register()
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        for _ in range(10_000):
            await asyncio.sleep(self.period)
            await self.register()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.client.close()


class Receipts(Protocol):
    def keys(self) -> list[str]: ...


class OurConsumer:
    """Our PushConsumer recording every delivery's key."""

    def __init__(self, namesrv: str, topic: str, group: str = "FaultCG") -> None:
        self.consumer = PushConsumer(group, config=ClientConfig(
            namesrv_addr=namesrv, client_ip="127.0.0.1", poll_name_server_interval_ms=1000,
            heartbeat_broker_interval_ms=5000), consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=PULL_BATCH)
        self.consumer.subscribe(topic, "*")
        self.consumer.register_message_listener(self._listener)
        self._keys: list[str] = []

    async def _listener(self, msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        self._keys += [m.keys or "" for m in msgs]
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def keys(self) -> list[str]:
        return list(self._keys)

    async def start(self) -> OurConsumer:
        await self.consumer.start()
        return self

    async def stop(self) -> None:
        await self.consumer.shutdown()


@dataclass
class BlackholeReport:
    sends: list[SendRecord] = field(default_factory=list)
    during: list[SendRecord] = field(default_factory=list)  # sends begun in the black hole
    received: list[str] = field(default_factory=list)
    received_during: int = 0  # deliveries in the black hole (from broker-b)
    a_after_heal: list[str] = field(default_factory=list)  # keys acknowledged by broker-a after it
    resumed_after: float = 0.0  # seconds from those acknowledgements to their consumption

    def failures(self) -> list[SendRecord]:
        return [r for r in self.sends if r.broker is None]

    def duplicates(self) -> int:
        return len(self.received) - len(set(self.received))

    def describe(self) -> str:
        by: dict[str | None, int] = {}
        for r in self.during:
            by[r.broker] = by.get(r.broker, 0) + 1
        failed = self.failures()
        slowest = max((r.seconds for r in self.sends), default=0.0)
        return (f"{len(self.sends)} sends, {len(failed)} failed "
                f"(took {sorted({round(r.seconds, 1) for r in failed})} s: "
                f"{sorted({(r.error or '')[:60] for r in failed})[:3]}); in the black hole per broker {by}; "
                f"slowest send {slowest:.2f}s; {len(self.received)} deliveries of "
                f"{len(set(self.received))} keys ({self.duplicates()} duplicates), "
                f"{self.received_during} during the black hole; "
                f"{len(self.a_after_heal)} acknowledged by broker-a after the heal, consumed "
                f"{self.resumed_after:.1f}s later")


async def blackhole_client_and_broker(proxy: ThreadedFaultProxy, sends: SendLog,
                                      receipts: Receipts) -> BlackholeReport:
    """Traffic through both brokers, then broker-a black-holed for BLACKHOLE_S, then healed
    until sends to broker-a are acknowledged and consumed again. The caller stops the
    producer, waits for the consumer and checks."""
    report = BlackholeReport()
    await wait_for(lambda: {"broker-a", "broker-b"} <= {r.broker for r in sends.records()[-20:]},
                   "sends to both brokers", 90)
    await wait_for(lambda: _consumed_from_both(sends, receipts), "the consumer on both brokers", 90)

    proxy.blackhole()
    began = len(sends.records())
    received_before = len(receipts.keys())
    await asyncio.sleep(BLACKHOLE_S)
    report.received_during = len(receipts.keys()) - received_before
    assert proxy.stats().held_up > 0, "the clients sent broker-a nothing in the black hole"

    proxy.heal()
    healed = len(sends.records())
    report.during = sends.records()[began:healed]
    await wait_for(lambda: len([r for r in sends.records()[healed:] if r.broker == "broker-a"]) >= 10,
                   "sends to broker-a after the heal", 60)
    report.a_after_heal = [r.key for r in sends.records()[healed:] if r.broker == "broker-a"]
    # The consumer pulls from broker-a again: a failed pull is retried after
    # pullTimeDelayMillsWhenException, not left to the rebalance's 120 s idle-queue expiry.
    report.resumed_after = await wait_for(lambda: set(report.a_after_heal) <= set(receipts.keys()),
                                          "the consumer to resume on broker-a", RESUME_WITHIN)
    return report


def _consumed_from_both(sends: SendLog, receipts: Receipts) -> bool:
    got = set(receipts.keys())
    return all(any(r.key in got for r in sends.records() if r.broker == name)
               for name in ("broker-a", "broker-b"))


async def wait_consumed(report: BlackholeReport, receipts: Receipts, timeout: float = 90) -> None:
    acked = {r.key for r in report.sends if r.broker is not None}
    await wait_for(lambda: acked <= set(receipts.keys()), "every acknowledged message consumed", timeout)
    report.received = receipts.keys()


def check_blackhole(report: BlackholeReport, send_timeout_ms: int = SEND_TIMEOUT_MS) -> None:
    timeout = send_timeout_ms / 1000
    assert report.during, "no send in the black hole"
    for r in report.sends:
        # A hang detector: the producer's budget covers every attempt of a send().
        assert r.seconds < 2 * timeout, (r, report.describe())
    for r in report.failures():
        assert r.seconds >= 0.9 * timeout, (r, report.describe())  # timed out, not refused early
    # broker-b went on taking sends and the consumer went on with broker-b's messages.
    assert any(r.broker == "broker-b" for r in report.during), report.describe()
    assert report.received_during > 0, report.describe()
    # At-least-once: a key is delivered again only when a send's answer was lost (it may be
    # stored without an acknowledgement) or a consumed batch's offset was not committed.
    assert report.duplicates() <= len(report.failures()) + 4 * PULL_BATCH, report.describe()


async def test_client_broker_blackhole(tmp_path: Path, server_factory: Factory) -> None:
    hidden = server_factory(namesrv_process(tmp_path, name="namesrv-a"))  # broker-a's own
    namesrv = server_factory(namesrv_process(tmp_path))
    a = server_factory(broker_process(tmp_path, hidden.address, name="broker-a", conf=broker_conf("broker-a")))
    b = server_factory(broker_process(tmp_path, namesrv.address, name="broker-b", conf=broker_conf("broker-b")))
    client = RemotingClient()
    with ThreadedFaultProxy(a.address) as proxy:
        for addr in (a.address, b.address):
            await create_topic(client, addr, BH_TOPIC)
        registrar = await Registrar(namesrv.address, a.address, proxy.address, "broker-a").start()
        consumer = await OurConsumer(namesrv.address, BH_TOPIC).start()
        producer = await PacedProducer(namesrv.address, BH_TOPIC, send_timeout_ms=SEND_TIMEOUT_MS).start()
        try:
            with capture_logs("aiorocketmq.client.push_consumer") as events:
                report = await blackhole_client_and_broker(proxy, producer, consumer)
                await producer.stop()
                report.sends = producer.records()
                await wait_consumed(report, consumer)
        finally:
            await producer.stop()
            await consumer.stop()
            await registrar.stop()
            await client.close()
        failed_pulls = [e["error"] for e in events if e["event"] == "client.push_consumer.pull_exception"
                        and "broker-a" in e["mq"]]
        print(f"ours: {report.describe()}; {len(failed_pulls)} failed pulls from broker-a "
              f"({sorted({e.split('(')[0] for e in failed_pulls})}); proxy {proxy.stats()}")
    check_blackhole(report)
    assert failed_pulls, "no pull from broker-a failed in the black hole"
