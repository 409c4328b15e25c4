"""ACL on our broker (aclEnable=true, plain_acl.yml under -Drocketmq.home.dir): our signing
client produces and consumes; refusals get the stock remark and store nothing; mqadmin's
ACL commands; the file is reloaded without a restart; 10^4 forged requests are all refused.
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from aiorocketmq.client import ClientConfig, Message, Producer
from aiorocketmq.client.admin import acl as acl_admin
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.acl import AclClientRPCHook, SessionCredentials
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import MQBrokerError
from aiorocketmq.protocol.frame import FrameDecoder
from tests.integration.test_client_produce_consume import Collector, consumer, wait_for
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PPM = "org.apache.rocketmq.acl.plain.PlainPermissionManager"
EXC = "org.apache.rocketmq.acl.common.AclException"

PLAIN_ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {"accessKey": "RocketMQ", "secretKey": "12345678", "whiteRemoteAddress": None,
         "admin": False, "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB",
         "topicPerms": ["AclTopic=PUB|SUB", "SubOnly=SUB", "%RETRY%AclGroup=PUB|SUB"],
         "groupPerms": ["DeniedGroup=DENY"]},
        {"accessKey": "rocketmq2", "secretKey": "12345678", "admin": True},
    ],
}
USER = ClientConfig(access_key="RocketMQ", secret_key="12345678")
ADMIN = {"access_key": "rocketmq2", "secret_key": "12345678"}


@pytest.fixture(scope="module")
def acl_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("rmqhome")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(PLAIN_ACL, sort_keys=False))
    (home / "conf" / "tools.yml").write_text("accessKey: rocketmq2\nsecretKey: 12345678\n")
    return home


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory,
            acl_home: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp = tmp_path_factory.mktemp("acl")
    ns = namesrv_process(tmp).start()
    br = broker_process(tmp, ns.address, conf={"aclEnable": "true"},
                        extra=(f"-Drocketmq.home.dir={acl_home}",))
    try:
        br.start()
        yield ns, br
    finally:
        br.stop()
        ns.stop()
        print(f"---- broker ----\n{br.log_tail(80)}")


async def _create_topic(ns: ServerProcess, br: ServerProcess, topic: str) -> None:
    from aiorocketmq.protocol.bodies import TopicConfig

    async with MQAdmin(ns.address, client_options=ADMIN) as admin:
        await admin.create_topic(br.address, TopicConfig(topic, 4, 4))


async def _raw(br: ServerProcess, request: RemotingCommand,
               hook: AclClientRPCHook | None = None) -> RemotingCommand:
    from aiorocketmq.protocol.remoting_client import RemotingClient

    async with RemotingClient(rpc_hook=hook) as client:
        return await client.invoke(br.address, request, 5.0)


def _send_request(topic: str, body: bytes = b"x") -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, ext_fields={
        "a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0",
        "h": "0", "i": "", "j": "0", "k": "false", "m": "false"}, body=body)


async def _max_offset(ns: ServerProcess, br: ServerProcess, topic: str) -> int:
    from aiorocketmq.protocol.bodies import MessageQueue

    async with MQAdmin(ns.address, client_options=ADMIN) as admin:
        total = 0
        for q in range(4):
            total += (await admin.queue_offsets(br.address, MessageQueue(topic, "broker-a", q)))[1]
        return total


async def test_signed_client_produces_and_consumes(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, br = cluster
    await _create_topic(ns, br, "AclTopic")
    got = Collector()
    c = consumer(ns, "AclGroup", "AclTopic", got, config=USER)
    await c.start()
    try:
        async with Producer("AclProducer", ns.address, config=USER) as producer:
            for i in range(10):
                await producer.send(Message("AclTopic", f"m{i}".encode()))
        await wait_for(lambda: len(got.bodies()) == 10, 30, "10 messages through ACL")
    finally:
        await c.shutdown()


async def test_refusals_store_nothing(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, br = cluster
    await _create_topic(ns, br, "SubOnly")
    before = await _max_offset(ns, br, "SubOnly")
    unsigned = await _raw(br, _send_request("SubOnly"))
    assert (unsigned.code, unsigned.remark) == (
        ResponseCode.SYSTEM_ERROR,
        f"{EXC}: No accessKey is configured, {PPM}.validate(PlainPermissionManager.java:663)")
    no_pub = await _raw(br, _send_request("SubOnly"),
                        AclClientRPCHook(SessionCredentials("RocketMQ", "12345678")))
    assert no_pub.remark == (f"{EXC}: No default permission for topic:SubOnly, "
                             f"{PPM}.checkPerm(PlainPermissionManager.java:610)")
    wrong = await _raw(br, _send_request("SubOnly"),
                       AclClientRPCHook(SessionCredentials("RocketMQ", "not-the-secret")))
    assert wrong.remark.startswith(f"{EXC}: Check signature failed for accessKey=RocketMQ, ")
    unknown = await _raw(br, _send_request("SubOnly"),
                         AclClientRPCHook(SessionCredentials("Stranger", "12345678")))
    assert unknown.remark.startswith(f"{EXC}: No acl config for Stranger, ")
    create = RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields={
        "topic": "MadeByUser", "defaultTopic": "TBW102", "readQueueNums": "4",
        "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "false"})
    not_admin = await _raw(br, create, AclClientRPCHook(SessionCredentials("RocketMQ", "12345678")))
    assert not_admin.remark.startswith(
        f"{EXC}: Need admin permission for request code=17, but accessKey=RocketMQ is not, ")
    assert await _max_offset(ns, br, "SubOnly") == before
    async with MQAdmin(ns.address, client_options=ADMIN) as admin:
        assert await admin.topic_config(br.address, "MadeByUser") is None


async def test_forged_signatures_are_all_refused(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    """10^4 requests with random, truncated or replayed signatures over one raw connection."""
    ns, br = cluster
    await _create_topic(ns, br, "AclTopic")
    before = await _max_offset(ns, br, "AclTopic")
    good = _send_request("AclTopic", b"replayed")
    AclClientRPCHook(SessionCredentials("RocketMQ", "12345678")).do_before_request("", good)
    assert good.ext_fields is not None
    sig = good.ext_fields["Signature"]
    rng = random.Random(13)
    host, port = br.address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    decoder = FrameDecoder()
    try:
        n = 10_000
        batch = 200
        refused = 0
        for start in range(0, n, batch):
            frames = []
            for i in range(start, start + batch):
                ext = dict(good.ext_fields)
                kind = i % 4
                if kind == 0:
                    ext["Signature"] = base64.b64encode(rng.randbytes(20)).decode()
                elif kind == 1:
                    ext["Signature"] = sig[:rng.randrange(len(sig))]
                elif kind == 2:  # replayed signature, another body
                    ext["b"] = "AclTopic"
                else:  # replayed signature, another topic field
                    ext["e"] = str(rng.randrange(1, 4))
                body = b"tampered" if kind == 2 else b"replayed"
                frames.append((ext, body))
            writer.write(b"".join(RemotingCommand.create_request(
                RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=body).encode()
                for ext, body in frames))
            answers: list[RemotingCommand] = []
            async with asyncio.timeout(30):
                while len(answers) < batch:
                    answers.extend(decoder.feed_and_decode(await reader.read(65536)))
            for answer in answers:
                assert answer.code == ResponseCode.SYSTEM_ERROR, answer
                assert answer.remark is not None and answer.remark.startswith(EXC)
                refused += 1
        assert refused == n
    finally:
        writer.close()
        await writer.wait_closed()
    assert br.alive(), "the broker exited"
    assert await _max_offset(ns, br, "AclTopic") == before


async def test_mqadmin_acl_commands(cluster: tuple[ServerProcess, ServerProcess],
                                    acl_home: Path) -> None:
    ns, br = cluster
    env = dict(os.environ, ROCKETMQ_HOME=str(acl_home))

    def mqadmin(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "aiorocketmq.client.admin.cli", *args,
                               "-n", ns.address], capture_output=True, text=True, env=env,
                              timeout=60, check=False)

    r = mqadmin("updateAclConfig", "-b", br.address, "-a", "NewUser1", "-s", "NewSecret1",
                "-i", "PUB", "-t", "AclTopic=PUB")
    assert r.returncode == 0, r.stderr
    assert f"create or update plain access config to {br.address} success." in r.stdout
    assert "NewSecret1" not in r.stdout
    data = yaml.safe_load((acl_home / "conf" / "plain_acl.yml").read_text())
    assert data["accounts"][-1]["accessKey"] == "NewUser1"
    r = mqadmin("getAclConfig", "-b", br.address)
    assert r.returncode == 0, r.stderr
    assert "globalWhiteRemoteAddresses: [10.10.103.*]" in r.stdout
    assert "  accessKey         : NewUser1" in r.stdout
    r = mqadmin("clusterAclConfigVersion", "-c", "DefaultCluster")
    assert r.returncode == 0, r.stderr
    assert "plain_acl.yml" in r.stdout and "get cluster's plain access config version" in r.stdout
    # the new account works at once, for a topic it may publish to
    response = await _raw(br, _send_request("AclTopic"),
                          AclClientRPCHook(SessionCredentials("NewUser1", "NewSecret1")))
    assert response.code == ResponseCode.SUCCESS, response.remark
    r = mqadmin("deleteAclConfig", "-b", br.address, "-a", "NewUser1")
    assert r.returncode == 0, r.stderr
    r = mqadmin("deleteAclConfig", "-b", br.address, "-a", "NewUser1")
    assert r.returncode == 1
    assert "has been deleted failed" in r.stderr
    r = mqadmin("updateGlobalWhiteAddr", "-b", br.address, "-g", "10.10.103.*,10.10.104.*")
    assert r.returncode == 0, r.stderr
    # without tools.yml credentials the broker refuses the admin commands
    env.pop("ROCKETMQ_HOME")
    r = mqadmin("updateAclConfig", "-b", br.address, "-a", "NewUser2", "-s", "NewSecret2")
    assert r.returncode == 1 and "No accessKey is configured" in r.stderr


async def test_file_change_reloads_without_restart(cluster: tuple[ServerProcess, ServerProcess],
                                                   acl_home: Path) -> None:
    ns, br = cluster
    hook = AclClientRPCHook(SessionCredentials("LateUser1", "LateSecret1"))
    first = await _raw(br, _send_request("AclTopic"), hook)
    assert "No acl config for LateUser1" in (first.remark or "")
    path = acl_home / "conf" / "plain_acl.yml"
    data = yaml.safe_load(path.read_text())
    data["accounts"].append({"accessKey": "LateUser1", "secretKey": "LateSecret1",
                             "defaultTopicPerm": "PUB"})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 15
    while True:
        response = await _raw(br, _send_request("AclTopic"), hook)
        if response.code == ResponseCode.SUCCESS:
            break
        assert loop.time() < deadline, response.remark
        await asyncio.sleep(0.2)


async def test_acl_admin_api(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, br = cluster
    async with MQAdmin(ns.address, client_options=ADMIN) as admin:
        info = await acl_admin.acl_version_info(admin, br.address)
        assert info.broker_name == "broker-a" and info.cluster_name == "DefaultCluster"
        assert any(p.endswith("plain_acl.yml") for p in info.all_acl_config_data_version)
        with pytest.raises(MQBrokerError) as err:
            from aiorocketmq.protocol.acl import PlainAccessConfig

            await acl_admin.update_acl_config(admin, br.address,
                                              PlainAccessConfig(access_key="short", secret_key="s"))
        assert err.value.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED


async def test_acl_admin_headers_answered_as_stock(
        cluster: tuple[ServerProcess, ServerProcess], acl_home: Path) -> None:
    """Codes 50 / 51 / 53 with a field missing, and an ``admin`` of " true": the answers a
    stock 4.9.7 broker gives (tests/interop/test_stock_acl.py runs both side by side).
    Stock's header decoder lets a missing @CFNotNull field through as null, its handlers
    then fail with their own code and remark; ``admin`` is ``Boolean.parseBoolean``."""
    ns, br = cluster
    signer = AclClientRPCHook(SessionCredentials("rocketmq2", "12345678"))

    async def ask(code: int, ext: dict[str, str],
                  hook: AclClientRPCHook = signer) -> tuple[int, str | None]:
        r = await _raw(br, RemotingCommand.create_request(code, ext_fields=ext), hook)
        return r.code, r.remark

    assert await ask(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"secretKey": "12345678"}) == (
        ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
        "The accessKey=null and secretKey=12345678 cannot be null and length should longer "
        "than 6")
    assert await ask(RequestCode.DELETE_ACL_CONFIG, {}) == (
        ResponseCode.DELETE_ACL_CONFIG_FAILED,
        "The accesskey[null] corresponding to accessConfig has been deleted failed.")
    assert await ask(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {}) == (
        ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
        "The globalWhiteAddresses[null] has been updated failed.")
    # without aclFileFullPath (mqadmin updateGlobalWhiteAddr without -p): the default file
    path = acl_home / "conf" / "plain_acl.yml"
    assert await ask(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                     {"globalWhiteAddrs": "10.10.103.*,10.10.108.*"}) == (
        ResponseCode.SUCCESS, None)
    assert yaml.safe_load(path.read_text())["globalWhiteRemoteAddresses"] == [
        "10.10.103.*", "10.10.108.*"]
    # " true" is not "true": the account is created, but not as an admin
    assert await ask(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
        "accessKey": "Padded01", "secretKey": "12345678", "admin": " true"}) == (
        ResponseCode.SUCCESS, None)
    accounts = {a["accessKey"]: a for a in yaml.safe_load(path.read_text())["accounts"]}
    assert accounts["Padded01"]["admin"] is False
    code, remark = await ask(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": "MadeByPadded", "defaultTopic": "TBW102", "readQueueNums": "4",
        "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "false"},
        AclClientRPCHook(SessionCredentials("Padded01", "12345678")))
    assert (code, (remark or "").startswith(
        f"{EXC}: Need admin permission for request code=17, but accessKey=Padded01 is not, ")
            ) == (ResponseCode.SYSTEM_ERROR, True), remark
    assert await ask(RequestCode.DELETE_ACL_CONFIG, {"accessKey": "Padded01"}) == (
        ResponseCode.SUCCESS, None)
