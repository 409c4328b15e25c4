"""DLedger mode end to end: three of our brokers, one ``dLegerGroup``, our nameserver.

* a leader is elected and registered as brokerId 0 (SYNC_MASTER), the followers as
  ``dLegerSelfId``'s digits + 1, and no broker opens an HA port;
* our Producer sends through the leader; the first message of the fresh group is at
  commit-log offset 0x30 (entry position 0 plus the 48-byte entry header);
* the leader is SIGKILLed in the middle of the stream: a new leader is elected and
  registered, the producer resumes, and every acknowledged message is still there;
* the killed broker restarts on its store, rejoins as a follower (its old brokerId 0 entry
  replaced by its follower id) and serves every acknowledged message from its own store, at
  the same commit-log offset as the others.

The election, failover and resume times are printed (``-s``) for the README's figures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiorocketmq.client import ClientConfig, Message, Producer
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.message import decode_messages, decode_offset_msg_id
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import pull, pull_header
from tests.interop.stock import free_port
from tests.procs import ServerProcess, broker_process

pytestmark = pytest.mark.timeout(420)

CLUSTER = "RaftCluster"
GROUP = "RaftNode00"
TOPIC = "DLedgerTopic"
QUEUES = 4
TOTAL = 2000
KILL_AFTER = 600

Factory = Callable[[ServerProcess], ServerProcess]


@dataclass
class Node:
    index: int
    listen_port: int
    peer_port: int
    proc: ServerProcess | None = None

    @property
    def self_id(self) -> str:
        return f"n{self.index}"

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    @property
    def follower_id(self) -> int:
        return self.index + 1


def make_nodes(n: int = 3) -> list[Node]:
    return [Node(i, free_port(offsets=(-2, 0, 1)), free_port()) for i in range(n)]


def node_conf(node: Node, nodes: list[Node]) -> dict[str, str]:
    peers = ";".join(f"{x.self_id}-127.0.0.1:{x.peer_port}" for x in nodes)
    return {"brokerClusterName": CLUSTER, "brokerName": GROUP, "listenPort": str(node.listen_port),
            "enableDLegerCommitLog": "true", "dLegerGroup": GROUP, "dLegerPeers": peers,
            "dLegerSelfId": node.self_id,
            # Ignored in DLedger mode, as stock ignores them.
            "brokerId": "7", "brokerRole": "ASYNC_MASTER"}


def start_node(tmp: Path, namesrv: str, node: Node, nodes: list[Node], factory: Factory) -> None:
    node.proc = factory(broker_process(tmp, namesrv, name=f"dledger-{node.self_id}",
                                       conf=node_conf(node, nodes)))


async def registered(admin: MQAdmin) -> dict[int, str]:
    info = await admin.cluster_info()
    bd = info.broker_addr_table.get(GROUP)
    return dict(bd.broker_addrs) if bd is not None else {}


async def wait_registered(admin: MQAdmin, cond: Callable[[dict[int, str]], bool], timeout: float,
                          what: str) -> dict[int, str]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            addrs = await registered(admin)
        except RocketMQError:
            addrs = {}
        if cond(addrs):
            return addrs
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}: {addrs}"
        await asyncio.sleep(0.1)


async def keys_on(client: RemotingClient, addr: str) -> dict[str, int]:
    """Every message of TOPIC on ``addr``: key -> commit-log offset."""
    out: dict[str, int] = {}
    for qid in range(QUEUES):
        offset = 0
        while True:
            r = await pull(client, addr, "DLedgerAudit", TOPIC, qid, offset, max_nums=32)
            if r.code != ResponseCode.SUCCESS:
                break
            for m in decode_messages(r.body):
                out[m.keys or ""] = m.commit_log_offset
            offset = pull_header(r).next_begin_offset
    return out


async def topic_known(admin: MQAdmin, addr: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (await admin.topic_config(addr, TOPIC)) is None:
        assert time.monotonic() < deadline, f"{addr} never learnt {TOPIC} from the master"
        await asyncio.sleep(0.2)


async def test_leader_killed_mid_stream_loses_nothing(tmp_path: Path, namesrv: ServerProcess,
                                                      server_factory: Factory) -> None:
    nodes = make_nodes()
    began = time.monotonic()
    for node in nodes:
        start_node(tmp_path, namesrv.address, node, nodes, server_factory)
    launched = time.monotonic()
    admin = MQAdmin(namesrv.address)
    client = RemotingClient()
    producer = Producer("DLedgerProducer", config=ClientConfig(
        namesrv_addr=namesrv.address, poll_name_server_interval_ms=500),
        retry_times_when_send_failed=2, send_msg_timeout_ms=3000)
    try:
        by_addr = {n.addr: n for n in nodes}
        addrs = await wait_registered(
            admin, lambda a: 0 in a and len(a) == 3, 60, "a master and two followers")
        elected = time.monotonic()
        leader = by_addr[addrs[0]]
        for node in nodes:
            if node is not leader:
                assert addrs[node.follower_id] == node.addr, addrs
        # No HA port in DLedger mode: listenPort + 1 stays free.
        for node in nodes:
            assert free_port_is_free(node.listen_port + 1)

        await admin.create_topic(leader.addr, TopicConfig(TOPIC, QUEUES, QUEUES))
        for node in nodes:
            if node is not leader:
                await topic_known(admin, node.addr, 30)
        await producer.start()

        acked: dict[str, int] = {}
        errors: list[str] = []
        first_offset: list[int] = []
        resumed_at: list[float] = []
        killed_at: list[float] = []
        kill_now = asyncio.Event()
        sent = 0

        async def worker(w: int) -> None:
            nonlocal sent
            while len(acked) < TOTAL:
                key = f"w{w}-{sent}"
                sent += 1
                try:
                    result = await producer.send(Message(TOPIC, f"body-{key}".encode(), keys=key))
                except RocketMQError as exc:
                    errors.append(type(exc).__name__)
                    await asyncio.sleep(0.05)
                    continue
                offset = decode_offset_msg_id(result.offset_msg_id)[1]
                if not acked and not first_offset:
                    first_offset.append(offset)
                acked[key] = offset
                if killed_at and not resumed_at:
                    resumed_at.append(time.monotonic())
                if len(acked) >= KILL_AFTER:
                    kill_now.set()

        workers = [asyncio.create_task(worker(w)) for w in range(4)]
        await asyncio.wait_for(kill_now.wait(), 120)
        assert leader.proc is not None
        leader.proc.kill()
        killed_at.append(time.monotonic())
        acked_before_kill = len(acked)
        addrs = await wait_registered(
            admin, lambda a: a.get(0) not in (None, leader.addr), 60, "a new master")
        new_master_at = time.monotonic()
        new_leader = by_addr[addrs[0]]
        await asyncio.wait_for(asyncio.gather(*workers), 240)
        assert first_offset == [0x30], first_offset

        # The old leader comes back on its store and follows.
        start_node(tmp_path, namesrv.address, leader, nodes, server_factory)
        await wait_registered(admin, lambda a: a.get(leader.follower_id) == leader.addr
                              and a.get(0) == new_leader.addr and len(a) == 3, 60,
                              "the old leader back as a follower")
        deadline = time.monotonic() + 60
        views: dict[str, dict[str, int]] = {}
        while True:
            views = {n.addr: await keys_on(client, n.addr) for n in nodes}
            if all(set(acked) <= set(v) for v in views.values()):
                break
            assert time.monotonic() < deadline, {a: len(set(acked) - set(v)) for a, v in views.items()}
            await asyncio.sleep(0.5)
        for addr, view in views.items():
            # Same message, same commit-log offset on every member.
            assert {k: view[k] for k in acked} == acked, addr
        print(f"\nDLedger: leader registered {elected - launched:.1f}s after the last launch "
              f"({elected - began:.1f}s after the first); killed after {acked_before_kill} acks; "
              f"new master registered {new_master_at - killed_at[0]:.1f}s after the kill; "
              f"sends resumed {resumed_at[0] - killed_at[0]:.1f}s after it; {len(acked)} acked, "
              f"0 lost; {len(errors)} failed sends ({sorted(set(errors))})")
    finally:
        await producer.shutdown()
        await client.close()
        await admin.close()


def free_port_is_free(port: int) -> bool:
    import socket
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
