"""MQClientInstance: what the producers and consumers of one client id share.

Upstream ``org.apache.rocketmq.client.impl.factory.MQClientInstance``,
``impl.MQClientManager``, ``impl.ClientRemotingProcessor`` and ``RebalanceService``
(docs/PROTOCOL.md 3.5, 4.6, 6.7, 6.9, 8).

One instance per client id per process (``MQClientInstance.acquire(config)``), shared
by every producer and consumer built with that id and released by each of them; the
last release shuts it down. It owns:

* the ``RemotingClient`` (channels) and the ``MQClientAPI`` over it;
* the internal ``CLIENT_INNER_PRODUCER`` producer (upstream ``defaultMQProducer``),
  listed in every HEART_BEAT and unregistered last at shutdown;
* the topic route table and the broker address table (brokerName -> {id: addr}),
  refreshed for every topic in use every ``poll_name_server_interval_ms`` and on demand
  (``update_topic_route``, with the TBW102 fallback of 6.7 for producers). A route lookup
  that fails because no nameserver answers (a ``RemotingError``, not "no such topic") is
  kept in ``route_errors`` (a producer names it instead of "No route info") and, the first
  time after a success, alerted as ``client.instance.namesrv_unreachable``: on stderr
  even when the application configured no logging (``BoundLogger.alert``), so a consumer
  started against a dead nameserver is not silent; ``namesrv_reachable`` when one answers
  again;
* scheduled routines, each isolated (a failing run is logged once with its context and
  the next run happens on time): route refresh (first after 10 ms), offline-broker
  cleanup + HEART_BEAT to every broker (first after 1 s, then every 30 s; consumer-less
  clients only to masters), consumer offset persistence (first after 10 s, then every
  5 s) and rebalance (every 20 s, **at once** when a broker sends
  NOTIFY_CONSUMER_IDS_CHANGED or a consumer starts, and 500 ms after an orderly
  consumer could not lock a queue it was allocated, ``rebalance_later``);
* the handlers for broker-initiated requests: NOTIFY_CONSUMER_IDS_CHANGED,
  RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_STATUS_FROM_CLIENT,
  GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, CHECK_TRANSACTION_STATE, the
  latter dispatched to the registered producer of the message's ``PGROUP``
  (``ProducerHook.check_transaction_state``; the transactional producer implements it),
  and PUSH_REPLY_MESSAGE_TO_CLIENT, delegated to the instance's ``request_futures``
  (``client.request_reply.RequestFutureTable``, upstream ``RequestFutureHolder``): replies
  may arrive over any broker connection, so every instance answers them from the start.

``shutdown()`` is ordered: stop the routines, UNREGISTER_CLIENT for each remaining
group, close the channels. Shutting down never waits on a dead broker for longer than
the API timeout per call.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import (
    ConsumeMessageDirectlyResult,
    ConsumerData,
    ConsumerRunningInfo,
    GetConsumerStatusBody,
    HeartbeatData,
    MessageQueue,
    ProducerData,
    ResetOffsetBody,
    SubscriptionData,
    TopicRouteData,
)
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import CURRENT_VERSION, MixAll, Perm, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import MQClientError, RemotingError, TopicNotExistError
from aiorocketmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    QueryConsumerOffsetRequestHeader,
    ResetOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.protocol.message import MessageExt, decode_message
from aiorocketmq.protocol.remoting_client import RemotingClient
from aiorocketmq.protocol.routine import ServiceState

from .api import MQClientAPI
from .config import ClientConfig

if TYPE_CHECKING:
    from .producer import Producer
    from .request_reply import RequestFutureTable

__all__ = [
    "MQClientInstance",
    "ServiceState",
    "ProducerHook",
    "ConsumerHook",
    "FindBrokerResult",
    "FAQ_URL",
    "route_to_subscribe_queues",
]

log = get_logger("aiorocketmq.client.instance")

FAQ_URL = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
LOCK_TIMEOUT = 3.0  # LOCK_TIMEOUT_MILLIS: route / heartbeat lock waits


class ProducerHook(Protocol):
    """What the instance asks of a registered producer (upstream ``MQProducerInner``)."""

    def publish_topics(self) -> Iterable[str]: ...
    def is_publish_topic_need_update(self, topic: str) -> bool: ...
    def update_topic_publish_info(self, topic: str, route: TopicRouteData) -> None: ...
    def check_transaction_state(self, addr: str, msg: MessageExt,
                                header: CheckTransactionStateRequestHeader) -> None: ...


class ConsumerHook(Protocol):
    """What the instance asks of a registered consumer (upstream ``MQConsumerInner``)."""

    @property
    def group(self) -> str: ...
    @property
    def message_model_name(self) -> str: ...
    @property
    def consume_type_name(self) -> str: ...
    @property
    def consume_from_where_name(self) -> str: ...
    @property
    def unit_mode(self) -> bool: ...

    def subscriptions(self) -> Iterable[SubscriptionData]: ...
    def is_subscribe_topic_need_update(self, topic: str) -> bool: ...
    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None: ...
    async def do_rebalance(self) -> None: ...
    async def persist_consumer_offset(self) -> None: ...
    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...
    def consumer_status(self, topic: str) -> dict[MessageQueue, int]: ...
    def running_info(self) -> ConsumerRunningInfo: ...
    async def consume_message_directly(self, msg: MessageExt,
                                       broker_name: str | None) -> ConsumeMessageDirectlyResult: ...


class FindBrokerResult:
    __slots__ = ("addr", "slave", "version")

    def __init__(self, addr: str, slave: bool, version: int = 0) -> None:
        self.addr = addr
        self.slave = slave
        self.version = version

    def __repr__(self) -> str:
        return f"FindBrokerResult({self.addr!r}, slave={self.slave})"


def route_to_subscribe_queues(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """``topicRouteData2TopicSubscribeInfo``: readable queues ``0..readQueueNums-1``."""
    out: set[MessageQueue] = set()
    for qd in route.queue_datas:
        if Perm.readable(qd.perm):
            for i in range(qd.read_queue_nums):
                out.add(MessageQueue(topic, qd.broker_name, i))
    return out


def _route_key(route: TopicRouteData) -> Any:
    """Comparable form for ``topicRouteDataIsChange`` (sorted queue and broker data)."""
    qds = sorted((q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
                 for q in route.queue_datas)
    bds = sorted((b.broker_name, b.cluster, tuple(sorted(b.broker_addrs.items())))
                 for b in route.broker_datas)
    return (route.order_topic_conf, qds, bds)


class MQClientInstance:
    """See module docstring. Get one with ``await MQClientInstance.acquire(config)``."""

    _instances: ClassVar[dict[str, MQClientInstance]] = {}

    def __init__(self, config: ClientConfig, client_id: str) -> None:
        self.config = config
        self.client_id = client_id
        self.remoting = RemotingClient(serialize_type=config.serialize_type,
                                       rpc_hook=config.build_rpc_hook(),
                                       ssl=config.build_ssl_context())
        self.api = MQClientAPI(self.remoting, config)
        self.remoting.update_namesrv_address_list(config.namesrv_addresses)
        self.state = ServiceState.CREATE_JUST
        self.producers: dict[str, ProducerHook] = {}
        self.consumers: dict[str, ConsumerHook] = {}
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.broker_version_table: dict[str, dict[str, int]] = {}
        self._refs = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalance_wakeup = asyncio.Event()
        self._rebalance_later: asyncio.TimerHandle | None = None
        self._route_lock = asyncio.Lock()
        # topic -> why its last route lookup found no nameserver answering (cleared by an answer)
        self.route_errors: dict[str, RemotingError] = {}
        self._namesrv_unreachable = False
        self._heartbeat_lock = asyncio.Lock()
        self._handler_tasks: set[asyncio.Task[Any]] = set()
        self._heartbeat_soon_task: asyncio.Task[None] | None = None
        self.inner_producer: Producer | None = None
        self._register_processors()

    # -- lifecycle --------------------------------------------------------------------------

    @classmethod
    async def acquire(cls, config: ClientConfig) -> MQClientInstance:
        """The running instance for ``config``'s client id, created and started if needed.

        Every ``acquire`` must be paired with one ``release``.
        """
        client_id = config.build_client_id()
        inst = cls._instances.get(client_id)
        if inst is None or inst.state is ServiceState.SHUTDOWN_ALREADY:
            inst = cls(config, client_id)
            cls._instances[client_id] = inst
            log.info("client.instance.created", client_id=client_id)
        inst._refs += 1
        if inst.state is ServiceState.CREATE_JUST:
            inst.start()
            await inst._start_inner_producer()
        return inst

    async def _start_inner_producer(self) -> None:
        # Upstream MQClientInstance.start() starts its own producer of group
        # CLIENT_INNER_PRODUCER: every 4.9.7 client lists it in HEART_BEAT and unregisters
        # it at shutdown (vectors: frame ids 350, 88, 27). Consumers resend through it.
        from .producer import Producer  # producer.py imports this module

        producer = Producer(MixAll.CLIENT_INNER_PRODUCER_GROUP, config=self.config,
                            _instance=self)
        await producer.start()
        self.inner_producer = producer

    async def release(self) -> None:
        """Drop one reference; the last one shuts the instance down."""
        self._refs -= 1
        if self._refs <= 0:
            await self.shutdown()

    def start(self) -> None:
        if self.state is not ServiceState.CREATE_JUST:
            raise MQClientError(
                f"The Factory object[{self.client_id}] has been created before, and failed.")
        if not self.config.namesrv_addresses:
            raise MQClientError("No name server address, please set it." + FAQ_URL)
        self.state = ServiceState.RUNNING
        c = self.config
        self._spawn("route", 0.01, c.poll_name_server_interval_ms / 1000,
                    self.update_topic_route_from_namesrv_all)
        self._spawn("heartbeat", 1.0, c.heartbeat_broker_interval_ms / 1000,
                    self._clean_and_heartbeat)
        self._spawn("persist_offsets", 10.0, c.persist_consumer_offset_interval_ms / 1000,
                    self.persist_all_consumer_offset)
        self._tasks.append(asyncio.create_task(self._rebalance_routine(),
                                               name=f"rebalance[{self.client_id}]"))
        log.info("client.instance.started", client_id=self.client_id)

    def _spawn(self, name: str, first: float, interval: float,
               fn: Callable[[], Awaitable[Any]]) -> None:
        self._tasks.append(asyncio.create_task(self._periodic_routine(name, first, interval, fn),
                                               name=f"{name}[{self.client_id}]"))

    async def _periodic_routine(self, name: str, first: float, interval: float,
                                fn: Callable[[], Awaitable[Any]]) -> None:
        # A failing run must not stop the schedule (upstream catches per run): log once,
        # with context, and run again at the next tick.
        await asyncio.sleep(first)
        while True:
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("client.instance.scheduled_task_failed", task=name, client_id=self.client_id,
                            error=repr(exc))
            await asyncio.sleep(interval)

    async def _rebalance_routine(self) -> None:
        wait = 20.0  # rocketmq.client.rebalance.waitInterval
        while True:
            try:
                async with asyncio.timeout(wait):
                    await self._rebalance_wakeup.wait()
            except TimeoutError:
                pass
            self._rebalance_wakeup.clear()
            await self.do_rebalance()

    def rebalance_immediately(self) -> None:
        """Wake the rebalance routine (``RebalanceService.wakeup``)."""
        self._rebalance_wakeup.set()

    def rebalance_later(self, delay: float) -> None:
        """Wake the rebalance routine in ``delay`` seconds (5.x ``rebalanceLater``); one
        pending wake-up at a time."""
        if self.state is not ServiceState.RUNNING or self._rebalance_later is not None:
            return

        def fire() -> None:
            self._rebalance_later = None
            self._rebalance_wakeup.set()

        self._rebalance_later = asyncio.get_running_loop().call_later(delay, fire)

    async def do_rebalance(self) -> None:
        for group, consumer in list(self.consumers.items()):
            try:
                await consumer.do_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("client.instance.rebalance_failed", group=group, error=repr(exc))

    async def shutdown(self) -> None:
        """Stop routines, unregister remaining groups, close channels. Idempotent."""
        if self.state is ServiceState.SHUTDOWN_ALREADY:
            return
        self.state = ServiceState.SHUTDOWN_ALREADY
        if MQClientInstance._instances.get(self.client_id) is self:
            del MQClientInstance._instances[self.client_id]
        if self._rebalance_later is not None:
            self._rebalance_later.cancel()
            self._rebalance_later = None
        tasks = self._tasks + list(self._handler_tasks)
        if self._heartbeat_soon_task is not None:
            tasks.append(self._heartbeat_soon_task)
        self._tasks = []
        for t in tasks:
            t.cancel()
        # gather (not a loop of awaits): if *we* are cancelled meanwhile, that propagates.
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for t, r in zip(tasks, results, strict=True):
            if isinstance(r, Exception):
                log.warning("client.instance.task_failed_at_shutdown", task=t.get_name(), error=repr(r))
        if self.inner_producer is not None:
            await self.inner_producer.shutdown()  # its UNREGISTER_CLIENT, as upstream
        await self.remoting.close()
        log.info("client.instance.shutdown", client_id=self.client_id)

    # -- registration -----------------------------------------------------------------------

    def register_producer(self, group: str, producer: ProducerHook) -> bool:
        if group in self.producers:
            return False
        self.producers[group] = producer
        return True

    def register_consumer(self, group: str, consumer: ConsumerHook) -> bool:
        if group in self.consumers:
            return False
        self.consumers[group] = consumer
        return True

    async def unregister_producer(self, group: str) -> None:
        self.producers.pop(group, None)
        await self._unregister_client(producer_group=group)

    async def unregister_consumer(self, group: str) -> None:
        self.consumers.pop(group, None)
        await self._unregister_client(consumer_group=group)

    async def _unregister_client(self, *, producer_group: str | None = None,
                                 consumer_group: str | None = None) -> None:
        for broker_name, addrs in list(self.broker_addr_table.items()):
            for broker_id, addr in list(addrs.items()):
                try:
                    await self.api.unregister_client(addr, self.client_id,
                                                     producer_group=producer_group,
                                                     consumer_group=consumer_group)
                    log.info("client.instance.unregistered", addr=addr, producer_group=producer_group,
                             consumer_group=consumer_group)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("client.instance.unregister_failed", broker=broker_name, id=broker_id,
                                addr=addr, error=repr(exc))

    # -- routes -----------------------------------------------------------------------------

    def find_broker_addr_by_topic(self, topic: str) -> str | None:
        """``findBrokerAddrByTopic``: a broker of the topic's route (its master if it has one)."""
        route = self.topic_route_table.get(topic)
        if route is None or not route.broker_datas:
            return None
        return random.choice(route.broker_datas).select_broker_addr()

    async def check_client_in_broker(self, group: str, consumer: ConsumerHook) -> None:
        """``checkClientInBroker``: one broker of each non-TAG subscription's topic must accept
        the expression (CHECK_CLIENT_CONFIG); the configs of a cluster's brokers are assumed
        alike, as upstream.

        Raises:
            MQBrokerError: a broker refused (property filtering off, expression invalid).
        """
        for sd in consumer.subscriptions():
            if not sd.expression_type or sd.expression_type == "TAG":
                continue
            addr = self.find_broker_addr_by_topic(sd.topic)
            if addr is not None:
                await self.api.check_client_in_broker(addr, group, self.client_id, sd)

    def _topics_in_use(self) -> set[str]:
        topics: set[str] = set()
        for consumer in self.consumers.values():
            topics.update(sd.topic for sd in consumer.subscriptions())
        for producer in self.producers.values():
            topics.update(producer.publish_topics())
        return topics

    def _namesrv_answered(self) -> None:
        if self._namesrv_unreachable:
            self._namesrv_unreachable = False
            log.info("client.instance.namesrv_reachable", namesrv=self.config.namesrv_addr)

    async def update_topic_route_from_namesrv_all(self) -> None:
        for topic in self._topics_in_use():
            await self.update_topic_route(topic)

    async def update_topic_route(self, topic: str, *, default_topic: str | None = None,
                                 default_queue_nums: int = 4) -> bool:
        """``updateTopicRouteInfoFromNameServer``; True when the tables changed.

        With ``default_topic`` (a producer whose topic has no route) the default topic's
        route is fetched, its queue counts clamped to ``default_queue_nums``, and stored
        under ``topic`` (docs/PROTOCOL.md 6.7). Failures are logged and give False, as upstream.
        """
        try:
            async with asyncio.timeout(LOCK_TIMEOUT):
                await self._route_lock.acquire()
        except TimeoutError:
            log.warning("client.instance.route_lock_timeout", topic=topic)
            return False
        try:
            if default_topic is not None:
                route = await self.api.get_topic_route_info(default_topic)
                for qd in route.queue_datas:
                    n = min(default_queue_nums, qd.read_queue_nums)
                    qd.read_queue_nums = n
                    qd.write_queue_nums = n
            else:
                route = await self.api.get_topic_route_info(topic)
        except asyncio.CancelledError:
            raise
        except TopicNotExistError as exc:
            # Expected, so debug: a producer's first send to a topic the broker will create
            # through TBW102 (6.7), and a consumer's topic not created yet, which the
            # rebalance reports as client.rebalance.no_route. Upstream warns here.
            self._namesrv_answered()
            self.route_errors.pop(topic, None)
            log.debug("client.instance.route_update_failed", topic=topic, default_topic=default_topic,
                      error=str(exc))
            return False
        except RemotingError as exc:
            # No nameserver answered: not "no such topic", and never silent (module docstring).
            self.route_errors[topic] = exc
            if not self._namesrv_unreachable:
                self._namesrv_unreachable = True
                log.alert(logging.WARNING, "client.instance.namesrv_unreachable",
                          namesrv=self.config.namesrv_addr, topic=topic, error=str(exc))
            return False
        except Exception as exc:
            if not topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
                log.warning("client.instance.route_update_failed", topic=topic, default_topic=default_topic,
                            error=str(exc))
            return False
        finally:
            self._route_lock.release()
        self._namesrv_answered()
        self.route_errors.pop(topic, None)
        old = self.topic_route_table.get(topic)
        changed = old is None or _route_key(old) != _route_key(route)
        if not changed:
            changed = any(p.is_publish_topic_need_update(topic) for p in self.producers.values()) \
                or any(c.is_subscribe_topic_need_update(topic) for c in self.consumers.values())
        if not changed:
            return False
        for bd in route.broker_datas:
            self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
        for producer in self.producers.values():
            producer.update_topic_publish_info(topic, route)
        if self.consumers:
            mqs = route_to_subscribe_queues(topic, route)
            for consumer in self.consumers.values():
                consumer.update_topic_subscribe_info(topic, mqs)
        self.topic_route_table[topic] = route
        log.info("client.instance.route_changed", topic=topic, old=None if old is None else old.to_json(),
                 new=route.to_json())
        return True

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        addrs = self.broker_addr_table.get(broker_name)
        return addrs.get(MixAll.MASTER_ID) if addrs else None

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int,
                                         only_this_broker: bool) -> FindBrokerResult | None:
        """``findBrokerAddressInSubscribe``: the wanted id, else the next slave id, else
        (unless ``only_this_broker``) any address of that broker name."""
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        slave = broker_id != MixAll.MASTER_ID
        if addr is None and slave:
            addr = addrs.get(broker_id + 1)
        if addr is None and not only_this_broker:
            first_id, addr = next(iter(addrs.items()))
            slave = first_id != MixAll.MASTER_ID
        if addr is None:
            return None
        return FindBrokerResult(addr, slave, self.broker_version_table.get(broker_name, {}).get(addr, 0))

    async def find_broker_addr_for_mq(self, mq: MessageQueue, broker_id: int = MixAll.MASTER_ID,
                                      only_this_broker: bool = True) -> FindBrokerResult:
        """Find, refreshing the topic's route once when the broker is unknown.

        Raises:
            MQClientError: ``The broker[<name>] not exist``.
        """
        found = self.find_broker_address_in_subscribe(mq.broker_name, broker_id, only_this_broker)
        if found is None:
            await self.update_topic_route(mq.topic)
            found = self.find_broker_address_in_subscribe(mq.broker_name, broker_id, False)
        if found is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        return found

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str] | None:
        """GET_CONSUMER_LIST_BY_GROUP to one broker of ``topic`` (any address of it)."""
        route = self.topic_route_table.get(topic)
        addr: str | None = None
        if route is not None and route.broker_datas:
            bd = random.choice(route.broker_datas)
            addr = bd.select_broker_addr()
        if addr is None:
            await self.update_topic_route(topic)
            route = self.topic_route_table.get(topic)
            if route is not None and route.broker_datas:
                addr = random.choice(route.broker_datas).select_broker_addr()
        if addr is None:
            return None
        try:
            return await self.api.get_consumer_id_list(addr, group)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("client.instance.consumer_list_failed", topic=topic, group=group, addr=addr,
                        error=str(exc))
            return None

    # -- offsets for consumers (client.offset_store.OffsetBackend) --------------------------

    async def fetch_consume_offset(self, group: str, mq: MessageQueue) -> int:
        found = await self.find_broker_addr_for_mq(mq)
        header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic,
                                                  queue_id=mq.queue_id, bname=mq.broker_name)
        return await self.api.query_consumer_offset(found.addr, header, 5.0)

    async def update_consume_offset(self, group: str, mq: MessageQueue, offset: int, *,
                                    oneway: bool) -> None:
        found = await self.find_broker_addr_for_mq(mq)
        header = UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic,
                                                   queue_id=mq.queue_id, commit_offset=offset,
                                                   bname=mq.broker_name)
        await self.api.update_consumer_offset(found.addr, header, 5.0, oneway=oneway)

    async def max_offset(self, mq: MessageQueue) -> int:
        found = await self.find_broker_addr_for_mq(mq, only_this_broker=False)
        return await self.api.get_max_offset(found.addr, mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        found = await self.find_broker_addr_for_mq(mq, only_this_broker=False)
        return await self.api.get_min_offset(found.addr, mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        found = await self.find_broker_addr_for_mq(mq, only_this_broker=False)
        return await self.api.search_offset(found.addr, mq, timestamp_ms)

    async def persist_all_consumer_offset(self) -> None:
        for consumer in list(self.consumers.values()):
            await consumer.persist_consumer_offset()

    # -- heartbeat --------------------------------------------------------------------------

    def _prepare_heartbeat(self) -> HeartbeatData:
        hb = HeartbeatData(client_id=self.client_id)
        for group in self.producers:
            hb.producer_data_set.append(ProducerData(group_name=group))
        for group, c in self.consumers.items():
            hb.consumer_data_set.append(ConsumerData(
                group_name=group,
                consume_type=c.consume_type_name,
                message_model=c.message_model_name,
                consume_from_where=c.consume_from_where_name,
                subscription_data_set=[SubscriptionData.from_json(sd.to_json())
                                       for sd in c.subscriptions()],
                unit_mode=c.unit_mode,
            ))
        return hb

    async def _clean_and_heartbeat(self) -> None:
        self.clean_offline_broker()
        await self.send_heartbeat_to_all_brokers()

    def clean_offline_broker(self) -> None:
        """Forget broker addresses that no route in the route table mentions any more."""
        live: set[str] = set()
        for route in self.topic_route_table.values():
            for bd in route.broker_datas:
                live.update(bd.broker_addrs.values())
        for name in list(self.broker_addr_table):
            addrs = self.broker_addr_table[name]
            for bid, addr in list(addrs.items()):
                if addr not in live:
                    del addrs[bid]
                    log.info("client.instance.offline_broker_removed", broker=name, addr=addr)
            if not addrs:
                del self.broker_addr_table[name]

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT to every broker (masters only when this client has no consumer)."""
        try:
            async with asyncio.timeout(LOCK_TIMEOUT):
                await self._heartbeat_lock.acquire()
        except TimeoutError:
            log.warning("client.instance.heartbeat_lock_timeout", client_id=self.client_id)
            return
        try:
            hb = self._prepare_heartbeat()
            if not hb.producer_data_set and not hb.consumer_data_set:
                return
            for name, addrs in list(self.broker_addr_table.items()):
                for bid, addr in list(addrs.items()):
                    if not hb.consumer_data_set and bid != MixAll.MASTER_ID:
                        continue
                    try:
                        version = await self.api.send_heartbeat(addr, hb)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:
                        log.warning("client.instance.heartbeat_failed", broker=name, addr=addr,
                                    error=repr(exc))
                        continue
                    self.broker_version_table.setdefault(name, {})[addr] = version
        finally:
            self._heartbeat_lock.release()

    def heartbeat_soon(self) -> None:
        """HEART_BEAT to every broker now, in the background; one such run at a time.

        For a broker that answered a pull with SUBSCRIPTION_NOT_EXIST: it lost this client's
        subscriptions (it restarted) and learns them again only from a heartbeat, which the
        schedule sends up to ``heartbeat_broker_interval_ms`` (30 s) later. Upstream 4.9.7
        waits for the schedule, re-pulling (and logging) every
        ``pull_time_delay_ms_when_exception`` per queue meanwhile.
        """
        if self.state is not ServiceState.RUNNING or self._heartbeat_soon_task is not None:
            return
        self._heartbeat_soon_task = asyncio.get_running_loop().create_task(
            self._heartbeat_soon_routine(), name=f"heartbeat_soon[{self.client_id}]")

    async def _heartbeat_soon_routine(self) -> None:
        try:
            await self.send_heartbeat_to_all_brokers()
        finally:
            self._heartbeat_soon_task = None

    # -- broker-initiated requests (ClientRemotingProcessor) -------------------------------

    def _register_processors(self) -> None:
        # request_reply imports this module (through producer), so its table is imported
        # here, when this module is complete.
        from .request_reply import RequestFutureTable

        self.request_futures: RequestFutureTable = RequestFutureTable()
        table: dict[int, Any] = {
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: self._on_notify_consumer_ids_changed,
            RequestCode.CHECK_TRANSACTION_STATE: self._on_check_transaction_state,
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET: self._on_reset_offset,
            RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: self._on_get_consumer_status,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self._on_get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self._on_consume_message_directly,
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT: self.request_futures.on_push_reply,
        }
        for code, handler in table.items():
            self.remoting.register(code, handler)

    def _on_notify_consumer_ids_changed(self, channel: Channel,
                                        request: RemotingCommand) -> RemotingCommand | None:
        header = NotifyConsumerIdsChangedRequestHeader.from_ext_fields(request.ext_fields)
        log.info("client.instance.consumer_ids_changed", group=header.consumer_group,
                 broker=channel.remote_addr)
        self.rebalance_immediately()
        return None

    def _on_check_transaction_state(self, channel: Channel,
                                    request: RemotingCommand) -> RemotingCommand | None:
        header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        if not request.body:
            log.warning("client.instance.check_transaction_no_body", broker=channel.remote_addr)
            return None
        msg, _ = decode_message(request.body)
        uniq = msg.properties.get("UNIQ_KEY")
        if uniq:
            msg.transaction_id = uniq
        group = msg.properties.get("PGROUP")
        producer = self.producers.get(group) if group else None
        if producer is None:
            log.debug("client.instance.check_transaction_no_producer", group=group)
            return None
        addr = channel.attrs.get("addr", channel.remote_addr)
        producer.check_transaction_state(addr, msg, header)
        return None

    async def _on_reset_offset(self, channel: Channel, request: RemotingCommand) -> None:
        header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        log.info("client.instance.reset_offset", group=header.group, topic=header.topic,
                 timestamp=header.timestamp, broker=channel.remote_addr)
        if not request.body:
            return None
        body = ResetOffsetBody.decode(request.body)
        consumer = self.consumers.get(header.group)
        if consumer is not None:
            await consumer.reset_offset(header.topic, dict(body.offset_table))
        return None

    def _on_get_consumer_status(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerStatusRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self.consumers.get(header.group)
        table = consumer.consumer_status(header.topic) if consumer is not None else {}
        body = GetConsumerStatusBody(message_queue_table=table)
        return request.create_response(ResponseCode.SUCCESS, None, None, body.encode())

    def _on_get_consumer_running_info(self, channel: Channel,
                                      request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self.consumers.get(header.consumer_group)
        if consumer is None:
            return request.create_response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{header.consumer_group}> not exist in this consumer")
        info = consumer.running_info()
        info.properties[ConsumerRunningInfo.PROP_NAMESERVER_ADDR] = self.config.namesrv_addr
        info.properties[ConsumerRunningInfo.PROP_CLIENT_VERSION] = f"V{CURRENT_VERSION}"
        # Upstream creates the response as SYSTEM_ERROR "not set any response code" and
        # then only sets the code: the remark stays (docs/PROTOCOL.md 3.5, frame id 1190).
        return request.create_response(ResponseCode.SUCCESS, "not set any response code",
                                       None, info.encode())

    async def _on_consume_message_directly(self, channel: Channel,
                                           request: RemotingCommand) -> RemotingCommand:
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self.consumers.get(header.consumer_group)
        if consumer is None or not request.body:
            return request.create_response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{header.consumer_group}> not exist in this consumer")
        msg, _ = decode_message(request.body)
        result = await consumer.consume_message_directly(msg, header.broker_name)
        return request.create_response(ResponseCode.SUCCESS, None, None, result.encode())
