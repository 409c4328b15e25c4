"""The npm ``ali-ons`` client with ``accessKey`` / ``secretKey`` against our broker with
``aclEnable=true``: ali-ons signs its requests (``AccessKey``, ``OnsChannel``, ``Signature``
over the header values it sends as JSON numbers and booleans, docs/PROTOCOL.md 9), our broker
checks them, and ali-ons produces and consumes; with a wrong secret it is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig
from tests.interop.conftest import StartScript
from tests.interop.node import wait_until
from tests.interop.test_ali_ons import (
    WAIT,
    harness_config,
    message_specs,
    owned_queues,
    received_all,
    start_consumer,
)
from tests.procs import ServerProcess, broker_process

pytestmark = [pytest.mark.interop, pytest.mark.timeout(150)]

ACCOUNTS = {"accounts": [
    {"accessKey": "OnsUser1", "secretKey": "OnsSecret1", "defaultTopicPerm": "PUB|SUB",
     "defaultGroupPerm": "SUB"},
    {"accessKey": "OnsAdmin1", "secretKey": "OnsAdmin1", "admin": True},
]}
CREDS = {"accessKey": "OnsUser1", "secretKey": "OnsSecret1"}


async def test_ali_ons_signs_and_our_broker_checks(
        tmp_path: Path, namesrv: ServerProcess, ons: StartScript) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(ACCOUNTS))
    broker = broker_process(tmp_path, namesrv.address, conf={"aclEnable": "true"},
                            extra=(f"-Drocketmq.home.dir={home}",)).start()
    try:
        topic = "OnsAclTopic"
        async with MQAdmin(namesrv.address, client_options={
                "access_key": "OnsAdmin1", "secret_key": "OnsAdmin1"}) as admin:
            await admin.create_topic(broker.address, TopicConfig(topic, 4, 4))
        consumer = await start_consumer(ons, namesrv, topic, "GID_ACL", "acl-consumer", **CREDS)
        await wait_until("the consumer to own all queues",
                         lambda: owned_queues(consumer, topic) == set(range(4)),
                         consumer, timeout=WAIT)
        specs = message_specs("acl", 8, tags=lambda i: "TagA")
        producer = await ons("produce.js", harness_config(
            namesrv, topic, messages=specs, instanceName="acl-producer",
            producerGroup="PID_acl", **CREDS), name="acl-producer")
        assert await producer.wait_exit(WAIT) == 0, producer.describe()
        assert len(producer.of("sent")) == 8, producer.describe()
        await wait_until("every message at the signed consumer",
                         received_all(consumer, {s["body"] for s in specs}), consumer,
                         timeout=WAIT)
        assert await consumer.close() == 0, consumer.describe()

        wrong = await ons("produce.js", harness_config(
            namesrv, topic, messages=specs[:1], instanceName="acl-wrong", producerGroup="PID_w",
            accessKey="OnsUser1", secretKey="not-the-secret", timeoutMs=20_000), name="acl-wrong")
        await wrong.wait_exit(WAIT)
        assert not wrong.of("sent"), wrong.describe()
        assert "Check signature failed for accessKey=OnsUser1" in broker.log_tail(400)
    finally:
        broker.stop()
        print(f"---- broker ----\n{broker.log_tail(40)}")
