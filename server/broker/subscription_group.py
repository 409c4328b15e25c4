"""Subscription groups and ``subscriptionGroup.json`` (upstream ``SubscriptionGroupManager``).

Contract (docs/PROTOCOL.md 6.3): the table starts with upstream's built-in groups
(``TOOLS_CONSUMER``, ``FILTERSRV_CONSUMER``, ``SELF_TEST_C_GROUP``, ``CID_ONS-HTTP-PROXY``,
``CID_ONSAPI_PULL``, ``CID_ONSAPI_PERMISSION``, ``CID_ONSAPI_OWNER``, the first two with
broadcast consumption disabled); ``load()`` overlays the file. ``find`` auto-creates a
missing group with the defaults (retryQueueNums 1, retryMaxTimes 16, ...) when
``autoCreateSubscriptionGroup`` is on or the group starts with ``CID_RMQ_SYS_``, bumps
the DataVersion and schedules a write; otherwise it returns ``None``.
"""

from __future__ import annotations

from pathlib import Path

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import (
    DataVersion,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from aiorocketmq.protocol.codes import MixAll

from .config_manager import ConfigManager

__all__ = ["SubscriptionGroupManager"]

log = get_logger("aiorocketmq.broker.subscription")


class SubscriptionGroupManager(ConfigManager):
    """Group name -> ``SubscriptionGroupConfig``."""

    def __init__(self, store_root: str | Path, *, auto_create: bool = True) -> None:
        super().__init__(Path(store_root) / "config" / "subscriptionGroup.json")
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()
        for group in (MixAll.TOOLS_CONSUMER_GROUP, MixAll.FILTERSRV_CONSUMER_GROUP):
            self.table[group] = SubscriptionGroupConfig(group, consume_broadcast_enable=False)
        for group in (MixAll.SELF_TEST_CONSUMER_GROUP, MixAll.ONS_HTTP_PROXY_GROUP,
                      MixAll.CID_ONSAPI_PULL_GROUP, MixAll.CID_ONSAPI_PERMISSION_GROUP,
                      MixAll.CID_ONSAPI_OWNER_GROUP):
            self.table[group] = SubscriptionGroupConfig(group)

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config without auto-creating it."""
        return self.table.get(group)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """``findSubscriptionGroupConfig``: the config, auto-created when allowed."""
        cfg = self.table.get(group)
        if cfg is None and (self.auto_create or MixAll.is_sys_consumer_group(group)):
            cfg = self.table[group] = SubscriptionGroupConfig(group)
            log.info("broker.subscription_group_auto_created", group=group)
            self.data_version.next_version()
            self.mark_dirty()
        return cfg

    def update(self, cfg: SubscriptionGroupConfig) -> None:
        old = self.table.get(cfg.group_name)
        self.table[cfg.group_name] = cfg
        log.info("broker.subscription_group_updated" if old else "broker.subscription_group_created",
                 group=cfg.group_name)
        self.data_version.next_version()
        self.mark_dirty()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        log.info("broker.subscription_group_deleted", group=group)
        self.data_version.next_version()
        self.mark_dirty()
        return True

    def snapshot(self) -> dict[str, SubscriptionGroupConfig]:
        return dict(self.table)

    def encode_snapshot(self, entries: dict[str, SubscriptionGroupConfig]) -> bytes:
        return SubscriptionGroupWrapper(entries, DataVersion(
            self.data_version.timestamp, self.data_version.counter)).encode()

    def decode(self, data: bytes) -> None:
        wrapper = SubscriptionGroupWrapper.decode(data)
        self.table.update(wrapper.subscription_group_table)
        self.data_version.assign_new_one(wrapper.data_version)
