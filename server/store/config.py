"""Store configuration: upstream ``MessageStoreConfig`` in snake_case, with upstream defaults.

Contract: ``MessageStoreConfig`` is a plain dataclass the store reads once at
``start()``; ``MessageStoreConfig.from_properties(props)`` accepts the camelCase keys
of an upstream ``broker.conf`` (``storePathRootDir``, ``mappedFileSizeCommitLog`` and
its old spelling ``mapedFileSizeCommitLog``, ``flushDiskType``, ``fileReservedTime``,
...) and ignores keys that belong to other components (BrokerConfig keys share the
file). Derived paths follow ``StorePathConfigHelper``: ``<root>/commitlog``,
``<root>/consumequeue``, ``<root>/index``, ``<root>/checkpoint``, ``<root>/abort``.

Upstream: ``store/config/MessageStoreConfig.java``, ``store/config/StorePathConfigHelper.java``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiorocketmq.protocol.javautil import camel_case, snake_case

__all__ = ["MessageStoreConfig", "ASYNC_FLUSH", "SYNC_FLUSH", "CQ_STORE_UNIT_SIZE",
           "parse_property_value", "STORE_KEYS", "store_key"]

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"
# ConsumeQueue.CQ_STORE_UNIT_SIZE: commit-log offset (8) + size (4) + tags code (8).
CQ_STORE_UNIT_SIZE = 20


def _default_root() -> str:
    return os.path.join(os.path.expanduser("~"), "store")


@dataclass(slots=True)
class MessageStoreConfig:
    """Store options; names are upstream's in snake_case, defaults are upstream's."""

    store_path_root_dir: str = field(default_factory=_default_root)
    # None = <root>/commitlog (MessageStoreConfig.getStorePathCommitLog).
    store_path_commit_log: str | None = None
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300000 * CQ_STORE_UNIT_SIZE
    flush_disk_type: str = ASYNC_FLUSH
    flush_interval_commit_log_ms: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval_ms: int = 10 * 1000
    flush_interval_consume_queue_ms: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval_ms: int = 60 * 1000
    sync_flush_timeout_ms: int = 5000
    clean_resource_interval_ms: int = 10000
    file_reserved_time: int = 72  # hours
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    # System properties upstream (rocketmq.broker.diskSpaceWarningLevelRatio / ...CleanForciblyRatio).
    disk_space_warning_level_ratio: float = 0.90
    disk_space_clean_forcibly_ratio: float = 0.85
    clean_file_forcibly_enable: bool = True
    max_message_size: int = 1024 * 1024 * 4
    check_crc_on_recover: bool = True
    max_transfer_bytes_on_message_in_memory: int = 1024 * 256
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 1024 * 64
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    message_index_enable: bool = True
    max_hash_slot_num: int = 5000000
    max_index_num: int = 5000000 * 4
    default_query_max_num: int = 32
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    broker_role: str = "ASYNC_MASTER"  # ASYNC_MASTER | SYNC_MASTER | SLAVE
    # HA (server/store/ha/). None = listenPort + 1 (BrokerStartup always sets that; an
    # explicit key is ours), 0 with listenPort 0 = any free port.
    ha_listen_port: int | None = None
    ha_send_heartbeat_interval_ms: int = 1000 * 5
    ha_housekeeping_interval_ms: int = 1000 * 20
    ha_transfer_batch_size: int = 1024 * 32
    ha_master_address: str | None = None  # SLAVE: fixed master HA address, else from the nameserver
    ha_slave_fallbehind_max: int = 1024 * 1024 * 256
    slave_timeout_ms: int = 3000  # SYNC_MASTER: wait for a slave ack (submitReplicaRequest)
    offset_check_in_slave: bool = False
    # Reserve every segment's disk blocks in full when it is created (posix_fallocate); by
    # default segments are sparse, as stock's, with blocks reserved ahead of the writes
    # (mapped_file.py). Stock's key: its AllocateMappedFileService then writes every page.
    warm_maped_file_enable: bool = False
    # A put whose append (and dispatch) ran longer than this marks the OS page cache busy
    # (upstream isOSPageCacheBusy): sends read before it ended are refused, see message_store.py.
    os_page_cache_busy_timeout_ms: int = 1000
    # Timer messages (5.x, server/store/timer): keys and defaults of upstream 5.3.3.
    timer_wheel_enable: bool = True
    timer_max_delay_sec: int = 3600 * 24 * 3
    timer_precision_ms: int = 1000  # snapped to 100, 200, 500 or 1000 (setTimerPrecisionMs)
    timer_roll_window_slot: int = 3600 * 24 * 2
    timer_congest_num_each_slot: int = 2**31 - 1
    timer_flush_interval_ms: int = 1000
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    # DLedger mode (server/store/dledger): the commit log replicated by Raft. brokerRole and
    # brokerId are then set by the elections, not by these options.
    enable_dleger_commit_log: bool = False
    d_leger_group: str | None = None
    d_leger_peers: str | None = None  # n0-host:port;n1-host:port;...
    d_leger_self_id: str | None = None
    store_path_dledger_commit_log: str | None = None  # None = <root>/dledger-<selfId>/data
    preferred_leader_id: str | None = None  # ids (";"): the leader hands over to one (core.py)
    enable_batch_push: bool = False  # accepted; our leader always pushes batches

    def __post_init__(self) -> None:
        if self.flush_disk_type not in (ASYNC_FLUSH, SYNC_FLUSH):
            raise ValueError(f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}")
        if self.mapped_file_size_commit_log < 4096:
            raise ValueError("mappedFileSizeCommitLog must be at least 4096 bytes")
        if self.broker_role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise ValueError(f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, not {self.broker_role!r}")
        if self.ha_transfer_batch_size < 1:
            raise ValueError("haTransferBatchSize must be positive")
        # setTimerPrecisionMs: the largest of 100/200/500/1000 not above the value (100 below).
        self.timer_precision_ms = max([p for p in (200, 500, 1000) if p <= self.timer_precision_ms],
                                      default=100)
        if self.mapped_file_size_timer_log < 4096:
            raise ValueError("mappedFileSizeTimerLog must be at least 4096 bytes")

    # -- derived values (StorePathConfigHelper, MessageStoreConfig getters) --

    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "abort")

    @property
    def consume_queue_file_size(self) -> int:
        """Rounded up to whole units, as ``getMappedFileSizeConsumeQueue``."""
        units = -(-self.mapped_file_size_consume_queue // CQ_STORE_UNIT_SIZE)
        return max(units, 1) * CQ_STORE_UNIT_SIZE

    @property
    def disk_max_used_ratio(self) -> float:
        """``getDiskMaxUsedSpaceRatio`` clamps to [10, 95] percent."""
        return min(max(self.disk_max_used_space_ratio, 10), 95) / 100.0

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    @property
    def is_dledger(self) -> bool:
        return self.enable_dleger_commit_log

    @property
    def is_sync_flush(self) -> bool:
        return self.flush_disk_type == SYNC_FLUSH

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> MessageStoreConfig:
        """Build from upstream camelCase keys; unknown keys are left for other components.

        Raises:
            ValueError: a known key whose value does not parse.
        """
        kwargs: dict[str, Any] = {}
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for key, raw in props.items():
            name = cls._field_of(key, types)
            if name is not None:
                kwargs[name] = parse_property_value(types[name], raw, key)
        return cls(**kwargs)

    @classmethod
    def knows_key(cls, key: str) -> bool:
        """Whether ``key`` (an upstream camelCase key) sets one of these options."""
        return cls._field_of(key, {f.name: f.type for f in dataclasses.fields(cls)}) is not None

    @staticmethod
    def _field_of(key: str, types: Mapping[str, Any]) -> str | None:
        name = _ATTR_BY_KEY.get(key) or snake_case(key)
        if name in types:
            return name
        return name + "_ms" if name + "_ms" in types else None


# MessageStoreConfig attribute -> upstream key, where the key is not the attribute's
# mechanical camelCase (javautil.camel_case): our durations say their unit, and a few Java
# names have their own spelling. The one table; read both ways.
STORE_KEYS = {
    "flush_interval_commit_log_ms": "flushIntervalCommitLog",
    "flush_commit_log_thorough_interval_ms": "flushCommitLogThoroughInterval",
    "flush_interval_consume_queue_ms": "flushIntervalConsumeQueue",
    "flush_consume_queue_thorough_interval_ms": "flushConsumeQueueThoroughInterval",
    "sync_flush_timeout_ms": "syncFlushTimeout",
    "clean_resource_interval_ms": "cleanResourceInterval",
    "check_crc_on_recover": "checkCRCOnRecover",
    "ha_send_heartbeat_interval_ms": "haSendHeartbeatInterval",
    "ha_housekeeping_interval_ms": "haHousekeepingInterval",
    "slave_timeout_ms": "slaveTimeout",
    "os_page_cache_busy_timeout_ms": "osPageCacheBusyTimeOutMills",
    "enable_dleger_commit_log": "enableDLegerCommitLog",
    "store_path_dledger_commit_log": "storePathDLedgerCommitLog",
}
# Older spellings upstream still reads (4.x configs say ``maped``).
_LEGACY_KEYS = {
    "mapedFileSizeCommitLog": "mapped_file_size_commit_log",
    "mapedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
}
_ATTR_BY_KEY = {key: attr for attr, key in STORE_KEYS.items()} | _LEGACY_KEYS


def store_key(attr: str) -> str:
    """The upstream key of the ``MessageStoreConfig`` attribute ``attr``."""
    return STORE_KEYS.get(attr) or camel_case(attr)


def parse_property_value(type_name: Any, raw: Any, key: str, component: str = "store") -> Any:
    """One ``broker.conf`` value as the dataclass field of type ``type_name`` wants it
    (``int``, ``int | None`` where blank is None, ``float``, ``bool``, else the text);
    shared by this record and ``BrokerConfig``.

    Raises:
        ValueError: naming ``<component> config <key>=<raw>`` and the type.
    """
    text = str(raw).strip()
    try:
        if type_name in ("int", int):
            return int(text)
        if type_name == "int | None":
            return int(text) if text else None
        if type_name in ("float", float):
            return float(text)
        if type_name in ("bool", bool):
            if isinstance(raw, bool):
                return raw
            if text.lower() in ("true", "false"):
                return text.lower() == "true"
            raise ValueError(text)
    except ValueError as exc:
        raise ValueError(f"{component} config {key}={raw!r} is not a valid {type_name}") from exc
    return text
