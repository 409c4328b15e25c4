"""DLedger leadership on request, preferred leader and the Raft metrics, with real brokers.

* ``mqadmin leadershipTransfer`` moves the leadership of a three-node group of ours to the
  member named: it answers SUCCESS once that member won the next term, the member registers
  as the master, sends go on through it and nothing acknowledged is lost; each member's
  ``/metrics`` shows its role, the term, the leader changes and the transfer.
* A transfer to a member that is down fails (exit 1) and the leader keeps leading and
  taking sends.
* ``preferredLeaderId=n2``: n0 and n1 start alone and elect one of them; n2 starts later,
  catches up, and the leader hands over to it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from aiorocketmq.client import ClientConfig, Message, Producer
from aiorocketmq.client.admin import cli
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_dledger import (
    GROUP,
    QUEUES,
    TOPIC,
    Factory,
    Node,
    keys_on,
    make_nodes,
    node_conf,
    topic_known,
    wait_registered,
)
from tests.integration.test_metrics import metrics_address, sample, scrape
from tests.procs import ServerProcess, broker_process

pytestmark = pytest.mark.timeout(300)


def start(tmp: Path, namesrv: str, node: Node, nodes: list[Node], factory: Factory,
          **extra_conf: str) -> str:
    """Start ``node``; its metrics address."""
    conf = node_conf(node, nodes)
    conf.update(extra_conf)
    node.proc = factory(broker_process(tmp, namesrv, name=f"dledger-{node.self_id}", conf=conf,
                                       extra=("--metrics-port", "0")))
    return metrics_address(node.proc)


def peers_of(nodes: list[Node]) -> str:
    return ";".join(f"{x.self_id}-127.0.0.1:{x.peer_port}" for x in nodes)


async def send_some(producer: Producer, prefix: str, n: int, acked: set[str]) -> None:
    sent = 0
    deadline = time.monotonic() + 60
    while sent < n:
        key = f"{prefix}-{sent}"
        try:
            await producer.send(Message(TOPIC, key.encode(), keys=key))
        except RocketMQError:
            assert time.monotonic() < deadline, "sends never resumed"
            await asyncio.sleep(0.1)
            continue
        acked.add(key)
        sent += 1


async def test_leadership_transfer_by_mqadmin(tmp_path: Path, namesrv: ServerProcess,
                                              server_factory: Factory) -> None:
    nodes = make_nodes()
    metrics = {n.self_id: start(tmp_path, namesrv.address, n, nodes, server_factory) for n in nodes}
    admin = MQAdmin(namesrv.address)
    client = RemotingClient()
    producer = Producer("DLedgerTransferProducer", config=ClientConfig(
        namesrv_addr=namesrv.address, poll_name_server_interval_ms=500),
        retry_times_when_send_failed=2, send_msg_timeout_ms=3000)
    try:
        by_addr = {n.addr: n for n in nodes}
        addrs = await wait_registered(admin, lambda a: 0 in a and len(a) == 3, 60,
                                      "a master and two followers")
        leader = by_addr[addrs[0]]
        await admin.create_topic(leader.addr, TopicConfig(TOPIC, QUEUES, QUEUES))
        for node in nodes:
            if node is not leader:
                await topic_known(admin, node.addr, 30)
        await producer.start()
        acked: set[str] = set()
        await send_some(producer, "before", 50, acked)
        fams = await scrape(metrics[leader.self_id])
        term = int(sample(fams, "rocketmq_dledger_term"))
        assert sample(fams, "rocketmq_dledger_role", role="LEADER") == 1
        assert sample(fams, "rocketmq_dledger_last_election_term") == term
        assert sample(fams, "rocketmq_dledger_last_election_seconds") >= 0

        target = next(n for n in nodes if n is not leader)
        argv = ["leadershipTransfer", "-n", namesrv.address, "-g", GROUP, "-p", peers_of(nodes),
                "-t", target.self_id, "--json"]
        code = await asyncio.to_thread(cli.main, argv)
        assert code == 0
        await wait_registered(admin, lambda a: a.get(0) == target.addr and len(a) == 3, 60,
                              f"{target.self_id} registered as the master")
        fams = await scrape(metrics[target.self_id])
        assert sample(fams, "rocketmq_dledger_role", role="LEADER") == 1
        assert sample(fams, "rocketmq_dledger_term") == term + 1
        assert sample(fams, "rocketmq_dledger_last_election_term") == term + 1
        assert sample(fams, "rocketmq_dledger_leader_changes_total") >= 2
        old = await scrape(metrics[leader.self_id])
        assert sample(old, "rocketmq_dledger_role", role="FOLLOWER") == 1
        assert sample(old, "rocketmq_dledger_leadership_transfers_total") == 1
        await send_some(producer, "after", 50, acked)

        # To a member that is down: refused, and the leader keeps leading.
        down = next(n for n in nodes if n is not target)
        assert down.proc is not None
        down.proc.kill()
        argv = ["leadershipTransfer", "-n", namesrv.address, "-g", GROUP, "-p", peers_of(nodes),
                "-t", down.self_id, "-l", target.self_id]
        assert await asyncio.to_thread(cli.main, argv) == 1
        await send_some(producer, "refused", 20, acked)
        addrs = await wait_registered(admin, lambda a: 0 in a, 10, "a master")
        assert addrs[0] == target.addr
        view = await keys_on(client, target.addr)
        assert acked <= set(view), sorted(acked - set(view))[:5]
    finally:
        await producer.shutdown()
        await client.close()
        await admin.close()


async def test_preferred_leader_takes_over_once_caught_up(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    nodes = make_nodes()
    n0, n1, n2 = nodes
    metrics = {}
    for node in (n0, n1):
        metrics[node.self_id] = start(tmp_path, namesrv.address, node, nodes, server_factory,
                                      preferredLeaderId="n2")
    admin = MQAdmin(namesrv.address)
    client = RemotingClient()
    producer = Producer("DLedgerPreferredProducer", config=ClientConfig(
        namesrv_addr=namesrv.address, poll_name_server_interval_ms=500),
        retry_times_when_send_failed=2, send_msg_timeout_ms=3000)
    try:
        addrs = await wait_registered(admin, lambda a: 0 in a, 60, "a master of n0 and n1")
        first = n0 if addrs[0] == n0.addr else n1
        assert addrs[0] == first.addr
        await admin.create_topic(first.addr, TopicConfig(TOPIC, QUEUES, QUEUES))
        await producer.start()
        acked: set[str] = set()
        await send_some(producer, "two", 100, acked)
        metrics[n2.self_id] = start(tmp_path, namesrv.address, n2, nodes, server_factory,
                                    preferredLeaderId="n2")
        await wait_registered(admin, lambda a: a.get(0) == n2.addr and len(a) == 3, 60,
                              "n2 registered as the master")
        old = await scrape(metrics[first.self_id])
        assert sample(old, "rocketmq_dledger_leadership_transfers_total") >= 1
        await send_some(producer, "three", 50, acked)
        deadline = time.monotonic() + 30
        while True:
            view = await keys_on(client, n2.addr)
            if acked <= set(view):
                break
            assert time.monotonic() < deadline, sorted(acked - set(view))[:5]
            await asyncio.sleep(0.5)
    finally:
        await producer.shutdown()
        await client.close()
        await admin.close()
