"""The npm ``ali-ons`` client (3.12.0) against our nameserver and broker.

Every test starts real ``mqnamesrv`` + ``mqbroker`` processes on 127.0.0.1, creates its
topic with our own UPDATE_AND_CREATE_TOPIC (ali-ons never auto-creates topics, docs/PROTOCOL.md
9) and drives ali-ons through the harness scripts in ``harness/``: one JSON line per send
result or received message. Facts about ali-ons' behaviour come from its source
(``node_modules/ali-ons/lib``) and docs/PROTOCOL.md 9.

ali-ons is configured with short timers (route poll and rebalance every 1 s, offsets
persisted every 1 s; ``harness/common.js``) and waits are conditions with deadlines.
"""

# ASYNC109: ``timeout`` arguments are deadlines in seconds.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.message import MessageExt, decode_offset_msg_id
from tests.interop.conftest import StartScript
from tests.interop.node import NodeScript, wait_until
from tests.interop.raw import RawBroker
from tests.interop.wiretap import TO_SERVER, WireTap
from tests.procs import ServerProcess, broker_process

pytestmark = [pytest.mark.interop, pytest.mark.timeout(150)]

QUEUES = 4
WAIT = 45.0  # deadline of one wait on ali-ons; its own deadline (harness timeoutMs) is longer
OFFSET_MSG_ID = re.compile(r"^[0-9A-F]{32}$")


# -- helpers ---------------------------------------------------------------------------------


def broker_name(broker: ServerProcess) -> str:
    assert broker.match is not None
    return broker.match.group("name")


def harness_config(namesrv: ServerProcess | str, topic: str, **extra: Any) -> dict[str, Any]:
    """A harness configuration; ``namesrv`` is the server or the address to give ali-ons."""
    address = namesrv if isinstance(namesrv, str) else namesrv.address
    return {"nameSrv": address, "topic": topic, "timeoutMs": 120_000, **extra}


def message_specs(prefix: str, count: int, *, tags: Callable[[int], str | None],
                  ) -> list[dict[str, Any]]:
    """Messages with distinct bodies (non-ASCII included), two keys each and chosen tags."""
    return [{"tags": tags(i), "keys": [f"{prefix}-key-{i}", f"{prefix}-grp-{i // 2}"],
             "body": f"{prefix} body {i} héllo 中文"} for i in range(count)]


async def produce(ons: StartScript, namesrv: ServerProcess | str, topic: str,
                  messages: list[dict[str, Any]], *, name: str = "producer") -> list[dict[str, Any]]:
    """Send ``messages`` through ali-ons' Producer; the ``sent`` events in order."""
    producer = await ons("produce.js", harness_config(
        namesrv, topic, messages=messages, instanceName=name, producerGroup=f"PID_{name}"),
        name=name)
    code = await producer.wait_exit(WAIT)
    assert code == 0, producer.describe()
    sent = producer.of("sent")
    assert len(sent) == len(messages), producer.describe()
    return sent


async def start_consumer(ons: StartScript, namesrv: ServerProcess | str, topic: str, group: str,
                         instance: str, **extra: Any) -> NodeScript:
    return await ons("consume.js", harness_config(
        namesrv, topic, consumerGroup=group, instanceName=instance, **extra), name=instance)


def owned_queues(consumer: NodeScript, topic: str) -> set[int] | None:
    """The queue ids of ``topic`` this consumer owns after its latest rebalance."""
    event = consumer.latest("rebalance", topic=topic)
    if event is None:
        return None
    return {q["queueId"] for q in event["queues"]}


def bodies(events: Iterable[dict[str, Any]]) -> set[str]:
    return {e["body"] for e in events}


def received_all(consumer: NodeScript, expected: set[str]) -> Callable[[], bool]:
    return lambda: expected <= bodies(consumer.received())


def assert_matches_record(got: dict[str, Any], want: MessageExt, topic: str) -> None:
    """An ali-ons received message against the broker's record (read with a raw PULL)."""
    where = f"{got['body']!r} from queue {got['queueId']}@{got['queueOffset']}"
    assert got["topic"] == topic, where
    assert got["msgId"] == want.offset_msg_id, where
    assert got["queueId"] == want.queue_id, where
    assert got["queueOffset"] == want.queue_offset, where
    assert got["commitLogOffset"] == want.commit_log_offset, where
    assert got["tags"] == want.properties.get(MessageConst.PROPERTY_TAGS), where
    assert got["keys"] == want.properties.get(MessageConst.PROPERTY_KEYS), where
    assert got["body"] == want.body.decode(), where
    assert got["storeHost"] == want.store_host, where


async def read_topic(raw: RawBroker, topic: str, subscription: str = "*") -> list[MessageExt]:
    records: list[MessageExt] = []
    for queue_id in range(QUEUES):
        records.extend(await raw.pull_queue(topic, queue_id, subscription=subscription))
    return records


# -- (1) producer -----------------------------------------------------------------------------


async def test_producer_send_results_match_the_stored_messages(
        namesrv: ServerProcess, broker: ServerProcess, ons: StartScript) -> None:
    """ali-ons SEND_MESSAGE_V2 (keys a..l, JSON numbers/booleans in extFields) is stored
    exactly; its send results carry the offset message id and sane queue offsets."""
    topic = "InteropProduce"
    specs = message_specs("p", 12, tags=lambda i: "TagA" if i % 2 == 0 else "TagB")
    # ali-ons zlib-compresses bodies of 4096 bytes or more (sysFlag COMPRESSED).
    specs.append({"tags": "TagA", "keys": ["p-big"], "body": "big body é " * 500})
    async with RawBroker(namesrv.address, broker.address, broker_name(broker)) as raw:
        await raw.create_topic(topic, QUEUES)
        sent = await produce(ons, namesrv, topic, specs)

        for event, spec in zip(sent, specs, strict=True):
            assert event["sendStatus"] == "SEND_OK", event
            assert event["topic"] == topic and event["brokerName"] == broker_name(broker), event
            assert 0 <= event["queueId"] < QUEUES, event
            assert OFFSET_MSG_ID.match(event["msgId"]), event
            store_host, _ = decode_offset_msg_id(event["msgId"])
            assert store_host == broker.address, event
            assert event["keys"] == " ".join(spec["keys"]), event
        # A fresh topic: each queue's offsets are 0, 1, 2, ... in send order.
        for queue_id in range(QUEUES):
            offsets = [e["queueOffset"] for e in sent if e["queueId"] == queue_id]
            assert offsets == list(range(len(offsets))), (queue_id, sent)
        assert len({decode_offset_msg_id(e["msgId"])[1] for e in sent}) == len(sent)

        records = {(m.queue_id, m.queue_offset): m for m in await read_topic(raw, topic)}
        assert len(records) == len(sent)
        for event, spec in zip(sent, specs, strict=True):
            m = records[(event["queueId"], event["queueOffset"])]
            assert m.topic == topic
            assert m.offset_msg_id == event["msgId"]
            assert m.body == spec["body"].encode()
            assert m.properties.get(MessageConst.PROPERTY_TAGS) == spec["tags"]
            assert m.properties.get(MessageConst.PROPERTY_KEYS) == " ".join(spec["keys"])
            assert m.reconsume_times == 0
            assert m.born_host.startswith("127.0.0.1:")
            assert bool(m.sys_flag & MessageSysFlag.COMPRESSED_FLAG) == (len(m.body) >= 4096)


# -- (2) consumer, tag filter -----------------------------------------------------------------


async def test_consumer_receives_everything_and_filters_by_tag(
        namesrv: ServerProcess, broker: ServerProcess, ons: StartScript) -> None:
    """Messages sent by ali-ons and by our own send path reach an ali-ons consumer intact
    (msgId = offset id, ignoring UNIQ_KEY, docs/PROTOCOL.md 9); ``subscribe(topic, 'TagA')``
    gets exactly the TagA ones."""
    topic = "InteropConsume"
    async with RawBroker(namesrv.address, broker.address, broker_name(broker)) as raw:
        await raw.create_topic(topic, QUEUES)
        everything = await start_consumer(ons, namesrv, topic, "GID_INTEROP_ALL", "all")
        await wait_until("the consumer to own all queues",
                         lambda: owned_queues(everything, topic) == set(range(QUEUES)),
                         everything, timeout=WAIT)

        raw_specs = message_specs("raw", 8, tags=lambda i: "TagB" if i % 2 else "TagA")
        for i, spec in enumerate(raw_specs):
            result = await raw.send(topic, spec["body"], tags=spec["tags"], keys=spec["keys"],
                                    queue_id=i % QUEUES)
            assert result.queue_offset >= 0
        # ali-ons picks queues round-robin, so its last four sends (all TagA) end every
        # queue: a TagA consumer that has them has seen past everything else.
        ons_specs = message_specs("ons", 8, tags=lambda i: "TagA" if i >= 4 or i % 2 else "TagB")
        sent = await produce(ons, namesrv, topic, ons_specs)
        assert {e["queueId"] for e in sent[-4:]} == set(range(QUEUES)), sent

        records = {m.body.decode(): m for m in await read_topic(raw, topic)}
        expected = {s["body"] for s in raw_specs + ons_specs}
        assert set(records) == expected

        await wait_until("every message at the '*' consumer", received_all(everything, expected),
                         everything, timeout=WAIT)
        assert await everything.close() == 0, everything.describe()
        got = everything.received()
        assert len(got) == len(expected), "duplicates without any rebalance"
        for event in got:
            assert event["reconsumeTimes"] == 0
            assert_matches_record(event, records[event["body"]], topic)

        tag_a = {body for body, m in records.items()
                 if m.properties.get(MessageConst.PROPERTY_TAGS) == "TagA"}
        # The broker filters by tag hash before ali-ons sees anything (docs/PROTOCOL.md 6.1).
        assert {m.body.decode() for m in await read_topic(raw, topic, "TagA")} == tag_a

        only_a = await start_consumer(ons, namesrv, topic, "GID_INTEROP_TAGA", "taga",
                                      subExpression="TagA")
        await wait_until("every TagA message at the 'TagA' consumer",
                         received_all(only_a, tag_a), only_a, timeout=WAIT)
        assert await only_a.close() == 0, only_a.describe()
        got = only_a.received()
        assert sorted(bodies(got)) == sorted(tag_a) and len(got) == len(tag_a), only_a.describe()
        assert {e["tags"] for e in got} == {"TagA"}


# -- (3) two consumers in one group -----------------------------------------------------------


async def test_two_consumers_in_one_group_split_the_queues(
        namesrv: ServerProcess, broker: ServerProcess, ons: StartScript) -> None:
    """Two ali-ons clients (distinct client ids) allocate the queues averagely over the
    consumer list our broker returns, and together receive every message."""
    topic = "InteropSplit"
    group = "GID_INTEROP_SPLIT"
    async with RawBroker(namesrv.address, broker.address, broker_name(broker)) as raw:
        await raw.create_topic(topic, QUEUES)
        first = await start_consumer(ons, namesrv, topic, group, "c1")
        await wait_until("c1 to own all queues",
                         lambda: owned_queues(first, topic) == set(range(QUEUES)),
                         first, timeout=WAIT)
        second = await start_consumer(ons, namesrv, topic, group, "c2")

        def split() -> bool:
            a, b = owned_queues(first, topic), owned_queues(second, topic)
            return bool(a and b and not a & b and a | b == set(range(QUEUES)))

        await wait_until("c1 and c2 to split the queues", split, first, second, timeout=WAIT)
        allocation = {"c1": owned_queues(first, topic) or set(),
                      "c2": owned_queues(second, topic) or set()}
        # AllocateMessageQueueAveragely over sorted ids 127.0.0.1@c1 < 127.0.0.1@c2.
        assert allocation == {"c1": {0, 1}, "c2": {2, 3}}, allocation
        rebalances_before = len(first.of("rebalance")) + len(second.of("rebalance"))

        specs = message_specs("split", 16, tags=lambda i: "TagA")
        sent = await produce(ons, namesrv, topic, specs)
        expected = {s["body"] for s in specs}
        await wait_until("c1 and c2 together to receive every message",
                         lambda: expected <= bodies(first.received()) | bodies(second.received()),
                         first, second, timeout=WAIT)
        assert await first.close() == 0, first.describe()
        assert await second.close() == 0, second.describe()

        queue_of = {e["body"]: e["queueId"] for e in sent}
        got = {"c1": first.received(), "c2": second.received()}
        for name, events in got.items():
            assert events, f"{name} received nothing"
            assert {queue_of[e["body"]] for e in events} <= allocation[name], (name, events)
        duplicates = bodies(got["c1"]) & bodies(got["c2"])
        rebalanced = len(first.of("rebalance")) + len(second.of("rebalance")) != rebalances_before
        # Duplicates are only legitimate when the allocation moved while consuming.
        assert not duplicates or rebalanced, duplicates


# -- (4) consume failure and retry ------------------------------------------------------------


# Upstream's send-back path puts a message with delayLevel 0 on delay level
# 3 + reconsumeTimes (SendMessageProcessor.asyncConsumerSendMsgBack), 10 s by default:
# shorten the levels so the retry arrives within the test's deadline.
FAST_DELAY_LEVELS = " ".join(["1s"] * 18)


@pytest.fixture
def retry_broker(tmp_path: Path, namesrv: ServerProcess,
                 server_factory: Callable[[ServerProcess], ServerProcess]) -> ServerProcess:
    return server_factory(broker_process(tmp_path, namesrv.address,
                                         conf={"messageDelayLevel": FAST_DELAY_LEVELS}))


async def test_failed_consumption_is_redelivered_with_reconsume_times_1(
        namesrv: ServerProcess, retry_broker: ServerProcess, ons: StartScript) -> None:
    """A listener returning ACTION_RETRY or throwing gets the message again, from
    %RETRY%<group>, with reconsumeTimes 1 and the original topic/tags/keys/body."""
    topic = "InteropRetry"
    group = "GID_INTEROP_RETRY"
    broker = retry_broker
    async with RawBroker(namesrv.address, broker.address, broker_name(broker)) as raw:
        await raw.create_topic(topic, QUEUES)
        consumer = await start_consumer(
            ons, namesrv, topic, group, "retry",
            fail=[{"keys": ["retry-me"], "how": "retry", "times": 1},
                  {"keys": ["throw-me"], "how": "throw", "times": 1}])
        await wait_until("the consumer to own all queues",
                         lambda: owned_queues(consumer, topic) == set(range(QUEUES)),
                         consumer, timeout=WAIT)
        specs: list[dict[str, Any]] = [
            {"tags": "TagA", "keys": ["plain-1"], "body": "plain one"},
            {"tags": "TagA", "keys": ["retry-me", "r"], "body": "fails once by ACTION_RETRY"},
            {"tags": "TagB", "keys": ["throw-me"], "body": "fails once by throwing"},
            {"tags": "TagB", "keys": ["plain-2"], "body": "plain two"},
        ]
        sent = await produce(ons, namesrv, topic, specs)
        original_id = {e["body"]: e["msgId"] for e in sent}
        failing = {"fails once by ACTION_RETRY", "fails once by throwing"}

        def redelivered() -> bool:
            again = {e["body"] for e in consumer.received() if e["reconsumeTimes"] >= 1}
            return failing <= again and received_all(consumer, set(original_id))()

        await wait_until("the failed messages to come back", redelivered, consumer,
                         timeout=WAIT)
        assert await consumer.close() == 0, consumer.describe()

        by_body: dict[str, list[dict[str, Any]]] = {}
        for e in consumer.received():
            by_body.setdefault(e["body"], []).append(e)
        for spec in specs:
            deliveries = by_body[spec["body"]]
            first = deliveries[0]
            assert first["reconsumeTimes"] == 0 and first["msgId"] == original_id[spec["body"]]
            if spec["body"] not in failing:
                assert [d["action"] for d in deliveries] == ["ok"], deliveries
                continue
            assert first["action"] in ("retry", "throw"), deliveries
            again = deliveries[1]
            assert again["reconsumeTimes"] == 1 and again["action"] == "ok", deliveries
            # ali-ons puts the original topic back (utils.resetRetryTopic) from RETRY_TOPIC.
            assert again["topic"] == topic, again
            assert again["tags"] == spec["tags"] and again["keys"] == " ".join(spec["keys"])
            assert again["properties"].get(MessageConst.PROPERTY_RETRY_TOPIC) == topic
            assert again["properties"].get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID) == first["msgId"]
            assert again["msgId"] != first["msgId"], "a retry is a new message in the store"

        # The broker takes ali-ons's CONSUMER_SEND_MSG_BACK (36): no refusal, so ali-ons never
        # falls back to producing the message itself, and each redelivery went through
        # SCHEDULE_TOPIC_XXXX at level 3 + reconsumeTimes into %RETRY%<group> (upstream
        # SendMessageProcessor.asyncConsumerSendMsgBack), which leaves REAL_TOPIC behind.
        send_back_refused = [e for e in consumer.of("error")
                             if e.get("code") == ResponseCode.REQUEST_CODE_NOT_SUPPORTED]
        assert send_back_refused == [], consumer.describe()
        for body in failing:
            again = by_body[body][1]
            assert again["properties"].get(MessageConst.PROPERTY_REAL_TOPIC) == f"%RETRY%{group}", again


# -- (5) restart resumes from the committed offset --------------------------------------------


async def test_restarted_consumer_resumes_from_its_committed_offset(
        namesrv: ServerProcess, broker: ServerProcess, ons: StartScript) -> None:
    """Offsets ali-ons commits (UPDATE_CONSUMER_OFFSET, sent without the oneway bit) are
    kept by the broker and served back (QUERY_CONSUMER_OFFSET): a new client in the group
    starts where the old one stopped, even with CONSUME_FROM_FIRST_OFFSET."""
    topic = "InteropResume"
    group = "GID_INTEROP_RESUME"
    async with RawBroker(namesrv.address, broker.address, broker_name(broker)) as raw:
        await raw.create_topic(topic, QUEUES)
        before = message_specs("before", 8, tags=lambda i: "TagA")
        await produce(ons, namesrv, topic, before, name="producer-1")
        first = await start_consumer(ons, namesrv, topic, group, "first")
        await wait_until("the first consumer to receive everything",
                         received_all(first, bodies(before)), first, timeout=WAIT)
        assert await first.close() == 0, first.describe()

        max_offsets = {q: await raw.max_offset(topic, q) for q in range(QUEUES)}
        assert sum(max_offsets.values()) == len(before)

        async def committed() -> dict[int, int | None]:
            return {q: await raw.consumer_offset(group, topic, q) for q in range(QUEUES)}

        # The close persisted the offsets (UPDATE_CONSUMER_OFFSET is fire-and-forget for
        # ali-ons): poll the broker until it has them all.
        offsets = await poll_until("the broker to hold the committed offsets", committed,
                                   lambda got: got == max_offsets, timeout=WAIT)
        assert offsets == max_offsets

        after = message_specs("after", 8, tags=lambda i: "TagB")
        await produce(ons, namesrv, topic, after, name="producer-2")
        second = await start_consumer(ons, namesrv, topic, group, "second")
        await wait_until("the restarted consumer to receive the new messages",
                         received_all(second, bodies(after)), second, timeout=WAIT)
        assert await second.close() == 0, second.describe()
        replayed = bodies(second.received()) & bodies(before)
        assert not replayed, f"replayed from the start: {sorted(replayed)}"
        assert len(second.received()) == len(after)


async def poll_until(what: str, probe: Callable[[], Any], done: Callable[[Any], bool], *,
                     timeout: float) -> Any:
    """Ask the broker ``probe()`` again (each answer is a round trip) until ``done``."""
    last: Any = None
    try:
        async with asyncio.timeout(timeout):
            while True:
                last = await probe()
                if done(last):
                    return last
                await asyncio.sleep(0.2)  # pacing between two round trips, not a synchronization
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}; last answer {last!r}") from None


# -- (6) the conversation on the wire ---------------------------------------------------------


PULL_RESPONSE_FIELDS = ("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId")
SEND_RESPONSE_FIELDS = ("msgId", "queueId", "queueOffset",
                        MessageConst.PROPERTY_MSG_REGION, MessageConst.PROPERTY_TRACE_SWITCH)
LEGACY_BROKER_ADDRS = re.compile(rb'"brokerAddrs":\{0:"')


def strict_json(raw: bytes | bytearray | memoryview) -> Any:
    """Parse like JavaScript's ``JSON.parse`` (no NaN/Infinity, UTF-8 only)."""
    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON constant {token}")
    return json.loads(bytes(raw).decode("utf-8"), parse_constant=refuse)


async def test_wire_conversation_has_the_shapes_ali_ons_relies_on(
        namesrv: ServerProcess, broker: ServerProcess, ons: StartScript) -> None:
    """Everything ali-ons exchanges with our servers, recorded by taps in front of both,
    holds the facts of docs/PROTOCOL.md 9 that ali-ons would not report by itself."""
    topic = "InteropWire"
    group = "GID_INTEROP_WIRE"
    async with RawBroker(namesrv.address, broker.address, broker_name(broker)) as raw:
        await raw.create_topic(topic, QUEUES)
    async with WireTap("broker", broker.address) as btap, \
            WireTap("namesrv", namesrv.address,
                    rewrite_routes={broker.address: btap.address}) as ntap:
        consumer = await start_consumer(ons, ntap.address, topic, group, "wire",
                                        fail={"keys": ["retry-me"], "how": "retry"})
        await wait_until("the consumer to own all queues",
                         lambda: owned_queues(consumer, topic) == set(range(QUEUES)),
                         consumer, timeout=WAIT)
        specs: list[dict[str, Any]] = [
            {"tags": "TagA", "keys": ["w-1"], "body": "small"},
            {"tags": "TagB", "keys": ["w-2"], "body": "compressed by ali-ons " + "x" * 5000},
            {"tags": "TagA", "keys": ["retry-me"], "body": "retried"},
            {"tags": None, "keys": ["w-4"], "body": "no tags"},
        ]
        await produce(ons, ntap.address, topic, specs)
        await wait_until("every message, and the retried one again",
                         lambda: bodies(specs) <= bodies(consumer.received())
                         and any(e["reconsumeTimes"] == 1 for e in consumer.received()),
                         consumer, timeout=WAIT)
        assert await consumer.close() == 0, consumer.describe()

        def answered() -> bool:
            return all(resp is not None for req, resp in btap.exchanges()
                       if req.command is not None and req.command.code != RequestCode.PULL_MESSAGE)

        # Answers to the last requests may still be on their way when the client has gone.
        await btap.wait_until("an answer to every broker request but parked pulls", answered,
                              timeout=WAIT)

    conversation = f"\n--- namesrv tap:\n{ntap.dump()}\n--- broker tap:\n{btap.dump()}"
    frames = ntap.frames + btap.frames
    assert all(f.command is not None for f in frames), conversation

    # What ali-ons sends: JSON headers, version 121, language JAVA, never the oneway bit.
    requests = [f for f in frames if f.direction == TO_SERVER]
    assert requests, conversation
    for f in requests:
        assert f.serialize_type == 0 and not f.is_response, f
        header = strict_json(f.header)
        assert header["version"] == 121 and header["language"] == "JAVA", f
        assert f.command is not None and f.command.flag == 0, f

    # Numbers and booleans inside extFields arrive as JSON numbers/booleans; the send
    # path coerces them (docs/PROTOCOL.md 9).
    send_headers = [strict_json(f.header)["extFields"] for f in requests
                    if f.command is not None and f.command.code == RequestCode.SEND_MESSAGE_V2]
    assert send_headers and all(isinstance(h["e"], int) and isinstance(h["k"], bool)
                                for h in send_headers), send_headers

    # What we answer: JSON (ali-ons reads the header length without masking the type byte),
    # strict JSON headers, the request's opaque with the response bit.
    exchanges = ntap.exchanges() + btap.exchanges()
    for request, response in exchanges:
        assert request.command is not None
        if response is None:
            assert request.command.code == RequestCode.PULL_MESSAGE, (request, conversation)
            continue
        assert response.serialize_type == 0, response
        header = strict_json(response.header)
        assert header["flag"] & 1 and header["opaque"] == request.command.opaque, response
        # Stamped like the 4.9.7 servers' answers (vectors: "language":"JAVA", "version":407).
        assert header.get("language") == "JAVA" and isinstance(header.get("version"), int), header
        assert all(isinstance(v, str) for v in (header.get("extFields") or {}).values()), response

    def answers(code: int) -> list[RemotingCommand]:
        found = [resp.command for req, resp in exchanges
                 if req.command is not None and req.command.code == code
                 and resp is not None and resp.command is not None]
        assert found, f"no answered request with code {code}{conversation}"
        return found

    # Routes in the legacy fastjson form that the Java nameserver gives version-121 clients.
    routes = [r for r in answers(RequestCode.GET_ROUTEINFO_BY_TOPIC) if r.code == 0]
    assert routes and all(r.body and LEGACY_BROKER_ADDRS.search(r.body) for r in routes), [
        r.body for r in routes]

    # Every pull answer carries the four offsets ali-ons reads, whatever its status.
    pulls = answers(RequestCode.PULL_MESSAGE)
    assert {p.code for p in pulls} <= {0, 19, 20, 21} and any(p.code == 0 for p in pulls)
    for p in pulls:
        missing = [k for k in PULL_RESPONSE_FIELDS if k not in (p.ext_fields or {})]
        assert not missing, (p.code, p.ext_fields)

    sends = answers(RequestCode.SEND_MESSAGE_V2)
    assert len(sends) >= len(specs) and all(s.code == 0 for s in sends)
    for s in sends:
        missing = [k for k in SEND_RESPONSE_FIELDS if k not in (s.ext_fields or {})]
        assert not missing, s.ext_fields

    # ali-ons "oneway" offset commits arrive with flag 0, so they are answered like upstream.
    assert all(r.code == 0 for r in answers(RequestCode.UPDATE_CONSUMER_OFFSET))
    assert all(r.code == 0 for r in answers(RequestCode.HEART_BEAT))
    assert all(r.code == 0 for r in answers(RequestCode.UNREGISTER_CLIENT))
    id_lists = answers(RequestCode.GET_CONSUMER_LIST_BY_GROUP)
    assert all(r.code == 0 and r.body and "127.0.0.1@wire" in strict_json(r.body)["consumerIdList"]
               for r in id_lists)

    # The body ali-ons compressed (4096 bytes or more) and the message without tags,
    # whose TAGS ali-ons writes as the text "null".
    received = {e["body"]: e for e in consumer.received()}
    assert received[specs[1]["body"]]["sysFlag"] & MessageSysFlag.COMPRESSED_FLAG, "bit kept"
    assert received["no tags"]["tags"] == "null"
