"""Our client's wire against the captured Apache RocketMQ 4.9.7 Java client and servers.

Part 1 runs our ``Producer``, ``PushConsumer`` (concurrently and orderly), ``PullConsumer``
and ``LitePullConsumer`` against our real nameserver and broker through two recording
taps (``tests/interop/wiretap.py``), doing what the captured Java harness did (scenarios
``harness_json``, ``props``, ``compress``, ``batch``, ``delay``, ``misc``, ``sendback``,
``orderly`` of ``tests/data/vectors``), and holds each request to the Java client's
captured one of the same code: extFields key set, the values that must agree, oneway
flag, header serialize type, body shapes and the order of the first exchanges.

Part 2 plays the captured Java broker's and nameserver's answers to our client through a
fake server (``tests/replay.py``) that replays the captured frame bytes, changing only
the opaque (and, in route bodies, the broker address so that the client dials the fake
broker), so the whole client stack parses them; it also plays the broker's own requests
(GET_CONSUMER_RUNNING_INFO, NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE,
PUSH_REPLY_MESSAGE_TO_CLIENT) and holds our answers to the Java client's.

Differences we keep on purpose, each asserted below with its reason:

* ``ReqT=0``: only the Java pull and lite-pull consumers send it (``StreamTypeRPCHook``,
  docs/PROTOCOL.md 8); no 4.9.7 server reads it (nothing in broker/ or namesrv/ does), and
  ours does not send it. Likewise their ``@STREAM`` client-id suffix.
* ``language``: our HEART_BEAT says PYTHON (``ClientConfig.language``), every other
  request JAVA, as upstream sets only the heartbeat's from the config. The 4.9.7 broker
  only records it (ClientManageProcessor) and branches on the *admin* request's
  language for INVOKE_BROKER_TO_RESET_OFFSET (CPP only), docs/PROTOCOL.md 2.4.
* ``version``: we stamp 409 (V4_9_8), Java 407; every gate in the 4.9.7 servers
  (>= 28 reset/status, >= 62 running-info/consume-directly forwarding, >= 121
  maxReconsumeTimes, >= 401 standard route JSON) is passed (``test_version_gates``).
* serialize type: our client writes JSON headers unless ``ClientConfig.serialize_type``
  is ``ROCKETMQ`` (Java's ``-Drocketmq.serialize.type``); the ``harness_rocketmq``
  scenario's clients are held to the Java ones with it (same codes, same key sets,
  binary headers both ways), and our client reads the JSON NOTIFY_CONSUMER_IDS_CHANGED a
  Java broker sends to a ROCKETMQ client (part 2).
"""

# ASYNC109: ``timeout`` parameters are wait deadlines in seconds.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PullStatus,
    PushConsumer,
    SelectMessageQueueByHash,
    SendStatus,
)
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.pull_consumer import LitePullConsumer, PullConsumer
from aiorocketmq.client.transaction_producer import LocalTransactionState, TransactionProducer
from aiorocketmq.protocol import fastjson
from aiorocketmq.protocol.bodies import LockBatchRequestBody
from aiorocketmq.protocol.codes import (
    CURRENT_VERSION,
    LanguageCode,
    MixAll,
    RequestCode,
    SerializeType,
    SystemTopic,
)
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import MQBrokerError, TopicNotExistError
from aiorocketmq.protocol.message import decode_batch, decode_offset_msg_id, decode_properties
from tests.interop.wiretap import TO_SERVER, TappedFrame, WireTap
from tests.procs import ServerProcess, namesrv_and_broker
from tests.replay import ReplayServer
from tests.vectors import body_bytes, frame, frames_where

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REQ_T = "ReqT"  # MixAll.REQ_T of the Java stream-request RPC hook (see module docstring)


# -- fixtures and helpers ----------------------------------------------------------------


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """One nameserver + broker for the whole module (each test uses its own topics)."""
    tmp: Path = tmp_path_factory.mktemp("wire")
    with namesrv_and_broker(tmp) as servers:
        yield servers


class Wire:
    """A tap in front of the broker and one in front of the nameserver, whose route answers
    point the client at the broker tap."""

    def __init__(self, btap: WireTap, ntap: WireTap, broker_name: str) -> None:
        self.btap = btap
        self.ntap = ntap
        self.broker_name = broker_name

    @property
    def namesrv(self) -> str:
        return self.ntap.address

    def requests(self, code: int | None = None, *, tap: str = "broker") -> list[RemotingCommand]:
        t = self.btap if tap == "broker" else self.ntap
        return [f.command for f in t.frames
                if f.direction == TO_SERVER and f.command is not None and not f.is_response
                and (code is None or f.command.code == code)]

    def tapped(self, tap: str = "broker") -> list[TappedFrame]:
        return (self.btap if tap == "broker" else self.ntap).frames

    def answer(self, request: RemotingCommand, *, tap: str = "broker") -> RemotingCommand | None:
        for req, resp in (self.btap if tap == "broker" else self.ntap).exchanges():
            if req.command is request:
                return None if resp is None else resp.command
        return None

    async def wait(self, what: str, predicate: Callable[[], bool], timeout: float = 30) -> None:
        await self.btap.wait_until(what, predicate, timeout=timeout)


@pytest.fixture
async def wire(servers: tuple[ServerProcess, ServerProcess]) -> AsyncIterator[Wire]:
    ns, br = servers
    assert br.match is not None
    async with WireTap("broker", br.address) as btap, \
            WireTap("namesrv", ns.address) as ntap:
        ntap.rewrite_routes = {br.address: btap.address}
        yield Wire(btap, ntap, br.match.group("name"))


async def wait_for(cond: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Poll an in-memory condition until it holds, or fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


def java_request(scenario: str, code: int, index: int = 0) -> dict[str, Any]:
    """The ``index``-th captured request of ``code`` sent by the Java client in ``scenario``."""
    found = [f for f in frames_where(scenario=scenario, code=code, is_response=False)
             if f["conn"].startswith("client->")]
    return found[index]


def java_ext(f: dict[str, Any]) -> dict[str, str]:
    return dict(f["header"].get("extFields") or {})


def java_keys(f: dict[str, Any]) -> set[str]:
    """The Java request's extFields keys without the stream-request hook's ``ReqT``."""
    return set(java_ext(f)) - {REQ_T}


def ext(cmd: RemotingCommand) -> dict[str, str]:
    return dict(cmd.ext_fields or {})


def key_tree(value: Any) -> Any:
    """The shape of a JSON document: key lists (in order) at every level, no values."""
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, tuple) else "<object key>": key_tree(v)
                for k, v in value.items()}
    if isinstance(value, list):
        shapes = {json.dumps(key_tree(v), sort_keys=False) for v in value}
        return sorted(shapes)
    return None


def assert_plain_request(cmd: RemotingCommand) -> None:
    """What every request of ours has in common with the Java client's (2.1-2.5)."""
    assert cmd.serialize_type == SerializeType.JSON
    assert cmd.version == CURRENT_VERSION >= 401
    assert cmd.flag in (0, 2)
    if cmd.code != RequestCode.HEART_BEAT:
        assert cmd.language == LanguageCode.JAVA, cmd.code


def body_json(cmd: RemotingCommand) -> Any:
    assert cmd.body is not None, cmd
    return json.loads(bytes(cmd.body))


def oneway(cmd: RemotingCommand) -> bool:
    return bool(cmd.flag & 2)


def first_index(cmds: list[RemotingCommand], pred: Callable[[RemotingCommand], bool]) -> int:
    for i, c in enumerate(cmds):
        if pred(c):
            return i
    raise AssertionError("no such request")


# -- part 1: our requests against the Java client's --------------------------------------


async def test_producer_requests_match_java(wire: Wire) -> None:
    """harness_json producer, props, compress, batch and delay sends."""
    topic = "WireProdT"
    group = "WireProdPG"
    big = zlib.decompress(body_bytes(395))  # the compress scenario's 8206-byte body
    assert len(big) == 8206
    java_batch = decode_batch(body_bytes(466), topic=topic)
    batch_msgs = [Message(topic, m.body, properties=m.properties) for m in java_batch]
    async with Producer(group, wire.namesrv) as producer:
        client_id = producer.instance.client_id  # type: ignore[union-attr]
        results = [await producer.send(Message(topic, f"sync-{i}".encode(), tags="sync",
                                               keys=f"wire-sync-{i}",
                                               properties={"runId": "wire"}))
                   for i in range(4)]
        results.append(await producer.send_async(Message(topic, b"async", tags="async")))
        await producer.send_oneway(Message(topic, b"oneway", tags="oneway"))
        props = await producer.send(Message(
            topic, "héllo 世界 body".encode(), tags="TagA", keys="vkey1 vkey2",
            properties={"color": "red", "size": "L", "unicode": "héllo-世界"}))
        compressed = await producer.send(Message(topic, big))
        batch = await producer.send(batch_msgs)
        delayed = Message(topic, b"later", tags="DelayTag")
        delayed.delay_time_level = 2
        await producer.send(delayed)
    for r in [*results, props, compressed, batch]:
        assert r.status is SendStatus.SEND_OK and r.message_queue.broker_name == wire.broker_name

    # Route order (frames 5-8): the topic first, TOPIC_NOT_EXIST, then the TBW102 template.
    # (The periodic refresh may slip in another lookup of the topic, as in Java.)
    nreqs = wire.requests(RequestCode.GET_ROUTEINFO_BY_TOPIC, tap="namesrv")
    first = first_index(nreqs, lambda c: ext(c)["topic"] == topic)
    tbw = first + first_index(nreqs[first:],
                              lambda c: ext(c)["topic"] == SystemTopic.AUTO_CREATE_TOPIC_KEY)
    assert [ext(c)["topic"] for c in nreqs[first:tbw]] == [topic] * (tbw - first)
    for c in nreqs[first:tbw]:
        assert wire.answer(c, tap="namesrv").code == frame(6)["code"] == 17  # type: ignore[union-attr]
    assert wire.answer(nreqs[tbw], tap="namesrv").code == frame(8)["code"] == 0  # type: ignore[union-attr]
    for c in nreqs:
        assert_plain_request(c)
        assert set(ext(c)) == java_keys(frame(5)) == {"topic"} and not oneway(c)

    sends = wire.requests(RequestCode.SEND_MESSAGE_V2)
    assert len(sends) == 9
    java = java_request("harness_json", RequestCode.SEND_MESSAGE_V2)
    for c in sends:
        assert_plain_request(c)
        e = ext(c)
        assert set(e) == set(java_ext(java)) == set("abcdefghijkmn")  # ``l`` stays null
        for k in "cdhjkm":  # TBW102, 4, flag 0, reconsumeTimes 0, unitMode false, batch false
            assert e[k] == java_ext(java)[k], k
        assert (e["a"], e["b"], e["n"]) == (group, topic, wire.broker_name)
        assert 0 <= int(e["e"]) < int(e["d"]) and int(e["g"]) > 1_700_000_000_000
        assert not oneway(c) or decode_properties(e["i"])["TAGS"] == "oneway"
        assert c.body is not None
    assert [oneway(c) for c in sends].count(True) == 1 and frame(20)["oneway"]

    by_tag = {decode_properties(ext(c)["i"]).get("TAGS"): c for c in sends}
    # props (frame 334): same property names; values equal but the per-process UNIQ_KEY.
    ours = decode_properties(ext(by_tag["TagA"])["i"])
    theirs = decode_properties(java_ext(frame(334))["i"])
    theirs.pop("vecRun")
    assert set(ours) == set(theirs)
    assert {k: v for k, v in ours.items() if k != "UNIQ_KEY"} == \
        {k: v for k, v in theirs.items() if k != "UNIQ_KEY"}
    assert len(ours["UNIQ_KEY"]) == 32 and ours["UNIQ_KEY"] == props.msg_id
    assert ext(by_tag["sync"])["f"] == java_ext(java)["f"] == "0"
    # delay (delay scenario): DELAY=2 in the properties, sysFlag 0.
    delay_java = java_request("delay", RequestCode.SEND_MESSAGE_V2)
    assert decode_properties(ext(by_tag["DelayTag"])["i"])["DELAY"] == \
        decode_properties(java_ext(delay_java)["i"])["DELAY"] == "2"
    # compress (frame 395): sysFlag 769 and the very same zlib level-5 bytes.
    comp = by_tag[None]
    assert ext(comp)["f"] == java_ext(frame(395))["f"] == "769"
    assert bytes(comp.body) == body_bytes(395)  # type: ignore[arg-type]

    # batch (frame 466): code 320, m=true, the batch's own properties, byte-equal body.
    (b,) = wire.requests(RequestCode.SEND_BATCH_MESSAGE)
    assert_plain_request(b)
    jb = java_ext(frame(466))
    assert set(ext(b)) == set(jb)
    assert (ext(b)["m"], ext(b)["i"], ext(b)["f"]) == (jb["m"], jb["i"], jb["f"]) == \
        ("true", "WAIT\x01true", "0")
    assert bytes(b.body) == body_bytes(466)  # type: ignore[arg-type]
    assert batch.msg_id == ",".join(m.properties["UNIQ_KEY"] for m in java_batch)
    assert batch.offset_msg_id is not None and len(batch.offset_msg_id.split(",")) == 3

    # Shutdown (frames 25, 27): UNREGISTER_CLIENT for the group, then CLIENT_INNER_PRODUCER.
    unreg = wire.requests(RequestCode.UNREGISTER_CLIENT)
    assert [ext(c).get("producerGroup") for c in unreg] == [group, MixAll.CLIENT_INNER_PRODUCER_GROUP]
    for c, j in zip(unreg, (frame(25), frame(27)), strict=True):
        assert_plain_request(c)
        assert set(ext(c)) == java_keys(j) and not oneway(c)
        assert ext(c)["clientID"] == client_id


async def test_push_consumer_requests_match_java(wire: Wire, servers: tuple[ServerProcess, ServerProcess]) -> None:
    """harness_json / props push consumer, plus the sendback scenario's send-back."""
    ns, _ = servers
    topic, group = "WirePushT", "WirePushCG"
    async with Producer("WirePushPG", ns.address) as producer:  # not through the taps
        sent = {tag: await producer.send(Message(topic, tag.encode(), tags=tag))
                for tag in ("TagA", "TagB", "TagC")}
        seen: dict[str, int] = {}
        done = asyncio.Event()

        async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                seen[m.tags or ""] = seen.get(m.tags or "", 0) + 1
            done.set()
            if any(m.tags == "TagA" and m.reconsume_times == 0 for m in msgs):
                return ConsumeConcurrentlyStatus.RECONSUME_LATER  # -> CONSUMER_SEND_MSG_BACK
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(group, wire.namesrv,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe(topic, "TagA || TagB")
        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            client_id = consumer.instance.client_id  # type: ignore[union-attr]
            mq_b = sent["TagB"].message_queue
            await wait_for(lambda: consumer.offset_store.clone_offset_table().get(mq_b, 0) > 0,
                           "the TagB message consumed and its offset committed in memory")
            await wire.wait("CONSUMER_SEND_MSG_BACK", lambda: bool(
                wire.requests(RequestCode.CONSUMER_SEND_MSG_BACK)))
            # A new message on the consumed queue: the held pull returns and the next one
            # carries the commit offset (sysFlag 3, frame 64).
            await producer.send(Message(topic, b"TagB-2", tags="TagB"), mq_b)
            await wire.wait("a pull with the commit-offset bit", lambda: any(
                ext(c)["sysFlag"] == "3" for c in wire.requests(RequestCode.PULL_MESSAGE)))
        finally:
            await consumer.shutdown()
    assert "TagC" not in seen

    reqs = wire.requests()
    for c in reqs:
        assert_plain_request(c)
    # First exchanges (frames 39-57): HEART_BEAT, consumer list, offsets, then pulls.
    hb_i = first_index(reqs, lambda c: c.code == RequestCode.HEART_BEAT)
    gcl_i = first_index(reqs, lambda c: c.code == RequestCode.GET_CONSUMER_LIST_BY_GROUP)
    qco_i = first_index(reqs, lambda c: c.code == RequestCode.QUERY_CONSUMER_OFFSET)
    pull_i = first_index(reqs, lambda c: c.code == RequestCode.PULL_MESSAGE)
    assert hb_i < gcl_i < qco_i < pull_i
    nreqs = wire.requests(RequestCode.GET_ROUTEINFO_BY_TOPIC, tap="namesrv")
    # Routes (frames 29, 31): the topic, then %RETRY%<group> (TOPIC_NOT_EXIST at first).
    topics = [ext(c)["topic"] for c in nreqs]
    assert topics.index(topic) < topics.index(MixAll.retry_topic(group))
    assert java_ext(frame(29))["topic"] == "TestTopic" and \
        java_ext(frame(31))["topic"] == "%RETRY%HarnessPushGroup-vecjson"

    # HEART_BEAT (frame 350, the same "TagA || TagB" subscription).
    hbs = wire.requests(RequestCode.HEART_BEAT)
    java_hb = frame(350)
    for c in hbs:
        assert c.ext_fields is None and java_hb["header"].get("extFields") is None
        assert c.language == consumer.config.language  # PYTHON: see module docstring
        body = body_json(c)
        java_body = json.loads(java_hb["body_text"])
        assert key_tree(body) == key_tree(java_body)  # same keys, same (alphabetical) order
        assert body["clientID"] == client_id
        assert body["producerDataSet"] == java_body["producerDataSet"] == \
            [{"groupName": MixAll.CLIENT_INNER_PRODUCER_GROUP}]
        (cd,) = body["consumerDataSet"]
        (jcd,) = java_body["consumerDataSet"]
        for k in ("consumeFromWhere", "consumeType", "messageModel", "unitMode"):
            assert cd[k] == jcd[k], k
        subs = {s["topic"]: s for s in cd["subscriptionDataSet"]}
        jsubs = {s["topic"]: s for s in jcd["subscriptionDataSet"]}
        assert set(subs) == {topic, MixAll.retry_topic(group)}
        sub, jsub = subs[topic], jsubs["VecPropsTopic"]
        for k in ("subString", "expressionType", "classFilterMode"):
            assert sub[k] == jsub[k], k
        assert sorted(sub["tagsSet"]) == sorted(jsub["tagsSet"])
        assert sorted(sub["codeSet"]) == sorted(jsub["codeSet"]) == [2598919, 2598920]
        retry, jretry = subs[MixAll.retry_topic(group)], jsubs["%RETRY%VecPropsConsumer"]
        assert {k: v for k, v in retry.items() if k not in ("topic", "subVersion")} == \
            {k: v for k, v in jretry.items() if k not in ("topic", "subVersion")}

    # PULL_MESSAGE (frames 54, 64): keys, values, sysFlag 2|commit, subVersion of the
    # latest heartbeat before it.
    java_pull = frame(54)
    latest_sub_version: dict[str, int] = {}
    pulls = 0
    for c in reqs:
        if c.code == RequestCode.HEART_BEAT:
            for s in body_json(c)["consumerDataSet"][0]["subscriptionDataSet"]:
                latest_sub_version[s["topic"]] = s["subVersion"]
        elif c.code == RequestCode.PULL_MESSAGE:
            pulls += 1
            e = ext(c)
            assert set(e) == java_keys(java_pull) and not oneway(c)
            for k in ("maxMsgNums", "suspendTimeoutMillis", "expressionType"):
                assert e[k] == java_ext(java_pull)[k], k
            assert e["sysFlag"] == ("3" if int(e["commitOffset"]) > 0 else "2")
            assert e["consumerGroup"] == group and e["bname"] == wire.broker_name
            assert int(e["subVersion"]) == latest_sub_version[e["topic"]]
    assert pulls >= 5

    # CONSUMER_SEND_MSG_BACK (frame 662).
    (sb,) = wire.requests(RequestCode.CONSUMER_SEND_MSG_BACK)
    java_sb = frame(662)
    e = ext(sb)
    assert set(e) == java_keys(java_sb) and not oneway(sb)
    for k in ("delayLevel", "maxReconsumeTimes", "unitMode"):
        assert e[k] == java_ext(java_sb)[k], k
    assert (e["group"], e["originTopic"], e["bname"]) == (group, topic, wire.broker_name)
    assert e["originMsgId"] == sent["TagA"].msg_id  # the UNIQ_KEY, as Java
    assert int(e["offset"]) == decode_offset_msg_id(sent["TagA"].offset_msg_id or "")[1]
    assert wire.answer(sb).code == frame(664)["code"] == 0  # type: ignore[union-attr]

    # UPDATE_CONSUMER_OFFSET (frame 81): oneway, same keys; the consumed queue's offset.
    updates = wire.requests(RequestCode.UPDATE_CONSUMER_OFFSET)
    assert updates and all(oneway(c) for c in updates) and frame(81)["oneway"]
    for c in updates:
        assert set(ext(c)) == java_keys(frame(81))
    assert any(ext(c)["queueId"] == str(mq_b.queue_id) and ext(c)["topic"] == topic
               and int(ext(c)["commitOffset"]) >= 1 for c in updates)
    for c in wire.requests(RequestCode.QUERY_CONSUMER_OFFSET):
        assert set(ext(c)) == java_keys(frame(45))
    for c in wire.requests(RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        assert ext(c) == {"consumerGroup": group} and set(java_ext(frame(43))) == {"consumerGroup"}

    # Shutdown (frames 81-88): offsets, then UNREGISTER_CLIENT group, CLIENT_INNER_PRODUCER.
    unreg = wire.requests(RequestCode.UNREGISTER_CLIENT)
    assert [(ext(c).get("consumerGroup"), ext(c).get("producerGroup")) for c in unreg] == \
        [(group, None), (None, MixAll.CLIENT_INNER_PRODUCER_GROUP)]
    assert set(ext(unreg[0])) == java_keys(frame(86))
    last_update = max(i for i, c in enumerate(reqs) if c.code == RequestCode.UPDATE_CONSUMER_OFFSET)
    assert last_update < reqs.index(unreg[0])


async def test_orderly_consumer_requests_match_java(wire: Wire,
                                                    servers: tuple[ServerProcess, ServerProcess]) -> None:
    """The orderly scenario: LOCK_BATCH_MQ before pulling, two-way UNLOCK at shutdown."""
    ns, _ = servers
    topic, group = "WireOrderT", "WireOrderCG"
    async with Producer("WireOrderPG", ns.address) as producer:
        for i in range(6):
            await producer.send(Message(topic, f"order-{i}".encode(), tags="OrderTag"),
                                selector=SelectMessageQueueByHash(), arg=i % 2)
    got: list[bytes] = []

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeOrderlyStatus:
        got.extend(m.body for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(group, wire.namesrv,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener, orderly=True)
    await consumer.start()
    try:
        client_id = consumer.instance.client_id  # type: ignore[union-attr]
        await wait_for(lambda: len(got) >= 6, "the six ordered messages")
    finally:
        await consumer.shutdown()

    reqs = wire.requests()
    java_lock, java_unlock = frame(735), frame(792)
    locked: set[tuple[str, int]] = set()
    for c in reqs:
        assert_plain_request(c)
        if c.code == RequestCode.LOCK_BATCH_MQ:
            assert c.ext_fields is None and java_lock["header"].get("extFields") is None
            body = body_json(c)
            assert key_tree(body) == key_tree(json.loads(java_lock["body_text"]))
            assert (body["clientId"], body["consumerGroup"]) == (client_id, group)
            answer = wire.answer(c)
            assert answer is not None and answer.body
            assert key_tree(body_json(answer)) == \
                key_tree(json.loads(frame(736)["body_text"]))
            locked |= {(q["topic"], q["queueId"])
                       for q in body_json(answer)["lockOKMQSet"]}
        elif c.code == RequestCode.PULL_MESSAGE:
            assert (ext(c)["topic"], int(ext(c)["queueId"])) in locked  # frames 735-785
            assert set(ext(c)) == java_keys(frame(757))
    unlock = [c for c in reqs if c.code == RequestCode.UNLOCK_BATCH_MQ]
    assert unlock and not oneway(unlock[-1]) and not java_unlock["oneway"]
    assert key_tree(body_json(unlock[-1])) == \
        key_tree(json.loads(java_unlock["body_text"]))
    assert wire.answer(unlock[-1]).code == frame(793)["code"] == 0  # type: ignore[union-attr]
    # Shutdown order (frames 792-801): unlock, offsets, unregister.
    i_unlock = reqs.index(unlock[-1])
    i_update = max(i for i, c in enumerate(reqs) if c.code == RequestCode.UPDATE_CONSUMER_OFFSET)
    i_unreg = first_index(reqs, lambda c: c.code == RequestCode.UNREGISTER_CLIENT)
    assert i_unlock < i_update < i_unreg


async def test_pull_and_lite_pull_requests_match_java(wire: Wire,
                                                      servers: tuple[ServerProcess, ServerProcess]) -> None:
    """harness_json lite-pull and pull consumers, and the misc scenario's lookups."""
    ns, _ = servers
    topic = "WirePullT"
    async with Producer("WirePullPG", ns.address) as producer:
        sent = [await producer.send(Message(topic, f"p{i}".encode(), tags="T",
                                            keys=f"wirekey-{i}"))
                for i in range(8)]

    lite = LitePullConsumer("WireLiteCG", wire.namesrv,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    lite.subscribe(topic, "*")
    await lite.start()
    try:
        got: list[bytes] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(got) < 8 and loop.time() < deadline:
            got.extend(m.body for m in await lite.poll(1.0))
        assert len(got) == 8
    finally:
        await lite.shutdown()
    lite_reqs = wire.requests()

    mq = sent[0].message_queue
    async with PullConsumer("WirePullCG", wire.namesrv) as pc:
        inst = pc.instance
        assert inst is not None
        assert await inst.min_offset(mq) == 0
        max_off = await inst.max_offset(mq)
        found = await pc.pull(mq, "*", 0, 32)
        assert found.status is PullStatus.FOUND and found.next_begin_offset == max_off
        held = asyncio.create_task(pc.pull_block_if_not_found(mq, "*", max_off, 32))
        await wire.wait("the blocking pull", lambda: any(
            ext(c)["sysFlag"] == "6" for c in wire.requests(RequestCode.PULL_MESSAGE)))
        async with Producer("WirePullPG2", ns.address) as p2:
            await p2.send(Message(topic, b"late"), mq)
        assert (await held).status is PullStatus.FOUND
        # misc (frames 907-920).
        assert await inst.search_offset(mq, sent[0].queue_offset * 0 + 1) == 0
        addr = inst.find_broker_address_in_publish(mq.broker_name)
        assert addr is not None
        assert await inst.api.get_earliest_msg_storetime(addr, mq) > 0
        hits = await inst.api.query_message(addr, topic, "wirekey-0")
        assert [m.body for m in hits] == [b"p0"]
        viewed = await inst.api.view_message(addr, hits[0].commit_log_offset)
        assert viewed.body == b"p0"

    # Lite pull (frames 96-131).
    java_lite = frame(110)
    lite_pulls = [c for c in lite_reqs if c.code == RequestCode.PULL_MESSAGE]
    assert lite_pulls
    for c in lite_reqs:
        assert_plain_request(c)
        assert REQ_T not in ext(c)  # Java's stream hook only (module docstring)
    for c in lite_pulls:
        e = ext(c)
        assert set(e) == java_keys(java_lite)
        for k in ("sysFlag", "maxMsgNums", "suspendTimeoutMillis", "subscription",
                  "subVersion", "expressionType", "commitOffset"):
            assert e[k] == java_ext(java_lite)[k], k
    (lite_hb, *_) = [c for c in lite_reqs if c.code == RequestCode.HEART_BEAT]
    body = body_json(lite_hb)
    java_body = json.loads(frame(96)["body_text"])
    assert key_tree(body) == key_tree(java_body)
    assert body["consumerDataSet"][0]["consumeType"] == "CONSUME_ACTIVELY"
    assert [s["topic"] for s in body["consumerDataSet"][0]["subscriptionDataSet"]] == [topic]
    assert not body["clientID"].endswith("@STREAM")  # tolerated (module docstring)
    # Auto-commit persists oneway, as Java (frame 124). (Our ``commit_sync`` sends them
    # two-way at once; Java's only updates memory. A 4.9.7 broker answers either form.)
    lite_updates = [c for c in lite_reqs if c.code == RequestCode.UPDATE_CONSUMER_OFFSET]
    assert lite_updates and all(oneway(c) for c in lite_updates)
    for c in lite_updates:
        assert set(ext(c)) == java_keys(frame(124))
    assert [ext(c).get("producerGroup") or ext(c).get("consumerGroup")
            for c in lite_reqs if c.code == RequestCode.UNREGISTER_CLIENT] == \
        ["WireLiteCG", MixAll.CLIENT_INNER_PRODUCER_GROUP]

    # Pull consumer (frames 138-165) and misc (907-920).
    pull_reqs = wire.requests()[len(lite_reqs):]
    java_pull = frame(142)
    flags = []
    for c in pull_reqs:
        assert_plain_request(c)
        e = ext(c)
        if c.code == RequestCode.PULL_MESSAGE:
            flags.append(e["sysFlag"])
            assert set(e) == java_keys(java_pull)
            for k in ("suspendTimeoutMillis", "subscription", "subVersion", "expressionType",
                      "commitOffset", "maxMsgNums"):
                assert e[k] == java_ext(java_pull)[k], k
    assert flags == ["4", "6"] and java_ext(java_pull)["sysFlag"] == "4"
    by_code = {c.code: c for c in pull_reqs}
    for code, java_id in ((RequestCode.GET_MAX_OFFSET, 907), (RequestCode.GET_MIN_OFFSET, 910),
                          (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, 913),
                          (RequestCode.GET_EARLIEST_MSG_STORETIME, 916),
                          (RequestCode.QUERY_MESSAGE, 918), (RequestCode.VIEW_MESSAGE_BY_ID, 920)):
        c = by_code[code]
        assert set(ext(c)) == java_keys(frame(java_id)), code
        assert not oneway(c)
    q, jq = ext(by_code[RequestCode.QUERY_MESSAGE]), java_ext(frame(918))
    for k in ("_UNIQUE_KEY_QUERY", "maxNum", "beginTimestamp", "endTimestamp"):
        assert q[k] == jq[k], k
    assert all(ext(by_code[code])["bname"] == wire.broker_name
               for code in (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET,
                            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                            RequestCode.GET_EARLIEST_MSG_STORETIME))


async def test_rocketmq_serialize_type_requests_match_java(wire: Wire) -> None:
    """harness_rocketmq: producer, push, lite-pull and pull consumers with binary headers."""
    topic = "WireBinT"
    cfg = ClientConfig(namesrv_addr=wire.namesrv, serialize_type="ROCKETMQ")  # type: ignore[arg-type]
    assert cfg.serialize_type is SerializeType.ROCKETMQ
    async with Producer("WireBinPG", config=cfg) as producer:
        sent = [await producer.send(Message(topic, f"bin-{i}".encode(), tags="TagA"))
                for i in range(4)]
    mq = sent[0].message_queue

    seen: list[bytes] = []

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push = PushConsumer("WireBinCG", config=cfg,
                        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    push.subscribe(topic, "*")
    push.register_message_listener(listener)
    await push.start()
    try:
        await wait_for(lambda: len(seen) >= 4, "the push consumer's deliveries")
    finally:
        await push.shutdown()  # persists offsets (UPDATE_CONSUMER_OFFSET), then unregisters

    lite = LitePullConsumer("WireBinLiteCG", config=cfg,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    lite.subscribe(topic, "*")
    await lite.start()
    try:
        got: list[bytes] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(got) < 4 and loop.time() < deadline:
            got.extend(m.body for m in await lite.poll(1.0))
        assert sorted(got) == sorted(seen[:4])
    finally:
        await lite.shutdown()

    async with PullConsumer("WireBinPullCG", config=cfg) as pc:
        assert pc.instance is not None
        assert await pc.instance.min_offset(mq) == 0
        assert await pc.instance.max_offset(mq) >= 1

    java = [f for f in frames_where(scenario="harness_rocketmq", is_response=False)
            if f["conn"].startswith("client->")]
    java_key_sets: dict[int, set[frozenset[str]]] = {}
    for f in java:
        assert f["serialize"] == "ROCKETMQ"
        java_key_sets.setdefault(f["code"], set()).add(frozenset(java_keys(f)))
    ours = [(c, "broker") for c in wire.requests()] + \
        [(c, "namesrv") for c in wire.requests(tap="namesrv")]
    assert {c.code for c, _ in ours} == set(java_key_sets)
    answered: set[int] = set()
    for c, tap in ours:
        assert c.serialize_type == SerializeType.ROCKETMQ, c.code
        assert frozenset(ext(c)) in java_key_sets[c.code], (c.code, sorted(ext(c)))
        answer = wire.answer(c, tap=tap)
        if answer is not None:  # a pull still held at shutdown has none
            assert answer.serialize_type == SerializeType.ROCKETMQ, c.code  # mirrored
            answered.add(c.code)
    assert answered == {c.code for c, _ in ours if not oneway(c)}


def test_version_gates() -> None:
    """Every version test in the 4.9.7 broker and nameserver passes with our stamp.

    broker Broker2Client.resetOffset / getConsumeStatus (>= V3_0_7_SNAPSHOT = 28),
    AdminBrokerProcessor.callConsumer (>= V3_1_8_SNAPSHOT = 62), SendMessageProcessor
    maxReconsumeTimes (>= V3_4_9 = 121), nameserver standard-JSON routes (>= V4_9_4 = 401).
    """
    assert all(CURRENT_VERSION >= gate for gate in (28, 62, 121, 401))
    assert RemotingCommand.create_request(RequestCode.PULL_MESSAGE).version == CURRENT_VERSION


# -- part 2: our client on the captured Java answers -------------------------------------

JAVA_BROKER = b"127.0.0.1:10911"  # the broker address inside captured route answers
JAVA_CLIENT_IP, JAVA_INSTANCE = "192.0.2.2", "vec-VecIdleConsumer"  # its client id


def replay_namesrv(broker: ReplayServer, routes: dict[str, int]) -> ReplayServer:
    """A nameserver answering ``routes[topic]`` (a captured frame id), else frame 6
    (TOPIC_NOT_EXIST), with the broker address pointed at ``broker``."""
    def route(req: RemotingCommand) -> int:
        return routes.get(ext(req)["topic"], 6)

    return ReplayServer({RequestCode.GET_ROUTEINFO_BY_TOPIC: route},
                        rewrite={JAVA_BROKER: broker.address.encode()})


async def test_route_and_send_answers() -> None:
    """Routes in both JSON forms, TOPIC_NOT_EXIST + TBW102, send and batch answers."""
    broker = ReplayServer({
        RequestCode.SEND_MESSAGE_V2: lambda r: 11,
        RequestCode.SEND_BATCH_MESSAGE: lambda r: 468,
        RequestCode.HEART_BEAT: lambda r: 42,
        RequestCode.UNREGISTER_CLIENT: lambda r: 26,
    })
    async with broker:
        namesrv = replay_namesrv(broker, {"VecPropsTopic": 1341, "VecLegacy": 1339, "TBW102": 4})
        async with namesrv:
            async with Producer("ReplayPG", namesrv.address) as producer:
                inst = producer.instance
                assert inst is not None
                standard = await inst.api.get_topic_route_info("VecPropsTopic")
                legacy = await inst.api.get_topic_route_info("VecLegacy")
                assert standard.to_json() == legacy.to_json()  # frames 1341 / 1339
                (bd,) = standard.broker_datas
                assert bd.broker_addrs == {0: broker.address} and bd.broker_name == "broker-a"
                (qd,) = standard.queue_datas
                assert (qd.read_queue_nums, qd.write_queue_nums, qd.perm) == (4, 4, 6)
                with pytest.raises(TopicNotExistError) as err:
                    await inst.api.get_topic_route_info("NoSuchTopic")
                assert err.value.remark == frame(6)["header"]["remark"]

                # A new topic: TOPIC_NOT_EXIST, then the TBW102 route (8 queues, frame 4)
                # clamped to 4; the send answer of frame 11.
                result = await producer.send(Message("VecNewTopic", b"x", tags="t"))
                h = java_ext(frame(11))
                assert result.status is SendStatus.SEND_OK
                assert result.offset_msg_id == h["msgId"]
                assert (result.message_queue.queue_id, result.queue_offset) == \
                    (int(h["queueId"]), int(h["queueOffset"]))
                assert (result.region_id, result.trace_on) == (h["MSG_REGION"], True)
                assert result.message_queue.broker_name == "broker-a"
                assert result.msg_id is not None and len(result.msg_id) == 32
                topics = [ext(c)["topic"] for c in namesrv.requests]
                assert "TBW102" in topics[topics.index("VecNewTopic"):]
                assert {int(ext(c)["e"]) for c in broker.requests_of(RequestCode.SEND_MESSAGE_V2)} \
                    <= {0, 1, 2, 3}
                batch = await producer.send([Message("VecNewTopic", f"b{i}".encode())
                                             for i in range(3)])
                hb = java_ext(frame(468))
                assert batch.offset_msg_id == hb["msgId"] and len(hb["msgId"].split(",")) == 3
                assert batch.msg_id is not None and len(batch.msg_id.split(",")) == 3
                assert batch.queue_offset == int(hb["queueOffset"])
            assert [ext(c).get("producerGroup") for c in broker.requests_of(RequestCode.UNREGISTER_CLIENT)] \
                == ["ReplayPG", MixAll.CLIENT_INNER_PRODUCER_GROUP]


async def test_push_consumer_on_java_answers() -> None:
    """The idle_consumer conversation replayed: FOUND / SUBSCRIPTION_NOT_LATEST /
    PULL_NOT_FOUND pulls, GET_CONSUMER_RUNNING_INFO (frames 1189/1190) and a JSON
    NOTIFY_CONSUMER_IDS_CHANGED sent to a ROCKETMQ client (frame 204)."""
    script = {2: [1149, 1199], 0: [1151, 1202], 1: [1152, 1201], 3: [1153, 1164, 1198]}
    pulled: dict[int, list[RemotingCommand]] = {q: [] for q in script}

    def pull(req: RemotingCommand) -> int | None:
        q = int(ext(req)["queueId"])
        pulled[q].append(req)
        answers = script[q]
        return answers[len(pulled[q]) - 1] if len(pulled[q]) <= len(answers) else None  # hold

    broker = ReplayServer({
        RequestCode.HEART_BEAT: lambda r: 1133,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP: lambda r: 1135,
        RequestCode.QUERY_CONSUMER_OFFSET: lambda r: 1137,
        RequestCode.PULL_MESSAGE: pull,
        RequestCode.UNREGISTER_CLIENT: lambda r: 1230,
    })
    got: list[MessageExt] = []

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async with broker, replay_namesrv(broker, {"TestTopic": 1121, "TBW102": 1129}) as namesrv:
        consumer = PushConsumer(
            "VecIdleConsumer", config=ClientConfig(namesrv_addr=namesrv.address,
                                                   client_ip=JAVA_CLIENT_IP,
                                                   instance_name=JAVA_INSTANCE),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe("TestTopic", "*")
        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            assert consumer.instance is not None
            assert consumer.instance.client_id == "192.0.2.2@vec-VecIdleConsumer"
            await broker.wait_until("every scripted pull answered and the next one sent", lambda: all(
                len(pulled[q]) > len(script[q]) for q in script))
            await wait_for(lambda: len(got) == 40, "the 40 captured messages consumed")
            # After each answer the next pull starts at its nextBeginOffset (frames 1158-1205).
            for q, answers in script.items():
                for req, fid in zip(pulled[q][1:], answers, strict=True):
                    if frame(fid)["code"] in (0, 19):
                        assert ext(req)["queueOffset"] == java_ext(frame(fid))["nextBeginOffset"]
                    else:  # SUBSCRIPTION_NOT_LATEST: the same offset again, later
                        assert frame(fid)["code"] == 25
                        assert ext(req)["queueOffset"] == ext(pulled[q][0])["queueOffset"]
            # MIN_OFFSET / MAX_OFFSET from each FOUND answer's header (processPullResult).
            maxes = {int(java_ext(frame(f))["maxOffset"]) for fs in script.values() for f in fs
                     if frame(f)["code"] == 0}
            assert {int(m.properties["MAX_OFFSET"]) for m in got} == maxes
            assert {m.properties["MIN_OFFSET"] for m in got} == {"0"}
            assert len({(m.queue_id, m.queue_offset) for m in got}) == 40

            # GET_CONSUMER_RUNNING_INFO forwarded by the broker (frame 1189).
            resp = await broker.push(1189)
            java_resp = frame(1190)
            assert resp is not None and resp.code == java_resp["code"] == 0
            assert resp.remark == java_resp["header"]["remark"]
            assert resp.ext_fields is None and "extFields" not in java_resp["header"]
            assert resp.body is not None
            ours, theirs = fastjson.loads(bytes(resp.body)), fastjson.loads(java_resp["body_text"])
            assert list(ours) == list(theirs)
            assert len(ours["mqTable"]) == len(theirs["mqTable"]) == 4
            for table in ("mqTable", "statusTable"):
                assert {tuple(v) for v in ours[table].values()} == \
                    {tuple(v) for v in theirs[table].values()}, table
            assert key_tree(ours["subscriptionSet"]) == key_tree(theirs["subscriptionSet"])
            # The PROP_* keys mqadmin reads, and the consumer settings both have; Java's
            # bean dump of JVM objects (log, offsetStore, ...) has no Python counterpart.
            shared = {k for k in theirs["properties"] if k.startswith("PROP_")} | {
                "consumerGroup", "messageModel", "consumeFromWhere", "pullBatchSize",
                "consumeMessageBatchMaxSize"}
            assert shared <= set(ours["properties"])

            # NOTIFY_CONSUMER_IDS_CHANGED in JSON, as the broker sent it to a ROCKETMQ
            # client (frame 204): we rebalance at once (a new consumer-list request).
            assert frame(204)["serialize"] == "JSON"
            before = len(broker.requests_of(RequestCode.GET_CONSUMER_LIST_BY_GROUP))
            assert await broker.push(204) is None
            await broker.wait_until("a rebalance after the notification", lambda: len(
                broker.requests_of(RequestCode.GET_CONSUMER_LIST_BY_GROUP)) > before)
        finally:
            await consumer.shutdown()
    unreg = broker.requests_of(RequestCode.UNREGISTER_CLIENT)
    assert [ext(c).get("consumerGroup") or ext(c).get("producerGroup") for c in unreg] == \
        ["VecIdleConsumer", MixAll.CLIENT_INNER_PRODUCER_GROUP]


async def test_pull_api_on_java_answers() -> None:
    """Pull results (FOUND with the exact tag re-filter, compressed, PULL_NOT_FOUND,
    SUBSCRIPTION_NOT_LATEST) and the offset, lock and query answers."""
    next_pull: list[int] = []
    broker = ReplayServer({
        RequestCode.PULL_MESSAGE: lambda r: next_pull.pop(0),
        RequestCode.QUERY_CONSUMER_OFFSET: lambda r: 46,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP: lambda r: 44,
        RequestCode.LOCK_BATCH_MQ: lambda r: 736,
        RequestCode.GET_MAX_OFFSET: lambda r: 909,
        RequestCode.GET_MIN_OFFSET: lambda r: 912,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: lambda r: 915,
        RequestCode.GET_EARLIEST_MSG_STORETIME: lambda r: 917,
        RequestCode.QUERY_MESSAGE: lambda r: 919,
        RequestCode.VIEW_MESSAGE_BY_ID: lambda r: 921,
        RequestCode.UNREGISTER_CLIENT: lambda r: 163,
    })
    routes = {"TestTopic": 1121, "VecPropsTopic": 1341, "VecCompressTopic": 1341,
              "VecMiscTopic": 1341}
    async with broker, replay_namesrv(broker, routes) as namesrv, \
            PullConsumer("ReplayPullCG", namesrv.address) as pc:
        inst = pc.instance
        assert inst is not None
        mq = MessageQueue("TestTopic", "broker-a", 0)
        # Frame 60: 11 messages tagged sync / async / oneway; the broker filters by tag
        # hash only, so the client keeps exactly the subscribed tag.
        next_pull.append(60)
        all_msgs = await pc.pull(mq, "*", 0, 32)
        next_pull.append(60)
        only_sync = await pc.pull(mq, "sync", 0, 32)
        h = java_ext(frame(60))
        assert all_msgs.status is PullStatus.FOUND and len(all_msgs.msg_found_list) == 11
        assert (all_msgs.next_begin_offset, all_msgs.min_offset, all_msgs.max_offset) == \
            (int(h["nextBeginOffset"]), int(h["minOffset"]), int(h["maxOffset"]))
        assert [m.tags for m in only_sync.msg_found_list] == \
            [m.tags for m in all_msgs.msg_found_list if m.tags == "sync"] != []
        for m in all_msgs.msg_found_list:
            assert (m.properties["MIN_OFFSET"], m.properties["MAX_OFFSET"]) == \
                (h["minOffset"], h["maxOffset"])
        # Frame 374: the props message (unicode properties, KEYS, TAGS).
        next_pull.append(374)
        (props,) = (await pc.pull(MessageQueue("VecPropsTopic", "broker-a", 0), "TagA || TagB",
                                  0, 32)).msg_found_list
        assert props.tags == "TagA" and props.keys == "vkey1 vkey2"
        assert props.properties["unicode"] == "héllo-世界"
        # Frame 439: the compressed record comes back as the original 8206 bytes.
        next_pull.append(439)
        (big,) = (await pc.pull(MessageQueue("VecCompressTopic", "broker-a", 0), "*", 0,
                                32)).msg_found_list
        assert big.body == zlib.decompress(body_bytes(395))
        # PULL_NOT_FOUND (frame 1198) and SUBSCRIPTION_NOT_LATEST (frame 79).
        next_pull.append(1198)
        none = await pc.pull(mq, "*", 10, 32)
        assert none.status is PullStatus.NO_NEW_MSG and none.msg_found_list == []
        assert none.next_begin_offset == int(java_ext(frame(1198))["nextBeginOffset"])
        next_pull.append(79)
        with pytest.raises(MQBrokerError) as err:
            await pc.pull(mq, "*", 0, 32)
        assert err.value.code == frame(79)["code"] == 25

        addr = inst.find_broker_address_in_publish("broker-a")
        assert addr == broker.address
        api = inst.api
        misc = MessageQueue("VecMiscTopic", "broker-a", 2)
        assert await api.get_max_offset(addr, misc) == int(java_ext(frame(909))["offset"])
        assert await api.get_min_offset(addr, misc) == int(java_ext(frame(912))["offset"])
        assert await api.search_offset(addr, misc, 1) == int(java_ext(frame(915))["offset"])
        assert await api.get_earliest_msg_storetime(addr, misc) == \
            int(java_ext(frame(917))["timestamp"])
        key = java_ext(frame(918))["key"]
        (hit,) = await api.query_message(addr, "VecMiscTopic", key)
        assert hit.keys == key and hit.topic == "VecMiscTopic"
        assert await api.query_message(addr, "VecMiscTopic", key + "-other") == []
        viewed = await api.view_message(addr, hit.commit_log_offset)
        assert viewed.body == hit.body and viewed.msg_id == hit.msg_id
        assert await inst.fetch_consume_offset("ReplayPullCG", mq) == 0  # frame 46
        assert await api.get_consumer_id_list(addr, "HarnessPushGroup-vecjson") == \
            json.loads(frame(44)["body_text"])["consumerIdList"]
        locked = await api.lock_batch_mq(addr, LockBatchRequestBody(
            consumer_group="VecOrderConsumer", client_id="192.0.2.2@vec-VecOrderConsumer",
            mq_set=[MessageQueue("VecOrderTopic", "broker-a", 1)]))
        assert locked == [MessageQueue("VecOrderTopic", "broker-a", 1)]  # frame 736


async def test_transaction_check_and_push_reply_answers() -> None:
    """CHECK_TRANSACTION_STATE (frame 823) answered with END_TRANSACTION as frame 824;
    PUSH_REPLY_MESSAGE_TO_CLIENT (frame 1314) answered with a bare SUCCESS as frame 1315."""
    broker = ReplayServer({RequestCode.HEART_BEAT: lambda r: 1133,
                           RequestCode.UNREGISTER_CLIENT: lambda r: 26})
    async with broker, replay_namesrv(broker, {"TestTopic": 1121}) as namesrv:
        producer = TransactionProducer(
            "VecTxProducerGroup", namesrv.address,
            check_local_transaction=lambda msg: LocalTransactionState.COMMIT_MESSAGE)
        await producer.start()
        try:
            inst = producer.instance
            assert inst is not None
            await inst.update_topic_route("TestTopic")
            await inst.send_heartbeat_to_all_brokers()  # the connection the broker calls back on
            assert await broker.push(823) is None
            await broker.wait_until("END_TRANSACTION", lambda: bool(
                broker.requests_of(RequestCode.END_TRANSACTION)))
            (end,) = broker.requests_of(RequestCode.END_TRANSACTION)
            java_end = frame(824)
            assert ext(end) == java_ext(java_end)  # no bname, transactionId, offsets echoed
            assert oneway(end) and java_end["oneway"]
            assert end.remark is None and "remark" not in java_end["header"]

            reply = await broker.push(1314)
            java_reply = frame(1315)
            assert reply is not None and reply.code == java_reply["code"] == 0
            assert reply.ext_fields is None and "extFields" not in java_reply["header"]
            assert not reply.body and java_reply["body_length"] == 0
        finally:
            await producer.shutdown()
