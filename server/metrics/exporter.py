"""The families of Apache ``rocketmq-exporter``, served by the broker itself.

Dashboards and alert rules for RocketMQ are built on that exporter (github.com/apache/
rocketmq-exporter), a separate process that polls the admin API of every broker. Its
families are defined in ``collector/RMQMetricsCollector.java`` (names, label names and
order) and filled by ``task/MetricsCollectTask.java`` (which admin call, which value); this
module computes the same values in process, at scrape time, from what the broker already
keeps, so the hot paths pay nothing:

* per topic: ``BrokerStatsManager``'s TOPIC_PUT_NUMS / TOPIC_PUT_SIZE minute views (what
  VIEW_BROKER_STATS_DATA answers), the queues' max offsets (GET_TOPIC_STATS_INFO);
* per group and topic: GROUP_GET_NUMS / GROUP_GET_SIZE / SNDBCK_PUT_NUMS minute views and the
  broker and committed offsets of every queue (GET_CONSUME_STATS);
* broker-wide: BROKER_PUT_NUMS / BROKER_GET_NUMS and every GET_BROKER_RUNTIME_INFO key,
  parsed the way the exporter's ``model/BrokerRuntimeStats.java`` parses them.

Value conventions copied from the exporter: a TPS is the minute view's ``tps`` rounded to two
decimals (``Utils.getFixedDouble``); offsets are summed over a broker's queues; a group's
diff, latency and ``msgModel`` label only exist for CLUSTERING groups (``msgModel`` is
``MessageModel.ordinal()``: ``"1"``); retry and DLQ topics go to their own families
(``rocketmq_group_retrydiff``, ``rocketmq_topic_retry_offset``, ...). The exporter sums a
topic over all brokers of the cluster where a family has no ``broker`` label
(``rocketmq_group_diff``); here each broker reports its own share under the same labels, so
a dashboard's ``sum(...) by (group, topic)`` across the scrape targets gives the same total.
The exporter leaves ``brokerHost`` empty (MetricsCollectTask.collectBrokerRuntimeStats);
so do we.

Where we diverge, and why:

* ``rocketmq_brokeruntime_getfound_tps10`` carries the 10 s window: the exporter never fills
  it (RMQMetricsCollector.addAllKindOfTps stores the 600 s value twice), yet its overview
  dashboard plots it.
* ``rocketmq_brokeruntime_pmdt_*`` (put latency distribution, upstream
  ``StoreStatsService.putMessageDistributeTime``: puts per latency band since the current
  minute began) come from the ``rocketmq_store_append_seconds`` histogram, whose buckets
  include every band edge; the minute window restarts at the first scrape 60 s or more after
  the previous restart. Our GET_BROKER_RUNTIME_INFO reports the key empty, so the stock
  exporter shows no pmdt series for our broker.
* Families the exporter fills from other processes are not served: ``rocketmq_client_*``
  (GET_CONSUMER_RUNNING_INFO round trips to every consumer), ``rocketmq_broker_commitlog_diff``
  (master minus slave; we have no slaves), and ``rocketmq_group_consume_tps`` /
  ``rocketmq_group_consume_total_offset`` (declared by the exporter but never filled).
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from aiorocketmq.protocol.codes import MixAll

from ..broker.processors.admin_broker import AdminBrokerStatsProcessor
from ..broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    StatsSnapshot,
)
from .registry import HistogramChild, Registry, Sample

if TYPE_CHECKING:
    from ..broker.controller import BrokerController
    from ..store.message_store import MessageStore

__all__ = ["ExporterFamilies", "PutLatencyBands", "PMDT_BANDS", "RUNTIME_GAUGES", "family_names", "fixed_double",
           "split_tps", "machine_readable_byte_count"]

# RMQMetricsCollector's label lists, in its order.
TOPIC_LABELS = ("cluster", "broker", "topic")  # TOPIC_NUMS_ / TOPIC_OFFSET_LABEL_NAMES
DLQ_OFFSET_LABELS = ("cluster", "broker", "group")  # DLQ_TOPIC_OFFSET_LABEL_NAMES
GROUP_LABELS = ("cluster", "broker", "topic", "group")  # GROUP_NUMS_LABEL_NAMES
GROUP_DIFF_LABELS = ("group", "topic", "countOfOnlineConsumers", "msgModel")
GROUP_COUNT_LABELS = ("caddr", "localaddr", "group")
PRODUCER_COUNT_LABELS = ("cluster", "broker", "group")
BROKER_LABELS = ("cluster", "brokerIP", "broker")  # BROKER_NUMS_LABEL_NAMES
RUNTIME_LABELS = ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version")

_CLUSTERING_ORDINAL = "1"  # MessageModel { BROADCASTING, CLUSTERING }
_PMDT_WINDOW = 60.0  # StoreStatsService.printTps: the distribution restarts every minute

# StoreStatsService.putMessageDistributeTime bands (seconds, upper edge exclusive upstream:
# whole milliseconds, so "<=0ms" is under 1 ms); the family suffix the exporter gives each.
PMDT_BANDS: tuple[tuple[str, float, float], ...] = (
    ("0ms", 0.0, 0.001), ("0to10ms", 0.001, 0.01), ("10to50ms", 0.01, 0.05),
    ("50to100ms", 0.05, 0.1), ("100to200ms", 0.1, 0.2), ("200to500ms", 0.2, 0.5),
    ("500to1s", 0.5, 1.0), ("1to2s", 1.0, 2.0), ("2to3s", 2.0, 3.0), ("3to4s", 3.0, 4.0),
    ("4to5s", 4.0, 5.0), ("5to10s", 5.0, 10.0), ("10stomore", 10.0, math.inf),
)


def fixed_double(value: float) -> float:
    """``Utils.getFixedDouble``: ``DecimalFormat("#.##")``, i.e. two decimals, half-even."""
    return round(value, 2)


def split_tps(text: str) -> tuple[float, float, float]:
    """``BrokerRuntimeStats.loadTps``: the 10 s, 60 s and 600 s windows; a missing one is 0."""
    parts = text.split(" ")
    while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
        parts.pop()
    values = [float(p) if p else 0.0 for p in parts[:3]]
    values += [0.0] * (3 - len(values))
    return values[0], values[1], values[2]


def machine_readable_byte_count(text: str) -> float:
    """``Utils.machineReadableByteCount``: ``"252.0 GiB"`` -> bytes (powers of 1024)."""
    base, unit = text.split(" ")[:2]
    if unit == "B":
        return float(base)
    return float(base) * 1024.0 ** ("KMGTPE".index(unit[0]) + 1)


def _dir_capacity(text: str) -> tuple[float, float]:
    """``loadCommitLogDirCapacity``: ``"Total : 252.0 GiB, Free : 100.0 GiB."``."""
    arr = text.split(" ")
    total = machine_readable_byte_count(f"{arr[2]} {arr[3][:-1]}")
    free = machine_readable_byte_count(f"{arr[6]} {arr[7][:-1]}")
    return total, free


RuntimeValue = Callable[[Mapping[str, str]], float]


def _long(key: str) -> RuntimeValue:
    return lambda info: int(info[key])


def _double(key: str, default: str | None = None) -> RuntimeValue:
    if default is None:
        return lambda info: float(info[key])
    return lambda info: float(info.get(key, default))


def _tps(key: str, window: int) -> RuntimeValue:
    return lambda info: split_tps(info[key])[window]


def _leading_number(key: str) -> RuntimeValue:
    # remainHowManyDataToFlush is human-readable ("1.2 KiB"); the exporter keeps the number
    # before the space and drops the unit (BrokerRuntimeStats: split(" ")[0]).
    return lambda info: float(info[key].split(" ")[0])


def _capacity(index: int) -> RuntimeValue:
    return lambda info: _dir_capacity(info["commitLogDirCapacity"])[index]


# (family, GET_BROKER_RUNTIME_INFO reading): RMQMetricsCollector.collectBrokerRuntimeStats,
# values as BrokerRuntimeStats parses them.
RUNTIME_GAUGES: tuple[tuple[str, RuntimeValue], ...] = (
    ("rocketmq_brokeruntime_msg_put_total_today_now", _long("msgPutTotalTodayNow")),
    ("rocketmq_brokeruntime_msg_gettotal_today_now", _long("msgGetTotalTodayNow")),
    ("rocketmq_brokeruntime_dispatch_behind_bytes", _long("dispatchBehindBytes")),
    ("rocketmq_brokeruntime_put_message_size_total", _long("putMessageSizeTotal")),
    ("rocketmq_brokeruntime_put_message_average_size", _double("putMessageAverageSize")),
    ("rocketmq_brokeruntime_query_threadpool_queue_capacity",
     _long("queryThreadPoolQueueCapacity")),
    ("rocketmq_brokeruntime_remain_transientstore_buffer_numbs",
     _long("remainTransientStoreBufferNumbs")),
    ("rocketmq_brokeruntime_earliest_message_timestamp", _long("earliestMessageTimeStamp")),
    ("rocketmq_brokeruntime_putmessage_entire_time_max", _long("putMessageEntireTimeMax")),
    ("rocketmq_brokeruntime_start_accept_sendrequest_time",
     _long("startAcceptSendRequestTimeStamp")),
    ("rocketmq_brokeruntime_send_threadpool_queue_size", _long("sendThreadPoolQueueSize")),
    ("rocketmq_brokeruntime_putmessage_times_total", _long("putMessageTimesTotal")),
    ("rocketmq_brokeruntime_getmessage_entire_time_max", _long("getMessageEntireTimeMax")),
    ("rocketmq_brokeruntime_pagecache_lock_time_mills", _long("pageCacheLockTimeMills")),
    ("rocketmq_brokeruntime_commitlog_disk_ratio", _double("commitLogDiskRatio")),
    ("rocketmq_brokeruntime_consumequeue_disk_ratio", _double("consumeQueueDiskRatio")),
    ("rocketmq_brokeruntime_getfound_tps600", _tps("getFoundTps", 2)),
    ("rocketmq_brokeruntime_getfound_tps60", _tps("getFoundTps", 1)),
    ("rocketmq_brokeruntime_getfound_tps10", _tps("getFoundTps", 0)),
    ("rocketmq_brokeruntime_gettotal_tps600", _tps("getTotalTps", 2)),
    ("rocketmq_brokeruntime_gettotal_tps60", _tps("getTotalTps", 1)),
    ("rocketmq_brokeruntime_gettotal_tps10", _tps("getTotalTps", 0)),
    ("rocketmq_brokeruntime_gettransfered_tps600", _tps("getTransferedTps", 2)),
    ("rocketmq_brokeruntime_gettransfered_tps60", _tps("getTransferedTps", 1)),
    ("rocketmq_brokeruntime_gettransfered_tps10", _tps("getTransferedTps", 0)),
    ("rocketmq_brokeruntime_getmiss_tps600", _tps("getMissTps", 2)),
    ("rocketmq_brokeruntime_getmiss_tps60", _tps("getMissTps", 1)),
    ("rocketmq_brokeruntime_getmiss_tps10", _tps("getMissTps", 0)),
    ("rocketmq_brokeruntime_put_tps600", _tps("putTps", 2)),
    ("rocketmq_brokeruntime_put_tps60", _tps("putTps", 1)),
    ("rocketmq_brokeruntime_put_tps10", _tps("putTps", 0)),
    ("rocketmq_brokeruntime_dispatch_maxbuffer", _long("dispatchMaxBuffer")),
    ("rocketmq_brokeruntime_pull_threadpoolqueue_capacity",
     _long("pullThreadPoolQueueCapacity")),
    ("rocketmq_brokeruntime_send_threadpoolqueue_capacity",
     _long("sendThreadPoolQueueCapacity")),
    ("rocketmq_brokeruntime_pull_threadpoolqueue_size", _long("pullThreadPoolQueueSize")),
    ("rocketmq_brokeruntime_query_threadpoolqueue_size", _long("queryThreadPoolQueueSize")),
    ("rocketmq_brokeruntime_pull_threadpoolqueue_headwait_timemills",
     _long("pullThreadPoolQueueHeadWaitTimeMills")),
    ("rocketmq_brokeruntime_query_threadpoolqueue_headwait_timemills",
     _long("queryThreadPoolQueueHeadWaitTimeMills")),
    ("rocketmq_brokeruntime_send_threadpoolqueue_headwait_timemills",
     _long("sendThreadPoolQueueHeadWaitTimeMills")),
    ("rocketmq_brokeruntime_msg_gettotal_yesterdaymorning",
     _long("msgGetTotalYesterdayMorning")),
    ("rocketmq_brokeruntime_msg_puttotal_yesterdaymorning",
     _long("msgPutTotalYesterdayMorning")),
    ("rocketmq_brokeruntime_msg_gettotal_todaymorning", _long("msgGetTotalTodayMorning")),
    ("rocketmq_brokeruntime_msg_puttotal_todaymorning", _long("msgPutTotalTodayMorning")),
    ("rocketmq_brokeruntime_commitlogdir_capacity_free", _capacity(1)),
    ("rocketmq_brokeruntime_commitlogdir_capacity_total", _capacity(0)),
    ("rocketmq_brokeruntime_commitlog_maxoffset", _long("commitLogMaxOffset")),
    ("rocketmq_brokeruntime_commitlog_minoffset", _long("commitLogMinOffset")),
    ("rocketmq_brokeruntime_remain_howmanydata_toflush",
     _leading_number("remainHowManyDataToFlush")),
    ("rocketmq_brokeruntime_put_latency_99", _double("putLatency99", "-1")),
    ("rocketmq_brokeruntime_put_latency_999", _double("putLatency999", "-1")),
)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class ExporterFamilies:
    """One broker's exporter-compatible families; ``register`` them once.

    Every family reads the snapshot that ``collect`` (a registry collect hook) takes at the
    start of each scrape: one GET_BROKER_RUNTIME_INFO map and one pass over the topics and
    groups per scrape, however many families read them.

    Args:
        broker: the running broker (store, managers and stats exist).
        append: the ``rocketmq_store_append_seconds`` series; its bucket bounds must include
            every ``PMDT_BANDS`` edge (``ValueError`` otherwise).
        clock: wall-clock epoch ms (store timestamps are wall clock).
    """

    def __init__(self, broker: BrokerController, append: HistogramChild, *,
                 clock: Callable[[], int] = _wall_ms) -> None:
        self._b = broker
        self._admin = AdminBrokerStatsProcessor(broker)  # for runtime_info() only
        self._bands = PutLatencyBands(append)
        self._clock = clock
        self.runtime: dict[str, str] = {}
        self._samples: dict[str, list[Sample]] = {}

    # -- registration ---------------------------------------------------------------------

    def register(self, registry: Registry) -> None:
        registry.add_collect_hook(self.collect)
        gauge = registry.gauge_func
        stats = self._b.stats

        def minute_tps(name: str, per_group: bool) -> Callable[[], Iterator[Sample]]:
            return lambda: self._stats_samples(name, per_group, lambda s: fixed_double(s.tps))

        gauge("rocketmq_producer_tps", "TopicPutNums", TOPIC_LABELS,
              minute_tps(TOPIC_PUT_NUMS, False))
        gauge("rocketmq_producer_message_size", "TopicPutMessageSize", TOPIC_LABELS,
              minute_tps(TOPIC_PUT_SIZE, False))
        gauge("rocketmq_consumer_tps", "GroupGetNums", GROUP_LABELS,
              minute_tps(GROUP_GET_NUMS, True))
        gauge("rocketmq_consumer_message_size", "GroupGetMessageSize", GROUP_LABELS,
              minute_tps(GROUP_GET_SIZE, True))
        gauge("rocketmq_send_back_nums", "SendBackNums", GROUP_LABELS,
              lambda: self._stats_samples(SNDBCK_PUT_NUMS, True, lambda s: s.sum))

        def broker_tps(name: str) -> Callable[[], list[Sample]]:
            def samples() -> list[Sample]:
                item = stats.get_stats_item(name, stats.cluster_name)
                tps = item.minute(stats.now()).tps if item is not None else 0.0
                return [(self._broker_labels(), fixed_double(tps))]
            return samples

        # Always present (0 before any traffic): dashboards list clusters and brokers from
        # label_values(rocketmq_broker_tps, ...).
        gauge("rocketmq_broker_tps", "BrokerPutNums", BROKER_LABELS, broker_tps(BROKER_PUT_NUMS))
        gauge("rocketmq_broker_qps", "BrokerGetNums", BROKER_LABELS, broker_tps(BROKER_GET_NUMS))

        for name, help_text, labels in (
            ("rocketmq_producer_offset", "TopicOffset", TOPIC_LABELS),
            ("rocketmq_topic_retry_offset", "TopicRetryOffset", TOPIC_LABELS),
            ("rocketmq_topic_dlq_offset", "TopicRetryOffset", DLQ_OFFSET_LABELS),
            ("rocketmq_producer_count", "producer instance counter", PRODUCER_COUNT_LABELS),
            ("rocketmq_group_diff", "GroupDiff", GROUP_DIFF_LABELS),
            ("rocketmq_group_retrydiff", "GroupRetryDiff", GROUP_DIFF_LABELS),
            ("rocketmq_group_dlqdiff", "GroupDLQDiff", GROUP_DIFF_LABELS),
            ("rocketmq_group_count", "GroupCount", GROUP_COUNT_LABELS),
            ("rocketmq_consumer_offset", "GroupBrokerTotalOffset", GROUP_LABELS),
            ("rocketmq_group_get_latency_by_storetime", "GroupGetLatencyByStoreTime",
             GROUP_LABELS),
        ):
            gauge(name, help_text, labels, self._snapshot(name))

        for suffix, _, _ in PMDT_BANDS:
            name = "rocketmq_brokeruntime_pmdt_" + suffix
            gauge(name, "PutMessageDistributeTime " + suffix, RUNTIME_LABELS,
                  self._snapshot(name))
        for name, read in RUNTIME_GAUGES:
            gauge(name, _runtime_help(name), RUNTIME_LABELS, self._runtime_gauge(read))

    def _snapshot(self, name: str) -> Callable[[], list[Sample]]:
        return lambda: self._samples.get(name, [])

    def _runtime_gauge(self, read: RuntimeValue) -> Callable[[], list[Sample]]:
        return lambda: [(self._runtime_labels(), read(self.runtime))]

    # -- labels ---------------------------------------------------------------------------

    def _broker_labels(self) -> tuple[str, str, str]:
        c = self._b.config
        return c.broker_cluster_name, c.broker_addr, c.broker_name

    def _runtime_labels(self) -> tuple[str, ...]:
        info = self.runtime
        c = self._b.config
        return (c.broker_cluster_name, c.broker_addr, "", info.get("brokerVersionDesc", ""),
                info.get("bootTimestamp", ""), info.get("brokerVersion", ""))

    # -- per scrape -----------------------------------------------------------------------

    def collect(self) -> None:
        """Take this scrape's snapshot: runtime info, offsets, diffs, latencies, pmdt."""
        self.runtime = self._admin.runtime_info()
        samples: dict[str, list[Sample]] = {}
        self._topic_offsets(samples)
        self._producer_counts(samples)
        self._consume_stats(samples)
        self._pmdt(samples)
        self._samples = samples

    def _stats_samples(self, name: str, per_group: bool,
                       value: Callable[[StatsSnapshot], float]) -> Iterator[Sample]:
        """MetricsCollectTask.collectBrokerStatsTopic: minute views of the non-retry, non-DLQ
        topics' items (an item exists once it counted something, as upstream)."""
        stats = self._b.stats
        cluster, broker_name = self._b.config.broker_cluster_name, self._b.config.broker_name
        now = stats.now()
        for key, item in stats.items(name):
            topic, _, group = key.partition("@")
            if _is_retry(topic) or _is_dlq(topic):
                continue
            labels = (cluster, broker_name, topic, group) if per_group else (
                cluster, broker_name, topic)
            yield labels, value(item.minute(now))

    def _topic_offsets(self, out: dict[str, list[Sample]]) -> None:
        """collectTopicOffset: per topic, the sum of its queues' max offsets (GET_TOPIC_STATS_INFO
        reports the write queues)."""
        b = self._b
        cluster, broker_name = b.config.broker_cluster_name, b.config.broker_name
        max_offset = b.store.get_max_offset_in_queue
        plain, retry, dlq = (out.setdefault(n, []) for n in (
            "rocketmq_producer_offset", "rocketmq_topic_retry_offset", "rocketmq_topic_dlq_offset"))
        for topic, tc in list(b.topics.topic_config_table.items()):
            total = sum(max(max_offset(topic, q), 0) for q in range(tc.write_queue_nums))
            if _is_retry(topic):
                retry.append(((cluster, broker_name, topic), total))
            elif _is_dlq(topic):
                group = topic.replace(MixAll.DLQ_GROUP_TOPIC_PREFIX, "")
                dlq.append(((cluster, broker_name, group), total))
            else:
                plain.append(((cluster, broker_name, topic), total))

    def _producer_counts(self, out: dict[str, list[Sample]]) -> None:
        """collectProducer: producer instances (channels) per producer group."""
        c = self._b.config
        out["rocketmq_producer_count"] = [
            ((c.broker_cluster_name, c.broker_name, group), len(channels))
            for group, channels in self._b.producers.groups.items()]

    def _consume_stats(self, out: dict[str, list[Sample]]) -> None:
        """collectConsumerOffset: for each non-DLQ topic and each group that consumes it
        (QUERY_TOPIC_CONSUME_BY_WHO), the group's online count, then its consume stats."""
        b = self._b
        cluster, broker_name = b.config.broker_cluster_name, b.config.broker_name
        store = b.store
        now = self._clock()
        diff_plain, diff_retry, diff_dlq, counts, offsets, latency = (
            out.setdefault(n, []) for n in (
                "rocketmq_group_diff", "rocketmq_group_retrydiff", "rocketmq_group_dlqdiff",
                "rocketmq_group_count", "rocketmq_consumer_offset",
                "rocketmq_group_get_latency_by_storetime"))
        counted: set[str] = set()
        for topic in list(b.topics.topic_config_table):
            if _is_dlq(topic):
                continue
            groups = b.consumers.query_topic_consume_by_who(topic)
            groups |= b.offsets.which_group_by_topic(topic)
            for group in sorted(groups):
                info = b.consumers.get(group)
                channels = info.channels if info is not None else {}
                online = len(channels)
                clustering = info is None or info.message_model != "BROADCASTING"
                if group not in counted:
                    counted.add(group)
                    caddr = ",".join(ch.remote_addr for ch in channels)
                    localaddr = ",".join(c.client_id for c in channels.values())
                    counts.append(((caddr, localaddr, group), online))
                queues = self._consumed_queues(group, topic)
                if not queues:
                    continue  # examineConsumeStats refuses an empty offset table
                if clustering:
                    diff = sum(broker - consumer for _, broker, consumer in queues)
                    labels = (group, topic, str(online), _CLUSTERING_ORDINAL)
                    target = (diff_retry if _is_retry(topic)
                              else diff_dlq if _is_dlq(topic) else diff_plain)
                    target.append((labels, diff))
                offsets.append(((cluster, broker_name, topic, group),
                                sum(consumer for _, _, consumer in queues)))
                if clustering:
                    lag = max(_store_time_lag(store, topic, qid, broker, consumer, now)
                              for qid, broker, consumer in queues)
                    latency.append(((cluster, broker_name, topic, group), lag))

    def _consumed_queues(self, group: str, topic: str) -> list[tuple[int, int, int]]:
        """GET_CONSUME_STATS for one topic (AdminGroupProcessor.get_consume_stats): per read
        queue ``(queue id, broker offset, consumer offset)``, both floored at 0; nothing when
        the topic is gone or the online group subscribes to other topics only."""
        b = self._b
        tc = b.topics.select(topic)
        info = b.consumers.get(group)
        if tc is None or (info is not None and info.subscriptions
                          and topic not in info.subscriptions):
            return []
        max_offset, query = b.store.get_max_offset_in_queue, b.offsets.query_offset
        return [(qid, max(max_offset(topic, qid), 0), max(query(group, topic, qid), 0))
                for qid in range(tc.read_queue_nums)]

    def _pmdt(self, out: dict[str, list[Sample]]) -> None:
        labels = self._runtime_labels()
        for (suffix, _, _), n in zip(PMDT_BANDS, self._bands.counts(), strict=True):
            out["rocketmq_brokeruntime_pmdt_" + suffix] = [(labels, n)]


class PutLatencyBands:
    """Puts per ``PMDT_BANDS`` band since the current minute began, read off a histogram.

    Upstream swaps in a fresh ``putMessageDistributeTime`` array every minute
    (``StoreStatsService.printTps``); here the window restarts at the first ``counts()`` 60 s
    or more after the previous restart, so nothing runs between scrapes.

    Args:
        series: a histogram series whose bounds include every band edge.
        monotonic: seconds (tests inject one).
    """

    def __init__(self, series: HistogramChild, *,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        missing = [edge for _, lo, hi in PMDT_BANDS for edge in (lo, hi)
                   if edge > 0 and edge not in series.bounds]
        if missing:
            raise ValueError(f"the histogram lacks the put-latency band edges {missing}")
        self._series = series
        self._monotonic = monotonic
        self._base = [0] * len(PMDT_BANDS)
        self._restart = monotonic()

    def _totals(self) -> list[int]:
        cumulative = self._series.cumulative()
        bounds = self._series.bounds

        def upto(edge: float) -> int:  # observations of at most ``edge`` seconds
            return cumulative[bisect.bisect_left(bounds, edge)] if edge > 0 else 0

        return [upto(hi) - upto(lo) for _, lo, hi in PMDT_BANDS]

    def counts(self) -> list[int]:
        """One count per band, in ``PMDT_BANDS`` order."""
        totals = self._totals()
        now = self._monotonic()
        if now - self._restart >= _PMDT_WINDOW:
            self._base = totals
            self._restart = now
        return [t - b for t, b in zip(totals, self._base, strict=True)]


def _is_retry(topic: str) -> bool:
    return topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)


def _is_dlq(topic: str) -> bool:
    return topic.startswith(MixAll.DLQ_GROUP_TOPIC_PREFIX)


def _store_time_lag(store: MessageStore, topic: str, qid: int, broker_offset: int,
                    consumer_offset: int, now: int) -> int:
    """collectConsumerOffset's latency of one queue, in ms: now minus the store time of the
    next message to consume (of the queue's first message when that one is gone), 0 when
    caught up or when there is no such message."""
    if consumer_offset >= broker_offset:
        return 0
    timestamp = store.get_message_store_timestamp
    ts = timestamp(topic, qid, consumer_offset)
    if ts <= 0:
        low = store.get_min_offset_in_queue(topic, qid)
        ts = timestamp(topic, qid, low) if consumer_offset < low else -1
    return max(now - ts, 0) if ts > 0 else 0


def _runtime_help(name: str) -> str:
    # The exporter's help strings are the Java field names (brokerRuntimePutTps10, ...).
    words = name.removeprefix("rocketmq_brokeruntime_").split("_")
    return "brokerRuntime" + "".join(w[:1].upper() + w[1:] for w in words)


def family_names() -> Iterable[str]:
    """Every family name this module serves (documentation and tests)."""
    yield from ("rocketmq_producer_tps", "rocketmq_producer_message_size",
                "rocketmq_consumer_tps", "rocketmq_consumer_message_size",
                "rocketmq_send_back_nums", "rocketmq_broker_tps", "rocketmq_broker_qps",
                "rocketmq_producer_offset", "rocketmq_topic_retry_offset",
                "rocketmq_topic_dlq_offset", "rocketmq_producer_count", "rocketmq_group_diff",
                "rocketmq_group_retrydiff", "rocketmq_group_dlqdiff", "rocketmq_group_count",
                "rocketmq_consumer_offset", "rocketmq_group_get_latency_by_storetime")
    yield from ("rocketmq_brokeruntime_pmdt_" + suffix for suffix, _, _ in PMDT_BANDS)
    yield from (name for name, _ in RUNTIME_GAUGES)
