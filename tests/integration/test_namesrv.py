"""The nameserver process on 127.0.0.1 against the captured Apache RocketMQ 4.9.7 traffic.

Every test runs real ``mqnamesrv`` processes (tests/procs.py) and talks to them over TCP
with our ``Channel``. The replay test sends every request the 4.9.7 broker, clients and
mqadmin sent to the 4.9.7 nameserver, in capture order, and checks each of our answers
against the captured one (docs/PROTOCOL.md 3.1, 4.3, 4.4). Our answers stamp version 409
(we implement 4.9.8) where the captured ones say 407; everything else must be equal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import struct
import time
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from aiorocketmq.protocol.bodies import (
    ClusterInfo,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
    string_to_properties,
)
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import (
    CURRENT_VERSION,
    LanguageCode,
    MixAll,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from aiorocketmq.protocol.command import RemotingCommand
from tests.hostile import connect_sync, invoke_sync
from tests.procs import NAMESRV_READY, ServerProcess, namesrv_process
from tests.vectors import body_bytes, frame, frame_bytes, load_frames, vector_file

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RC = RequestCode
TIMEOUT = 5.0
CAPTURED_BROKER = "127.0.0.1:10911"
NAMESRV_CONNS = ("broker->namesrv", "client->namesrv")


# -- helpers ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def connect(addr: str) -> AsyncIterator[Channel]:
    host, _, port = addr.rpartition(":")
    channel = await Channel.connect(host, int(port), timeout=TIMEOUT)
    try:
        yield channel
    finally:
        channel.close()
        await channel.wait_closed()


def captured_request(frame_id: int) -> RemotingCommand:
    """A captured request, decoded from its wire bytes (opaque and version kept)."""
    return RemotingCommand.decode(frame_bytes(frame_id)[4:])


async def call(channel: Channel, code: int, ext: dict[str, str] | None = None,
               body: bytes | None = None, *, version: int = CURRENT_VERSION) -> RemotingCommand:
    request = RemotingCommand.create_request(code, ext, body)
    request.version = version
    return await channel.invoke(request, TIMEOUT)


async def route(channel: Channel, topic: str) -> RemotingCommand:
    return await call(channel, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def register_frame(channel: Channel, frame_id: int = 0, **ext: str) -> RemotingCommand:
    request = captured_request(frame_id)
    assert request.ext_fields is not None
    request.ext_fields.update(ext)
    return await channel.invoke(request, TIMEOUT)


def register_ext(name: str = "broker-x", addr: str = "127.0.0.1:20911", broker_id: int = 0,
                 cluster: str = "DefaultCluster", **more: str) -> dict[str, str]:
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster,
           "haServerAddr": addr.rsplit(":", 1)[0] + ":20912", "brokerId": str(broker_id),
           "compressed": "false", "bodyCrc32": "0"}
    ext.update(more)
    return ext


def register_body(*configs: TopicConfig, counter: int = 1, compressed: bool = False) -> bytes:
    wrapper = TopicConfigSerializeWrapper(
        topic_config_table={c.topic_name: c for c in configs},
        data_version=DataVersion(timestamp=1_700_000_000_000, counter=counter))
    return RegisterBrokerBody(wrapper, []).encode(compressed=compressed)


def crc(body: bytes) -> str:
    return str(zlib.crc32(body) & 0x7FFFFFFF)


def assert_like_captured(ours: RemotingCommand, captured_id: int, *, body: bool = True) -> None:
    """Our answer equals the captured one in every field but opaque and version."""
    cap = frame(captured_id)
    header = cap["header"]
    where = f"answer to frame {cap.get('request_id')} (captured {captured_id})"
    assert ours.code == header["code"], where
    assert ours.flag == header["flag"], where
    assert ours.remark == header.get("remark"), where
    assert ours.ext_fields == header.get("extFields"), where
    assert LanguageCode(ours.language).name == header["language"], where
    assert SerializeType(ours.serialize_type).name == cap["serialize"], where
    if body:
        assert (ours.body or b"") == body_bytes(captured_id), where


def same_wire_header(ours: RemotingCommand, captured_id: int) -> None:
    """Byte-identical JSON header once the captured 407 is read as our 409."""
    captured = bytes.fromhex(frame(captured_id)["header_hex"])
    expected = captured.replace(b'"version":407', f'"version":{CURRENT_VERSION}'.encode())
    assert ours.encode_header() == expected


async def wait_for(predicate: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    """Poll an async condition until it holds, failing after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


# -- replay of the captured traffic -------------------------------------------------------


async def test_replay_captured_namesrv_traffic(namesrv: ServerProcess) -> None:
    """Every captured request to the 4.9.7 nameserver, in order; every answer compared."""
    requests = [f for f in load_frames() if f["conn"] in NAMESRV_CONNS and not f["is_response"]]
    compared = oneway = 0
    seen_codes: set[int] = set()
    async with connect(namesrv.address) as broker, connect(namesrv.address) as client:
        for f in requests:
            channel = broker if f["conn"] == "broker->namesrv" else client
            request = captured_request(f["id"])
            seen_codes.add(request.code)
            if f["oneway"]:
                await channel.invoke_oneway(request, TIMEOUT)
                # Barrier: answers on one connection come in order, so once this returns
                # the oneway registration has been applied.
                await call(channel, RC.GET_BROKER_CLUSTER_INFO)
                oneway += 1
                continue
            ours = await channel.invoke(request, TIMEOUT)
            if "response_id" not in f:
                continue
            answer_id = f["response_id"]
            if request.code == RC.GET_NAMESRV_CONFIG:
                assert_like_captured(ours, answer_id, body=False)  # our paths differ
            elif request.code == RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
                assert_like_captured(ours, answer_id, body=False)  # Java HashSet order
                assert ours.body is not None
                assert sorted(TopicList.decode(ours.body).topic_list) == sorted(
                    TopicList.decode(body_bytes(answer_id)).topic_list)
            else:
                assert_like_captured(ours, answer_id)
            if f["serialize"] == "JSON":
                cap_header = frame(answer_id)["header"]
                assert list(json.loads(ours.encode_header())) == list(cap_header)
            compared += 1
    assert {RC.REGISTER_BROKER, RC.UNREGISTER_BROKER, RC.GET_ROUTEINFO_BY_TOPIC,
            RC.GET_BROKER_CLUSTER_INFO, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
            RC.PUT_KV_CONFIG, RC.DELETE_KV_CONFIG, RC.DELETE_TOPIC_IN_NAMESRV,
            RC.GET_NAMESRV_CONFIG} <= seen_codes
    assert compared >= 190 and oneway >= 25


async def test_register_answer_is_frame_1(namesrv: ServerProcess) -> None:
    async with connect(namesrv.address) as ch:
        ours = await ch.invoke(captured_request(0), TIMEOUT)
        same_wire_header(ours, 1)
        assert ours.body is None
        for request_id in [f["id"] for f in load_frames()
                           if f["code"] == RC.REGISTER_BROKER and not f["is_response"]
                           and "response_id" in f]:
            ours = await ch.invoke(captured_request(request_id), TIMEOUT)
            same_wire_header(ours, frame(request_id)["response_id"])


async def test_route_forms_follow_request_version(namesrv: ServerProcess) -> None:
    """Version 399 gets legacy JSON, 407 or acceptStandardJsonOnly standard (1338-1343)."""
    async with connect(namesrv.address) as ch:
        await ch.invoke(captured_request(1336), TIMEOUT)  # capture 3's registration
        for request_id, answer_id in ((1338, 1339), (1340, 1341), (1342, 1343)):
            ours = await ch.invoke(captured_request(request_id), TIMEOUT)
            same_wire_header(ours, answer_id)
            assert ours.body == body_bytes(answer_id)
        assert body_bytes(1339) == vector_file("route_data.json")
        assert body_bytes(1341) == vector_file("route_data_standard.json")
        legacy = await call(ch, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "VecPropsTopic"},
                            version=399)
        assert legacy.body == body_bytes(1339)
        # Both forms decode to the same route.
        assert legacy.body is not None
        assert TopicRouteData.decode(legacy.body) == TopicRouteData.decode(body_bytes(1341))


async def test_topic_not_exist_remark_is_upstream_text(namesrv: ServerProcess) -> None:
    async with connect(namesrv.address) as ch:
        ours = await ch.invoke(captured_request(5), TIMEOUT)  # TestTopic, before any broker
        same_wire_header(ours, 6)
        assert ours.remark == (
            "No topic route info in name server for the topic: TestTopic\n"
            "See http://rocketmq.apache.org/docs/faq/ for further details.")
        assert ours.body is None


async def test_cluster_info_and_topic_list(namesrv: ServerProcess) -> None:
    async with connect(namesrv.address) as ch:
        await register_frame(ch, 0)
        info = await call(ch, RC.GET_BROKER_CLUSTER_INFO)
        assert info.ext_fields is None
        assert info.body == body_bytes(991)  # legacy form even for version 409
        assert info.body is not None
        cluster = ClusterInfo.decode(info.body)
        assert cluster.broker_addr_table["broker-a"].broker_addrs == {0: CAPTURED_BROKER}
        topics = await call(ch, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert topics.body is not None
        startup_topics = set(json.loads(body_bytes(0))["topicConfigSerializeWrapper"][
            "topicConfigTable"])
        assert set(TopicList.decode(topics.body).topic_list) == startup_topics
        by_cluster = await call(ch, RC.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"})
        assert by_cluster.body is not None
        assert set(TopicList.decode(by_cluster.body).topic_list) == startup_topics
        system = await call(ch, RC.GET_SYSTEM_TOPIC_LIST_FROM_NS)
        assert system.body is not None
        system_list = TopicList.decode(system.body)
        assert sorted(system_list.topic_list) == ["DefaultCluster", "broker-a"]
        assert system_list.broker_addr == CAPTURED_BROKER
        for code in (RC.GET_UNIT_TOPIC_LIST, RC.GET_HAS_UNIT_SUB_TOPIC_LIST,
                     RC.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST):
            answer = await call(ch, code)
            assert answer.body == b'{"topicList":[]}'


# -- KV config ----------------------------------------------------------------------------


async def test_kv_config_survives_a_restart(
        tmp_path: Path, server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    first = server_factory(namesrv_process(tmp_path))
    async with connect(first.address) as ch:
        put = await call(ch, RC.PUT_KV_CONFIG, {"namespace": "NS", "key": "k1", "value": "v1"})
        assert (put.code, put.ext_fields, put.body) == (ResponseCode.SUCCESS, None, None)
        await call(ch, RC.PUT_KV_CONFIG, {"namespace": "NS", "key": "k2", "value": "héllo"})
        await call(ch, RC.PUT_KV_CONFIG, {"namespace": "NS", "key": "gone", "value": "x"})
        deleted = await call(ch, RC.DELETE_KV_CONFIG, {"namespace": "NS", "key": "gone"})
        assert (deleted.code, deleted.ext_fields, deleted.body) == (ResponseCode.SUCCESS, None,
                                                                   None)
        got = await call(ch, RC.GET_KV_CONFIG, {"namespace": "NS", "key": "k1"})
        assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, {"value": "v1"})
    assert first.stop() == 0  # SIGTERM: clean exit

    second = server_factory(namesrv_process(tmp_path))  # same kv path
    async with connect(second.address) as ch:
        got = await call(ch, RC.GET_KV_CONFIG, {"namespace": "NS", "key": "k2"})
        assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, {"value": "héllo"})
        missing = await call(ch, RC.GET_KV_CONFIG, {"namespace": "NS", "key": "gone"})
        assert missing.code == ResponseCode.QUERY_NOT_FOUND
        assert missing.remark == "No config item, Namespace: NS Key: gone"
        assert missing.ext_fields == {}
        listed = await call(ch, RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})
        assert listed.code == ResponseCode.SUCCESS and listed.body is not None
        assert KVTable.decode(listed.body).table == {"k1": "v1", "k2": "héllo"}
        none = await call(ch, RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "NOPE"})
        assert (none.code, none.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                            "No config item, Namespace: NOPE")
    stored = json.loads((tmp_path / "namesrv" / "kvConfig.json").read_text("utf-8"))
    assert stored == {"configTable": {"NS": {"k1": "v1", "k2": "héllo"}}}


async def test_order_topic_config_in_register_answer_and_route(namesrv: ServerProcess) -> None:
    ns = MixAll.ORDER_TOPIC_CONFIG_NAMESPACE
    async with connect(namesrv.address) as ch:
        await call(ch, RC.PUT_KV_CONFIG, {"namespace": ns, "key": "TBW102", "value": "broker-a:8"})
        answer = await register_frame(ch, 0)
        assert answer.code == ResponseCode.SUCCESS and answer.body is not None
        assert KVTable.decode(answer.body).table == {"TBW102": "broker-a:8"}
        plain = await route(ch, "TBW102")
        assert plain.body is not None
        assert TopicRouteData.decode(plain.body).order_topic_conf is None  # not enabled
        update = await call(ch, RC.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n")
        assert update.code == ResponseCode.SUCCESS
        ordered = await route(ch, "TBW102")
        assert ordered.body is not None
        assert TopicRouteData.decode(ordered.body).order_topic_conf == "broker-a:8"


# -- liveness -----------------------------------------------------------------------------


async def test_broker_expires_after_shortened_timeout(
        tmp_path: Path, server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    ns = server_factory(namesrv_process(tmp_path, "--scan-interval-ms", "100",
                                        "--broker-expired-ms", "1000"))
    async with connect(ns.address) as broker, connect(ns.address) as client:
        assert (await register_frame(broker, 0)).code == ResponseCode.SUCCESS
        assert (await route(client, "TBW102")).code == ResponseCode.SUCCESS

        async def gone() -> bool:
            return (await route(client, "TBW102")).code == ResponseCode.TOPIC_NOT_EXIST

        await wait_for(gone, "the silent broker to expire")
        info = await call(client, RC.GET_BROKER_CLUSTER_INFO)
        assert info.body == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'
        # Upstream closes the expired broker's connection too.
        await wait_for(lambda: broker.is_closed, "the expired broker's connection to close")


async def test_closing_the_broker_connection_removes_it_at_once(namesrv: ServerProcess) -> None:
    async with connect(namesrv.address) as client:
        async with connect(namesrv.address) as broker:
            assert (await register_frame(broker, 0)).code == ResponseCode.SUCCESS
            assert (await route(client, "TBW102")).code == ResponseCode.SUCCESS

        async def gone() -> bool:
            return (await route(client, "TBW102")).code == ResponseCode.TOPIC_NOT_EXIST

        # The default expiry is 120 s: only the close can remove it within the deadline.
        await wait_for(gone, "the closed broker to be removed", timeout=10)


async def test_unregister_and_slave_registration(namesrv: ServerProcess) -> None:
    async with connect(namesrv.address) as ch:
        await register_frame(ch, 0)
        slave = await register_frame(ch, 0, brokerId="1", brokerAddr="127.0.0.1:10921",
                                     haServerAddr="127.0.0.1:10922", bodyCrc32="0")
        assert slave.ext_fields == {"haServerAddr": "127.0.0.1:10912",
                                    "masterAddr": CAPTURED_BROKER}
        routed = await route(ch, "TBW102")
        assert routed.body is not None
        assert TopicRouteData.decode(routed.body).broker_datas[0].broker_addrs == {
            0: CAPTURED_BROKER, 1: "127.0.0.1:10921"}
        answer = await ch.invoke(captured_request(1233), TIMEOUT)  # master unregisters
        same_wire_header(answer, 1234)
        routed = await route(ch, "TBW102")
        assert routed.body is not None
        assert TopicRouteData.decode(routed.body).broker_datas[0].broker_addrs == {
            1: "127.0.0.1:10921"}


# -- admin requests -----------------------------------------------------------------------


async def test_admin_requests(namesrv: ServerProcess) -> None:
    async with connect(namesrv.address) as ch:
        await register_frame(ch, 0)
        wipe = await call(ch, RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        assert (wipe.code, wipe.ext_fields, wipe.body) == (ResponseCode.SUCCESS,
                                                           {"wipeTopicCount": "8"}, None)
        routed = await route(ch, "TBW102")
        assert routed.body is not None
        assert TopicRouteData.decode(routed.body).queue_datas[0].perm == 5
        add = await call(ch, RC.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        assert add.ext_fields == {"addTopicCount": "8"}
        routed = await route(ch, "TBW102")
        assert routed.body is not None
        assert TopicRouteData.decode(routed.body).queue_datas[0].perm == 6

        version = json.loads(body_bytes(0))["topicConfigSerializeWrapper"]["dataVersion"]
        query_ext = {"brokerName": "broker-a", "brokerAddr": CAPTURED_BROKER,
                     "clusterName": "DefaultCluster", "brokerId": "0"}
        same = await call(ch, RC.QUERY_DATA_VERSION, query_ext,
                          DataVersion(version["timestamp"], version["counter"]).encode())
        assert same.ext_fields == {"changed": "false"}
        assert same.body is not None
        assert DataVersion.decode(same.body) == DataVersion(version["timestamp"],
                                                            version["counter"])
        other = await call(ch, RC.QUERY_DATA_VERSION, query_ext,
                           DataVersion(1, 99).encode())
        assert other.ext_fields == {"changed": "true"}

        deleted = await call(ch, RC.DELETE_TOPIC_IN_NAMESRV,
                             {"topic": "BenchmarkTest", "clusterName": "DefaultCluster"})
        assert (deleted.code, deleted.ext_fields, deleted.body) == (ResponseCode.SUCCESS, None,
                                                                   None)
        assert (await route(ch, "BenchmarkTest")).code == ResponseCode.TOPIC_NOT_EXIST
        await call(ch, RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "SELF_TEST_TOPIC"})
        assert (await route(ch, "SELF_TEST_TOPIC")).code == ResponseCode.TOPIC_NOT_EXIST
        assert (await route(ch, "TBW102")).code == ResponseCode.SUCCESS


async def test_namesrv_config_round_trip(namesrv: ServerProcess, tmp_path: Path) -> None:
    async with connect(namesrv.address) as ch:
        got = await call(ch, RC.GET_NAMESRV_CONFIG)
        assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, None)
        assert got.body is not None
        props = string_to_properties(got.body.decode())
        captured_keys = set(string_to_properties(body_bytes(1099).decode()))
        assert {"kvConfigPath", "configStorePath", "rocketmqHome", "productEnvName",
                "clusterTest", "orderMessageEnable", "listenPort",
                "serverChannelMaxIdleTimeSeconds"} <= captured_keys & set(props)
        assert props["kvConfigPath"] == str(tmp_path / "namesrv" / "kvConfig.json")
        assert props["listenPort"] == namesrv.address.rsplit(":", 1)[1]  # the bound port

        update = await call(ch, RC.UPDATE_NAMESRV_CONFIG,
                            body=b"productEnvName=qa\nclusterTest=true\nnoSuchKey=1\n")
        assert (update.code, update.ext_fields, update.body) == (ResponseCode.SUCCESS, None,
                                                                None)
        after = string_to_properties((await call(ch, RC.GET_NAMESRV_CONFIG)).body.decode())
        assert (after["productEnvName"], after["clusterTest"]) == ("qa", "true")
        assert "noSuchKey" not in after  # upstream mergeIfExist: unknown keys are ignored
        stored = string_to_properties(
            (tmp_path / "namesrv" / "namesrv.properties").read_text("utf-8"))
        assert stored["productEnvName"] == "qa"

        for key in ("kvConfigPath", "configStorePath"):
            denied = await call(ch, RC.UPDATE_NAMESRV_CONFIG, body=f"{key}=/tmp/x\n".encode())
            assert (denied.code, denied.remark) == (ResponseCode.NO_PERMISSION,
                                                    "Can not update config path")
        bad = await call(ch, RC.UPDATE_NAMESRV_CONFIG,
                         body=b"productEnvName=prod\nlistenPort=notanumber\n")
        assert bad.code == ResponseCode.SYSTEM_ERROR and "listenPort" in (bad.remark or "")
        final = string_to_properties((await call(ch, RC.GET_NAMESRV_CONFIG)).body.decode())
        assert final["productEnvName"] == "qa"  # all or nothing


HANGUP_ROUNDS = 60
MALFORMED = struct.pack(">i", 2) + b"xx"  # shorter than the header-length word


def _reset(sock: socket.socket) -> None:
    """Close with RST, not FIN: the server sees the connection reset mid-request."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_changes_from_connections_reset_mid_request_survive_a_restart(
        tmp_path: Path, server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    """Clients that send PUT_KV_CONFIG or UPDATE_NAMESRV_CONFIG and hang up at random moments
    (their handlers cancelled while the file is written, or before they start when a
    malformed frame follows), around puts that are answered: after a restart both files
    parse, the KV file holds every answered put, and the log has no traceback and no
    coroutine left unawaited."""
    first = server_factory(namesrv_process(tmp_path))
    rnd = random.Random(4907)
    acked: dict[str, str] = {}
    for i in range(HANGUP_ROUNDS):
        frames = [RemotingCommand.create_request(
            RC.PUT_KV_CONFIG, {"namespace": "NS", "key": f"churn{j}", "value": f"{i}.{j}"}
        ).encode() for j in range(5)]
        frames.append(RemotingCommand.create_request(
            RC.UPDATE_NAMESRV_CONFIG, None, f"productEnvName=round{i}\n".encode()).encode())
        frames[0] += MALFORMED
        frames[-1] += MALFORMED if i % 2 else b""
        hung_up = []
        for data in frames:
            sock = connect_sync(first.address)
            sock.sendall(data)
            hung_up.append(sock)
        rnd.shuffle(hung_up)
        cut = rnd.randrange(len(hung_up) + 1)
        time.sleep(rnd.random() * 0.003)
        for sock in hung_up[:cut]:
            _reset(sock)
        key = f"acked{i}"
        with connect_sync(first.address) as sock:
            answer = invoke_sync(sock, RC.PUT_KV_CONFIG,
                                 {"namespace": "NS", "key": key, "value": str(i)})
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        acked[key] = str(i)
        for sock in hung_up[cut:]:
            _reset(sock)
    assert first.stop() == 0

    home = tmp_path / "namesrv"
    stored = json.loads((home / "kvConfig.json").read_text("utf-8"))["configTable"]["NS"]
    assert acked.items() <= stored.items()
    assert set(os.listdir(home)) <= {"kvConfig.json", "namesrv.properties", "namesrv.log"}

    second = server_factory(namesrv_process(tmp_path))  # same files
    with connect_sync(second.address) as sock:
        listed = invoke_sync(sock, RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})
        assert listed.code == ResponseCode.SUCCESS and listed.body is not None
        assert KVTable.decode(listed.body).table == stored
        config = invoke_sync(sock, RC.GET_NAMESRV_CONFIG, None)
        assert config.body is not None
    if (home / "namesrv.properties").exists():  # a whole file: every key, a value we sent
        props = string_to_properties((home / "namesrv.properties").read_text("utf-8"))
        assert props.keys() == string_to_properties(config.body.decode()).keys()
        assert props["productEnvName"].startswith("round")
    assert second.stop() == 0
    log = (home / "namesrv.log").read_text("utf-8", errors="replace").splitlines()
    assert [line for line in log if "Traceback" in line or "never awaited" in line] == []


# -- two servers, bad input ---------------------------------------------------------------


def test_corrupt_kv_file_fails_the_start(tmp_path: Path) -> None:
    kv = tmp_path / "namesrv" / "kvConfig.json"
    kv.parent.mkdir(parents=True)
    kv.write_text('{"configTable":{"NS":')
    proc = namesrv_process(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="exited with 1 before ready"):
            proc.start()
    finally:
        proc.kill()  # closes the stdout pipe that start() leaves open on an early exit
    assert kv.read_text() == '{"configTable":{"NS":'  # left for the operator, not overwritten
    errors = [ln for ln in proc.log_path.read_text().splitlines() if ln.startswith("mqnamesrv")]
    assert len(errors) == 1 and errors[0].startswith("mqnamesrv: cannot start:"), errors


def test_taken_port_fails_the_start(
        tmp_path: Path, server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    first = server_factory(namesrv_process(tmp_path, name="first"))
    port = first.address.rsplit(":", 1)[1]
    second = ServerProcess([*namesrv_process(tmp_path, name="second").argv, "--port", port],
                           first.ready, tmp_path / "second" / "namesrv.log")
    try:
        with pytest.raises(RuntimeError, match="exited with 1 before ready"):
            second.start()
    finally:
        second.kill()
    assert first.alive()
    # One line with the address; it used to be "[Errno 98] Address already in use" in a log
    # event after a "remoting.server_stopped" line for a server that never started.
    log = second.log_path.read_text()
    assert log.strip().splitlines()[-1] == (
        f"mqnamesrv: cannot listen on 127.0.0.1:{port}: address already in use"), log
    assert "server_stopped" not in log and "namesrv.stopped" not in log and "Errno" not in log, log


def test_config_file_keys_no_setting_reads_are_named(
        tmp_path: Path, server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    # mqnamesrv used to ignore them silently (mqbroker warns): a stock key we accept and do
    # not use is named as such, a misspelt one with the key it likely meant.
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=0\nserverWorkerThreads=16\nuseEpollNativeSelector=true\n"
                    "orderMessageEnable=false\nkvConfigPth=/tmp/x.json\n")
    proc = server_factory(ServerProcess(
        [*namesrv_process(tmp_path).argv, "-c", str(conf)], NAMESRV_READY,
        tmp_path / "namesrv" / "namesrv.log"))
    proc.stop()
    log = proc.log_path.read_text().splitlines()
    not_used = [ln for ln in log if "namesrv.config_keys_not_used" in ln]
    assert len(not_used) == 1, log
    assert "serverWorkerThreads" in not_used[0] and "useEpollNativeSelector" in not_used[0]
    assert "orderMessageEnable" not in not_used[0]  # ours
    unknown = [ln for ln in log if "namesrv.config_unknown_key" in ln]
    assert len(unknown) == 1 and "kvConfigPth" in unknown[0] and "kvConfigPath" in unknown[0], log


async def test_two_nameservers_are_independent(
        tmp_path: Path, server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    one = server_factory(namesrv_process(tmp_path, name="ns1"))
    two = server_factory(namesrv_process(tmp_path, name="ns2"))
    assert one.address != two.address
    async with connect(one.address) as a, connect(two.address) as b:
        await register_frame(a, 0)
        await call(b, RC.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": "two"})
        assert (await route(a, "TBW102")).code == ResponseCode.SUCCESS
        assert (await route(b, "TBW102")).code == ResponseCode.TOPIC_NOT_EXIST
        assert (await call(a, RC.GET_KV_CONFIG, {"namespace": "NS", "key": "k"})).code == (
            ResponseCode.QUERY_NOT_FOUND)
        assert (await call(b, RC.GET_KV_CONFIG, {"namespace": "NS", "key": "k"})).ext_fields == {
            "value": "two"}


async def snapshot(ch: Channel) -> tuple[bytes | None, bytes | None]:
    info = await call(ch, RC.GET_BROKER_CLUSTER_INFO)
    topics = await call(ch, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    return info.body, topics.body


async def test_bad_registrations_change_nothing_but_bad_topics_are_left_out(namesrv: ServerProcess) -> None:
    async with connect(namesrv.address) as ch:
        await register_frame(ch, 0)
        before = await snapshot(ch)
        good, bad_topic = TopicConfig("NewGood", 4, 4), TopicConfig("NewBad", -1, 4)
        json_bad = register_body(good, bad_topic, counter=5)
        compressed = register_body(good, counter=6, compressed=True)
        absurd = register_body(good, TopicConfig("Huge", 4, 70000), counter=7)
        cases: list[tuple[dict[str, str], bytes | None, str]] = [
            (register_ext(bodyCrc32="12345"), json_bad, "crc32 not match"),
            (register_ext(), b'{"topicConfigSerializeWrapper":{"topicConfigTable":',
             "RegisterBrokerBody"),
            (register_ext(), b"\x00\x01garbage", "RegisterBrokerBody"),
            (register_ext(compressed="true"), compressed[: len(compressed) // 2],
             "RegisterBrokerBody"),
            (register_ext(compressed="true"), b"not zlib at all", "inflate"),
            (register_ext(name=""), register_body(good), "brokerName"),
            ({k: v for k, v in register_ext().items() if k != "brokerName"}, None,
             "the custom field <brokerName> is null"),
            (register_ext(brokerId="x"), None, "brokerId"),
        ]
        for ext, body, remark in cases:
            answer = await call(ch, RC.REGISTER_BROKER, ext, body)
            assert answer.code == ResponseCode.SYSTEM_ERROR, (ext, body)
            assert answer.remark and remark in answer.remark, (answer.remark, remark)
            assert await snapshot(ch) == before
            assert (await route(ch, "NewGood")).code == ResponseCode.TOPIC_NOT_EXIST
        crc_answer = await call(ch, RC.REGISTER_BROKER, register_ext(bodyCrc32="12345"), json_bad)
        assert crc_answer.ext_fields == {}  # upstream's answer has the response header
        # A oneway bad registration is dropped without an answer and stores nothing.
        oneway = RemotingCommand.create_request(RC.REGISTER_BROKER, register_ext(bodyCrc32="1"),
                                                json_bad)
        await ch.invoke_oneway(oneway, TIMEOUT)
        assert await snapshot(ch) == before
        # A topic config no client could use is left out; the broker's other topics register
        # (a stock broker registers whatever int a client gave it, issue #18).
        for body in (json_bad, absurd):
            answer = await call(ch, RC.REGISTER_BROKER, register_ext(), body)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert (await route(ch, "NewGood")).code == ResponseCode.SUCCESS
        for topic in ("NewBad", "Huge"):
            assert (await route(ch, topic)).code == ResponseCode.TOPIC_NOT_EXIST


async def test_other_body_forms_register(namesrv: ServerProcess) -> None:
    async with connect(namesrv.address) as ch:
        body = register_body(TopicConfig("Zipped", 2, 2), compressed=True)
        answer = await call(ch, RC.REGISTER_BROKER, register_ext(bodyCrc32=crc(body),
                                                                 compressed="true"), body)
        assert (answer.code, answer.ext_fields) == (ResponseCode.SUCCESS, {})
        routed = await route(ch, "Zipped")
        assert routed.body is not None
        qd = TopicRouteData.decode(routed.body).queue_datas[0]
        assert (qd.broker_name, qd.write_queue_nums) == ("broker-x", 2)
        # Before V3_0_11 the body is a bare TopicConfigSerializeWrapper.
        wrapper = TopicConfigSerializeWrapper({"Old": TopicConfig("Old", 1, 1)},
                                              DataVersion(1, 1)).encode()
        old = await call(ch, RC.REGISTER_BROKER,
                         register_ext(name="broker-old", addr="127.0.0.1:30911"), wrapper,
                         version=28)
        assert old.code == ResponseCode.SUCCESS
        assert (await route(ch, "Old")).code == ResponseCode.SUCCESS
        # No body at all: the broker is known, with no topics.
        bare = await call(ch, RC.REGISTER_BROKER,
                          register_ext(name="broker-empty", addr="127.0.0.1:40911"))
        assert bare.code == ResponseCode.SUCCESS
        info = await call(ch, RC.GET_BROKER_CLUSTER_INFO)
        assert info.body is not None
        assert "broker-empty" in ClusterInfo.decode(info.body).broker_addr_table


async def test_unknown_code_and_garbage_frames(namesrv: ServerProcess) -> None:
    host, _, port = namesrv.address.rpartition(":")
    async with connect(namesrv.address) as ch:
        await register_frame(ch, 0)
        before = await snapshot(ch)
        unknown = await call(ch, 9999)
        assert (unknown.code, unknown.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                  " request type 9999 not supported")
        # Frames that break the wire format close that one connection, nothing else.
        garbage_frames = [
            struct.pack(">ii", 100, 0x00FFFFFF) + b"x" * 96,  # header longer than the frame
            struct.pack(">ii", 8, 0x07000004) + b"{}{}",  # unknown serialize type 7
            struct.pack(">ii", 8, 4) + b"nope",  # header is not JSON
            struct.pack(">i", 0x7FFFFFFF),  # frame far over 16 MiB
        ]
        for garbage in garbage_frames:
            reader, writer = await asyncio.open_connection(host, int(port))
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            writer.write(garbage)
            await writer.drain()
            async with asyncio.timeout(TIMEOUT):
                assert await reader.read() == b""  # the server closed it
            writer.close()
            await writer.wait_closed()
        assert namesrv.alive()
        assert await snapshot(ch) == before
        assert (await route(ch, "TBW102")).code == ResponseCode.SUCCESS
