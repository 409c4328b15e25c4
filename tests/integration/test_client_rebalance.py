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


async def test_pulls_wait_for_the_heartbeat_that_announces_a_new_sub_version(
        namesrv: ServerProcess, broker: ServerProcess, caplog: pytest.LogCaptureFixture) -> None:
    """A changed queue set's new subVersion reaches the broker before a pull carries it.

    The heartbeat lock is held (as while a scheduled heartbeat is in flight) when the queue
    set changes; the held pull answered by a new message is followed by the next pull,
    which must not run ahead of the heartbeat: the broker would refuse it with
    SUBSCRIPTION_NOT_LATEST and the queue would stall for the exception delay.
    """
    topic, group = "ClientRebalanceVersionT", "CG_rebalance_version"
    bodies: list[bytes] = []

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        bodies.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async with Producer("PG_rebalance_version", namesrv.address,
                        default_topic_queue_nums=1) as producer:
        await producer.send(Message(topic, b"first"))
        consumer = PushConsumer(group, namesrv.address,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe(topic, "*")
        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            await wait_for(lambda: b"first" in bodies, 30, "the first message")
            inst, rb = consumer.instance, consumer.rebalance
            assert inst is not None and rb is not None
            mqs = set(rb.topic_subscribe_info_table[topic])
            version = rb.subscription_inner[topic].sub_version
            await inst._heartbeat_lock.acquire()
            try:
                changed = asyncio.create_task(rb.message_queue_changed(topic, mqs, mqs))
                await wait_for(lambda: rb.subscription_inner[topic].sub_version != version,
                               5, "the new subVersion")
                await producer.send(Message(topic, b"second"))
                await wait_for(lambda: b"second" in bodies, 30, "the second message")
                await asyncio.sleep(0.5)  # time for a next pull to run ahead
            finally:
                inst._heartbeat_lock.release()
            await changed
            await producer.send(Message(topic, b"third"))
            await wait_for(lambda: b"third" in bodies, 30, "the third message")
        finally:
            await consumer.shutdown()
    refused = [r.getMessage() for r in caplog.records
               if "SUBSCRIPTION_NOT_LATEST" in r.getMessage()]
    assert not refused, refused
