"""DLedger retention end to end: three of our brokers, one ``dLegerGroup``, 64 KiB DLedger
data segments, ``deleteWhen`` every hour and ``fileReservedTime=0`` (stock's DLedger mode
keeps ``fileReservedTime + 1`` hours, so the segments' times are set two hours back while
the group is down).

* after the restart every member deletes the old segments: the same commit-log min offset
  (``commitLogMinOffset`` > 0) on all three, its consume queue's min offset past 0, the
  messages from there on served at the same offsets as before;
* the group keeps taking and replicating messages after the deletion.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from aiorocketmq.client import ClientConfig, Message, Producer
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import MessageQueue, TopicConfig
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.message import decode_messages, decode_offset_msg_id
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import pull, pull_header
from tests.integration.test_dledger import (
    GROUP,
    Factory,
    Node,
    make_nodes,
    node_conf,
    wait_registered,
)
from tests.procs import ServerProcess, broker_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TOPIC = "DLedgerRetention"
SEGMENT = 64 * 1024
TOTAL = 400


def start(tmp: Path, namesrv: str, node: Node, nodes: list[Node], factory: Factory) -> None:
    conf = node_conf(node, nodes) | {
        "mappedFileSizeCommitLog": str(SEGMENT), "fileReservedTime": "0",
        "deleteWhen": ";".join(f"{h:02d}" for h in range(24)), "cleanResourceInterval": "300"}
    node.proc = factory(broker_process(tmp, namesrv, name=f"dledger-{node.self_id}", conf=conf))


async def topic_known(admin: MQAdmin, addr: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (await admin.topic_config(addr, TOPIC)) is None:
        assert time.monotonic() < deadline, f"{addr} never learnt {TOPIC} from the master"
        await asyncio.sleep(0.2)


async def messages_from(client: RemotingClient, addr: str, offset: int) -> dict[str, int]:
    """key -> commit-log offset of queue 0's messages from ``offset`` on."""
    out: dict[str, int] = {}
    while True:
        r = await pull(client, addr, "RetentionAudit", TOPIC, 0, offset, max_nums=32)
        if r.code != ResponseCode.SUCCESS:
            return out
        for m in decode_messages(r.body):
            out[m.keys or ""] = m.commit_log_offset
        offset = pull_header(r).next_begin_offset


async def test_expired_dledger_segments_deleted_on_every_member(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    nodes = make_nodes()
    for node in nodes:
        start(tmp_path, namesrv.address, node, nodes, server_factory)
    admin = MQAdmin(namesrv.address)
    client = RemotingClient()
    producer = Producer("RetentionProducer", config=ClientConfig(
        namesrv_addr=namesrv.address, poll_name_server_interval_ms=500),
        retry_times_when_send_failed=2, send_msg_timeout_ms=3000)
    mq = MessageQueue(TOPIC, GROUP, 0)
    try:
        addrs = await wait_registered(admin, lambda a: 0 in a and len(a) == 3, 60,
                                      "a master and two followers")
        await admin.create_topic(addrs[0], TopicConfig(TOPIC, 1, 1))
        for node in nodes:
            await topic_known(admin, node.addr, 30)
        await producer.start()
        acked: dict[str, int] = {}
        for i in range(TOTAL):
            r = await producer.send(Message(TOPIC, os.urandom(600), keys=f"k{i}"))
            acked[f"k{i}"] = decode_offset_msg_id(r.offset_msg_id)[1]
        deadline = time.monotonic() + 60
        while [await messages_from(client, n.addr, 0) for n in nodes] != [acked] * 3:
            assert time.monotonic() < deadline, "the followers never caught up"
            await asyncio.sleep(0.5)
        for node in nodes:
            info = await admin.broker_runtime_info(node.addr)
            assert info["commitLogMinOffset"] == "0", info["commitLogMinOffset"]
        await producer.shutdown()

        # Down, the segments' last writes set two hours back; up again, they are expired.
        for node in nodes:
            assert node.proc is not None
            node.proc.stop()
        old = time.time() - 2 * 3600 - 60
        for node in nodes:
            data = tmp_path / f"dledger-{node.self_id}" / "store" / f"dledger-{node.self_id}" / "data"
            segments = sorted(data.iterdir())
            assert len(segments) > 3
            for f in segments:
                os.utime(f, (old, old))
        for node in nodes:
            start(tmp_path, namesrv.address, node, nodes, server_factory)
        addrs = await wait_registered(admin, lambda a: 0 in a and len(a) == 3, 60,
                                      "the group back")

        mins: dict[str, int] = {}
        deadline = time.monotonic() + 60
        while len(mins) < 3:
            for node in nodes:
                info = await admin.broker_runtime_info(node.addr)
                if int(info["commitLogMinOffset"]) > 0:
                    mins[node.addr] = int(info["commitLogMinOffset"])
            assert time.monotonic() < deadline, f"retention did not run everywhere: {mins}"
            await asyncio.sleep(0.3)
        assert len(set(mins.values())) == 1, mins
        min_offset = mins[nodes[0].addr]
        kept = {k: off for k, off in acked.items() if off >= min_offset}
        assert 0 < len(kept) < len(acked)
        for node in nodes:
            low = (await admin.queue_offsets(node.addr, mq))[0]
            assert low > 0
            deadline = time.monotonic() + 30
            while (got := await messages_from(client, node.addr, low)) != kept:
                assert time.monotonic() < deadline, (node.addr, len(got), len(kept))
                await asyncio.sleep(0.3)

        # Still a working group: new messages on every member.
        producer = Producer("RetentionProducer2", config=ClientConfig(
            namesrv_addr=namesrv.address, poll_name_server_interval_ms=500),
            retry_times_when_send_failed=2, send_msg_timeout_ms=3000)
        await producer.start()
        more = {}
        for i in range(TOTAL, TOTAL + 20):
            r = await producer.send(Message(TOPIC, os.urandom(600), keys=f"k{i}"))
            more[f"k{i}"] = decode_offset_msg_id(r.offset_msg_id)[1]
        for node in nodes:
            low = (await admin.queue_offsets(node.addr, mq))[0]
            deadline = time.monotonic() + 30
            while not more.items() <= (await messages_from(client, node.addr, low)).items():
                assert time.monotonic() < deadline, node.addr
                await asyncio.sleep(0.3)
    finally:
        await producer.shutdown()
        await client.close()
        await admin.close()
