"""PullConsumer and LitePullConsumer against real mqnamesrv + mqbroker processes."""

from __future__ import annotations

import asyncio

import pytest

from aiorocketmq.client import Message, Producer, PullStatus
from aiorocketmq.client.pull_consumer import LitePullConsumer, PullConsumer
from aiorocketmq.client.rebalance import ConsumeFromWhere
from aiorocketmq.protocol.errors import MQClientError
from tests.procs import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


async def test_pull_consumer_pulls_by_offset(namesrv: ServerProcess, broker: ServerProcess) -> None:
    topic = "ClientPullT"
    async with Producer("PG_pull", namesrv.address, default_topic_queue_nums=1) as producer:
        for i in range(5):
            await producer.send(Message(topic, f"p{i}".encode(), tags="A" if i < 3 else "B"))
    async with PullConsumer("CG_pull", namesrv.address) as consumer:
        mqs = await consumer.fetch_subscribe_message_queues(topic)
        assert len(mqs) == 1
        mq = mqs[0]
        result = await consumer.pull(mq, "*", 0, 32)
        assert result.status is PullStatus.FOUND
        assert [m.body for m in result.msg_found_list] == [f"p{i}".encode() for i in range(5)]
        assert result.next_begin_offset == 5 and result.max_offset == 5
        tagged = await consumer.pull(mq, "B", 0, 32)
        assert [m.body for m in tagged.msg_found_list] == [b"p3", b"p4"]
        none = await consumer.pull(mq, "*", 5, 32)
        assert none.status is PullStatus.NO_NEW_MSG
        consumer.update_consume_offset(mq, 5)
        assert await consumer.fetch_consume_offset(mq, from_store=False) == 5
        await consumer.persist_consumer_offset()

        async def late_send() -> None:
            async with Producer("PG_pull2", namesrv.address) as p2:
                await p2.send(Message(topic, b"late"))

        blocked = asyncio.create_task(consumer.pull_block_if_not_found(mq, "*", 5, 32))
        await late_send()
        held = await blocked
        assert held.status is PullStatus.FOUND and held.msg_found_list[0].body == b"late"


async def test_lite_pull_subscribe_poll_seek_commit(namesrv: ServerProcess,
                                                   broker: ServerProcess) -> None:
    topic = "ClientLiteT"
    async with Producer("PG_lite", namesrv.address, default_topic_queue_nums=2) as producer:
        for i in range(10):
            await producer.send(Message(topic, f"l{i}".encode()))
    consumer = LitePullConsumer("CG_lite", namesrv.address,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    await consumer.start()
    try:
        got: list[bytes] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while len(set(got)) < 10 and loop.time() < deadline:
            got.extend(m.body for m in await consumer.poll(1.0))
        assert set(got) == {f"l{i}".encode() for i in range(10)}
        await consumer.commit_sync()
        mq = sorted(consumer.assignment())[0]
        assert await consumer.committed(mq) > 0
        await consumer.seek_to_begin(mq)
        again: list[bytes] = []
        deadline = loop.time() + 60
        while not again and loop.time() < deadline:
            again.extend(m.body for m in await consumer.poll(1.0))
        assert again and set(again) <= set(got)
    finally:
        await consumer.shutdown()


async def test_lite_pull_poll_units_are_explicit(namesrv: ServerProcess,
                                                 broker: ServerProcess) -> None:
    # Stock's poll(long timeout) is in milliseconds; ours took seconds, so a stock-style
    # poll(1000) blocked for ~17 minutes. Seconds above MAX_POLL_SECONDS are refused at once,
    # and timeout_ms is stock's unit.
    topic = "ClientLiteUnitsT"
    async with Producer("PG_lite_units", namesrv.address, default_topic_queue_nums=1) as producer:
        await producer.send(Message(topic, b"u0"))
    consumer = LitePullConsumer("CG_lite_units", namesrv.address,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    await consumer.start()
    try:
        with pytest.raises(MQClientError, match=r"timeout_ms=1000\) for 1 s"):
            await consumer.poll(1000)
        with pytest.raises(MQClientError, match="not both"):
            await consumer.poll(1.0, timeout_ms=1000)
        got: list[bytes] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not got and loop.time() < deadline:
            got.extend(m.body for m in await consumer.poll(timeout_ms=1000))
        assert got == [b"u0"]
        began = loop.time()
        assert await consumer.poll(timeout_ms=300) == []  # nothing more: waits 0.3 s, not 300
        assert loop.time() - began >= 0.29
    finally:
        await consumer.shutdown()
    with pytest.raises(MQClientError, match="poll_timeout|timeout_ms"):
        LitePullConsumer("CG_lite_units2", namesrv.address, poll_timeout=5000)
    assert LitePullConsumer("CG_lite_units3", namesrv.address, poll_timeout_ms=2500).poll_timeout == 2.5
