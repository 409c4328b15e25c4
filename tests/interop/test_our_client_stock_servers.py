"""OUR client against the stock Apache RocketMQ 4.9.7 nameserver + broker (issue #17, part 2).

One stock nameserver + broker for the module (every delay level 1 s, transaction checks after
1 s: ``FAST_BROKER_CONF``); every test has its own topics and groups. The messages are the
deterministic ones of :class:`tests.interop.checks.Spec` (the stock driver's ``Messages.java``),
and deliveries go through :func:`tests.interop.checks.event_of`, so the checks are the ones the
stock-client suite uses: every body, key, tag and user property compared, counts exact where no
redelivery is allowed. The send modes and the pull consumer run in both header serialize types.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    LitePullConsumer,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    RequestProducer,
    SendResult,
    SendStatus,
    TransactionProducer,
    create_reply_message,
)
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.codes import MessageConst
from aiorocketmq.protocol.javautil import java_string_hash
from tests.interop.checks import (
    FAST_BROKER_CONF,
    Spec,
    check_orderly,
    check_received,
    counts,
    event_of,
)
from tests.interop.stock import (
    DriverProcess,
    Event,
    JavaEnv,
    JavaServer,
    received_body,
    start_stock_broker,
    start_stock_namesrv,
    stop_all,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


@pytest.fixture(scope="module")
def stock(stock_java: JavaEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JavaServer, JavaServer]]:
    """A stock nameserver + broker-a for the module."""
    tmp = tmp_path_factory.mktemp("stock")
    ns = start_stock_namesrv(tmp)
    try:
        br = start_stock_broker(tmp, ns.address, conf=FAST_BROKER_CONF)
    except BaseException:
        stop_all([ns])
        raise
    yield ns, br
    stop_all([br, ns])
    print(f"---- stock broker ----\n{br.log_tail(40)}\n---- stock namesrv ----\n{ns.log_tail(20)}")


def config(ns: JavaServer, serialize_type: str = "JSON") -> ClientConfig:
    return ClientConfig(namesrv_addr=ns.address, client_ip="127.0.0.1", serialize_type=serialize_type,
                        poll_name_server_interval_ms=1000, heartbeat_broker_interval_ms=5000)


async def wait_for(cond: Callable[[], bool], timeout: float, what: Callable[[], str] | str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what() if callable(what) else what}")
        await asyncio.sleep(0.05)


def sent_event(i: int, spec: Spec, r: SendResult) -> Event:
    return {"index": i, "key": spec.key(i), "status": r.status.name, "msgId": r.msg_id,
            "offsetMsgId": r.offset_msg_id, "brokerName": r.message_queue.broker_name,
            "queueId": r.message_queue.queue_id, "queueOffset": r.queue_offset}


async def produce(ns: JavaServer, spec: Spec, *, st: str = "JSON", group: str | None = None,
                  delay_level: int = 0) -> dict[str, Event]:
    """Sync sends of every message of ``spec``; ``{key: sent event}``."""
    sent: dict[str, Event] = {}
    async with Producer(group or f"PG-{spec.topic}", config=config(ns, st)) as p:
        for i in spec.indexes:
            m = spec.message(i)
            if delay_level:
                m.delay_time_level = delay_level
            r = await p.send(m)
            assert r.status is SendStatus.SEND_OK, r
            sent[spec.key(i)] = sent_event(i, spec, r)
    return sent


class Recorder:
    """A push listener: records each delivery as an event; refuses (RECONSUME_LATER / SUSPEND)
    the keys in ``refuse``; thread-safe (sync listeners run on the consumer's executor)."""

    def __init__(self, *, refuse: frozenset[str] | set[str] = frozenset(), orderly: bool = False) -> None:
        self.events: list[Event] = []
        self.refuse = refuse
        self.orderly = orderly
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus | ConsumeOrderlyStatus:
        refused = any(m.keys in self.refuse for m in msgs)
        with self.lock:
            for m in msgs:
                e = event_of(m)
                e["consumeResult"] = "refused" if refused else "ok"
                self.events.append(e)
        if self.orderly:
            ctx.suspend_current_queue_time_ms = 100
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT if refused else ConsumeOrderlyStatus.SUCCESS
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if refused else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def distinct(self) -> int:
        with self.lock:
            return len({e["msgId"] for e in self.events})

    def snapshot(self) -> list[Event]:
        with self.lock:
            return list(self.events)


async def push_consume(ns: JavaServer, topic: str, group: str, recorder: Recorder,
                       until: Callable[[], bool], *, st: str = "JSON", linger: float = 0.5,
                       timeout: float = 30.0, **kw: Any) -> list[Event]:
    c = PushConsumer(group, config=config(ns, st), consume_from_where=FIRST, **kw)
    c.subscribe(topic, "*")
    c.register_message_listener(recorder, orderly=recorder.orderly)
    await c.start()
    try:
        await wait_for(until, timeout, lambda: f"{len(recorder.snapshot())} deliveries of {topic}")
        await asyncio.sleep(linger)  # anything beyond the expected would show up here
    finally:
        await c.shutdown()
    return recorder.snapshot()


# -- producers: every send mode, consumed by our push consumer ---------------------------


@pytest.mark.parametrize("st", ["JSON", "ROCKETMQ"])
@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "batch"])
async def test_send_modes(stock: tuple[JavaServer, JavaServer], st: str, mode: str) -> None:
    ns, br = stock
    spec = Spec(f"OurSend{mode}{st}", 20, body_size=0 if mode == "batch" else 5000,  # 5000: compressed
                props={"color": "blue", "größe": "ü€✓ 7"})
    sent: dict[str, Event] = {}
    async with Producer(f"PG-{spec.topic}", config=config(ns, st)) as p:
        if mode == "sync":
            for i in spec.indexes:
                sent[spec.key(i)] = sent_event(i, spec, await p.send(spec.message(i)))
        elif mode == "async":
            futs = {i: p.send_async(spec.message(i)) for i in spec.indexes}
            for i, fut in futs.items():
                sent[spec.key(i)] = sent_event(i, spec, await fut)
        elif mode == "oneway":
            for i in spec.indexes:
                m = spec.message(i)
                await p.send_oneway(m)
                sent[spec.key(i)] = {"index": i, "key": spec.key(i), "status": None,
                                     "msgId": m.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]}
        else:
            for first in range(0, spec.count, 5):
                batch = [spec.message(i) for i in range(first, first + 5)]
                r = await p.send(batch)
                assert r.msg_id is not None
                ids, offset_ids = r.msg_id.split(","), r.offset_msg_id.split(",")
                assert ids == [m.properties["UNIQ_KEY"] for m in batch] and len(offset_ids) == 5
                for j, i in enumerate(range(first, first + 5)):
                    e = sent_event(i, spec, r)
                    e["msgId"], e["offsetMsgId"], e["queueOffset"] = ids[j], offset_ids[j], r.queue_offset + j
                    sent[spec.key(i)] = e
    assert all(e["status"] in ("SEND_OK", None) for e in sent.values())
    rec = Recorder()
    events = await push_consume(ns, spec.topic, f"CG-{spec.topic}", rec, lambda: rec.distinct() >= spec.count, st=st)
    got = check_received(events, spec, sent=None if mode == "oneway" else sent)
    for i, (e,) in got.items():
        assert e["msgId"] == sent[spec.key(i)]["msgId"]
        assert e["reconsumeTimes"] == 0
        assert e["storeHost"] == br.address
        if mode != "oneway":
            assert e["offsetMsgId"] == sent[spec.key(i)]["offsetMsgId"]


async def test_orderly(stock: tuple[JavaServer, JavaServer]) -> None:
    """send(selector by order key) and an orderly PushConsumer: per key, send order."""
    ns, _ = stock
    spec = Spec("OurOrderly", 32)
    order_of = {i: f"order-{i % 4}" for i in spec.indexes}
    sent: dict[str, Event] = {}
    queues: dict[str, set[int]] = {}
    async with Producer("PG-OurOrderly", config=config(ns)) as p:
        for i in spec.indexes:
            r = await p.send(spec.message(i), selector=lambda mqs, msg, arg: mqs[hash_of(arg) % len(mqs)],
                             arg=order_of[i])
            sent[spec.key(i)] = sent_event(i, spec, r)
            queues.setdefault(order_of[i], set()).add(r.message_queue.queue_id)
    assert all(len(q) == 1 for q in queues.values()), queues
    rec = Recorder(orderly=True)
    events = await push_consume(ns, spec.topic, "CG-OurOrderly", rec, lambda: rec.distinct() >= spec.count)
    check_received(events, spec, sent=sent)
    check_orderly(events, order_of)


def hash_of(s: str) -> int:
    return abs(java_string_hash(s))


async def test_delay(stock: tuple[JavaServer, JavaServer]) -> None:
    """Delay level 3 (1 s here): delivered after the delay to the real topic, properties as the
    stock ScheduleMessageService leaves them (REAL_TOPIC / REAL_QID, and DELAY still there)."""
    ns, _ = stock
    spec = Spec("OurDelay", 8)
    sent = await produce(ns, spec, delay_level=3)
    rec = Recorder()
    events = await push_consume(ns, spec.topic, "CG-OurDelay", rec, lambda: rec.distinct() >= spec.count)
    got = check_received(events, spec)
    for i, (e,) in got.items():
        assert e["msgId"] == sent[spec.key(i)]["msgId"]
        assert e["storeTimestamp"] - e["bornTimestamp"] >= 900, e
        assert e["properties"]["REAL_TOPIC"] == spec.topic and e["properties"]["REAL_QID"] == str(e["queueId"])
        assert e["properties"]["DELAY"] == "3", e


async def test_transaction(stock: tuple[JavaServer, JavaServer]) -> None:
    """TransactionProducer: commit delivered, rollback never, UNKNOW checked back (the check
    gets the half message unaltered) and committed then."""
    ns, _ = stock
    spec = Spec("OurTx", 12)
    states = [LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE,
              LocalTransactionState.UNKNOW]
    committed = [i for i in spec.indexes if i % 3 != 1]
    unknown = [i for i in spec.indexes if i % 3 == 2]
    checks: list[Event] = []

    def execute(msg: Message, arg: Any) -> LocalTransactionState:
        return states[int(msg.get_user_property("idx") or 0) % 3]

    def check(msg: MessageExt) -> LocalTransactionState:
        e = event_of(msg)
        e["transactionId"] = msg.transaction_id
        checks.append(e)
        return LocalTransactionState.COMMIT_MESSAGE

    sent: dict[str, Event] = {}
    async with TransactionProducer("PG-OurTx", config=config(ns), execute_local_transaction=execute,
                                   check_local_transaction=check) as p:
        for i in spec.indexes:
            r = await p.send_message_in_transaction(spec.message(i))
            assert r.status is SendStatus.SEND_OK and r.local_transaction_state is states[i % 3]
            sent[spec.key(i)] = {"index": i, "msgId": r.msg_id}
        await wait_for(lambda: set(counts(checks)) >= set(unknown), 30, lambda: f"check-backs, got {checks}")
    assert set(counts(checks)) == set(unknown)
    check_received(checks, spec, indexes=unknown, exact=False)
    for e in checks:
        assert e["transactionId"] == e["properties"]["UNIQ_KEY"] == sent[spec.key(e["index"])]["msgId"], e
        assert e["properties"]["TRAN_MSG"] == "true" and e["properties"]["PGROUP"] == "PG-OurTx"
    rec = Recorder()
    events = await push_consume(ns, spec.topic, "CG-OurTx", rec, lambda: rec.distinct() >= len(committed),
                                linger=1.0)
    got = check_received(events, spec, indexes=committed)
    for i, (e,) in got.items():
        assert e["msgId"] == sent[spec.key(i)]["msgId"]
        assert e["properties"]["TRAN_MSG"] == "true" and e["properties"]["PGROUP"] == "PG-OurTx"
        assert ("TRANSACTION_CHECK_TIMES" in e["properties"]) == (i in unknown), e


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
async def test_retry_then_dlq(stock: tuple[JavaServer, JavaServer], orderly: bool) -> None:
    """k-0..k-2 always refused with max_reconsume_times 2: deliveries with reconsumeTimes 0, 1,
    2 (a concurrent consumer's redeliveries come from %RETRY%<group>), then the stock broker
    puts them in %DLQ%<group>, unaltered; the others are delivered once."""
    ns, _ = stock
    kind = "Ord" if orderly else "Conc"
    spec = Spec(f"OurRetry{kind}", 8)
    group = f"CG-OurRetry{kind}"
    refused = [0, 1, 2]
    sent = await produce(ns, spec)
    rec = Recorder(refuse={spec.key(i) for i in refused}, orderly=orderly)
    events = await push_consume(ns, spec.topic, group, rec,
                                lambda: len(rec.snapshot()) >= spec.count + 2 * len(refused),
                                linger=1.5, max_reconsume_times=2)
    got = check_received(events, spec, exact=False, sent=sent)
    for i, evs in got.items():
        if i in refused:
            assert [e["reconsumeTimes"] for e in evs] == [0, 1, 2], evs
            if not orderly:
                for e in evs[1:]:
                    assert e["properties"]["RETRY_TOPIC"] == spec.topic, e
        else:
            assert [e["reconsumeTimes"] for e in evs] == [0], evs
    dead = await pull_all(ns, f"%DLQ%{group}", f"CG-OurDlqReader{kind}", len(refused))
    got_dead = check_received(dead, spec, indexes=refused, topic=f"%DLQ%{group}")
    for i, (e,) in got_dead.items():
        assert e["msgId"] == sent[spec.key(i)]["msgId"], e
        assert e["properties"]["RETRY_TOPIC"] == spec.topic, e


async def pull_all(ns: JavaServer, topic: str, group: str, count: int, *, expression: str = "*",
                   st: str = "JSON", max_nums: int = 32, timeout: float = 30.0) -> list[Event]:
    """PullConsumer: every queue of ``topic`` from offset 0 until ``count`` messages."""
    events: list[Event] = []
    async with PullConsumer(group, config=config(ns, st)) as c:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                mqs = sorted(await c.fetch_subscribe_message_queues(topic))
                break
            except Exception:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.5)
        offsets = dict.fromkeys(mqs, 0)
        while len(events) < count:
            assert loop.time() < deadline, f"{len(events)} of {count} pulled from {topic}"
            found = False
            for mq in mqs:
                r = await c.pull(mq, expression, offsets[mq], max_nums)
                if r.status is PullStatus.FOUND:
                    found = True
                    events += [event_of(m, broker_name=mq.broker_name) for m in r.msg_found_list]
                offsets[mq] = r.next_begin_offset
            if not found:
                await asyncio.sleep(0.2)
    return events


# -- consumers of one shared topic ---------------------------------------------------------


@pytest.fixture(scope="module")
def shared(stock: tuple[JavaServer, JavaServer]) -> tuple[Spec, dict[str, Event]]:
    """One topic produced once by our producer; the broadcast and pull tests read it."""
    ns, _ = stock
    spec = Spec("OurShared", 24, body_size=300)
    return spec, asyncio.run(produce(ns, spec))


async def test_broadcasting(stock: tuple[JavaServer, JavaServer], shared: tuple[Spec, dict[str, Event]],
                            tmp_path: Path) -> None:
    ns, _ = stock
    spec, sent = shared
    recs = [Recorder(), Recorder()]
    consumers = []
    for n, rec in enumerate(recs):
        c = PushConsumer("CG-OurBcast", config=config(ns), consume_from_where=FIRST, instance_name=f"bcast{n}",
                         message_model=MessageModel.BROADCASTING, local_offset_dir=str(tmp_path / f"off{n}"))
        c.subscribe(spec.topic, "*")
        c.register_message_listener(rec)
        consumers.append(c)
    for c in consumers:
        await c.start()
    try:
        await wait_for(lambda: all(r.distinct() >= spec.count for r in recs), 30, "both broadcast consumers")
        await asyncio.sleep(0.5)
    finally:
        for c in consumers:
            await c.shutdown()
    for rec in recs:
        check_received(rec.snapshot(), spec, sent=sent)


async def test_lite_pull_subscribe(stock: tuple[JavaServer, JavaServer],
                                   shared: tuple[Spec, dict[str, Event]]) -> None:
    ns, _ = stock
    spec, sent = shared
    c = LitePullConsumer("CG-OurLite", config=config(ns), consume_from_where=FIRST)
    c.subscribe(spec.topic, "*")
    await c.start()
    events: list[Event] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(events) < spec.count and loop.time() < deadline:
            events += [event_of(m) for m in await c.poll(1.0)]
        events += [event_of(m) for m in await c.poll(0.5)]
        await c.commit_sync()
        committed = {mq.queue_id: await c.committed(mq) for mq in c.assignment()}
    finally:
        await c.shutdown()
    check_received(events, spec, sent=sent)
    per_queue: dict[int, int] = {}
    for e in sent.values():
        per_queue[e["queueId"]] = per_queue.get(e["queueId"], 0) + 1
    assert committed == per_queue  # the stock broker stored our commit


async def test_lite_pull_assign_seek(stock: tuple[JavaServer, JavaServer],
                                     shared: tuple[Spec, dict[str, Event]]) -> None:
    """assign(every queue) + seek(mq, 2): exactly the messages at queue offsets >= 2."""
    ns, _ = stock
    spec, sent = shared
    want = [e["index"] for e in sent.values() if e["queueOffset"] >= 2]
    c = LitePullConsumer("CG-OurAssign", config=config(ns), auto_commit=False)
    await c.start()
    events: list[Event] = []
    try:
        mqs = await c.fetch_subscribe_message_queues(spec.topic)
        c.assign(mqs)
        for mq in mqs:
            await c.seek(mq, 2)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(events) < len(want) and loop.time() < deadline:
            events += [event_of(m) for m in await c.poll(1.0)]
        events += [event_of(m) for m in await c.poll(0.5)]
    finally:
        await c.shutdown()
    check_received(events, spec, indexes=want, sent=sent)


@pytest.mark.parametrize("st", ["JSON", "ROCKETMQ"])
async def test_pull_consumer(stock: tuple[JavaServer, JavaServer], shared: tuple[Spec, dict[str, Event]],
                             st: str) -> None:
    """PullConsumer.pull(mq, "TagB", offset, 5) from 0: exactly the TagB messages; min/max
    offsets and NO_NEW_MSG at the end as the stock broker reports them."""
    ns, _ = stock
    spec, sent = shared
    want = spec.with_tag("TagB")
    events = await pull_all(ns, spec.topic, f"CG-OurPull{st}", len(want), expression="TagB", st=st, max_nums=5)
    check_received(events, spec, indexes=want, sent=sent)
    per_queue: dict[int, int] = {}
    for e in sent.values():
        per_queue[e["queueId"]] = per_queue.get(e["queueId"], 0) + 1
    async with PullConsumer(f"CG-OurPull{st}", config=config(ns, st)) as c:
        for qid, n in per_queue.items():
            mq = MessageQueue(spec.topic, "broker-a", qid)
            r = await c.pull(mq, "*", n, 32)
            assert r.status is PullStatus.NO_NEW_MSG and (r.min_offset, r.max_offset) == (0, n), r
            c.update_consume_offset(mq, n)
            assert await c.fetch_consume_offset(mq, from_store=False) == n


@contextlib.asynccontextmanager
async def our_replier(ns: JavaServer, topic: str, name: str, instance: str
                      ) -> AsyncIterator[list[Event]]:
    """Our replier on ``topic`` (push consumer ``CG-<name>``, reply producer ``PG-<name>``):
    each request answered with create_reply_message(b"reply:" + body) + send_reply; yields
    the requests it received, and shuts both down on exit."""
    responder = RequestProducer(f"PG-{name}", config=config(ns).replace(instance_name=instance))
    requests: list[Event] = []
    loop = asyncio.get_running_loop()

    def answer(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            requests.append(event_of(m))
            reply = create_reply_message(m, b"reply:" + m.body)
            asyncio.run_coroutine_threadsafe(responder.send_reply(reply), loop).result(10)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    await responder.start()
    replier = PushConsumer(f"CG-{name}", config=config(ns).replace(instance_name=instance),
                           consume_from_where=FIRST)
    replier.subscribe(topic, "*")
    replier.register_message_listener(answer)
    try:
        await replier.start()
        yield requests
    finally:
        await replier.shutdown()
        await responder.shutdown()


async def test_request_reply(stock: tuple[JavaServer, JavaServer]) -> None:
    """RequestProducer.request(): our replier answers with create_reply_message + send_reply
    through the stock broker's SEND_REPLY_MESSAGE_V2 -> PUSH_REPLY_MESSAGE_TO_CLIENT."""
    ns, _ = stock
    spec = Spec("OurRequest", 6)
    replies: list[MessageExt] = []
    async with our_replier(ns, spec.topic, "OurReplier", "replier") as requests:
        async with RequestProducer("PG-OurRequester", config=config(ns).replace(instance_name="requester")) as rp:
            for i in spec.indexes:
                replies.append(await rp.request(spec.message(i), 15.0))
    check_received(requests, spec)
    for i, reply in zip(spec.indexes, replies, strict=True):
        assert reply.body == b"reply:" + spec.body(i)
        assert reply.properties["MSG_TYPE"] == "reply" and reply.properties["CORRELATION_ID"]


async def create_topic(ns: JavaServer, topic: str) -> None:
    """The topic on broker-a and in the nameserver's route before any consumer starts (a stock
    consumer started before its topic exists waits ~5 s for its first pull)."""
    async with MQAdmin(ns.address) as admin:
        await admin.create_topic_in_cluster("DefaultCluster", TopicConfig(topic, 4, 4))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while True:
            try:
                await admin.topic_route(topic)
                return
            except Exception:
                assert loop.time() < deadline, f"no route for {topic}"
                await asyncio.sleep(0.2)


@pytest.mark.parametrize("requester", ["stock", "ours"])
async def test_request_reply_with_a_stock_peer(stock: tuple[JavaServer, JavaServer],
                                               java_driver: Callable[..., DriverProcess], requester: str) -> None:
    """Across clients through the stock broker: a stock DefaultMQProducer.request() answered by
    our replier (create_reply_message + send_reply), and our RequestProducer.request() answered
    by a stock replier (MessageUtil.createReplyMessage)."""
    ns, _ = stock
    spec = Spec(f"CrossRequest{requester}", 4)
    await create_topic(ns, spec.topic)
    if requester == "stock":
        async with our_replier(ns, spec.topic, "CrossReplier", "xreplier") as requests:
            proc = java_driver("request-reply", namesrv=ns.address, role="requester", group="CG-CrossRequester",
                               request_timeout_ms=15000, timeout_ms=60000, **spec.driver_options())
            result = (await asyncio.to_thread(proc.wait, 90)).check()
        check_received(requests, spec)
        replies = result.of("reply")
        assert [e["requestIndex"] for e in replies] == list(spec.indexes), result.describe()
        for e in replies:
            assert received_body(e) == b"reply:" + spec.body(e["requestIndex"]), e
            assert e["properties"]["MSG_TYPE"] == "reply" and e["properties"]["CORRELATION_ID"], e
        return
    proc = java_driver("request-reply", namesrv=ns.address, role="replier", group="CG-CrossStockReplier",
                       timeout_ms=60000, **spec.driver_options())
    await asyncio.to_thread(proc.wait_for, "started", timeout=60)
    got: list[MessageExt] = []
    async with RequestProducer("PG-CrossRequester", config=config(ns).replace(instance_name="xrequester")) as rp:
        for i in spec.indexes:
            got.append(await rp.request(spec.message(i), 15.0))
    result = (await asyncio.to_thread(proc.wait, 60)).check()
    check_received([{**e, "event": "received"} for e in result.of("replied")], spec)
    for i, reply in zip(spec.indexes, got, strict=True):
        assert reply.body == b"reply:" + spec.body(i)
        assert reply.properties["MSG_TYPE"] == "reply" and reply.properties["CORRELATION_ID"]
