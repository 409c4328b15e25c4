"""PushConsumer: pull loop, concurrent and orderly consume services, retries.

Upstream ``consumer.DefaultMQPushConsumer``, ``impl.consumer.{DefaultMQPushConsumerImpl,
PullAPIWrapper,PullMessageService,ConsumeMessageConcurrentlyService,
ConsumeMessageOrderlyService}`` (docs/PROTOCOL.md 4.2, 4.7, 4.9, 6.2, 6.4, 8).

Tasks and ownership (all created in ``start()``, all awaited in ``shutdown()``):

* one **pull routine** serving a bounded queue of ``PullRequest``s (one per owned queue).
  Each pull is sent asynchronously (PULL_MESSAGE, sysFlag SUSPEND [+COMMIT_OFFSET when
  the in-memory offset is > 0], broker hold 15 s, client timeout 30 s); its answer is
  handled in the response callback, which caches the messages, hands them to the
  consume service and queues the next pull. Delayed re-pulls are timer handles owned by
  the consumer: 50 ms under flow control (cached count > ``pull_threshold_for_queue``,
  size > ``pull_threshold_size_for_queue`` MiB, or concurrent span >
  ``consume_concurrently_max_span``), 1 s when suspended or after an error, 20 ms after
  FLOW_CONTROL. FOUND / NO_NEW_MSG / NO_MATCHED_MSG / OFFSET_ILLEGAL are handled as
  upstream (OFFSET_ILLEGAL drops the queue and, 10 s later, stores the broker's offset
  and lets rebalance re-create it).
* ``consume_thread_max`` **consume workers** reading a bounded queue of consume
  requests. A listener may be a plain function (run in a thread pool of the same size)
  or a coroutine function. Concurrently: CONSUME_SUCCESS or RECONSUME_LATER (an
  exception or ``None`` counts as RECONSUME_LATER; the exception, or a return value that
  is not a status, is alerted: ``client.push_consumer.listener_failed`` with its
  traceback, ``listener_bad_status``, on stderr when the application configured no
  logging, ``aiorocketmq.logs``); failed messages of a clustering
  consumer go back to the broker with CONSUMER_SEND_MSG_BACK (delay level from the
  context, 0 = broker decides), falling back to a direct send to ``%RETRY%<group>``,
  and when both fail they are consumed again locally after 5 s. Orderly: LOCK_BATCH_MQ
  before a queue is pulled, re-lock every 20 s, one listener call at a time per queue in
  offset order, SUSPEND_CURRENT_QUEUE_A_MOMENT re-delivers after
  ``suspend_current_queue_time_ms``.
* the commit offset of a queue is the lowest offset still cached (concurrent) or the
  end of the last committed batch (orderly); offsets are persisted by the client
  instance every 5 s, piggy-backed on pulls, and at shutdown.

Listeners see messages of ``%RETRY%<group>`` with their original topic restored
(``resetRetryAndNamespace``). ``shutdown()``: stop pulling, let running listeners finish
within ``await_termination`` seconds (then cancel them), unlock orderly queues, persist
offsets, UNREGISTER_CLIENT, release the client instance. It always completes, also when
the broker is gone (each call is bounded by its timeout).
"""

# ASYNC109: ``timeout`` arguments are budgets handed to bounded waits.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import (
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeStatus,
    MessageQueue,
    SubscriptionData,
    TopicRouteData,
    build_subscription_data,
)
from aiorocketmq.protocol.codes import MessageConst, MixAll, PullSysFlag, ResponseCode
from aiorocketmq.protocol.errors import MQBrokerError, MQClientError
from aiorocketmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    PullMessageRequestHeader,
)
from aiorocketmq.protocol.message import Message, MessageExt

from .allocate import AllocateMessageQueueAveragely, AllocateStrategy
from .api import PullResult, PullStatus, process_pull_result
from .config import ClientConfig
from .instance import FAQ_URL, MQClientInstance, ServiceState
from .offset_store import OffsetStore, ReadOffsetType, open_offset_store
from .process_queue import REBALANCE_LOCK_INTERVAL_MS, ProcessQueue
from .producer import Producer, Validators
from .rebalance import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    PullRequest,
    RebalancePushImpl,
    parse_consume_timestamp,
)
from .selector import Selector, check_broker_version, subscription_data
from .trace import AsyncTraceDispatcher, Tracer
from .trace.data import ConsumeReturnType

__all__ = [
    "PushConsumer",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyStatus",
    "ConsumeConcurrentlyContext",
    "ConsumeOrderlyContext",
    "MessageListener",
]

log = get_logger("aiorocketmq.client.push_consumer")

PULL_DELAY_FLOW_CONTROL = 0.05  # PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
PULL_DELAY_SUSPEND = 1.0  # PULL_TIME_DELAY_MILLS_WHEN_SUSPEND
PULL_DELAY_BROKER_FLOW_CONTROL = 0.02  # FLOW_CONTROL response code
BROKER_SUSPEND_MAX_TIME_MS = 15_000
CONSUMER_TIMEOUT_WHEN_SUSPEND = 30.0
CONSUME_REQUEST_LATER = 5.0  # submitConsumeRequestLater
MAX_TIME_CONSUME_CONTINUOUSLY = 60.0  # orderly: yield the worker after this long
OFFSET_ILLEGAL_DELAY = 10.0
# Pull answers meaning the broker does not have this client's subscription (restarted).
_SUBSCRIPTION_LOST = frozenset({ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                ResponseCode.SUBSCRIPTION_NOT_LATEST})
SEND_BACK_TIMEOUT = 5.0
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    ROLLBACK = "ROLLBACK"
    COMMIT = "COMMIT"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


_CONSUME_SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
_CONSUME_START = MessageConst.PROPERTY_CONSUME_START_TIMESTAMP
_RETRY_TOPIC_KEY = MessageConst.PROPERTY_RETRY_TOPIC


class ConsumeConcurrentlyContext:
    """Per-call context: set ``delay_level_when_next_consume`` (-1 DLQ, 0 broker decides,
    >0 a level) or ``ack_index`` (messages after it are retried) to steer retries."""

    __slots__ = ("message_queue", "delay_level_when_next_consume", "ack_index")

    def __init__(self, message_queue: MessageQueue) -> None:
        self.message_queue = message_queue
        self.delay_level_when_next_consume = 0
        self.ack_index = 2**31 - 1


class ConsumeOrderlyContext:
    __slots__ = ("message_queue", "auto_commit", "suspend_current_queue_time_ms")

    def __init__(self, message_queue: MessageQueue) -> None:
        self.message_queue = message_queue
        self.auto_commit = True
        self.suspend_current_queue_time_ms = -1


MessageListener = Callable[[list[MessageExt], Any], Any]


CONSUME_TIMEOUT_S = 15 * 60  # consumeTimeout (15 minutes): a slower listener is TIME_OUT


def _return_type(status: object, raised: bool, began: float, *ok: object) -> ConsumeReturnType:
    """``ConsumeReturnType`` of one listener call, as the consume services work it out."""
    if status is None:
        return ConsumeReturnType.EXCEPTION if raised else ConsumeReturnType.RETURNNULL
    if time.monotonic() - began >= CONSUME_TIMEOUT_S:
        return ConsumeReturnType.TIME_OUT
    return ConsumeReturnType.SUCCESS if status in ok else ConsumeReturnType.FAILED


class _ConsumeRequest:
    __slots__ = ("msgs", "pq", "mq")

    def __init__(self, msgs: list[MessageExt] | None, pq: ProcessQueue, mq: MessageQueue) -> None:
        self.msgs = msgs  # None for an orderly request: the worker takes from the pq
        self.pq = pq
        self.mq = mq


class PushConsumer:
    """A RocketMQ push consumer (upstream ``DefaultMQPushConsumer``).

    Args:
        group: consumer group; ``subscribe`` before or after ``start``.
        namesrv_addr: ``"host:port;host:port"``.
        message_model: CLUSTERING (queues shared by the group) or BROADCASTING.
        consume_from_where / consume_timestamp: start of a queue without a stored offset;
            ``consume_timestamp`` is ``yyyyMMddHHmmss`` (default: 30 minutes ago).
        allocate_strategy: ``AllocateMessageQueueAveragely()`` by default.
        consume_thread_max: consume worker count (and thread-pool size for sync listeners).
        pull_batch_size, consume_message_batch_max_size, pull_threshold_for_queue,
        pull_threshold_size_for_queue (MiB), pull_threshold_for_topic / _size_for_topic
        (-1 = off), consume_concurrently_max_span, pull_interval_ms: upstream's knobs.
        max_reconsume_times: -1 means 16 (concurrent) / unlimited (orderly).
        suspend_current_queue_time_ms: orderly re-delivery delay.
        await_termination: seconds ``shutdown`` lets running listeners finish.
        local_offset_dir: base directory of broadcasting offsets.
        enable_msg_trace / trace_topic: record SubBefore / SubAfter trace records of every
            consumed message on ``trace_topic`` (default ``RMQ_SYS_TRACE_TOPIC``), as a stock
            consumer with ``enableMsgTrace`` (``client.trace``).
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        namespace: str | None = None,
        instance_name: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | None = None,
        allocate_strategy: AllocateStrategy | None = None,
        consume_thread_max: int = 20,
        pull_batch_size: int = 32,
        pull_interval_ms: int = 0,
        consume_message_batch_max_size: int = 1,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        pull_threshold_for_topic: int = -1,
        pull_threshold_size_for_topic: int = -1,
        consume_concurrently_max_span: int = 2000,
        max_reconsume_times: int = -1,
        suspend_current_queue_time_ms: int = 1000,
        post_subscription_when_pull: bool = False,
        await_termination: float = 10.0,
        local_offset_dir: str | None = None,
        enable_msg_trace: bool = False,
        trace_topic: str | None = None,
    ) -> None:
        self.config = (config or ClientConfig()).with_options(
            namesrv_addr=namesrv_addr, namespace=namespace, instance_name=instance_name)
        self.group = self.config.with_namespace(group)
        self.enable_msg_trace = enable_msg_trace
        self.trace_topic = trace_topic
        self._tracer: Tracer | None = None
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp or time.strftime(
            "%Y%m%d%H%M%S", time.localtime(time.time() - 1800))
        self.allocate_strategy: AllocateStrategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.consume_thread_max = consume_thread_max
        self.pull_batch_size = pull_batch_size
        self.pull_interval_ms = pull_interval_ms
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.pull_threshold_for_topic = pull_threshold_for_topic
        self.pull_threshold_size_for_topic = pull_threshold_size_for_topic
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self.max_reconsume_times = max_reconsume_times
        self.suspend_current_queue_time_ms = suspend_current_queue_time_ms
        self.post_subscription_when_pull = post_subscription_when_pull
        self.await_termination = await_termination
        self.local_offset_dir = local_offset_dir
        self.unit_mode = self.config.unit_mode

        self.state = ServiceState.CREATE_JUST
        self.consume_orderly = False
        self._listener: MessageListener | None = None
        self._listener_is_async = False
        self._subscriptions: dict[str, SubscriptionData] = {}
        self.instance: MQClientInstance | None = None
        self.rebalance: RebalancePushImpl | None = None
        self.offset_store: OffsetStore = OffsetStore(self.group)
        self._pause = False
        self._stopping = False
        self._pull_queue: asyncio.Queue[PullRequest] | None = None
        self._consume_queue: asyncio.Queue[_ConsumeRequest] | None = None
        self._pull_task: asyncio.Task[None] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pull_from_which_node: dict[MessageQueue, int] = {}
        self._start_time_ms = 0
        self._consume_ok = 0
        self._consume_failed = 0

    # -- configuration ----------------------------------------------------------------------

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        """Subscribe to ``topic`` with a TAG expression (``"A || B"``, ``"*"``) or a
        ``MessageSelector`` (``MessageSelector.by_sql("a > 5")``: the brokers must run
        with ``enablePropertyFilter=true``, which ``start()`` checks).

        Raises:
            MQClientError: a bad topic name or an invalid expression.
        """
        Validators.check_topic(topic)
        full = self.config.with_namespace(topic)
        try:
            sd = subscription_data(full, expression)
        except ValueError as exc:
            raise MQClientError(f"subscription exception: {exc}") from exc
        self._subscriptions[full] = sd
        if self.rebalance is not None:
            self.rebalance.subscription_inner[full] = sd
        if self.state is ServiceState.RUNNING:
            self._spawn(self._subscription_changed(), f"subscribe[{full}]")

    def unsubscribe(self, topic: str) -> None:
        full = self.config.with_namespace(topic)
        self._subscriptions.pop(full, None)
        if self.rebalance is not None:
            self.rebalance.subscription_inner.pop(full, None)

    async def _subscription_changed(self) -> None:
        inst = self.instance
        if inst is None:
            return
        for topic in list(self._subscriptions):
            await inst.update_topic_route(topic)
        await inst.send_heartbeat_to_all_brokers()
        inst.rebalance_immediately()

    def register_message_listener(self, listener: MessageListener, *, orderly: bool = False) -> None:
        """``listener(msgs, context)`` returns a Consume*Status; sync or ``async def``."""
        self._listener = listener
        self.consume_orderly = orderly
        self._listener_is_async = inspect.iscoroutinefunction(listener)

    def suspend(self) -> None:
        """Stop pulling until ``resume`` (cached messages are still consumed)."""
        self._pause = True

    def resume(self) -> None:
        self._pause = False
        if self.instance is not None:
            self.instance.rebalance_immediately()

    # -- lifecycle --------------------------------------------------------------------------

    def _check_config(self) -> None:
        Validators.check_group(self.group)
        if self.group == MixAll.DEFAULT_CONSUMER_GROUP:
            raise MQClientError("consumerGroup can not equal DEFAULT_CONSUMER, please specify "
                                f"another one.{FAQ_URL}")
        if self._listener is None:
            raise MQClientError(f"messageListener is null{FAQ_URL}")
        if not 1 <= self.consume_message_batch_max_size <= 1024:
            raise MQClientError("consumeMessageBatchMaxSize Out of range [1, 1024]")
        if not 1 <= self.pull_batch_size <= 1024:
            raise MQClientError("pullBatchSize Out of range [1, 1024]")
        if not 1 <= self.pull_threshold_for_queue <= 65535:
            raise MQClientError("pullThresholdForQueue Out of range [1, 65535]")
        if not 1 <= self.pull_threshold_size_for_queue <= 1024:
            raise MQClientError("pullThresholdSizeForQueue Out of range [1, 1024]")
        if not 1 <= self.consume_concurrently_max_span <= 65535:
            raise MQClientError("consumeConcurrentlyMaxSpan Out of range [1, 65535]")
        if not 1 <= self.consume_thread_max <= 1000:
            raise MQClientError("consumeThreadMax Out of range [1, 1000]")
        parse_consume_timestamp(self.consume_timestamp)

    async def start(self) -> None:
        """Join the client instance, start pulling and consuming.

        Raises:
            MQClientError: started before, bad configuration, no listener, or the group
                already registered in this client instance.
        """
        if self.state is not ServiceState.CREATE_JUST:
            raise MQClientError("The PushConsumer service state not OK, maybe started once, "
                                f"{self.state.value}{FAQ_URL}")
        self._check_config()
        self.state = ServiceState.START_FAILED
        if self.message_model is MessageModel.CLUSTERING:
            self.config = self.config.with_pid_instance_name()
            retry = MixAll.retry_topic(self.group)
            self._subscriptions[retry] = build_subscription_data(retry, "*")
        inst = await MQClientInstance.acquire(self.config)
        self.instance = inst
        try:
            self.rebalance = RebalancePushImpl(self.group, self.message_model,
                                               self.allocate_strategy, inst, self)
            self.rebalance.subscription_inner.update(self._subscriptions)
            self.offset_store = await open_offset_store(
                self.group, inst.client_id, inst,
                broadcasting=self.message_model is MessageModel.BROADCASTING,
                local_dir=self.local_offset_dir)
            if not inst.register_consumer(self.group, self):
                raise MQClientError(f"The consumer group[{self.group}] has been created before, "
                                    f"specify another name please.{FAQ_URL}")
        except BaseException:
            self.state = ServiceState.CREATE_JUST
            await inst.release()
            self.instance = None
            raise
        self._start_time_ms = time.time_ns() // 1_000_000
        self._pull_queue = asyncio.Queue(maxsize=65536)
        self._consume_queue = asyncio.Queue(maxsize=self.consume_thread_max * 64)
        if not self._listener_is_async:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                self.consume_thread_max, thread_name_prefix=f"consume-{self.group}")
        self._pull_task = asyncio.create_task(self._pull_routine(), name=f"pull[{self.group}]")
        for i in range(self.consume_thread_max):
            self._workers.append(asyncio.create_task(self._consume_routine(),
                                                     name=f"consume[{self.group}#{i}]"))
        if self.consume_orderly and self.message_model is MessageModel.CLUSTERING:
            self._spawn(self._lock_routine(), f"relock[{self.group}]")
        self.state = ServiceState.RUNNING
        for topic in list(self._subscriptions):
            await inst.update_topic_route(topic)
        try:
            await inst.check_client_in_broker(self.group, self)
            if self.enable_msg_trace:
                dispatcher = AsyncTraceDispatcher(self.group, "CONSUME", self.trace_topic,
                                                  self.config)
                await dispatcher.start()
                self._tracer = Tracer(dispatcher, self.group, self.config.without_namespace)
        except BaseException:
            # as DefaultMQPushConsumerImpl.start: a broker that cannot filter this way fails
            # the start (MQBrokerError with the broker's code and remark)
            await self.shutdown()
            raise
        await inst.send_heartbeat_to_all_brokers()
        inst.rebalance_immediately()
        log.info("client.push_consumer.started", group=self.group, client_id=inst.client_id,
                 model=self.message_model.value, orderly=self.consume_orderly)

    async def shutdown(self) -> None:
        """Ordered stop (module docstring). Idempotent."""
        if self.state is not ServiceState.RUNNING:
            return
        self.state = ServiceState.SHUTDOWN_ALREADY
        self._stopping = True
        inst = self.instance
        assert inst is not None and self.rebalance is not None
        for h in self._timers:
            h.cancel()
        self._timers.clear()
        if self._pull_task is not None:
            self._pull_task.cancel()
            await asyncio.gather(self._pull_task, return_exceptions=True)
        # Let running listeners finish (bounded), then stop the workers.
        workers = self._workers
        if workers and self._consume_queue is not None:
            _drain(self._consume_queue)
            try:
                async with asyncio.timeout(self.await_termination):
                    await self._consume_queue.join()
            except TimeoutError:
                log.warning("client.push_consumer.listeners_still_running", group=self.group,
                            await_termination=self.await_termination)
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        if self.consume_orderly and self.message_model is MessageModel.CLUSTERING:
            await self.rebalance.unlock_all(False)
        await self.persist_consumer_offset()
        await inst.unregister_consumer(self.group)
        await self.rebalance.destroy()
        if self._tracer is not None:
            await self._tracer.dispatcher.stop()
            self._tracer = None
        await inst.release()
        log.info("client.push_consumer.shutdown", group=self.group)

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    # -- owned background work --------------------------------------------------------------

    def _spawn(self, coro: Awaitable[Any], name: str) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("client.push_consumer.task_failed", task=task.get_name(),
                        error=repr(task.exception()))

    def _later(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        if self._stopping:
            return
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            self._timers.discard(handle)  # type: ignore[arg-type]
            if not self._stopping:
                fn(*args)

        handle = loop.call_later(delay, fire)
        self._timers.add(handle)

    # -- ConsumerHook (called by the client instance) ---------------------------------------

    @property
    def message_model_name(self) -> str:
        return self.message_model.value

    @property
    def consume_type_name(self) -> str:
        return ConsumeType.CONSUME_PASSIVELY.value

    @property
    def consume_from_where_name(self) -> str:
        return self.consume_from_where.value

    def subscriptions(self) -> Iterable[SubscriptionData]:
        if self.rebalance is not None:
            return list(self.rebalance.subscription_inner.values())
        return list(self._subscriptions.values())

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        if self.rebalance is None or topic not in self.rebalance.subscription_inner:
            return False
        return topic not in self.rebalance.topic_subscribe_info_table

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if self.rebalance is not None and topic in self.rebalance.subscription_inner:
            self.rebalance.topic_subscribe_info_table[topic] = mqs

    def publish_topics(self) -> Iterable[str]:
        return []

    def update_topic_publish_info(self, topic: str, route: TopicRouteData) -> None:
        return None

    def check_transaction_state(self, addr: str, msg: MessageExt,
                                header: CheckTransactionStateRequestHeader) -> None:
        return None

    async def do_rebalance(self) -> None:
        if self._pause or self.rebalance is None or self._stopping:
            return
        await self.rebalance.do_rebalance(self.consume_orderly)

    async def persist_consumer_offset(self) -> None:
        if self.rebalance is None:
            return
        await self.offset_store.persist_all(list(self.rebalance.process_queue_table))

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: drop the topic's queues, store the new offsets."""
        rb = self.rebalance
        if rb is None:
            return
        self.suspend()
        try:
            for mq, pq in list(rb.process_queue_table.items()):
                if mq.topic == topic and mq in offsets:
                    pq.dropped = True
                    pq.clear()
            for mq, pq in list(rb.process_queue_table.items()):
                off = offsets.get(mq)
                if mq.topic == topic and off is not None:
                    self.offset_store.update_offset(mq, off, increase_only=False)
                    await self.offset_store.persist(mq)
                    await rb.remove_unnecessary_message_queue(mq, pq)
                    rb.process_queue_table.pop(mq, None)
            for mq, off in offsets.items():
                if mq.topic == topic and mq not in rb.process_queue_table:
                    self.offset_store.update_offset(mq, off, increase_only=False)
                    await self.offset_store.update_consume_offset_to_broker(mq, off, True)
        finally:
            self.resume()

    def consumer_status(self, topic: str) -> dict[MessageQueue, int]:
        return self.offset_store.clone_offset_table(topic)

    def running_info(self) -> ConsumerRunningInfo:
        info = ConsumerRunningInfo()
        p = info.properties
        p[ConsumerRunningInfo.PROP_CONSUME_ORDERLY] = str(self.consume_orderly).lower()
        p[ConsumerRunningInfo.PROP_THREADPOOL_CORE_SIZE] = str(self.consume_thread_max)
        p[ConsumerRunningInfo.PROP_CONSUME_TYPE] = ConsumeType.CONSUME_PASSIVELY.value
        p[ConsumerRunningInfo.PROP_CONSUMER_START_TIMESTAMP] = str(self._start_time_ms)
        p["consumerGroup"] = self.group
        p["messageModel"] = self.message_model.value
        p["consumeFromWhere"] = self.consume_from_where.value
        p["pullBatchSize"] = str(self.pull_batch_size)
        p["consumeMessageBatchMaxSize"] = str(self.consume_message_batch_max_size)
        info.subscription_set = sorted(self.subscriptions(), key=lambda s: s.topic)
        if self.rebalance is not None:
            table = self.offset_store.clone_offset_table()
            for mq in sorted(self.rebalance.process_queue_table):
                pqi = self.rebalance.process_queue_table[mq].info()
                pqi.commit_offset = table.get(mq, 0)
                info.mq_table[mq] = pqi
        for topic in self._subscriptions:
            info.status_table[topic] = ConsumeStatus(consume_failed_msgs=self._consume_failed)
        return info

    async def consume_message_directly(self, msg: MessageExt,
                                       broker_name: str | None) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY (mqadmin ``consumeMessage``): run the listener once."""
        result = ConsumeMessageDirectlyResult(order=self.consume_orderly, auto_commit=True)
        mq = MessageQueue(msg.topic, broker_name or "", msg.queue_id)
        self._reset_retry_and_namespace([msg])
        begin = time.monotonic()
        ctx: Any = ConsumeOrderlyContext(mq) if self.consume_orderly else ConsumeConcurrentlyContext(mq)
        try:
            status = await self._call_listener([msg], ctx)
        except Exception as exc:
            result.consume_result = "CR_THROW_EXCEPTION"
            result.remark = repr(exc)
        else:
            if status is None:
                result.consume_result = "CR_RETURN_NULL"
            elif status in (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS):
                result.consume_result = "CR_SUCCESS"
            elif status is ConsumeOrderlyStatus.COMMIT:
                result.consume_result = "CR_COMMIT"
            elif status is ConsumeOrderlyStatus.ROLLBACK:
                result.consume_result = "CR_ROLLBACK"
            else:
                result.consume_result = "CR_LATER"
        result.spent_time_mills = int((time.monotonic() - begin) * 1000)
        return result

    # -- pull loop --------------------------------------------------------------------------

    def dispatch_pull_request(self, req: PullRequest) -> None:
        """Queue a pull now (``executePullRequestImmediately``)."""
        q = self._pull_queue
        if q is None or self._stopping:
            return
        try:
            q.put_nowait(req)
        except asyncio.QueueFull:
            self._later(PULL_DELAY_FLOW_CONTROL, self.dispatch_pull_request, req)

    def _pull_later(self, req: PullRequest, delay: float) -> None:
        self._later(delay, self.dispatch_pull_request, req)

    async def _pull_routine(self) -> None:
        q = self._pull_queue
        assert q is not None
        while True:
            req = await q.get()
            try:
                await self._pull_message(req)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("client.push_consumer.pull_failed", group=self.group,
                            mq=str(req.message_queue), error=repr(exc))
                self._pull_later(req, self.config.pull_time_delay_ms_when_exception / 1000)

    async def _pull_message(self, req: PullRequest) -> None:
        """``DefaultMQPushConsumerImpl.pullMessage``: checks, then one async PULL_MESSAGE."""
        pq = req.process_queue
        if pq.dropped:
            return
        pq.touch_pull()
        if self._pause:
            self._pull_later(req, PULL_DELAY_SUSPEND)
            return
        if pq.msg_count > self.pull_threshold_for_queue or \
                pq.msg_size / (1024 * 1024) > self.pull_threshold_size_for_queue:
            self._pull_later(req, PULL_DELAY_FLOW_CONTROL)
            return
        if not self.consume_orderly:
            if pq.max_span > self.consume_concurrently_max_span:
                self._pull_later(req, PULL_DELAY_FLOW_CONTROL)
                return
        else:
            if not pq.locked:
                self._pull_later(req, self.config.pull_time_delay_ms_when_exception / 1000)
                return
            if not req.previously_locked:
                assert self.rebalance is not None
                offset = await self.rebalance.compute_pull_from_where(req.message_queue)
                if offset < 0:
                    self._pull_later(req, self.config.pull_time_delay_ms_when_exception / 1000)
                    return
                req.previously_locked = True
                req.next_offset = offset
        assert self.rebalance is not None and self.instance is not None
        mq = req.message_queue
        sd = self.rebalance.subscription_inner.get(mq.topic)
        if sd is None:
            self._pull_later(req, self.config.pull_time_delay_ms_when_exception / 1000)
            return
        commit_offset = 0
        if self.message_model is MessageModel.CLUSTERING:
            commit_offset = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
        commit = commit_offset > 0
        sub_expression = sd.sub_string if self.post_subscription_when_pull and \
            not sd.class_filter_mode else None
        inst = self.instance
        broker_id = self._pull_from_which_node.get(mq, MixAll.MASTER_ID)
        found = inst.find_broker_address_in_subscribe(mq.broker_name, broker_id, False)
        if found is None:
            await inst.update_topic_route(mq.topic)
            found = inst.find_broker_address_in_subscribe(mq.broker_name, broker_id, False)
        if found is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        if found.slave:
            commit = False
        check_broker_version(sd, mq.broker_name, found.version)
        header = PullMessageRequestHeader(
            consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id,
            queue_offset=req.next_offset, max_msg_nums=self.pull_batch_size,
            sys_flag=PullSysFlag.build(commit, True, sub_expression is not None),
            commit_offset=commit_offset if commit_offset > 0 else 0,
            suspend_timeout_millis=BROKER_SUSPEND_MAX_TIME_MS,
            subscription=sub_expression, sub_version=sd.sub_version,
            expression_type=sd.expression_type, bname=mq.broker_name)

        def on_result(result: PullResult | None, exc: BaseException | None) -> None:
            if self._stopping:
                return
            if result is not None:
                try:
                    self._on_pull_success(req, sd, result)
                except Exception as err:
                    log.exception("client.push_consumer.pull_result_failed", mq=str(mq))
                    self._on_pull_exception(req, err)
            else:
                assert exc is not None
                self._on_pull_exception(req, exc)

        await inst.api.pull_message_async(found.addr, header, CONSUMER_TIMEOUT_WHEN_SUSPEND,
                                          on_result)

    def _on_pull_exception(self, req: PullRequest, exc: BaseException) -> None:
        if not req.message_queue.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            log.warning("client.push_consumer.pull_exception", group=self.group,
                        mq=str(req.message_queue), error=repr(exc))
        if isinstance(exc, MQBrokerError) and exc.code == ResponseCode.FLOW_CONTROL:
            self._pull_later(req, PULL_DELAY_BROKER_FLOW_CONTROL)
            return
        if isinstance(exc, MQBrokerError) and exc.code in _SUBSCRIPTION_LOST \
                and self.instance is not None:
            self.instance.heartbeat_soon()  # the broker learns the subscription again
        self._pull_later(req, self.config.pull_time_delay_ms_when_exception / 1000)

    def _on_pull_success(self, req: PullRequest, sd: SubscriptionData, result: PullResult) -> None:
        mq = req.message_queue
        pq = req.process_queue
        self._pull_from_which_node[mq] = result.suggest_which_broker_id
        result = process_pull_result(mq, result, sd)
        status = result.status
        if status is PullStatus.FOUND:
            prev = req.next_offset
            req.next_offset = result.next_begin_offset
            msgs = result.msg_found_list
            if not msgs:
                self.dispatch_pull_request(req)
                return
            dispatch = pq.put_messages(msgs)
            self._submit_consume(msgs, pq, mq, dispatch)
            if self.pull_interval_ms > 0:
                self._pull_later(req, self.pull_interval_ms / 1000)
            else:
                self.dispatch_pull_request(req)
            if result.next_begin_offset < prev or msgs[0].queue_offset < prev:
                log.warning("client.push_consumer.pull_offset_went_back", mq=str(mq), prev=prev,
                            next=result.next_begin_offset, first=msgs[0].queue_offset)
        elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            req.next_offset = result.next_begin_offset
            if pq.msg_count == 0:  # correctTagsOffset
                self.offset_store.update_offset(mq, req.next_offset, True)
            self.dispatch_pull_request(req)
        else:  # OFFSET_ILLEGAL
            log.warning("client.push_consumer.offset_illegal", group=self.group, mq=str(mq),
                        offset=req.next_offset, next=result.next_begin_offset)
            req.next_offset = result.next_begin_offset
            pq.dropped = True
            self._spawn(self._offset_illegal_later(req), f"offset-illegal[{mq}]")

    async def _offset_illegal_later(self, req: PullRequest) -> None:
        await asyncio.sleep(OFFSET_ILLEGAL_DELAY)  # upstream's delayed correction task
        mq = req.message_queue
        self.offset_store.update_offset(mq, req.next_offset, False)
        await self.offset_store.persist(mq)
        if self.rebalance is not None:
            self.rebalance.remove_process_queue(mq)
        log.warning("client.push_consumer.offset_illegal_fixed", group=self.group, mq=str(mq),
                    offset=req.next_offset)

    # -- consume services -------------------------------------------------------------------

    def _submit_consume(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
                        dispatch: bool) -> None:
        if self.consume_orderly:
            if dispatch:
                self._enqueue_consume(_ConsumeRequest(None, pq, mq))
            return
        size = self.consume_message_batch_max_size
        for i in range(0, len(msgs), size):
            self._enqueue_consume(_ConsumeRequest(msgs[i:i + size], pq, mq))

    def _enqueue_consume(self, request: _ConsumeRequest) -> None:
        q = self._consume_queue
        if q is None or self._stopping:
            return
        try:
            q.put_nowait(request)
        except asyncio.QueueFull:
            self._later(CONSUME_REQUEST_LATER, self._enqueue_consume, request)

    async def _consume_routine(self) -> None:
        q = self._consume_queue
        assert q is not None
        while True:
            request = await q.get()
            try:
                if request.msgs is None:
                    await self._consume_orderly(request)
                else:
                    await self._consume_concurrently(request)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("client.push_consumer.consume_request_failed", group=self.group,
                              mq=str(request.mq))
            finally:
                q.task_done()

    async def _call_listener(self, msgs: list[MessageExt], ctx: Any) -> Any:
        listener = self._listener
        assert listener is not None
        if self._listener_is_async:
            return await listener(msgs, ctx)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, listener, msgs, ctx)

    def _reset_retry_and_namespace(self, msgs: list[MessageExt]) -> None:
        retry_topic: str | None = None
        namespace = self.config.namespace
        for m in msgs:
            real = m.properties.get(_RETRY_TOPIC_KEY)
            if real is not None:
                if retry_topic is None:
                    retry_topic = MixAll.retry_topic(self.group)
                if m.topic == retry_topic:
                    m.topic = real
            if namespace:
                m.topic = self.config.without_namespace(m.topic)

    async def _consume_concurrently(self, request: _ConsumeRequest) -> None:
        pq, mq = request.pq, request.mq
        msgs = request.msgs
        assert msgs is not None
        if pq.dropped:
            return
        ctx = ConsumeConcurrentlyContext(mq)
        self._reset_retry_and_namespace(msgs)
        tracer = self._tracer
        trace = tracer.consume_before(msgs) if tracer is not None else None
        began = time.monotonic()
        now = str(time.time_ns() // 1_000_000)
        for m in msgs:
            m.properties[_CONSUME_START] = now
        raised = False
        try:
            if self._listener_is_async:  # awaited here: no _call_listener frame per call
                status = await self._listener(msgs, ctx)  # type: ignore[misc]
            else:
                status = await self._call_listener(msgs, ctx)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The application's own code: on stderr even with no logging configured.
            log.alert(logging.ERROR, "client.push_consumer.listener_failed", group=self.group,
                      mq=str(mq), msg_ids=[m.msg_id for m in msgs], exc_info=True)
            status = None
            raised = True
        if tracer is not None:
            tracer.consume_after(trace, msgs, status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
                                 _return_type(status, raised, began,
                                              ConsumeConcurrentlyStatus.CONSUME_SUCCESS))
        if not isinstance(status, ConsumeConcurrentlyStatus):
            if not raised:  # None too: a listener that forgot to return a status
                log.alert(logging.WARNING, "client.push_consumer.listener_bad_status",
                          group=self.group, status=repr(status),
                          result="RECONSUME_LATER: the messages will be delivered again")
            status = ConsumeConcurrentlyStatus.RECONSUME_LATER
        if pq.dropped:
            log.warning("client.push_consumer.dropped_after_consume", group=self.group, mq=str(mq))
            return
        if status is _CONSUME_SUCCESS and ctx.ack_index >= len(msgs) - 1 and msgs:
            # Every message acknowledged (the usual case): nothing to send back, so the
            # result is settled here without a coroutine (_process_concurrent_result's
            # success branch).
            self._consume_ok += len(msgs)
            self._settle(pq, mq, msgs)
            return
        await self._process_concurrent_result(status, ctx, request)

    async def _process_concurrent_result(self, status: ConsumeConcurrentlyStatus,
                                         ctx: ConsumeConcurrentlyContext,
                                         request: _ConsumeRequest) -> None:
        msgs = request.msgs
        assert msgs is not None
        if not msgs:
            return
        ack = ctx.ack_index
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            ack = min(ack, len(msgs) - 1)
            self._consume_ok += ack + 1
            self._consume_failed += len(msgs) - ack - 1
        else:
            ack = -1
            self._consume_failed += len(msgs)
        failed: list[MessageExt] = []
        if self.message_model is MessageModel.BROADCASTING:
            for m in msgs[ack + 1:]:
                log.warning("client.push_consumer.broadcast_consume_failed_dropped", msg_id=m.msg_id)
        else:
            for m in msgs[ack + 1:]:
                if not await self.send_message_back(m, ctx.delay_level_when_next_consume,
                                                    ctx.message_queue.broker_name):
                    m.reconsume_times += 1
                    failed.append(m)
        done = msgs if not failed else [m for m in msgs if m not in failed]
        if failed:
            self._later(CONSUME_REQUEST_LATER, self._enqueue_consume,
                        _ConsumeRequest(failed, request.pq, request.mq))
        self._settle(request.pq, request.mq, done)

    def _settle(self, pq: ProcessQueue, mq: MessageQueue, done: list[MessageExt]) -> None:
        """``done`` leaves the process queue; the queue's consume offset moves to what is left."""
        offset = pq.remove_message(done)
        if offset >= 0 and not pq.dropped:
            self.offset_store.update_offset(mq, offset, True)

    @property
    def effective_max_reconsume_times(self) -> int:
        if self.max_reconsume_times == -1:
            return 2**31 - 1 if self.consume_orderly else 16
        return self.max_reconsume_times

    async def send_message_back(self, msg: MessageExt, delay_level: int,
                                broker_name: str | None) -> bool:
        """CONSUMER_SEND_MSG_BACK, else a direct send to ``%RETRY%<group>``; False if both fail."""
        inst = self.instance
        assert inst is not None
        max_times = 16 if self.max_reconsume_times == -1 else self.max_reconsume_times
        msg.topic = self.config.with_namespace(msg.topic)
        try:
            addr = inst.find_broker_address_in_publish(broker_name) if broker_name else None
            addr = addr or msg.store_host
            await inst.api.consumer_send_message_back(addr, broker_name or "", msg, self.group,
                                                      delay_level, max_times, SEND_BACK_TIMEOUT)
            return True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("client.push_consumer.send_back_failed", group=self.group, msg_id=msg.msg_id,
                        error=repr(exc))
        try:
            await self._resend_to_retry_topic(msg, 3 + msg.reconsume_times,
                                              msg.reconsume_times + 1, max_times)
            return True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("client.push_consumer.retry_send_failed", group=self.group, msg_id=msg.msg_id,
                        error=repr(exc))
            return False
        finally:
            msg.topic = self.config.without_namespace(msg.topic)

    async def _resend_to_retry_topic(self, msg: MessageExt, delay_level: int,
                                     reconsume_time: int, max_times: int) -> None:
        producer = self._get_inner_producer()
        new = Message(MixAll.retry_topic(self.group), msg.body, flag=msg.flag,
                      properties=msg.properties)
        origin = msg.properties.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID)
        new.properties[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] = origin or msg.msg_id
        new.properties[MessageConst.PROPERTY_RETRY_TOPIC] = msg.topic
        new.properties[MessageConst.PROPERTY_RECONSUME_TIME] = str(reconsume_time)
        new.properties[MessageConst.PROPERTY_MAX_RECONSUME_TIMES] = str(max_times)
        new.properties.pop(MessageConst.PROPERTY_TRANSACTION_PREPARED, None)
        new.delay_time_level = delay_level
        await producer.send(new)

    def _get_inner_producer(self) -> Producer:
        """The instance's CLIENT_INNER_PRODUCER (upstream ``getDefaultMQProducer``), which
        ``MQClientInstance.acquire`` started and its shutdown stops."""
        producer = None if self.instance is None else self.instance.inner_producer
        if producer is None:
            raise MQClientError(f"cannot resend for {self.group}: the client instance has no "
                                "inner producer (not started or shut down)")
        return producer

    async def _consume_orderly(self, request: _ConsumeRequest) -> None:
        """``ConsumeMessageOrderlyService.ConsumeRequest.run`` for one queue."""
        pq, mq = request.pq, request.mq
        if pq.dropped:
            return
        clustering = self.message_model is MessageModel.CLUSTERING
        if clustering and (not pq.locked or pq.is_lock_expired()):
            self._try_lock_later_and_reconsume(pq, mq, 0.1)
            return
        begin = time.monotonic()
        batch = self.consume_message_batch_max_size
        while True:
            if pq.dropped:
                return
            if clustering and (not pq.locked or pq.is_lock_expired()):
                self._try_lock_later_and_reconsume(pq, mq, 0.01)
                return
            if time.monotonic() - begin > MAX_TIME_CONSUME_CONTINUOUSLY:
                self._later(0.01, self._enqueue_consume, _ConsumeRequest(None, pq, mq))
                return
            msgs = pq.take_messages(batch)
            if not msgs:
                return
            self._reset_retry_and_namespace(msgs)
            ctx = ConsumeOrderlyContext(mq)
            tracer = self._tracer
            trace = tracer.consume_before(msgs) if tracer is not None else None
            began = time.monotonic()
            raised = False
            async with pq.consume_lock:
                if pq.dropped:
                    return
                try:
                    status = await self._call_listener(msgs, ctx)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.alert(logging.ERROR, "client.push_consumer.listener_failed",
                              group=self.group, mq=str(mq), exc_info=True)
                    status = None
                    raised = True
            if tracer is not None:
                tracer.consume_after(
                    trace, msgs, status in (ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.COMMIT),
                    _return_type(status, raised, began, ConsumeOrderlyStatus.SUCCESS,
                                 ConsumeOrderlyStatus.COMMIT, ConsumeOrderlyStatus.ROLLBACK))
            if not isinstance(status, ConsumeOrderlyStatus):
                if not raised:
                    log.alert(logging.WARNING, "client.push_consumer.listener_bad_status",
                              group=self.group, status=repr(status),
                              result="SUSPEND_CURRENT_QUEUE_A_MOMENT: delivered again")
                status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            if not await self._process_orderly_result(msgs, status, ctx, pq, mq):
                return

    async def _process_orderly_result(self, msgs: list[MessageExt], status: ConsumeOrderlyStatus,
                                      ctx: ConsumeOrderlyContext, pq: ProcessQueue,
                                      mq: MessageQueue) -> bool:
        commit_offset = -1
        cont = True
        if ctx.auto_commit:
            if status in (ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.COMMIT,
                          ConsumeOrderlyStatus.ROLLBACK):
                commit_offset = pq.commit()
                self._consume_ok += len(msgs)
            else:
                self._consume_failed += len(msgs)
                if await self._check_reconsume_times(msgs):
                    pq.make_message_to_consume_again(msgs)
                    self._suspend_later(pq, mq, ctx)
                    cont = False
                else:
                    commit_offset = pq.commit()
        else:
            if status is ConsumeOrderlyStatus.COMMIT or status is ConsumeOrderlyStatus.SUCCESS:
                commit_offset = pq.commit()
            elif status is ConsumeOrderlyStatus.ROLLBACK:
                pq.rollback()
                self._suspend_later(pq, mq, ctx)
                cont = False
            else:
                if await self._check_reconsume_times(msgs):
                    pq.make_message_to_consume_again(msgs)
                    self._suspend_later(pq, mq, ctx)
                    cont = False
        if commit_offset >= 0 and not pq.dropped:
            self.offset_store.update_offset(mq, commit_offset, False)
        return cont

    def _suspend_later(self, pq: ProcessQueue, mq: MessageQueue, ctx: ConsumeOrderlyContext) -> None:
        delay_ms = ctx.suspend_current_queue_time_ms
        if delay_ms < 10 or delay_ms > 30000:
            delay_ms = self.suspend_current_queue_time_ms
        delay_ms = min(max(delay_ms, 10), 30000)
        self._later(delay_ms / 1000, self._enqueue_consume, _ConsumeRequest(None, pq, mq))

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """True: suspend and retry locally; False: every message went to the retry topic."""
        suspend = False
        limit = self.effective_max_reconsume_times
        for m in msgs:
            if m.reconsume_times >= limit:
                m.properties[MessageConst.PROPERTY_RECONSUME_TIME] = str(m.reconsume_times)
                try:
                    await self._resend_to_retry_topic(m, 3 + m.reconsume_times, m.reconsume_times,
                                                      limit)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("client.push_consumer.orderly_send_back_failed", msg_id=m.msg_id,
                                error=repr(exc))
                    suspend = True
                    m.reconsume_times += 1
            else:
                suspend = True
                m.reconsume_times += 1
        return suspend

    def _try_lock_later_and_reconsume(self, pq: ProcessQueue, mq: MessageQueue,
                                      delay: float) -> None:
        async def relock() -> None:
            assert self.rebalance is not None
            ok = await self.rebalance.lock(mq)
            self._later(0.01 if ok else 3.0, self._enqueue_consume, _ConsumeRequest(None, pq, mq))

        self._later(delay, lambda: self._spawn(relock(), f"relock[{mq}]"))

    async def _lock_routine(self) -> None:
        await asyncio.sleep(1.0)
        while True:
            if self.rebalance is not None:
                try:
                    await self.rebalance.lock_all()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("client.push_consumer.lock_all_failed", group=self.group, error=repr(exc))
            await asyncio.sleep(REBALANCE_LOCK_INTERVAL_MS / 1000)


def _drain(q: asyncio.Queue[Any]) -> None:
    """Throw away queued (not yet started) work so ``join`` waits only for running items."""
    while True:
        try:
            q.get_nowait()
        except asyncio.QueueEmpty:
            return
        q.task_done()
