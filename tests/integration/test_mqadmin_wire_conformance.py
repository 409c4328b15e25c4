"""Our ``mqadmin`` against the captured stock Apache RocketMQ 4.9.7 ``mqadmin``.

Part 1 runs each of our commands that has a captured stock counterpart (scenarios
``mqadmin_*`` of ``tests/data/vectors``, docs/PROTOCOL.md 3.4, 4.3, 4.10, 4.11) as a subprocess
(``python -m aiorocketmq.client.admin.cli``) against our real nameserver and broker, both behind
recording taps (``tests/interop/wiretap.py``), with the same names the capture used, and
holds what it sent to what the stock tool sent: the order of request codes to each
server, every request's extFields key set, their values (the ones that name something
of this run, such as a commit-log offset or a client id, are listed per command), the
header serialize type, the body shapes.

Requests of the stock tool we leave out on purpose, each one incidental to the command:

* ``GET_ROUTEINFO_BY_TOPIC`` for ``TBW102``: the stock tool starts a whole
  ``MQClientInstance``, whose inner producer looks up its default topic's route
  (``MQClientInstance.updateTopicRouteInfoFromNameServer``); no command reads it.
* the final ``UNREGISTER_CLIENT`` of ``CLIENT_INNER_PRODUCER``: that instance's shutdown.
  Our admin never registers a producer (no HEART_BEAT), so it has nothing to unregister.
* after ``queryMsgById`` and ``queryMsgByUniqueKey``, the message-track lookups
  (``QUERY_TOPIC_CONSUME_BY_WHO``, then ``%RETRY%<group>`` routes and
  ``GET_CONSUMER_CONNECTION_LIST`` per group): ours make them too (the ``MessageTrack``
  lines under the message), but which groups consume the topic differs between the
  capture and this run, so both sides are compared up to the main request.
* ``AccessKey`` / ``Signature`` ext fields: the stock tool signs every request with the
  distribution's ``conf/tools.yml`` credentials (ACL RPC hook); a broker without ACL
  ignores them and ours does not sign.

Other differences kept: ``version`` (ours 409 = V4_9_8, stock 407; every version gate
of the 4.9.7 servers is passed, see test_client_wire_conformance), and the broker
address, which here is the tap's.

Part 2 plays the captured stock servers' answers to our CLI through fake servers that
replay the captured bytes (``tests/replay.py``): legacy fastjson ``ClusterInfo``
(``{0:"..."}``), ``ConsumeStats`` / ``TopicStatsTable`` / ``ConsumerRunningInfo`` with
MessageQueue objects as map keys, the runtime-info KVTable, properties-text configs and
``CONSUMER_NOT_ONLINE``, and checks the printed values.
"""

# ASYNC109: ``timeout`` parameters are wait deadlines in seconds.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol import fastjson
from aiorocketmq.protocol.codes import (
    CURRENT_VERSION,
    LanguageCode,
    MixAll,
    RequestCode,
    SerializeType,
)
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import TopicNotExistError
from aiorocketmq.protocol.headers import UpdateConsumerOffsetRequestHeader
from aiorocketmq.protocol.message import (
    create_offset_msg_id,
    decode_messages,
    decode_offset_msg_id,
    socket_address_to_bytes,
)
from tests.interop.wiretap import TO_SERVER, WireTap
from tests.procs import ServerProcess, namesrv_and_broker
from tests.replay import ReplayServer
from tests.vectors import body_bytes, frame, frames_where, load_frames

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPO = str(Path(__file__).resolve().parents[2])
ACL_KEYS = frozenset({"AccessKey", "Signature"})
JAVA_BROKER = b"127.0.0.1:10911"
TOPIC = "VecPropsTopic"
PROPS_GROUP = "VecPropsConsumer"
IDLE_GROUP = "VecIdleConsumer"


# -- the stock tool's captured requests ----------------------------------------------------


@dataclass(slots=True, frozen=True)
class Sent:
    """One request as the server saw it: which server, the code, flag, remark, extFields
    (ACL keys removed), the body, serialize type, version, language."""

    server: str
    code: int
    flag: int
    remark: str | None
    ext: dict[str, str]
    body: bytes
    serialize: str
    version: int
    language: str

    @property
    def key(self) -> tuple[str, int]:
        return self.server, self.code


def _incidental(scenario: str, f: dict[str, Any], after_main: bool) -> bool:
    """A stock request left out of the comparison (see module docstring)."""
    ext = f["header"].get("extFields") or {}
    if f["code"] == RequestCode.GET_ROUTEINFO_BY_TOPIC and ext.get("topic") == "TBW102":
        return True
    if (f["code"] == RequestCode.UNREGISTER_CLIENT
            and ext.get("producerGroup") == MixAll.CLIENT_INNER_PRODUCER_GROUP):
        return True
    return after_main and scenario in ("mqadmin_queryMsgById", "mqadmin_queryMsgByUniqueKey")


def stock_requests(scenario: str) -> list[Sent]:
    """The captured stock mqadmin's requests of ``scenario`` that a command must make."""
    out: list[Sent] = []
    main_code = {"mqadmin_queryMsgById": RequestCode.VIEW_MESSAGE_BY_ID,
                 "mqadmin_queryMsgByUniqueKey": RequestCode.QUERY_MESSAGE}.get(scenario)
    after_main = False
    for f in load_frames():
        if f["scenario"] != scenario or f["is_response"] or not f["conn"].startswith("client->"):
            continue
        if not _incidental(scenario, f, after_main):
            h = f["header"]
            out.append(Sent(f["conn"].split("->")[1], f["code"], f["flag"], h.get("remark"),
                            {k: v for k, v in (h.get("extFields") or {}).items()
                             if k not in ACL_KEYS},
                            body_bytes(f["id"]), f["serialize"], h["version"], h["language"]))
        if f["code"] == main_code:
            after_main = True
    return out


# -- our servers behind taps -----------------------------------------------------------------


class AdminTap(WireTap):
    """A tap that also points GET_BROKER_CLUSTER_INFO answers at the broker tap (the stock
    tool and ours find a cluster's brokers there, not in a topic route), and stamps each
    frame with a number from ``clock``, shared by both taps, so the requests to the two
    servers can be put back in the order they were sent."""

    def __init__(self, name: str, upstream: str, clock: Iterator[int]) -> None:
        super().__init__(name, upstream)
        self.clock = clock
        self.seqs: list[int] = []

    def _record(self, conn: int, direction: str, frame: bytes, route_requests: set[int]) -> bytes:
        out = super()._record(conn, direction, frame, route_requests)
        self.seqs.append(next(self.clock))
        cmd = self.frames[-1].command
        if (direction == TO_SERVER and cmd is not None
                and cmd.code == RequestCode.GET_BROKER_CLUSTER_INFO):
            route_requests.add(cmd.opaque)  # the base class rewrites answers to these opaques
        return out


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp: Path = tmp_path_factory.mktemp("admin_wire")
    with namesrv_and_broker(tmp) as servers:
        yield servers


@dataclass(slots=True)
class Wire:
    ntap: AdminTap
    btap: AdminTap

    def marks(self) -> tuple[int, int]:
        return len(self.ntap.frames), len(self.btap.frames)

    def sent_since(self, marks: tuple[int, int]) -> list[Sent]:
        """Requests to either server since ``marks``, in the order they were sent."""
        tagged = []
        for tap, mark in ((self.ntap, marks[0]), (self.btap, marks[1])):
            for f, seq in zip(tap.frames[mark:], tap.seqs[mark:], strict=True):
                if f.command is not None and f.direction == TO_SERVER and not f.is_response:
                    tagged.append((seq, _sent(tap.name, f.command)))
        return [s for _, s in sorted(tagged, key=lambda t: t[0])]


def _sent(server: str, c: RemotingCommand) -> Sent:
    return Sent(server, c.code, c.flag, c.remark, dict(c.ext_fields or {}), bytes(c.body or b""),
                SerializeType(c.serialize_type).name, c.version, LanguageCode(c.language).name)


@pytest.fixture
async def wire(servers: tuple[ServerProcess, ServerProcess]) -> AsyncIterator[Wire]:
    ns, br = servers
    clock = itertools.count()
    btap = AdminTap("broker", br.address, clock)
    ntap = AdminTap("namesrv", ns.address, clock)
    async with btap, ntap:
        ntap.rewrite_routes = {br.address: btap.address}
        yield Wire(ntap, btap)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ROCKETMQ_SERIALIZE_TYPE", None)  # JSON headers, as the stock tool used
    return env


async def mqadmin(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiorocketmq.client.admin.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO, env=_env())
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def ok(*args: str) -> str:
    rc, out, err = await mqadmin(*args)
    assert rc == 0, f"mqadmin {' '.join(args)} -> {rc}\n{out}\n{err}"
    return out


def assert_like_stock(ours: list[Sent], scenario: str, *,
                      differ: Mapping[int, frozenset[str]] | None = None,
                      rename: Mapping[str, str] | None = None,
                      part: slice = slice(None)) -> None:
    """``ours`` makes the stock requests of ``scenario`` (or of its ``part``): the same
    (server, code) sequence, the same extFields keys, equal values except the keys
    ``differ[code]`` (values that name something of this run), names in stock values
    replaced through ``rename`` first; JSON headers, language JAVA."""
    stock = stock_requests(scenario)[part]
    assert [s.key for s in ours] == [s.key for s in stock], (
        f"{scenario}: ours {[s.key for s in ours]} stock {[s.key for s in stock]}")
    rename = rename or {}
    for o, s in zip(ours, stock, strict=True):
        assert set(o.ext) == set(s.ext), (scenario, o.code, sorted(o.ext), sorted(s.ext))
        skip = (differ or {}).get(o.code, frozenset())
        want = {k: _renamed(v, rename) for k, v in s.ext.items() if k not in skip}
        assert {k: v for k, v in o.ext.items() if k not in skip} == want, (scenario, o.code)
        assert (o.serialize, s.serialize) == ("JSON", "JSON")
        assert o.language == s.language == "JAVA"
        assert (o.flag, o.remark) == (s.flag, s.remark) == (0, None)  # two-way, no remark
        assert o.version == CURRENT_VERSION and s.version == 407
        assert bool(o.body) == bool(s.body), (scenario, o.code)


def _renamed(value: str, rename: Mapping[str, str]) -> str:
    for old, new in rename.items():
        value = value.replace(old, new)
    return value


def until_code(sent: list[Sent], code: int) -> list[Sent]:
    """``sent`` up to and including the first request ``code`` (the command's main one)."""
    n = next(i for i, s in enumerate(sent) if s.code == code)
    return sent[:n + 1]


async def run(wire: Wire, *args: str) -> tuple[str, list[Sent]]:
    marks = wire.marks()
    out = await ok(*args, "-n", wire.ntap.address)
    return out, wire.sent_since(marks)


async def wait_for_route(namesrv: str, topic: str, timeout: float = 30) -> None:
    """Poll the nameserver until ``topic`` has a route, or fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with MQAdmin(namesrv) as admin:
        while True:
            try:
                await admin.topic_route(topic)
                return
            except TopicNotExistError:
                if loop.time() > deadline:
                    raise
            await asyncio.sleep(0.05)


# -- part 1: our requests against the stock tool's -----------------------------------------


async def test_topic_message_and_config_commands(
        wire: Wire, servers: tuple[ServerProcess, ServerProcess]) -> None:
    ns, br = servers
    async with Producer("VecAdminWirePG", ns.address) as producer:
        sent = [await producer.send(Message(TOPIC, f"props-{i}".encode(), tags="TagA",
                                            keys="vkey1 vkey2")) for i in range(2)]
    btap = wire.btap.address

    # updateTopic -c: 106, then 17 to every master with the stock defaults (frame 992:
    # topicFilterType SINGLE_TAG, topicSysFlag 0, order false, perm 6, defaultTopic TBW102).
    out, ours = await run(wire, "updateTopic", "-c", "DefaultCluster", "-t", "VecAdminTopic",
                          "-r", "4", "-w", "4")
    assert_like_stock(ours, "mqadmin_updateTopic")
    assert f"create topic to {btap} success." in out

    # updateTopic -b without -r/-w: only 17, to that broker, with the stock defaults of
    # UpdateTopicSubCommand (8 read and 8 write queues; the rest as frame 992).
    _, ours = await run(wire, "updateTopic", "-b", btap, "-t", "VecAdminTopic")
    (create,) = ours
    assert create.key == ("broker", RequestCode.UPDATE_AND_CREATE_TOPIC)
    assert create.ext == {**stock_requests("mqadmin_updateTopic")[-1].ext,
                          "readQueueNums": "8", "writeQueueNums": "8"}

    out, ours = await run(wire, "topicList")
    assert_like_stock(ours, "mqadmin_topicList")
    assert {TOPIC, "VecAdminTopic", "TBW102"} <= set(out.split())

    out, ours = await run(wire, "topicRoute", "-t", TOPIC)
    assert_like_stock(ours, "mqadmin_topicRoute")
    assert json.loads(out)["brokerDatas"][0]["brokerAddrs"] == {"0": btap}

    out, ours = await run(wire, "clusterList")
    assert_like_stock(ours, "mqadmin_clusterList")
    assert "broker-a" in out and btap in out

    # queryMsgById: VIEW_MESSAGE_BY_ID goes to the store host named in the offset id, and
    # nowhere else first (frame 1024). An id naming the broker tap proves it.
    _, offset = decode_offset_msg_id(sent[0].offset_msg_id or "")
    via_tap = create_offset_msg_id(socket_address_to_bytes(btap), offset)
    out, ours = await run(wire, "queryMsgById", "-i", via_tap)
    ours = until_code(ours, RequestCode.VIEW_MESSAGE_BY_ID)
    assert_like_stock(ours, "mqadmin_queryMsgById",
                      differ={RequestCode.VIEW_MESSAGE_BY_ID: frozenset({"offset"})})
    assert ours[0].ext == {"offset": str(offset)}
    assert f"OffsetID:            {sent[0].offset_msg_id}\n" in out
    assert "Message Body Path:" in out

    # queryMsgByKey: 105, then QUERY_MESSAGE maxNum=64 beginTimestamp=0
    # endTimestamp=Long.MAX _UNIQUE_KEY_QUERY=false (frame 1046), values equal.
    out, ours = await run(wire, "queryMsgByKey", "-t", TOPIC, "-k", "vkey1")
    assert_like_stock(ours, "mqadmin_queryMsgByKey")
    assert all(f"{r.msg_id} " in out for r in sent)

    # queryMsgByUniqueKey: _UNIQUE_KEY_QUERY=true, maxNum=32 (frame 1056).
    uniq = sent[1].msg_id or ""
    out, ours = await run(wire, "queryMsgByUniqueKey", "-t", TOPIC, "-i", uniq)
    ours = until_code(ours, RequestCode.QUERY_MESSAGE)
    assert_like_stock(ours, "mqadmin_queryMsgByUniqueKey",
                      differ={RequestCode.QUERY_MESSAGE: frozenset({"key"})})
    assert ours[-1].ext["key"] == uniq and f"UNIQ_KEY={uniq}" in out

    out, ours = await run(wire, "topicStatus", "-t", TOPIC)
    assert_like_stock(ours, "mqadmin_topicStatus")
    assert out.startswith("#Broker Name")

    out, ours = await run(wire, "brokerStatus", "-b", btap)
    assert_like_stock(ours, "mqadmin_brokerStatus")
    assert "brokerVersionDesc" in out

    out, ours = await run(wire, "getBrokerConfig", "-b", btap)
    assert_like_stock(ours, "mqadmin_getBrokerConfig")
    assert "brokerName" in out and "broker-a" in out

    # updateSubGroup -b: the SubscriptionGroupConfig body with the stock tool's defaults
    # (no broadcast, not from min offset), byte for byte as frame 1093.
    out, ours = await run(wire, "updateSubGroup", "-b", btap, "-g", "VecAdminGroup")
    assert_like_stock(ours, "mqadmin_updateSubGroup")
    assert ours[0].body == body_bytes(1093)

    out, ours = await run(wire, "getNamesrvConfig")
    assert_like_stock(ours, "mqadmin_getNamesrvConfig")

    _, ours_put = await run(wire, "updateKvConfig", "-s", "VEC_NS", "-k", "veckey", "-v",
                            "vecvalue")
    assert_like_stock(ours_put, "mqadmin_updateKvConfig")
    _, ours = await run(wire, "deleteKvConfig", "-s", "VEC_NS", "-k", "veckey")
    assert_like_stock(ours, "mqadmin_deleteKvConfig")

    # deleteTopic -c: 106, 215 to every master, then 216 to the nameserver (frames 1110-1116).
    out, ours = await run(wire, "deleteTopic", "-c", "DefaultCluster", "-t", "VecAdminTopic")
    assert_like_stock(ours, "mqadmin_deleteTopic")
    assert "VecAdminTopic" not in (await run(wire, "topicList"))[0].split()


async def test_consumer_commands(wire: Wire, servers: tuple[ServerProcess, ServerProcess]) -> None:
    """consumerProgress / consumerConnection / consumerStatus -g while a real push consumer
    of ours is online (the capture's idle consumer was a Java one)."""
    ns, br = servers
    topic = "VecIdleTopic"
    async with Producer("VecIdleWirePG", ns.address) as producer:
        for i in range(3):
            await producer.send(Message(topic, f"idle-{i}".encode()))
    got: list[MessageExt] = []
    done = asyncio.Event()

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        if len(got) >= 3:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(IDLE_GROUP, ns.address,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), 30)
        await wait_for_route(ns.address, MixAll.retry_topic(IDLE_GROUP))
        # The consumer persists its offsets every few seconds; commit them now so the
        # broker has consume stats for the group (as the captured group had).
        async with MQAdmin(ns.address) as admin:
            for m in got:
                await admin.api.update_consumer_offset(br.address, UpdateConsumerOffsetRequestHeader(
                    consumer_group=IDLE_GROUP, topic=topic, queue_id=m.queue_id,
                    commit_offset=m.queue_offset + 1), oneway=False)

        # consumerProgress -g: 105 for %RETRY%<group> (to find its brokers), then 208 with
        # consumerGroup only (frames 1016, 1020).
        # Then ours asks each online client what it subscribes to, with consumerStatus's
        # requests (105, 203, then per client 105 and 307: frames 1181-1188), to warn when
        # the clients of the group differ; stock's consumerProgress does not check.
        running_info = {RequestCode.GET_CONSUMER_RUNNING_INFO: frozenset({"clientId"})}
        out, ours = await run(wire, "consumerProgress", "-g", IDLE_GROUP)
        n = len(stock_requests("mqadmin_consumerProgress"))
        assert_like_stock(ours[:n], "mqadmin_consumerProgress", rename={PROPS_GROUP: IDLE_GROUP})
        assert_like_stock(ours[n:], "mqadmin_consumerStatus", differ=running_info)
        assert topic in out and "Diff Total:" in out

        # consumerConnection: stock's 105 and 203, then the per-client half of the same check.
        out, ours = await run(wire, "consumerConnection", "-g", IDLE_GROUP)
        assert_like_stock(ours[:2], "mqadmin_consumerConnection")
        assert_like_stock(ours[2:], "mqadmin_consumerStatus", differ=running_info,
                          part=slice(2, None))
        assert "ConsumeType: CONSUME_PASSIVELY" in out and topic in out

        # consumerStatus -g: 105, 203, then per client 105 and 307 (frames 1181-1188).
        out, ours = await run(wire, "consumerStatus", "-g", IDLE_GROUP)
        assert_like_stock(ours, "mqadmin_consumerStatus",
                          differ={RequestCode.GET_CONSUMER_RUNNING_INFO: frozenset({"clientId"})})
        client_id = ours[-1].ext["clientId"]
        assert client_id in out and topic in out
    finally:
        await consumer.shutdown()


# -- part 2: the stock servers' captured answers, replayed to our CLI ------------------------


def _route_answers() -> dict[str, int]:
    """topic -> the captured GET_ROUTEINFO_BY_TOPIC answer the stock nameserver gave mqadmin."""
    out: dict[str, int] = {}
    for f in frames_where(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, is_response=False,
                          conn="client->namesrv"):
        if f["scenario"].startswith("mqadmin_") and "response_id" in f:
            out.setdefault(f["header"]["extFields"]["topic"], f["response_id"])
    return out


def _consumer_connection(req: RemotingCommand) -> int:
    # The live group's connection list (frame 1171); any other: CONSUMER_NOT_ONLINE (1035).
    return 1171 if (req.ext_fields or {}).get("consumerGroup") == IDLE_GROUP else 1035


def _query_message(req: RemotingCommand) -> int:
    # by key vkey1: both messages (1047); by unique key: the one message (1057)
    return 1057 if (req.ext_fields or {}).get("_UNIQUE_KEY_QUERY") == "true" else 1047


@pytest.fixture
async def stock() -> AsyncIterator[tuple[ReplayServer, ReplayServer]]:
    """A fake stock broker and nameserver; route and cluster answers point at the broker."""
    routes = _route_answers()
    broker = ReplayServer({
        RequestCode.GET_BROKER_RUNTIME_INFO: lambda r: 1013,
        RequestCode.GET_CONSUME_STATS: lambda r: 1021,
        RequestCode.GET_TOPIC_STATS_INFO: lambda r: 1077,
        RequestCode.GET_BROKER_CONFIG: lambda r: 1089,
        RequestCode.GET_CONSUMER_CONNECTION_LIST: _consumer_connection,
        RequestCode.GET_CONSUMER_RUNNING_INFO: lambda r: 1191,
        RequestCode.QUERY_MESSAGE: _query_message,
        RequestCode.VIEW_MESSAGE_BY_ID: lambda r: 1025,
        RequestCode.UPDATE_AND_CREATE_TOPIC: lambda r: 995,
        RequestCode.DELETE_TOPIC_IN_BROKER: lambda r: 1115,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: lambda r: 1095,
    })
    async with broker:
        namesrv = ReplayServer({
            RequestCode.GET_ROUTEINFO_BY_TOPIC: lambda r: routes.get(
                (r.ext_fields or {}).get("topic", ""), 6),
            RequestCode.GET_BROKER_CLUSTER_INFO: lambda r: 1011,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: lambda r: 1001,
            RequestCode.GET_NAMESRV_CONFIG: lambda r: 1099,
            RequestCode.PUT_KV_CONFIG: lambda r: 1105,
            RequestCode.DELETE_KV_CONFIG: lambda r: 1109,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: lambda r: 1117,
        }, rewrite={JAVA_BROKER: broker.address.encode()})
        async with namesrv:
            yield namesrv, broker


async def test_cli_reads_stock_cluster_topic_and_broker_answers(
        stock: tuple[ReplayServer, ReplayServer]) -> None:
    namesrv, broker = stock
    ns, addr = namesrv.address, broker.address

    # ClusterInfo with fastjson's bare int key {0:"..."} (frame 1011), runtime KVTable (1013).
    cluster = json.loads(await ok("clusterList", "-n", ns, "--json"))
    (row,) = cluster["brokers"]
    assert (row["cluster"], row["brokerName"], row["brokerId"], row["addr"], row["version"]) == (
        "DefaultCluster", "broker-a", 0, addr, "V4_9_7")
    runtime = fastjson.loads(body_bytes(1013))["table"]
    assert row["inTps"] == float(runtime["putTps"].split(" ")[0])
    assert row["space"] == float(runtime["commitLogDiskRatio"])
    text = await ok("clusterList", "-n", ns)
    (line,) = [ln for ln in text.splitlines() if addr in ln]
    assert line.split()[:5] == ["DefaultCluster", "broker-a", "0", addr, "V4_9_7"]

    status = json.loads(await ok("brokerStatus", "-n", ns, "-b", addr, "--json"))[addr]
    assert status == runtime
    text = await ok("brokerStatus", "-n", ns, "-b", addr)
    assert f"{'msgPutTotalTodayNow':<32}: {runtime['msgPutTotalTodayNow']}\n" in text

    # Properties-text config with the DataVersion in the header (frame 1089).
    conf = json.loads(await ok("getBrokerConfig", "-n", ns, "-b", addr, "--json"))[addr]
    assert conf["config"]["brokerName"] == "broker-a"
    assert conf["config"]["messageDelayLevel"] == "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    assert conf["config"]["storePathRootDir"] == "/opt/rmq/store"
    assert json.loads(conf["version"]) == {"counter": 0, "timestamp": 1795318946157}
    namesrv_conf = json.loads(await ok("getNamesrvConfig", "-n", ns, "--json"))[ns]
    assert namesrv_conf["serverSocketBacklog"] == "1024"
    assert f"{'serverWorkerThreads':<50}=  8\n" in await ok("getNamesrvConfig", "-n", ns)

    topics = (await ok("topicList", "-n", ns)).split()
    assert set(topics) == set(fastjson.loads(body_bytes(1001))["topicList"])
    route = json.loads(await ok("topicRoute", "-n", ns, "-t", TOPIC, "--json"))
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": addr}
    assert [(q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]] == [
        (4, 4, 6)]

    # TopicStatsTable with MessageQueue objects as map keys (frame 1077).
    ts = json.loads(await ok("topicStatus", "-n", ns, "-t", TOPIC, "--json"))
    assert {q["queueId"]: (q["minOffset"], q["maxOffset"], q["lastUpdateTimestamp"])
            for q in ts["queues"]} == {0: (0, 0, 0), 1: (0, 1, 1795318960733),
                                        2: (0, 0, 0), 3: (0, 1, 1795319040492)}
    text = await ok("topicStatus", "-n", ns, "-t", TOPIC)
    assert len(text.splitlines()) == 5 and text.count("broker-a") == 4

    # Admin writes answered by the stock servers (995 carries the remark
    # "not set any response code" on SUCCESS: not a failure).
    out = await ok("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "VecAdminTopic",
                   "-r", "4", "-w", "4")
    assert f"create topic to {addr} success." in out
    out = await ok("deleteTopic", "-n", ns, "-c", "DefaultCluster", "-t", "VecAdminTopic")
    assert "delete topic [VecAdminTopic] from NameServer success." in out
    out = await ok("updateSubGroup", "-n", ns, "-b", addr, "-g", "VecAdminGroup")
    assert f"create subscription group to {addr} success." in out
    await ok("updateKvConfig", "-n", ns, "-s", "VEC_NS", "-k", "veckey", "-v", "vecvalue")
    await ok("deleteKvConfig", "-n", ns, "-s", "VEC_NS", "-k", "veckey")
    assert [c.code for c in broker.requests] == [
        RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.GET_BROKER_RUNTIME_INFO,
        RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.GET_BROKER_RUNTIME_INFO,
        RequestCode.GET_BROKER_CONFIG, RequestCode.GET_TOPIC_STATS_INFO,
        RequestCode.GET_TOPIC_STATS_INFO, RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP]


async def test_cli_reads_stock_message_and_consumer_answers(
        stock: tuple[ReplayServer, ReplayServer]) -> None:
    namesrv, broker = stock
    ns, addr = namesrv.address, broker.address
    captured = {m.msg_id: m for m in decode_messages(body_bytes(1047))}
    by_key = json.loads(await ok("queryMsgByKey", "-n", ns, "-t", TOPIC, "-k", "vkey1",
                                 "--json"))
    assert sorted(m["msgId"] for m in by_key) == sorted(captured)
    assert {m["keys"] for m in by_key} == {"vkey1 vkey2"}
    text = await ok("queryMsgByKey", "-n", ns, "-t", TOPIC, "-k", "vkey1")
    assert all(mid in text for mid in captured)

    uniq = frame(1056)["header"]["extFields"]["key"]
    (msg,) = json.loads(await ok("queryMsgByUniqueKey", "-n", ns, "-t", TOPIC, "-i", uniq,
                                 "--json"))
    assert msg["msgId"] == uniq and msg["body"] == bytes(captured[uniq].body).decode()
    assert msg["properties"]["unicode"] == "héllo-世界"

    # queryMsgById with an offset id naming the fake broker: the answer (frame 1025) is the
    # record at commit-log offset 20380, stored by the capture's 127.0.0.1:10911.
    offset = int(frame(1024)["header"]["extFields"]["offset"])
    (msg,) = json.loads(await ok("queryMsgById", "-n", ns, "-i", create_offset_msg_id(
        socket_address_to_bytes(addr), offset), "--json"))
    assert (msg["commitLogOffset"], msg["offsetMsgId"], msg["msgId"], msg["storeHost"]) == (
        offset, "7F00000100002A9F0000000000004F9C", uniq, "127.0.0.1:10911")
    text = await ok("queryMsgById", "-n", ns, "-i", create_offset_msg_id(
        socket_address_to_bytes(addr), offset))
    assert "Keys:                [vkey1 vkey2]" in text and "héllo-世界" in text

    # ConsumeStats with MessageQueue objects as map keys (frame 1021): diff total 1.
    progress = json.loads(await ok("consumerProgress", "-n", ns, "-g", PROPS_GROUP, "--json"))
    assert progress["diffTotal"] == 1 and progress["consumeTps"] == 0.0
    assert {q["queueId"]: (q["brokerOffset"], q["consumerOffset"], q["lastTimestamp"])
            for q in progress["queues"]} == {0: (0, 0, 0), 1: (1, 1, 1795318960733),
                                              2: (0, 0, 0), 3: (1, 0, 0)}
    text = await ok("consumerProgress", "-n", ns, "-g", PROPS_GROUP)
    assert "Diff Total: 1\n" in text and "Consume TPS: 0.00\n" in text

    conn = json.loads(await ok("consumerConnection", "-n", ns, "-g", IDLE_GROUP, "--json"))
    assert [c["clientId"] for c in conn["connectionSet"]] == ["192.0.2.2@vec-VecIdleConsumer"]
    text = await ok("consumerConnection", "-n", ns, "-g", IDLE_GROUP)
    assert "192.0.2.2@vec-VecIdleConsumer" in text and "127.0.0.1:39306" in text
    assert "V4_9_7" in text and "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET" in text

    # CONSUMER_NOT_ONLINE (frame 1035): one line, exit 1.
    rc, out, err = await mqadmin("consumerConnection", "-n", ns, "-g", PROPS_GROUP)
    assert rc == 1 and out == ""
    assert err == (f"mqadmin consumerConnection: {addr} answered CONSUMER_NOT_ONLINE (206): "
                   f"{frame(1035)['header']['remark']}\n")

    # ConsumerRunningInfo relayed by the broker (frame 1191): MessageQueue-keyed mqTable.
    cid = "192.0.2.2@vec-VecIdleConsumer"
    info = json.loads(await ok("consumerStatus", "-n", ns, "-g", IDLE_GROUP, "--json"))[cid]
    assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    text = await ok("consumerStatus", "-n", ns, "-g", IDLE_GROUP)
    commits = {int(p[2]): int(p[3]) for p in (ln.split() for ln in text.splitlines())
               if len(p) == 4 and p[0] == "TestTopic"}
    assert commits == {0: 11, 1: 10, 2: 9, 3: 10}
    (fwd,) = broker.requests_of(RequestCode.GET_CONSUMER_RUNNING_INFO)[:1]
    assert fwd.ext_fields == {"consumerGroup": IDLE_GROUP, "clientId": cid,
                              "jstackEnable": "false"}
