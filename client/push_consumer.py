"""PushConsumer: the push consumer's facade over its pull and consume services.

Upstream ``consumer.DefaultMQPushConsumer`` and ``impl.consumer.DefaultMQPushConsumerImpl``
(docs/PROTOCOL.md 4.2, 4.7, 4.9, 6.2, 6.4, 8). The services it runs live in
``client/push/``, one module per upstream class:

* ``push.pull_service.PullMessageService``: the **pull routine** and each pull's answer
  (flow control, FOUND / NO_NEW_MSG / NO_MATCHED_MSG / OFFSET_ILLEGAL);
* ``push.concurrently.ConsumeMessageConcurrentlyService`` or
  ``push.orderly.ConsumeMessageOrderlyService`` (chosen at ``start()`` by
  ``register_message_listener(..., orderly=)``): ``consume_thread_max`` **consume
  workers**, failed messages sent back or re-delivered, orderly locks;
* ``push.listener``: the statuses and contexts a listener sees (re-exported here).

This module keeps the public API (``PushConsumer`` and every name imported from here
before the split), configuration and its checks, the lifecycle, the client instance's
hooks (``ConsumerHook``: rebalance, offsets, running info, CONSUME_MESSAGE_DIRECTLY,
RESET_CONSUMER_CLIENT_OFFSET), sending a message back (CONSUMER_SEND_MSG_BACK, else a
direct send to ``%RETRY%<group>``), and the background work the services schedule:
one-off tasks (``_spawn``) and timers (``_later``, which do nothing once the consumer is
stopping).

Tasks and ownership (all created in ``start()``, all awaited in ``shutdown()``): the pull
routine, the consume workers, the orderly lock routine, one-off tasks and timers. The
commit offset of a queue is the lowest offset still cached (concurrent) or the end of
the last committed batch (orderly); offsets are persisted by the client instance every
5 s, piggy-backed on pulls, and at shutdown.

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
import inspect
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
from aiorocketmq.protocol.codes import MessageConst, MixAll
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.headers import CheckTransactionStateRequestHeader
from aiorocketmq.protocol.message import Message, MessageExt
from aiorocketmq.protocol.routine import ServiceState

from .allocate import AllocateMessageQueueAveragely, AllocateStrategy
from .config import ClientConfig
from .instance import FAQ_URL, MQClientInstance
from .offset_store import OffsetStore, open_offset_store
from .process_queue import ProcessQueue
from .producer import Producer, Validators
from .push.concurrently import ConsumeMessageConcurrentlyService
from .push.consume_service import (
    ConsumeMessageService,
    call_listener,
    reset_retry_and_namespace,
)
from .push.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageListener,
)
from .push.orderly import ConsumeMessageOrderlyService
from .push.pull_service import PullMessageService
from .rebalance import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    PullRequest,
    RebalancePushImpl,
    parse_consume_timestamp,
)
from .selector import Selector, subscription_data
from .trace import AsyncTraceDispatcher, Tracer

__all__ = [
    "PushConsumer",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyStatus",
    "ConsumeConcurrentlyContext",
    "ConsumeOrderlyContext",
    "MessageListener",
]

log = get_logger("aiorocketmq.client.push_consumer")

SEND_BACK_TIMEOUT = 5.0


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
        self._pull_service: PullMessageService | None = None
        self._consume_service: ConsumeMessageService | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._start_time_ms = 0

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
        self._pull_service = PullMessageService(self)
        self._consume_service = (ConsumeMessageOrderlyService(self) if self.consume_orderly
                                 else ConsumeMessageConcurrentlyService(self))
        self._pull_service.start()
        self._consume_service.start()
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
        if self._pull_service is not None:
            await self._pull_service.shutdown()
        consume = self._consume_service
        if consume is not None:  # running listeners finish (bounded), then the workers stop
            await consume.stop_workers(self.await_termination)
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if consume is not None:  # the thread pool; an orderly consumer unlocks its queues
            await consume.shutdown()
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
        failed = 0 if self._consume_service is None else self._consume_service.consume_failed
        for topic in self._subscriptions:
            info.status_table[topic] = ConsumeStatus(consume_failed_msgs=failed)
        return info

    async def consume_message_directly(self, msg: MessageExt,
                                       broker_name: str | None) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY (mqadmin ``consumeMessage``): run the listener once."""
        result = ConsumeMessageDirectlyResult(order=self.consume_orderly, auto_commit=True)
        mq = MessageQueue(msg.topic, broker_name or "", msg.queue_id)
        reset_retry_and_namespace(self.config, self.group, [msg])
        begin = time.monotonic()
        ctx: Any = ConsumeOrderlyContext(mq) if self.consume_orderly else ConsumeConcurrentlyContext(mq)
        try:
            executor = None if self._consume_service is None else self._consume_service.executor
            status = await call_listener(self._listener, self._listener_is_async, executor,
                                         [msg], ctx)
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

    # -- the services (client/push/) -------------------------------------------------------

    def dispatch_pull_request(self, req: PullRequest) -> None:
        """Queue a pull now (``executePullRequestImmediately``)."""
        if self._pull_service is not None:
            self._pull_service.dispatch(req)

    def _submit_consume(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
                        dispatch: bool) -> None:
        """Hand messages a pull just cached to the consume service."""
        if self._consume_service is not None:
            self._consume_service.submit(msgs, pq, mq, dispatch)

    # -- sending back (DefaultMQPushConsumerImpl.sendMessageBack) ----------------------------

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
