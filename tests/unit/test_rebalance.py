"""RebalancePushImpl logic with a recording stand-in for the client instance (no I/O)."""

from __future__ import annotations

from typing import Any

from aiorocketmq.client.allocate import AllocateMessageQueueAveragely
from aiorocketmq.client.instance import FindBrokerResult
from aiorocketmq.client.offset_store import RemoteBrokerOffsetStore
from aiorocketmq.client.process_queue import PULL_MAX_IDLE_TIME_MS
from aiorocketmq.client.rebalance import (
    ConsumeFromWhere,
    MessageModel,
    PullRequest,
    RebalancePushImpl,
)
from aiorocketmq.protocol.bodies import LockBatchRequestBody, MessageQueue, build_subscription_data
from aiorocketmq.protocol.errors import QueryNotFoundError

T = "T"


class FakeInstance:
    client_id = "c1"

    def __init__(self) -> None:
        self.cids = ["c1"]
        self.broker_offsets: dict[MessageQueue, int] = {}
        self.max_offsets: dict[MessageQueue, int] = {}
        self.searched: list[tuple[MessageQueue, int]] = []
        self.persisted: list[tuple[MessageQueue, int]] = []
        self.heartbeats = 0

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        return list(self.cids)

    async def update_topic_route(self, topic: str) -> bool:
        return False

    async def send_heartbeat_to_all_brokers(self) -> None:
        self.heartbeats += 1

    async def fetch_consume_offset(self, group: str, mq: MessageQueue) -> int:
        if mq not in self.broker_offsets:
            raise QueryNotFoundError(22, "not found")
        return self.broker_offsets[mq]

    async def update_consume_offset(self, group: str, mq: MessageQueue, offset: int, *,
                                    oneway: bool) -> None:
        self.persisted.append((mq, offset))

    async def max_offset(self, mq: MessageQueue) -> int:
        return self.max_offsets.get(mq, 100)

    async def search_offset(self, mq: MessageQueue, ts: int) -> int:
        self.searched.append((mq, ts))
        return 7


class FakeConsumer:
    consume_orderly = False
    consume_timestamp = "20240101000000"
    pull_threshold_for_topic = 100
    pull_threshold_size_for_topic = -1
    pull_threshold_for_queue = 1000
    pull_threshold_size_for_queue = 100

    def __init__(self, inst: FakeInstance, where: ConsumeFromWhere) -> None:
        self.offset_store = RemoteBrokerOffsetStore("G", inst)
        self.consume_from_where = where
        self.dispatched: list[PullRequest] = []

    def dispatch_pull_request(self, req: PullRequest) -> None:
        self.dispatched.append(req)


def setup(where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
          n: int = 4) -> tuple[RebalancePushImpl, FakeInstance, FakeConsumer]:
    inst = FakeInstance()
    consumer = FakeConsumer(inst, where)
    rb = RebalancePushImpl("G", MessageModel.CLUSTERING, AllocateMessageQueueAveragely(),
                           inst, consumer)  # type: ignore[arg-type]
    rb.subscription_inner[T] = build_subscription_data(T, "*")
    rb.topic_subscribe_info_table[T] = {MessageQueue(T, "b", i) for i in range(n)}
    return rb, inst, consumer


async def test_first_rebalance_takes_all_and_computes_offsets() -> None:
    rb, inst, consumer = setup()
    inst.broker_offsets[MessageQueue(T, "b", 0)] = 12
    inst.max_offsets[MessageQueue(T, "b", 1)] = 50
    await rb.do_rebalance(False)
    offsets = {r.message_queue.queue_id: r.next_offset for r in consumer.dispatched}
    assert offsets == {0: 12, 1: 50, 2: 100, 3: 100}  # stored offset, else max (LAST_OFFSET)
    assert inst.heartbeats == 1 and consumer.pull_threshold_for_queue == 25  # 100 / 4 queues
    sub_version = rb.subscription_inner[T].sub_version
    await rb.do_rebalance(False)
    assert len(consumer.dispatched) == 4  # nothing changed, nothing new
    assert rb.subscription_inner[T].sub_version == sub_version


async def test_member_joins_queues_dropped_offsets_persisted() -> None:
    rb, inst, consumer = setup()
    await rb.do_rebalance(False)
    for mq in rb.process_queue_table:
        consumer.offset_store.update_offset(mq, 200 + mq.queue_id)
    kept = dict(rb.process_queue_table)
    inst.cids = ["c1", "c2"]
    await rb.do_rebalance(False)
    assert set(rb.process_queue_table) == {MessageQueue(T, "b", 0), MessageQueue(T, "b", 1)}
    lost = [mq for mq in kept if mq not in rb.process_queue_table]
    assert all(kept[mq].dropped for mq in lost)
    assert sorted(inst.persisted) == sorted((mq, 200 + mq.queue_id) for mq in lost)
    assert all(mq not in consumer.offset_store.clone_offset_table() for mq in lost)


async def test_pull_expired_queue_is_recreated() -> None:
    rb, inst, consumer = setup(n=1)
    await rb.do_rebalance(False)
    (mq, pq), = rb.process_queue_table.items()
    pq.last_pull_time -= PULL_MAX_IDLE_TIME_MS + 1
    await rb.do_rebalance(False)
    assert pq.dropped and rb.process_queue_table[mq] is not pq
    assert len(consumer.dispatched) == 2


async def test_compute_pull_from_where_rules() -> None:
    retry = MessageQueue("%RETRY%G", "b", 0)
    mq = MessageQueue(T, "b", 0)
    rb, inst, _ = setup(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
    assert await rb.compute_pull_from_where(retry) == 0
    assert await rb.compute_pull_from_where(mq) == 100
    rb, inst, _ = setup(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    assert await rb.compute_pull_from_where(mq) == 0
    rb, inst, _ = setup(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP)
    assert await rb.compute_pull_from_where(retry) == 100
    assert await rb.compute_pull_from_where(mq) == 7 and inst.searched[0][0] == mq
    inst.broker_offsets[mq] = 3
    assert await rb.compute_pull_from_where(mq) == 3  # a stored offset always wins


async def test_unsubscribed_topic_is_truncated() -> None:
    rb, inst, consumer = setup()
    await rb.do_rebalance(False)
    pqs: list[Any] = list(rb.process_queue_table.values())
    del rb.subscription_inner[T]
    await rb.do_rebalance(False)
    assert not rb.process_queue_table and all(pq.dropped for pq in pqs)


class LockingInstance(FakeInstance):
    """Also a broker lock table: queues in ``held_by_other`` are refused to this client."""

    def __init__(self) -> None:
        super().__init__()
        self.held_by_other: set[MessageQueue] = set()
        self.rebalance_later_calls: list[float] = []
        self.api = self

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int,
                                         only_this_broker: bool) -> Any:
        return FindBrokerResult("127.0.0.1:10911", False)

    async def lock_batch_mq(self, addr: str, body: LockBatchRequestBody,
                            timeout: float) -> list[MessageQueue]:
        return [mq for mq in body.mq_set if mq not in self.held_by_other]

    def rebalance_later(self, delay: float) -> None:
        self.rebalance_later_calls.append(delay)


async def test_orderly_queue_still_locked_elsewhere_is_retried_soon() -> None:
    inst = LockingInstance()
    consumer = FakeConsumer(inst, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
    consumer.consume_orderly = True
    rb = RebalancePushImpl("G", MessageModel.CLUSTERING, AllocateMessageQueueAveragely(),
                           inst, consumer)  # type: ignore[arg-type]
    rb.subscription_inner[T] = build_subscription_data(T, "*")
    rb.topic_subscribe_info_table[T] = {MessageQueue(T, "b", i) for i in range(2)}
    inst.held_by_other = {MessageQueue(T, "b", 1)}
    await rb.do_rebalance(True)
    assert set(rb.process_queue_table) == {MessageQueue(T, "b", 0)}
    assert inst.rebalance_later_calls == [0.5]  # not the next periodic rebalance, 20 s away
    inst.held_by_other.clear()  # the previous owner released it
    await rb.do_rebalance(True)
    assert set(rb.process_queue_table) == {MessageQueue(T, "b", 0), MessageQueue(T, "b", 1)}
    assert inst.rebalance_later_calls == [0.5]
