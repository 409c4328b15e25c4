"""Producer: send messages sync, async or oneway, single or batch, to a chosen queue.

Upstream ``producer.DefaultMQProducer``, ``impl.producer.{DefaultMQProducerImpl,
TopicPublishInfo}``, ``latency.{MQFaultStrategy,LatencyFaultToleranceImpl}``,
``Validators`` and ``producer.selector.*`` (docs/PROTOCOL.md 4.1, 5.1, 5.3-5.5, 6.7, 8).

Send flow (``send_default_impl``): validate the message; find the topic's publish info
(route from the nameserver, else the ``create_topic_key`` (TBW102) route clamped to
``default_topic_queue_nums`` queues); then up to ``1 + retry_times_when_send_failed``
attempts (async: ``retry_times_when_send_async_failed``, transport failures only), each
on a queue picked round-robin avoiding the broker that failed last (or by the latency
fault strategy when ``send_latency_fault_enable``), all inside **one deadline**:
``timeout`` (default ``send_msg_timeout_ms``) covers the route lookup and every attempt.
An attempt is retried on a transport error or a broker code whose error class is
``retriable`` (17, 14, 1, 16, 204, 205); any other broker code is raised at once.

Per message: ``UNIQ_KEY`` set if absent (batch members each get one), bodies of at
least ``compress_msg_body_over_howmuch`` bytes zlib-compressed (sysFlag ``0x1|0x300``;
the caller's ``Message.body`` is left as it was), ``TRAN_MSG=true`` adds the PREPARED
sysFlag, and SEND_MESSAGE_V2 goes out with ``c=TBW102``, ``d=4``, ``n=brokerName``.

Cancelling ``await send(...)`` abandons the send (the broker may still store it);
cancelling the future from ``send_async`` does the same. ``shutdown()`` waits for
async sends already started (each bounded by its timeout), then unregisters the group
and releases the shared client instance.
"""

# ASYNC109: ``timeout`` is the user's budget for a whole send, converted once to a deadline.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import random
import re
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, cast

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import MessageQueue, TopicRouteData
from aiorocketmq.protocol.codes import (
    MessageConst,
    MessageSysFlag,
    MixAll,
    ResponseCode,
    SystemTopic,
)
from aiorocketmq.protocol.errors import (
    MQBrokerError,
    MQClientError,
    RemotingError,
    RemotingTimeoutError,
)
from aiorocketmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    SendMessageRequestHeaderV2,
)
from aiorocketmq.protocol.javautil import java_string_hash
from aiorocketmq.protocol.message import (
    Message,
    MessageExt,
    UniqIdGenerator,
    compress_body,
    encode_batch,
    encode_properties,
)
from aiorocketmq.protocol.routine import ServiceState

from .api import SendResult, SendStatus
from .config import ClientConfig
from .instance import FAQ_URL, MQClientInstance
from .trace import AsyncTraceDispatcher, TraceContext, Tracer

__all__ = [
    "Producer",
    "Validators",
    "TopicPublishInfo",
    "route_to_publish_info",
    "LatencyFaultTolerance",
    "MQFaultStrategy",
    "MessageQueueSelector",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendCallback",
]

log = get_logger("aiorocketmq.client.producer")

_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_TIMER_KEYS = (MessageConst.PROPERTY_TIMER_DELAY_SEC, MessageConst.PROPERTY_TIMER_DELAY_MS,
               MessageConst.PROPERTY_TIMER_DELIVER_MS)
_VALID_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")
_TIMER_KEY_SET = frozenset(_TIMER_KEYS)
_JAVA_BLANK = "".join(chr(c) for c in range(0x21))
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255

SendCallback = Callable[[SendResult | None, BaseException | None], None]


# --- validation (upstream Validators) -----------------------------------------------------


class Validators:
    """Name and message checks; each failure is an ``MQClientError`` with upstream's text."""

    @staticmethod
    def check_group(group: str) -> None:
        if not group or not group.strip(_JAVA_BLANK):
            raise MQClientError("the specified group is blank")
        if len(group) > GROUP_MAX_LENGTH:
            raise MQClientError("the specified group is longer than group max length 255.")
        if not _VALID_NAME.match(group):
            raise MQClientError(f"the specified group[{group}] contains illegal characters, "
                                "allowing only ^[%|a-zA-Z0-9_-]+$")

    @staticmethod
    def check_topic(topic: str) -> None:
        if not topic or not topic.strip(_JAVA_BLANK):
            raise MQClientError("The specified topic is blank")
        if len(topic) > TOPIC_MAX_LENGTH:
            raise MQClientError(
                f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
        if not _VALID_NAME.match(topic):
            raise MQClientError(f"The specified topic[{topic}] contains illegal characters, "
                                "allowing only ^[%|a-zA-Z0-9_-]+$")

    @staticmethod
    def check_message(msg: Message | None, max_message_size: int) -> None:
        if msg is None:
            raise MQClientError(f"CODE: {ResponseCode.MESSAGE_ILLEGAL} DESC: the message is null")
        Validators.check_topic(msg.topic)
        if msg.topic in SystemTopic.NOT_ALLOWED_SEND:
            raise MQClientError(f"Sending message to topic[{msg.topic}] is forbidden.")
        if msg.body is None:
            raise MQClientError(
                f"CODE: {ResponseCode.MESSAGE_ILLEGAL} DESC: the message body is null")
        if len(msg.body) == 0:
            raise MQClientError(
                f"CODE: {ResponseCode.MESSAGE_ILLEGAL} DESC: the message body length is zero")
        if len(msg.body) > max_message_size:
            raise MQClientError(f"CODE: {ResponseCode.MESSAGE_ILLEGAL} DESC: the message body "
                                f"size over max value, MAX: {max_message_size}")


# --- publish info and queue choice --------------------------------------------------------


class _Index:
    """``ThreadLocalIndex``: a counter starting at a random value."""

    __slots__ = ("_n",)

    def __init__(self) -> None:
        self._n = random.randrange(1 << 31)

    def next(self) -> int:
        self._n = (self._n + 1) & 0x7FFFFFFF
        return self._n


class TopicPublishInfo:
    """The writable queues of a topic and the round-robin position over them."""

    __slots__ = ("order_topic", "have_topic_router_info", "message_queue_list",
                 "send_which_queue", "route")

    def __init__(self, message_queue_list: list[MessageQueue] | None = None,
                 route: TopicRouteData | None = None, order_topic: bool = False) -> None:
        self.order_topic = order_topic
        self.have_topic_router_info = False
        self.message_queue_list: list[MessageQueue] = message_queue_list or []
        self.send_which_queue = _Index()
        self.route = route

    def ok(self) -> bool:
        return bool(self.message_queue_list)

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """Next queue round robin; with ``last_broker_name``, one of another broker if any."""
        mqs = self.message_queue_list
        if last_broker_name is not None:
            for _ in range(len(mqs)):
                mq = mqs[self.send_which_queue.next() % len(mqs)]
                if mq.broker_name != last_broker_name:
                    return mq
        return mqs[self.send_which_queue.next() % len(mqs)]

    def queue_id_by_broker(self, broker_name: str) -> int:
        """Write queue count of ``broker_name`` in the route, -1 if absent."""
        if self.route is not None:
            for qd in self.route.queue_datas:
                if qd.broker_name == broker_name:
                    return qd.write_queue_nums
        return -1

    def __repr__(self) -> str:
        return (f"TopicPublishInfo(order_topic={self.order_topic}, "
                f"queues={len(self.message_queue_list)}, routed={self.have_topic_router_info})")


def route_to_publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    """``topicRouteData2TopicPublishInfo``: writable queues of brokers that have a master,
    or the ``orderTopicConf`` queues for an ordered topic."""
    info = TopicPublishInfo(route=route)
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            name, _, nums = item.partition(":")
            for i in range(int(nums or 0)):
                info.message_queue_list.append(MessageQueue(topic, name, i))
        info.order_topic = True
        return info
    brokers = {bd.broker_name: bd for bd in route.broker_datas}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if not qd.perm & 2:  # PermName.isWriteable
            continue
        bd = brokers.get(qd.broker_name)
        if bd is None or MixAll.MASTER_ID not in bd.broker_addrs:
            continue
        for i in range(qd.write_queue_nums):
            info.message_queue_list.append(MessageQueue(topic, qd.broker_name, i))
    return info


class _FaultItem:
    __slots__ = ("name", "current_latency", "start_timestamp")

    def __init__(self, name: str) -> None:
        self.name = name
        self.current_latency = 0
        self.start_timestamp = 0.0

    def available(self, now: float) -> bool:
        return now >= self.start_timestamp

    def sort_key(self, now: float) -> tuple[int, int, float]:
        return (0 if self.available(now) else 1, self.current_latency, self.start_timestamp)


class LatencyFaultTolerance:
    """``LatencyFaultToleranceImpl``: brokers out of use until a deadline (monotonic ms)."""

    def __init__(self, clock: Callable[[], float] = lambda: time.monotonic() * 1000) -> None:
        self._items: dict[str, _FaultItem] = {}
        self._which_item_worst = _Index()
        self._clock = clock

    def update_fault_item(self, name: str, current_latency: int, not_available_ms: int) -> None:
        item = self._items.get(name)
        if item is None:
            item = self._items[name] = _FaultItem(name)
        item.current_latency = current_latency
        item.start_timestamp = self._clock() + not_available_ms

    def is_available(self, name: str) -> bool:
        item = self._items.get(name)
        return item is None or item.available(self._clock())

    def remove(self, name: str) -> None:
        self._items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        items = list(self._items.values())
        if not items:
            return None
        random.shuffle(items)
        now = self._clock()
        items.sort(key=lambda it: it.sort_key(now))
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        return items[self._which_item_worst.next() % half].name


class MQFaultStrategy:
    """``MQFaultStrategy``: latency-aware queue choice (only when enabled)."""

    LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
    NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)

    def __init__(self, enabled: bool = False,
                 tolerance: LatencyFaultTolerance | None = None) -> None:
        self.enabled = enabled
        self.tolerance = tolerance or LatencyFaultTolerance()

    def select_one_message_queue(self, info: TopicPublishInfo,
                                 last_broker_name: str | None) -> MessageQueue:
        if not self.enabled:
            return info.select_one_message_queue(last_broker_name)
        mqs = info.message_queue_list
        index = info.send_which_queue.next()
        for i in range(len(mqs)):
            mq = mqs[(index + i) % len(mqs)]
            if self.tolerance.is_available(mq.broker_name):
                return mq
        not_best = self.tolerance.pick_one_at_least()
        if not_best is not None:
            write_queue_nums = info.queue_id_by_broker(not_best)
            if write_queue_nums > 0:
                return MessageQueue(mqs[0].topic, not_best,
                                    info.send_which_queue.next() % write_queue_nums)
            self.tolerance.remove(not_best)
        return info.select_one_message_queue()

    def compute_not_available_duration(self, current_latency: int) -> int:
        for i in range(len(self.LATENCY_MAX) - 1, -1, -1):
            if current_latency >= self.LATENCY_MAX[i]:
                return self.NOT_AVAILABLE_DURATION[i]
        return 0

    def update_fault_item(self, broker_name: str, current_latency: int, isolation: bool) -> None:
        if self.enabled:
            duration = self.compute_not_available_duration(30000 if isolation else current_latency)
            self.tolerance.update_fault_item(broker_name, current_latency, duration)


class MessageQueueSelector(Protocol):
    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue: ...


def _java_hash_code(arg: Any) -> int:
    if isinstance(arg, str):
        return java_string_hash(arg)
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(1 << 31) <= arg < (1 << 31):
            return arg  # Integer.hashCode
        v = arg & 0xFFFFFFFFFFFFFFFF  # Long.hashCode: (int)(v ^ (v >>> 32))
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h >= (1 << 31) else h
    return hash(arg)


class SelectMessageQueueByHash:
    """Same ``arg`` -> same queue: ``abs(arg.hashCode() % size)`` with Java's hash for
    ``str`` and ``int`` (so Python and Java producers agree on ordered keys)."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        # Java: value = hashCode % size (truncating), then abs: the same as |hashCode| % size.
        return mqs[abs(_java_hash_code(arg)) % len(mqs)]


class SelectMessageQueueByRandom:
    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[random.randrange(len(mqs))]


_uniq_generators: dict[str, UniqIdGenerator] = {}


def _uniq_generator(client_ip: str) -> UniqIdGenerator:
    gen = _uniq_generators.get(client_ip)
    if gen is None:
        try:
            ip: bytes | None = socket.inet_pton(
                socket.AF_INET6 if ":" in client_ip else socket.AF_INET, client_ip)
        except OSError:
            ip = None
        gen = _uniq_generators[client_ip] = UniqIdGenerator(ip)
    return gen


_MODE_SYNC = 0
_MODE_ASYNC = 1
_MODE_ONEWAY = 2


# --- the producer ------------------------------------------------------------------------


class Producer:
    """A RocketMQ producer (upstream ``DefaultMQProducer``).

    Args:
        group: producer group (``DEFAULT_PRODUCER`` is refused).
        namesrv_addr: ``"host:port;host:port"``.
        config: a full ``ClientConfig``; ``namesrv_addr``/``namespace``/``instance_name``
            given here override its fields.
        send_msg_timeout_ms: default budget of one send (3 s).
        retry_times_when_send_failed / retry_times_when_send_async_failed: extra attempts.
        retry_another_broker_when_not_store_ok: retry a stored-but-not-OK result.
        compress_msg_body_over_howmuch / compress_level: zlib threshold and level.
        max_message_size: body limit checked before sending (4 MiB).
        send_latency_fault_enable: latency-aware broker avoidance.
        create_topic_key / default_topic_queue_nums: auto-creation template (6.7).
        enable_msg_trace / trace_topic: record a ``Pub`` trace record of every send on
            ``trace_topic`` (default ``RMQ_SYS_TRACE_TOPIC``), as a stock producer with
            ``enableMsgTrace`` (``client.trace``).
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        namespace: str | None = None,
        instance_name: str | None = None,
        send_msg_timeout_ms: int = 3000,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        compress_msg_body_over_howmuch: int = 4096,
        compress_level: int = 5,
        max_message_size: int = 4 * 1024 * 1024,
        send_latency_fault_enable: bool = False,
        create_topic_key: str = SystemTopic.AUTO_CREATE_TOPIC_KEY,
        default_topic_queue_nums: int = 4,
        enable_msg_trace: bool = False,
        trace_topic: str | None = None,
        _instance: MQClientInstance | None = None,
    ) -> None:
        self.config = (config or ClientConfig()).with_options(
            namesrv_addr=namesrv_addr, namespace=namespace, instance_name=instance_name)
        self.group = group
        self.enable_msg_trace = enable_msg_trace
        self.trace_topic = trace_topic
        self._tracer: Tracer | None = None
        if send_msg_timeout_ms <= 0 or retry_times_when_send_failed < 0 \
                or retry_times_when_send_async_failed < 0 or max_message_size <= 0:
            raise MQClientError("Producer: timeouts and sizes must be positive, retries >= 0")
        self.send_msg_timeout_ms = send_msg_timeout_ms
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.compress_msg_body_over_howmuch = compress_msg_body_over_howmuch
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.create_topic_key = create_topic_key
        self.default_topic_queue_nums = default_topic_queue_nums
        self.fault_strategy = MQFaultStrategy(send_latency_fault_enable)
        self.state = ServiceState.CREATE_JUST
        self.instance: MQClientInstance | None = _instance
        self._shared_instance = _instance is None
        self.topic_publish_info_table: dict[str, TopicPublishInfo] = {}
        self._async_tasks: set[asyncio.Task[SendResult]] = set()
        self._uniq = _uniq_generator(self.config.client_ip)
        self._loop: asyncio.AbstractEventLoop = cast(asyncio.AbstractEventLoop, None)  # start()

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the client instance and register the group.

        Raises:
            MQClientError: started before, a bad group name, or the group already
                registered in this client instance.
        """
        if self.state is not ServiceState.CREATE_JUST:
            raise MQClientError("The producer service state not OK, maybe started once, "
                                f"{self.state.value}{FAQ_URL}")
        Validators.check_group(self.group)
        if self.group == MixAll.DEFAULT_PRODUCER_GROUP:
            raise MQClientError("producerGroup can not equal DEFAULT_PRODUCER, please specify "
                                "another one.")
        self.state = ServiceState.START_FAILED
        if self._shared_instance:
            if self.group != MixAll.CLIENT_INNER_PRODUCER_GROUP:
                self.config = self.config.with_pid_instance_name()
            self.instance = await MQClientInstance.acquire(self.config)
        assert self.instance is not None
        if not self.instance.register_producer(self.group, self):
            if self._shared_instance:
                await self.instance.release()
            self.state = ServiceState.CREATE_JUST
            raise MQClientError(f"The producer group[{self.group}] has been created before, "
                                f"specify another name please.{FAQ_URL}")
        self.topic_publish_info_table[self.create_topic_key] = TopicPublishInfo()
        # Deadlines are read on this loop's clock: asyncio.get_running_loop() per send is a
        # getpid() system call (CPython's fork check), several per message otherwise.
        self._loop = asyncio.get_running_loop()
        self.state = ServiceState.RUNNING
        await self.instance.send_heartbeat_to_all_brokers()
        if self.enable_msg_trace:
            dispatcher = AsyncTraceDispatcher(self.group, "PRODUCE", self.trace_topic, self.config)
            try:
                await dispatcher.start()
            except BaseException:
                await self.shutdown()
                raise
            self._tracer = Tracer(dispatcher, self.group, self.config.without_namespace)
        log.info("client.producer.started", group=self.group, client_id=self.instance.client_id)

    async def shutdown(self) -> None:
        """Wait for started async sends, unregister the group, release the instance.

        Idempotent; never raises for a broker that is gone.
        """
        if self.state is not ServiceState.RUNNING:
            self.state = ServiceState.SHUTDOWN_ALREADY if self.state is not \
                ServiceState.CREATE_JUST else self.state
            return
        self.state = ServiceState.SHUTDOWN_ALREADY
        if self._async_tasks:
            await asyncio.gather(*list(self._async_tasks), return_exceptions=True)
        if self._tracer is not None:
            await self._tracer.dispatcher.stop()
            self._tracer = None
        inst = self.instance
        assert inst is not None
        await inst.unregister_producer(self.group)
        if self._shared_instance:
            await inst.release()
        log.info("client.producer.shutdown", group=self.group)

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    def _check_running(self) -> MQClientInstance:
        if self.state is not ServiceState.RUNNING or self.instance is None:
            raise MQClientError("The producer service state not OK, "
                                f"{self.state.value}{FAQ_URL}")
        return self.instance

    # -- ProducerHook (called by the client instance) ---------------------------------------

    def publish_topics(self) -> Iterable[str]:
        return list(self.topic_publish_info_table)

    def is_publish_topic_need_update(self, topic: str) -> bool:
        info = self.topic_publish_info_table.get(topic)
        return info is None or not info.ok()

    def update_topic_publish_info(self, topic: str, route: TopicRouteData) -> None:
        info = route_to_publish_info(topic, route)
        info.have_topic_router_info = True
        self.topic_publish_info_table[topic] = info

    def check_transaction_state(self, addr: str, msg: MessageExt,
                                header: CheckTransactionStateRequestHeader) -> None:
        """CHECK_TRANSACTION_STATE for this group; a plain producer has no checker."""
        log.warning("client.producer.check_transaction_state_ignored", group=self.group, addr=addr,
                    msg_id=header.msg_id, reason="not a transactional producer")

    # -- route ------------------------------------------------------------------------------

    async def _find_publish_info(self, topic: str) -> TopicPublishInfo:
        """``tryToFindTopicPublishInfo``: own route, else the TBW102 template route."""
        inst = self._check_running()
        info = self.topic_publish_info_table.get(topic)
        if info is None or not info.ok():
            self.topic_publish_info_table.setdefault(topic, TopicPublishInfo())
            await inst.update_topic_route(topic)
            info = self.topic_publish_info_table[topic]
        if info.have_topic_router_info or info.ok():
            return info
        await inst.update_topic_route(topic, default_topic=self.create_topic_key,
                                      default_queue_nums=self.default_topic_queue_nums)
        return self.topic_publish_info_table[topic]

    def _no_route(self, topic: str) -> MQClientError:
        """The error of a send without a route: a missing topic, or no nameserver answering
        (then named, with why, instead of the missing topic's words; the cause chained)."""
        cause = self.instance.route_errors.get(topic) if self.instance is not None else None
        if cause is not None:
            error = MQClientError(f"cannot get the route of topic {topic} from the name "
                                  f"server: {cause}")
            error.__cause__ = cause
            return error
        return MQClientError(f"No route info of this topic: {topic}{FAQ_URL}")

    # -- public send API --------------------------------------------------------------------

    def _prepare(self, msg: Message | Sequence[Message]) -> tuple[Message, list[Message] | None]:
        if isinstance(msg, Message):
            Validators.check_message(msg, self.max_message_size)
            msg.topic = self.config.with_namespace(msg.topic)
            return msg, None
        return self._batch(list(msg))

    def _batch(self, msgs: list[Message]) -> tuple[Message, list[Message]]:
        """``DefaultMQProducer.batch``: one topic, one WAIT, no delay, no retry topic.

        As upstream, ``MessageBatch.generateFromList``'s checks first, then
        ``Validators.checkMessage`` per message; the topic is the same in every message,
        so its checks and its namespace run once per batch, and the UNIQ_KEYs missing
        are made at one clock reading.
        """
        if not msgs:
            raise MQClientError("the message batch is empty")
        first = msgs[0]
        topic = first.topic
        wait = first.wait_store_msg_ok
        missing = 0
        for m in msgs:
            props = m.properties
            if props:
                if m.delay_time_level > 0:
                    raise MQClientError("TimeDelayLevel is not supported for batching")
                if _TIMER_KEY_SET.intersection(props):
                    # The broker times single messages only: a batch would go out at once.
                    raise MQClientError("Timer messages are not supported for batching")
                if m.wait_store_msg_ok != wait:
                    raise MQClientError(
                        "The waitStoreMsgOK of the messages in one batch should the same")
                if _UNIQ_KEY not in props:
                    missing += 1
            else:
                if not wait:  # no properties: WAIT is true
                    raise MQClientError(
                        "The waitStoreMsgOK of the messages in one batch should the same")
                missing += 1
            if m.topic != topic:
                if topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
                    raise MQClientError("Retry Group is not supported for batching")
                raise MQClientError("The topic of the messages in one batch should be the same")
        if topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            raise MQClientError("Retry Group is not supported for batching")
        Validators.check_message(first, self.max_message_size)  # topic, and first's body
        max_size = self.max_message_size
        for m in msgs:
            body = m.body
            if body is None:
                raise MQClientError(
                    f"CODE: {ResponseCode.MESSAGE_ILLEGAL} DESC: the message body is null")
            size = len(body)
            if size == 0:
                raise MQClientError(
                    f"CODE: {ResponseCode.MESSAGE_ILLEGAL} DESC: the message body length is "
                    "zero")
            if size > max_size:
                raise MQClientError(f"CODE: {ResponseCode.MESSAGE_ILLEGAL} DESC: the message "
                                    f"body size over max value, MAX: {max_size}")
        if missing:
            ids = iter(self._uniq.create_many(missing))
            for m in msgs:
                if _UNIQ_KEY not in m.properties:
                    m.properties[_UNIQ_KEY] = next(ids)
        wrapped = self.config.with_namespace(topic)
        if wrapped != topic:
            for m in msgs:
                m.topic = wrapped
        batch = Message(wrapped, encode_batch(msgs), wait_store_msg_ok=wait)
        Validators.check_message(batch, self.max_message_size)
        return batch, msgs

    async def send(self, msg: Message | Sequence[Message], mq: MessageQueue | None = None, *,
                   selector: MessageQueueSelector | Callable[..., MessageQueue] | None = None,
                   arg: Any = None, timeout: float | None = None) -> SendResult:
        """Send and wait for the broker's answer.

        Args:
            msg: one message, or a list (sent as one SEND_BATCH_MESSAGE).
            mq: send to this queue (no retries, as upstream ``send(msg, mq)``).
            selector: ``selector.select(mqs, msg, arg)`` (or a plain callable) picks the
                queue, e.g. ``SelectMessageQueueByHash`` for ordered messages.
            timeout: seconds for the whole call; default ``send_msg_timeout_ms``.

        Raises:
            MQClientError: invalid message, no route, or a producer not running.
            MQBrokerError: the broker refused (after retries where retriable).
            RemotingError: transport failures after retries (``RemotingTimeoutError``
                when the budget ran out).
        """
        return await self._send(msg, mq, selector, arg, timeout, _MODE_SYNC)

    def send_async(self, msg: Message | Sequence[Message], mq: MessageQueue | None = None, *,
                   selector: MessageQueueSelector | Callable[..., MessageQueue] | None = None,
                   arg: Any = None, timeout: float | None = None,
                   callback: SendCallback | None = None) -> asyncio.Future[SendResult]:
        """Start a send and return its future at once (``await`` it, or pass ``callback``).

        ``callback(result, None)`` or ``callback(None, exc)`` runs once when done. The
        producer owns the send: ``shutdown()`` waits for it.

        Raises:
            MQClientError: the producer is not running (immediately).
        """
        self._check_running()
        task = asyncio.create_task(self._send(msg, mq, selector, arg, timeout, _MODE_ASYNC))
        self._async_tasks.add(task)

        def done(t: asyncio.Task[SendResult]) -> None:
            self._async_tasks.discard(t)
            if t.cancelled():
                exc: BaseException | None = asyncio.CancelledError()
            else:
                exc = t.exception()
            if callback is not None:
                try:
                    callback(None if exc else t.result(), exc)
                except Exception:
                    log.exception("client.producer.send_callback_failed", group=self.group)

        task.add_done_callback(done)
        return task

    async def send_oneway(self, msg: Message | Sequence[Message], mq: MessageQueue | None = None,
                          *, selector: MessageQueueSelector | Callable[..., MessageQueue] | None = None,
                          arg: Any = None, timeout: float | None = None) -> None:
        """Send without waiting for (or getting) an answer; no retries."""
        await self._send(msg, mq, selector, arg, timeout, _MODE_ONEWAY)

    # -- implementation ---------------------------------------------------------------------

    async def _send(self, msg: Message | Sequence[Message], mq: MessageQueue | None,
                    selector: Any, arg: Any, timeout: float | None, mode: int) -> Any:
        self._check_running()
        budget = self.send_msg_timeout_ms / 1000 if timeout is None else timeout
        deadline = self._loop.time() + budget
        one, members = self._prepare(msg)
        try:
            if mq is None and selector is None:  # the common case, one coroutine less
                return await self._send_default(one, members, mode, deadline, budget)
            return await self._send_prepared(one, members, mq, selector, arg, mode, deadline,
                                             budget)
        finally:
            if self.config.namespace:
                # As upstream: the caller's message keeps its un-namespaced topic.
                for m in (members or [one]):
                    m.topic = self.config.without_namespace(m.topic)

    async def _send_prepared(self, one: Message, members: list[Message] | None,
                             mq: MessageQueue | None, selector: Any, arg: Any, mode: int,
                             deadline: float, budget: float) -> Any:
        loop = self._loop
        if mq is not None:
            if self.config.with_namespace(mq.topic) != one.topic:
                raise MQClientError("message's topic not equal mq's topic")
            mq = MessageQueue(one.topic, mq.broker_name, mq.queue_id)
            return await self._send_kernel(one, members, mq, mode, deadline, budget)
        if selector is not None:
            info = await self._find_publish_info(one.topic)
            if not info.ok():
                raise self._no_route(one.topic)
            mqs = [MessageQueue(self.config.without_namespace(q.topic), q.broker_name, q.queue_id)
                   for q in info.message_queue_list]
            select = selector.select if hasattr(selector, "select") else selector
            chosen = select(mqs, one if members is None else members[0], arg)
            if chosen is None:
                raise MQClientError("select message queue return null.")
            chosen = MessageQueue(self.config.with_namespace(chosen.topic), chosen.broker_name,
                                  chosen.queue_id)
            if loop.time() >= deadline:
                raise RemotingTimeoutError("sendSelectImpl call timeout")
            return await self._send_kernel(one, members, chosen, mode, deadline, budget)
        return await self._send_default(one, members, mode, deadline, budget)

    async def _send_default(self, msg: Message, members: list[Message] | None, mode: int,
                            deadline: float, budget: float) -> SendResult | None:
        loop = self._loop
        info = self.topic_publish_info_table.get(msg.topic)
        if info is None or not info.ok():
            info = await self._find_publish_info(msg.topic)
        if not info.ok():
            raise self._no_route(msg.topic)
        if mode == _MODE_SYNC:
            total = 1 + self.retry_times_when_send_failed
        elif mode == _MODE_ASYNC:
            total = 1 + self.retry_times_when_send_async_failed
        else:
            total = 1
        last_broker: str | None = None
        last_exc: BaseException | None = None
        result: SendResult | None = None
        brokers_sent: list[str] = []
        began = loop.time()
        for _ in range(total):
            mq = self.fault_strategy.select_one_message_queue(info, last_broker)
            last_broker = mq.broker_name
            brokers_sent.append(mq.broker_name)
            if loop.time() >= deadline:
                raise RemotingTimeoutError(f"sendDefaultImpl call timeout: {int(budget * 1000)}ms "
                                           f"used up after {len(brokers_sent) - 1} attempts, "
                                           f"topic {msg.topic}") from last_exc
            start = loop.time()
            try:
                result = await self._send_kernel(msg, members, mq, mode, deadline, budget)
            except (RemotingError, MQClientError) as exc:
                self.fault_strategy.update_fault_item(
                    mq.broker_name, int((loop.time() - start) * 1000), True)
                log.warning("client.producer.send_failed_retrying", topic=msg.topic, mq=str(mq),
                            error=str(exc))
                last_exc = exc
                continue
            except MQBrokerError as exc:
                self.fault_strategy.update_fault_item(
                    mq.broker_name, int((loop.time() - start) * 1000), True)
                last_exc = exc
                if mode == _MODE_SYNC and exc.retriable:
                    log.warning("client.producer.send_refused_retrying", topic=msg.topic, mq=str(mq),
                                code=exc.code, remark=exc.remark)
                    continue
                raise
            self.fault_strategy.update_fault_item(
                mq.broker_name, int((loop.time() - start) * 1000), False)
            if mode != _MODE_SYNC or result is None:
                return result
            if result.status is not SendStatus.SEND_OK and \
                    self.retry_another_broker_when_not_store_ok:
                continue
            return result
        if result is not None:
            return result
        assert last_exc is not None
        last_exc.add_note(
            f"Send [{len(brokers_sent)}] times, still failed, cost "
            f"[{int((loop.time() - began) * 1000)}]ms, Topic: {msg.topic}, "
            f"BrokersSent: {brokers_sent}{FAQ_URL}")
        raise last_exc

    def _send_kernel(self, msg: Message, members: list[Message] | None, mq: MessageQueue,
                     mode: int, deadline: float, budget: float
                     ) -> Awaitable[SendResult | None]:
        """``sendKernelImpl``: one attempt to one queue within what is left of the budget.

        A plain function returning the request's awaitable (one coroutine frame less per
        send); only a broker address missing from the route takes a coroutine first.
        """
        inst = self._check_running()
        addr = inst.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            return self._send_kernel_after_route(msg, members, mq, mode, deadline, budget)
        return self._send_kernel_to(inst, addr, msg, members, mq, mode, deadline, budget)

    async def _send_kernel_after_route(self, msg: Message, members: list[Message] | None,
                                       mq: MessageQueue, mode: int, deadline: float,
                                       budget: float) -> SendResult | None:
        inst = self._check_running()
        await self._find_publish_info(mq.topic)
        addr = inst.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        return await self._send_kernel_to(inst, addr, msg, members, mq, mode, deadline, budget)

    def _send_kernel_to(self, inst: MQClientInstance, addr: str, msg: Message,
                        members: list[Message] | None, mq: MessageQueue, mode: int,
                        deadline: float, budget: float) -> Awaitable[SendResult | None]:
        loop = self._loop
        batch = members is not None
        props = msg.properties
        if not batch and _UNIQ_KEY not in props:
            props[_UNIQ_KEY] = self._uniq.create()
        body = msg.body
        sys_flag = 0
        if not batch and len(body) >= self.compress_msg_body_over_howmuch:
            body = compress_body(body, self.compress_level)
            sys_flag |= MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB
        if props.get(MessageConst.PROPERTY_TRANSACTION_PREPARED) == "true":
            sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        header = SendMessageRequestHeaderV2(
            producer_group=self.group,
            topic=msg.topic,
            default_topic=self.create_topic_key,
            default_topic_queue_nums=self.default_topic_queue_nums,
            queue_id=mq.queue_id,
            sys_flag=sys_flag,
            born_timestamp=time.time_ns() // 1_000_000,
            flag=msg.flag,
            properties=encode_properties(props),
            reconsume_times=0,
            unit_mode=self.config.unit_mode,
            batch=batch,
            broker_name=mq.broker_name,
        )
        if msg.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            # Upstream moves these two into the header after writing the properties string.
            reconsume = props.pop(MessageConst.PROPERTY_RECONSUME_TIME, None)
            if reconsume is not None:
                header.reconsume_times = int(reconsume)
            max_times = props.pop(MessageConst.PROPERTY_MAX_RECONSUME_TIMES, None)
            if max_times is not None:
                header.max_reconsume_times = int(max_times)
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise RemotingTimeoutError(f"sendKernelImpl call timeout: {int(budget * 1000)}ms "
                                       f"used up before sending to {addr}")
        if mode == _MODE_ONEWAY:
            return inst.api.send_message_oneway(addr, msg, body, header, remaining)
        uniq_ids = [m.properties[_UNIQ_KEY] for m in members] if members is not None else None
        sending = inst.api.send_message(addr, mq.broker_name, msg, body, header, remaining,
                                        uniq_ids)
        tracer = self._tracer
        if tracer is not None:
            trace = tracer.send_before(msg, addr, len(body))
            if trace is not None:
                return self._traced_send(sending, tracer, trace)
        return sending

    @staticmethod
    async def _traced_send(sending: Awaitable[SendResult | None], tracer: Tracer,
                           trace: TraceContext) -> SendResult | None:
        """One traced attempt: its ``Pub`` record once the broker answered (upstream
        ``sendMessageAfter``; a failed attempt records nothing)."""
        result = await sending
        tracer.send_after(trace, result)
        return result

