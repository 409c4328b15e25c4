"""DLedger groups mixing our brokers with stock Apache RocketMQ 4.9.7 ones (dledger 0.3.1.2).

Both directions by construction, then a failover that either kind may win:

* one of ours with two stock members: the stock pair starts first and elects a stock
  leader; ours joins and follows it (stock leader -> our follower), and is SIGKILLed and
  restarted on its store under it, catching up;
* two of ours with one stock member: our pair starts first and elects one of ours; the
  stock member joins and follows (our leader -> stock follower);
* three of ours registered with stock's nameserver instead of ours.

In each group our Producer sends through the leader; the leader is then SIGKILLed, the
two left elect a new leader (ours or stock, printed), sends (four at a time, so pushes
carry batches of entries) resume, and the killed member
restarts on its store and follows. Every member, stock and ours, then serves every
acknowledged message from its own store, at the same commit-log offset; registrations are
stock's (leader brokerId 0, followers ``dLegerSelfId``'s digits + 1). All members use the
same ``mappedFileSizeCommitLog`` (a DLedger group must: entry positions are the leader's).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import ClientConfig, Message, Producer
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import MessageQueue, TopicConfig
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.message import decode_offset_msg_id
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_dledger import (
    GROUP,
    QUEUES,
    TOPIC,
    Node,
    keys_on,
    make_nodes,
    node_conf,
    topic_known,
    wait_registered,
)
from tests.interop.stock import JavaEnv, JavaServer, stock_broker_process
from tests.procs import ServerProcess, broker_process

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

SEGMENT = str(16 * 1024 * 1024)
PER_PHASE = 300

Factory = Callable[[ServerProcess], ServerProcess]


def producer_queue(queue_id: int) -> MessageQueue:
    return MessageQueue(TOPIC, GROUP, queue_id)


class Group:
    """The members of one test: which are ours, how to start and kill each."""

    def __init__(self, tmp: Path, namesrv: str, ours: set[int], factory: Factory,
                 stock_servers: list[JavaServer]) -> None:
        self.tmp = tmp
        self.namesrv = namesrv
        self.ours = ours
        self.factory = factory
        self.stock_servers = stock_servers
        self.nodes = make_nodes()
        self.procs: dict[int, ServerProcess] = {}

    def kind(self, node: Node) -> str:
        return "ours" if node.index in self.ours else "stock"

    def conf(self, node: Node) -> dict[str, str]:
        conf = node_conf(node, self.nodes)
        conf.update({"mappedFileSizeCommitLog": SEGMENT, "slaveReadEnable": "true"})
        if node.index not in self.ours:
            for key in ("brokerId", "brokerRole"):
                conf.pop(key)
        return conf

    def start(self, node: Node) -> None:
        if node.index in self.ours:
            self.procs[node.index] = self.factory(broker_process(
                self.tmp, self.namesrv, name=f"ours-{node.self_id}", conf=self.conf(node)))
        else:
            server = stock_broker_process(self.tmp, self.namesrv, name=node.self_id,
                                          conf=self.conf(node), port=node.listen_port)
            self.stock_servers.append(server)
            self.procs[node.index] = server.start()

    def kill(self, node: Node) -> None:
        self.procs[node.index].kill()


async def run_group(group: Group, first: list[int], joiner: int, *,
                    restart_joiner: bool = False) -> None:
    admin = MQAdmin(group.namesrv)
    client = RemotingClient()
    producer = Producer("DLedgerMixedProducer", config=ClientConfig(
        namesrv_addr=group.namesrv, poll_name_server_interval_ms=500),
        retry_times_when_send_failed=2, send_msg_timeout_ms=3000)
    nodes = group.nodes
    by_addr = {n.addr: n for n in nodes}
    acked: dict[str, int] = {}
    try:
        for i in first:
            group.start(nodes[i])
        addrs = await wait_registered(admin, lambda a: 0 in a and len(a) == 2, 90,
                                      "a leader among the first two")
        leader = by_addr[addrs[0]]
        assert leader.index in first
        group.start(nodes[joiner])
        addrs = await wait_registered(
            admin, lambda a: a.get(0) == leader.addr and a.get(nodes[joiner].follower_id)
            == nodes[joiner].addr, 60, "the third member as a follower")
        for node in nodes:
            if node is not leader:
                assert addrs[node.follower_id] == node.addr, addrs
        await admin.create_topic(leader.addr, TopicConfig(TOPIC, QUEUES, QUEUES))
        for node in nodes:
            if node is not leader:
                await topic_known(admin, node.addr, 40)
        await producer.start()

        sent = 0

        async def send_until(total: int) -> int:
            """Four senders at once, so the leader pushes batches of entries too."""
            failed = 0

            async def worker() -> None:
                nonlocal sent, failed
                while len(acked) < total:
                    key = f"k{sent}"
                    sent += 1
                    try:
                        r = await producer.send(Message(TOPIC, f"body-{key}".encode(), keys=key))
                    except RocketMQError:
                        failed += 1
                        await asyncio.sleep(0.1)
                        continue
                    acked[key] = decode_offset_msg_id(r.offset_msg_id)[1]

            await asyncio.gather(*(worker() for _ in range(4)))
            return failed

        async def send_batch(n: int) -> None:
            """One SEND_BATCH_MESSAGE: n entries appended at once, pushed as one batch by our
            leader (stock's pushes one by one)."""
            nonlocal sent
            keys = [f"b{sent + i}" for i in range(n)]
            sent += n
            r = await producer.send([Message(TOPIC, f"body-{k}".encode(), keys=k) for k in keys],
                                    producer_queue(0))
            assert r.offset_msg_id is not None
            offsets = [decode_offset_msg_id(i)[1] for i in r.offset_msg_id.split(",")]
            assert len(offsets) == n
            acked.update(zip(keys, offsets, strict=True))

        await send_until(PER_PHASE)
        assert min(acked.values()) == 0x30  # entry 0 of a fresh group, whoever leads
        await send_batch(16)
        if restart_joiner:
            # The joiner goes down (SIGKILL) while the other two go on, and comes back on its
            # store: the leader compares, truncates if need be, and feeds it what it missed.
            group.kill(nodes[joiner])
            await send_until(PER_PHASE + PER_PHASE // 2)
            group.start(nodes[joiner])
            await wait_registered(admin, lambda a: a.get(nodes[joiner].follower_id)
                                  == nodes[joiner].addr, 60, "the joiner back")

        group.kill(leader)
        killed = time.monotonic()
        addrs = await wait_registered(admin, lambda a: a.get(0) not in (None, leader.addr), 90,
                                      "a new leader")
        failover = time.monotonic() - killed
        new_leader = by_addr[addrs[0]]
        failed = await send_until(2 * PER_PHASE)
        await send_batch(16)

        group.start(leader)
        await wait_registered(admin, lambda a: a.get(leader.follower_id) == leader.addr
                              and a.get(0) == new_leader.addr and len(a) == 3, 90,
                              "the old leader back as a follower")
        deadline = time.monotonic() + 90
        while True:
            views = {n.addr: await keys_on(client, n.addr) for n in nodes}
            if all(set(acked) <= set(v) for v in views.values()):
                break
            assert time.monotonic() < deadline, {
                f"{group.kind(by_addr[a])} {a}": len(set(acked) - set(v)) for a, v in views.items()}
            await asyncio.sleep(1)
        for addr, view in views.items():
            assert {k: view[k] for k in acked} == acked, f"{group.kind(by_addr[addr])} {addr}"
        print(f"\nmixed DLedger group (ours: {sorted(group.ours)}): first leader "
              f"{group.kind(leader)} {leader.self_id}, new leader {group.kind(new_leader)} "
              f"{new_leader.self_id} registered {failover:.1f}s after the kill; {len(acked)} acked, "
              f"0 lost; {failed} sends failed during the failover")
    finally:
        await producer.shutdown()
        await client.close()
        await admin.close()


async def test_ours_follows_a_stock_leader(tmp_path: Path, namesrv: ServerProcess,
                                           server_factory: Factory, stock_java: JavaEnv,
                                           stock_servers: list[JavaServer]) -> None:
    """One of ours (n0) with two stock members (n1, n2): the stock pair elects the leader;
    ours is also SIGKILLed and restarted under it."""
    group = Group(tmp_path, namesrv.address, {0}, server_factory, stock_servers)
    await run_group(group, first=[1, 2], joiner=0, restart_joiner=True)


async def test_stock_follows_our_leader(tmp_path: Path, namesrv: ServerProcess,
                                        server_factory: Factory, stock_java: JavaEnv,
                                        stock_servers: list[JavaServer]) -> None:
    """Two of ours (n0, n1) with one stock member (n2): our pair elects the leader."""
    group = Group(tmp_path, namesrv.address, {0, 1}, server_factory, stock_servers)
    await run_group(group, first=[0, 1], joiner=2)


async def test_our_group_under_a_stock_namesrv(tmp_path: Path, server_factory: Factory,
                                               stock_namesrv: Callable[..., JavaServer],
                                               stock_servers: list[JavaServer]) -> None:
    """Three of ours registered with stock 4.9.7's nameserver: the leader as brokerId 0 and
    the followers as their ids, the new leader after the SIGKILL replacing its follower entry
    (stock's RouteInfoManager drops an address's old id when it comes back as 0), nothing
    acknowledged lost."""
    ns = stock_namesrv()
    group = Group(tmp_path, ns.address, {0, 1, 2}, server_factory, stock_servers)
    await run_group(group, first=[0, 1], joiner=2)
