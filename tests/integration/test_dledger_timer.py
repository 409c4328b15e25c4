"""Timer messages in DLedger mode: a three-node group of ours, the leader SIGKILLed.

Two timer messages are sent through the leader: A falls due (and is delivered) before the
leader is killed, B after. Every member builds the timer topic's queue from committed
entries; the new leader loads its timer store when it becomes the master, finds A's put
back in the log (so does not deliver it again) and delivers B when due. On the new leader
each of them is in the real topic exactly once, never before its delivery time.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from aiorocketmq.client import ClientConfig, Message, Producer
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.message import MessageExt, decode_messages
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import pull, pull_header
from tests.integration.test_dledger import (
    Factory,
    make_nodes,
    start_node,
    wait_registered,
)
from tests.procs import ServerProcess

pytestmark = pytest.mark.timeout(300)

TOPIC = "DLedgerTimerTopic"


async def topic_known_on(admin: MQAdmin, addr: str) -> None:
    deadline = time.monotonic() + 30
    while (await admin.topic_config(addr, TOPIC)) is None:
        assert time.monotonic() < deadline, f"{addr} never learnt {TOPIC} from the master"
        await asyncio.sleep(0.2)


async def read_topic(client: RemotingClient, addr: str, topic: str = TOPIC) -> list[MessageExt]:
    """Every message of ``topic``'s queue 0 on ``addr`` (its own store)."""
    out: list[MessageExt] = []
    offset = 0
    while True:
        r = await pull(client, addr, "TimerAudit", topic, 0, offset, max_nums=32)
        if r.code != ResponseCode.SUCCESS:
            return out
        out.extend(decode_messages(r.body))
        offset = pull_header(r).next_begin_offset


async def wait_keys(client: RemotingClient, addr: str, keys: set[str], timeout: float,
                    what: str, topic: str = TOPIC) -> list[MessageExt]:
    """``topic`` on ``addr`` once it holds a message of each key (under a deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            msgs = await read_topic(client, addr, topic)
        except RocketMQError:
            msgs = []
        if keys <= {m.keys for m in msgs}:
            return msgs
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.2)


async def test_timer_message_delivered_once_across_leader_failover(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    nodes = make_nodes()
    for node in nodes:
        start_node(tmp_path, namesrv.address, node, nodes, server_factory)
    admin = MQAdmin(namesrv.address)
    client = RemotingClient()
    producer = Producer("DLedgerTimerProducer", config=ClientConfig(
        namesrv_addr=namesrv.address, poll_name_server_interval_ms=500),
        retry_times_when_send_failed=2, send_msg_timeout_ms=3000)
    try:
        by_addr = {n.addr: n for n in nodes}
        addrs = await wait_registered(admin, lambda a: 0 in a and len(a) == 3, 60,
                                      "a master and two followers")
        leader = by_addr[addrs[0]]
        await admin.create_topic(leader.addr, TopicConfig(TOPIC, 1, 1))
        for node in nodes:
            if node is not leader:
                await topic_known_on(admin, node.addr)
        await producer.start()
        sent_at: dict[str, int] = {}
        for key, delay_ms in (("A", 2000), ("B", 12000)):
            msg = Message(TOPIC, f"timer-{key}".encode(), keys=key)
            msg.put_user_property("TIMER_DELAY_MS", str(delay_ms))
            sent_at[key] = int(time.time() * 1000) + delay_ms
            await producer.send(msg)
        # A is put back by the first leader, and replicated to every member.
        await wait_keys(client, leader.addr, {"A"}, 30, "A delivered by the first leader")
        for node in nodes:
            await wait_keys(client, node.addr, {"A"}, 30, f"A replicated to {node.self_id}")
        assert leader.proc is not None
        leader.proc.kill()
        addrs = await wait_registered(admin, lambda a: a.get(0) not in (None, leader.addr), 60,
                                      "a new master")
        new_leader = by_addr[addrs[0]]
        msgs = await wait_keys(client, new_leader.addr, {"A", "B"}, 60,
                               "B delivered by the new leader")
        # Delivered once each, and never early (TIMER_OUT_MS floored to the precision).
        keys = [m.keys for m in msgs]
        assert sorted(keys) == ["A", "B"], keys
        for m in msgs:
            assert m.store_timestamp >= int(m.properties["TIMER_OUT_MS"])
            assert "TIMER_DEQUEUE_MS" in m.properties
        # The old leader comes back and follows: still once each, on every member.
        start_node(tmp_path, namesrv.address, leader, nodes, server_factory)
        await wait_registered(admin, lambda a: a.get(leader.follower_id) == leader.addr
                              and a.get(0) == new_leader.addr, 60, "the old leader back")
        for node in nodes:
            msgs = await wait_keys(client, node.addr, {"A", "B"}, 60, f"both on {node.self_id}")
            assert sorted(m.keys for m in msgs) == ["A", "B"], (node.self_id, [m.keys for m in msgs])
        log_text = (tmp_path / f"dledger-{new_leader.self_id}" / "broker.log").read_text()
        assert "store.timer.put_back_found" in log_text
    finally:
        await producer.shutdown()
        await client.close()
        await admin.close()
