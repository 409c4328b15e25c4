"""mqdashboard's JSON API against real nameserver + broker processes (aiohttp's test client).

Every endpoint, its bad input (unknown topic or group, malformed time range, oversized
preview, missing confirmation, no CSRF token, ...) and, after each refusal, proof that
nothing changed on the cluster. The login, CSRF and role checks run on an app with users.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.dashboard.app import CSRF_HEADER, build_app
from aiorocketmq.client.dashboard.auth import hash_password
from aiorocketmq.client.dashboard.config import DashboardConfig, User
from aiorocketmq.client.producer import Producer
from aiorocketmq.protocol.bodies import MessageQueue, SubscriptionGroupConfig, TopicConfig
from aiorocketmq.protocol.errors import TopicNotExistError
from aiorocketmq.protocol.headers import UpdateConsumerOffsetRequestHeader
from aiorocketmq.protocol.message import Message
from tests.logs import capture_logs
from tests.procs import namesrv_and_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "ApiOrders"
GROUP = "ApiBilling"
SENT = 10
CONSUMED = 4  # 2 per queue


async def _workload(namesrv: str) -> int:
    async with MQAdmin(namesrv) as admin:
        broker = (await admin.brokers(masters_only=True))[0]
        await admin.create_topic(broker.addr, TopicConfig(TOPIC, read_queue_nums=2,
                                                          write_queue_nums=2))
        await admin.create_subscription_group(broker.addr, SubscriptionGroupConfig(group_name=GROUP))
        started = time.time_ns() // 1_000_000 - 1000
        async with Producer("ApiProducer", namesrv) as producer:
            for i in range(SENT):
                await producer.send(Message(TOPIC, json.dumps({"n": i}).encode(), keys=f"k{i}"),
                                    MessageQueue(TOPIC, broker.broker_name, i % 2))
        for qid in range(2):
            await admin.api.update_consumer_offset(broker.addr, UpdateConsumerOffsetRequestHeader(
                consumer_group=GROUP, topic=TOPIC, queue_id=qid, commit_offset=CONSUMED // 2,
                bname=broker.broker_name), admin.timeout, oneway=False)
        return started


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """(nameserver address, epoch ms just before the workload was sent)."""
    with namesrv_and_broker(tmp_path_factory.mktemp("dash-api")) as (ns, _br):
        started = asyncio.run(_workload(ns.address))
        yield ns.address, started


async def _client(config: DashboardConfig) -> TestClient:  # type: ignore[type-arg]
    client: TestClient = TestClient(TestServer(build_app(config)))  # type: ignore[type-arg]
    await client.start_server()
    return client


@pytest.fixture
async def api(cluster: tuple[str, int]) -> AsyncIterator[Any]:
    """A client with an anonymous session; ``api.csrf`` holds its token."""
    client = await _client(DashboardConfig(namesrv_addr=cluster[0], sample_interval_ms=60_000))
    try:
        session = await (await client.get("/api/session")).json()
        client.csrf = session["csrf_token"]  # type: ignore[attr-defined]
        yield client
    finally:
        await client.close()


async def call(api: Any, method: str, path: str, body: Any = None, *, status: int = 200,
               csrf: bool = True) -> Any:
    headers = {CSRF_HEADER: api.csrf} if csrf and method != "GET" else {}
    kwargs: dict[str, Any] = {"headers": headers}
    if body is not None:
        kwargs["data" if isinstance(body, (bytes, str)) else "json"] = body
    resp = await api.request(method, path, **kwargs)
    data = await resp.json()
    assert resp.status == status, (resp.status, data)
    if status >= 400:
        assert isinstance(data.get("error"), str) and data["error"]
    return data


async def topic_total(api: Any, topic: str = TOPIC) -> int:
    return int((await call(api, "GET", f"/api/topics/{topic}"))["total_messages"])


async def group_lag(api: Any) -> int:
    return int((await call(api, "GET", f"/api/groups/{GROUP}"))["lag"])


# -- session, CSRF, routing ---------------------------------------------------------------


async def test_session_and_csrf(api: Any) -> None:
    session = await call(api, "GET", "/api/session")
    assert session["user"] == "anonymous" and session["role"] == "admin"
    assert not session["login_required"] and session["csrf_token"] == api.csrf
    await call(api, "POST", "/api/topics", {"topic": "CsrfT", "cluster": "DefaultCluster"},
               csrf=False, status=403)
    resp = await api.post("/api/topics", json={"topic": "CsrfT", "cluster": "DefaultCluster"},
                          headers={CSRF_HEADER: "forged"})
    assert resp.status == 403
    resp = await api.post("/api/topics", json={"topic": "CsrfT", "cluster": "DefaultCluster"},
                          headers={CSRF_HEADER: api.csrf, "Origin": "http://evil.example"})
    assert resp.status == 403 and "cross-origin" in (await resp.json())["error"]
    api.session.cookie_jar.clear()
    resp = await api.post("/api/topics", json={"topic": "CsrfT", "cluster": "DefaultCluster"},
                          headers={CSRF_HEADER: api.csrf})
    assert resp.status == 401
    topics = await call(api, "GET", "/api/topics?q=CsrfT")
    assert topics["topics"] == []  # nothing was created by any refused request
    await call(api, "GET", "/api/nope", status=404)
    resp = await api.get("/")
    assert resp.status == 200 and "mqdashboard" in await resp.text()
    assert "default-src 'self'" in resp.headers["Content-Security-Policy"]
    assert (await api.get("/static/app.js")).status == 200


# -- cluster and topics -------------------------------------------------------------------


async def test_cluster(api: Any) -> None:
    data = await call(api, "GET", "/api/cluster")
    [cluster] = data["clusters"]
    [broker] = cluster["brokers"]
    assert cluster["name"] == "DefaultCluster" and broker["role"] == "MASTER"
    assert broker["version"].startswith("V4_9_") and broker["msg_put_today"] >= SENT
    assert 0 <= broker["disk_ratio"] <= 1 and broker["replication_lag_bytes"] is None


async def test_topics_and_topic(api: Any) -> None:
    data = await call(api, "GET", "/api/topics?q=apiorders")
    assert data["topics"] == [{"topic": TOPIC, "kind": "normal"}]
    assert data["clusters"] == ["DefaultCluster"]
    every = await call(api, "GET", "/api/topics?kinds=normal,retry,dlq,system")
    assert {"TBW102", TOPIC} <= {t["topic"] for t in every["topics"]}
    await call(api, "GET", "/api/topics?kinds=weird", status=400)
    t = await call(api, "GET", f"/api/topics/{TOPIC}")
    assert t["total_messages"] == SENT and len(t["queues"]) == 2
    assert [(q["min_offset"], q["max_offset"]) for q in t["queues"]] == [(0, 5), (0, 5)]
    assert t["queue_datas"][0]["perm_text"] == "RW" and GROUP in t["consumer_groups"]
    err = await call(api, "GET", "/api/topics/NoSuchTopic", status=404)
    assert "NoSuchTopic" in err["error"]
    await call(api, "GET", "/api/topics/bad%20name", status=400)


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"cluster": "DefaultCluster"}, 400, "'topic' is required"),
    ({"topic": "ApiBad", "cluster": "DefaultCluster", "perm": 7}, 400, "perm"),
    ({"topic": "ApiBad", "cluster": "DefaultCluster", "read_queue_nums": 0}, 400, "read_queue_nums"),
    ({"topic": "ApiBad", "cluster": "DefaultCluster", "write_queue_nums": "8"}, 400, "write_queue_nums"),
    ({"topic": "ApiBad", "cluster": "NoCluster"}, 404, "NoCluster"),
    ({"topic": "ApiBad"}, 400, "cluster or a broker"),
    ({"topic": "ApiBad", "broker_addr": "10.9.9.9:10911"}, 404, "master broker"),
    ({"topic": "Api Bad", "cluster": "DefaultCluster"}, 400, "illegal characters"),
    ({"topic": "TBW102", "cluster": "DefaultCluster"}, 400, "system topic"),
    ("{not json", 400, "not valid JSON"),
    ("[1, 2]", 400, "JSON object"),
])
async def test_create_topic_bad_input_changes_nothing(api: Any, body: Any, status: int,
                                                      words: str) -> None:
    err = await call(api, "POST", "/api/topics", body, status=status)
    assert words in err["error"]
    names = {t["topic"] for t in (await call(api, "GET", "/api/topics?q=Api"))["topics"]}
    assert names == {TOPIC}


async def test_create_update_delete_topic(api: Any, cluster: tuple[str, int]) -> None:
    made = await call(api, "POST", "/api/topics", {"topic": "ApiNew", "cluster": "DefaultCluster",
                                                   "read_queue_nums": 3, "write_queue_nums": 3})
    assert made["topic"] == "ApiNew" and len(made["brokers"]) == 1
    assert len((await call(api, "GET", "/api/topics/ApiNew"))["queues"]) == 3
    await call(api, "POST", "/api/topics", {"topic": "ApiNew", "broker_addr": made["brokers"][0],
                                            "read_queue_nums": 4, "write_queue_nums": 4})
    assert len((await call(api, "GET", "/api/topics/ApiNew"))["queues"]) == 4
    for body in ({}, {"confirm": "ApiNe"}, {"confirm": "ApiNew "}):
        err = await call(api, "DELETE", "/api/topics/ApiNew", body, status=400)
        assert "confirm" in err["error"]
    assert len((await call(api, "GET", "/api/topics/ApiNew"))["queues"]) == 4
    await call(api, "DELETE", "/api/topics/ApiNope", {"confirm": "ApiNope"}, status=404)
    with capture_logs() as logs:
        gone = await call(api, "DELETE", "/api/topics/ApiNew", {"confirm": "ApiNew"})
    assert gone["clusters"] == ["DefaultCluster"]
    [event] = [e for e in logs if e["event"] == "dashboard.topic_deleted"]
    assert event["topic"] == "ApiNew" and event["user"].startswith("anonymous@127.0.0.1")
    await call(api, "GET", "/api/topics/ApiNew", status=404)
    async with MQAdmin(cluster[0]) as admin:
        with pytest.raises(TopicNotExistError):
            await admin.topic_route("ApiNew")


async def test_send_test_message(api: Any) -> None:
    await call(api, "POST", "/api/topics", {"topic": "ApiSend", "cluster": "DefaultCluster",
                                            "read_queue_nums": 1, "write_queue_nums": 1})
    sent = await call(api, "POST", "/api/topics/ApiSend/messages",
                      {"body": "hi", "tags": "t", "keys": "sent-key"})
    assert sent["status"] == "SEND_OK" and sent["msg_id"]
    assert await topic_total(api, "ApiSend") == 1
    for body, words in (({"body": ""}, "'body' is required"),
                        ({"body": "x" * (64 * 1024 + 1)}, "at most"),
                        ({"body": "x", "tags": "t" * 300}, "tags longer"),
                        ({"body": 5}, "must be a string")):
        err = await call(api, "POST", "/api/topics/ApiSend/messages", body, status=400)
        assert words in err["error"]
    resp = await api.post("/api/topics/ApiSend/messages", data=b"x" * (300 * 1024),
                          headers={CSRF_HEADER: api.csrf, "Content-Type": "application/json"})
    assert resp.status == 413
    await call(api, "POST", "/api/topics/ApiMissing/messages", {"body": "x"}, status=404)
    assert await topic_total(api, "ApiSend") == 1
    await call(api, "DELETE", "/api/topics/ApiSend", {"confirm": "ApiSend"})


# -- groups, offsets ----------------------------------------------------------------------


async def test_groups_and_group(api: Any) -> None:
    groups = await call(api, "GET", "/api/groups")
    row = next(g for g in groups["groups"] if g["group"] == GROUP)
    assert row["lag"] == SENT - CONSUMED and row["members"] == 0 and row["topics"] == [TOPIC]
    assert (await call(api, "GET", "/api/groups?q=nothing-like-it"))["groups"] == []
    await call(api, "GET", "/api/groups?system=maybe", status=400)
    g = await call(api, "GET", f"/api/groups/{GROUP}")
    assert g["lag"] == SENT - CONSUMED and not g["online"] and g["members"] == []
    assert [(q["consumer_offset"], q["lag"]) for q in g["queues"]] == [(2, 3), (2, 3)]
    assert g["lag_by_topic"] == {TOPIC: SENT - CONSUMED}
    await call(api, "GET", "/api/groups/NoSuchGroup", status=404)
    await call(api, "GET", "/api/groups/bad%20group", status=400)


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"topic": TOPIC, "timestamp_ms": 0}, 400, "confirm"),
    ({"topic": TOPIC, "timestamp_ms": 0, "confirm": "ApiBillin"}, 400, "confirm"),
    ({"topic": TOPIC, "timestamp_ms": "yesterday", "confirm": GROUP}, 400, "timestamp_ms"),
    ({"topic": TOPIC, "timestamp_ms": -5, "confirm": GROUP}, 400, "timestamp_ms"),
    ({"topic": TOPIC, "confirm": GROUP}, 400, "timestamp_ms"),
    ({"timestamp_ms": 0, "confirm": GROUP}, 400, "'topic' is required"),
    ({"topic": "NoSuchTopic", "timestamp_ms": 0, "confirm": GROUP}, 404, "NoSuchTopic"),
])
async def test_reset_offset_bad_input_changes_nothing(api: Any, body: dict[str, Any],
                                                      status: int, words: str) -> None:
    err = await call(api, "POST", f"/api/groups/{GROUP}/reset", body, status=status)
    assert words in err["error"]
    assert await group_lag(api) == SENT - CONSUMED


async def test_reset_offset_unknown_group(api: Any) -> None:
    await call(api, "POST", "/api/groups/NoSuchGroup/reset",
               {"topic": TOPIC, "timestamp_ms": 0, "confirm": "NoSuchGroup"}, status=404)
    await call(api, "POST", "/api/groups/NoSuchGroup/skip", {"confirm": "NoSuchGroup"}, status=404)
    await call(api, "POST", f"/api/groups/{GROUP}/skip", {}, status=400)
    assert await group_lag(api) == SENT - CONSUMED


async def test_reset_then_skip_changes_lag(api: Any, cluster: tuple[str, int]) -> None:
    try:
        with capture_logs() as logs:
            done = await call(api, "POST", f"/api/groups/{GROUP}/reset",
                              {"topic": TOPIC, "timestamp_ms": cluster[1] - 60_000, "confirm": GROUP})
        assert done["mode"] == "offline" and [o["offset"] for o in done["offsets"]] == [0, 0]
        assert await group_lag(api) == SENT
        [event] = [e for e in logs if e["event"] == "dashboard.offset_reset"]
        assert event["group"] == GROUP and event["user"].startswith("anonymous@")
        skipped = await call(api, "POST", f"/api/groups/{GROUP}/skip", {"confirm": GROUP})
        assert skipped["topics"] == [TOPIC]
        assert await group_lag(api) == 0
    finally:  # back to the workload's state for the other tests
        async with MQAdmin(cluster[0]) as admin:
            for addr, mq in await admin.readable_queues(TOPIC):
                await admin.api.update_consumer_offset(addr, UpdateConsumerOffsetRequestHeader(
                    consumer_group=GROUP, topic=TOPIC, queue_id=mq.queue_id,
                    commit_offset=CONSUMED // 2, bname=mq.broker_name), admin.timeout, oneway=False)


# -- messages ----------------------------------------------------------------------------


async def test_messages_by_key_and_time(api: Any, cluster: tuple[str, int]) -> None:
    by_key = await call(api, "GET", f"/api/messages?topic={TOPIC}&key=k3")
    [msg] = by_key["messages"]
    assert msg["keys"] == "k3" and msg["body_size"] == len(b'{"n": 3}')
    assert (await call(api, "GET", f"/api/messages?topic={TOPIC}&key=absent"))["messages"] == []
    now = time.time_ns() // 1_000_000
    by_time = await call(api, "GET", f"/api/messages?topic={TOPIC}&begin={cluster[1]}&end={now}")
    assert len(by_time["messages"]) == SENT and not by_time["truncated"]
    stamps = [m["store_timestamp"] for m in by_time["messages"]]
    assert stamps == sorted(stamps, reverse=True)
    empty = await call(api, "GET", f"/api/messages?topic={TOPIC}&begin=0&end={cluster[1] - 60_000}")
    assert empty["messages"] == []
    for query, status, words in (
            (f"topic={TOPIC}&begin={now}&end={cluster[1]}", 400, "is after end"),
            (f"topic={TOPIC}&begin=yesterday&end={now}", 400, "'begin' must be an integer"),
            (f"topic={TOPIC}&begin=-1&end={now}", 400, "begin must be epoch"),
            (f"topic={TOPIC}&begin=1", 400, "time range"),
            (f"begin=0&end={now}", 400, "'topic' is required"),
            (f"topic=NoSuchTopic&begin=0&end={now}", 404, "NoSuchTopic"),
            (f"topic={TOPIC}&key=", 400, "key must be"),
            ("topic=NoSuchTopic&key=k1", 404, "NoSuchTopic")):
        err = await call(api, "GET", f"/api/messages?{query}", status=status)
        assert words in err["error"], (query, err)


async def test_message_detail_and_previews(api: Any) -> None:
    [row] = (await call(api, "GET", f"/api/messages?topic={TOPIC}&key=k3"))["messages"]
    m = await call(api, "GET", f"/api/messages/{row['msg_id']}?topic={TOPIC}&preview=json")
    assert m["body"]["content"] == '{\n  "n": 3\n}' and m["properties"]["KEYS"] == "k3"
    assert GROUP in m["consumer_groups"]
    by_offset_id = await call(api, "GET", f"/api/messages/{row['offset_msg_id']}?preview=hex")
    assert by_offset_id["body"]["content"].startswith("00000000  7b 22 6e 22")
    no_topic = await call(api, "GET", f"/api/messages/{row['msg_id']}")
    assert no_topic["keys"] == "k3"
    cut = await call(api, "GET", f"/api/messages/{row['msg_id']}?topic={TOPIC}&limit=2")
    assert cut["body"]["content"] == '{"' and cut["body"]["truncated"]
    for query, status, words in (
            ("limit=1000000", 400, "preview limit"),
            ("limit=0", 400, "preview limit"),
            ("limit=lots", 400, "'limit' must be an integer"),
            ("preview=xml", 400, "preview mode"),
            ("topic=NoSuchTopic", 404, "NoSuchTopic")):
        err = await call(api, "GET", f"/api/messages/{row['msg_id']}?{query}", status=status)
        assert words in err["error"], (query, err)
    await call(api, "GET", "/api/messages/0123456789ABCDEF0123456789ABCDEF", status=404)
    await call(api, "GET", "/api/messages/not-hex!", status=400)


async def test_resend_needs_an_online_group(api: Any) -> None:
    [row] = (await call(api, "GET", f"/api/messages?topic={TOPIC}&key=k1"))["messages"]
    err = await call(api, "POST", f"/api/messages/{row['msg_id']}/resend", {"group": GROUP},
                     status=400)
    assert "no online client" in err["error"]
    await call(api, "POST", f"/api/messages/{row['msg_id']}/resend", {}, status=400)
    await call(api, "POST", "/api/messages/0123456789ABCDEF0123456789ABCDEF/resend",
               {"group": GROUP, "topic": TOPIC}, status=404)


# -- connections and live ---------------------------------------------------------------


async def test_connections_and_live(api: Any, cluster: tuple[str, int]) -> None:
    deadline = time.monotonic() + 15
    while not (live := await call(api, "GET", "/api/live"))["samples"]:
        assert time.monotonic() < deadline, "the sampler took no sample"
        await asyncio.sleep(0.1)
    assert live["interval_ms"] == 60_000 and live["last_error"] is None
    [sample] = live["samples"]  # the sampler takes one at start, then waits a minute
    assert set(sample["brokers"]) == {"broker-a"} and sample["lag"][GROUP] == SENT - CONSUMED
    async with Producer("ApiLiveProducer", cluster[0]) as producer:
        await producer.send(Message("ApiLive", b"live", keys="live"))
        await producer.instance.send_heartbeat_to_all_brokers()  # type: ignore[union-attr]
        data = await call(api, "GET", "/api/connections?producer_group=ApiLiveProducer&topic=ApiLive")
        [member] = data["producers"]["members"]
        assert member["client_id"] == producer.instance.client_id  # type: ignore[union-attr]
        assert member["language"] and member["version"].startswith("V")
    assert data["consumers"] == []  # ApiBilling has no online client
    await call(api, "GET", "/api/connections?producer_group=ApiLiveProducer", status=400)
    nobody = await call(api, "GET", f"/api/connections?producer_group=NoProducers&topic={TOPIC}")
    assert nobody["producers"]["members"] == []
    await call(api, "GET", "/api/connections?producer_group=P&topic=NoSuchTopic", status=404)


# -- login, roles --------------------------------------------------------------------------


async def test_login_roles_and_logout(cluster: tuple[str, int], tmp_path: Path) -> None:
    users = {"alice": User("alice", hash_password("wonder"), "admin"),
             "victor": User("victor", hash_password("viewer-pw"), "viewer")}
    client = await _client(DashboardConfig(namesrv_addr=cluster[0], users=users,
                                           sample_interval_ms=60_000))
    try:
        session = await (await client.get("/api/session")).json()
        assert session["login_required"] and not session["authenticated"]
        assert (await client.get("/api/cluster")).status == 401
        bad = await client.post("/api/login", json={"username": "alice", "password": "nope"})
        assert bad.status == 401 and "wrong username or password" in (await bad.json())["error"]
        assert (await client.post("/api/login", data="{")).status == 400
        ok = await client.post("/api/login", json={"username": "victor", "password": "viewer-pw"})
        viewer = await ok.json()
        assert ok.status == 200 and viewer["role"] == "viewer"
        assert (await client.get("/api/cluster")).status == 200
        refused = await client.post("/api/topics", json={"topic": "ViewerT", "cluster": "DefaultCluster"},
                                    headers={CSRF_HEADER: viewer["csrf_token"]})
        assert refused.status == 403 and "may only read" in (await refused.json())["error"]
        for method, path, body in (  # every write the dashboard has needs the admin role
                ("POST", "/api/groups", {"group": "ViewerG", "cluster": "DefaultCluster"}),
                ("DELETE", f"/api/groups/{GROUP}", {"confirm": GROUP}),
                ("POST", "/api/dlq/resend", {"group": GROUP, "msg_ids": ["00"]}),
                ("POST", "/api/acl/accounts", {"access_key": "viewer01", "secret_key": "x"}),
                ("DELETE", "/api/acl/accounts/viewer01", {"confirm": "viewer01"}),
                ("PUT", "/api/acl/white-list", {"addrs": ["10.0.0.*"]})):
            resp = await client.request(method, path, json=body,
                                        headers={CSRF_HEADER: viewer["csrf_token"]})
            assert resp.status == 403 and "may only read" in (await resp.json())["error"], path
        assert (await client.get(f"/api/groups/{GROUP}/config")).status == 200  # reads are fine
        out = await client.post("/api/logout", headers={CSRF_HEADER: viewer["csrf_token"]})
        assert out.status == 200
        assert (await client.get("/api/cluster")).status == 401
        ok = await client.post("/api/login", json={"username": "alice", "password": "wonder"})
        admin = await ok.json()
        assert admin["user"] == "alice" and admin["csrf_token"] != viewer["csrf_token"]
        made = await client.post("/api/topics", json={"topic": "AliceT", "cluster": "DefaultCluster"},
                                 headers={CSRF_HEADER: admin["csrf_token"]})
        assert made.status == 200
        with capture_logs() as logs:
            gone = await client.delete("/api/topics/AliceT", json={"confirm": "AliceT"},
                                       headers={CSRF_HEADER: admin["csrf_token"]})
        assert gone.status == 200
        [event] = [e for e in logs if e["event"] == "dashboard.topic_deleted"]
        assert event["user"].startswith("alice@")
    finally:
        await client.close()
