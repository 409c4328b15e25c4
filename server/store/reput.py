"""``ReputMessageService``: dispatch of records appended to the commit log by replication
(upstream ``DefaultMessageStore.ReputMessageService``).

Contract:

* ``reput()`` walks the commit log from the dispatcher's ``dispatched_offset`` (never below
  the log's minimum) to its end and dispatches every whole record to its consume queue and
  the index exactly as a master's put does (``Dispatcher.dispatch``), keeps the commit
  log's topic-queue table ahead of each dispatched unit, and calls the store's arriving
  listener per record that has a queue unit (a listener that raises is logged, not
  propagated). End-of-segment fillers are skipped; a record whose bytes are not all there
  yet stops the walk (the next append completes it); a bad record (wrong magic, size <= 0,
  undecodable) is logged and stops the walk there. ``dispatched_offset`` only moves forward.
* It is called by the slave's ``MessageStore.append_to_commit_log`` / ``dispatch_appended``
  (server/store/ha) on the event loop, synchronously: there is no reput thread, so a
  record is dispatched as soon as it is whole, and the store's ``dispatch_behind_bytes``
  is 0 between calls. A master dispatches its own puts in ``MessageStore`` and never
  needs this.
* ``record_dispatch_fields`` reads only what dispatch needs from a record (the common v1
  record with IPv4 hosts; any other goes to ``dispatch_request_from_record``, the
  reference, which also raises for a bad one): the same fields, no message object.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag
from aiorocketmq.protocol.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MessageDecodeError,
    decode_properties,
)

from .dispatcher import compute_tags_code, dispatch_request_from_record

if TYPE_CHECKING:
    from .message_store import MessageStore

__all__ = ["ReputMessageService", "record_dispatch_fields"]

log = get_logger("aiorocketmq.store")
_unpack_head = struct.Struct(">ii").unpack_from  # TOTALSIZE, MAGICCODE
# The fixed 88 bytes of a v1 record with IPv4 hosts, only what dispatch reads: TOTALSIZE,
# MAGICCODE, QUEUEID, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, STORETIMESTAMP, BODYLENGTH.
_FIXED = struct.Struct(">ii4xi4xqqi16xq20xi")
_unpack_fixed = _FIXED.unpack_from
_unpack_short = struct.Struct(">h").unpack_from
_V6_HOSTS = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_TAGS = MessageConst.PROPERTY_TAGS
_KEYS = MessageConst.PROPERTY_KEYS
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_topics: dict[bytes, str] = {}

# (topic, queue_id, commit_log_offset, msg_size, tags_code, store_timestamp,
#  consume_queue_offset, keys, uniq_key, sys_flag): ``Dispatcher.dispatch_record``'s arguments.
DispatchFields = tuple[str, int, int, int, int, int, int, "str | None", "str | None", int]


def record_dispatch_fields(buf: object, pos: int, total: int,
                           delay_levels: Mapping[int, int]) -> DispatchFields:
    """What ``dispatch_request_from_record`` reads from the record of ``total`` bytes at
    ``buf[pos:]``, as ``Dispatcher.dispatch_record``'s arguments, without decoding the rest
    (no message object, hosts or message id). A v1 record with IPv4 hosts is read here;
    any other, or one whose lengths do not add up, goes to the full decoder, which raises
    ``MessageDecodeError`` for a bad one.
    """
    mm: Any = buf
    end = pos + total
    if total >= 91 and end <= len(mm):
        (_, magic, queue_id, queue_offset, phys, sys_flag, store_ts,
         body_len) = _unpack_fixed(mm, pos)
        p = pos + 88 + body_len
        if magic == MESSAGE_MAGIC_CODE and not sys_flag & _V6_HOSTS and body_len >= 0 and p < end:
            topic_len = mm[p]
            p += 1
            if topic_len <= 127 and p + topic_len + 2 <= end:
                raw = mm[p:p + topic_len]
                topic = _topics.get(raw)
                if topic is None:
                    if len(_topics) >= 4096:
                        _topics.clear()
                    topic = _topics[raw] = str(raw, "utf-8", "replace")
                p += topic_len
                props_len = _unpack_short(mm, p)[0]
                p += 2
                if p + props_len == end:
                    props = decode_properties(str(mm[p:end], "utf-8", "replace")) if props_len else {}
                    return (topic, queue_id, phys, total,
                            compute_tags_code(topic, props, store_ts, delay_levels),
                            store_ts, queue_offset, props.get(_KEYS), props.get(_UNIQ), sys_flag)
    req = dispatch_request_from_record(mm, pos, delay_levels)
    return (req.topic, req.queue_id, req.commit_log_offset, req.msg_size, req.tags_code,
            req.store_timestamp, req.consume_queue_offset, req.keys, req.uniq_key, req.sys_flag)


class ReputMessageService:
    """A store's dispatch of replicated records. See the module docstring for the contract."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store

    def reput(self) -> None:
        """Dispatch the whole records between the dispatched offset and the log's end."""
        store = self._store
        dispatcher = store.dispatcher
        commit_log = store.commit_log
        file_size = commit_log.file_size
        offset = max(dispatcher.dispatched_offset, commit_log.min_offset)
        end = commit_log.max_offset
        find = commit_log.mfq.find_mapped_file_by_offset
        table = commit_log.topic_queue_table
        listener = store._listener
        dispatch = dispatcher.dispatch_record
        delay_levels = store.delay_levels
        while offset < end:
            mf = find(offset)
            if mf is None:
                break
            pos = offset - mf.file_from_offset
            wrote = mf.wrote_position
            if pos + 8 > wrote:
                if wrote < file_size:
                    break
                offset = mf.file_from_offset + file_size
                continue
            total, magic = _unpack_head(mf.mm, pos)
            if magic == BLANK_MAGIC_CODE:
                offset = mf.file_from_offset + file_size
                continue
            if magic != MESSAGE_MAGIC_CODE or total <= 0:
                log.error("store.reput_bad_record", offset=offset, magic=magic, size=total)
                break
            if pos + total > wrote:
                break  # the rest of this record is still on its way
            try:
                fields = record_dispatch_fields(mf.mm, pos, total, delay_levels)
            except MessageDecodeError as exc:
                log.error("store.reput_bad_record", offset=offset, error=str(exc))
                break
            offset += total
            if dispatch(*fields):
                topic, queue_id, cq_offset = fields[0], fields[1], fields[6]
                key = (topic, queue_id)
                if table.get(key, 0) <= cq_offset:
                    table[key] = cq_offset + 1
                if listener is not None:
                    # Upstream's slave does not notify long polling (parked pulls wait for
                    # the 5 s check); notifying is harmless and answers them at once.
                    try:
                        listener(topic, queue_id, cq_offset + 1, fields[4], fields[5], {})
                    except Exception:
                        log.exception("store.arriving_listener_failed", topic=topic,
                                      queue_id=queue_id)
        dispatcher.dispatched_offset = max(dispatcher.dispatched_offset, offset)
