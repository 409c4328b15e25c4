"""Compiled SQL92 subscriptions per (topic, group) (upstream 4.9.7 ``ConsumerFilterManager``).

Contract:

* ``register_group(group, subscriptions)`` runs on every consumer HEART_BEAT (upstream's
  ``ConsumerGroupEvent.REGISTER``): each non-TAG subscription with an expression is
  registered under its topic with ``clientVersion`` = its ``subVersion``; the group's
  entries whose topic is no longer subscribed are marked dead. ``unregister(group)`` (the
  group's last channel left: ``UNREGISTER``) marks all of the group's entries dead.
* ``register``: a new entry is compiled once (``build``; an expression that does not
  compile is not registered, so a pull by heartbeat subscription answers
  FILTER_DATA_NOT_EXIST); an older or equal ``clientVersion`` is ignored (an equal one
  revives a dead entry); a newer one with a changed expression or type is rebuilt (a
  rebuild that does not compile removes the entry), otherwise only its version moves.
* ``get(topic, group)``: the entry the pull processor filters with, dead or alive, as
  upstream.
* Persistence as upstream's ``consumerFilter.json``:
  ``{"filterDataByTopic":{"<topic>":{"groupFilterData":{"<group>":{"bornTime":..,
  "clientVersion":..,"consumerGroup":..,"dead":..,"deadTime":..,"expression":..,
  "expressionType":..,"topic":..}},"topic":..}}}``. Entries dead for longer than
  ``filterDataCleanTimeSpan`` (24 h) are dropped when the file is written; on load every
  live entry is considered dead since 30 s ago (its consumers must heartbeat again) and
  the expressions are compiled again.

Not upstream: no bloom filter (``bloomFilterData`` is neither computed nor written; the
broker evaluates SQL92 on each stored message's properties instead of the consume-queue
extension bit map), so a stock broker would ignore this file (it drops entries whose bloom
data does not match its own).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol import fastjson
from aiorocketmq.protocol.filter import ExpressionType, FilterError, Sql92Expression, compile_sql92

from ..config_manager import ConfigManager

__all__ = ["ConsumerFilterData", "ConsumerFilterManager", "compile_expression", "FILTER_DATA_CLEAN_TIME_SPAN_MS"]

log = get_logger("aiorocketmq.broker.filter")

FILTER_DATA_CLEAN_TIME_SPAN_MS = 24 * 3600 * 1000  # BrokerConfig.filterDataCleanTimeSpan


def _now_ms() -> int:
    return int(time.time() * 1000)


def compile_expression(expression_type: str | None, expression: str | None) -> Sql92Expression:
    """``FilterFactory.INSTANCE.get(type).compile(expression)``.

    Raises:
        FilterError: an unknown type (upstream: no FilterSpi, a NullPointerException) or an
            expression that does not compile.
    """
    if expression_type != ExpressionType.SQL92:
        raise FilterError("java.lang.NullPointerException", f"no filter for type {expression_type}")
    if expression is None:
        raise FilterError("java.lang.NullPointerException", "expression is null")
    return compile_sql92(expression)


class ConsumerFilterData:
    """One group's compiled expression for one topic (upstream ``ConsumerFilterData``)."""

    __slots__ = ("consumer_group", "topic", "expression", "expression_type", "compiled",
                 "born_time", "dead_time", "client_version")

    def __init__(self, consumer_group: str, topic: str, expression: str, expression_type: str,
                 compiled: Sql92Expression | None, born_time: int, dead_time: int,
                 client_version: int) -> None:
        self.consumer_group = consumer_group
        self.topic = topic
        self.expression = expression
        self.expression_type = expression_type
        self.compiled = compiled
        self.born_time = born_time
        self.dead_time = dead_time
        self.client_version = client_version

    @property
    def is_dead(self) -> bool:
        return self.dead_time >= self.born_time

    def how_long_after_death(self, now_ms: int) -> int:
        return now_ms - self.dead_time if self.is_dead else -1

    def to_json(self) -> dict[str, Any]:
        return {"bornTime": self.born_time, "clientVersion": self.client_version,
                "consumerGroup": self.consumer_group, "dead": self.is_dead,
                "deadTime": self.dead_time, "expression": self.expression,
                "expressionType": self.expression_type, "topic": self.topic}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ConsumerFilterData:
        return cls(str(obj.get("consumerGroup") or ""), str(obj.get("topic") or ""),
                   str(obj.get("expression") or ""), str(obj.get("expressionType") or ""),
                   None, int(obj.get("bornTime") or 0), int(obj.get("deadTime") or 0),
                   int(obj.get("clientVersion") or 0))

    def __repr__(self) -> str:
        return (f"ConsumerFilterData(group={self.consumer_group!r}, topic={self.topic!r}, "
                f"expression={self.expression!r}, client_version={self.client_version}, "
                f"dead={self.is_dead})")


def build(topic: str, group: str, expression: str | None, expression_type: str | None,
          client_version: int) -> ConsumerFilterData | None:
    """``ConsumerFilterManager.build``: ``None`` for TAG types and expressions that do not compile."""
    if ExpressionType.is_tag_type(expression_type) or expression is None:
        return None
    assert expression_type is not None
    try:
        compiled = compile_expression(expression_type, expression)
    except FilterError as exc:
        log.error("broker.filter_parse_failed", expression=expression, topic=topic, group=group,
                  error=exc.remark[:300])
        return None
    return ConsumerFilterData(group, topic, expression, expression_type, compiled, _now_ms(), 0,
                              client_version)


class ConsumerFilterManager(ConfigManager):
    """topic -> group -> ``ConsumerFilterData``; see the module docstring."""

    def __init__(self, store_root: str | Path) -> None:
        super().__init__(Path(store_root) / "config" / "consumerFilter.json")
        self.table: dict[str, dict[str, ConsumerFilterData]] = {}

    build = staticmethod(build)

    def register_group(self, group: str, subscriptions: Iterable[Any]) -> None:
        """Upstream ``register(consumerGroup, subList)`` (every consumer heartbeat)."""
        topics: set[str] = set()
        for sub in subscriptions:
            topics.add(sub.topic)
            self.register(sub.topic, group, sub.sub_string, sub.expression_type, sub.sub_version)
        now = _now_ms()
        for by_group in self.table.values():
            data = by_group.get(group)
            if data is not None and data.topic not in topics and not data.is_dead:
                data.dead_time = now
                log.info("broker.filter_topic_dead", group=group, topic=data.topic)
                self.mark_dirty()

    def register(self, topic: str, group: str, expression: str | None, expression_type: str | None,
                 client_version: int) -> bool:
        """Upstream ``register(topic, group, expression, type, clientVersion)``."""
        if ExpressionType.is_tag_type(expression_type) or not expression:
            return False
        assert expression_type is not None
        by_group = self.table.setdefault(topic, {})
        old = by_group.get(group)
        if old is None:
            data = build(topic, group, expression, expression_type, client_version)
            if data is None:
                if not by_group:
                    del self.table[topic]
                return False
            by_group[group] = data
            log.info("broker.filter_registered", group=group, topic=topic, expression=expression)
            self.mark_dirty()
            return True
        if client_version <= old.client_version:
            if client_version == old.client_version and old.is_dead:
                old.dead_time = 0
                self.mark_dirty()
                return True
            return False
        if old.expression != expression or old.expression_type != expression_type:
            data = build(topic, group, expression, expression_type, client_version)
            if data is None:
                # the new expression does not compile: drop the old one, let the client fail
                del by_group[group]
                if not by_group:
                    del self.table[topic]
                self.mark_dirty()
                return False
            by_group[group] = data
            log.info("broker.filter_changed", group=group, topic=topic, expression=expression)
        else:
            old.client_version = client_version
            if old.is_dead:
                old.dead_time = 0
        self.mark_dirty()
        return True

    def unregister(self, group: str) -> None:
        """Upstream ``unRegister(consumerGroup)``: the group's entries become dead."""
        now = _now_ms()
        for by_group in self.table.values():
            data = by_group.get(group)
            if data is not None and not data.is_dead:
                data.dead_time = now
                log.info("broker.filter_unregistered", group=group, topic=data.topic)
                self.mark_dirty()

    def get(self, topic: str | None, group: str) -> ConsumerFilterData | None:
        if topic is None:
            return None
        by_group = self.table.get(topic)
        return None if by_group is None else by_group.get(group)

    def by_group(self, group: str) -> list[ConsumerFilterData]:
        return [d for by_group in self.table.values() for d in by_group.values()
                if d.consumer_group == group]

    def clean(self, now_ms: int | None = None) -> None:
        """Drop entries dead for longer than ``filterDataCleanTimeSpan``, then empty topics."""
        now = _now_ms() if now_ms is None else now_ms
        for topic in list(self.table):
            by_group = self.table[topic]
            for group in [g for g, d in by_group.items()
                          if d.how_long_after_death(now) >= FILTER_DATA_CLEAN_TIME_SPAN_MS]:
                log.info("broker.filter_removed", group=group, topic=topic)
                del by_group[group]
            if not by_group:
                del self.table[topic]

    # -- persistence ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        self.clean()
        return {topic: {"groupFilterData": {g: d.to_json() for g, d in by_group.items()},
                        "topic": topic}
                for topic, by_group in self.table.items()}

    def encode_snapshot(self, entries: dict[str, Any]) -> bytes:
        return fastjson.dumps({"filterDataByTopic": entries})

    def encode(self) -> bytes:
        return self.encode_snapshot(self.snapshot())

    def decode(self, data: bytes) -> None:
        obj = fastjson.loads(data)
        table: dict[str, dict[str, ConsumerFilterData]] = {}
        by_topic = (obj or {}).get("filterDataByTopic") or {}
        now = _now_ms()
        for topic, entry in by_topic.items():
            if not entry:
                continue
            for group, raw in (entry.get("groupFilterData") or {}).items():
                if not raw:
                    continue
                data_ = ConsumerFilterData.from_json(raw)
                try:
                    data_.compiled = compile_expression(data_.expression_type, data_.expression)
                except FilterError as exc:
                    log.error("broker.filter_load_failed", group=group, topic=topic,
                              error=exc.remark[:300])
                if data_.dead_time == 0:
                    # upstream: every consumer is considered dead when the broker loads
                    dead = now - 30 * 1000
                    data_.dead_time = data_.born_time if dead <= data_.born_time else dead
                table.setdefault(str(topic), {})[str(group)] = data_
        self.table = table
