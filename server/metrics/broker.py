"""``BrokerMetrics``: the broker's Prometheus families (see service.py for the lifecycle).

Families (all bounded by the registry's ``max_series``, overflow folded into ``other``):

* ``rocketmq_messages_in_total{topic}``, ``rocketmq_bytes_in_total{topic}``: read at scrape
  time from ``BrokerStatsManager`` (``TOPIC_PUT_NUMS`` / ``TOPIC_PUT_SIZE``, fed by the send
  processor with upstream's msgNum and wroteBytes, i.e. stored record bytes), so a send is
  counted once for the admin requests and the metrics alike.
* ``rocketmq_messages_out_total{topic,group}``, ``rocketmq_bytes_out_total{topic,group}``:
  ``GROUP_GET_NUMS`` / ``GROUP_GET_SIZE`` (messages and record bytes pulls returned).
* ``rocketmq_pull_requests_held``: pulls parked by long polling right now.
* ``rocketmq_longpoll_wake_seconds``: from a put's arrival notification (or the checker
  pass that found the message) to the woken pull's answer being queued.
* ``rocketmq_store_append_seconds``: a put's append and dispatch on the event loop (the
  SYNC_FLUSH wait for the fsync is not included).
* ``rocketmq_commitlog_bytes``: max physical offset minus min physical offset.
* ``rocketmq_consumer_lag{group,topic,queue}``: per committed consumer offset, the queue's
  max offset minus it (never negative), computed at scrape time.
* ``rocketmq_consumer_subscription_inconsistent{group}``: 1 for each consumer group whose
  online clients subscribe to different topics or expressions (client_manager.py).
* ``rocketmq_connections{role}``: client connections, ``consumer`` if the channel belongs to
  a consumer group, else ``producer`` if to a producer group, else ``other`` (tools, and
  clients before their first heartbeat); each connection is counted once.
* ``rocketmq_ha_slave_lag_bytes{slave}``, ``rocketmq_ha_slave_connections``: on a master,
  each connected slave's unacknowledged commit-log bytes (server/store/ha);
  ``rocketmq_ha_sync_wait_seconds``: how long SYNC_MASTER sends waited for a slave's ack.
* DLedger mode (server/store/dledger), this member's Raft view:
  ``rocketmq_dledger_term``, ``rocketmq_dledger_role{role}`` (1 for the current role of
  LEADER / FOLLOWER / CANDIDATE, 0 for the others), ``rocketmq_dledger_leader_changes_total``
  (times it learnt of a leader other than the last one), ``rocketmq_dledger_last_election_seconds``
  (its last stretch without a leader, from losing one, or starting, to knowing the next: the
  failover time as this member saw it; -1 before the first leader),
  ``rocketmq_dledger_last_election_term``, ``rocketmq_dledger_leadership_transfers_total``
  (transfers this member started as leader), ``rocketmq_dledger_committed_index``.
* ``rocketmq_requests_total{code}``, ``rocketmq_responses_total{code}``: remoting.py.

Upstream has no Prometheus endpoint in 4.9.x: its exporter (Apache ``rocketmq-exporter``) is
a separate process that polls the admin API. So that dashboards and alert rules built for
that exporter work unchanged, the broker also serves its families, same names, label names
and label order, same values (exporter.py computes them at scrape time and documents the
sources and the few divergences). ``cluster`` is brokerClusterName, ``broker`` brokerName,
``brokerIP`` the registered ``ip:port``; TPS are the last minute's per-second rates rounded
to two decimals; sizes are stored record bytes:

* ``rocketmq_producer_tps{cluster,broker,topic}`` (messages/s),
  ``rocketmq_producer_message_size{cluster,broker,topic}`` (bytes/s): TOPIC_PUT_NUMS /
  TOPIC_PUT_SIZE, retry and DLQ topics left out.
* ``rocketmq_consumer_tps{cluster,broker,topic,group}`` (messages/s),
  ``rocketmq_consumer_message_size{...}`` (bytes/s): GROUP_GET_NUMS / GROUP_GET_SIZE;
  ``rocketmq_send_back_nums{...}``: SNDBCK_PUT_NUMS over the last minute (a count).
* ``rocketmq_broker_tps{cluster,brokerIP,broker}``, ``rocketmq_broker_qps{...}``: the whole
  broker's BROKER_PUT_NUMS / BROKER_GET_NUMS (messages/s), 0 before any traffic.
* ``rocketmq_producer_offset{cluster,broker,topic}``: sum of the topic's queue max offsets
  (messages ever stored); ``rocketmq_topic_retry_offset{cluster,broker,topic}`` for
  ``%RETRY%`` topics, ``rocketmq_topic_dlq_offset{cluster,broker,group}`` for ``%DLQ%`` ones.
* ``rocketmq_consumer_offset{cluster,broker,topic,group}``: sum of the group's committed
  offsets on the topic's queues (0 for a queue never committed).
* ``rocketmq_group_diff{group,topic,countOfOnlineConsumers,msgModel}``: sum over the queues
  of broker offset minus committed offset (messages behind), CLUSTERING groups only
  (``msgModel="1"``); ``rocketmq_group_retrydiff`` / ``rocketmq_group_dlqdiff`` likewise for
  retry / DLQ topics.
* ``rocketmq_group_get_latency_by_storetime{cluster,broker,topic,group}``: ms between now and
  the store time of the oldest message the group has yet to consume (max over queues; 0 when
  caught up).
* ``rocketmq_group_count{caddr,localaddr,group}``: online consumers (connections) of a group,
  ``caddr`` / ``localaddr`` the comma-joined client addresses / client ids;
  ``rocketmq_producer_count{cluster,broker,group}``: producer connections per group.
* ``rocketmq_brokeruntime_*{cluster,brokerIP,brokerHost,des,boottime,broker_version}``: one
  gauge per GET_BROKER_RUNTIME_INFO key, as the exporter parses it (``put_tps10`` / ``60`` /
  ``600`` from ``putTps``, ``msg_put_total_today_now``, ``commitlog_maxoffset``,
  ``commitlogdir_capacity_free`` in bytes, ...; ``des`` is brokerVersionDesc, ``boottime``
  bootTimestamp); ``rocketmq_brokeruntime_pmdt_<band>``: puts per latency band since the
  current minute began, from ``rocketmq_store_append_seconds``.

Our own names stay: they are counters (``rate()`` works at any resolution, no minute
smoothing) and ``rocketmq_consumer_lag`` is per queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..broker.stats import GROUP_GET_NUMS, GROUP_GET_SIZE, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE
from .exporter import PMDT_BANDS, ExporterFamilies
from .registry import LATENCY_BUCKETS, Registry, Sample
from .service import ServerMetrics

if TYPE_CHECKING:
    from ..broker.controller import BrokerController

__all__ = ["BrokerMetrics", "APPEND_BUCKETS"]

# The request buckets plus every edge of the exporter's put-latency bands (200 ms, 2 s, 3 s,
# 4 s), so ``rocketmq_brokeruntime_pmdt_*`` can be read off this histogram.
APPEND_BUCKETS = tuple(sorted(set(LATENCY_BUCKETS) | {
    edge for _, lo, hi in PMDT_BANDS for edge in (lo, hi) if 0 < edge < float("inf")}))


class BrokerMetrics(ServerMetrics):
    """The broker's families; ``attach(broker)`` once its store and long polling exist."""

    def attach(self, broker: BrokerController) -> None:
        """Register the families and hook the histograms into the store and long polling."""
        registry = self.registry
        if registry is None:
            return
        stats = broker.stats

        def stats_items(name: str) -> Iterator[tuple[str, float]]:
            # BrokerStatsManager keeps one StatsItem per key; its insertion order is stable,
            # which keeps each key on its own series once folding starts.
            for key, item in stats.items(name):
                yield key, item.value

        def per_topic(name: str) -> Iterator[Sample]:
            for topic, value in stats_items(name):
                yield (topic,), value

        def per_topic_group(name: str) -> Iterator[Sample]:
            for key, value in stats_items(name):
                topic, _, group = key.partition("@")
                yield (topic, group), value

        registry.counter_func(
            "rocketmq_messages_in_total", "Messages stored by sends, by topic.", ("topic",),
            lambda: per_topic(TOPIC_PUT_NUMS))
        registry.counter_func(
            "rocketmq_bytes_in_total", "Stored record bytes of sent messages, by topic.",
            ("topic",), lambda: per_topic(TOPIC_PUT_SIZE))
        registry.counter_func(
            "rocketmq_messages_out_total", "Messages returned by pulls, by topic and group.",
            ("topic", "group"), lambda: per_topic_group(GROUP_GET_NUMS))
        registry.counter_func(
            "rocketmq_bytes_out_total", "Record bytes returned by pulls, by topic and group.",
            ("topic", "group"), lambda: per_topic_group(GROUP_GET_SIZE))
        registry.gauge_func(
            "rocketmq_pull_requests_held", "Pull requests parked by long polling.", (),
            lambda: [((), broker.pull_hold.suspended_count)])
        wake = registry.histogram(
            "rocketmq_longpoll_wake_seconds",
            "Time from a message's arrival to the answer of the parked pull it woke.")
        append = registry.histogram(
            "rocketmq_store_append_seconds",
            "Time a put spends appending and dispatching (flush wait excluded).",
            buckets=APPEND_BUCKETS)
        store = broker.store
        registry.gauge_func(
            "rocketmq_commitlog_bytes", "Commit log size: max physical offset minus min.", (),
            lambda: [((), max(store.get_max_phy_offset() - store.get_min_phy_offset(), 0))])
        registry.gauge_func(
            "rocketmq_consumer_lag", "Messages behind the committed consumer offset.",
            ("group", "topic", "queue"), lambda: _consumer_lag(broker))
        registry.gauge_func(
            "rocketmq_connections", "Client connections by role.", ("role",),
            lambda: _connections(broker))
        registry.gauge_func(
            "rocketmq_consumer_subscription_inconsistent",
            "1 for each consumer group whose online clients subscribe to different topics or "
            "expressions, by group.", ("group",),
            lambda: [((g,), 1) for g in broker.consumers.inconsistent_groups()])
        append_series = append.labels()
        ExporterFamilies(broker, append_series).register(registry)
        store.append_observer = append_series.observe
        broker.pull_hold.wake_observer = wake.labels().observe
        dledger_node = getattr(store, "node", None)
        if dledger_node is not None or getattr(store, "dledger_dir", None) is not None:
            _register_dledger(registry, store)
        ha = broker.ha
        if ha is not None:
            # Replication (server/store/ha): a master's view of each connected slave.
            registry.gauge_func(
                "rocketmq_ha_slave_lag_bytes",
                "Commit-log bytes a connected slave has not acknowledged yet, by slave address.",
                ("slave",), lambda: [((s.addr,), s.lag_bytes) for s in ha.slaves()], max_series=32)
            registry.gauge_func(
                "rocketmq_ha_slave_connections", "Slaves connected to this master's HA port.", (),
                lambda: [((), ha.connection_count)])
            sync_wait = registry.histogram(
                "rocketmq_ha_sync_wait_seconds",
                "SYNC_MASTER: time a send waited for a slave's acknowledgement (or its timeout).")
            ha.group_transfer.wait_observer = sync_wait.labels().observe


def _register_dledger(registry: Registry, store: Any) -> None:
    """The DLedger families; read at scrape time from ``store.node`` (None before start)."""

    def node_value(read: Callable[[Any], float]) -> Callable[[], list[Sample]]:
        def samples() -> list[Sample]:
            node = store.node
            return [] if node is None else [((), float(read(node)))]
        return samples

    def roles() -> list[Sample]:
        node = store.node
        if node is None:
            return []
        return [((r,), 1.0 if node.role.value == r else 0.0)
                for r in ("LEADER", "FOLLOWER", "CANDIDATE")]

    registry.gauge_func("rocketmq_dledger_term", "DLedger: this member's current term.", (),
                        node_value(lambda n: n.term))
    registry.gauge_func("rocketmq_dledger_role", "DLedger: 1 for this member's current role.",
                        ("role",), roles)
    registry.counter_func(
        "rocketmq_dledger_leader_changes_total",
        "DLedger: times this member learnt of a leader other than the last one it knew.", (),
        node_value(lambda n: n.stats.leader_changes))
    registry.gauge_func(
        "rocketmq_dledger_last_election_seconds",
        "DLedger: this member's last time without a leader, from losing one to knowing the next"
        " (-1 before the first leader).", (),
        node_value(lambda n: n.stats.last_election_ms / 1000.0 if n.stats.last_election_ms >= 0
                   else -1.0))
    registry.gauge_func(
        "rocketmq_dledger_last_election_term", "DLedger: the term of the last leader learnt.", (),
        node_value(lambda n: n.stats.last_election_term))
    registry.counter_func(
        "rocketmq_dledger_leadership_transfers_total",
        "DLedger: leadership transfers this member started as leader.", (),
        node_value(lambda n: n.stats.transfers))
    registry.gauge_func(
        "rocketmq_dledger_committed_index", "DLedger: this member's committed entry index.", (),
        node_value(lambda n: n.committed_index))


def _consumer_lag(broker: BrokerController) -> Iterator[Sample]:
    max_offset = broker.store.get_max_offset_in_queue
    for key, queues in broker.offsets.offset_table.items():
        topic, _, group = key.partition("@")
        for queue_id, offset in queues.items():
            yield (group, topic, str(queue_id)), max(max_offset(topic, queue_id) - offset, 0)


def _connections(broker: BrokerController) -> list[Sample]:
    consumers = {ch for info in broker.consumers.groups.values() for ch in info.channels}
    producers = {ch for channels in broker.producers.groups.values() for ch in channels}
    counts = {"producer": 0, "consumer": 0, "other": 0}
    for channel in broker.server.channels:
        if channel in consumers:
            counts["consumer"] += 1
        elif channel in producers:
            counts["producer"] += 1
        else:
            counts["other"] += 1
    return [((role,), n) for role, n in counts.items()]
