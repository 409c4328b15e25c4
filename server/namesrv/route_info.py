"""RouteInfoManager: the nameserver's routing tables, pure and synchronous.

Upstream ``namesrv/routeinfo/RouteInfoManager`` (docs/PROTOCOL.md 4.3, 4.4, 6.8). No I/O, no
event loop, no clock of its own: time comes from the ``clock`` callable (milliseconds)
given at construction, or explicitly as ``now_ms``, so tests drive expiry without sleeping.
Channels are opaque handles compared by identity; the owner closes them.

Tables:

* topic -> {brokerName: QueueData}
* brokerName -> BrokerData (cluster, brokerName, brokerId -> address)
* cluster -> set of brokerNames
* brokerAddr -> BrokerLiveInfo (last update ms, DataVersion, channel, haServerAddr)
* brokerAddr -> filter server addresses

Register semantics (upstream ``registerBroker``): an address listed under another
brokerId of the same brokerName is dropped first (slave -> master switch); queue data
is rebuilt only from a master's registration (brokerId 0) and only when its DataVersion
differs from the stored one or this is the broker's first registration; topics missing
from a later body keep their queue data; every register refreshes the live timestamp.
The nameserver stores the perms the broker sends: a broker whose ``brokerPermission`` is
not read-write caps every topic's perm before registering (docs/PROTOCOL.md 6.8), and a perm
changed here by WIPE/ADD_WRITE_PERM survives re-registrations with an unchanged DataVersion.

Every mutation is all or nothing: ``register_broker`` validates its whole input before it
touches a table and raises :class:`protocol.errors.ProtocolError` naming what was wrong,
except for topic configs no client could use (queue counts outside 0..``MAX_QUEUE_NUMS``,
perm bits outside 0..15, a negative sysFlag, no name): each is left out of that
registration and logged, and the broker's other topics are registered.

Reads return objects that share QueueData/BrokerData with the tables; callers encode them
before the next mutation (the processor does so on the same event-loop turn).
``generation`` increases whenever anything a route answer depends on changes, so the
processor can cache encoded routes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicList,
    TopicRouteData,
)
from aiorocketmq.protocol.codes import MixAll, Perm, TopicSysFlag
from aiorocketmq.protocol.errors import ProtocolError
from aiorocketmq.protocol.validation import MAX_QUEUE_NUMS as _MAX_QUEUE_NUMS
from aiorocketmq.protocol.validation import validate_topic_config

__all__ = [
    "RouteInfoManager",
    "BrokerLiveInfo",
    "RegisterBrokerResult",
    "MAX_QUEUE_NUMS",
    "BROKER_CHANNEL_EXPIRED_MS",
]

log = get_logger("aiorocketmq.namesrv.route")

BROKER_CHANNEL_EXPIRED_MS = 120_000  # RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME
# Upstream accepts any int. Java brokers use at most a few thousand queues per topic
# (BenchmarkTest has 1024); a negative or larger count is a corrupt or hostile body, and
# accepting it would have every client build that many MessageQueue objects.
MAX_QUEUE_NUMS = _MAX_QUEUE_NUMS  # protocol.validation's bound, shared with the broker
_MASTER_ID = MixAll.MASTER_ID


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclasses.dataclass(slots=True)
class BrokerLiveInfo:
    """Upstream ``BrokerLiveInfo``: what the nameserver knows about one broker address."""

    last_update_ms: int
    data_version: DataVersion
    channel: Any
    ha_server_addr: str


@dataclasses.dataclass(slots=True)
class RegisterBrokerResult:
    """Upstream ``RegisterBrokerResult``: set only for a slave whose master is alive."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


def _same_version(a: DataVersion, b: DataVersion) -> bool:
    # DataVersion.equals: same timestamp and same counter.
    return a.timestamp == b.timestamp and a.counter == b.counter


def _check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ProtocolError(f"{what} is missing or empty")
    return value


class RouteInfoManager:
    """The nameserver's routing state (see the module docstring for the semantics)."""

    __slots__ = (
        "_clock",
        "broker_channel_expired_ms",
        "topic_queue_table",
        "broker_addr_table",
        "cluster_addr_table",
        "broker_live_table",
        "filter_server_table",
        "generation",
    )

    def __init__(self, *, clock: Callable[[], int] = _wall_clock_ms,
                 broker_channel_expired_ms: int = BROKER_CHANNEL_EXPIRED_MS) -> None:
        self._clock = clock
        self.broker_channel_expired_ms = broker_channel_expired_ms
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}
        self.generation = 0

    def _now(self, now_ms: int | None) -> int:
        return self._clock() if now_ms is None else now_ms

    # -- register / unregister -------------------------------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        data_version: DataVersion,
        topic_configs: Mapping[str, TopicConfig] | None,
        filter_server_list: list[str] | None,
        channel: Any = None,
        *,
        now_ms: int | None = None,
    ) -> RegisterBrokerResult:
        """Record one REGISTER_BROKER (upstream ``registerBroker``).

        Args:
            data_version: the body's DataVersion (``0/0`` when the request had no body).
            topic_configs: the body's topic table; ``None`` when there was no body.
            filter_server_list: ``None`` leaves the broker's filter servers as they are,
                ``[]`` removes them.
            channel: the connection it came on; closing it unregisters the broker.

        Raises:
            ProtocolError: an empty name or address, a negative brokerId, or a topic config
                with absurd queue counts or perm; nothing has been changed.
        """
        _check_name("clusterName", cluster_name)
        _check_name("brokerAddr", broker_addr)
        _check_name("brokerName", broker_name)
        if not isinstance(broker_id, int) or broker_id < 0:
            raise ProtocolError(f"brokerId={broker_id!r} is negative")
        if topic_configs:
            topic_configs = self._valid_topic_configs(broker_name, broker_addr, topic_configs)
        now = self._now(now_ms)
        changed = False

        names = self.cluster_addr_table.get(cluster_name)
        if names is None:
            names = self.cluster_addr_table[cluster_name] = set()
        if broker_name not in names:
            names.add(broker_name)
            changed = True

        register_first = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            register_first = True
            broker_data = BrokerData(cluster=cluster_name, broker_name=broker_name,
                                     broker_addrs={})
            self.broker_addr_table[broker_name] = broker_data
        addrs = broker_data.broker_addrs
        # The same ip:port may be listed once only: a slave turned master (or the reverse)
        # first loses its old brokerId entry.
        stale = [bid for bid, addr in addrs.items() if addr == broker_addr and bid != broker_id]
        for bid in stale:
            del addrs[bid]
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        if stale or old_addr != broker_addr:
            changed = True
            if broker_id == _MASTER_ID:
                log.info("namesrv.master_addr_changed", cluster=broker_data.cluster,
                         broker_name=broker_name, old=old_addr, new=broker_addr)
        register_first = register_first or old_addr is None

        if topic_configs is not None and broker_id == _MASTER_ID:
            prev = self.broker_live_table.get(broker_addr)
            if register_first or prev is None or not _same_version(prev.data_version,
                                                                    data_version):
                for tc in topic_configs.values():
                    self._create_and_update_queue_data(broker_name, tc)
                changed = True

        prev_live = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(now, data_version, channel,
                                                             ha_server_addr)
        if prev_live is None:
            log.info("namesrv.broker_registered", broker_addr=broker_addr,
                     broker_name=broker_name, broker_id=broker_id, ha_server=ha_server_addr)

        if filter_server_list is not None:
            if filter_server_list:
                if self.filter_server_table.get(broker_addr) != filter_server_list:
                    self.filter_server_table[broker_addr] = list(filter_server_list)
                    changed = True
            elif self.filter_server_table.pop(broker_addr, None) is not None:
                changed = True

        if changed:
            self.generation += 1

        result = RegisterBrokerResult()
        if broker_id != _MASTER_ID:
            master_addr = addrs.get(_MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr
        return result

    @staticmethod
    def _valid_topic_configs(broker_name: str, broker_addr: str,
                             topic_configs: Mapping[str, TopicConfig]) -> Mapping[str, TopicConfig]:
        """The registration's topic table without the configs no client could use.

        A stock 4.9.7 broker stores any int a client sent (perm 32, 2e9 queues) and
        registers it; refusing the whole registration for one such topic would leave every
        other topic of that broker without a route, so only the bad config is left out.
        """
        bad: dict[str, str] = {}
        for key, tc in topic_configs.items():
            try:
                validate_topic_config(tc, key)
            except ProtocolError as exc:
                bad[key] = str(exc)
        if not bad:
            return topic_configs
        for key, reason in bad.items():
            log.warning("namesrv.topic_config_ignored", broker_name=broker_name,
                        broker_addr=broker_addr, topic=key, reason=reason)
        return {k: tc for k, tc in topic_configs.items() if k not in bad}

    def _create_and_update_queue_data(self, broker_name: str, tc: TopicConfig) -> None:
        qd = QueueData(broker_name=broker_name, read_queue_nums=tc.read_queue_nums,
                       write_queue_nums=tc.write_queue_nums, perm=tc.perm,
                       topic_sys_flag=tc.topic_sys_flag)
        by_broker = self.topic_queue_table.get(tc.topic_name)
        if by_broker is None:
            self.topic_queue_table[tc.topic_name] = {broker_name: qd}
            log.info("namesrv.topic_registered", topic=tc.topic_name, broker_name=broker_name)
        else:
            old = by_broker.get(broker_name)
            by_broker[broker_name] = qd
            if old is not None and old != qd:
                log.info("namesrv.topic_changed", topic=tc.topic_name, broker_name=broker_name)

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str,
                          broker_id: int) -> None:
        """UNREGISTER_BROKER (upstream ``unregisterBroker``)."""
        live = self.broker_live_table.pop(broker_addr, None)
        log.info("namesrv.broker_unregistered", broker_addr=broker_addr,
                 broker_name=broker_name, broker_id=broker_id, was_live=live is not None)
        self.generation += 1
        self.filter_server_table.pop(broker_addr, None)
        remove_name = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            broker_data.broker_addrs.pop(broker_id, None)
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                remove_name = True
        if remove_name:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topics_of(broker_name)

    def _remove_topics_of(self, broker_name: str) -> None:
        emptied = []
        for topic, by_broker in self.topic_queue_table.items():
            by_broker.pop(broker_name, None)
            if not by_broker:
                emptied.append(topic)
        for topic in emptied:
            del self.topic_queue_table[topic]
        if emptied:
            log.info("namesrv.topics_removed", broker_name=broker_name, count=len(emptied))

    # -- liveness -------------------------------------------------------------------------

    def scan_not_active_brokers(self, *, now_ms: int | None = None) -> list[tuple[str, Any]]:
        """Remove brokers silent for longer than ``broker_channel_expired_ms``.

        Returns ``(brokerAddr, channel)`` of each removed broker; the caller closes the
        channels (upstream closes them inside ``scanNotActiveBroker``).
        """
        now = self._now(now_ms)
        limit = self.broker_channel_expired_ms
        expired = [(addr, live) for addr, live in self.broker_live_table.items()
                   if live.last_update_ms + limit < now]
        removed = []
        for addr, live in expired:
            del self.broker_live_table[addr]
            log.warning("namesrv.broker_expired", broker_addr=addr, expired_ms=limit,
                        last_update_ms=live.last_update_ms)
            self.on_channel_destroy(addr, live.channel)
            removed.append((addr, live.channel))
        return removed

    def on_channel_destroy(self, remote_addr: str | None, channel: Any) -> str | None:
        """A broker connection closed: remove the broker registered over it, at once.

        Upstream ``onChannelDestroy``: the broker is found by its channel; when no broker
        registered over ``channel``, ``remote_addr`` is taken as the broker address.
        Returns the broker address removed, or ``None``.
        """
        found: str | None = None
        if channel is not None:
            for addr, live in self.broker_live_table.items():
                if live.channel is channel:
                    found = addr
                    break
        if found is None:
            found = remote_addr
        else:
            log.info("namesrv.broker_channel_destroyed", broker_addr=found)
        if not found:
            return None
        return found if self._remove_broker_addr(found) else None

    def _remove_broker_addr(self, broker_addr: str) -> bool:
        touched = self.broker_live_table.pop(broker_addr, None) is not None
        touched = self.filter_server_table.pop(broker_addr, None) is not None or touched
        name_found: str | None = None
        remove_name = False
        for name, broker_data in self.broker_addr_table.items():
            addrs = broker_data.broker_addrs
            for bid, addr in addrs.items():
                if addr == broker_addr:
                    del addrs[bid]
                    name_found = name
                    break
            if name_found is not None:
                remove_name = not addrs
                break
        if name_found is None:
            if touched:
                self.generation += 1
            return touched
        self.generation += 1
        if remove_name:
            del self.broker_addr_table[name_found]
            for cluster, names in list(self.cluster_addr_table.items()):
                if name_found in names:
                    names.discard(name_found)
                    if not names:
                        del self.cluster_addr_table[cluster]
                    break
            self._remove_topics_of(name_found)
        return True

    def query_data_version(self, broker_addr: str, data_version: DataVersion, *,
                           now_ms: int | None = None) -> tuple[bool, DataVersion | None]:
        """QUERY_DATA_VERSION: (changed, the stored DataVersion or ``None``).

        As upstream, an unchanged version refreshes the broker's live timestamp, so a
        broker that only queries stays registered.
        """
        live = self.broker_live_table.get(broker_addr)
        changed = live is None or not _same_version(live.data_version, data_version)
        if not changed and live is not None:
            live.last_update_ms = self._now(now_ms)
        return changed, None if live is None else live.data_version

    # -- reads ----------------------------------------------------------------------------

    def pick_topic_route(self, topic: str,
                         order_topic_conf: str | None = None) -> TopicRouteData | None:
        """The route of ``topic``, or ``None`` unless it has queue data and a broker entry."""
        by_broker = self.topic_queue_table.get(topic)
        if not by_broker:
            return None
        broker_datas = []
        filter_map: dict[str, list[str]] = {}
        filters = self.filter_server_table
        for name in by_broker:
            bd = self.broker_addr_table.get(name)
            if bd is None:
                continue
            broker_datas.append(BrokerData(cluster=bd.cluster, broker_name=bd.broker_name,
                                           broker_addrs=dict(bd.broker_addrs)))
            if filters:
                for addr in bd.broker_addrs.values():
                    servers = filters.get(addr)
                    if servers is not None:
                        filter_map[addr] = servers
        if not broker_datas:
            return None
        return TopicRouteData(order_topic_conf=order_topic_conf,
                              queue_datas=list(by_broker.values()),
                              broker_datas=broker_datas, filter_server_table=filter_map)

    def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: every BrokerData and every cluster's broker names."""
        return ClusterInfo(broker_addr_table=dict(self.broker_addr_table),
                           cluster_addr_table={c: sorted(names)
                                               for c, names in self.cluster_addr_table.items()})

    def all_topics(self) -> TopicList:
        return TopicList(topic_list=list(self.topic_queue_table))

    def topics_by_cluster(self, cluster: str) -> TopicList:
        """Topics with queue data on any broker of ``cluster`` (empty if unknown)."""
        names = self.cluster_addr_table.get(cluster, ())
        out: dict[str, None] = {}
        for name in names:
            for topic, by_broker in self.topic_queue_table.items():
                if name in by_broker:
                    out[topic] = None
        return TopicList(topic_list=list(out))

    def system_topics(self) -> TopicList:
        """Cluster names and broker names (each is a topic every broker creates), plus the
        address of one broker so admin tools know whom to ask (upstream picks the first
        address of the first broker; we prefer a master)."""
        topics: dict[str, None] = {}
        for cluster, names in self.cluster_addr_table.items():
            topics[cluster] = None
            for name in names:
                topics[name] = None
        broker_addr: str | None = None
        for bd in self.broker_addr_table.values():
            if bd.broker_addrs:
                broker_addr = bd.broker_addrs.get(_MASTER_ID) or next(iter(
                    bd.broker_addrs[k] for k in sorted(bd.broker_addrs)))
                break
        return TopicList(topic_list=list(topics), broker_addr=broker_addr)

    def _topics_where(self, pick: Callable[[int], bool]) -> TopicList:
        # Upstream looks at one queue data per topic (all of a topic's brokers agree).
        out = []
        for topic, by_broker in self.topic_queue_table.items():
            for qd in by_broker.values():
                if pick(qd.topic_sys_flag):
                    out.append(topic)
                break
        return TopicList(topic_list=out)

    def unit_topics(self) -> TopicList:
        return self._topics_where(lambda f: bool(f & TopicSysFlag.UNIT))

    def has_unit_sub_topics(self) -> TopicList:
        return self._topics_where(lambda f: bool(f & TopicSysFlag.UNIT_SUB))

    def has_unit_sub_ununit_topics(self) -> TopicList:
        return self._topics_where(
            lambda f: not f & TopicSysFlag.UNIT and bool(f & TopicSysFlag.UNIT_SUB))

    # -- admin ----------------------------------------------------------------------------

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: everywhere, or only on ``cluster_name``'s brokers."""
        if not cluster_name:
            if self.topic_queue_table.pop(topic, None) is not None:
                self.generation += 1
            return
        names = self.cluster_addr_table.get(cluster_name)
        by_broker = self.topic_queue_table.get(topic)
        if not names or by_broker is None:
            return
        for name in names:
            if by_broker.pop(name, None) is not None:
                log.info("namesrv.topic_deleted", topic=topic, broker_name=name)
        if not by_broker:
            del self.topic_queue_table[topic]
        self.generation += 1

    def wipe_write_perm(self, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER: clear PERM_WRITE on the broker's queue data; count."""
        return self._set_perms(broker_name, lambda perm: perm & ~int(Perm.WRITE))

    def add_write_perm(self, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER: set the broker's queue data perm to read-write; count."""
        rw = int(Perm.READ | Perm.WRITE)
        return self._set_perms(broker_name, lambda perm: rw)

    def _set_perms(self, broker_name: str, change: Callable[[int], int]) -> int:
        count = 0
        for by_broker in self.topic_queue_table.values():
            qd = by_broker.get(broker_name)
            if qd is not None:
                qd.perm = change(qd.perm)
                count += 1
        if count:
            self.generation += 1
        return count
