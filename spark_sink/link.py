"""The connector's only I/O: RocketMQ calls made through ``client.api.MQClientAPI``.

Contract:

* ``RocketMQLink`` is the async side: one ``RemotingClient`` + ``MQClientAPI``, and the
  handful of compound operations the source and sink need (queue discovery from routes,
  min/max/timestamp offsets per queue, exact range reads, group membership, offset
  commits). It never caches offsets; routes are looked up on every ``queues()`` call so
  that new queues and vanished brokers are seen each micro-batch.
* ``BlockingLink`` is the synchronous facade Spark code calls: a ``client.sync.LoopThread``
  (one private event loop on one daemon thread per object, the class the client's sync
  facade is built on) whose hooks create the ``RocketMQLink`` in ``__enter__`` /
  ``open()`` and close it (heartbeat routine cancelled, connections closed) in
  ``__exit__`` / ``close()``. The driver keeps one per reader for the life of the query;
  each executor ``read()`` / ``write()`` opens one and closes it before returning, so
  tasks keep no state between calls.
* ``range_reader`` pulls exactly ``[start, end)`` of one queue with non-suspending pulls
  (PullSysFlag SUBSCRIPTION only: no COMMIT_OFFSET bit, so nothing is stored on the
  broker), ``pipeline`` windows of ``batch`` offsets in flight at once, and hands back the
  undecoded bodies in queue-offset order: by default on a connection of its own with the
  pulls as bytes (``pullwire.StreamRangeReader``, ROCKETMQ headers, the C codec
  ``_pull`` where built), else through ``MQClientAPI.pull_message`` on the link's channel
  (``RangeReader``; ``own_connection=False``), the same statuses either way. Data loss (the queue's min
  offset moved past what the range needs, or its max offset fell below it) raises
  ``DataLossError`` naming the queue when ``fail_on_data_loss``, else skips what is gone
  and logs ``spark.data_loss``.
* ``offsets_for_timestamps`` is SEARCH_OFFSET_BY_TIMESTAMP per queue: our broker answers
  the first offset stored at or after the time, and the queue's max offset when nothing
  is (stock 4.9.7 answers the nearer neighbour, so against it a time between two messages
  may start one message early). ``bytes_per_offset`` samples one pull per queue for
  maxBytesPerTrigger; ``offsets_by_key`` is QUERY_MESSAGE (the broker's key index) for
  the batch reader's ``keys =`` filter.

Upstream: ``DefaultMQPullConsumerImpl.pullSyncImpl`` (pull flags, docs/PROTOCOL.md 4.2),
``RebalanceImpl`` + ``AllocateMessageQueueAveragely`` (6.10), ``MQClientInstance``
heartbeats (4.6), ``RemoteBrokerOffsetStore.updateConsumeOffsetToBroker`` (4.5).
"""

# ASYNC109: ``timeout`` parameters are per-call budgets handed to MQClientAPI.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from aiorocketmq.client.allocate import AllocateMessageQueueAveragely, sort_cids, sort_queues
from aiorocketmq.client.api import MQClientAPI, PullResult, PullStatus
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.sync import LoopThread
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.acl import SessionCredentials
from aiorocketmq.protocol.bodies import (
    ConsumerData,
    HeartbeatData,
    MessageQueue,
    SubscriptionData,
    build_subscription_data,
)
from aiorocketmq.protocol.codes import MixAll, Perm, PullSysFlag
from aiorocketmq.protocol.errors import (
    MQBrokerError,
    MQClientError,
    QueryNotFoundError,
    RemotingError,
)
from aiorocketmq.protocol.headers import (
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.protocol.remoting_client import RemotingClient
from aiorocketmq.protocol.routine import cancel_and_wait

from .offsets import DataLossError, QueueKey
from .options import TlsOptions, client_config
from .pullwire import PullTemplate, StreamRangeReader
from .rows import ARROW_BATCH_ROWS

PulledWindow = tuple[bytes, int]  # a pull body (stored records) and its window's end

__all__ = ["RocketMQLink", "BlockingLink", "RouteView", "RangeReader", "PulledWindow",
           "RAW_PIPELINE"]

log = get_logger("aiorocketmq.spark")

T = TypeVar("T")

RAW_PIPELINE = 32  # windows in flight per range: 32 x 32 stored records, at most 32 x 256 KiB from a broker
QUERY_MAX_NUM = 64  # QUERY_MESSAGE answers at most this many (upstream maxMsgsNumBatch)
_HEARTBEAT_INTERVAL = 20.0  # seconds; the broker drops a client silent for 120 s (6.3)
_SYSTEM_TOPIC = re.compile(r"^(%RETRY%|%DLQ%|rmq_sys_|RMQ_SYS_)|^(TBW102|SCHEDULE_TOPIC_XXXX|"
                           r"OFFSET_MOVED_EVENT|BenchmarkTest|SELF_TEST_TOPIC)$|_REPLY_TOPIC$")


@dataclass(frozen=True, slots=True)
class RouteView:
    """Readable queues of some topics, with the address to read each broker from: its
    master, or while the master is out of the route its slave (lowest brokerId).

    ``missing_brokers`` are brokers a topic's route names in its queue data but for which
    no address at all is known (the broker went away): the caller reports them.
    """

    queues: tuple[QueueKey, ...]
    broker_addrs: dict[str, str]
    missing_brokers: tuple[str, ...]


class RocketMQLink:
    """Async RocketMQ calls for the connector (see module docstring)."""

    def __init__(self, name_server: str, *, timeout_ms: int = 10_000,
                 credentials: SessionCredentials | None = None,
                 tls: TlsOptions | None = None) -> None:
        # A unique instance name per link: two queries of one driver process joining the
        # same group must be two consumers (clientId = ip@instance, docs/PROTOCOL.md 4.6).
        instance = f"spark-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.config: ClientConfig = client_config(
            name_server, credentials=credentials, tls=tls, instance_name=instance,
            mq_client_api_timeout_ms=timeout_ms)
        self.client_id = self.config.build_client_id()
        self.remoting = RemotingClient(rpc_hook=self.config.build_rpc_hook(),
                                       ssl=self.config.build_ssl_context())
        self.remoting.update_namesrv_address_list(self.config.namesrv_addresses)
        self.api = MQClientAPI(self.remoting, self.config)
        self.timeout = timeout_ms / 1000

    async def close(self) -> None:
        await self.remoting.close()

    # -- metadata ---------------------------------------------------------------------------

    async def topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER, system topics left out: the well-known names,
        and the cluster and broker names (GET_SYSTEM_TOPIC_LIST_FROM_NS), which are topics
        too but hold no user messages."""
        topics, system = await asyncio.gather(
            self.api.get_topic_list_from_namesrv(self.timeout),
            self.api.get_system_topic_list_from_namesrv(self.timeout))
        skip = set(system)
        return sorted(t for t in topics if t not in skip and not _SYSTEM_TOPIC.search(t))

    async def routes(self, topics: Iterable[str]) -> RouteView:
        """Readable queues of ``topics`` (upstream ``topicRouteData2TopicSubscribeInfo``)."""
        queues: list[QueueKey] = []
        addrs: dict[str, str] = {}
        missing: set[str] = set()
        for topic in sorted(set(topics)):
            route = await self.api.get_topic_route_info(topic, self.timeout)
            for bd in route.broker_datas:
                addr = bd.broker_addrs.get(MixAll.MASTER_ID)
                if addr is None and bd.broker_addrs:
                    # The master is gone: read from its slave (findBrokerAddressInSubscribe
                    # with onlyThisBroker false), until the master is back in the route.
                    addr = bd.broker_addrs[min(bd.broker_addrs)]
                if addr:
                    addrs[bd.broker_name] = addr
            for qd in route.queue_datas:
                if not Perm.readable(qd.perm):
                    continue
                if qd.broker_name not in addrs:
                    missing.add(qd.broker_name)
                    continue
                queues.extend(QueueKey(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
        return RouteView(tuple(sorted(queues)), addrs, tuple(sorted(missing)))

    async def _per_queue(self, view: RouteView, keys: Sequence[QueueKey],
                         call: Callable[[str, MessageQueue], Awaitable[int]]) -> dict[QueueKey, int]:
        results = await asyncio.gather(*(call(view.broker_addrs[k.broker_name], _mq(k)) for k in keys))
        return dict(zip(keys, results, strict=True))

    async def max_offsets(self, view: RouteView, keys: Sequence[QueueKey]) -> dict[QueueKey, int]:
        return await self._per_queue(view, keys, lambda a, mq: self.api.get_max_offset(a, mq, self.timeout))

    async def max_offsets_reachable(self, view: RouteView, keys: Sequence[QueueKey]
                                    ) -> tuple[dict[QueueKey, int], dict[str, str]]:
        """Max offsets of the queues whose broker answers, and ``{broker: error}`` for the
        brokers that did not (transport errors only). A stopping broker refuses connections
        before it leaves the route (it unregisters last, as upstream
        ``BrokerController.shutdown``), so a planner must expect this for a while."""
        results = await asyncio.gather(
            *(self.api.get_max_offset(view.broker_addrs[k.broker_name], _mq(k), self.timeout)
              for k in keys), return_exceptions=True)
        out: dict[QueueKey, int] = {}
        failed: dict[str, str] = {}
        for key, result in zip(keys, results, strict=True):
            if isinstance(result, RemotingError):
                failed[key.broker_name] = str(result)
            elif isinstance(result, BaseException):
                raise result
            else:
                out[key] = result
        return out, failed

    async def min_offsets(self, view: RouteView, keys: Sequence[QueueKey]) -> dict[QueueKey, int]:
        return await self._per_queue(view, keys, lambda a, mq: self.api.get_min_offset(a, mq, self.timeout))

    async def offsets_for_timestamp(self, view: RouteView, keys: Sequence[QueueKey],
                                    timestamp_ms: int) -> dict[QueueKey, int]:
        """SEARCH_OFFSET_BY_TIMESTAMP per queue."""
        return await self.offsets_for_timestamps(view, dict.fromkeys(keys, timestamp_ms))

    async def offsets_for_timestamps(self, view: RouteView,
                                     stamps: Mapping[QueueKey, int]) -> dict[QueueKey, int]:
        """SEARCH_OFFSET_BY_TIMESTAMP per queue, each with its own time (ms)."""
        keys = sorted(stamps)
        results = await asyncio.gather(*(
            self.api.search_offset(view.broker_addrs[k.broker_name], _mq(k), stamps[k],
                                   self.timeout) for k in keys))
        return dict(zip(keys, results, strict=True))

    async def bytes_per_offset(self, view: RouteView, start: Mapping[QueueKey, int],
                               end: Mapping[QueueKey, int], *, group: str,
                               subscription: SubscriptionData, batch: int
                               ) -> dict[QueueKey, float]:
        """Stored bytes the reader will get per queue offset, from one pull of up to
        ``batch`` offsets at each queue's ``start`` (queues with ``end > start`` only): the
        pull body's length over the offsets it covered, so records the subscription
        filters out count as none. A queue whose pull finds nothing to measure (its
        messages are gone, or not there yet, or its broker did not answer) is left out."""
        keys = [k for k in sorted(end) if k in start and end[k] > start[k]
                and k.broker_name in view.broker_addrs]

        async def one(key: QueueKey) -> float | None:
            cur = start[key]
            header = PullMessageRequestHeader(
                consumer_group=group, topic=key.topic, queue_id=key.queue_id, queue_offset=cur,
                max_msg_nums=min(batch, end[key] - cur), sys_flag=PullSysFlag.SUBSCRIPTION,
                commit_offset=0, suspend_timeout_millis=0, subscription=subscription.sub_string,
                sub_version=0, expression_type=subscription.expression_type,
                bname=key.broker_name)
            try:
                result = await self.api.pull_message(view.broker_addrs[key.broker_name], header,
                                                     self.timeout, decode=False)
            except (RemotingError, MQBrokerError):
                return None  # the reader will meet it and report it
            covered = result.next_begin_offset - cur
            if covered <= 0 or result.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG):
                return None
            body = result.body if result.status is PullStatus.FOUND else None
            return len(body or b"") / covered

        sizes = await asyncio.gather(*(one(k) for k in keys))
        return {k: v for k, v in zip(keys, sizes, strict=True) if v is not None}

    async def offsets_by_key(self, view: RouteView, topics: Iterable[str], key: str, *,
                             begin_ms: int = 0, end_ms: int | None = None
                             ) -> list[tuple[QueueKey, int]] | None:
        """``(queue, offset)`` of the messages of ``topics`` whose ``KEYS`` hold ``key``,
        by QUERY_MESSAGE on every broker of ``view`` (the broker's key index); None when a
        broker answered ``QUERY_MAX_NUM`` of them, so that there may be more."""
        calls = [(topic, broker, addr) for topic in sorted(set(topics))
                 for broker, addr in sorted(view.broker_addrs.items())]
        answers = await asyncio.gather(*(
            self.api.query_message(addr, topic, key, max_num=QUERY_MAX_NUM, begin_ms=begin_ms,
                                   end_ms=end_ms, timeout=self.timeout)
            for topic, _, addr in calls))
        found: set[tuple[QueueKey, int]] = set()
        for (topic, broker, _), msgs in zip(calls, answers, strict=True):
            if len(msgs) >= QUERY_MAX_NUM:
                return None
            found.update((QueueKey(topic, broker, m.queue_id), m.queue_offset) for m in msgs)
        return sorted(found)

    # -- consumer group ---------------------------------------------------------------------

    def _heartbeat_data(self, group: str, topics: Sequence[str], sub_expression: str,
                        expression_type: str = "TAG") -> HeartbeatData:
        subs = [build_subscription_data(t, sub_expression, expression_type) for t in topics]
        consumer = ConsumerData(
            group_name=group, consume_type="CONSUME_ACTIVELY", message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_LAST_OFFSET", subscription_data_set=subs,
            unit_mode=False)
        return HeartbeatData(client_id=self.client_id, consumer_data_set=[consumer])

    async def heartbeat(self, view: RouteView, group: str, topics: Sequence[str],
                        sub_expression: str, expression_type: str = "TAG") -> None:
        """HEART_BEAT to every broker holding one of ``topics`` (joins the group)."""
        data = self._heartbeat_data(group, topics, sub_expression, expression_type)
        await asyncio.gather(*(self.api.send_heartbeat(addr, data, self.timeout)
                               for addr in sorted(set(view.broker_addrs.values()))))

    async def unregister(self, view: RouteView, group: str) -> None:
        for addr in sorted(set(view.broker_addrs.values())):
            await self.api.unregister_client(addr, self.client_id, consumer_group=group,
                                             timeout=self.timeout)

    async def allocate(self, view: RouteView, group: str) -> list[QueueKey]:
        """This client's share of ``view.queues`` (AllocateMessageQueueAveragely per topic)."""
        mine: list[QueueKey] = []
        strategy = AllocateMessageQueueAveragely()
        by_topic: dict[str, list[MessageQueue]] = {}
        for key in view.queues:
            by_topic.setdefault(key.topic, []).append(_mq(key))
        for topic, mqs in sorted(by_topic.items()):
            addr = view.broker_addrs[mqs[0].broker_name]
            cids = sort_cids(await self.api.get_consumer_id_list(addr, group, self.timeout))
            if self.client_id not in cids:
                # Our heartbeat has not reached the broker asked (or it restarted).
                continue
            for mq in strategy.allocate(group, self.client_id, sort_queues(mqs), cids):
                mine.append(QueueKey(topic, mq.broker_name, mq.queue_id))
        return sorted(mine)

    async def committed_offset(self, view: RouteView, group: str, key: QueueKey) -> int | None:
        header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=key.topic,
                                                  queue_id=key.queue_id, bname=key.broker_name)
        try:
            return await self.api.query_consumer_offset(view.broker_addrs[key.broker_name], header,
                                                        self.timeout)
        except QueryNotFoundError:
            return None

    async def commit_offsets(self, view: RouteView, group: str,
                             offsets: dict[QueueKey, int]) -> None:
        """UPDATE_CONSUMER_OFFSET for each queue whose broker is known, acknowledged."""
        calls = []
        for key, offset in sorted(offsets.items()):
            addr = view.broker_addrs.get(key.broker_name)
            if addr is None:
                continue
            header = UpdateConsumerOffsetRequestHeader(
                consumer_group=group, topic=key.topic, queue_id=key.queue_id,
                commit_offset=offset, bname=key.broker_name)
            calls.append(self.api.update_consumer_offset(addr, header, self.timeout, oneway=False))
        await asyncio.gather(*calls)

    # -- reads ------------------------------------------------------------------------------

    async def _window_results(self, addr: str, key: QueueKey, start: int, end: int, *,
                              group: str, subscription: SubscriptionData,
                              fail_on_data_loss: bool) -> list[PullResult]:
        """The FOUND pull results covering queue offsets ``[start, end)``, in order (the
        last one may hold records past ``end``)."""
        found: list[PullResult] = []
        flag = PullSysFlag.SUBSCRIPTION
        cur = start
        while cur < end:
            header = PullMessageRequestHeader(
                consumer_group=group, topic=key.topic, queue_id=key.queue_id, queue_offset=cur,
                max_msg_nums=end - cur, sys_flag=flag, commit_offset=0,
                suspend_timeout_millis=0, subscription=subscription.sub_string,
                sub_version=0, expression_type=subscription.expression_type,
                bname=key.broker_name)
            result = await self.api.pull_message(addr, header, self.timeout, decode=False)
            status = result.status
            if status is PullStatus.FOUND:
                found.append(result)
                nxt = result.next_begin_offset
            elif status is PullStatus.NO_MATCHED_MSG:
                nxt = result.next_begin_offset
            elif status is PullStatus.OFFSET_ILLEGAL and result.next_begin_offset > cur:
                nxt = self._lost(key, cur, result.next_begin_offset, fail_on_data_loss,
                                 "below the queue's min offset")
            else:
                # NO_NEW_MSG (or a move backwards) below ``end``: the queue no longer holds
                # offsets it reported when the batch was planned.
                nxt = self._lost(key, cur, end, fail_on_data_loss,
                                 f"past the queue's max offset {result.max_offset}")
            if nxt <= cur:
                raise MQClientError(
                    f"pull of {key} at offset {cur} did not advance (next {nxt}, "
                    f"status {status.name})")
            cur = nxt
        return found

    async def read_window_raw(self, addr: str, key: QueueKey, start: int, end: int, *,
                              group: str, subscription: SubscriptionData,
                              fail_on_data_loss: bool) -> list[PulledWindow]:
        """The FOUND bodies covering ``[start, end)``, each with ``end``, the records left as
        the broker sent them: ``columnar.ColumnarDecoder`` drops the records at or past
        ``end`` and re-checks the tags (the broker filters by tag hash only)."""
        results = await self._window_results(addr, key, start, end, group=group,
                                             subscription=subscription,
                                             fail_on_data_loss=fail_on_data_loss)
        return [(r.body, end) for r in results if r.body is not None]

    @staticmethod
    def _lost(key: QueueKey, cur: int, resume: int, fail: bool, why: str) -> int:
        if fail:
            raise DataLossError(
                f"queue {key}: offsets [{cur}, {resume}) are {why} and can no longer be read "
                f"(retention deleted them, or the broker lost them). Set failOnDataLoss=false "
                f"to skip them, or restart the query from new offsets.")
        log.warning("spark.data_loss", queue=str(key), lost_from=cur, lost_to=resume,
                    reason=why)
        return resume

    async def range_reader(self, addr: str, key: QueueKey, start: int, end: int, *,
                           group: str, sub_expression: str, batch: int,
                           fail_on_data_loss: bool, pipeline: int = RAW_PIPELINE,
                           expression_type: str = "TAG", own_connection: bool = True
                           ) -> RangeReader | StreamRangeReader:
        """A reader of ``[start, end)`` (undecoded bodies, pulls kept in flight): by default
        a ``pullwire.StreamRangeReader`` on a connection of its own (pull frames as bytes,
        C where built); with ``own_connection=False`` a ``RangeReader`` whose pulls go
        through ``MQClientAPI.pull_message`` on the link's shared channel. The min offset
        is checked first so that a range starting below it is reported (or skipped)
        before any pull."""
        subscription = build_subscription_data(key.topic, sub_expression, expression_type)
        min_offset = await self.api.get_min_offset(addr, _mq(key), self.timeout)
        if start < min_offset:
            start = self._lost(key, start, min(min_offset, end), fail_on_data_loss,
                               f"below the queue's min offset {min_offset}")
        if own_connection:
            template = PullTemplate(PullMessageRequestHeader(
                consumer_group=group, topic=key.topic, queue_id=key.queue_id, queue_offset=0,
                max_msg_nums=0, sys_flag=PullSysFlag.SUBSCRIPTION, commit_offset=0,
                suspend_timeout_millis=0, subscription=subscription.sub_string,
                sub_version=0, expression_type=subscription.expression_type,
                bname=key.broker_name))
            reader = StreamRangeReader(addr, key, start, end, template=template, batch=batch,
                                       pipeline=pipeline, timeout=self.timeout, lost=self._lost,
                                       fail_on_data_loss=fail_on_data_loss,
                                       hook=self.remoting.rpc_hook)
            await reader.open(self.remoting.ssl, self.remoting.connect_timeout)
            return reader

        def pull(s: int, e: int) -> Awaitable[list[PulledWindow]]:
            return self.read_window_raw(addr, key, s, e, group=group, subscription=subscription,
                                        fail_on_data_loss=fail_on_data_loss)

        return RangeReader(pull, start, end, batch, pipeline)


class RangeReader:
    """Pull windows of one queue range kept in flight ahead of the reader.

    ``await next()`` returns the next bodies covering at least ``CHUNK_ROWS`` offsets or
    ``CHUNK_BYTES`` bytes (None at the end of the range), in offset order; meanwhile up to
    ``pipeline`` windows of ``batch`` offsets are being pulled, so the broker keeps
    answering while the caller decodes. Runs on the link's loop; ``close()`` cancels what
    is still in flight (a task that stops reading early). A failed pull fails ``next()``
    and cancels the rest.
    """

    CHUNK_ROWS = ARROW_BATCH_ROWS  # one chunk, one Arrow batch
    CHUNK_BYTES = 8 << 20

    def __init__(self, pull: Callable[[int, int], Awaitable[list[PulledWindow]]], start: int,
                 end: int, batch: int, pipeline: int) -> None:
        self._pull = pull
        self._cursor = start
        self._end = end
        self._batch = batch
        self._pipeline = max(1, pipeline)
        self._in_flight: deque[tuple[int, asyncio.Task[list[PulledWindow]]]] = deque()

    def _refill(self) -> None:
        loop = asyncio.get_running_loop()
        while len(self._in_flight) < self._pipeline and self._cursor < self._end:
            s = self._cursor
            e = min(s + self._batch, self._end)
            self._cursor = e
            self._in_flight.append((e - s, loop.create_task(_await_list(self._pull(s, e)))))

    async def next(self) -> list[PulledWindow] | None:
        self._refill()
        if not self._in_flight:
            return None
        out: list[PulledWindow] = []
        rows = 0
        size = 0
        try:
            while self._in_flight and rows < self.CHUNK_ROWS and size < self.CHUNK_BYTES:
                span, task = self._in_flight.popleft()
                got = await task
                out += got
                rows += span
                size += sum(len(body) for body, _ in got)
                self._refill()
        except BaseException:
            self.close()
            raise
        return out

    def close(self) -> None:
        while self._in_flight:
            _, task = self._in_flight.popleft()
            task.cancel()


async def _await_list(aw: Awaitable[list[PulledWindow]]) -> list[PulledWindow]:
    return await aw


def _mq(key: QueueKey) -> MessageQueue:
    return MessageQueue(key.topic, key.broker_name, key.queue_id)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class BlockingLink(LoopThread):
    """``RocketMQLink`` behind a ``LoopThread`` (see module docstring).

    Args:
        name_server: ``host:port[;host:port]``.
        timeout_ms: budget of each RocketMQ call.
        credentials: ACL access key and secret (options accessKey / secretKey), or None.
        tls: the options tls=true, tlsVerify, tlsCaFile, ..., or None for plain TCP.
    """

    close_timeout = 30.0  # a task or the driver never hangs on a broker that stopped answering
    loop_factory = staticmethod(_new_loop)  # uvloop's when installed: ~15% less CPU per pull

    def __init__(self, name_server: str, *, timeout_ms: int = 10_000,
                 credentials: SessionCredentials | None = None,
                 tls: TlsOptions | None = None) -> None:
        super().__init__("rocketmq-spark-link")
        self._name_server = name_server
        self._credentials = credentials
        self._tls = tls
        self._timeout_ms = timeout_ms
        self._link: RocketMQLink | None = None
        self._routine_task: asyncio.Task[None] | None = None

    async def _aopen(self) -> None:
        self._link = RocketMQLink(self._name_server, timeout_ms=self._timeout_ms,
                                  credentials=self._credentials, tls=self._tls)

    async def _aclose(self) -> None:
        task, self._routine_task = self._routine_task, None
        link, self._link = self._link, None
        if task is not None:
            await cancel_and_wait((task,))
        if link is not None:
            await link.close()

    @property
    def link(self) -> RocketMQLink:
        if self._link is None:
            raise MQClientError("BlockingLink: not open")
        return self._link

    def call(self, fn: Callable[[RocketMQLink], Awaitable[T]]) -> T:
        return self.run(fn(self.link))

    def start_routine(self, fn: Callable[[RocketMQLink], Awaitable[None]],
                      interval: float = _HEARTBEAT_INTERVAL) -> None:
        """Run ``fn`` every ``interval`` seconds until close (the group heartbeat); a failed
        round is logged and the next one tries again, as upstream's scheduled heartbeat."""
        if self._routine_task is not None:
            return

        async def routine() -> None:
            while True:
                await asyncio.sleep(interval)
                try:
                    await fn(self.link)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("spark.heartbeat_failed", error=repr(exc))

        async def start() -> asyncio.Task[None]:
            return asyncio.get_running_loop().create_task(routine())

        self._routine_task = self.run(start())
