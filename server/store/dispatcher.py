"""From a commit-log record to its consume-queue unit and index entries.

Contract: ``Dispatcher.dispatch(req)`` is the single place that turns a record into
derived data, used both right after each append and when recovery re-reads the log
beyond the checkpoint (so the two cannot disagree). It is idempotent: consume queues
ignore units they already hold and the index ignores offsets it has indexed.

* Tags code (docs/PROTOCOL.md 6.1): Java ``hashCode`` of ``TAGS``, 0 without; for
  ``SCHEDULE_TOPIC_XXXX`` records with ``DELAY`` the delivery time, store timestamp +
  the level's delay (6.5; levels above the table are clamped to the last one).
* Transactional PREPARED and ROLLBACK records get no consume-queue unit; ROLLBACK
  records are not indexed either (upstream ``CommitLogDispatcherBuildConsumeQueue``,
  ``IndexService.buildIndex``).

Upstream: ``DefaultMessageStore.CommitLogDispatcherBuildConsumeQueue``,
``CommitLogDispatcherBuildIndex``, ``CommitLog.checkMessageAndReturnSize``,
``ScheduleMessageService.parseDelayLevel`` / ``computeDeliverTimestamp``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag, SystemTopic
from aiorocketmq.protocol.message import decode_message, tags_to_tags_code

from .consume_queue import ConsumeQueue
from .index import IndexService

__all__ = ["DispatchRequest", "Dispatcher", "parse_delay_levels", "compute_tags_code",
           "dispatch_request_from_record"]

_TAGS = MessageConst.PROPERTY_TAGS
_KEYS = MessageConst.PROPERTY_KEYS
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_SCHEDULE_TOPIC = SystemTopic.SCHEDULE_TOPIC
_PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE

_UNIT_MS = {"s": 1000, "m": 60 * 1000, "h": 60 * 60 * 1000, "d": 24 * 60 * 60 * 1000}
_LEVEL = re.compile(r"^(\d+)([smhd])$")


def parse_delay_levels(text: str) -> dict[int, int]:
    """``"1s 5s 10s 30s 1m ..."`` -> ``{1: 1000, 2: 5000, ...}`` (level -> delay in ms).

    Raises:
        ValueError: an entry that is not a number followed by one of s, m, h, d.
    """
    levels: dict[int, int] = {}
    for i, item in enumerate(text.split(), start=1):
        m = _LEVEL.match(item)
        if m is None:
            raise ValueError(f"messageDelayLevel entry {item!r} is not <number><s|m|h|d>")
        levels[i] = int(m.group(1)) * _UNIT_MS[m.group(2)]
    return levels


def compute_tags_code(topic: str, properties: Mapping[str, str], store_timestamp: int,
                      delay_levels: Mapping[int, int]) -> int:
    """The consume-queue tags code of a record (docs/PROTOCOL.md 6.1, 6.5)."""
    if topic == _SCHEDULE_TOPIC:
        level_s = properties.get(_DELAY)
        if level_s is not None:
            try:
                level = int(level_s)
            except ValueError:
                level = 0
            if level > 0 and delay_levels:
                level = min(level, max(delay_levels))
                return store_timestamp + delay_levels.get(level, 1000)
    return tags_to_tags_code(properties.get(_TAGS))


class DispatchRequest:
    """What the consume queue and the index need to know about one record."""

    __slots__ = ("topic", "queue_id", "commit_log_offset", "msg_size", "tags_code",
                 "store_timestamp", "consume_queue_offset", "keys", "uniq_key", "sys_flag")

    def __init__(self, topic: str, queue_id: int, commit_log_offset: int, msg_size: int,
                 tags_code: int, store_timestamp: int, consume_queue_offset: int,
                 keys: str | None, uniq_key: str | None, sys_flag: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.commit_log_offset = commit_log_offset
        self.msg_size = msg_size
        self.tags_code = tags_code
        self.store_timestamp = store_timestamp
        self.consume_queue_offset = consume_queue_offset
        self.keys = keys
        self.uniq_key = uniq_key
        self.sys_flag = sys_flag

    @property
    def has_queue_unit(self) -> bool:
        tx = self.sys_flag & 0xC
        return tx != _PREPARED and tx != _ROLLBACK


def dispatch_request_from_record(buf: object, pos: int, delay_levels: Mapping[int, int]) -> DispatchRequest:
    """Read the record at ``buf[pos:]`` (recovery). Raises ``MessageDecodeError`` if it is bad."""
    msg, _ = decode_message(buf, pos, read_body=False, decompress=False)
    props = msg.properties
    return DispatchRequest(
        msg.topic, msg.queue_id, msg.commit_log_offset, msg.store_size,
        compute_tags_code(msg.topic, props, msg.store_timestamp, delay_levels),
        msg.store_timestamp, msg.queue_offset, props.get(_KEYS), props.get(_UNIQ), msg.sys_flag,
    )


class Dispatcher:
    """Writes units and index entries; owns no files (the store owns the queues and index)."""

    __slots__ = ("_find_or_create_queue", "index", "dispatched_offset", "dispatched_timestamp")

    def __init__(self, find_or_create_queue: Callable[[str, int], ConsumeQueue],
                 index: IndexService | None) -> None:
        self._find_or_create_queue = find_or_create_queue
        self.index = index
        # End of the last record dispatched, and its store time (checkpoint inputs).
        self.dispatched_offset = 0
        self.dispatched_timestamp = 0

    def dispatch(self, req: DispatchRequest) -> None:
        """Build the unit and index entries of one record. Raises OSError if a file cannot be created."""
        self.dispatch_record(req.topic, req.queue_id, req.commit_log_offset, req.msg_size,
                             req.tags_code, req.store_timestamp, req.consume_queue_offset,
                             req.keys, req.uniq_key, req.sys_flag)

    def dispatch_record(self, topic: str, queue_id: int, commit_log_offset: int, msg_size: int,
                        tags_code: int, store_timestamp: int, consume_queue_offset: int,
                        keys: str | None, uniq_key: str | None, sys_flag: int) -> bool:
        """``dispatch`` from the fields themselves (the put path: no request object per
        message). Returns whether the record got a queue unit (``has_queue_unit``)."""
        tx = sys_flag & 0xC
        counted = tx != _PREPARED and tx != _ROLLBACK
        if counted:
            cq = self._find_or_create_queue(topic, queue_id)
            cq.put_unit(commit_log_offset, msg_size, tags_code, consume_queue_offset)
        if self.index is not None and tx != _ROLLBACK:
            self.index.build_index(topic, keys, uniq_key, commit_log_offset, store_timestamp)
        end = commit_log_offset + msg_size
        if end > self.dispatched_offset:
            self.dispatched_offset = end
            self.dispatched_timestamp = store_timestamp
        return counted

    def dispatch_batch_units(self, topic: str, queue_id: int, offsets: list[int], end: int,
                             tags_codes: list[int], consume_queue_offset: int, sys_flag: int) -> bool:
        """The queue units of a batch's records (back to back at ``offsets``, the last ending
        at ``end``, one queue, one sys flag, queue offsets ``consume_queue_offset`` on) in one
        call (``ConsumeQueue.put_units``). False, nothing written, when the records get no
        unit or it is not that plain case: the caller then dispatches each record with
        ``dispatch_record``. On True the caller still builds each record's index entries
        (``index.build_index``) and then sets ``dispatched_offset``/``dispatched_timestamp``."""
        tx = sys_flag & 0xC
        if tx == _PREPARED or tx == _ROLLBACK:
            return False
        cq = self._find_or_create_queue(topic, queue_id)
        return cq.put_units(offsets, end, tags_codes, consume_queue_offset)
