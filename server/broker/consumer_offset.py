"""Consumer offsets per ``topic@group`` and queue, persisted to ``consumerOffset.json``.

Contract (upstream ``ConsumerOffsetManager``; docs/PROTOCOL.md 4.5, 6.3): ``commit_offset``
stores the offset a consumer reports (a lower value than the stored one is accepted and
logged, as upstream); ``query_offset`` returns -1 when the group has none for that queue.
The file holds ``{"offsetTable":{"topic@group":{0:12,1:7}}}``, fastjson's form with bare
integer keys, so upstream brokers and tools read it. The controller persists it every
``flushConsumerOffsetInterval`` (5 s) and at shutdown, writing in a worker thread.
"""

from __future__ import annotations

from pathlib import Path

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import ConsumerOffsetSerializeWrapper

from .config_manager import ConfigManager

__all__ = ["ConsumerOffsetManager", "TOPIC_GROUP_SEPARATOR"]

log = get_logger("aiorocketmq.broker.offset")

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager(ConfigManager):
    """``topic@group`` -> {queueId: offset}."""

    def __init__(self, store_root: str | Path) -> None:
        super().__init__(Path(store_root) / "config" / "consumerOffset.json")
        self.offset_table: dict[str, dict[int, int]] = {}

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int,
                      offset: int) -> None:
        key = topic + TOPIC_GROUP_SEPARATOR + group
        table = self.offset_table.get(key)
        if table is None:
            self.offset_table[key] = {queue_id: offset}
            return
        old = table.get(queue_id)
        table[queue_id] = offset
        if old is not None and offset < old:
            log.warning("broker.offset_moved_back", client=client_host, key=key, queue_id=queue_id,
                        offset=offset, stored=old)

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The stored offset, or -1 if the group has none for this queue."""
        table = self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group)
        if table is None:
            return -1
        return table.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int] | None:
        return self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group)

    def which_topic_by_consumer(self, group: str) -> set[str]:
        out = set()
        for key in self.offset_table:
            parts = key.split(TOPIC_GROUP_SEPARATOR)
            if len(parts) == 2 and parts[1] == group:
                out.add(parts[0])
        return out

    def which_group_by_topic(self, topic: str) -> set[str]:
        out = set()
        for key in self.offset_table:
            parts = key.split(TOPIC_GROUP_SEPARATOR)
            if len(parts) == 2 and parts[0] == topic:
                out.add(parts[1])
        return out

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        table = self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + src_group)
        if table is not None:
            self.offset_table[topic + TOPIC_GROUP_SEPARATOR + dest_group] = dict(table)

    def remove_offset(self, group: str) -> None:
        """Forget every offset of ``group`` (upstream matches ``topic@group`` exactly here)."""
        for key in [k for k in self.offset_table if k.split(TOPIC_GROUP_SEPARATOR)[-1] == group]:
            del self.offset_table[key]
            log.warning("broker.offset_removed", key=key)

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.offset_table if k.split(TOPIC_GROUP_SEPARATOR)[0] == topic]:
            del self.offset_table[key]

    # -- persistence ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, dict[int, int]]:
        return {key: dict(table) for key, table in self.offset_table.items()}

    def encode_snapshot(self, entries: dict[str, dict[int, int]]) -> bytes:
        return ConsumerOffsetSerializeWrapper(entries).encode()

    def decode(self, data: bytes) -> None:
        self.offset_table = ConsumerOffsetSerializeWrapper.decode(data).offset_table
