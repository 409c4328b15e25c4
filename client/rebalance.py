"""Rebalance: which queues this consumer owns, and the ProcessQueue table that follows it.

Upstream ``impl.consumer.{RebalanceImpl,RebalancePushImpl}`` (docs/PROTOCOL.md 6.10, 4.7, 8).

``do_rebalance`` runs per subscribed topic: clustering consumers sort the topic's
subscribable queues and the group's consumer ids (GET_CONSUMER_LIST_BY_GROUP), run the
allocation strategy and apply the result; broadcasting consumers take every queue.
Applying it (``update_process_queue_table``) is upstream's algorithm exactly:

* a queue no longer ours is marked dropped and, if ``remove_unnecessary_message_queue``
  agrees (push: persist its offset, forget it, and for orderly clustering consumers
  release the broker lock, after 20 s if messages are still cached), removed;
* a queue still ours whose last pull is over 120 s old is treated the same (push only);
* a new queue (orderly: only once LOCK_BATCH_MQ granted it) gets its dirty offset
  removed, a start offset from ``compute_pull_from_where`` and a PullRequest; when a lock
  was refused the client instance rebalances again 500 ms later (as RocketMQ 5.x; 4.9.7
  waits for the next periodic rebalance, 20 s);
* when anything changed, the subscription's ``subVersion`` is bumped, per-queue pull
  thresholds are recomputed from the per-topic ones, and a heartbeat is sent.

Queues of topics no longer subscribed are dropped (``truncateMessageQueueNotMyTopic``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import (
    LockBatchRequestBody,
    MessageQueue,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from aiorocketmq.protocol.codes import MixAll
from aiorocketmq.protocol.errors import MQClientError

from .allocate import AllocateStrategy, sort_cids, sort_queues
from .offset_store import OffsetStore, ReadOffsetType
from .process_queue import ProcessQueue

if TYPE_CHECKING:
    from .instance import MQClientInstance

__all__ = [
    "MessageModel",
    "ConsumeFromWhere",
    "ConsumeType",
    "PullRequest",
    "RebalanceImpl",
    "RebalancePushImpl",
    "parse_consume_timestamp",
]

log = get_logger("aiorocketmq.client.rebalance")

UNLOCK_DELAY = 20.0  # rocketmq.client.unlockDelayTimeMills
LOCK_CALL_TIMEOUT = 1.0  # lock/unlock RPCs use 1000 ms upstream
REBALANCE_LATER_DELAY = 0.5  # 5.x: rebalanceLater(500) after a failed lock of a new queue


class MessageModel(enum.Enum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.Enum):
    """Where a queue without a stored offset starts (the MIN/MAX variants act as LAST)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = \
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ConsumeType(enum.Enum):
    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"


def parse_consume_timestamp(value: str) -> int:
    """``UtilAll.parseDate(s, "yyyyMMddHHmmss")`` in local time -> epoch ms.

    Raises:
        MQClientError: not 14 digits forming a valid date.
    """
    try:
        t = time.strptime(value, "%Y%m%d%H%M%S")
    except (ValueError, TypeError) as exc:
        raise MQClientError(f"consumeTimestamp is invalid, the valid format is yyyyMMddHHmmss,"
                            f" got {value!r}") from exc
    return int(time.mktime(t) * 1000)


@dataclasses.dataclass(slots=True, eq=False)
class PullRequest:
    """One queue's pull state, handed between the rebalance and the pull loop."""

    consumer_group: str
    message_queue: MessageQueue
    process_queue: ProcessQueue
    next_offset: int
    previously_locked: bool = False


class RebalanceImpl:
    """Rebalance state and algorithm for one consumer group (see module docstring).

    Subclasses provide the consumer-type hooks: ``consume_type``,
    ``remove_unnecessary_message_queue``, ``remove_dirty_offset``,
    ``compute_pull_from_where``, ``dispatch_pull_requests``, ``message_queue_changed``.
    """

    consume_type = ConsumeType.CONSUME_PASSIVELY

    def __init__(self, group: str, message_model: MessageModel, strategy: AllocateStrategy,
                 instance: MQClientInstance) -> None:
        self.group = group
        self.message_model = message_model
        self.strategy = strategy
        self.instance = instance
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- hooks ------------------------------------------------------------------------------

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        return True

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        return None

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        return -1

    def dispatch_pull_requests(self, requests: list[PullRequest]) -> None:
        return None

    async def message_queue_changed(self, topic: str, mq_all: set[MessageQueue],
                                    mq_divided: set[MessageQueue]) -> None:
        return None

    # -- the algorithm ----------------------------------------------------------------------

    async def do_rebalance(self, is_order: bool) -> None:
        for topic in list(self.subscription_inner):
            try:
                await self._rebalance_by_topic(topic, is_order)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
                    log.warning("client.rebalance.topic_failed", group=self.group, topic=topic,
                                error=repr(exc))
        self._truncate_message_queue_not_my_topic()

    async def _rebalance_by_topic(self, topic: str, is_order: bool) -> None:
        mq_set = self.topic_subscribe_info_table.get(topic)
        if mq_set is None:
            # Not in upstream: a topic without a route yet (typically %RETRY%<group>, which
            # the broker creates on our first heartbeat) is looked up now instead of at the
            # next 30 s route poll, so retried messages flow within one rebalance.
            await self.instance.update_topic_route(topic)
            mq_set = self.topic_subscribe_info_table.get(topic)
        if self.message_model is MessageModel.BROADCASTING:
            if mq_set is None:
                log.warning("client.rebalance.no_route", group=self.group, topic=topic)
                return
            if await self.update_process_queue_table(topic, set(mq_set), is_order):
                await self.message_queue_changed(topic, mq_set, mq_set)
            return
        cid_all = await self.instance.find_consumer_id_list(topic, self.group)
        if mq_set is None:
            if not topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
                log.warning("client.rebalance.no_route", group=self.group, topic=topic)
            return
        if cid_all is None:
            log.warning("client.rebalance.no_consumer_ids", group=self.group, topic=topic)
            return
        mq_all = sort_queues(mq_set)
        cids = sort_cids(cid_all)
        try:
            allocated = self.strategy.allocate(self.group, self.instance.client_id, mq_all, cids)
        except Exception as exc:
            log.error("client.rebalance.allocate_failed", group=self.group, topic=topic,
                      strategy=getattr(self.strategy, "name", "?"), error=repr(exc))
            return
        result = set(allocated)
        if await self.update_process_queue_table(topic, result, is_order):
            log.info("client.rebalance.changed", group=self.group, topic=topic,
                     client_id=self.instance.client_id, mq_all=len(mq_all), cid_all=len(cids),
                     result=sorted(str(q.queue_id) + "@" + q.broker_name for q in result))
            await self.message_queue_changed(topic, mq_set, result)

    def _truncate_message_queue_not_my_topic(self) -> None:
        for mq in list(self.process_queue_table):
            if mq.topic not in self.subscription_inner:
                pq = self.process_queue_table.pop(mq)
                pq.dropped = True
                log.info("client.rebalance.truncate_not_my_topic", group=self.group, mq=str(mq))

    async def update_process_queue_table(self, topic: str, mq_set: set[MessageQueue],
                                         is_order: bool) -> bool:
        changed = False
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic != topic:
                continue
            if mq not in mq_set:
                pq.dropped = True
                if await self.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
                    log.info("client.rebalance.queue_removed", group=self.group, mq=str(mq))
            elif pq.is_pull_expired() and self.consume_type is ConsumeType.CONSUME_PASSIVELY:
                pq.dropped = True
                if await self.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
                    log.warning("client.rebalance.pull_expired_queue_removed", group=self.group,
                                mq=str(mq))
        requests: list[PullRequest] = []
        all_locked = True
        for mq in sort_queues(mq_set):
            if mq in self.process_queue_table:
                continue
            if is_order and not await self.lock(mq):
                log.warning("client.rebalance.lock_failed_skip", group=self.group, mq=str(mq))
                all_locked = False
                continue
            self.remove_dirty_offset(mq)
            pq = ProcessQueue()
            pq.locked = True
            try:
                next_offset = await self.compute_pull_from_where(mq)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("client.rebalance.compute_offset_failed", group=self.group, mq=str(mq),
                            error=repr(exc))
                continue
            if next_offset < 0:
                log.warning("client.rebalance.no_start_offset", group=self.group, mq=str(mq))
                continue
            if mq in self.process_queue_table:
                continue
            self.process_queue_table[mq] = pq
            requests.append(PullRequest(self.group, mq, pq, next_offset))
            changed = True
            log.info("client.rebalance.queue_added", group=self.group, mq=str(mq), offset=next_offset)
        if not all_locked:
            # Not in 4.9.7 (RocketMQ 5.x RebalanceImpl does it): the previous owner of a
            # queue releases its broker lock only after its own rebalance (or 20 s later when
            # it still had cached messages), so try again soon instead of at the next
            # periodic rebalance 20 s away.
            self.instance.rebalance_later(REBALANCE_LATER_DELAY)
        self.dispatch_pull_requests(requests)
        return changed

    def remove_process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        pq = self.process_queue_table.pop(mq, None)
        if pq is not None:
            pq.dropped = True
        return pq

    # -- broker locks (orderly) -------------------------------------------------------------

    def _by_broker(self, mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
        out: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            out.setdefault(mq.broker_name, []).append(mq)
        return out

    async def lock(self, mq: MessageQueue) -> bool:
        found = self.instance.find_broker_address_in_subscribe(mq.broker_name, MixAll.MASTER_ID,
                                                               True)
        if found is None:
            return False
        body = LockBatchRequestBody(consumer_group=self.group, client_id=self.instance.client_id,
                                    mq_set=[mq])
        try:
            locked = await self.instance.api.lock_batch_mq(found.addr, body, LOCK_CALL_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("client.rebalance.lock_error", group=self.group, mq=str(mq), error=repr(exc))
            return False
        for locked_mq in locked:
            pq = self.process_queue_table.get(locked_mq)
            if pq is not None:
                pq.locked = True
                pq.touch_lock()
        return mq in locked

    async def lock_all(self) -> None:
        for broker_name, mqs in self._by_broker(self.process_queue_table).items():
            found = self.instance.find_broker_address_in_subscribe(broker_name, MixAll.MASTER_ID,
                                                                   True)
            if found is None:
                continue
            body = LockBatchRequestBody(consumer_group=self.group,
                                        client_id=self.instance.client_id, mq_set=mqs)
            try:
                locked = set(await self.instance.api.lock_batch_mq(found.addr, body,
                                                                   LOCK_CALL_TIMEOUT))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("client.rebalance.lock_all_error", group=self.group, broker=broker_name,
                            error=repr(exc))
                continue
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    pq.locked = True
                    pq.touch_lock()
                else:
                    pq.locked = False

    async def unlock(self, mq: MessageQueue, oneway: bool) -> None:
        found = self.instance.find_broker_address_in_subscribe(mq.broker_name, MixAll.MASTER_ID,
                                                               True)
        if found is None:
            return
        body = UnlockBatchRequestBody(consumer_group=self.group,
                                      client_id=self.instance.client_id, mq_set=[mq])
        try:
            await self.instance.api.unlock_batch_mq(found.addr, body, LOCK_CALL_TIMEOUT,
                                                    oneway=oneway)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("client.rebalance.unlock_error", group=self.group, mq=str(mq), error=repr(exc))

    async def unlock_all(self, oneway: bool) -> None:
        for broker_name, mqs in self._by_broker(self.process_queue_table).items():
            found = self.instance.find_broker_address_in_subscribe(broker_name, MixAll.MASTER_ID,
                                                                   True)
            if found is None:
                continue
            body = UnlockBatchRequestBody(consumer_group=self.group,
                                          client_id=self.instance.client_id, mq_set=mqs)
            try:
                await self.instance.api.unlock_batch_mq(found.addr, body, LOCK_CALL_TIMEOUT,
                                                        oneway=oneway)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("client.rebalance.unlock_all_error", group=self.group, broker=broker_name,
                            error=repr(exc))
                continue
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False

    # -- owned background work --------------------------------------------------------------

    def spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("client.rebalance.task_failed", task=task.get_name(),
                        error=repr(task.exception()))

    async def destroy(self) -> None:
        """Drop every queue and stop the delayed unlocks."""
        for pq in self.process_queue_table.values():
            pq.dropped = True
        self.process_queue_table.clear()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class PushConsumerLike(Protocol):
    """What ``RebalancePushImpl`` reads of its push consumer."""

    offset_store: OffsetStore
    consume_orderly: bool
    consume_from_where: ConsumeFromWhere
    consume_timestamp: str
    pull_threshold_for_topic: int
    pull_threshold_size_for_topic: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int

    def dispatch_pull_request(self, req: PullRequest) -> None: ...


class RebalancePushImpl(RebalanceImpl):
    """The push consumer's hooks (``RebalancePushImpl``)."""

    consume_type = ConsumeType.CONSUME_PASSIVELY

    def __init__(self, group: str, message_model: MessageModel, strategy: AllocateStrategy,
                 instance: MQClientInstance, consumer: PushConsumerLike) -> None:
        super().__init__(group, message_model, strategy, instance)
        self.consumer = consumer
        #: Clear while a new ``sub_version`` is being announced by heartbeat; pulls wait on it.
        self.version_announced = asyncio.Event()
        self.version_announced.set()
        self._announcing = 0

    async def message_queue_changed(self, topic: str, mq_all: set[MessageQueue],
                                    mq_divided: set[MessageQueue]) -> None:
        """A new ``subVersion`` for ``topic``, then a heartbeat that carries it.

        A pull carrying a version the broker has not heard yet is refused with
        SUBSCRIPTION_NOT_LATEST (and retried only after ``pull_time_delay_ms_when_exception``),
        so pulls wait on ``version_announced`` until the heartbeat has been answered.
        Upstream's pull thread can win that race too; here the heartbeat's lock (held by a
        scheduled heartbeat, say) would make it common.
        """
        self._announcing += 1
        self.version_announced.clear()
        try:
            sd = self.subscription_inner.get(topic)
            if sd is not None:
                sd.sub_version = time.time_ns() // 1_000_000
            count = len(self.process_queue_table)
            if count:
                c = self.consumer
                if c.pull_threshold_for_topic != -1:
                    c.pull_threshold_for_queue = max(1, c.pull_threshold_for_topic // count)
                if c.pull_threshold_size_for_topic != -1:
                    c.pull_threshold_size_for_queue = max(
                        1, c.pull_threshold_size_for_topic // count)
            await self.instance.send_heartbeat_to_all_brokers()
        finally:
            self._announcing -= 1
            if not self._announcing:
                self.version_announced.set()

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        store = self.consumer.offset_store
        await store.persist(mq)
        store.remove_offset(mq)
        if self.consumer.consume_orderly and self.message_model is MessageModel.CLUSTERING:
            try:
                async with asyncio.timeout(1.0):
                    await pq.consume_lock.acquire()
            except TimeoutError:
                log.warning("client.rebalance.consume_lock_busy", group=self.group, mq=str(mq),
                            try_unlock_times=pq.try_unlock_times)
                pq.try_unlock_times += 1
                return False
            try:
                if pq.has_temp_message():
                    self.spawn(self._unlock_later(mq), f"unlock-later[{mq}]")
                else:
                    await self.unlock(mq, True)
            finally:
                pq.consume_lock.release()
        return True

    async def _unlock_later(self, mq: MessageQueue) -> None:
        await asyncio.sleep(UNLOCK_DELAY)  # upstream's delay before giving the lock away
        await self.unlock(mq, True)

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        self.consumer.offset_store.remove_offset(mq)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """``computePullFromWhereWithException`` (docs/PROTOCOL.md 6.10)."""
        c = self.consumer
        where = c.consume_from_where
        last = await c.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        if last != -1:
            return -1  # the lookup failed: try again at the next rebalance
        retry = mq.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            if retry:
                return await self.instance.max_offset(mq)
            return await self.instance.search_offset(mq, parse_consume_timestamp(c.consume_timestamp))
        return 0 if retry else await self.instance.max_offset(mq)

    def dispatch_pull_requests(self, requests: list[PullRequest]) -> None:
        for req in requests:
            self.consumer.dispatch_pull_request(req)
