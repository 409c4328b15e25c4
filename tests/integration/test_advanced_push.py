"""Advanced messaging end to end with our ``PushConsumer`` against real ``mqnamesrv`` +
``mqbroker`` processes: retries through CONSUMER_SEND_MSG_BACK, the DLQ, orderly
consumption under rebalance and local suspension, and a broker restart with orderly locks,
delayed and half messages pending.

docs/PROTOCOL.md 4.7 (locks), 4.9 / 6.4 (send-back, retry, DLQ), 6.5 (delay levels), 6.6
(transactions, check-back). Delay levels and the transaction check are shortened through
broker.conf; every wait is on a condition under a deadline, never a sleep.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    SelectMessageQueueByHash,
    TransactionProducer,
)
from aiorocketmq.protocol.bodies import LockBatchRequestBody, LockBatchResponseBody
from aiorocketmq.protocol.codes import MixAll, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import MQBrokerError, MQClientError, RemotingConnectError
from aiorocketmq.protocol.headers import ViewBrokerStatsDataRequestHeader
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_advanced_broker import start_broker
from tests.integration.test_client_produce_consume import wait_for
from tests.interop.stock import free_port
from tests.procs import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

Factory = Callable[[ServerProcess], ServerProcess]
# Send-back levels 3 + reconsumeTimes all take one second.
FAST_LEVELS = " ".join(["1s"] * 18)
TIMEOUT = 10.0
HASH = SelectMessageQueueByHash()
CC = ConsumeConcurrentlyStatus
CO = ConsumeOrderlyStatus


@dataclass(frozen=True, slots=True)
class Delivery:
    """What a listener saw of one message (copied: the consumer keeps using its object)."""

    topic: str
    body: bytes
    queue_id: int
    reconsume_times: int
    offset_msg_id: str
    properties: dict[str, str]

    @classmethod
    def of(cls, m: MessageExt) -> Delivery:
        return cls(m.topic, m.body, m.queue_id, m.reconsume_times, m.offset_msg_id,
                   dict(m.properties))


def push_consumer(namesrv: ServerProcess, group: str, topic: str, listener: Any, *,
                  orderly: bool = False, **kw: Any) -> PushConsumer:
    c = PushConsumer(group, namesrv.address,
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                     consume_thread_max=4, **kw)
    c.subscribe(topic, "*")
    c.register_message_listener(listener, orderly=orderly)
    return c


@asynccontextmanager
async def running(*consumers: PushConsumer) -> AsyncIterator[list[PushConsumer]]:
    """Start ``consumers``; shut down whichever are still in the yielded list at the end."""
    live: list[PushConsumer] = []
    try:
        for c in consumers:
            await c.start()
            live.append(c)
        yield live
    finally:
        for c in live:
            await c.shutdown()


async def view_stats(addr: str, name: str, key: str) -> RemotingCommand:
    client = RemotingClient()
    try:
        header = ViewBrokerStatsDataRequestHeader(stats_name=name, stats_key=key)
        return await client.invoke(addr, RemotingCommand.create_request(
            RequestCode.VIEW_BROKER_STATS_DATA, header.to_ext_fields()), TIMEOUT)
    finally:
        await client.close()


async def read_topic(reader: PullConsumer, topic: str, *, at_least: int = 0,
                     within: float = 30.0) -> list[MessageExt]:
    """Every message of ``topic`` (all queues, from offset 0) once ``at_least`` are there.

    Polls the route and the queues under a deadline: the topic may still be on its way to
    the nameserver, and its messages may not be due yet.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        found: list[MessageExt] = []
        try:
            mqs = await reader.fetch_subscribe_message_queues(topic)
        except (MQBrokerError, MQClientError):  # no route yet
            mqs = []
        for mq in mqs:
            offset = 0
            while True:
                r = await reader.pull(mq, "*", offset, 32)
                if r.status is not PullStatus.FOUND:
                    break
                found.extend(r.msg_found_list)
                offset = r.next_begin_offset
        if mqs and len(found) >= at_least:
            return found
        assert loop.time() < deadline, f"{topic}: {len(found)} of {at_least} messages in {within}s"
        await asyncio.sleep(0.1)  # poll interval under the deadline above


# -- 1. RECONSUME_LATER goes back through the broker ---------------------------------------


async def test_reconsume_later_comes_back_from_the_retry_topic_through_the_broker(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory, name="broker-push",
                          messageDelayLevel=FAST_LEVELS)
    group, topic = "CG_push_retry", "PushRetryT"
    seen: list[Delivery] = []

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            if m.body == b"retry me":
                seen.append(Delivery.of(m))
                return CC.RECONSUME_LATER if len(seen) <= 2 else CC.CONSUME_SUCCESS
        return CC.CONSUME_SUCCESS

    async with Producer("PG_push_retry", namesrv.address) as producer:
        sent = await producer.send(Message(topic, b"retry me", tags="TagA", keys="k1"))
        async with running(push_consumer(namesrv, group, topic, listener)):
            await wait_for(lambda: len(seen) >= 3, 40, "the third delivery")
    first, second, third = seen[:3]
    assert [d.reconsume_times for d in seen[:3]] == [0, 1, 2]
    assert first.topic == topic and first.offset_msg_id == sent.offset_msg_id
    for d in (second, third):
        # Delivered from %RETRY%<group> (REAL_TOPIC is left over from the schedule topic,
        # 6.5) with the original topic restored for the listener.
        assert d.topic == topic and d.body == b"retry me"
        p = d.properties
        assert p["REAL_TOPIC"] == MixAll.retry_topic(group) and p["RETRY_TOPIC"] == topic
        # The broker's send-back sets the original's *offset* msg id; the client fallback
        # would have put the UNIQ_KEY there, plus RECONSUME_TIME / MAX_RECONSUME_TIMES.
        assert p["ORIGIN_MESSAGE_ID"] == sent.offset_msg_id != sent.msg_id
        assert p["UNIQ_KEY"] == sent.msg_id and p["TAGS"] == "TagA" and p["KEYS"] == "k1"
        assert "RECONSUME_TIME" not in p and "MAX_RECONSUME_TIMES" not in p
    assert second.properties["DELAY"] == "3" and third.properties["DELAY"] == "4"
    # The broker counted the send-backs, and nobody sent to the retry topic directly.
    backs = await view_stats(broker.address, "SNDBCK_PUT_NUMS", f"{topic}@{group}")
    assert backs.code == ResponseCode.SUCCESS, backs.remark
    direct = await view_stats(broker.address, "TOPIC_PUT_NUMS", MixAll.retry_topic(group))
    assert direct.code == ResponseCode.SYSTEM_ERROR and "not exist" in (direct.remark or "")


# -- 2. past max_reconsume_times: the DLQ ---------------------------------------------------


async def test_message_failing_past_max_reconsume_times_lands_in_the_dlq(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    start_broker(tmp_path, namesrv, server_factory, name="broker-push",
                 messageDelayLevel=FAST_LEVELS)
    group, topic = "CG_push_dlq", "PushDlqT"
    seen: list[Delivery] = []

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        seen.extend(Delivery.of(m) for m in msgs)
        return CC.RECONSUME_LATER

    dlq = MixAll.dlq_topic(group)
    async with Producer("PG_push_dlq", namesrv.address) as producer, \
            PullConsumer("CG_dlq_reader", namesrv.address, instance_name="dlq-reader") as reader:
        sent = await producer.send(Message(topic, b"poison", keys="bad"))
        async with running(push_consumer(namesrv, group, topic, listener,
                                         max_reconsume_times=2)):
            [dead] = await read_topic(reader, dlq, at_least=1)
            assert [d.reconsume_times for d in seen] == [0, 1, 2]
        assert reader.instance is not None
        assert dlq in await reader.instance.api.get_topic_list_from_namesrv()
    assert dead.topic == dlq and dead.queue_id == 0
    assert dead.body == b"poison" and dead.reconsume_times == 3
    p = dead.properties
    assert p["RETRY_TOPIC"] == topic and p["ORIGIN_MESSAGE_ID"] == sent.offset_msg_id
    assert p["UNIQ_KEY"] == sent.msg_id and p["KEYS"] == "bad" and p["DELAY"] == "0"
    assert "MAX_RECONSUME_TIMES" not in p  # stored by the broker's send-back, not resent


# -- 3. orderly consumers sharing a topic while members join and leave -----------------------

ORDER_TOPIC = "PushOrderT"
ORDER_GROUP = "CG_push_orderly"
KEYS = [f"key-{i}" for i in range(8)]  # Java hashes spread them 2 per queue over 4 queues


class OrderLog:
    """Shared by every orderly listener of a test: who ran what, on which queue, when."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[tuple[str, int, int, int]] = []  # (consumer, queue, start_ns, end_ns)
        self.by_key: dict[str, list[tuple[int, str]]] = defaultdict(list)  # key -> (seq, consumer)
        self.bodies: set[bytes] = set()

    def listener(self, name: str) -> Callable[[list[MessageExt], ConsumeOrderlyContext], CO]:
        def consume(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> CO:
            start = time.monotonic_ns()
            with self.lock:
                for m in msgs:
                    key, seq = m.body.decode().split(":")
                    self.by_key[key].append((int(seq), name))
                    self.bodies.add(m.body)
            # Simulated work: gives an overlapping listener of the same queue (a broken
            # lock hand-over) a window in which to show up.
            time.sleep(0.001)
            with self.lock:
                self.spans.append((name, ctx.message_queue.queue_id, start, time.monotonic_ns()))
            return CO.SUCCESS
        return consume

    def count(self) -> int:
        with self.lock:
            return len(self.bodies)

    def assert_no_overlap_per_queue(self) -> None:
        per_queue: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
        for name, qid, start, end in self.spans:
            per_queue[qid].append((start, end, name))
        for qid, spans in per_queue.items():
            spans.sort()
            for (_, e0, n0), (s1, _, n1) in itertools.pairwise(spans):
                assert s1 >= e0, f"queue {qid}: {n1} started while {n0} was still consuming"

    def assert_per_key_order(self) -> None:
        """Each key's sequence numbers rise by one; going back happens only when another
        consumer takes the queue over and re-delivers the tail its predecessor had not
        committed."""
        for key, seen in self.by_key.items():
            prev_seq, prev_name = -1, ""
            for seq, name in seen:
                assert seq <= prev_seq + 1, f"{key}: {seq} after {prev_seq} (a gap)"
                if seq <= prev_seq:
                    assert name != prev_name, f"{key}: {name} went back from {prev_seq} to {seq}"
                prev_seq, prev_name = seq, name


def owned(c: PushConsumer, topic: str) -> set[MessageQueue]:
    assert c.rebalance is not None
    return {mq for mq, pq in c.rebalance.process_queue_table.items()
            if mq.topic == topic and not pq.dropped and pq.locked}


def partitioned(members: Iterable[PushConsumer], topic: str, queues: int = 4) -> bool:
    sets = [owned(c, topic) for c in members]
    union = set().union(*sets)
    return sum(map(len, sets)) == len(union) == queues and all(sets)


async def send_ordered(producer: Producer, topic: str, seqs: range) -> set[bytes]:
    sent: set[bytes] = set()
    for seq in seqs:
        for key in KEYS:
            body = f"{key}:{seq}".encode()
            await producer.send(Message(topic, body, keys=key), selector=HASH, arg=key)
            sent.add(body)
    return sent


async def test_orderly_consumers_never_share_a_queue_and_keep_order_across_rebalance(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    start_broker(tmp_path, namesrv, server_factory, name="broker-push",
                 messageDelayLevel=FAST_LEVELS)
    log = OrderLog()
    a, b, c = (push_consumer(namesrv, ORDER_GROUP, ORDER_TOPIC, log.listener(n), orderly=True,
                             instance_name=f"orderly-{n}") for n in "abc")
    async with Producer("PG_push_orderly", namesrv.address) as producer:
        # A few first (they create the 4 queues): a has consumed them by the time b joins,
        # so it hands b its half without the delayed unlock of a queue with cached messages.
        sent = await send_ordered(producer, ORDER_TOPIC, range(0, 1))
        async with running(a, b) as live:
            await wait_for(lambda: partitioned(live, ORDER_TOPIC), 60, "a and b locking 2+2 queues")
            sent |= await send_ordered(producer, ORDER_TOPIC, range(1, 20))
            # A third member joins while messages keep coming.
            sending = asyncio.create_task(send_ordered(producer, ORDER_TOPIC, range(20, 60)))
            await c.start()
            live.append(c)
            sent |= await sending
            await wait_for(lambda: partitioned(live, ORDER_TOPIC), 90, "a, b and c sharing 4 queues")
            await wait_for(lambda: sent <= log.bodies, 60, "messages sent before and while c joined")
            # One member leaves while messages keep coming.
            sending = asyncio.create_task(send_ordered(producer, ORDER_TOPIC, range(60, 100)))
            live.remove(b)
            await b.shutdown()
            sent |= await sending
            await wait_for(lambda: partitioned(live, ORDER_TOPIC), 60, "a and c after b left")
            await wait_for(lambda: sent <= log.bodies, 60, "every message consumed at least once")
    assert len(sent) == 800
    log.assert_no_overlap_per_queue()
    log.assert_per_key_order()
    assert {name for name, *_ in log.spans} == {"a", "b", "c"}


# -- 4. SUSPEND_CURRENT_QUEUE_A_MOMENT retries locally, in order ----------------------------


async def test_suspended_orderly_message_is_retried_before_the_next_one(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    start_broker(tmp_path, namesrv, server_factory, name="broker-push",
                 messageDelayLevel=FAST_LEVELS)
    topic = "PushSuspendT"
    calls: list[tuple[bytes, int]] = []
    suspended = 0

    async def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> CO:
        nonlocal suspended
        [m] = msgs
        calls.append((m.body, m.reconsume_times))
        if m.body == b"m1" and suspended < 2:
            suspended += 1
            ctx.suspend_current_queue_time_ms = 50
            return CO.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return CO.SUCCESS

    async with Producer("PG_push_suspend", namesrv.address) as producer:
        results = [await producer.send(Message(topic, f"m{i}".encode()), selector=HASH, arg="one")
                   for i in range(5)]
        mq = results[0].message_queue
        assert {r.message_queue for r in results} == {mq}
        consumer = push_consumer(namesrv, "CG_push_suspend", topic, listener, orderly=True)
        async with running(consumer):
            await wait_for(lambda: consumer.offset_store.clone_offset_table(topic).get(mq) == 5,
                           30, "five messages and two local retries committed")
    assert calls == [(b"m0", 0), (b"m1", 0), (b"m1", 1), (b"m1", 2), (b"m2", 0), (b"m3", 0),
                     (b"m4", 0)]


async def test_orderly_message_suspended_past_max_reconsume_times_goes_to_the_dlq(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    start_broker(tmp_path, namesrv, server_factory, name="broker-push",
                 messageDelayLevel=FAST_LEVELS)
    topic, group = "PushSuspendDlqT", "CG_push_suspend_dlq"
    calls: list[tuple[bytes, int]] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> CO:
        [m] = msgs
        calls.append((m.body, m.reconsume_times))
        return CO.SUSPEND_CURRENT_QUEUE_A_MOMENT if m.body == b"m0" else CO.SUCCESS

    async with Producer("PG_push_suspend_dlq", namesrv.address) as producer, \
            PullConsumer("CG_suspend_dlq_reader", namesrv.address,
                         instance_name="suspend-dlq-reader") as reader:
        sent = [await producer.send(Message(topic, f"m{i}".encode()), selector=HASH, arg="one")
                for i in range(2)]
        consumer = push_consumer(namesrv, group, topic, listener, orderly=True,
                                 max_reconsume_times=2, suspend_current_queue_time_ms=50)
        async with running(consumer):
            [dead] = await read_topic(reader, MixAll.dlq_topic(group), at_least=1)
            await wait_for(lambda: (b"m1", 0) in calls, 30, "the next message after the DLQ")
    # Retried locally (no broker round trip) until the max, then resent with RECONSUME_TIME
    # = the count, which the broker stores in the DLQ; only then does the queue move on.
    assert calls == [(b"m0", 0), (b"m0", 1), (b"m0", 2), (b"m1", 0)]
    assert dead.body == b"m0" and dead.reconsume_times == 2
    assert dead.properties["RETRY_TOPIC"] == topic
    assert dead.properties["UNIQ_KEY"] == sent[0].msg_id


# -- 5. broker restart with locks, delays and half messages pending --------------------------


@dataclass
class TxBook:
    """The transactional producer's local state: unknown until the test decides."""

    checked: list[bytes] = field(default_factory=list)

    def execute(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW

    def check(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append(msg.body)
        return LocalTransactionState.COMMIT_MESSAGE


async def broker_lock_holders(addr: str, group: str, mqs: list[MessageQueue]) -> list[MessageQueue]:
    """Which of ``mqs`` a stranger can lock (the empty list when every one is held)."""
    client = RemotingClient()
    try:
        body = LockBatchRequestBody(group, "stranger@probe", mqs).encode()
        r = await client.invoke(addr, RemotingCommand.create_request(
            RequestCode.LOCK_BATCH_MQ, None, body), TIMEOUT)
        assert r.code == ResponseCode.SUCCESS and r.body is not None
        return LockBatchResponseBody.decode(r.body).lock_ok_mq_set
    finally:
        await client.close()


async def test_broker_restart_keeps_orderly_consumers_delays_and_half_messages(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    name, topic, group = "broker-restart", "RestartOrderT", "CG_restart"
    delay_topic, tx_topic = "RestartDelayT", "RestartTxT"
    # Before the restart: level 2 is 30 s and no transaction check runs. The broker comes
    # back on its port, so the port is below the ephemeral range: a port 0 picked from it
    # may be taken by another connection's local end while the broker is down.
    port = str(free_port(offsets=(-2, 0, 1)))
    first = start_broker(tmp_path, namesrv, server_factory, name=name,
                         messageDelayLevel="1s 30s " + " ".join(["1s"] * 16),
                         transactionCheckInterval="600000", listenPort=port)
    # Heartbeats every second, so the restarted broker knows its clients again quickly.
    fast = ClientConfig(heartbeat_broker_interval_ms=1000)
    log = OrderLog()
    a, b = (push_consumer(namesrv, group, topic, log.listener(n), orderly=True, config=fast,
                          instance_name=f"restart-{n}") for n in "ab")
    book = TxBook()
    tx = TransactionProducer("PG_restart_tx", namesrv.address, config=fast,
                             instance_name="restart-tx", execute_local_transaction=book.execute,
                             check_local_transaction=book.check)
    async with Producer("PG_restart", namesrv.address, config=fast) as producer, \
            PullConsumer("CG_restart_reader", namesrv.address, instance_name="restart-reader") \
            as reader:
        await tx.start()
        try:
            sent = await send_ordered(producer, topic, range(0, 1))
            async with running(a, b) as live:
                await wait_for(lambda: partitioned(live, topic), 60, "a and b holding 2+2 locks")
                sent |= await send_ordered(producer, topic, range(1, 10))
                await wait_for(lambda: sent <= log.bodies, 60, "the first messages consumed")
                delayed = {f"delayed-{i}".encode() for i in range(3)}
                for body in delayed:
                    msg = Message(delay_topic, body)
                    msg.delay_time_level = 2
                    await producer.send(msg)
                halves = {f"half-{i}".encode() for i in range(3)}
                for body in halves:
                    r = await tx.send_message_in_transaction(Message(tx_topic, body))
                    assert r.local_transaction_state is LocalTransactionState.UNKNOW
                # In threads: the clients' event loop keeps running (it sees the connections
                # close) while the broker stops and starts again.
                assert await asyncio.to_thread(first.stop) == 0
                assert not book.checked
                second = await asyncio.to_thread(
                    start_broker, tmp_path, namesrv, server_factory, name=name,
                    messageDelayLevel=FAST_LEVELS, transactionCheckInterval="300",
                    transactionTimeOut="1000", listenPort=port)
                assert second.address == first.address
                restarted_ms = time.monotonic() * 1000
                # Our clients back off dialling an address that just failed (up to 2 s,
                # protocol/remoting_client.py) and fail calls at once meanwhile: send once
                # the producer's client has dialled the broker again.
                assert producer.instance is not None
                remoting = producer.instance.remoting

                deadline = time.monotonic() + 10
                while True:
                    try:
                        await remoting.get_channel(second.address)
                        break
                    except RemotingConnectError:
                        assert time.monotonic() < deadline, "no channel to the restarted broker"
                        await asyncio.sleep(0.05)
                sent |= await send_ordered(producer, topic, range(10, 20))
                await wait_for(lambda: sent <= log.bodies, 60, "messages sent after the restart")

                def relocked() -> bool:
                    return partitioned(live, topic) and all(
                        c.rebalance.process_queue_table[mq].last_lock_time > restarted_ms
                        for c in live if c.rebalance is not None for mq in owned(c, topic))

                # Up to two lock periods: the restarted broker's lock table is empty, and a
                # member that re-registers first may take the other's queues until the next
                # rebalance hands them back (20 s unlock delay, 20 s re-lock period).
                await wait_for(relocked, 90, "a and b re-locking their queues on the new broker")
                mqs = sorted(set().union(*(owned(c, topic) for c in live)))
                assert await broker_lock_holders(second.address, group, mqs) == []
                # Delays due while the broker was down are delivered once, after it.
                got = await read_topic(reader, delay_topic, at_least=len(delayed))
                assert sorted(m.body for m in got) == sorted(delayed)
                # Half messages are checked by the restarted broker and committed once.
                got = await read_topic(reader, tx_topic, at_least=len(halves))
                assert sorted(m.body for m in got) == sorted(halves)
                assert set(book.checked) == halves
        finally:
            await tx.shutdown()
