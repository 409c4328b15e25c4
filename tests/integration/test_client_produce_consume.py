"""Producer and push consumer against real mqnamesrv + mqbroker processes on 127.0.0.1.

Every wait is on a condition with a deadline; nothing sleeps to synchronize.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageModel,
    Producer,
    PushConsumer,
    SelectMessageQueueByHash,
    SendStatus,
)
from tests.procs import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


async def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``cond`` (cheap, in-memory) until true or fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


class Collector:
    """A listener that records every delivery (thread-safe enough: list.append is atomic)."""

    def __init__(self) -> None:
        self.msgs: list[MessageExt] = []

    def __call__(self, msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        self.msgs.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def bodies(self) -> set[bytes]:
        return {m.body for m in self.msgs}


def consumer(namesrv: ServerProcess, group: str, topic: str, listener: object, **kw: object) -> PushConsumer:
    c = PushConsumer(group, namesrv.address,
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **kw)  # type: ignore[arg-type]
    c.subscribe(topic, "*")
    c.register_message_listener(listener)  # type: ignore[arg-type]
    return c


async def test_send_modes_then_push_consume(namesrv: ServerProcess, broker: ServerProcess) -> None:
    topic = "ClientModesT"
    callback_results: list[object] = []
    callback_done = asyncio.Event()

    def on_sent(result: object, exc: BaseException | None) -> None:
        callback_results.append(exc or result)
        callback_done.set()

    async with Producer("PG_modes", namesrv.address) as producer:
        r1 = await producer.send(Message(topic, b"sync", tags="TagA", keys="k1"))
        assert r1.status is SendStatus.SEND_OK and r1.msg_id and r1.offset_msg_id
        r2 = await producer.send_async(Message(topic, b"async-awaited"))
        assert r2.status is SendStatus.SEND_OK
        producer.send_async(Message(topic, b"async-callback"), callback=on_sent)
        await producer.send_oneway(Message(topic, b"oneway"))
        batch = await producer.send([Message(topic, f"batch-{i}".encode()) for i in range(3)])
        assert batch.msg_id is not None and len(batch.msg_id.split(",")) == 3
        big = bytes(range(256)) * 40  # 10 KiB: compressed on the wire
        r3 = await producer.send(Message(topic, big))
        ordered = [await producer.send(Message(topic, f"order-{i}".encode()),
                                       selector=SelectMessageQueueByHash(), arg="order-key")
                   for i in range(3)]
        assert len({r.message_queue for r in ordered}) == 1
        async with asyncio.timeout(10):
            await callback_done.wait()
    assert callback_results and not isinstance(callback_results[0], BaseException)

    expected = {b"sync", b"async-awaited", b"async-callback", b"oneway", big,
                b"batch-0", b"batch-1", b"batch-2", b"order-0", b"order-1", b"order-2"}
    col = Collector()
    c = consumer(namesrv, "CG_modes", topic, col)
    await c.start()
    try:
        await wait_for(lambda: expected <= col.bodies(), 60, "every sent message")
    finally:
        await c.shutdown()
    by_body = {m.body: m for m in col.msgs}
    assert by_body[b"sync"].tags == "TagA" and by_body[b"sync"].keys == "k1"
    assert by_body[b"sync"].msg_id == r1.msg_id
    assert by_body[big].offset_msg_id == r3.offset_msg_id
    seq = [m.queue_offset for m in col.msgs if m.body.startswith(b"order-")]
    assert sorted(seq) == [r.queue_offset for r in ordered]


async def test_tag_filter_is_exact(namesrv: ServerProcess, broker: ServerProcess) -> None:
    topic = "ClientTagT"
    async with Producer("PG_tag", namesrv.address) as producer:
        for i in range(6):
            await producer.send(Message(topic, f"m{i}".encode(), tags="A" if i % 2 else "B"))
    col = Collector()
    c = PushConsumer("CG_tag", namesrv.address,
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic, "A")
    c.register_message_listener(col)
    await c.start()
    try:
        await wait_for(lambda: len(col.bodies()) >= 3, 60, "the three TagA messages")
    finally:
        await c.shutdown()
    assert col.bodies() == {b"m1", b"m3", b"m5"}


async def test_reconsume_later_redelivers(namesrv: ServerProcess, broker: ServerProcess) -> None:
    topic = "ClientRetryT"
    attempts: list[tuple[str, str, int]] = []

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            attempts.append((m.msg_id, m.topic, m.reconsume_times))
        if len(attempts) == 1:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = consumer(namesrv, "CG_retry", topic, listener)
    await c.start()
    try:
        async with Producer("PG_retry", namesrv.address) as producer:
            sent = await producer.send(Message(topic, b"fail-once"))
        await wait_for(lambda: len(attempts) >= 2, 90, "the redelivery")
    finally:
        await c.shutdown()
    first, second = attempts[0], attempts[1]
    assert first == (sent.msg_id, topic, 0)
    # redelivered from %RETRY%CG_retry with the original topic restored
    assert second[0] == sent.msg_id and second[1] == topic and second[2] == 1


async def test_client_side_resend_uses_the_shared_inner_producer(
        namesrv: ServerProcess, broker: ServerProcess) -> None:
    # The fallback when CONSUMER_SEND_MSG_BACK fails: resend to %RETRY%<group> through the
    # instance's CLIENT_INNER_PRODUCER (upstream getDefaultMQProducer), never a second one.
    topic = "ClientResendT"
    seen: list[MessageExt] = []
    c = consumer(namesrv, "CG_resend", topic,
                 lambda msgs, ctx: seen.extend(msgs) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    await c.start()
    try:
        assert c.instance is not None
        assert c._get_inner_producer() is c.instance.inner_producer
        async with Producer("PG_resend", namesrv.address) as producer:
            sent = await producer.send(Message(topic, b"resend-me"))
        await wait_for(lambda: len(seen) >= 1, 90, "the first delivery")
        await c._resend_to_retry_topic(seen[0], 0, 1, 16)
        await wait_for(lambda: len(seen) >= 2, 90, "the resent delivery")
    finally:
        await c.shutdown()
    assert [(m.msg_id, m.topic, m.reconsume_times) for m in seen[:2]] == [
        (sent.msg_id, topic, 0), (sent.msg_id, topic, 1)]


async def test_broadcasting_delivers_to_every_consumer(namesrv: ServerProcess,
                                                       broker: ServerProcess, tmp_path: Path) -> None:
    topic = "ClientBcastT"
    async with Producer("PG_bcast", namesrv.address) as producer:
        for i in range(8):
            await producer.send(Message(topic, f"b{i}".encode()))
    cols = [Collector(), Collector()]
    consumers = [consumer(namesrv, "CG_bcast", topic, col, message_model=MessageModel.BROADCASTING,
                          instance_name=f"bcast{i}", local_offset_dir=str(tmp_path / f"off{i}"))
                 for i, col in enumerate(cols)]
    for c in consumers:
        await c.start()
    try:
        want = {f"b{i}".encode() for i in range(8)}
        await wait_for(lambda: all(want <= col.bodies() for col in cols), 60,
                       "every message at both consumers")
    finally:
        for c in consumers:
            await c.shutdown()
    assert list((tmp_path / "off0").rglob("offsets.json"))


async def test_shutdown_completes_with_dead_broker(namesrv: ServerProcess,
                                                   broker: ServerProcess) -> None:
    topic = "ClientDeadT"
    col = Collector()
    c = consumer(namesrv, "CG_dead", topic, col)
    producer = Producer("PG_dead", namesrv.address)
    await producer.start()
    await producer.send(Message(topic, b"before"))
    await c.start()
    await wait_for(lambda: b"before" in col.bodies(), 60, "the first message")
    broker.kill()
    async with asyncio.timeout(60):
        await c.shutdown()
        await producer.shutdown()
