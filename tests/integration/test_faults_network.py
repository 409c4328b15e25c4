"""Network faults between our processes, through tests/faultproxy.py, on 127.0.0.1.

1. Master <-> slave partition (the slave's HA connection, ``haMasterAddress`` = the proxy,
   black-holed): a SYNC_MASTER answers every send, FLUSH_SLAVE_TIMEOUT after
   ``slaveTimeout`` while its slave's connection is up, SLAVE_NOT_AVAILABLE once it expired
   the connection (``haHousekeepingInterval`` without an offset report); an ASYNC_MASTER
   answers SEND_OK throughout. After the heal the slave catches up: its commit log is
   byte-identical to the master's and every message answered SEND_OK is at its offset on
   both.

``tests/interop/test_stock_faults_network.py`` runs the same scenarios on stock 4.9.7.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aiorocketmq.client.remoting import RemotingClient
from aiorocketmq.protocol.bodies import KVTable
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RemotingError
from aiorocketmq.protocol.message import decode_message, decode_offset_msg_id
from tests.faultproxy import ThreadedFaultProxy
from tests.integration.test_broker_send_pull import send
from tests.interop.stock import free_port
from tests.procs import ServerProcess, broker_process

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



