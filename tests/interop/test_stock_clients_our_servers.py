"""Stock Apache RocketMQ 4.9.7 Java clients against OUR nameserver + broker (issue #17, part 1).

Every scenario runs in both header serialize types (``-Drocketmq.serialize.type=JSON`` /
``ROCKETMQ``) against one nameserver + broker pair shared by the module (every test has its own
topics and groups). The messages are the driver's deterministic ones (``Messages.java``, mirrored
by :class:`tests.interop.checks.Spec`), so every body, key, tag and user property is checked end
to end, and counts are exact wherever the scenario allows no redelivery.

Our broker runs with every delay level at 1 s and transaction checks after 1 s
(``FAST_BROKER_CONF``), so retries, delays and check-backs take seconds, not minutes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.interop.checks import (
    FAST_BROKER_CONF,
    Spec,
    check_orderly,
    check_received,
    check_sent,
    counts,
)
from tests.interop.stock import DriverProcess, DriverResult, JavaEnv, received_body, run_driver
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

Driver = Callable[..., DriverProcess]
TIMEOUT_MS = 30000


@pytest.fixture(scope="module")
def ours(stock_java: JavaEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Our mqnamesrv + mqbroker (fast delay levels and transaction checks)."""
    with namesrv_and_broker(tmp_path_factory.mktemp("ours"), conf=FAST_BROKER_CONF) as pair:
        yield pair


@pytest.fixture(scope="module", params=["JSON", "ROCKETMQ"])
def st(request: pytest.FixtureRequest) -> str:
    """The stock clients' header serialize type."""
    return str(request.param)


@pytest.fixture(scope="module")
def shared(ours: tuple[ServerProcess, ServerProcess], st: str,
           tmp_path_factory: pytest.TempPathFactory) -> tuple[Spec, dict[str, Any]]:
    """One topic produced once per serialize type by a stock producer (sync sends), consumed by
    the push, broadcast, lite-pull and pull tests in their own groups: ``(spec, {key: sent})``."""
    ns, _ = ours
    spec = Spec(f"Shared{st}", 24, body_size=300)
    sent = run_driver(tmp_path_factory.mktemp(f"shared{st}"), "produce-sync", namesrv=ns.address,
                      serialize_type=st, group=f"PG-shared-{st}", timeout_ms=TIMEOUT_MS,
                      **spec.driver_options()).check()
    return spec, check_sent(sent, spec)


def wait_all(*procs: DriverProcess, timeout: float = 90.0) -> list[DriverResult]:
    return [p.wait(timeout).check() for p in procs]


# -- producers: every send mode, consumed by a stock push consumer -------------------------


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "batch"])
def test_send_modes(ours: tuple[ServerProcess, ServerProcess], java_driver: Driver, st: str, mode: str) -> None:
    """DefaultMQProducer send / send(callback) / sendOneway / send(batch of 5), then a
    DefaultMQPushConsumer (concurrently) gets each message exactly once, unaltered, with the
    send's msgId, queue and offset."""
    ns, br = ours
    spec = Spec(f"Send{mode}{st}", 20, body_size=0 if mode == "batch" else 150)
    extra: dict[str, Any] = {"batch_size": 5} if mode == "batch" else {}
    producer = java_driver(f"produce-{mode}", namesrv=ns.address, serialize_type=st, group=f"PG-{mode}-{st}",
                           timeout_ms=TIMEOUT_MS, **spec.driver_options(), **extra)
    sent_result = producer.wait(60).check()
    received = java_driver("consume-push", namesrv=ns.address, serialize_type=st, topic=spec.topic,
                           group=f"CG-{mode}-{st}", count=spec.count, linger_ms=500,
                           timeout_ms=TIMEOUT_MS).wait(60).check()
    sent = check_sent(sent_result, spec, status=None if mode == "oneway" else "SEND_OK")
    got = check_received(received.of("received"), spec, sent=None if mode == "oneway" else sent)
    for evs in got.values():
        e = evs[0]
        assert e["reconsumeTimes"] == 0 and e["consumeResult"] == "CONSUME_SUCCESS"
        assert e["storeHost"] == f"/{br.address}"
        assert e["brokerName"] == "broker-a"
    if mode == "batch":
        batches = {e["batchMsgId"] for e in sent_result.of("sent")}
        assert len(batches) == 4  # 20 messages in batches of 5, one queue each
        for e in sent_result.of("sent"):
            assert e["msgId"] in e["batchMsgId"].split(",")


def test_shared_topic_push(ours: tuple[ServerProcess, ServerProcess], java_driver: Driver, st: str,
                           shared: tuple[Spec, dict[str, Any]]) -> None:
    ns, _ = ours
    spec, sent = shared
    received = java_driver("consume-push", namesrv=ns.address, serialize_type=st, topic=spec.topic,
                           group=f"CG-sharedpush-{st}", count=spec.count, linger_ms=500,
                           timeout_ms=TIMEOUT_MS).wait(60).check()
    check_received(received.of("received"), spec, sent=sent)


def test_orderly(ours: tuple[ServerProcess, ServerProcess], java_driver: Driver, st: str) -> None:
    """send(msg, selector, orderKey) puts each order key on one queue; a MessageListenerOrderly
    consumer gets each key's messages in send order, each once."""
    ns, _ = ours
    spec = Spec(f"Orderly{st}", 32)
    producer = java_driver("produce-orderly", namesrv=ns.address, serialize_type=st, group=f"PG-ord-{st}",
                           order_keys=4, timeout_ms=TIMEOUT_MS, **spec.driver_options())
    sent_result = producer.wait(60).check()
    consumer = java_driver("consume-orderly", namesrv=ns.address, serialize_type=st, topic=spec.topic,
                           group=f"CG-ord-{st}", count=spec.count, linger_ms=300, timeout_ms=TIMEOUT_MS)
    received = consumer.wait(60).check()
    sends = sent_result.of("sent")
    order_of = {e["index"]: e["orderKey"] for e in sends}
    queue_of_key: dict[str, set[int]] = {}
    for e in sends:
        queue_of_key.setdefault(e["orderKey"], set()).add(e["queueId"])
    assert all(len(q) == 1 for q in queue_of_key.values()), queue_of_key
    # the orderKey user property travels too
    events = received.of("received")
    for e in events:
        assert e["userProperties"].pop("orderKey") == order_of[e["index"]]
    sent = check_sent(sent_result, spec)
    check_received(events, spec, sent=sent)
    check_orderly(events, order_of)


def test_delay(ours: tuple[ServerProcess, ServerProcess], java_driver: Driver, st: str) -> None:
    """setDelayTimeLevel(3): held in SCHEDULE_TOPIC_XXXX for the level's 1 s, then delivered to
    the real topic and queue, unaltered."""
    ns, _ = ours
    spec = Spec(f"Delay{st}", 8)
    producer = java_driver("produce-delay", namesrv=ns.address, serialize_type=st, group=f"PG-delay-{st}",
                           delay_level=3, timeout_ms=TIMEOUT_MS, **spec.driver_options())
    sent_result = producer.wait(60).check()
    received = java_driver("consume-push", namesrv=ns.address, serialize_type=st, topic=spec.topic,
                           group=f"CG-delay-{st}", count=spec.count, linger_ms=300,
                           timeout_ms=TIMEOUT_MS).wait(60).check()
    sent = check_sent(sent_result, spec)
    got = check_received(received.of("received"), spec)
    for i, (e,) in got.items():
        s = sent[spec.key(i)]
        assert e["msgId"] == s["msgId"]
        assert e["storeTimestamp"] - e["bornTimestamp"] >= 900, e  # held for the 1 s level
        assert e["properties"]["REAL_TOPIC"] == spec.topic, e
        assert e["properties"]["REAL_QID"] == str(e["queueId"]), e
        # stock ScheduleMessageService takes the properties string before clearing DELAY
        assert e["properties"]["DELAY"] == "3", e


def test_transaction(ours: tuple[ServerProcess, ServerProcess], java_driver: Driver, st: str) -> None:
    """TransactionMQProducer: COMMIT_MESSAGE is delivered, ROLLBACK_MESSAGE never is, UNKNOW is
    checked back (checkLocalTransaction gets the half message, unaltered) and committed then."""
    ns, _ = ours
    spec = Spec(f"Tx{st}", 12)
    committed = [i for i in spec.indexes if i % 3 != 1]
    unknown = [i for i in spec.indexes if i % 3 == 2]
    producer = java_driver("transaction", namesrv=ns.address, serialize_type=st, group=f"PG-tx-{st}",
                           tx_states=["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"], check_result="COMMIT_MESSAGE",
                           timeout_ms=TIMEOUT_MS, **spec.driver_options())
    sent_result = producer.wait(60).check()  # returns once every UNKNOW one was checked back
    received = java_driver("consume-push", namesrv=ns.address, serialize_type=st, topic=spec.topic,
                           group=f"CG-tx-{st}", count=len(committed), linger_ms=1000,
                           timeout_ms=TIMEOUT_MS).wait(60).check()
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
    assert checks, sent_result.describe()
    assert set(counts(checks)) == set(unknown), sent_result.describe()
    check_received(checks, spec, indexes=unknown, exact=False)
    for e in checks:  # a plain MessageExt: msgId is the half message's offset id
        assert e["transactionId"] == e["properties"]["UNIQ_KEY"] == sent[spec.key(e["index"])]["msgId"], e
        assert e["msgId"] == e["offsetMsgId"] or e["offsetMsgId"] is None, e


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
def test_retry_then_dlq(ours: tuple[ServerProcess, ServerProcess], java_driver: Driver, st: str,
                        orderly: bool) -> None:
    """Keys k-0..k-2 are always refused (RECONSUME_LATER / SUSPEND_CURRENT_QUEUE_A_MOMENT) with
    maxReconsumeTimes 2: three deliveries each (reconsumeTimes 0, 1, 2; a concurrent consumer's
    redeliveries come back through %RETRY%<group>), then %DLQ%<group> holds them, unaltered;
    the other keys are delivered once."""
    ns, _ = ours
    kind = "ord" if orderly else "conc"
    spec = Spec(f"Retry{kind}{st}", 8)
    group = f"CG-retry-{kind}-{st}"
    refused = [0, 1, 2]
    producer = java_driver("produce-sync", namesrv=ns.address, serialize_type=st, group=f"PG-retry-{kind}-{st}",
                           timeout_ms=TIMEOUT_MS, **spec.driver_options())
    sent = check_sent(producer.wait(60).check(), spec)
    consumer = java_driver("consume-orderly" if orderly else "consume-push", namesrv=ns.address,
                           serialize_type=st, topic=spec.topic, group=group,
                           count=spec.count - len(refused), expect_deliveries=spec.count + 2 * len(refused),
                           reconsume_pattern="k-[0-2]", max_reconsume_times=2, suspend_ms=100,
                           linger_ms=1500, timeout_ms=TIMEOUT_MS)
    received = consumer.wait(60).check()
    events = received.of("received")
    got = check_received(events, spec, exact=False, sent=sent)
    for i, evs in got.items():
        if i in refused:
            assert [e["reconsumeTimes"] for e in evs] == [0, 1, 2], evs
            assert {e["consumeResult"] for e in evs} == {
                "SUSPEND_CURRENT_QUEUE_A_MOMENT" if orderly else "RECONSUME_LATER"}
            if not orderly:
                for e in evs[1:]:  # redelivered from the retry topic, original topic restored
                    assert e["properties"]["RETRY_TOPIC"] == spec.topic, e
                    assert e["msgId"] == sent[spec.key(i)]["msgId"]
        else:
            assert [e["reconsumeTimes"] for e in evs] == [0], evs
    dlq = java_driver("pull-consumer", namesrv=ns.address, serialize_type=st, topic=f"%DLQ%{group}",
                      group=f"CG-dlqreader-{kind}-{st}", count=len(refused), linger_ms=0,
                      timeout_ms=TIMEOUT_MS).wait(60).check()
    dead = check_received(dlq.of("received"), spec, indexes=refused, topic=f"%DLQ%{group}")
    for i, (e,) in dead.items():
        assert e["msgId"] == sent[spec.key(i)]["msgId"], e
        assert e["properties"]["RETRY_TOPIC"] == spec.topic, e


# -- consumers of the shared topic ---------------------------------------------------------


def test_broadcasting(ours: tuple[ServerProcess, ServerProcess], java_driver: Driver, st: str,
                      shared: tuple[Spec, dict[str, Any]]) -> None:
    """Two BROADCASTING consumers of one group each get every message once."""
    ns, _ = ours
    spec, sent = shared
    procs = [java_driver("consume-broadcast", namesrv=ns.address, serialize_type=st, topic=spec.topic,
                         group=f"CG-bcast-{st}", instance=f"bcast{n}", count=spec.count, linger_ms=500,
                         timeout_ms=TIMEOUT_MS) for n in range(2)]
    for result in wait_all(*procs):
        check_received(result.of("received"), spec, sent=sent)


def test_lite_pull_subscribe(ours: tuple[ServerProcess, ServerProcess], java_driver: Driver, st: str,
                             shared: tuple[Spec, dict[str, Any]]) -> None:
    ns, _ = ours
    spec, sent = shared
    result = java_driver("lite-pull-subscribe", namesrv=ns.address, serialize_type=st, topic=spec.topic,
                         group=f"CG-lite-{st}", count=spec.count, linger_ms=500,
                         timeout_ms=TIMEOUT_MS).wait(60).check()
    check_received(result.of("received"), spec, sent=sent)


def test_lite_pull_assign_seek(ours: tuple[ServerProcess, ServerProcess], java_driver: Driver, st: str,
                               shared: tuple[Spec, dict[str, Any]]) -> None:
    """assign(all queues) + seek(mq, 2): exactly the messages at queue offsets >= 2."""
    ns, _ = ours
    spec, sent = shared
    want = [e["index"] for e in sent.values() if e["queueOffset"] >= 2]
    assert 0 < len(want) < spec.count
    result = java_driver("lite-pull-assign-seek", namesrv=ns.address, serialize_type=st, topic=spec.topic,
                         group=f"CG-assign-{st}", seek=2, commit=True, count=len(want), linger_ms=500,
                         timeout_ms=TIMEOUT_MS).wait(60).check()
    queues = result.of("assigned")[0]["queues"]
    assert sorted(q["queueId"] for q in queues) == sorted({e["queueId"] for e in sent.values()})
    check_received(result.of("received"), spec, indexes=want, sent=sent)


def test_pull_consumer(ours: tuple[ServerProcess, ServerProcess], java_driver: Driver, st: str,
                       shared: tuple[Spec, dict[str, Any]]) -> None:
    """DefaultMQPullConsumer.pull(mq, "TagB", offset, 5) from offset 0 on every queue: exactly
    the TagB messages (broker tag-hash filter, client tag check), with each queue's offsets."""
    ns, _ = ours
    spec, sent = shared
    want = spec.with_tag("TagB")
    result = java_driver("pull-consumer", namesrv=ns.address, serialize_type=st, topic=spec.topic,
                         group=f"CG-pull-{st}", sub="TagB", max_nums=5, count=len(want),
                         timeout_ms=TIMEOUT_MS).wait(60).check()
    check_received(result.of("received"), spec, indexes=want, sent=sent)
    per_queue: dict[int, int] = {}
    for e in sent.values():
        per_queue[e["queueId"]] = per_queue.get(e["queueId"], 0) + 1
    for p in result.of("pull"):
        if p["status"] == "FOUND":
            assert p["maxOffset"] == per_queue[p["queueId"]], p
            assert p["minOffset"] == 0


def test_request_reply(ours: tuple[ServerProcess, ServerProcess], java_driver: Driver, st: str) -> None:
    """DefaultMQProducer.request(): the replier's MessageUtil.createReplyMessage answer comes
    back through our broker's PUSH_REPLY_MESSAGE_TO_CLIENT, one reply per request."""
    ns, _ = ours
    spec = Spec(f"Request{st}", 6)
    result = java_driver("request-reply", namesrv=ns.address, serialize_type=st, group=f"CG-rr-{st}",
                         request_timeout_ms=10000, timeout_ms=TIMEOUT_MS, **spec.driver_options()).wait(90).check()
    replied = result.of("replied")
    check_received([{**e, "event": "received"} for e in replied], spec, exact=False)
    replies = result.of("reply")
    assert [e["requestIndex"] for e in replies] == list(spec.indexes)
    for e in replies:
        i = e["requestIndex"]
        assert received_body(e) == b"reply:" + spec.body(i), e
        assert e["properties"]["CORRELATION_ID"], e
        assert e["properties"]["MSG_TYPE"] == "reply", e
    assert result.done is not None and result.done["replies"] == spec.count
