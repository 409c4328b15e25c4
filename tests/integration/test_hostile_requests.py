"""One request that parses but carries hostile values must not poison a server (issue #18).

Each case sends one such request to real ``mqnamesrv`` / ``mqbroker`` processes, expects a
refusal whose remark names the field, then checks that legitimate traffic still works,
that the metadata files on disk match what the servers answer, and that a graceful stop
exits 0 without leaving the ``abort`` file (so the next start is a normal one).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.protocol import fastjson
from aiorocketmq.protocol.bodies import TopicRouteData
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import (
    CreateTopicRequestHeader,
    GetKVConfigRequestHeader,
    GetRouteInfoRequestHeader,
    PutKVConfigRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.hostile import raw_invoke
from tests.integration.test_broker_send_pull import TIMEOUT, send
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = pytest.mark.timeout(120)

Factory = Callable[[ServerProcess], ServerProcess]


def store_of(tmp_path: Path, name: str = "broker-a") -> Path:
    return tmp_path / name / "store"


def stop_cleanly(proc: ServerProcess, store: Path | None = None) -> None:
    assert proc.stop() == 0, proc.log_tail()
    if store is not None:
        assert not (store / "abort").exists(), "abort file left behind: next start would recover"
    assert "Traceback" not in proc.log_path.read_text(errors="replace"), proc.log_tail()


async def route_of(client: RemotingClient, namesrv: str, topic: str) -> RemotingCommand:
    req = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                         GetRouteInfoRequestHeader(topic=topic).to_ext_fields())
    return await client.invoke(namesrv, req, TIMEOUT)


async def wait_route(client: RemotingClient, namesrv: str, topic: str,
                     deadline_s: float = 15.0) -> TopicRouteData:
    deadline = time.monotonic() + deadline_s
    while True:
        r = await route_of(client, namesrv, topic)
        if r.code == ResponseCode.SUCCESS:
            return TopicRouteData.decode(r.body or b"")
        assert time.monotonic() < deadline, f"no route for {topic}: {r.code} {r.remark}"
        await asyncio.sleep(0.2)


def create_topic_ext(topic: str, *, read: int = 4, write: int = 4, perm: int = 6) -> dict[str, str]:
    return CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=read, write_queue_nums=write,
        perm=perm, topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False).to_ext_fields()


def topics_json(store: Path) -> dict[str, object]:
    table = json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"]
    assert isinstance(table, dict)
    return table


# -- 1: a lone surrogate in a consumer group ---------------------------------------------


async def test_surrogate_group_in_offset_commit_is_refused(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    br = server_factory(broker_process(tmp_path, namesrv.address,
                                       conf={"flushConsumerOffsetInterval": "100"}))
    store = store_of(tmp_path)
    client = RemotingClient()
    try:
        assert (await send(client, br.address, "OffsetTopic", b"m")).code == ResponseCode.SUCCESS
        bad = await raw_invoke(br.address, RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": "G\ud800", "topic": "OffsetTopic", "queueId": "0",
            "commitOffset": "1"})
        assert bad.code == ResponseCode.SYSTEM_ERROR
        assert "consumerGroup" in (bad.remark or "")
        good = RemotingCommand.create_request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            UpdateConsumerOffsetRequestHeader(consumer_group="CG", topic="OffsetTopic",
                                              queue_id=0, commit_offset=1).to_ext_fields())
        assert (await client.invoke(br.address, good, TIMEOUT)).code == ResponseCode.SUCCESS
        path = store / "config" / "consumerOffset.json"
        deadline = time.monotonic() + 10
        while not (path.exists() and "OffsetTopic@CG" in path.read_text()):
            assert time.monotonic() < deadline, "consumerOffset.json never written"
            await asyncio.sleep(0.1)
        query = RemotingCommand.create_request(
            RequestCode.QUERY_CONSUMER_OFFSET,
            QueryConsumerOffsetRequestHeader(consumer_group="CG", topic="OffsetTopic",
                                             queue_id=0).to_ext_fields())
        assert (await client.invoke(br.address, query, TIMEOUT)).ext_fields == {"offset": "1"}
    finally:
        await client.close()
    stop_cleanly(br, store)
    table = fastjson.loads(path.read_bytes())["offsetTable"]
    assert table == {"OffsetTopic@CG": {0: 1}}


# -- 2: a lone surrogate in a KV value ---------------------------------------------------


async def test_surrogate_kv_value_is_refused_and_memory_matches_disk(
        tmp_path: Path, server_factory: Factory) -> None:
    ns = server_factory(namesrv_process(tmp_path))
    kv_path = tmp_path / "namesrv" / "kvConfig.json"
    client = RemotingClient()
    try:
        bad = await raw_invoke(ns.address, RequestCode.PUT_KV_CONFIG,
                               {"namespace": "NS", "key": "bad", "value": "v\ud800"})
        assert bad.code == ResponseCode.SYSTEM_ERROR
        assert "value" in (bad.remark or "")
        put = RemotingCommand.create_request(
            RequestCode.PUT_KV_CONFIG,
            PutKVConfigRequestHeader(namespace="NS", key="good", value="v").to_ext_fields())
        assert (await client.invoke(ns.address, put, TIMEOUT)).code == ResponseCode.SUCCESS
        get_bad = RemotingCommand.create_request(
            RequestCode.GET_KV_CONFIG, GetKVConfigRequestHeader(namespace="NS", key="bad").to_ext_fields())
        assert (await client.invoke(ns.address, get_bad, TIMEOUT)).code == ResponseCode.QUERY_NOT_FOUND
    finally:
        await client.close()
    assert json.loads(kv_path.read_text()) == {"configTable": {"NS": {"good": "v"}}}
    stop_cleanly(ns)


# -- 3 and 4: absurd queue counts, undefined perm bits -----------------------------------


@pytest.mark.parametrize(("field", "ext"), [
    ("writeQueueNums", create_topic_ext("Huge", write=2_000_000_000)),
    ("readQueueNums", create_topic_ext("Huge", read=2_000_000_000)),
    ("writeQueueNums", create_topic_ext("Huge", write=-1)),
    ("perm", create_topic_ext("Huge", perm=32)),
], ids=["write2e9", "read2e9", "write-1", "perm32"])
async def test_absurd_topic_config_is_refused_and_routes_keep_working(
        tmp_path: Path, namesrv: ServerProcess, broker: ServerProcess, field: str,
        ext: dict[str, str]) -> None:
    client = RemotingClient()
    try:
        bad = await client.invoke(broker.address, RemotingCommand.create_request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, ext), TIMEOUT)
        assert bad.code == ResponseCode.SYSTEM_ERROR, bad.remark
        assert field in (bad.remark or "")
        # Nothing stored: the topic has no stats, and a topic created on first send gets a route.
        stats = await client.invoke(broker.address, RemotingCommand.create_request(
            RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Huge"}), TIMEOUT)
        assert stats.code == ResponseCode.TOPIC_NOT_EXIST
        assert (await send(client, broker.address, "AutoAfter", b"m")).code == ResponseCode.SUCCESS
        route = await wait_route(client, namesrv.address, "AutoAfter")
        assert route.queue_datas[0].write_queue_nums == 4
        assert (await route_of(client, namesrv.address, "Huge")).code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await client.close()
    store = store_of(tmp_path)
    stop_cleanly(broker, store)
    table = topics_json(store)
    assert "AutoAfter" in table and "Huge" not in table


# -- 5 and 6: store-layout keys refused live ---------------------------------------------


@pytest.mark.parametrize(("key", "value"), [
    ("flushDiskType", "SYNC_FLUSH"),
    ("mappedFileSizeConsumeQueue", "6000"),
    ("mappedFileSizeCommitLog", "4096"),
    ("storePathRootDir", "/tmp/elsewhere"),
])
async def test_store_layout_keys_are_refused_live(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory, key: str,
        value: str) -> None:
    br = server_factory(broker_process(tmp_path, namesrv.address))
    store = store_of(tmp_path)
    client = RemotingClient()
    try:
        update = RemotingCommand.create_request(RequestCode.UPDATE_BROKER_CONFIG, None,
                                                f"{key}={value}\n".encode())
        r = await client.invoke(br.address, update, TIMEOUT)
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert key in (r.remark or "")
        config = await client.invoke(br.address, RemotingCommand.create_request(
            RequestCode.GET_BROKER_CONFIG, None), TIMEOUT)
        assert f"{key}={value}\n" not in (config.body or b"").decode()
        # The store is still the one it started with: with SYNC_FLUSH applied live, a
        # waiting send was answered FLUSH_DISK_TIMEOUT (after syncFlushTimeout), not SUCCESS.
        r = await send(client, br.address, "AfterConfig", b"m", props={"WAIT": "true"})
        assert r.code == ResponseCode.SUCCESS, r.remark
    finally:
        await client.close()
    stop_cleanly(br, store)
    again = server_factory(broker_process(tmp_path, namesrv.address))
    client = RemotingClient()
    try:
        assert (await send(client, again.address, "AfterConfig", b"n")).code == ResponseCode.SUCCESS
    finally:
        await client.close()
    stop_cleanly(again, store)


@pytest.mark.parametrize(("body", "field"), [
    (b"noSuchKey=1\n", "noSuchKey"),
    (b"defaultTopicQueueNums=abc\n", "defaultTopicQueueNums"),
    (b"autoCreateTopicEnable=maybe\n", "autoCreateTopicEnable"),
    (b"brokerPermission=32\n", "brokerPermission"),
    (b"defaultTopicQueueNums=2000000000\n", "defaultTopicQueueNums"),
])
async def test_bad_broker_config_update_changes_nothing(
        broker: ServerProcess, body: bytes, field: str) -> None:
    client = RemotingClient()
    try:
        get = RemotingCommand.create_request(RequestCode.GET_BROKER_CONFIG, None)
        before = (await client.invoke(broker.address, get, TIMEOUT)).body
        # A good key in the same request is not applied either: all or nothing.
        update = RemotingCommand.create_request(RequestCode.UPDATE_BROKER_CONFIG, None,
                                                b"defaultTopicQueueNums=3\n" + body)
        r = await client.invoke(broker.address, update, TIMEOUT)
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert field in (r.remark or "")
        get = RemotingCommand.create_request(RequestCode.GET_BROKER_CONFIG, None)
        after = await client.invoke(broker.address, get, TIMEOUT)
        assert after.body == before
        assert (await send(client, broker.address, "AfterBad", b"m")).code == ResponseCode.SUCCESS
    finally:
        await client.close()
