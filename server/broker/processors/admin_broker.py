"""Broker-wide admin requests (upstream ``AdminBrokerProcessor``, the broker half; docs/PROTOCOL.md 3.4, 4.11).

``handlers(controller)`` returns the table; each handler decodes, acts and answers:

* GET_BROKER_CONFIG: header ``version`` = the configuration's DataVersion as JSON
  (``{"counter":0,"timestamp":...}`` at boot, frame 1089), body = ``key=value`` lines of
  the broker and store options plus the stock keys we do not implement, from the ``-c``
  file or set by UPDATE_BROKER_CONFIG.
* UPDATE_BROKER_CONFIG: body = properties text, checked whole by ``config_update`` before
  anything changes: an unknown key, a value that does not parse or is out of range, and
  the store-layout and identity keys (segment sizes, paths, flush type; names, id, port)
  answer SYSTEM_ERROR naming the key, where upstream answers SUCCESS and sometimes breaks
  (see ``config_update``). Our keys update the live records; stock keys we do not
  implement are kept and shown by GET_BROKER_CONFIG. The DataVersion moves on, and, as
  upstream's ``Configuration.update`` then ``persist()``, the whole configuration is
  written over the ``-c`` file (``persisted_config_text``: every key GET_BROKER_CONFIG
  shows, the configured ``listenPort`` rather than the one a 0 bound, then the file's other
  keys as they were), atomically with the previous content kept as ``<file>.bak``
  (``MixAll.string2File``), so the change survives a restart; a failed write is logged
  (``broker.config_persist_failed``) and the answer stays SUCCESS, as upstream's. Without
  ``-c`` nothing is written (upstream writes ``~/store/config/broker.properties``, which
  no start reads). A ``brokerPermission`` change also moves the topic DataVersion on and
  re-registers with every nameserver.
* GET_BROKER_RUNTIME_INFO: KVTable with every key of ``prepareRuntimeInfo`` +
  ``StoreStatsService.getRuntimeInfo`` (all values strings; docs/PROTOCOL.md 4.11), plus
  stock 5.x's ``timer*`` keys (``timerReadBehind``, ``timerOffsetBehind``, ``timerCongestNum``,
  ``timerEnqueueTps``, ``timerDequeueTps``).
* GET_TIMER_METRICS (61, stock 5.x): the timer store's ``TimerMetrics`` JSON (pending timers
  per real topic); SYSTEM_ERROR ``The timer message store is null`` with ``timerWheelEnable=false``
  (stock builds no timer store then).
* GET_TIMER_CHECK_POINT (60, stock 5.x): the timer checkpoint's first 56 bytes (read time,
  timer-log position, queue offset, master queue offset, DataVersion; big-endian int64s);
  SYSTEM_ERROR ``The checkpoint is null`` while no timer store is loaded (a slave, or
  ``timerWheelEnable=false``: ours keeps no checkpoint then).
* GET_ALL_TOPIC_CONFIG, GET_TOPIC_STATS_INFO (one entry per write queue; TOPIC_NOT_EXIST
  ``topic[<t>] not exist``), GET_SYSTEM_TOPIC_LIST_FROM_BROKER.
* CLEAN_EXPIRED_CONSUMEQUEUE, DELETE_EXPIRED_COMMITLOG, CLEAN_UNUSED_TOPIC: the store's
  retention calls; SUCCESS.
* VIEW_BROKER_STATS_DATA: minute/hour/day of a stats item, or SYSTEM_ERROR
  ``The stats <name> <key> not exist``.
* GET_BROKER_CONSUME_STATS: ``ConsumeStatsList`` for every subscription group.
* QUERY_CONSUME_QUEUE: up to ``count`` units of one consume queue from ``index`` (to the end of
  that index's file), with the queue's bounds and, for a ``consumerGroup``, its subscription
  and filter (``<g>@<t> is not online!`` for a group without one). SYSTEM_ERROR
  ``<q>@<t> is not exist!`` for a queue the store never made; an index outside the queue's
  files (or at its end) answers SUCCESS with remark ``Index <i> of <q>@<t> is not exist!`` and no body, as
  upstream (whose tool then fails decoding nothing). Other SUCCESS answers keep the remark
  ``not set any response code`` of upstream's ``createResponseCommand(null)``.

Success answers carry no remark, as upstream's ``setRemark(null)``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.atomic_file import AtomicFileWriter
from aiorocketmq.protocol.bodies import (
    BrokerStatsData,
    BrokerStatsItem,
    ConsumeQueueData,
    ConsumeStats,
    ConsumeStatsList,
    DataVersion,
    KVTable,
    MessageQueue,
    OffsetWrapper,
    QueryConsumeQueueResponseBody,
    TopicList,
    TopicOffset,
    TopicStatsTable,
    properties_to_string,
    string_to_properties,
)
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import CURRENT_VERSION, MQVersion, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import ProtocolError
from aiorocketmq.protocol.fastjson import dumps_pretty
from aiorocketmq.protocol.headers import (
    GetBrokerConfigResponseHeader,
    GetConsumeStatsInBrokerHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeQueueRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    decode_header,
)
from aiorocketmq.protocol.javautil import java_concurrent_hashmap_order, java_hashmap_order
from aiorocketmq.protocol.runtime import read_properties_file
from aiorocketmq.server.store.consume_queue import CQ_STORE_UNIT_SIZE, CQ_UNIT

from ..config import store_config_to_properties, unknown_broker_keys
from ..config_update import STOCK_BROKER_KEYS, plan_config_update
from ..stats import BrokerStatsManager

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["AdminBrokerStatsProcessor", "handlers", "human_readable_bytes", "broker_stats_of"]

log = get_logger("aiorocketmq.broker.admin")

# BrokerConfig / thread-pool capacities upstream reports; we have no such pools.
_PULL_QUEUE_CAPACITY = 100000
_QUERY_QUEUE_CAPACITY = 20000
_END_TX_QUEUE_CAPACITY = 100000
_CQ_EXT_MAX_ADDR = -(2**31) - 1  # ConsumeQueueExt.MAX_ADDR: tags codes at or below address the ext file
_NOT_SET = "not set any response code"  # RemotingCommand.createResponseCommand's default remark


def human_readable_bytes(n: int) -> str:
    """``MixAll.humanReadableByteCount(bytes, false)``: ``"512 B"``, ``"252.0 GiB"``."""
    if n < 1024:
        return f"{n} B"
    exp = min(int(math.log(n) / math.log(1024)), 6)
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def broker_stats_of(controller: Any) -> BrokerStatsManager:
    """The controller's ``stats``; one is attached on first use until the controller makes it."""
    stats = getattr(controller, "stats", None)
    if stats is None:
        stats = BrokerStatsManager(controller.config.broker_cluster_name)
        controller.stats = stats
    return stats  # type: ignore[no-any-return]


class AdminBrokerStatsProcessor:
    """Config, runtime info, topic stats and retention requests; see the module docstring."""

    def __init__(self, broker: BrokerController) -> None:
        self._b = broker
        self.stats = broker_stats_of(broker)
        self.config_version = DataVersion()  # upstream Configuration.dataVersion, counter 0 at boot
        # Stock keys we do not implement: from the -c file, then UPDATE_BROKER_CONFIG.
        self.extra_config: dict[str, str] = {}
        path = getattr(broker, "config_path", None)
        self._config_writer = (AtomicFileWriter(Path(path), backup=True)
                               if path is not None else None)
        if path is not None:
            try:
                props = read_properties_file(path)
            except (OSError, UnicodeError):
                props = {}
            self.extra_config.update((key, props[key]) for key, _ in unknown_broker_keys(props)
                                     if key in STOCK_BROKER_KEYS)

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_TIMER_METRICS: self.get_timer_metrics,
            RequestCode.GET_TIMER_CHECK_POINT: self.get_timer_check_point,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
        }

    # -- configuration --------------------------------------------------------------------

    def config_text(self) -> str:
        b = self._b
        text = b.config.to_properties() + store_config_to_properties(b.store_config)
        # NettyClientConfig's default, Runtime.availableProcessors(): mqadmin exportMetrics
        # reports it as the broker's cpuNum. NettyClientConfig.useTLS (-Dtls.enable: TLS to
        # the nameservers) and BrokerConfig.filterServerNums (we start no filter servers):
        # stock's mqadmin exportConfigs fails on a broker without them.
        extra = {"clientCallbackExecutorThreads": str(os.cpu_count() or 1),
                 "useTLS": "true" if b.tls.enable else "false", "filterServerNums": "0",
                 **self.extra_config}
        return text + properties_to_string(extra)

    def get_broker_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        header = GetBrokerConfigResponseHeader(version=self.config_version.encode().decode())
        return request.create_response(ResponseCode.SUCCESS, ext_fields=header.to_ext_fields(),
                                       body=self.config_text().encode("utf-8"))

    async def update_broker_config(self, channel: Channel,
                                   request: RemotingCommand) -> RemotingCommand:
        log.info("broker.update_broker_config", peer=channel.remote_addr)
        if request.body:
            try:
                props = string_to_properties(bytes(request.body).decode("utf-8", "replace"))
                self._apply(props)
            except (ProtocolError, ValueError) as exc:
                log.warning("broker.config_update_refused", peer=channel.remote_addr,
                            reason=str(exc)[:300])
                return request.create_response(ResponseCode.SYSTEM_ERROR, str(exc))
            self.config_version.next_version()
            await self.persist_config()
            if "brokerPermission" in props:
                self._b.topics.data_version.next_version()
                await self._b.namesrv.register_broker_all()
        return request.create_response(ResponseCode.SUCCESS)

    def persisted_config_text(self) -> str:
        """What ``persist_config`` writes: ``config_text`` with the configured listen port
        and without unset values, then the keys of the file on disk it does not hold."""
        b = self._b
        config = dataclasses.replace(b.config, listen_port=getattr(
            b, "requested_listen_port", b.config.listen_port))
        text = (config.to_properties() + store_config_to_properties(b.store_config)
                + properties_to_string(self.extra_config))
        path = getattr(b, "config_path", None)
        try:
            on_disk = read_properties_file(path) if path is not None else {}
        except (OSError, UnicodeError):
            on_disk = {}
        written = string_to_properties(text)
        # An unset value (namesrvAddr None renders as "") is left out, as upstream's
        # object2Properties leaves out nulls, unless the file had the key.
        persisted = {k: v for k, v in written.items() if v != "" or k in on_disk}
        persisted.update((k, v) for k, v in on_disk.items() if k not in written)
        return properties_to_string(persisted)

    async def persist_config(self) -> None:
        """``Configuration.persist``: the whole configuration over the ``-c`` file (module
        docstring); nothing without one. A failure is logged, not raised."""
        writer = self._config_writer
        if writer is None:
            return
        try:
            await writer.write(lambda: self.persisted_config_text().encode("utf-8"))
        except OSError as exc:
            log.error("broker.config_persist_failed", path=str(writer.path),
                      error=f"{exc.__class__.__name__}: {exc}")
            return
        log.info("broker.config_persisted", path=str(writer.path))

    def _apply(self, props: dict[str, str]) -> None:
        """Check every key first (``config_update``), then assign: a refused key changes nothing."""
        plan = plan_config_update(props, self._b.config, self._b.store_config, self.extra_config)
        for target, name, value in plan:
            if isinstance(target, dict):
                target[name] = value
            else:
                setattr(target, name, value)
            log.info("broker.config_updated", key=name, value=value)

    # -- runtime info ---------------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        """``prepareRuntimeInfo``: the store's keys, the stats' keys, then the broker's."""
        b = self._b
        info: dict[str, str] = {}
        store = b.store
        info.update(store.runtime_info())
        commit_dir = b.store_config.commit_log_dir
        info["commitLogDiskRatio_" + commit_dir] = info.get("commitLogDiskRatio", "0.0")
        if b.schedule is not None:  # upstream DefaultMessageStore.getRuntimeInfo
            b.schedule.build_running_stats(info)
        info.update(self.stats.runtime_info())
        info.update({
            "brokerVersionDesc": MQVersion.desc(CURRENT_VERSION),
            "brokerVersion": str(CURRENT_VERSION),
            "putMessageEntireTimeMax": "0",
            "getMessageEntireTimeMax": "0",
            "dispatchMaxBuffer": "0",
            "putLatency99": "0.00",
            "putLatency999": "0.00",
            # No thread pools: requests run on the event loop. The send queue's size is the
            # sends waiting for the store, bounded by its capacity (processors/send.py).
            "sendThreadPoolQueueSize": str(b.send_processor.queue_size
                                           if b.send_processor is not None else 0),
            "sendThreadPoolQueueCapacity": str(b.config.send_thread_pool_queue_capacity),
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueCapacity": str(_PULL_QUEUE_CAPACITY),
            "queryThreadPoolQueueSize": "0",
            "queryThreadPoolQueueCapacity": str(_QUERY_QUEUE_CAPACITY),
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": str(_END_TX_QUEUE_CAPACITY),
            "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
            "pageCacheLockTimeMills": "0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "startAcceptSendRequestTimeStamp": "0",
            "remainTransientStoreBufferNumbs": str(2**31 - 1),  # pool disabled: Integer.MAX_VALUE
            "remainHowManyDataToFlush": human_readable_bytes(self._unflushed_bytes()),
        })
        info.update(self._timer_runtime_info())
        info.pop("brokerName", None)
        info.pop("physicMsgTimestamp", None)
        root = b.store_config.store_path_root_dir
        if os.path.isdir(root):
            st = os.statvfs(root)
            info["commitLogDirCapacity"] = (
                f"Total : {human_readable_bytes(st.f_blocks * st.f_frsize)}, "
                f"Free : {human_readable_bytes(st.f_bavail * st.f_frsize)}.")
        return info

    def _timer_runtime_info(self) -> dict[str, str]:
        """Stock 5.x's timer keys (``timerReadBehind`` in seconds, ``timerOffsetBehind`` in
        messages, ``timerCongestNum``: timers waiting, from the per-topic counts rather than a
        scan of the wheel's slots as stock's ``getAllNum``); zeros
        while no timer store runs (``timerWheelEnable=false``, a slave)."""
        timer = self._b.timer
        if timer is None or not timer.running:
            return {"timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0",
                    "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0"}
        enqueue_tps, dequeue_tps = timer.tps()
        return {"timerReadBehind": str(timer.dequeue_behind_ms() // 1000),
                "timerOffsetBehind": str(timer.enqueue_behind_messages()),
                "timerCongestNum": str(timer.metrics.total),
                "timerEnqueueTps": f"{enqueue_tps:.1f}", "timerDequeueTps": f"{dequeue_tps:.1f}"}

    def _unflushed_bytes(self) -> int:
        store = self._b.store
        flushed = getattr(getattr(store, "commit_log", None), "flushed_where", None)
        if not isinstance(flushed, int):
            return 0
        return max(store.get_max_phy_offset() - flushed, 0)

    def get_broker_runtime_info(self, channel: Channel,
                                request: RemotingCommand) -> RemotingCommand:
        return request.create_response(ResponseCode.SUCCESS,
                                       body=KVTable(self.runtime_info()).encode())

    def get_timer_metrics(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_TIMER_METRICS (61, stock 5.x ``AdminBrokerProcessor.getTimerMetrics``)."""
        timer = self._b.timer
        if timer is None or not self._b.store_config.timer_wheel_enable:  # stock builds none then
            return request.create_response(ResponseCode.SYSTEM_ERROR, "The timer message store is null")
        return request.create_response(ResponseCode.SUCCESS, body=timer.metrics.encode())

    def get_timer_check_point(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_TIMER_CHECK_POINT (60, stock 5.x ``AdminBrokerProcessor.getTimerCheckPoint``)."""
        timer = self._b.timer
        checkpoint = timer.checkpoint if timer is not None else None
        if checkpoint is None or checkpoint.mm.closed:
            return request.create_response(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        return request.create_response(ResponseCode.SUCCESS, body=checkpoint.encode())

    # -- topics ---------------------------------------------------------------------------

    def get_all_topic_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.create_response(ResponseCode.SUCCESS, body=self._b.topics.encode())

    def get_topic_stats_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetTopicStatsInfoRequestHeader, request)
        tc = self._b.topics.select(h.topic)
        if tc is None:
            return request.create_response(ResponseCode.TOPIC_NOT_EXIST,
                                           f"topic[{h.topic}] not exist")
        store = self._b.store
        broker_name = self._b.config.broker_name
        table: dict[MessageQueue, TopicOffset] = {}
        for qid in range(tc.write_queue_nums):
            low = max(store.get_min_offset_in_queue(h.topic, qid), 0)
            high = max(store.get_max_offset_in_queue(h.topic, qid), 0)
            ts = store.get_message_store_timestamp(h.topic, qid, high - 1) if high > 0 else 0
            table[MessageQueue(h.topic, broker_name, qid)] = TopicOffset(low, high, ts)
        return request.create_response(ResponseCode.SUCCESS, body=TopicStatsTable(table).encode())

    def get_system_topic_list(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topics = sorted(self._b.topics.system_topics)
        return request.create_response(ResponseCode.SUCCESS, body=TopicList(topics).encode())

    # -- retention ------------------------------------------------------------------------

    async def clean_expired_consume_queue(self, channel: Channel,
                                          request: RemotingCommand) -> RemotingCommand:
        log.warning("broker.clean_expired_consume_queue", peer=channel.remote_addr)
        await self._b.store.clean_consume_queues()
        return request.create_response(ResponseCode.SUCCESS)

    def delete_expired_commit_log(self, channel: Channel,
                                  request: RemotingCommand) -> RemotingCommand:
        log.warning("broker.delete_expired_commit_log", peer=channel.remote_addr)
        self._b.store.execute_delete_files_manually()
        return request.create_response(ResponseCode.SUCCESS)

    def clean_unused_topic(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        log.warning("broker.clean_unused_topic", peer=channel.remote_addr)
        self._b.store.clean_unused_topic(set(self._b.topics.topic_config_table))
        return request.create_response(ResponseCode.SUCCESS)

    # -- stats ----------------------------------------------------------------------------

    def view_broker_stats_data(self, channel: Channel,
                               request: RemotingCommand) -> RemotingCommand:
        h = decode_header(ViewBrokerStatsDataRequestHeader, request)
        item = self.stats.get_stats_item(h.stats_name, h.stats_key)
        if item is None:
            return request.create_response(
                ResponseCode.SYSTEM_ERROR, f"The stats <{h.stats_name}> <{h.stats_key}> not exist")
        now = self.stats.now()
        views = [BrokerStatsItem(s.sum, s.tps, s.avgpt)
                 for s in (item.minute(now), item.hour(now), item.day(now))]
        return request.create_response(ResponseCode.SUCCESS,
                                       body=BrokerStatsData(*views).encode())

    def get_broker_consume_stats(self, channel: Channel,
                                 request: RemotingCommand) -> RemotingCommand:
        """``fetchAllConsumeStatsInBroker``: ``ConsumeStatsList`` built as fastjson writes it."""
        h = decode_header(GetConsumeStatsInBrokerHeader, request)
        b = self._b
        broker_name = b.config.broker_name
        store = b.store
        total_diff = 0
        groups: list[dict[str, list[ConsumeStats]]] = []
        # upstream walks its ConcurrentHashMap(1024) of groups and a HashSet of topics
        for group in java_concurrent_hashmap_order(b.subscription_groups.table, 1024):
            stats_list: list[ConsumeStats] = []
            for topic in java_hashmap_order(sorted(b.offsets.which_topic_by_consumer(group))):
                tc = b.topics.select(topic)
                if tc is None or (h.is_order and not tc.order):
                    continue
                info = b.consumers.get(group)
                if info is not None and info.subscriptions and topic not in info.subscriptions:
                    continue
                cs = ConsumeStats()
                for qid in range(tc.write_queue_nums):
                    cs.offset_table[MessageQueue(topic, broker_name, qid)] = _offset_wrapper(
                        b, store, group, topic, qid)
                cs.consume_tps = self.stats.tps_group_get_nums(group, topic)
                total_diff += cs.compute_total_diff()
                stats_list.append(cs)
            groups.append({group: stats_list})
        body = ConsumeStatsList(broker_addr=b.config.broker_addr, consume_stats_list=groups,
                                total_diff=total_diff)
        return request.create_response(ResponseCode.SUCCESS, body=body.encode())

    def query_consume_queue(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """Upstream ``queryConsumeQueue``; see the module docstring."""
        h = decode_header(QueryConsumeQueueRequestHeader, request)
        b = self._b
        topic = h.topic if h.topic is not None else "null"
        cq = b.store.find_consume_queue(topic, h.queue_id)
        if cq is None:
            return request.create_response(ResponseCode.SYSTEM_ERROR,
                                           f"{h.queue_id}@{topic} is not exist!")
        body = QueryConsumeQueueResponseBody(max_queue_index=cq.max_offset,
                                             min_queue_index=cq.min_offset)
        if h.consumer_group is not None:
            sub = b.consumers.find_subscription_data(h.consumer_group, topic)
            body.subscription_data = sub
            if sub is None:
                body.filter_data = f"{h.consumer_group}@{topic} is not online!"
            else:
                data = b.consumer_filters.get(topic, h.consumer_group)
                body.filter_data = ("null" if data is None
                                    else dumps_pretty(data.to_json()))
        view = cq.get_index_buffer(h.index)
        if view is None or not len(view):  # MappedFile.selectMappedBuffer: null at the end too
            if view is not None:
                view.release()
            return request.create_response(
                ResponseCode.SUCCESS, f"Index {h.index} of {h.queue_id}@{topic} is not exist!")
        units: list[ConsumeQueueData] = []
        try:
            end = min(len(view), max(h.count, 0) * CQ_STORE_UNIT_SIZE)
            for pos in range(0, end - CQ_STORE_UNIT_SIZE + 1, CQ_STORE_UNIT_SIZE):
                phy, size, tags = CQ_UNIT.unpack_from(view, pos)
                unit = ConsumeQueueData(phy, size, tags)
                if tags <= _CQ_EXT_MAX_ADDR:  # ConsumeQueueExt.isExtAddr; we keep no extension file
                    unit.msg = f"Cq extend not exist!addr: {tags}"
                units.append(unit)
        finally:
            view.release()
        body.queue_data = units
        return request.create_response(ResponseCode.SUCCESS, _NOT_SET, body=body.encode())


def _offset_wrapper(b: Any, store: Any, group: str, topic: str, qid: int) -> OffsetWrapper:
    """One queue of ConsumeStats (docs/PROTOCOL.md 4.11): ``lastTimestamp`` is the store time of
    message ``consumerOffset - 1``, 0 when nothing was consumed or it is gone."""
    broker_offset = max(store.get_max_offset_in_queue(topic, qid), 0)
    consumer_offset = max(b.offsets.query_offset(group, topic, qid), 0)
    last = 0
    if consumer_offset - 1 >= 0:
        ts = store.get_message_store_timestamp(topic, qid, consumer_offset - 1)
        if ts > 0:
            last = ts
    return OffsetWrapper(broker_offset, consumer_offset, last)


def handlers(controller: BrokerController) -> dict[int, Handler]:
    """The table for broker-wide admin requests (call after the store has started)."""
    return AdminBrokerStatsProcessor(controller).handlers()
