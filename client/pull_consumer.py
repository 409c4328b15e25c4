"""PullConsumer and LitePullConsumer: the application decides when to pull.

Upstream ``consumer.DefaultMQPullConsumer`` / ``impl.consumer.DefaultMQPullConsumerImpl``
and ``consumer.DefaultLitePullConsumer`` / ``DefaultLitePullConsumerImpl`` (docs/PROTOCOL.md
4.2, 4.5, 8).

* ``PullConsumer``: ``pull`` (sysFlag SUBSCRIPTION, no hold, 10 s timeout) and
  ``pull_block_if_not_found`` (SUSPEND|SUBSCRIPTION, broker hold 20 s, 30 s timeout),
  both with ``subVersion=0`` (an SQL92 ``MessageSelector``: its subVersion) and
  ``commitOffset=0`` like upstream, plus the offset store
  (``fetch_consume_offset`` / ``update_consume_offset``, persisted every 5 s by the
  client instance). It heartbeats as ``CONSUME_ACTIVELY`` and does not rebalance.
* ``LitePullConsumer``: ``subscribe`` (queues assigned by rebalance, as the push
  consumer) or ``assign`` (fixed queues); one owned pull task per queue fills a bounded
  buffer (sysFlag ``0x16``: lite-pull|suspend|subscription, 10 messages, hold 20 s) that
  ``poll`` drains: ``poll(timeout_ms=1000)`` in stock's milliseconds, or ``poll(1.0)`` in
  seconds, asyncio's unit; a seconds value above ``MAX_POLL_SECONDS`` (stock's
  ``poll(1000)`` carried over, 17 minutes here) is refused with ``MQClientError``
  (``poll_wait_seconds``); ``seek``/``seek_to_begin``/``seek_to_end``, ``pause``/
  ``resume`` per queue, ``commit_sync`` and (default) auto commit of what ``poll``
  returned. Not reproduced: the ``@STREAM`` client-id suffix and ``ReqT`` ext field of the
  4.9.7 lite-pull RPC hook (a broker ignores both).
"""

# ASYNC109: ``timeout`` arguments are user budgets handed to bounded waits.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import (
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    MessageQueue,
    SubscriptionData,
    TopicRouteData,
    build_subscription_data,
)
from aiorocketmq.protocol.codes import MixAll, PullSysFlag
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    PullMessageRequestHeader,
)
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.protocol.routine import ServiceState

from .allocate import AllocateMessageQueueAveragely, AllocateStrategy
from .api import PullResult, PullStatus, process_pull_result
from .config import ClientConfig
from .instance import FAQ_URL, MQClientInstance, route_to_subscribe_queues
from .offset_store import OffsetStore, ReadOffsetType, open_offset_store
from .process_queue import ProcessQueue
from .producer import Validators
from .rebalance import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    PullRequest,
    RebalancePushImpl,
)
from .selector import Selector, check_broker_version, subscription_data

__all__ = ["PullConsumer", "LitePullConsumer", "MAX_POLL_SECONDS", "poll_wait_seconds"]

log = get_logger("aiorocketmq.client.pull_consumer")

BROKER_SUSPEND_MAX_TIME_MS = 20_000  # brokerSuspendMaxTimeMillis
CONSUMER_TIMEOUT_WHEN_SUSPEND = 30.0  # consumerTimeoutMillisWhenSuspend
CONSUMER_PULL_TIMEOUT = 10.0  # consumerPullTimeoutMillis


class _ConsumerBase:
    """Shared lifecycle of the two pull-style consumers."""

    consume_type = ConsumeType.CONSUME_ACTIVELY

    def __init__(self, group: str, namesrv_addr: str | None, config: ClientConfig | None,
                 namespace: str | None, instance_name: str | None,
                 message_model: MessageModel, local_offset_dir: str | None) -> None:
        self.config = (config or ClientConfig()).with_options(
            namesrv_addr=namesrv_addr, namespace=namespace, instance_name=instance_name)
        self.group = self.config.with_namespace(group)
        self.message_model = message_model
        self.local_offset_dir = local_offset_dir
        self.unit_mode = self.config.unit_mode
        self.state = ServiceState.CREATE_JUST
        self.instance: MQClientInstance | None = None
        self.offset_store: OffsetStore = OffsetStore(self.group)
        self._subscriptions: dict[str, SubscriptionData] = {}
        # PullAPIWrapper.pullFromWhichNodeTable: the broker id each queue's last answer suggested.
        self._pull_from_which_node: dict[MessageQueue, int] = {}

    async def _start_base(self) -> MQClientInstance:
        if self.state is not ServiceState.CREATE_JUST:
            raise MQClientError(f"The {type(self).__name__} service state not OK, maybe started "
                                f"once, {self.state.value}{FAQ_URL}")
        Validators.check_group(self.group)
        if self.group == MixAll.DEFAULT_CONSUMER_GROUP:
            raise MQClientError("consumerGroup can not equal DEFAULT_CONSUMER, please specify "
                                f"another one.{FAQ_URL}")
        self.state = ServiceState.START_FAILED
        if self.message_model is MessageModel.CLUSTERING:
            self.config = self.config.with_pid_instance_name()
        inst = await MQClientInstance.acquire(self.config)
        self.instance = inst
        try:
            self.offset_store = await open_offset_store(
                self.group, inst.client_id, inst,
                broadcasting=self.message_model is MessageModel.BROADCASTING,
                local_dir=self.local_offset_dir)
            if not inst.register_consumer(self.group, self):
                raise MQClientError(f"The consumer group[{self.group}] has been created before, "
                                    f"specify another name please.{FAQ_URL}")
        except BaseException:
            self.state = ServiceState.CREATE_JUST
            self.instance = None
            await inst.release()
            raise
        self.state = ServiceState.RUNNING
        return inst

    async def _shutdown_base(self) -> None:
        inst = self.instance
        assert inst is not None
        await self.persist_consumer_offset()
        await inst.unregister_consumer(self.group)
        await inst.release()

    def _running(self) -> MQClientInstance:
        if self.state is not ServiceState.RUNNING or self.instance is None:
            raise MQClientError(f"The consumer service state not OK, {self.state.value}{FAQ_URL}")
        return self.instance

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, from the nameserver (``fetchSubscribeMessageQueues``).

        Raises:
            MQClientError: the topic has no readable queue.
            MQBrokerError: the nameserver has no route (``TopicNotExistError``).
        """
        inst = self._running()
        full = self.config.with_namespace(topic)
        route = await inst.api.get_topic_route_info(full)
        mqs = route_to_subscribe_queues(full, route)
        if not mqs:
            raise MQClientError(f"Can not find Message Queue for this topic, {topic}{FAQ_URL}")
        return sorted(mqs)

    async def _pull_once(self, mq: MessageQueue, sd: SubscriptionData, offset: int,
                         max_nums: int, sys_flag: int, suspend_ms: int,
                         timeout: float) -> PullResult:
        """``pullKernelImpl`` + ``processPullResult`` for one synchronous pull: from the
        broker id the queue's last answer suggested (suggestWhichBrokerId), the master at
        first, any address of the broker name when that one is gone (a slave while the
        master is down)."""
        inst = self._running()
        broker_id = self._pull_from_which_node.get(mq, MixAll.MASTER_ID)
        found = await inst.find_broker_addr_for_mq(mq, broker_id, False)
        if found.slave:
            sys_flag &= ~PullSysFlag.COMMIT_OFFSET
        check_broker_version(sd, mq.broker_name, found.version)
        # as upstream: subVersion 0 for TAG expressions, the subscription's own otherwise
        tag_type = not sd.expression_type or sd.expression_type == "TAG"
        header = PullMessageRequestHeader(
            consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id,
            queue_offset=offset, max_msg_nums=max_nums, sys_flag=sys_flag, commit_offset=0,
            suspend_timeout_millis=suspend_ms, subscription=sd.sub_string,
            sub_version=0 if tag_type else sd.sub_version,
            expression_type=sd.expression_type, bname=mq.broker_name)
        result = await inst.api.pull_message(found.addr, header, timeout)
        self._pull_from_which_node[mq] = result.suggest_which_broker_id
        return process_pull_result(mq, result, sd)

    # -- ConsumerHook -----------------------------------------------------------------------

    @property
    def message_model_name(self) -> str:
        return self.message_model.value

    @property
    def consume_type_name(self) -> str:
        return ConsumeType.CONSUME_ACTIVELY.value

    @property
    def consume_from_where_name(self) -> str:
        return ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET.value

    def subscriptions(self) -> Iterable[SubscriptionData]:
        return list(self._subscriptions.values())

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return False

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        return None

    def publish_topics(self) -> Iterable[str]:
        return []

    def update_topic_publish_info(self, topic: str, route: TopicRouteData) -> None:
        return None

    def check_transaction_state(self, addr: str, msg: MessageExt,
                                header: CheckTransactionStateRequestHeader) -> None:
        return None

    async def do_rebalance(self) -> None:
        return None

    async def persist_consumer_offset(self) -> None:
        await self.offset_store.persist_all(list(self.offset_store.clone_offset_table()))

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        for mq, off in offsets.items():
            if mq.topic == topic:
                self.offset_store.update_offset(mq, off, increase_only=False)

    def consumer_status(self, topic: str) -> dict[MessageQueue, int]:
        return self.offset_store.clone_offset_table(topic)

    def running_info(self) -> ConsumerRunningInfo:
        info = ConsumerRunningInfo()
        info.properties[ConsumerRunningInfo.PROP_CONSUME_TYPE] = ConsumeType.CONSUME_ACTIVELY.value
        info.subscription_set = sorted(self.subscriptions(), key=lambda s: s.topic)
        return info

    async def consume_message_directly(self, msg: MessageExt,
                                       broker_name: str | None) -> ConsumeMessageDirectlyResult:
        return ConsumeMessageDirectlyResult(consume_result="CR_THROW_EXCEPTION",
                                            remark="a pull consumer has no listener")


class PullConsumer(_ConsumerBase):
    """``DefaultMQPullConsumer``: explicit pulls by queue and offset."""

    def __init__(self, group: str, namesrv_addr: str | None = None, *,
                 config: ClientConfig | None = None, namespace: str | None = None,
                 instance_name: str | None = None,
                 message_model: MessageModel = MessageModel.CLUSTERING,
                 local_offset_dir: str | None = None) -> None:
        super().__init__(group, namesrv_addr, config, namespace, instance_name, message_model,
                         local_offset_dir)

    async def start(self) -> None:
        await self._start_base()

    async def shutdown(self) -> None:
        if self.state is not ServiceState.RUNNING:
            return
        self.state = ServiceState.SHUTDOWN_ALREADY
        await self._shutdown_base()

    async def __aenter__(self) -> PullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    def _sd(self, mq: MessageQueue, expression: Selector) -> SubscriptionData:
        try:
            return subscription_data(mq.topic, expression)
        except ValueError as exc:
            raise MQClientError(f"parse subscription error: {exc}") from exc

    async def pull(self, mq: MessageQueue, expression: Selector, offset: int, max_nums: int, *,
                   timeout: float | None = None) -> PullResult:
        """Pull once without waiting for new messages (NO_NEW_MSG when none).

        ``expression``: a TAG expression or a ``MessageSelector`` (SQL92 needs a broker with
        ``enablePropertyFilter=true``).

        Raises:
            MQClientError: bad arguments; MQBrokerError / RemotingError from the broker.
        """
        if offset < 0:
            raise MQClientError("offset < 0")
        if max_nums <= 0:
            raise MQClientError("maxNums <= 0")
        return await self._pull_once(mq, self._sd(mq, expression), offset, max_nums,
                                     PullSysFlag.build(False, False, True),
                                     BROKER_SUSPEND_MAX_TIME_MS,
                                     CONSUMER_PULL_TIMEOUT if timeout is None else timeout)

    async def pull_block_if_not_found(self, mq: MessageQueue, expression: Selector,
                                      offset: int, max_nums: int) -> PullResult:
        """Pull; the broker holds the request up to 20 s until a message arrives."""
        if offset < 0:
            raise MQClientError("offset < 0")
        return await self._pull_once(mq, self._sd(mq, expression), offset, max_nums,
                                     PullSysFlag.build(False, True, True),
                                     BROKER_SUSPEND_MAX_TIME_MS, CONSUMER_TIMEOUT_WHEN_SUSPEND)

    async def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        self._running()
        return await self.offset_store.read_offset(
            mq, ReadOffsetType.READ_FROM_STORE if from_store
            else ReadOffsetType.MEMORY_FIRST_THEN_STORE)

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        self._running()
        self.offset_store.update_offset(mq, offset, increase_only=False)


class _LitePullRebalance(RebalancePushImpl):
    """``RebalanceLitePullImpl``: the push rules for offsets, pull tasks instead of requests."""

    consume_type = ConsumeType.CONSUME_ACTIVELY

    async def message_queue_changed(self, topic: str, mq_all: set[MessageQueue],
                                    mq_divided: set[MessageQueue]) -> None:
        await self.instance.send_heartbeat_to_all_brokers()

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        store = self.consumer.offset_store
        await store.persist(mq)
        store.remove_offset(mq)
        return True


#: The largest ``timeout`` in seconds ``poll`` takes; longer waits go as ``timeout_ms``.
MAX_POLL_SECONDS = 60.0


def poll_wait_seconds(timeout: float | None, timeout_ms: float | None, default: float,
                      name: str = "poll") -> float:
    """The wait of ``poll(timeout=..., timeout_ms=...)`` in seconds.

    ``timeout`` is in seconds (asyncio's unit), ``timeout_ms`` in milliseconds (stock's
    ``DefaultLitePullConsumer.poll(long timeout)``); neither: ``default`` seconds.

    Raises:
        MQClientError: both given, a negative wait, or ``timeout`` above
            ``MAX_POLL_SECONDS``: ``poll(1000)`` is stock's one second, and would wait
            here for 1000 s.
    """
    if timeout is not None and timeout_ms is not None:
        raise MQClientError(f"{name}(): give timeout (seconds) or timeout_ms, not both")
    if timeout_ms is not None:
        if timeout_ms < 0:
            raise MQClientError(f"{name}(timeout_ms={timeout_ms!r}): must not be negative")
        return timeout_ms / 1000.0
    if timeout is None:
        return default
    if timeout < 0:
        raise MQClientError(f"{name}(timeout={timeout!r}): must not be negative")
    if timeout > MAX_POLL_SECONDS:
        raise MQClientError(
            f"{name}(timeout={timeout!r}): the timeout is in seconds, and {timeout:g} s looks "
            f"like stock's milliseconds: write {name}(timeout_ms={timeout:g}) for "
            f"{timeout / 1000:g} s (or seconds up to {MAX_POLL_SECONDS:g})")
    return float(timeout)


class LitePullConsumer(_ConsumerBase):
    """``DefaultLitePullConsumer``: ``poll()`` messages that background tasks pre-fetch.

    Args:
        pull_batch_size: messages per pull (10).
        pull_threshold_for_all: buffered messages across queues before pulls pause (10000).
        auto_commit: commit what ``poll`` returned (persisted every 5 s).
        poll_timeout: default ``poll`` wait in seconds (5; at most ``MAX_POLL_SECONDS``).
        poll_timeout_ms: the same in milliseconds (stock's ``pollTimeoutMillis``, 5000);
            give one of the two.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *,
                 config: ClientConfig | None = None, namespace: str | None = None,
                 instance_name: str | None = None,
                 message_model: MessageModel = MessageModel.CLUSTERING,
                 consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                 consume_timestamp: str | None = None,
                 allocate_strategy: AllocateStrategy | None = None,
                 pull_batch_size: int = 10, pull_threshold_for_all: int = 10000,
                 auto_commit: bool = True, poll_timeout: float | None = None,
                 poll_timeout_ms: float | None = None,
                 local_offset_dir: str | None = None) -> None:
        super().__init__(group, namesrv_addr, config, namespace, instance_name, message_model,
                         local_offset_dir)
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp or time.strftime(
            "%Y%m%d%H%M%S", time.localtime(time.time() - 1800))
        self.allocate_strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_all = pull_threshold_for_all
        self.auto_commit = auto_commit
        #: The default ``poll`` wait, in seconds.
        self.poll_timeout = poll_wait_seconds(poll_timeout, poll_timeout_ms, 5.0,
                                              "LitePullConsumer")
        self.consume_orderly = False
        self.pull_threshold_for_topic = -1
        self.pull_threshold_size_for_topic = -1
        self.pull_threshold_for_queue = 1000
        self.pull_threshold_size_for_queue = 100
        self._assigned: list[MessageQueue] | None = None
        self._rebalance: _LitePullRebalance | None = None
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._next_offset: dict[MessageQueue, int] = {}
        self._seek_gen: dict[MessageQueue, int] = {}
        self._paused: set[MessageQueue] = set()
        self._buffer: asyncio.Queue[tuple[MessageQueue, int, list[MessageExt]]] = asyncio.Queue(
            maxsize=max(1, pull_threshold_for_all // max(1, pull_batch_size)))
        self._consumed: dict[MessageQueue, int] = {}
        self._retired: set[asyncio.Task[None]] = set()  # cancelled, awaited at shutdown

    # -- configuration ----------------------------------------------------------------------

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        """Subscribe to ``topic`` by TAG expression or ``MessageSelector`` (see ``PushConsumer.subscribe``).

        Raises:
            MQClientError: subscribed and assigned, a bad topic name or an invalid expression.
        """
        if self._assigned is not None:
            raise MQClientError("Subscribe and assign are mutually exclusive.")
        Validators.check_topic(topic)
        full = self.config.with_namespace(topic)
        self._subscriptions[full] = subscription_data(full, expression)
        if self._rebalance is not None:
            self._rebalance.subscription_inner[full] = self._subscriptions[full]

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalance)."""
        if self._subscriptions and self._assigned is None:
            raise MQClientError("Subscribe and assign are mutually exclusive.")
        self._assigned = [MessageQueue(self.config.with_namespace(q.topic), q.broker_name,
                                       q.queue_id) for q in mqs]
        for mq in self._assigned:
            self._subscriptions.setdefault(mq.topic, build_subscription_data(mq.topic, "*"))
        if self.state is ServiceState.RUNNING:
            self._apply_assignment(set(self._assigned))

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        inst = await self._start_base()
        if self._assigned is None:
            rb = _LitePullRebalance(self.group, self.message_model, self.allocate_strategy,
                                    inst, self)
            rb.subscription_inner.update(self._subscriptions)
            self._rebalance = rb
            for topic in list(self._subscriptions):
                await inst.update_topic_route(topic)
            try:
                await inst.check_client_in_broker(self.group, self)
            except BaseException:
                await self.shutdown()
                raise
            await inst.send_heartbeat_to_all_brokers()
            inst.rebalance_immediately()
        else:
            await inst.send_heartbeat_to_all_brokers()
            self._apply_assignment(set(self._assigned))

    async def shutdown(self) -> None:
        if self.state is not ServiceState.RUNNING:
            return
        self.state = ServiceState.SHUTDOWN_ALREADY
        tasks = list(self._tasks.values()) + list(self._retired)
        self._tasks.clear()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._rebalance is not None:
            await self._rebalance.destroy()
        await self._shutdown_base()

    async def __aenter__(self) -> LitePullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    # -- rebalance hooks --------------------------------------------------------------------

    @property
    def subscribe_mode(self) -> bool:
        return self._assigned is None

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        rb = self._rebalance
        return rb is not None and topic in rb.subscription_inner and \
            topic not in rb.topic_subscribe_info_table

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if self._rebalance is not None and topic in self._rebalance.subscription_inner:
            self._rebalance.topic_subscribe_info_table[topic] = mqs

    async def do_rebalance(self) -> None:
        if self._rebalance is not None and self.state is ServiceState.RUNNING:
            await self._rebalance.do_rebalance(False)
            self._apply_assignment(set(self._rebalance.process_queue_table), from_rebalance=True)

    def dispatch_pull_request(self, req: PullRequest) -> None:
        self._next_offset[req.message_queue] = req.next_offset
        self._start_task(req.message_queue)

    def _apply_assignment(self, mqs: set[MessageQueue], from_rebalance: bool = False) -> None:
        for mq in list(self._tasks):
            if mq not in mqs:
                task = self._tasks.pop(mq)
                task.cancel()
                self._retired.add(task)
                task.add_done_callback(self._retired.discard)
                self._next_offset.pop(mq, None)
        for mq in mqs:
            if mq not in self._tasks and (not from_rebalance or mq in self._next_offset):
                self._start_task(mq)

    def _start_task(self, mq: MessageQueue) -> None:
        if mq in self._tasks or self.state is not ServiceState.RUNNING:
            return
        self._tasks[mq] = asyncio.create_task(self._pull_routine(mq), name=f"lite-pull[{mq}]")

    async def _initial_offset(self, mq: MessageQueue) -> int:
        assert self.instance is not None
        rb = self._rebalance or _LitePullRebalance(self.group, self.message_model,
                                                   self.allocate_strategy, self.instance, self)
        return await rb.compute_pull_from_where(mq)

    async def _pull_routine(self, mq: MessageQueue) -> None:
        sd = self._subscriptions.get(mq.topic) or build_subscription_data(mq.topic, "*")
        flag = PullSysFlag.build(False, True, True, lite_pull=True)
        while True:
            if mq not in self._next_offset:
                offset = await self._initial_offset(mq)
                if offset < 0:
                    await asyncio.sleep(1.0)  # upstream PULL_TIME_DELAY_MILLS_ON_EXCEPTION
                    continue
                self._next_offset[mq] = offset
            if mq in self._paused:
                await asyncio.sleep(1.0)  # upstream PULL_TIME_DELAY_MILLS_WHEN_PAUSE
                continue
            gen = self._seek_gen.get(mq, 0)
            offset = self._next_offset[mq]
            try:
                result = await self._pull_once(mq, sd, offset, self.pull_batch_size, flag,
                                               BROKER_SUSPEND_MAX_TIME_MS,
                                               CONSUMER_TIMEOUT_WHEN_SUSPEND)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("client.lite_pull.pull_failed", mq=str(mq), error=repr(exc))
                await asyncio.sleep(1.0)  # upstream PULL_TIME_DELAY_MILLS_ON_EXCEPTION
                continue
            if self._seek_gen.get(mq, 0) != gen:
                continue  # a seek happened meanwhile: this result is stale
            if result.status is PullStatus.FOUND and result.msg_found_list:
                await self._buffer.put((mq, gen, result.msg_found_list))
            if result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning("client.lite_pull.offset_illegal", mq=str(mq), offset=offset,
                            next=result.next_begin_offset)
            if self._seek_gen.get(mq, 0) == gen:
                self._next_offset[mq] = result.next_begin_offset

    # -- the application's API --------------------------------------------------------------

    async def poll(self, timeout: float | None = None, *,
                   timeout_ms: float | None = None) -> list[MessageExt]:
        """Messages of one pulled batch, or ``[]`` when none arrived in time.

        Args:
            timeout: the wait in **seconds** (``poll(1.0)``), at most ``MAX_POLL_SECONDS``.
            timeout_ms: the wait in **milliseconds**, stock's unit (``poll(timeout_ms=1000)``).
            Neither: ``poll_timeout`` (5 s).

        Raises:
            MQClientError: not started; both given, a negative wait, or ``timeout`` above
                ``MAX_POLL_SECONDS`` (stock's ``poll(1000)`` would wait 1000 s here).
        """
        budget = poll_wait_seconds(timeout, timeout_ms, self.poll_timeout)
        self._running()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        while True:
            remaining = deadline - loop.time()
            try:
                async with asyncio.timeout(max(remaining, 0)):
                    mq, gen, msgs = await self._buffer.get()
            except TimeoutError:
                return []
            if gen != self._seek_gen.get(mq, 0) or mq not in self._tasks:
                continue  # from before a seek, or a queue no longer ours
            nxt = msgs[-1].queue_offset + 1
            self._consumed[mq] = nxt
            if self.auto_commit:
                self.offset_store.update_offset(mq, nxt, increase_only=True)
            return msgs

    def _seek_state(self, mq: MessageQueue, offset: int) -> None:
        self._seek_gen[mq] = self._seek_gen.get(mq, 0) + 1
        self._next_offset[mq] = offset
        self.offset_store.update_offset(mq, offset, increase_only=False)
        task = self._tasks.pop(mq, None)
        if task is not None:
            # A held pull (up to 20 s) must not delay the new position: restart the task.
            task.cancel()
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)
            self._start_task(mq)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Next ``poll`` of ``mq`` starts at ``offset`` (must be within [min, max]).

        Raises:
            MQClientError: the queue is not assigned to us, or the offset is out of range.
        """
        inst = self._running()
        if mq not in self._tasks:
            raise MQClientError(f"The message queue is not in assigned list, message queue: {mq}")
        lo, hi = await inst.min_offset(mq), await inst.max_offset(mq)
        if not lo <= offset <= hi:
            raise MQClientError(f"Seek offset illegal, seek offset = {offset}, "
                                f"min offset = {lo}, max offset = {hi}")
        self._seek_state(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        inst = self._running()
        self._seek_state(mq, await inst.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        inst = self._running()
        self._seek_state(mq, await inst.max_offset(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        self._paused.update(mqs)

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        self._paused.difference_update(mqs)

    async def commit_sync(self) -> None:
        """Push the offsets of what ``poll`` returned to the brokers now."""
        self._running()
        for mq, off in list(self._consumed.items()):
            self.offset_store.update_offset(mq, off, increase_only=True)
            await self.offset_store.update_consume_offset_to_broker(mq, off, oneway=False)

    async def committed(self, mq: MessageQueue) -> int:
        self._running()
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    def assignment(self) -> set[MessageQueue]:
        return set(self._tasks)
