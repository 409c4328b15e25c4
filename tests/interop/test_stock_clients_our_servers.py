"""Stock Apache RocketMQ 4.9.7 Java clients against OUR nameserver + broker (issue #17, part 1).

Every scenario runs in both header serialize types (``-Drocketmq.serialize.type=JSON`` /
``ROCKETMQ``) against one nameserver + broker pair shared by the module (every scenario has its
own topics and groups). The messages are the driver's deterministic ones (``Messages.java``,
mirrored by :class:`tests.interop.checks.Spec`), so every body, key, tag and user property is
checked end to end, and counts are exact wherever the scenario allows no redelivery.

The scenarios' driver runs are :class:`tests.interop.flows.Flows` submitted at module setup
(three at a time); each test waits for its own flow and checks the result. Our broker runs with
every delay level at 1 s and transaction checks after 1 s (``FAST_BROKER_CONF``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from aiorocketmq.client import ClientConfig, PullConsumer
from tests.interop.checks import (
    FAST_BROKER_CONF,
    Spec,
    check_orderly,
    check_received,
    check_sent,
    counts,
)
from tests.interop.flows import Flows
from tests.interop.stock import DriverResult, JavaEnv, received_body
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

TIMEOUT_MS = 30000
SERIALIZE_TYPES = ["JSON", "ROCKETMQ"]
SEND_MODES = ["sync", "async", "oneway", "batch"]
REFUSED = [0, 1, 2]  # keys k-0..k-2 in the retry scenarios


# -- specs: one per (scenario, serialize type) -----------------------------------------------


# sync / async: bodies over 4 KiB (the stock producer compresses them); non-ASCII user properties
SEND_BODY_SIZES = {"sync": 5000, "async": 6000, "oneway": 150, "batch": 0}
SEND_PROPS = {"color": "blue", "größe": "ü€✓ 7"}


def send_spec(mode: str, st: str) -> Spec:
    return Spec(f"Send{mode}{st}", 20, body_size=SEND_BODY_SIZES[mode], props=SEND_PROPS)


def shared_spec(st: str) -> Spec:
    return Spec(f"Shared{st}", 24, body_size=300)


def orderly_spec(st: str) -> Spec:
    return Spec(f"Orderly{st}", 32)


def delay_spec(st: str) -> Spec:
    return Spec(f"Delay{st}", 8)


def tx_spec(st: str) -> Spec:
    return Spec(f"Tx{st}", 12)


def retry_spec(kind: str, st: str) -> Spec:
    return Spec(f"Retry{kind}{st}", 8)


def request_spec(st: str) -> Spec:
    return Spec(f"Request{st}", 6)


# -- flows -------------------------------------------------------------------------------------


def send_flow(mode: str, st: str) -> Any:
    def flow(f: Flows) -> tuple[DriverResult, DriverResult]:
        spec = send_spec(mode, st)
        extra: dict[str, Any] = {"batch_size": 5} if mode == "batch" else {}
        sent = f.run(f"produce-{mode}", serialize_type=st, group=f"PG-{mode}-{st}", timeout_ms=TIMEOUT_MS,
                     **spec.driver_options(), **extra)
        received = f.run("consume-push", serialize_type=st, topic=spec.topic, group=f"CG-{mode}-{st}",
                         count=spec.count, linger_ms=500, timeout_ms=TIMEOUT_MS)
        return sent, received
    return flow


def orderly_flow(st: str) -> Any:
    def flow(f: Flows) -> tuple[DriverResult, DriverResult]:
        spec = orderly_spec(st)
        sent = f.run("produce-orderly", serialize_type=st, group=f"PG-ord-{st}", order_keys=4,
                     timeout_ms=TIMEOUT_MS, **spec.driver_options())
        received = f.run("consume-orderly", serialize_type=st, topic=spec.topic, group=f"CG-ord-{st}",
                         count=spec.count, linger_ms=300, timeout_ms=TIMEOUT_MS)
        return sent, received
    return flow


def delay_flow(st: str) -> Any:
    def flow(f: Flows) -> tuple[DriverResult, DriverResult]:
        spec = delay_spec(st)
        sent = f.run("produce-delay", serialize_type=st, group=f"PG-delay-{st}", delay_level=3,
                     timeout_ms=TIMEOUT_MS, **spec.driver_options())
        received = f.run("consume-push", serialize_type=st, topic=spec.topic, group=f"CG-delay-{st}",
                         count=spec.count, linger_ms=300, timeout_ms=TIMEOUT_MS)
        return sent, received
    return flow


def tx_flow(st: str) -> Any:
    def flow(f: Flows) -> tuple[DriverResult, DriverResult]:
        spec = tx_spec(st)
        committed = [i for i in spec.indexes if i % 3 != 1]
        # returns once every UNKNOW transaction was checked back
        sent = f.run("transaction", serialize_type=st, group=f"PG-tx-{st}",
                     tx_states=["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"], check_result="COMMIT_MESSAGE",
                     timeout_ms=TIMEOUT_MS, **spec.driver_options())
        received = f.run("consume-push", serialize_type=st, topic=spec.topic, group=f"CG-tx-{st}",
                         count=len(committed), linger_ms=1000, timeout_ms=TIMEOUT_MS)
        return sent, received
    return flow


def retry_flow(kind: str, st: str) -> Any:
    def flow(f: Flows) -> tuple[DriverResult, DriverResult, DriverResult]:
        spec = retry_spec(kind, st)
        group = f"CG-retry-{kind}-{st}"
        sent = f.run("produce-sync", serialize_type=st, group=f"PG-retry-{kind}-{st}", timeout_ms=TIMEOUT_MS,
                     **spec.driver_options())
        received = f.run("consume-orderly" if kind == "ord" else "consume-push", serialize_type=st,
                         topic=spec.topic, group=group, count=spec.count - len(REFUSED),
                         expect_deliveries=spec.count + 2 * len(REFUSED), reconsume_pattern="k-[0-2]",
                         max_reconsume_times=2, suspend_ms=100, linger_ms=1500, timeout_ms=TIMEOUT_MS)
        dlq = f.run("pull-consumer", serialize_type=st, topic=f"%DLQ%{group}", group=f"CG-dlqreader-{kind}-{st}",
                    count=len(REFUSED), timeout_ms=TIMEOUT_MS)
        return sent, received, dlq
    return flow


def shared_flow(st: str) -> Any:
    def flow(f: Flows) -> DriverResult:
        spec = shared_spec(st)
        return f.run("produce-sync", serialize_type=st, group=f"PG-shared-{st}", timeout_ms=TIMEOUT_MS,
                     **spec.driver_options())
    return flow


def after_shared(st: str, *runs: tuple[str, dict[str, Any]]) -> Any:
    """Drivers started together once the shared topic is produced; their results in order."""
    def flow(f: Flows) -> list[DriverResult]:
        f.result(f"shared-{st}")
        procs = [f.start(scenario, serialize_type=st, topic=shared_spec(st).topic, timeout_ms=TIMEOUT_MS, **opts)
                 for scenario, opts in runs]
        return [p.wait(90).check() for p in procs]
    return flow


def assign_flow(st: str) -> Any:
    """The group's offsets are committed at the queue ends first. assign() starts a pull task
    per queue at once, from the group's offset (0 for a new group whose queues start at 0, as
    the stock broker answers), and in stock 4.9.7 a task whose pull returns while seek() runs
    can still hand its messages over after the seek (DefaultLitePullConsumerImpl.PullTaskImpl
    checks isCancelled() before taking the queue lock): seen once in a CI run. From the ends,
    those first pulls find nothing, and what is delivered below the committed offsets is the
    seek's doing."""
    def flow(f: Flows) -> DriverResult:
        sent = check_sent(f.result(f"shared-{st}"), shared_spec(st))
        want = sum(1 for e in sent.values() if e["queueOffset"] >= 2)
        commit_offsets(f, f"CG-assign-{st}", shared_spec(st).topic, queue_ends(sent))
        return f.run("lite-pull-assign-seek", serialize_type=st, topic=shared_spec(st).topic,
                     group=f"CG-assign-{st}", seek=2, commit=True, count=want, linger_ms=500, timeout_ms=TIMEOUT_MS)
    return flow


def from_ts_spec(st: str) -> Spec:
    return Spec(f"FromTs{st}", 18, tags=("TagA", "TagB", "TagC"))


FROM_TS_SECOND_BATCH = 9


def from_ts_flow(st: str) -> Any:
    """Two batches a second boundary apart; a new group consuming from the boundary
    (CONSUME_FROM_TIMESTAMP, seconds as the stock client has them) with "TagA || TagC"
    (expected: see the test)."""
    def flow(f: Flows) -> tuple[list[DriverResult], int, DriverResult]:
        spec = from_ts_spec(st)
        opts = spec.driver_options()
        opts.pop("count"), opts.pop("start")
        first = f.run("produce-sync", serialize_type=st, group=f"PG-fromts-{st}", count=FROM_TS_SECOND_BATCH,
                      start=0, timeout_ms=TIMEOUT_MS, **opts)
        boundary = (time.time_ns() // 1_000_000 // 1000 + 1) * 1000
        time.sleep(max(0.0, boundary / 1000 - time.time()) + 0.3)
        second = f.run("produce-sync", serialize_type=st, group=f"PG-fromts-{st}",
                       count=spec.count - FROM_TS_SECOND_BATCH, start=FROM_TS_SECOND_BATCH, timeout_ms=TIMEOUT_MS,
                       **opts)
        want = [i for i in spec.indexes if spec.tag(i) in ("TagA", "TagC")]
        received = f.run("consume-push", serialize_type=st, topic=spec.topic, group=f"CG-fromts-{st}",
                         sub="TagA || TagC", **{"from": "timestamp"}, from_timestamp=boundary, count=len(want),
                         linger_ms=1000, timeout_ms=TIMEOUT_MS)
        return [first, second], boundary, received
    return flow


def request_flow(st: str) -> Any:
    def flow(f: Flows) -> DriverResult:
        return f.run("request-reply", serialize_type=st, group=f"CG-rr-{st}", request_timeout_ms=10000,
                     timeout_ms=TIMEOUT_MS, **request_spec(st).driver_options())
    return flow


@pytest.fixture(scope="module")
def flows(stock_java: JavaEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Flows, ServerProcess]]:
    """Our mqnamesrv + mqbroker (fast delay levels and transaction checks) and every scenario
    of the module started on it, in the order the tests will want them."""
    tmp = tmp_path_factory.mktemp("ours")
    with namesrv_and_broker(tmp, conf=FAST_BROKER_CONF) as (ns, br):
        f = Flows(tmp, ns.address)
        try:
            for st in SERIALIZE_TYPES:
                f.submit(f"shared-{st}", shared_flow(st))
            for st in SERIALIZE_TYPES:
                for mode in SEND_MODES:
                    f.submit(f"send-{mode}-{st}", send_flow(mode, st))
            for st in SERIALIZE_TYPES:
                f.submit(f"orderly-{st}", orderly_flow(st))
                f.submit(f"delay-{st}", delay_flow(st))
                f.submit(f"tx-{st}", tx_flow(st))
                f.submit(f"retry-conc-{st}", retry_flow("conc", st))
                f.submit(f"retry-ord-{st}", retry_flow("ord", st))
            for st in SERIALIZE_TYPES:
                f.submit(f"bcast-{st}", after_shared(st, *[("consume-broadcast", {
                    "group": f"CG-bcast-{st}", "instance": f"bcast{n}", "count": 24, "linger_ms": 500})
                    for n in range(2)]))
                f.submit(f"lite-{st}", after_shared(st, ("lite-pull-subscribe", {
                    "group": f"CG-lite-{st}", "count": 24, "linger_ms": 500})))
                f.submit(f"assign-{st}", assign_flow(st))
                f.submit(f"pull-{st}", after_shared(st, ("pull-consumer", {
                    "group": f"CG-pull-{st}", "sub": "TagB", "max_nums": 5, "count": len(shared_spec(st).with_tag("TagB"))})))
                f.submit(f"request-{st}", request_flow(st))
                f.submit(f"fromts-{st}", from_ts_flow(st))
            yield f, br
        finally:
            f.close()


def shared_sent(f: Flows, st: str) -> dict[str, Any]:
    return check_sent(f.result(f"shared-{st}"), shared_spec(st))


# -- producers: every send mode, consumed by a stock push consumer -------------------------


@pytest.mark.parametrize("st", SERIALIZE_TYPES)
@pytest.mark.parametrize("mode", SEND_MODES)
def test_send_modes(flows: tuple[Flows, ServerProcess], st: str, mode: str) -> None:
    """DefaultMQProducer send / send(callback) / sendOneway / send(batch of 5), then a
    DefaultMQPushConsumer (concurrently) gets each message exactly once, unaltered, with the
    send's msgId, queue and offset."""
    f, br = flows
    spec = send_spec(mode, st)
    sent_result, received = f.result(f"send-{mode}-{st}")
    sent = check_sent(sent_result, spec, status=None if mode == "oneway" else "SEND_OK")
    got = check_received(received.of("received"), spec, sent=None if mode == "oneway" else sent)
    for i, (e,) in got.items():
        assert e["msgId"] == sent[spec.key(i)]["msgId"]
        assert e["reconsumeTimes"] == 0 and e["consumeResult"] == "CONSUME_SUCCESS"
        assert e["storeHost"] == f"/{br.address}" and e["brokerName"] == "broker-a"
        assert e["sysFlag"] & 1 == (1 if spec.body_size > 4096 else 0), e  # COMPRESSED_FLAG
    if mode == "batch":
        batches = {e["batchMsgId"] for e in sent_result.of("sent")}
        assert len(batches) == 4  # 20 messages in batches of 5, one queue each
        for e in sent_result.of("sent"):
            assert e["msgId"] in e["batchMsgId"].split(",")


@pytest.mark.parametrize("st", SERIALIZE_TYPES)
def test_orderly(flows: tuple[Flows, ServerProcess], st: str) -> None:
    """send(msg, selector, orderKey) puts each order key on one queue; a MessageListenerOrderly
    consumer gets each key's messages in send order, each once."""
    f, _ = flows
    spec = orderly_spec(st)
    sent_result, received = f.result(f"orderly-{st}")
    sends = sent_result.of("sent")
    order_of = {e["index"]: e["orderKey"] for e in sends}
    queue_of_key: dict[str, set[int]] = {}
    for e in sends:
        queue_of_key.setdefault(e["orderKey"], set()).add(e["queueId"])
    assert all(len(q) == 1 for q in queue_of_key.values()), queue_of_key
    events = received.of("received")
    for e in events:  # the orderKey user property travels too
        assert e["userProperties"].pop("orderKey") == order_of[e["index"]]
    check_received(events, spec, sent=check_sent(sent_result, spec))
    check_orderly(events, order_of)


@pytest.mark.parametrize("st", SERIALIZE_TYPES)
def test_delay(flows: tuple[Flows, ServerProcess], st: str) -> None:
    """setDelayTimeLevel(3): held in SCHEDULE_TOPIC_XXXX for the level's 1 s, then delivered to
    the real topic and queue, unaltered."""
    f, _ = flows
    spec = delay_spec(st)
    sent_result, received = f.result(f"delay-{st}")
    sent = check_sent(sent_result, spec)
    got = check_received(received.of("received"), spec)
    for i, (e,) in got.items():
        assert e["msgId"] == sent[spec.key(i)]["msgId"]
        assert e["storeTimestamp"] - e["bornTimestamp"] >= 900, e  # held for the 1 s level
        assert e["properties"]["REAL_TOPIC"] == spec.topic, e
        assert e["properties"]["REAL_QID"] == str(e["queueId"]), e
        # stock ScheduleMessageService takes the properties string before clearing DELAY
        assert e["properties"]["DELAY"] == "3", e


@pytest.mark.parametrize("st", SERIALIZE_TYPES)
def test_transaction(flows: tuple[Flows, ServerProcess], st: str) -> None:
    """TransactionMQProducer: COMMIT_MESSAGE is delivered, ROLLBACK_MESSAGE never is, UNKNOW is
    checked back (checkLocalTransaction gets the half message, unaltered) and committed then."""
    f, _ = flows
    spec = tx_spec(st)
    committed = [i for i in spec.indexes if i % 3 != 1]
    unknown = [i for i in spec.indexes if i % 3 == 2]
    sent_result, received = f.result(f"tx-{st}")
    sent = check_sent(sent_result, spec, offset_msg_id=False)
    for e in sent_result.of("sent"):
        assert e["localState"] == ["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"][e["index"] % 3]
    events = received.of("received")
    checks = sent_result.of("check")
    for e in events + checks:
        # the check service re-puts a half message with TRANSACTION_CHECK_TIMES (a user
        # property to the stock client: it is not in 4.9.7's MessageConst.STRING_HASH_SET)
        times = e["userProperties"].pop("TRANSACTION_CHECK_TIMES", None)
        assert (times is not None and int(times) >= 1) == (e["index"] in unknown), e
    got = check_received(events, spec, indexes=committed)
    for i, (e,) in got.items():
        assert e["msgId"] == sent[spec.key(i)]["msgId"]
        assert e["properties"]["TRAN_MSG"] == "true"
        assert e["properties"]["PGROUP"] == f"PG-tx-{st}"
    assert set(counts(checks)) == set(unknown), sent_result.describe()
    check_received(checks, spec, indexes=unknown, exact=False)
    for e in checks:  # a plain MessageExt: msgId is the half message's offset id
        assert e["transactionId"] == e["properties"]["UNIQ_KEY"] == sent[spec.key(e["index"])]["msgId"], e
        assert e["msgId"] == e["offsetMsgId"] or e["offsetMsgId"] is None, e


@pytest.mark.parametrize("st", SERIALIZE_TYPES)
@pytest.mark.parametrize("kind", ["conc", "ord"], ids=["concurrently", "orderly"])
def test_retry_then_dlq(flows: tuple[Flows, ServerProcess], st: str, kind: str) -> None:
    """Keys k-0..k-2 are always refused (RECONSUME_LATER / SUSPEND_CURRENT_QUEUE_A_MOMENT) with
    maxReconsumeTimes 2: three deliveries each (reconsumeTimes 0, 1, 2; a concurrent consumer's
    redeliveries come back through %RETRY%<group>), then %DLQ%<group> holds them, unaltered;
    the other keys are delivered once."""
    f, _ = flows
    spec = retry_spec(kind, st)
    group = f"CG-retry-{kind}-{st}"
    sent_result, received, dlq = f.result(f"retry-{kind}-{st}")
    sent = check_sent(sent_result, spec)
    got = check_received(received.of("received"), spec, exact=False, sent=sent)
    for i, evs in got.items():
        if i in REFUSED:
            assert [e["reconsumeTimes"] for e in evs] == [0, 1, 2], evs
            assert {e["consumeResult"] for e in evs} == {
                "SUSPEND_CURRENT_QUEUE_A_MOMENT" if kind == "ord" else "RECONSUME_LATER"}
            if kind == "conc":
                for e in evs[1:]:  # redelivered from the retry topic, original topic restored
                    assert e["properties"]["RETRY_TOPIC"] == spec.topic, e
        else:
            assert [e["reconsumeTimes"] for e in evs] == [0], evs
    dead = check_received(dlq.of("received"), spec, indexes=REFUSED, topic=f"%DLQ%{group}")
    for i, (e,) in dead.items():
        assert e["msgId"] == sent[spec.key(i)]["msgId"], e
        assert e["properties"]["RETRY_TOPIC"] == spec.topic, e


# -- consumers of the shared topic ---------------------------------------------------------


@pytest.mark.parametrize("st", SERIALIZE_TYPES)
def test_broadcasting(flows: tuple[Flows, ServerProcess], st: str) -> None:
    """Two BROADCASTING consumers of one group each get every message once."""
    f, _ = flows
    sent = shared_sent(f, st)
    for result in f.result(f"bcast-{st}"):
        check_received(result.of("received"), shared_spec(st), sent=sent)


@pytest.mark.parametrize("st", SERIALIZE_TYPES)
def test_lite_pull_subscribe(flows: tuple[Flows, ServerProcess], st: str) -> None:
    f, _ = flows
    sent = shared_sent(f, st)
    (result,) = f.result(f"lite-{st}")
    check_received(result.of("received"), shared_spec(st), sent=sent)
    # commitSync stored the group's offsets on our broker: each queue's end
    assert stored_offsets(f, f"CG-lite-{st}", shared_spec(st).topic) == queue_ends(sent)


@pytest.mark.parametrize("st", SERIALIZE_TYPES)
def test_lite_pull_assign_seek(flows: tuple[Flows, ServerProcess], st: str) -> None:
    """assign(all queues) + seek(mq, 2), the group committed at the ends: exactly the messages at
    queue offsets >= 2."""
    f, _ = flows
    spec = shared_spec(st)
    sent = shared_sent(f, st)
    want = [e["index"] for e in sent.values() if e["queueOffset"] >= 2]
    assert 0 < len(want) < spec.count
    result = f.result(f"assign-{st}")
    queues = result.of("assigned")[0]["queues"]
    assert sorted(q["queueId"] for q in queues) == sorted({e["queueId"] for e in sent.values()})
    check_received(result.of("received"), spec, indexes=want, sent=sent)
    # commitSync after reading to the ends: the ends (the seek rewound only the client's offsets)
    assert stored_offsets(f, f"CG-assign-{st}", spec.topic) == queue_ends(sent)


def queue_ends(sent: dict[str, Any]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for e in sent.values():
        ends[e["queueId"]] = max(ends.get(e["queueId"], 0), e["queueOffset"] + 1)
    return ends


def commit_offsets(f: Flows, group: str, topic: str, offsets: dict[int, int]) -> None:
    """UPDATE_CONSUMER_OFFSET (two-way) of each queue of ``offsets`` on our broker."""
    async def commit() -> None:
        cfg = ClientConfig(namesrv_addr=f.namesrv, client_ip="127.0.0.1")
        async with PullConsumer(group, config=cfg) as c:
            for mq in await c.fetch_subscribe_message_queues(topic):
                if mq.queue_id in offsets:
                    await c.offset_store.update_consume_offset_to_broker(
                        mq, offsets[mq.queue_id], oneway=False)
    asyncio.run(commit())
    assert stored_offsets(f, group, topic) == offsets


def stored_offsets(f: Flows, group: str, topic: str) -> dict[int, int]:
    """QUERY_CONSUMER_OFFSET of every queue of ``topic`` on our broker (our client asks)."""
    async def query() -> dict[int, int]:
        cfg = ClientConfig(namesrv_addr=f.namesrv, client_ip="127.0.0.1")
        async with PullConsumer(group, config=cfg) as c:
            return {mq.queue_id: await c.fetch_consume_offset(mq, from_store=True)
                    for mq in await c.fetch_subscribe_message_queues(topic)}
    return asyncio.run(query())


@pytest.mark.parametrize("st", SERIALIZE_TYPES)
def test_pull_consumer(flows: tuple[Flows, ServerProcess], st: str) -> None:
    """DefaultMQPullConsumer.pull(mq, "TagB", offset, 5) from offset 0 on every queue: exactly
    the TagB messages (broker tag-hash filter, client tag check), with each queue's offsets."""
    f, _ = flows
    spec = shared_spec(st)
    sent = shared_sent(f, st)
    (result,) = f.result(f"pull-{st}")
    check_received(result.of("received"), spec, indexes=spec.with_tag("TagB"), sent=sent)
    per_queue: dict[int, int] = {}
    for e in sent.values():
        per_queue[e["queueId"]] = per_queue.get(e["queueId"], 0) + 1
    for p in result.of("pull"):
        if p["status"] == "FOUND":
            assert (p["minOffset"], p["maxOffset"]) == (0, per_queue[p["queueId"]]), p


@pytest.mark.parametrize("st", SERIALIZE_TYPES)
def test_request_reply(flows: tuple[Flows, ServerProcess], st: str) -> None:
    """DefaultMQProducer.request(): the replier's MessageUtil.createReplyMessage answer comes
    back through our broker's PUSH_REPLY_MESSAGE_TO_CLIENT, one reply per request."""
    f, _ = flows
    spec = request_spec(st)
    result = f.result(f"request-{st}")
    check_received([{**e, "event": "received"} for e in result.of("replied")], spec, exact=False)
    replies = result.of("reply")
    assert [e["requestIndex"] for e in replies] == list(spec.indexes)
    for e in replies:
        i = e["requestIndex"]
        assert received_body(e) == b"reply:" + spec.body(i), e
        assert e["properties"]["CORRELATION_ID"], e
        assert e["properties"]["MSG_TYPE"] == "reply", e
    assert result.done is not None and result.done["replies"] == spec.count


@pytest.mark.parametrize("st", SERIALIZE_TYPES)
def test_consume_from_timestamp_with_tag_expression(flows: tuple[Flows, ServerProcess], st: str) -> None:
    """"TagA || TagC" (broker tag-code filter, client tag check) leaves out TagB. And a stock
    4.9.7 quirk our broker keeps: a new group's QUERY_CONSUMER_OFFSET on a queue whose offset 0
    is still in memory answers 0 (ConsumerManageProcessor: minOffset <= 0 and not
    checkInDiskByConsumeOffset), so CONSUME_FROM_TIMESTAMP never gets to search: the first batch,
    from before the timestamp, is consumed too (a stock broker does the same)."""
    f, _ = flows
    spec = from_ts_spec(st)
    batches, _boundary, received = f.result(f"fromts-{st}")
    sent: dict[str, Any] = {}
    for b in batches:
        sent.update({e["key"]: e for e in b.of("sent")})
    assert sorted(e["index"] for e in sent.values()) == list(spec.indexes)
    want = [i for i in spec.indexes if spec.tag(i) in ("TagA", "TagC")]
    check_received(received.of("received"), spec, indexes=want, sent=sent)
