"""ACL 1.0 against stock Apache RocketMQ 4.9.7 (``make java-deps``; tests/interop/stock.py).

(a) The same requests (unsigned, wrong secret, unknown access key, a signature missing from a
    non-white-listed address, a topic without PUB, a group without SUB, a non-admin calling
    an admin code) go to a stock broker and to ours, both with ``aclEnable=true`` and the same
    plain_acl.yml: each gets the same response code and remark from both, and nothing is
    stored or created on either.
(b) The stock Java producer and push consumer with ``AclClientRPCHook`` produce and consume
    through our ACL-enabled broker.
(c) Our producer and push consumer with credentials against the stock ACL-enabled broker.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from aiorocketmq.client import ClientConfig, ConsumeFromWhere, Message, Producer, PushConsumer
from aiorocketmq.protocol.acl import AclClientRPCHook, SessionCredentials
from aiorocketmq.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.interop.stock import AdminResult, DriverProcess, JavaServer, rocketmq_home
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

PLAIN_ACL: dict[str, Any] = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {"accessKey": "RocketMQ", "secretKey": "12345678", "whiteRemoteAddress": None,
         "admin": False, "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB",
         "topicPerms": ["AclTopic=PUB|SUB", "SubOnly=SUB"],
         "groupPerms": ["DeniedGroup=DENY"]},
        {"accessKey": "Remote10", "secretKey": "12345678", "whiteRemoteAddress": "10.9.8.*",
         "defaultTopicPerm": "PUB"},
        {"accessKey": "Loopback", "secretKey": "12345678", "whiteRemoteAddress": "127.0.0.1"},
        {"accessKey": "rocketmq2", "secretKey": "12345678", "admin": True},
    ],
}
USER = SessionCredentials("RocketMQ", "12345678")
ADMIN = SessionCredentials("rocketmq2", "12345678")


def _write_acl(tmp: Path) -> Path:
    home = rocketmq_home(tmp)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(PLAIN_ACL, sort_keys=False))
    return home


def _our_cluster(tmp: Path, home: Path) -> tuple[ServerProcess, ServerProcess]:
    ns = namesrv_process(tmp, name="our-namesrv").start()
    try:
        br = broker_process(tmp, ns.address, name="broker-a", conf={"aclEnable": "true"},
                            extra=(f"-Drocketmq.home.dir={home}",)).start()
    except BaseException:
        ns.stop()
        raise
    return ns, br


def _send(topic: str) -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, ext_fields={
        "a": "AclPG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0",
        "h": "0", "i": "", "j": "0", "k": "false", "m": "false"}, body=b"refused body")


def _pull(group: str, topic: str) -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.PULL_MESSAGE, ext_fields={
        "consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0",
        "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "0", "expressionType": "TAG"})


def _create_topic(topic: str) -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields={
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})


def _heart_beat(group: str, topic: str) -> RemotingCommand:
    body = HeartbeatData(client_id="127.0.0.1@acl-probe", consumer_data_set=[ConsumerData(
        group_name=group, consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
        consume_from_where="CONSUME_FROM_LAST_OFFSET",
        subscription_data_set=[SubscriptionData(topic=topic, sub_string="*")])]).encode()
    return RemotingCommand.create_request(RequestCode.HEART_BEAT, ext_fields={}, body=body)


def _no_signature(request: RemotingCommand, access_key: str) -> RemotingCommand:
    assert request.ext_fields is not None
    request.ext_fields["AccessKey"] = access_key
    return request


# case name -> (request factory, signer or None)
CASES: dict[str, tuple[Callable[[], RemotingCommand], SessionCredentials | None]] = {
    "unsigned send": (lambda: _send("AclTopic"), None),
    "wrong secret": (lambda: _send("AclTopic"), SessionCredentials("RocketMQ", "wrong-secret")),
    "unknown access key": (lambda: _send("AclTopic"), SessionCredentials("Nobody123", "12345678")),
    "not white-listed, no signature": (lambda: _no_signature(_send("AclTopic"), "Remote10"), None),
    "topic without PUB": (lambda: _send("SubOnly"), USER),
    "topic with no permission": (lambda: _send("OtherTopic"), USER),
    "group without SUB (pull)": (lambda: _pull("DeniedGroup", "AclTopic"), USER),
    "group without SUB (heart beat)": (lambda: _heart_beat("DeniedGroup", "AclTopic"), USER),
    "non-admin creates a topic": (lambda: _create_topic("MadeByUser"), USER),
}


async def _ask(addr: str, request: RemotingCommand,
               signer: SessionCredentials | None) -> RemotingCommand:
    async with RemotingClient(rpc_hook=None if signer is None else AclClientRPCHook(signer)) as c:
        return await c.invoke(addr, request, 10.0)


async def _max_offsets(addr: str, topic: str) -> list[int]:
    out = []
    for q in range(4):
        r = await _ask(addr, RemotingCommand.create_request(
            RequestCode.GET_MAX_OFFSET, ext_fields={"topic": topic, "queueId": str(q)}), ADMIN)
        out.append(int((r.ext_fields or {}).get("offset", "-1")) if r.code == 0 else -r.code)
    return out


async def test_refusals_match_the_stock_broker(
        tmp_path: Path, stock_namesrv: Callable[..., JavaServer],
        stock_broker: Callable[..., JavaServer]) -> None:
    home = _write_acl(tmp_path)
    stock_ns = stock_namesrv()
    stock = stock_broker(stock_ns.address, conf={"aclEnable": "true"})
    ns, ours = _our_cluster(tmp_path, home)
    try:
        for addr in (stock.address, ours.address):  # the same topic on both, as admin
            r = await _ask(addr, _create_topic("SubOnly"), ADMIN)
            assert r.code == ResponseCode.SUCCESS, (addr, r.remark)
        before = {a: await _max_offsets(a, "SubOnly") for a in (stock.address, ours.address)}
        for name, (make, signer) in CASES.items():
            want = await _ask(stock.address, make(), signer)
            got = await _ask(ours.address, make(), signer)
            assert want.code != ResponseCode.SUCCESS, (name, want.remark)
            assert (got.code, got.remark) == (want.code, want.remark), name
        # a white-listed account needs no signature, on both
        for addr in (stock.address, ours.address):
            r = await _ask(addr, _no_signature(_heart_beat("AnyGroup", "AnyTopic"), "Loopback"),
                           None)
            assert r.code == ResponseCode.SUCCESS, (addr, r.remark)
        for addr in (stock.address, ours.address):
            assert await _max_offsets(addr, "SubOnly") == before[addr]
            r = await _ask(addr, RemotingCommand.create_request(
                RequestCode.GET_ALL_TOPIC_CONFIG), ADMIN)
            assert b"MadeByUser" not in bytes(r.body or b""), addr
    finally:
        ours.stop()
        ns.stop()
        print(f"---- our broker ----\n{ours.log_tail(40)}")


def test_stock_clients_with_acl_against_our_broker(
        tmp_path: Path, java_driver: Callable[..., DriverProcess]) -> None:
    home = _write_acl(tmp_path)
    ns, br = _our_cluster(tmp_path, home)
    try:
        creds: dict[str, Any] = dict(namesrv=ns.address, topic="AclTopic",
                                     access_key="RocketMQ", secret_key="12345678")
        sent = java_driver("produce-sync", group="AclPG", count=10, timeout_ms=30000,
                           **creds).wait(90).check()
        assert len(sent.of("sent")) == 10, sent.describe()
        got = java_driver("consume-push", group="AclCG", count=10, timeout_ms=40000,
                          **creds).wait(90).check()
        assert len(got.of("received")) == 10, got.describe()
        # without the hook the stock producer is refused with the stock remark
        refused = java_driver("produce-sync", group="AclPG2", count=1, timeout_ms=15000,
                              retry_times=0, namesrv=ns.address, topic="AclTopic").wait(60)
        assert "No accessKey is configured" in refused.describe(40)
    finally:
        br.stop()
        ns.stop()
        print(f"---- our broker ----\n{br.log_tail(40)}")


async def test_our_client_with_acl_against_the_stock_broker(
        tmp_path: Path, stock_namesrv: Callable[..., JavaServer],
        stock_broker: Callable[..., JavaServer]) -> None:
    _write_acl(tmp_path)
    stock_ns = stock_namesrv()
    stock = stock_broker(stock_ns.address, conf={"aclEnable": "true"})
    r = await _ask(stock.address, _create_topic("AclTopic"), ADMIN)
    assert r.code == ResponseCode.SUCCESS, r.remark
    config = ClientConfig(access_key="RocketMQ", secret_key="12345678", client_ip="127.0.0.1")
    bodies = {f"acl-{i}".encode() for i in range(10)}
    got: set[bytes] = set()
    all_in = asyncio.Event()
    loop = asyncio.get_running_loop()
    consumer = PushConsumer("AclGroup", stock_ns.address, config=config,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("AclTopic", "*")

    def listener(msgs: list[Any], ctx: object) -> Any:
        from aiorocketmq.client import ConsumeConcurrentlyStatus

        got.update(m.body for m in msgs)
        if got >= bodies:
            loop.call_soon_threadsafe(all_in.set)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        async with Producer("AclPG", stock_ns.address, config=config) as producer:
            for body in sorted(bodies):
                await producer.send(Message("AclTopic", body))
        async with asyncio.timeout(60):
            await all_in.wait()
        assert got == bodies
        # a wrong secret is refused by the stock broker
        bad = ClientConfig(access_key="RocketMQ", secret_key="wrong-secret", client_ip="127.0.0.1")
        async with Producer("AclPG3", stock_ns.address, config=bad,
                            retry_times_when_send_failed=0) as producer:
            with pytest.raises(Exception, match="Check signature failed"):
                await producer.send(Message("AclTopic", b"nope"))
    finally:
        await consumer.shutdown()


def _acl_admin(code: int, ext: dict[str, str]) -> RemotingCommand:
    return RemotingCommand.create_request(code, ext_fields=dict(ext))


# (case name, request code, header fields; "{default}" is the broker's own plain_acl.yml),
# sent in this order: ACL administration with fields missing or odd, which stock 4.9.7's
# header decoder lets through (it logs a missing @CFNotNull field and carries on).
ADMIN_CASES: list[tuple[str, int, dict[str, str]]] = [
    ("create, no accessKey", RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"secretKey": "12345678"}),
    ("create, no fields", RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {}),
    ("delete, no accessKey", RequestCode.DELETE_ACL_CONFIG, {}),
    ("white list, no globalWhiteAddrs", RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
     {"aclFileFullPath": "{default}"}),
    ("white list, no aclFileFullPath", RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
     {"globalWhiteAddrs": "10.10.104.*"}),
    ("white list, empty aclFileFullPath", RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
     {"globalWhiteAddrs": "10.10.105.*,10.10.106.*", "aclFileFullPath": ""}),
    ("white list, the default file named", RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
     {"globalWhiteAddrs": "10.10.107.*", "aclFileFullPath": "{default}"}),
    ("create, admin ' true'", RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
     {"accessKey": "Padded01", "secretKey": "12345678", "admin": " true"}),
    ("create, admin 'TRUE'", RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
     {"accessKey": "Upper001", "secretKey": "12345678", "admin": "TRUE"}),
    ("create, admin 'yes'", RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
     {"accessKey": "Yes00001", "secretKey": "12345678", "admin": "yes"}),
    ("delete, accessKey ' Upper001'", RequestCode.DELETE_ACL_CONFIG, {"accessKey": " Upper001"}),
    ("padded account creates a topic", RequestCode.UPDATE_AND_CREATE_TOPIC, {}),
]


async def test_acl_admin_answers_match_the_stock_broker(
        tmp_path: Path, stock_namesrv: Callable[..., JavaServer],
        stock_broker: Callable[..., JavaServer]) -> None:
    """Codes 50 / 51 / 53 with fields missing, an ``admin`` that is not exactly "true" and
    keys with spaces: the same answers from a stock broker and ours (each on its own copy
    of plain_acl.yml), and afterwards the same white list and admin flags."""
    stock_home = _write_acl(tmp_path)
    stock = stock_broker(stock_namesrv().address, conf={"aclEnable": "true"})
    our_home = _write_acl(tmp_path / "ours")
    ns, ours = _our_cluster(tmp_path / "ours", our_home)
    try:
        answers: dict[str, list[tuple[str, int, str | None]]] = {}
        for addr, home in ((stock.address, stock_home), (ours.address, our_home)):
            default = str(home / "conf" / "plain_acl.yml")
            got = answers[addr] = []
            for name, code, ext in ADMIN_CASES:
                if code == RequestCode.UPDATE_AND_CREATE_TOPIC:
                    r = await _ask(addr, _create_topic("MadeByPadded"),
                                   SessionCredentials("Padded01", "12345678"))
                else:
                    fields = {k: default if v == "{default}" else v for k, v in ext.items()}
                    r = await _ask(addr, _acl_admin(code, fields), ADMIN)
                got.append((name, r.code, r.remark))
        assert answers[ours.address] == answers[stock.address]
        configs = {}
        for addr in (stock.address, ours.address):
            r = await _ask(addr, RemotingCommand.create_request(
                RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG), ADMIN)
            assert r.code == ResponseCode.SUCCESS, (addr, r.remark)
            body = json.loads(bytes(r.body or b"{}"))
            configs[addr] = (body["globalWhiteAddrs"],
                             sorted((a["accessKey"], a.get("admin"))
                                    for a in body["plainAccessConfigs"]))
        assert configs[ours.address] == configs[stock.address]
        assert ("Padded01", False) in configs[stock.address][1]
    finally:
        ours.stop()
        ns.stop()
        print(f"---- our broker ----\n{ours.log_tail(40)}")


def test_stock_mqadmin_acl_commands_against_our_broker(
        tmp_path: Path, stock_namesrv: Callable[..., JavaServer],
        stock_broker: Callable[..., JavaServer], mqadmin: Callable[..., AdminResult]) -> None:
    """Stock ``mqadmin updateAclConfig`` / ``updateGlobalWhiteAddr`` (without ``-p``: no
    ``aclFileFullPath`` sent) / ``deleteAclConfig`` print the same against a stock broker and
    ours, and leave the same white list behind."""
    stock_home = _write_acl(tmp_path)  # also mqadmin's home: its tools.yml signs as admin
    (stock_home / "conf" / "tools.yml").write_text("accessKey: rocketmq2\nsecretKey: 12345678\n")
    stock_ns = stock_namesrv()
    stock = stock_broker(stock_ns.address, conf={"aclEnable": "true"})
    ns, ours = _our_cluster(tmp_path / "ours", _write_acl(tmp_path / "ours"))
    commands = [
        ("updateAclConfig", "-a", "MqAdmin01", "-s", "12345678", "-m", "true", "-t", "T1=PUB"),
        ("updateGlobalWhiteAddr", "-g", "10.10.109.*,10.10.110.*"),
        ("deleteAclConfig", "-a", "NoSuch001"),
        ("deleteAclConfig", "-a", "MqAdmin01"),
    ]
    try:
        outputs: dict[str, list[tuple[str, bool]]] = {}
        for addr, namesrv in ((stock.address, stock_ns.address), (ours.address, ns.address)):
            out = outputs[addr] = []
            for command, *args in commands:
                r = mqadmin(namesrv, command, "-b", addr, *args)
                text = (r.stdout + r.stderr).replace(addr, "<broker>")
                out.append((" ".join([command, *args]), "success." in text))
                if command == "deleteAclConfig" and args[1] == "NoSuch001":
                    assert "has been deleted failed" in text, r.describe()
        assert outputs[ours.address] == outputs[stock.address]
        assert [ok for _, ok in outputs[stock.address]] == [True, True, False, True]
        whites = []
        for home in (stock_home, tmp_path / "ours" / "rocketmq_home"):
            data = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())
            whites.append(data["globalWhiteRemoteAddresses"])
            assert "MqAdmin01" not in {a["accessKey"] for a in data["accounts"]}
        assert whites == [["10.10.109.*", "10.10.110.*"]] * 2
    finally:
        ours.stop()
        ns.stop()
        print(f"---- our broker ----\n{ours.log_tail(40)}")
