"""Push consumers of one group sharing queues as members join and leave.

NOTIFY_CONSUMER_IDS_CHANGED from the broker makes every member rebalance at once; the
allocation of all members must partition the topic's queues, and across the churn every
message must be consumed at least once.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import pytest

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
)
from tests.procs import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "ClientRebalanceT"
GROUP = "CG_rebalance"


async def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


def owned(c: PushConsumer) -> set[MessageQueue]:
    assert c.rebalance is not None
    return {mq for mq, pq in c.rebalance.process_queue_table.items()
            if mq.topic == TOPIC and not pq.dropped}


def partitioned(members: list[PushConsumer], queues: int) -> bool:
    sets = [owned(c) for c in members]
    union = set().union(*sets)
    disjoint = sum(len(s) for s in sets) == len(union)
    return disjoint and len(union) == queues and all(sets)


async def test_join_and_leave_rebalances_and_loses_nothing(namesrv: ServerProcess,
                                                           broker: ServerProcess) -> None:
    seen: set[bytes] = set()

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        seen.update(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    counter = itertools.count()
    sent: set[bytes] = set()

    async def produce(producer: Producer, n: int) -> None:
        for _ in range(n):
            body = f"msg-{next(counter)}".encode()
            await producer.send(Message(TOPIC, body))
            sent.add(body)

    def member(name: str) -> PushConsumer:
        c = PushConsumer(GROUP, namesrv.address, instance_name=name,
                         consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        c.subscribe(TOPIC, "*")
        c.register_message_listener(listener)
        return c

    async with Producer("PG_rebalance", namesrv.address, default_topic_queue_nums=8) as producer:
        await produce(producer, 20)  # creates the topic with 8 queues
        a, b, c = member("a"), member("b"), member("c")
        await a.start()
        started = [a]
        try:
            await wait_for(lambda: partitioned([a], 8), 60, "a owning all 8 queues")
            await b.start()
            started.append(b)
            await produce(producer, 20)
            await wait_for(lambda: partitioned([a, b], 8) and len(owned(a)) == 4, 60,
                           "a and b sharing 4/4")
            await c.start()
            started.append(c)
            await produce(producer, 20)
            await wait_for(lambda: partitioned([a, b, c], 8), 60, "three members sharing 8 queues")
            assert sorted(len(owned(x)) for x in (a, b, c)) == [2, 3, 3]
            await b.shutdown()
            started.remove(b)
            await produce(producer, 20)
            await wait_for(lambda: partitioned([a, c], 8), 60, "a and c after b left")
            await wait_for(lambda: sent <= seen, 60, "every message consumed at least once")
        finally:
            for x in started:
                await x.shutdown()
    assert len(sent) == 80
