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
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.message import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MessageDecodeError

from .dispatcher import dispatch_request_from_record

if TYPE_CHECKING:
    from .message_store import MessageStore

__all__ = ["ReputMessageService"]

log = get_logger("aiorocketmq.store")
_unpack_head = struct.Struct(">ii").unpack_from  # TOTALSIZE, MAGICCODE


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
                req = dispatch_request_from_record(mf.mm, pos, store.delay_levels)
            except MessageDecodeError as exc:
                log.error("store.reput_bad_record", offset=offset, error=str(exc))
                break
            dispatcher.dispatch(req)
            offset += total
            if req.has_queue_unit:
                key = (req.topic, req.queue_id)
                if table.get(key, 0) <= req.consume_queue_offset:
                    table[key] = req.consume_queue_offset + 1
                if listener is not None:
                    # Upstream's slave does not notify long polling (parked pulls wait for
                    # the 5 s check); notifying is harmless and answers them at once.
                    try:
                        listener(req.topic, req.queue_id, req.consume_queue_offset + 1,
                                 req.tags_code, req.store_timestamp, {})
                    except Exception:
                        log.exception("store.arriving_listener_failed", topic=req.topic,
                                      queue_id=req.queue_id)
        dispatcher.dispatched_offset = max(dispatcher.dispatched_offset, offset)
