"""The broker's topic table, its DataVersion and ``topics.json`` (upstream ``TopicConfigManager``).

Contract (docs/PROTOCOL.md 6.7, 6.8, 4.11):

* At construction the table holds the system topics exactly as upstream creates them:
  ``SELF_TEST_TOPIC`` 1/1, ``TBW102`` 8/8 perm 7 (only with ``autoCreateTopicEnable``),
  ``BenchmarkTest`` 1024/1024, ``<cluster>`` 16/16 and ``<brokerName>`` 1/1 (perm
  INHERIT, plus RW when cluster/broker topics are enabled), ``OFFSET_MOVED_EVENT`` 1/1,
  ``SCHEDULE_TOPIC_XXXX`` 18/18, the trace topic when enabled, ``<cluster>_REPLY_TOPIC``
  1/1. ``load()`` then overlays ``topics.json`` (and its DataVersion).
* ``create_topic_in_send_message_method`` auto-creates a topic from its default topic
  when that one has PERM_INHERIT: ``min(requested, default.writeQueueNums)`` queues, the
  default's perm without INHERIT, its filter type. ``create_topic_in_send_message_back_method``
  creates retry/DLQ-style topics with explicit queue count and perm. Both bump the
  DataVersion, persist, and call ``on_topic_created()`` (the controller sends a full oneway
  REGISTER_BROKER, as upstream's ``registerBrokerAll(false, true, true)``).
* Every change bumps the DataVersion and schedules an atomic write of ``topics.json``
  (upstream's JSON shape: ``{"dataVersion":{...},"topicConfigTable":{...}}``).
* ``validate_topic`` (from ``protocol.validation``) / ``is_system_topic`` /
  ``is_not_allowed_send_topic`` are ``TopicValidator``'s checks with its remarks.
* ``load()`` leaves out (and logs) a stored config no client could use (queue counts
  outside ``protocol.validation.MAX_QUEUE_NUMS``, undefined perm bits): such a topic
  would keep the broker from registering anything.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from pathlib import Path

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from aiorocketmq.protocol.codes import MixAll, Perm, SystemTopic
from aiorocketmq.protocol.errors import ProtocolError
from aiorocketmq.protocol.validation import (
    TOPIC_MAX_LENGTH,
    validate_topic,
    validate_topic_config,
)

from .config import BrokerConfig
from .config_manager import ConfigManager

__all__ = [
    "TopicConfigManager",
    "validate_topic",
    "TOPIC_MAX_LENGTH",
    "SCHEDULE_TOPIC_QUEUE_NUM",
]

log = get_logger("aiorocketmq.broker.topic")

SCHEDULE_TOPIC_QUEUE_NUM = 18  # TopicConfigManager.SCHEDULE_TOPIC_QUEUE_NUM


class TopicConfigManager(ConfigManager):
    """Topic name -> ``TopicConfig``; see the module docstring."""

    def __init__(self, config: BrokerConfig, store_root: str | Path) -> None:
        super().__init__(Path(store_root) / "config" / "topics.json")
        self._config = config
        self.topic_config_table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.system_topics: set[str] = set(SystemTopic.SYSTEM_TOPICS)
        self.on_topic_created: Callable[[], None] | None = None
        self._init_system_topics()

    def add_system_topic(self, topic: str, queues: int | None, perm: int | None = None) -> None:
        """Add a system topic of another component (before ``load``), e.g. the timer topic."""
        self._add_system(topic, queues, perm)

    def _add_system(self, topic: str, queues: int | None, perm: int | None = None) -> None:
        tc = TopicConfig(topic)
        if queues is not None:
            tc.read_queue_nums = tc.write_queue_nums = queues
        if perm is not None:
            tc.perm = perm
        self.system_topics.add(topic)
        self.topic_config_table[topic] = tc

    def _init_system_topics(self) -> None:
        c = self._config
        rw = int(Perm.READ | Perm.WRITE)
        self._add_system(SystemTopic.SELF_TEST_TOPIC, 1)
        if c.auto_create_topic_enable:
            self._add_system(SystemTopic.AUTO_CREATE_TOPIC_KEY, c.default_topic_queue_nums,
                             int(Perm.INHERIT) | rw)
        self._add_system(SystemTopic.BENCHMARK_TOPIC, 1024)
        self._add_system(c.broker_cluster_name, None,
                         int(Perm.INHERIT) | (rw if c.cluster_topic_enable else 0))
        self._add_system(c.broker_name, 1, int(Perm.INHERIT) | (rw if c.broker_topic_enable else 0))
        self._add_system(SystemTopic.OFFSET_MOVED_EVENT, 1)
        self._add_system(SystemTopic.SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM)
        if c.trace_topic_enable:
            self._add_system(c.msg_trace_topic_name, 1)
        self._add_system(MixAll.reply_topic(c.broker_cluster_name), 1)

    # -- queries --------------------------------------------------------------------------

    def select(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def is_system_topic(self, topic: str) -> bool:
        """``TopicValidator.isSystemTopic``: a system topic or the ``rmq_sys_`` prefix."""
        return topic in self.system_topics or topic.startswith(SystemTopic.SYSTEM_TOPIC_PREFIX)

    @staticmethod
    def is_not_allowed_send_topic(topic: str) -> bool:
        return topic in SystemTopic.NOT_ALLOWED_SEND

    def is_order_topic(self, topic: str) -> bool:
        tc = self.topic_config_table.get(topic)
        return tc is not None and tc.order

    def build_serialize_wrapper(self, topics: list[str] | None = None) -> TopicConfigSerializeWrapper:
        """A snapshot of the table (or of ``topics`` only) with a copy of the DataVersion."""
        names = self.topic_config_table if topics is None else topics
        table = {n: copy.copy(self.topic_config_table[n]) for n in names
                 if n in self.topic_config_table}
        return TopicConfigSerializeWrapper(table, copy.copy(self.data_version))

    # -- changes --------------------------------------------------------------------------

    def _changed(self) -> None:
        self.data_version.next_version()
        self.mark_dirty()

    def create_topic_in_send_message_method(
        self, topic: str, default_topic: str, remote_addr: str, client_default_queue_nums: int,
        topic_sys_flag: int,
    ) -> TopicConfig | None:
        """Auto-create ``topic`` from ``default_topic`` (docs/PROTOCOL.md 6.7); ``None`` if not allowed."""
        tc = self.topic_config_table.get(topic)
        if tc is not None:
            return tc
        default = self.topic_config_table.get(default_topic)
        if default is None:
            log.warning("broker.topic_create_failed", topic=topic, default_topic=default_topic,
                        producer=remote_addr, reason="default topic does not exist")
            return None
        if (default_topic == SystemTopic.AUTO_CREATE_TOPIC_KEY
                and not self._config.auto_create_topic_enable):
            default.perm = int(Perm.READ | Perm.WRITE)
        if not Perm.inherited(default.perm):
            log.warning("broker.topic_create_failed", topic=topic, default_topic=default_topic,
                        producer=remote_addr, reason=f"default topic has no inherit perm ({default.perm})")
            return None
        queues = max(min(client_default_queue_nums, default.write_queue_nums), 0)
        tc = TopicConfig(topic, queues, queues, int(default.perm) & ~int(Perm.INHERIT),
                         default.topic_filter_type, topic_sys_flag)
        self.topic_config_table[topic] = tc
        log.info("broker.topic_auto_created", topic=topic, default_topic=default_topic,
                 queues=queues, perm=tc.perm, producer=remote_addr)
        self._changed()
        if self.on_topic_created is not None:
            self.on_topic_created()
        return tc

    def create_topic_in_send_message_back_method(
        self, topic: str, client_default_queue_nums: int, perm: int, topic_sys_flag: int,
    ) -> TopicConfig:
        """Create a ``%RETRY%`` / ``%DLQ%`` style topic with explicit queues and perm."""
        tc = self.topic_config_table.get(topic)
        if tc is not None:
            return tc
        tc = TopicConfig(topic, client_default_queue_nums, client_default_queue_nums, perm,
                         topic_sys_flag=topic_sys_flag)
        self.topic_config_table[topic] = tc
        log.info("broker.topic_created", topic=topic, queues=client_default_queue_nums, perm=perm)
        self._changed()
        if self.on_topic_created is not None:
            self.on_topic_created()
        return tc

    def update_topic_config(self, tc: TopicConfig) -> None:
        old = self.topic_config_table.get(tc.topic_name)
        self.topic_config_table[tc.topic_name] = tc
        log.info("broker.topic_updated" if old is not None else "broker.topic_created",
                 topic=tc.topic_name, read=tc.read_queue_nums, write=tc.write_queue_nums,
                 perm=tc.perm)
        self._changed()

    def update_order_topic_config(self, order_topics: Iterable[str]) -> bool:
        """``updateOrderTopicConfig``: the nameserver's ``ORDER_TOPIC_CONFIG`` keys (from a
        periodic registration's answer) are this broker's ordered topics: each present gets
        ``order`` set, every other topic has it cleared. True when something changed (the
        DataVersion then moves on and the table is written)."""
        wanted = set(order_topics)
        changed = False
        for name, tc in self.topic_config_table.items():
            order = name in wanted
            if tc.order != order:
                tc.order = order
                changed = True
                log.info("broker.topic_order_updated", topic=name, order=order)
        if changed:
            self._changed()
        return changed

    def delete_topic_config(self, topic: str) -> bool:
        if self.topic_config_table.pop(topic, None) is None:
            log.warning("broker.topic_delete_missing", topic=topic)
            return False
        log.info("broker.topic_deleted", topic=topic)
        self._changed()
        return True

    # -- persistence ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, TopicConfig]:
        return {n: copy.copy(tc) for n, tc in self.topic_config_table.items()}

    def encode_snapshot(self, entries: dict[str, TopicConfig]) -> bytes:
        return TopicConfigSerializeWrapper(entries, copy.copy(self.data_version)).encode()

    def decode(self, data: bytes) -> None:
        wrapper = TopicConfigSerializeWrapper.decode(data)
        table = wrapper.topic_config_table
        for name, tc in list(table.items()):
            try:
                validate_topic_config(tc, name)
            except ProtocolError as exc:
                log.error("broker.topic_config_dropped", path=str(self.path), topic=name,
                          reason=str(exc))
                del table[name]
        self.topic_config_table.update(table)
        self.data_version.assign_new_one(wrapper.data_version)
