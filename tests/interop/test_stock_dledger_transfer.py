"""Leadership transfer in a DLedger group mixing ours with stock 4.9.7 members (dledger 0.3.1.2).

Two stock members start and elect a stock leader; one of ours joins and follows. Then
``mqadmin leadershipTransfer``:

* to ours: the stock leader takes the request and sends our member the take-leadership
  request; ours stands in the next term, wins, answers SUCCESS, and the stock leader
  passes that on (stock leader -> our transferee);
* back to a stock member: our leader sends it the take-leadership request and relays its
  answer (our leader -> stock transferee).

After each, the transferee registers as the master (brokerId 0), sends go on through it,
and every member serves every acknowledged message at the same commit-log offset.
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
from aiorocketmq.protocol.message import decode_offset_msg_id
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_dledger import (
    GROUP,
    QUEUES,
    TOPIC,
    keys_on,
    topic_known,
    wait_registered,
)
from tests.interop.stock import JavaEnv, JavaServer
from tests.interop.test_stock_dledger import Factory, Group
from tests.procs import ServerProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]


async def transfer(namesrv: str, group: Group, transferee: str) -> int:
    peers = ";".join(f"{x.self_id}-127.0.0.1:{x.peer_port}" for x in group.nodes)
    argv = ["leadershipTransfer", "-n", namesrv, "-g", GROUP, "-p", peers, "-t", transferee]
    return await asyncio.to_thread(cli.main, argv)


async def test_transfers_between_stock_and_ours(tmp_path: Path, namesrv: ServerProcess,
                                                server_factory: Factory, stock_java: JavaEnv,
                                                stock_servers: list[JavaServer]) -> None:
    group = Group(tmp_path, namesrv.address, {0}, server_factory, stock_servers)
    nodes = group.nodes
    ours = nodes[0]
    admin = MQAdmin(namesrv.address)
    client = RemotingClient()
    producer = Producer("DLedgerTransferMixed", config=ClientConfig(
        namesrv_addr=namesrv.address, poll_name_server_interval_ms=500),
        retry_times_when_send_failed=2, send_msg_timeout_ms=3000)
    acked: dict[str, int] = {}
    by_addr = {n.addr: n for n in nodes}
    try:
        group.start(nodes[1])
        group.start(nodes[2])
        addrs = await wait_registered(admin, lambda a: 0 in a and len(a) == 2, 90,
                                      "a stock leader")
        stock_leader = by_addr[addrs[0]]
        group.start(ours)
        await wait_registered(admin, lambda a: a.get(ours.follower_id) == ours.addr
                              and a.get(0) == stock_leader.addr, 60, "ours following")
        await admin.create_topic(stock_leader.addr, TopicConfig(TOPIC, QUEUES, QUEUES))
        for node in nodes:
            if node is not stock_leader:
                await topic_known(admin, node.addr, 40)
        await producer.start()

        async def send(prefix: str, n: int) -> None:
            deadline = time.monotonic() + 60
            i = 0
            while i < n:
                key = f"{prefix}{i}"
                try:
                    r = await producer.send(Message(TOPIC, key.encode(), keys=key))
                except RocketMQError:
                    assert time.monotonic() < deadline, "sends never resumed"
                    await asyncio.sleep(0.1)
                    continue
                acked[key] = decode_offset_msg_id(r.offset_msg_id)[1]
                i += 1

        await send("s", 100)
        # stock leader -> our transferee
        assert await transfer(namesrv.address, group, ours.self_id) == 0
        await wait_registered(admin, lambda a: a.get(0) == ours.addr and len(a) == 3, 60,
                              "ours registered as the master")
        await send("o", 100)
        # our leader -> stock transferee
        target = next(n for n in nodes if n is not ours)
        assert await transfer(namesrv.address, group, target.self_id) == 0
        await wait_registered(admin, lambda a: a.get(0) == target.addr and len(a) == 3, 60,
                              "the stock member registered as the master")
        await send("t", 100)
        deadline = time.monotonic() + 60
        while True:
            views = {n.addr: await keys_on(client, n.addr) for n in nodes}
            if all(set(acked) <= set(v) for v in views.values()):
                break
            assert time.monotonic() < deadline, {a: len(set(acked) - set(v))
                                                 for a, v in views.items()}
            await asyncio.sleep(1)
        for addr, view in views.items():
            assert {k: view[k] for k in acked} == acked, addr
    finally:
        await producer.shutdown()
        await client.close()
        await admin.close()
