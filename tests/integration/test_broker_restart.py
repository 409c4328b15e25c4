"""Durability across broker restarts: clean SIGTERM and kill -9 under SYNC_FLUSH.

A clean restart keeps every message and every committed consumer offset (consumerOffset.json
is written at shutdown). After kill -9 during a stream of SYNC_FLUSH sends, every message
the broker acknowledged is readable after restart (docs/DESIGN.md: nothing acknowledged is lost).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.headers import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.protocol.message import decode_messages
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import TIMEOUT, pull, pull_header, send
from tests.procs import ServerProcess, broker_process

pytestmark = pytest.mark.timeout(120)

Factory = Callable[[ServerProcess], ServerProcess]


async def read_queue(client: RemotingClient, addr: str, topic: str, queue_id: int) -> list[bytes]:
    bodies: list[bytes] = []
    offset = 0
    while True:
        r = await pull(client, addr, "ReaderGroup", topic, queue_id, offset)
        if r.code != ResponseCode.SUCCESS:
            return bodies
        bodies.extend(m.body for m in decode_messages(r.body))
        offset = pull_header(r).next_begin_offset


async def test_clean_restart_keeps_messages_and_offsets(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    first = server_factory(broker_process(tmp_path, namesrv.address, name="broker-r"))
    client = RemotingClient()
    try:
        for i in range(40):
            r = await send(client, first.address, "Durable", f"m{i}".encode(), queue_id=i % 4)
            assert r.code == ResponseCode.SUCCESS
        for qid in range(4):
            update = RemotingCommand.create_request(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                UpdateConsumerOffsetRequestHeader(consumer_group="CG", topic="Durable",
                                                  queue_id=qid, commit_offset=qid + 1).to_ext_fields())
            await client.invoke_oneway(first.address, update, TIMEOUT)
        # Ordered on the connection: once this answers, the oneway updates were applied.
        assert (await send(client, first.address, "Durable", b"last", queue_id=0)).code == 0
        assert first.stop() == 0
        second = server_factory(broker_process(tmp_path, namesrv.address, name="broker-r"))
        got = []
        for qid in range(4):
            got.extend(await read_queue(client, second.address, "Durable", qid))
            query = RemotingCommand.create_request(
                RequestCode.QUERY_CONSUMER_OFFSET,
                QueryConsumerOffsetRequestHeader(consumer_group="CG", topic="Durable",
                                                 queue_id=qid).to_ext_fields())
            r = await client.invoke(second.address, query, TIMEOUT)
            assert r.ext_fields == {"offset": str(qid + 1)}
        assert sorted(got) == sorted([f"m{i}".encode() for i in range(40)] + [b"last"])
    finally:
        await client.close()


async def test_kill_9_with_sync_flush_loses_nothing_acknowledged(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    conf = {"flushDiskType": "SYNC_FLUSH"}
    first = server_factory(broker_process(tmp_path, namesrv.address, name="broker-k", conf=conf))
    client = RemotingClient()
    acked: list[bytes] = []
    killed = asyncio.Event()

    async def producer(worker: int) -> None:
        i = 0
        while not killed.is_set():
            body = f"w{worker}-{i}".encode()
            i += 1
            try:
                r = await send(client, first.address, "KillTopic", body, queue_id=worker)
            except RocketMQError:
                return  # the broker died under us: this one was not acknowledged
            if r.code == ResponseCode.SUCCESS:
                acked.append(body)
            if len(acked) >= 150 and not killed.is_set():
                killed.set()
                first.kill()

    try:
        await asyncio.wait_for(asyncio.gather(*(producer(w) for w in range(4))), 60)
        assert killed.is_set() and len(acked) >= 150
        await client.close()
        client = RemotingClient()
        second = server_factory(broker_process(tmp_path, namesrv.address, name="broker-k",
                                               conf=conf))
        stored: set[bytes] = set()
        for qid in range(4):
            stored.update(await read_queue(client, second.address, "KillTopic", qid))
        missing = [b for b in acked if b not in stored]
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:5]}"
    finally:
        await client.close()
