"""A broker notices when the clients of one consumer group subscribe differently.

Two push consumers of one group, one on tag ``TagA``, the other on ``TagB`` and a second
topic: the broker logs ``broker.subscription_inconsistent`` with what each client subscribes
to and sets ``rocketmq_consumer_subscription_inconsistent{group}`` to 1; when the odd client
leaves, ``broker.subscription_consistent`` is logged and the series goes away. A group whose
clients agree never appears. ``mqadmin consumerConnection`` / ``consumerProgress`` warn on
stderr for the mixed group and not for the other. Real nameserver and broker processes, metrics scraped over HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client.producer import Producer
from aiorocketmq.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from aiorocketmq.protocol.message import Message, MessageExt
from tests.integration.test_metrics import eventually, metrics_address, sample
from tests.integration.test_mqadmin import mqadmin
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MIXED = "CG_mixed_subs"
SAME = "CG_same_subs"
METRIC = "rocketmq_consumer_subscription_inconsistent"


def _ok(_msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def _consumer(group: str, namesrv: str, subs: list[tuple[str, str]]) -> PushConsumer:
    consumer = PushConsumer(group, namesrv)
    for topic, expression in subs:
        consumer.subscribe(topic, expression)
    consumer.register_message_listener(_ok)
    await consumer.start()
    return consumer


async def _log_has(proc: ServerProcess, text: str, timeout: float = 30.0) -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        log = proc.log_path.read_text(errors="replace")
        if text in log:
            return log
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {text!r} in the broker log")
        await asyncio.sleep(0.1)


async def test_broker_warns_and_counts_inconsistent_groups(
        tmp_path: Path, server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    namesrv = server_factory(namesrv_process(tmp_path))
    broker = server_factory(broker_process(tmp_path, namesrv.address,
                                           conf={"metricsPort": "0", "autoCreateTopicEnable": "true"}))
    address = metrics_address(broker)
    producer = Producer("PG_subs", namesrv.address)  # the topics exist: consumerProgress has queues
    await producer.start()
    try:
        for topic in ("SubsTopicA", "SubsTopicB"):
            await producer.send(Message(topic, b"x", tags="TagA"))
    finally:
        await producer.shutdown()
    same = [await _consumer(SAME, namesrv.address, [("SubsTopicA", "*")]) for _ in range(2)]
    first = await _consumer(MIXED, namesrv.address, [("SubsTopicA", "TagA")])
    second = await _consumer(MIXED, namesrv.address, [("SubsTopicA", "TagB"),
                                                      ("SubsTopicB", "*")])
    try:
        fams = await eventually(address, lambda f: sample(f, METRIC, group=MIXED) == 1,
                                "the inconsistent group's series")
        assert sample(fams, METRIC, group=SAME) == 0  # agreeing clients: no series
        log = await _log_has(broker, "broker.subscription_inconsistent")
        line = next(x for x in log.splitlines() if "broker.subscription_inconsistent" in x)
        assert MIXED in line and "SubsTopicA:TagA" in line and "SubsTopicA:TagB" in line
        assert SAME not in line

        # mqadmin says so on stderr, stdout staying the stock tool's
        for command in ("consumerConnection", "consumerProgress"):
            code, out, err = await mqadmin(command, "-n", namesrv.address, "-g", MIXED)
            assert code == 0, (out, err)
            warning = f"WARNING: the clients of group {MIXED} subscribe to SubsTopicA differently"
            assert warning in err and "WARNING" not in out, (command, err)
            assert f"{MIXED} subscribe to SubsTopicB differently" in err
            code, out, err = await mqadmin(command, "-n", namesrv.address, "-g", SAME)
            assert code == 0 and "WARNING" not in err, (command, err)

        await second.shutdown()
        await eventually(address, lambda f: sample(f, METRIC, group=MIXED) == 0,
                         "the series to go once the odd client left")
        await _log_has(broker, "broker.subscription_consistent")
    finally:
        for consumer in (first, second, *same):
            await consumer.shutdown()
