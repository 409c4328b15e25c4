"""A push consumer whose broker forgot its subscription (a restart) gets it back at once.

In-process nameserver and broker on 127.0.0.1 (port 0). The broker drops the group's
subscription, as a restart does; the consumer's next pulls are answered SUBSCRIPTION_NOT_EXIST. The consumer used to re-pull every
second per queue, logging each refusal, until the next scheduled heartbeat (30 s); it now
sends a heartbeat at once, so a message sent afterwards is delivered within seconds.
The broker is made to forget the group directly, the connections staying up.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from aiorocketmq.client.instance import MQClientInstance
from aiorocketmq.server.broker.config import load_broker_configs
from aiorocketmq.server.broker.controller import BrokerController
from aiorocketmq.server.namesrv.config import NamesrvConfig
from aiorocketmq.server.namesrv.controller import NamesrvController

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC, GROUP = "ResubscribeTopic", "CG_resubscribe"


async def test_subscription_not_exist_triggers_a_heartbeat(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scheduled = asyncio.Event()
    scheduled_heartbeat = MQClientInstance._clean_and_heartbeat

    async def observed(self: MQClientInstance) -> None:
        await scheduled_heartbeat(self)
        if GROUP in self.consumers:
            scheduled.set()

    monkeypatch.setattr(MQClientInstance, "_clean_and_heartbeat", observed)
    namesrv = NamesrvController(NamesrvConfig.from_properties({
        "listenPort": "0",
        "kvConfigPath": str(tmp_path / "namesrv" / "kvConfig.json"),
        "configStorePath": str(tmp_path / "namesrv" / "namesrv.properties"),
    }))
    await namesrv.start()
    broker_conf, store_conf = load_broker_configs({
        "brokerName": "broker-r", "listenPort": "0", "namesrvAddr": namesrv.address,
        "storePathRootDir": str(tmp_path / "store"),
        "mappedFileSizeCommitLog": str(1024 * 1024),
    })
    broker = BrokerController(broker_conf, store_conf)
    got: asyncio.Queue[bytes] = asyncio.Queue(maxsize=100)
    loop = asyncio.get_running_loop()

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            loop.call_soon_threadsafe(got.put_nowait, bytes(m.body))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP, namesrv.address,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    try:
        await broker.start()
        async with Producer("PG_resubscribe", namesrv.address) as producer:
            await producer.send(Message(TOPIC, b"before"))
            await consumer.start()
            assert await asyncio.wait_for(got.get(), 30) == b"before"

            # The schedule's first heartbeat (1 s after start) is over: from now on only the
            # one every 30 s would come.
            await asyncio.wait_for(scheduled.wait(), 10)

            # The broker forgets the consumer, as a restarted broker has never heard of it
            # (the connections stay: closing them would make the consumer's rebalance send
            # a heartbeat of its own, which a restart on the same address does not).
            info = broker.consumers.groups[GROUP]
            for ch in list(info.channels.values()):
                broker.consumers.unregister_consumer(GROUP, ch, notify=False)
            assert GROUP not in broker.consumers.groups

            await producer.send(Message(TOPIC, b"after"))
            # Well inside the 30 s heartbeat period: only the heartbeat that the
            # SUBSCRIPTION_NOT_EXIST answer triggers can make this arrive in time.
            assert await asyncio.wait_for(got.get(), 12) == b"after"
            assert GROUP in broker.consumers.groups
    finally:
        await consumer.shutdown()
        await broker.shutdown()
        await namesrv.stop()
