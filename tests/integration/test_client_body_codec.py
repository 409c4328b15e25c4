"""``Message.of`` / ``decode`` through real servers: what a consumer decodes is the object the
producer encoded, for msgpack and JSON, with the push and the lite-pull consumer."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from aiorocketmq.protocol.body_codec import CONTENT_TYPE_PROPERTY, BodyDecodeError
from tests.procs import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

OBJECTS: list[Any] = [
    {"id": 1, "name": "ünïcode", "amount": 9.75, "none": None, "tags": ["a", "b"],
     "nested": {"m": {"k": [1, [2, 3]]}}},
    [1, 2**62, -5, 0.5, True, "x"],
    "just a string",
]
MSGPACK_ONLY: list[Any] = [
    {"raw": b"\x00\xff", "at": datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), 7: "int key"},
]


async def send_all(namesrv: ServerProcess, topic: str) -> list[tuple[str, Any]]:
    """Send each object in each codec, with the codec as the tag; returns (codec, obj)."""
    sent: list[tuple[str, Any]] = []
    async with Producer("PG_codec", namesrv.address) as producer:
        for codec, objs in (("msgpack", OBJECTS + MSGPACK_ONLY), ("json", OBJECTS)):
            for obj in objs:
                await producer.send(Message.of(obj, codec, topic=topic, tags=codec, keys="k"))
                sent.append((codec, obj))
    return sent


def decoded(msgs: list[MessageExt]) -> list[tuple[str, Any]]:
    out = []
    for m in msgs:
        assert m.properties[CONTENT_TYPE_PROPERTY] == f"application/{m.tags}"
        out.append((m.tags or "", m.decode()))
    return out


def same(a: list[tuple[str, Any]], b: list[tuple[str, Any]]) -> bool:
    return sorted(map(repr, a)) == sorted(map(repr, b))


async def test_push_consumer_decodes_what_the_producer_encoded(
        namesrv: ServerProcess, broker: ServerProcess) -> None:
    topic = "CodecPushT"
    sent = await send_all(namesrv, topic)
    got: list[MessageExt] = []
    done = asyncio.Event()

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        if len(got) >= len(sent):
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("CG_codec_push", namesrv.address,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    async with consumer:
        await asyncio.wait_for(done.wait(), 60)
    assert same(decoded(got), sent)


async def test_lite_pull_consumer_decodes_and_bad_bodies_say_why(
        namesrv: ServerProcess, broker: ServerProcess) -> None:
    topic = "CodecLiteT"
    sent = await send_all(namesrv, topic)
    async with Producer("PG_codec_bad", namesrv.address) as producer:
        await producer.send(Message(topic, b"\xc1 not msgpack", tags="bad",
                                    properties={CONTENT_TYPE_PROPERTY: "application/msgpack"}))
    consumer = LitePullConsumer("CG_codec_lite", namesrv.address,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    await consumer.start()
    try:
        got: list[MessageExt] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while len(got) < len(sent) + 1 and loop.time() < deadline:
            got.extend(await consumer.poll(1.0))
    finally:
        await consumer.shutdown()
    bad = [m for m in got if m.tags == "bad"]
    assert same(decoded([m for m in got if m.tags != "bad"]), sent)
    assert len(bad) == 1
    with pytest.raises(BodyDecodeError, match=f"topic '{topic}' \\(msgId .+\\): body of 13 bytes "
                                              "is not valid msgpack"):
        bad[0].decode()
