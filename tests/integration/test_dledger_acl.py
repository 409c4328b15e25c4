"""ACL in DLedger mode: three of ours with ``aclEnable=true`` (issue #24 goal 4).

The DLedger peer RPCs (votes, heartbeats, pushes) travel on the ``dLegerPeers`` port, which
stock's DLedger serves without the broker's ACL hook, so a group with ACL on still elects a
leader and replicates. On the client ports ACL holds as on any broker: the leader refuses an
unsigned send with stock's remark and stores nothing, takes a signed one (our Producer with
an account), and each follower refuses an unsigned pull and holds the signed message in its
own store (a signed VIEW_MESSAGE_BY_ID). A follower's copy of the leader's topics is an
unsigned request, as a stock slave's is, and needs the brokers' addresses white-listed under
ACL, which on one loopback address would white-list every client here: so pulls from a
follower are not checked past the refusal.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from aiorocketmq.client import ClientConfig, Message, Producer
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.acl import SessionCredentials
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.message import decode_offset_msg_id
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_acl_broker import _send_request
from tests.integration.test_broker_send_pull import pull
from tests.integration.test_dledger import make_nodes, node_conf
from tests.integration.test_dledger_features import Group, roles, until
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "DLedgerAclTopic"
PLAIN_ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {"accessKey": "RocketMQ", "secretKey": "12345678", "admin": False,
         "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB",
         "topicPerms": [f"{TOPIC}=PUB|SUB"]},
        {"accessKey": "rocketmq2", "secretKey": "12345678", "admin": True},
    ],
}
USER = SessionCredentials("RocketMQ", "12345678")
ADMIN = {"access_key": "rocketmq2", "secret_key": "12345678"}


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    tmp: Path = tmp_path_factory.mktemp("dledger-acl")
    home = tmp / "rmqhome"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(PLAIN_ACL, sort_keys=False))
    started: list[ServerProcess] = []
    try:
        ns = namesrv_process(tmp).start()
        started.append(ns)
        nodes = make_nodes()
        for node in nodes:
            conf = node_conf(node, nodes) | {"aclEnable": "true"}
            node.proc = broker_process(tmp, ns.address, name=f"dledger-acl-{node.self_id}",
                                       conf=conf, extra=(f"-Drocketmq.home.dir={home}",)).start()
            started.append(node.proc)
        yield Group(ns, nodes)
    finally:
        for proc in reversed(started):
            proc.stop()
            print(f"---- {proc.log_path} ----\n{proc.log_tail(60)}")


async def test_acl_holds_on_every_member_of_a_dledger_group(group: Group) -> None:
    async with MQAdmin(group.ns, client_options=ADMIN) as admin:
        leader, followers = await roles(admin)  # elected and replicating with ACL on
        await admin.create_topic(leader, TopicConfig(TOPIC, 1, 1))

        async with RemotingClient() as unsigned:
            refused = await unsigned.invoke(leader, _send_request(TOPIC, b"unsigned"), 5.0)
            assert refused.code != ResponseCode.SUCCESS
            assert "No accessKey is configured" in (refused.remark or ""), refused.remark

            producer = Producer("DLedgerAclPG", config=ClientConfig(
                namesrv_addr=group.ns, access_key=USER.access_key, secret_key=USER.secret_key))
            await producer.start()
            try:
                sent = await producer.send(Message(TOPIC, b"signed"))
            finally:
                await producer.shutdown()
            assert sent.message_queue.broker_name == "RaftNode00"
            offset = decode_offset_msg_id(sent.offset_msg_id or "")[1]

            for follower in followers:
                no = await pull(unsigned, follower, "DLedgerAclCG", TOPIC, 0, 0)
                assert no.code != ResponseCode.SUCCESS
                assert "No accessKey is configured" in (no.remark or ""), no.remark

                async def stored(addr: str = follower) -> bytes | None:
                    return (await admin.api.view_message(addr, offset)).body

                # replicated by the peer RPCs, and served to a signed request
                assert await until(stored, 30, f"the signed message on {follower}") == b"signed"
            # the unsigned send stored nothing: the signed message is the queue's first
            assert offset == 0x30
