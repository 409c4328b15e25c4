"""Master/slave replication between our brokers (server/store/ha), on 127.0.0.1.

A SYNC_MASTER and a SLAVE of the same brokerName: the slave finds the master's HA address
through the nameserver, its commit log becomes byte-identical to the master's (starting at
the master's last segment when it joins late, as upstream), its consume queues give the
same offsets, it refuses sends, and the master answers SEND_OK only with the slave
attached, SLAVE_NOT_AVAILABLE once it is gone.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.protocol.bodies import KVTable
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.message import Message, decode_messages, encode_batch
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import TIMEOUT, pull, pull_header, send
from tests.integration.test_metrics import matching, metrics_address, sample, scrape
from tests.procs import ServerProcess, broker_process

pytestmark = pytest.mark.timeout(120)

Factory = Callable[[ServerProcess], ServerProcess]
SEGMENT = 64 * 1024
GROUP = "broker-ha"


def ha_conf(role: str, broker_id: int, **extra: str) -> dict[str, str]:
    conf = {"brokerName": GROUP, "brokerRole": role, "brokerId": str(broker_id),
            "mappedFileSizeCommitLog": str(SEGMENT), "haSendHeartbeatInterval": "1000"}
    conf.update(extra)
    return conf


async def runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    r = await client.invoke(addr, RemotingCommand.create_request(RequestCode.GET_BROKER_RUNTIME_INFO), TIMEOUT)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return KVTable.decode(r.body or b"").table


async def max_phy(client: RemotingClient, addr: str) -> int:
    return int((await runtime_info(client, addr))["commitLogMaxOffset"])


async def wait_caught_up(client: RemotingClient, master: str, slave: str, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while True:
        m, s = await max_phy(client, master), await max_phy(client, slave)
        if m == s and m > 0:
            return m
        assert time.monotonic() < deadline, f"slave at {s}, master at {m}"
        await asyncio.sleep(0.1)


def commit_log_files(home: Path) -> dict[str, bytes]:
    d = home / "store" / "commitlog"
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


async def send_until_ok(client: RemotingClient, addr: str, topic: str, timeout: float = 20) -> None:
    """SYNC_MASTER answers SLAVE_NOT_AVAILABLE until a slave has connected."""
    deadline = time.monotonic() + timeout
    while True:
        r = await send(client, addr, topic, b"probe")
        if r.code == ResponseCode.SUCCESS:
            return
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE, (r.code, r.remark)
        assert time.monotonic() < deadline, "no slave attached"
        await asyncio.sleep(0.1)


def body_of(i: int) -> bytes:
    return (f"m{i}-".encode() * (1 + (i * 37) % 300))[: 20 + (i * 131) % 3000]


async def test_sync_master_and_slave_byte_identical(tmp_path: Path, namesrv: ServerProcess,
                                                    server_factory: Factory) -> None:
    master = server_factory(broker_process(tmp_path, namesrv.address, name="master",
                                           conf=ha_conf("SYNC_MASTER", 0),
                                           extra=("--metrics-port", "0")))
    master_metrics = metrics_address(master)
    client = RemotingClient()
    try:
        # Before any slave: SYNC_MASTER stores and answers SLAVE_NOT_AVAILABLE (isSlaveOK).
        r = await send(client, master.address, "HaTopic", b"lonely")
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
        assert r.ext_fields is not None and r.ext_fields.get("msgId")
        # Fill more than two segments so that a new slave starts at the last one.
        for i in range(300):
            r = await send(client, master.address, "HaTopic", body_of(i), queue_id=i % 4,
                           props={"WAIT": "false", "KEYS": f"k{i}", "TAGS": f"t{i % 3}"})
            assert r.code == ResponseCode.SUCCESS, r.remark
        before = await max_phy(client, master.address)
        assert before > 2 * SEGMENT
        slave = server_factory(broker_process(tmp_path, namesrv.address, name="slave",
                                              conf=ha_conf("SLAVE", 1)))
        await send_until_ok(client, master.address, "HaTopic")
        for i in range(300, 600):
            if i % 50 == 0:
                bodies = [body_of(j) for j in range(i, i + 5)]
                members = [Message("HaTopic", b, properties={"KEYS": "b"}) for b in bodies]
                r = await send(client, master.address, "HaTopic", encode_batch(members),
                               code=RequestCode.SEND_BATCH_MESSAGE, queue_id=1)
            else:
                r = await send(client, master.address, "HaTopic", body_of(i), queue_id=i % 4,
                               props={"DELAY": "2"} if i % 7 == 0 else None)
            assert r.code == ResponseCode.SUCCESS, (i, r.code, r.remark)
        end = await wait_caught_up(client, master.address, slave.address)
        assert end > before

        # Operations: the master's metrics and mqadmin clusterList show the slave.
        fams = await scrape(master_metrics)
        assert sample(fams, "rocketmq_ha_slave_connections") == 1
        assert [v for _, v in matching(fams, "rocketmq_ha_slave_lag_bytes")] == [0]
        assert sample(fams, "rocketmq_ha_sync_wait_seconds_count") >= 290
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aiorocketmq.client.admin.cli", "clusterList", "-n", namesrv.address,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 0, err
        rows = [ln.split() for ln in out.decode().splitlines() if ln.startswith(GROUP)]
        assert [GROUP, "1", "SLAVE", slave.address, "0"] in rows, out.decode()
        assert [GROUP, "0", "MASTER", master.address, "-"] in rows

        m_files = commit_log_files(tmp_path / "master")
        s_files = commit_log_files(tmp_path / "slave")
        last_start = before - before % SEGMENT
        assert min(int(n) for n in s_files) == last_start
        for name, data in s_files.items():
            assert data == m_files[name], f"segment {name} differs"
        assert set(m_files) - set(s_files) == {n for n in m_files if int(n) < last_start}

        # The slave's consume queues: same max offsets where the slave holds the data.
        for qid in range(4):
            ext = {"topic": "HaTopic", "queueId": str(qid)}
            req = RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET, ext)
            m_max = (await client.invoke(master.address, req, TIMEOUT)).ext_fields
            req = RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET, ext)
            s_max = (await client.invoke(slave.address, req, TIMEOUT)).ext_fields
            assert m_max == s_max
        # Readable from the slave: the tail of queue 1 equals the master's.
        # (the topic reaches the slave's table with SlaveSynchronize, 3 s after its start)
        m_tail = await pull(client, master.address, "Reader", "HaTopic", 1, 150)
        deadline = time.monotonic() + 15
        while (s_tail := await pull(client, slave.address, "Reader", "HaTopic", 1, 150)
               ).code == ResponseCode.TOPIC_NOT_EXIST:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        assert m_tail.code == s_tail.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_messages(s_tail.body)] == [m.body for m in decode_messages(m_tail.body)]
        assert pull_header(s_tail).next_begin_offset == pull_header(m_tail).next_begin_offset

        # The slave refuses writes (DefaultMessageStore.checkStoreStatus).
        r = await send(client, slave.address, "HaTopic", b"no")
        assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "messages are put to the slave" in (r.remark or "")

        # Slave gone: the master notices the closed connection and stops waiting for it.
        slave.stop()
        deadline = time.monotonic() + 10
        while True:
            r = await send(client, master.address, "HaTopic", b"after")
            if r.code == ResponseCode.SLAVE_NOT_AVAILABLE:
                break
            assert r.code == ResponseCode.SUCCESS
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    finally:
        await client.close()
