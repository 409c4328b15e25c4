"""The commit log: every message of the broker, appended to fixed-size mapped segments.

Contract:

* ``append`` / ``append_batch`` run on the event loop. They assign the queue offset of
  (topic, queueId) at append time, encode each record once with its final offsets
  (``protocol.message.encode_stored_record``) and copy it into the mapping in one
  memcpy. A record (or a whole batch) never straddles two segments: when it does not
  fit with ``END_FILE_MIN_BLANK_LENGTH`` to spare, the rest of the segment is marked
  with an 8-byte filler (TOTALSIZE = bytes left, MAGICCODE = ``BLANK_MAGIC_CODE``)
  and the record goes to the next segment. ``OSError`` from creating a segment (a full
  disk) propagates to the caller before anything is written for the record.
* Delayed messages are parked in ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` with
  ``REAL_TOPIC`` / ``REAL_QID`` added, as upstream ``CommitLog.asyncPutMessage``
  (docs/PROTOCOL.md 6.5); transactional PREPARED/ROLLBACK records take queue offset 0 and do
  not advance the queue (6.1).
* Reads return ``memoryview`` slices of the mapping (pull bodies are the log's bytes).
* ``recover`` checks records forward from a known-good point and returns the end of
  the last whole record; everything beyond is cut (and zeroed after a crash, so stale
  bytes can never line up as a record later). A record is whole when its magic code,
  lengths, PHYSICALOFFSET field and BODYCRC all agree.

Upstream: ``store/CommitLog.java`` (``DefaultAppendMessageCallback``, ``recoverNormally``,
``recoverAbnormally``, ``checkMessageAndReturnSize``, ``getMessage``, ``rollNextFile``).
"""

from __future__ import annotations

import functools
import struct
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NamedTuple

from aiorocketmq import refuse_extension
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag, SystemTopic
from aiorocketmq.protocol.message import (
    BLANK_MAGIC_CODE,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    PHYSICAL_OFFSET_POS,
    MessageDecodeError,
    create_offset_msg_id,
    encode_properties,
    pack_stored_record,
    record_size,
    store_timestamp_pos,
    tags_to_tags_code,
)

from .config import MessageStoreConfig
from .dispatcher import DispatchRequest, compute_tags_code, dispatch_request_from_record
from .inner import (
    AppendMessageResult,
    AppendMessageStatus,
    MessageExtBrokerInner,
    UniformBatch,
    batch_inners,
)
from .mapped_file import MappedFile, MappedFileQueue

__all__ = ["CommitLog", "CommitLogRecovery", "END_FILE_MIN_BLANK_LENGTH"]

log = get_logger("aiorocketmq.store")

END_FILE_MIN_BLANK_LENGTH = 4 + 4
_BLANK = struct.Struct(">ii")
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_HEAD = struct.Struct(">iiiiiqqi")  # TOTALSIZE .. SYSFLAG
_int_at = _INT.unpack_from
_long_at = _LONG.unpack_from

_PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_BORN_V6 = MessageSysFlag.BORNHOST_V6_FLAG
_STORE_V6 = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_KEYS = MessageConst.PROPERTY_KEYS
_TAGS = MessageConst.PROPERTY_TAGS
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_SCHEDULE_TOPIC = SystemTopic.SCHEDULE_TOPIC

def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


# The record written straight into the mapping, in C (server/store/_put.c), else None:
# pack_stored_record's bytes, joined and then copied in, are the Python path.
try:
    refuse_extension("aiorocketmq.server.store._put")
    from ._put import write_batch as _write_batch
    from ._put import write_record as _write_record
except ImportError:
    _write_record = None  # type: ignore[assignment]
    _write_batch = None  # type: ignore[assignment]


# Recovery verdicts of _check_record besides a positive record size.
_END_OF_FILE = 0
_INVALID = -1
_CRC_FAILED = -2
_EMPTY = -3
_ZERO_CHUNK = bytes(1024 * 1024)
_MAX_FIXED = 91 + 12 + 12  # a record's bytes besides body, topic and properties
# The bytes a topic may hold (TopicValidator's ^[%|a-zA-Z0-9_-]+$): deleting them from a
# stored topic must leave nothing.
_TOPIC_BYTES = b"%|_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


class CommitLogRecovery(NamedTuple):
    """What ``CommitLog.recover`` found: the end of the log and any damage cut from it."""

    end: int
    damage: str  # "" when the log simply ended; else why the record at ``end`` was refused
    dropped_bytes: int  # written (non-zero) bytes cut from ``end`` to the old end of the log
    dropped_segments: int


class CommitLog:
    """The log itself; the store facade adds dispatch, flushing and retention."""

    __slots__ = ("config", "store_host", "delay_levels", "max_delay_level", "mfq", "file_size",
                 "topic_queue_table", "clock_ms")

    def __init__(self, config: MessageStoreConfig, store_host: bytes,
                 delay_levels: Mapping[int, int], clock_ms: Callable[[], int] | None = None) -> None:
        self.config = config
        # Store timestamps come from here (wall-clock milliseconds, as System.currentTimeMillis).
        self.clock_ms: Callable[[], int] = clock_ms or _wall_clock_ms
        self.store_host = store_host
        self.delay_levels = delay_levels
        self.max_delay_level = max(delay_levels) if delay_levels else 0
        self.file_size = config.mapped_file_size_commit_log
        self.mfq = MappedFileQueue(config.commit_log_dir, self.file_size,
                                   preallocate=config.warm_maped_file_enable)
        # (topic, queueId) -> next queue offset (upstream CommitLog.topicQueueTable).
        self.topic_queue_table: dict[tuple[str, int], int] = {}

    # -- offsets --

    @property
    def min_offset(self) -> int:
        """First byte still stored, or -1 without segments (``getMinOffset``)."""
        return self.mfq.min_offset

    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # -- appending --

    def apply_delay(self, inner: MessageExtBrokerInner) -> None:
        """Park a delayed NOT/COMMIT message in ``SCHEDULE_TOPIC_XXXX`` (docs/PROTOCOL.md 6.5)."""
        tx = inner.sys_flag & 0xC
        if (tx != 0 and tx != _COMMIT) or inner.topic == _SCHEDULE_TOPIC:
            return  # already parked (a caller that rewrote it itself)
        level_s = inner.properties.get(_DELAY)
        if not level_s:
            return
        try:
            level = int(level_s)
        except ValueError:
            return
        if level <= 0 or self.max_delay_level == 0:
            return
        level = min(level, self.max_delay_level)
        props = inner.properties
        props[MessageConst.PROPERTY_REAL_TOPIC] = inner.topic
        props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(inner.queue_id)
        inner.properties_string = encode_properties(props)
        inner.topic = _SCHEDULE_TOPIC
        inner.queue_id = level - 1

    def _prepare(self, inner: MessageExtBrokerInner) -> tuple[bytes, bytes, bytes, int, AppendMessageStatus | None]:
        """Encoded topic and properties, store host, record size, or a refusal status."""
        topic_b = inner.topic.encode("utf-8")
        props_s = inner.properties_string
        if props_s is None:
            props_s = encode_properties(inner.properties)
        props_b = props_s.encode("utf-8")
        store_host = inner.store_host or self.store_host
        size = record_size(len(topic_b), len(inner.body), len(props_b),
                           len(inner.born_host) == 20, len(store_host) == 20)
        status: AppendMessageStatus | None = None
        if len(props_b) > MAX_PROPERTIES_LENGTH:
            status = AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED
        elif (len(topic_b) > MAX_TOPIC_LENGTH or size > self.config.max_message_size
              or size + END_FILE_MIN_BLANK_LENGTH > self.file_size):
            status = AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
        return topic_b, props_b, store_host, size, status

    def _segment_for(self, size: int) -> MappedFile:
        """The segment that can take ``size`` bytes now, rolling over with a filler if needed."""
        mf = self.mfq.get_last_mapped_file(0)
        assert mf is not None
        # Disk blocks for the record, or for the filler that ends the segment: if the disk
        # is full, OSError now, before anything is written (mapped_file.py).
        need = mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH
        if need > mf.allocated:
            mf.allocate_to(min(mf.file_size, need))
        if size + END_FILE_MIN_BLANK_LENGTH > mf.free_space:
            # Create the next segment first: if the disk is full, nothing has changed.
            nxt = self.mfq.create_file(mf.file_from_offset + self.file_size, allocate=size)
            free = mf.free_space
            if free >= END_FILE_MIN_BLANK_LENGTH:
                mf.write_at(mf.wrote_position, _BLANK.pack(free, BLANK_MAGIC_CODE))
            mf.wrote_position = mf.file_size
            mf = nxt
        return mf

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        return self.topic_queue_table.get((topic, queue_id), 0)

    def encode_record(self, inner: MessageExtBrokerInner, topic_b: bytes, props_b: bytes,
                      store_host: bytes, phys: int, now_ms: int) -> bytearray:
        """The stored record of ``inner`` at commit-log offset ``phys`` (after ``_prepare``);
        fills in ``inner``'s store fields. Its queue offset comes from the table, which
        the caller advances once the record is in the log."""
        _, queue_offset, sys_flag = self._store_fields(
            inner.topic, inner.queue_id, inner.sys_flag, inner.born_host, store_host)
        # _prepare checked the lengths and the V6 bits are set above: the unchecked packer.
        record = pack_stored_record(
            topic_b, inner.queue_id, inner.flag, queue_offset, phys, sys_flag,
            inner.born_timestamp, inner.born_host, now_ms, store_host, inner.reconsume_times,
            inner.prepared_transaction_offset, inner.body, props_b,
        )
        inner.sys_flag = sys_flag
        inner.store_timestamp = now_ms
        inner.queue_offset = queue_offset
        inner.commit_log_offset = phys
        inner.msg_id = create_offset_msg_id(store_host, phys)
        inner.tags_code = compute_tags_code(inner.topic, inner.properties, now_ms, self.delay_levels)
        return record

    def _store_fields(self, topic: str, queue_id: int, sys_flag: int, born_host: bytes,
                      store_host: bytes) -> tuple[bool, int, int]:
        """What a record's append adds to its fields: whether it takes a queue offset (not a
        prepared or rolled-back transaction's half), that offset, and its sys flag with the
        IPv6 bits of its hosts (``_encode_into`` has these lines inline, the single send's
        path)."""
        tx = sys_flag & 0xC
        counted = tx != _PREPARED and tx != _ROLLBACK
        queue_offset = self.topic_queue_table.get((topic, queue_id), 0) if counted else 0
        sys_flag &= ~(_BORN_V6 | _STORE_V6)
        if len(born_host) == 20:
            sys_flag |= _BORN_V6
        if len(store_host) == 20:
            sys_flag |= _STORE_V6
        return counted, queue_offset, sys_flag

    def advance_queue_offset(self, inner: MessageExtBrokerInner) -> None:
        """The record of ``inner`` is in the log: its queue's next offset moves on."""
        tx = inner.sys_flag & 0xC
        if tx != _PREPARED and tx != _ROLLBACK:
            self.topic_queue_table[(inner.topic, inner.queue_id)] = inner.queue_offset + 1

    def _encode_into(self, mf: MappedFile, inner: MessageExtBrokerInner, topic_b: bytes,
                     props_b: bytes, store_host: bytes, now_ms: int) -> int:
        """Write the record of ``inner`` at ``mf``'s write position (``_segment_for`` made
        room and reserved its blocks); returns its size. ``encode_record`` and one copy,
        or with ``_put`` built the same fields written in place by ``write_record``."""
        pos = mf.wrote_position
        phys = mf.file_from_offset + pos
        # (The bound covers both hosts as IPv6; _segment_for reserved the blocks.)
        if (_write_record is None or pos + _MAX_FIXED + len(inner.body) + len(topic_b)
                + len(props_b) > mf.allocated):
            record = self.encode_record(inner, topic_b, props_b, store_host, phys, now_ms)
            mf.append(record)
            self.advance_queue_offset(inner)
            return len(record)
        # encode_record's fields (_store_fields inline), the record itself written by C.
        tx = inner.sys_flag & 0xC
        counted = tx != _PREPARED and tx != _ROLLBACK
        topic = inner.topic
        queue_offset = self.topic_queue_table.get((topic, inner.queue_id), 0) if counted else 0
        sys_flag = inner.sys_flag & ~(_BORN_V6 | _STORE_V6)
        born_host = inner.born_host
        if len(born_host) == 20:
            sys_flag |= _BORN_V6
        if len(store_host) == 20:
            sys_flag |= _STORE_V6
        size, msg_id = _write_record(
            mf.mm, pos, topic_b, inner.queue_id, inner.flag, queue_offset, phys, sys_flag,
            inner.born_timestamp, born_host, now_ms, store_host, inner.reconsume_times,
            inner.prepared_transaction_offset, inner.body, props_b)
        mf.wrote_position = pos + size
        mf.last_modified_ms = now_ms if self.clock_ms is _wall_clock_ms else _wall_clock_ms()
        inner.sys_flag = sys_flag
        inner.store_timestamp = now_ms
        inner.queue_offset = queue_offset
        inner.commit_log_offset = phys
        inner.msg_id = msg_id
        inner.tags_code = compute_tags_code(topic, inner.properties, now_ms, self.delay_levels)
        if counted:
            self.topic_queue_table[(topic, inner.queue_id)] = queue_offset + 1
        return size

    def append(self, inner: MessageExtBrokerInner) -> AppendMessageResult:
        """Append one record (after ``apply_delay``). Raises OSError when a segment cannot be created."""
        topic_b, props_b, store_host, size, refused = self._prepare(inner)
        if refused is not None:
            return AppendMessageResult(refused)
        files = self.mfq.files
        mf = files[-1] if files else None
        # _segment_for's usual case inline: the last segment has room for the record and a
        # filler after it, its blocks already reserved.
        need = END_FILE_MIN_BLANK_LENGTH + size
        if mf is None or mf.wrote_position + need > mf.allocated \
                or mf.wrote_position + need > mf.file_size:
            mf = self._segment_for(size)
        now_ms = self.clock_ms()
        wrote = self._encode_into(mf, inner, topic_b, props_b, store_host, now_ms)
        return AppendMessageResult(
            AppendMessageStatus.PUT_OK, wrote_offset=inner.commit_log_offset, wrote_bytes=wrote,
            msg_id=inner.msg_id, store_timestamp=now_ms, logics_offset=inner.queue_offset,
            msg_num=1, msg_ids=[inner.msg_id],
        )

    def append_batch(self, batch: Sequence[MessageExtBrokerInner] | UniformBatch, *,
                     stamp: bool = True) -> AppendMessageResult:
        """Append records of one queue back to back in one segment, with consecutive queue
        offsets. ``stamp=False``: the members' store fields may be left for the result's
        ``stamp_members`` to set (the store's deferred dispatch calls it)."""
        if _write_batch is not None and len(batch):
            done = self._append_uniform(batch, stamp)
            if done is not None:
                return done
        inners = batch_inners(batch)
        prepared = []
        total = 0
        for inner in inners:
            topic_b, props_b, store_host, size, refused = self._prepare(inner)
            if refused is not None:
                return AppendMessageResult(refused)
            prepared.append((inner, topic_b, props_b, store_host))
            total += size
        if not prepared:
            return AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR, msg_num=0)
        if total > self.config.max_message_size or total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        mf = self._segment_for(total)
        now_ms = self.clock_ms()
        wrote = 0
        ids = []
        for inner, topic_b, props_b, store_host in prepared:
            wrote += self._encode_into(mf, inner, topic_b, props_b, store_host, now_ms)
            ids.append(inner.msg_id)
        first = prepared[0][0]
        return AppendMessageResult(
            AppendMessageStatus.PUT_OK, wrote_offset=first.commit_log_offset, wrote_bytes=wrote,
            msg_id=",".join(ids), store_timestamp=now_ms, logics_offset=first.queue_offset,
            msg_num=len(ids), msg_ids=ids,
        )

    def _append_uniform(self, batch: Sequence[MessageExtBrokerInner] | UniformBatch,
                        stamp: bool = True) -> AppendMessageResult | None:
        """``append_batch`` by one ``write_batch`` call (``_put.c``) when the members share
        every field but flag, body and properties (a ``UniformBatch`` does by its maker's
        word; a list of members is checked) and have ``bytes`` bodies; None, nothing
        written, for any other batch. The records and
        refusals are ``_prepare``'s and ``_encode_into``'s for each in turn."""
        if isinstance(batch, UniformBatch):
            topic = batch.topic
            queue_id = batch.queue_id
            sys_flag_in = batch.sys_flag
            born_host = batch.born_host
            born_ts = batch.born_timestamp
            reconsume = batch.reconsume_times
            prep = 0
            host = batch.store_host
            given: list[tuple[int, bytes, dict[str, str], str]] = batch.members
        else:
            first = batch[0]
            topic = first.topic
            queue_id = first.queue_id
            sys_flag_in = first.sys_flag
            born_host = first.born_host
            born_ts = first.born_timestamp
            reconsume = first.reconsume_times
            prep = first.prepared_transaction_offset
            host = first.store_host
            given = []
            for inner in batch:
                props_s = inner.properties_string
                if props_s is None:
                    props_s = encode_properties(inner.properties)
                if (inner.topic != topic or inner.queue_id != queue_id
                        or inner.sys_flag != sys_flag_in or inner.born_host != born_host
                        or inner.store_host != host or inner.born_timestamp != born_ts
                        or inner.reconsume_times != reconsume
                        or inner.prepared_transaction_offset != prep):
                    return None
                given.append((inner.flag, inner.body, inner.properties, props_s))
        store_host = host or self.store_host
        topic_b = topic.encode("utf-8")
        base = record_size(len(topic_b), 0, 0, len(born_host) == 20, len(store_host) == 20)
        limit = min(self.config.max_message_size, self.file_size - END_FILE_MIN_BLANK_LENGTH)
        members = []
        total = 0
        for flag, body, _props, props_s in given:
            if type(body) is not bytes:
                return None
            props_b = props_s.encode("utf-8")
            size = base + len(body) + len(props_b)
            if len(props_b) > MAX_PROPERTIES_LENGTH:
                return AppendMessageResult(AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED)
            if size > limit or len(topic_b) > MAX_TOPIC_LENGTH:
                return AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
            total += size
            members.append((flag, body, props_b))
        if total > self.config.max_message_size or total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        mf = self._segment_for(total)
        now_ms = self.clock_ms()
        counted, queue_offset, sys_flag = self._store_fields(
            topic, queue_id, sys_flag_in, born_host, store_host)
        pos = mf.wrote_position
        phys = start = mf.file_from_offset + pos
        ids, sizes = _write_batch(
            mf.mm, pos, topic_b, queue_id, queue_offset, counted, phys, sys_flag, born_ts,
            born_host, now_ms, store_host, reconsume, prep, members)
        mf.wrote_position = pos + total
        mf.last_modified_ms = now_ms if self.clock_ms is _wall_clock_ms else _wall_clock_ms()
        if counted:
            self.topic_queue_table[(topic, queue_id)] = queue_offset + len(ids)
        result = AppendMessageResult(
            AppendMessageStatus.PUT_OK, wrote_offset=start, wrote_bytes=total,
            msg_id=",".join(ids), store_timestamp=now_ms, logics_offset=queue_offset,
            msg_num=len(ids), msg_ids=ids,
        )
        stamping = functools.partial(self._stamp_batch, batch, sizes, ids, queue_offset,
                                     counted, phys, now_ms, sys_flag)
        if stamp:
            stamping()
        else:
            result.stamp_members = stamping
        return result

    def _stamp_batch(self, batch: Sequence[MessageExtBrokerInner] | UniformBatch,
                     sizes: list[int], ids: list[str], queue_offset: int, counted: bool,
                     phys: int, now_ms: int, sys_flag: int) -> None:
        """Set the store fields of a batch ``_append_uniform`` wrote."""
        inners = batch_inners(batch)
        topic = inners[0].topic
        offset = queue_offset
        scheduled = topic == _SCHEDULE_TOPIC
        delay_levels = self.delay_levels
        for inner, size, msg_id in zip(inners, sizes, ids, strict=True):
            inner.sys_flag = sys_flag
            inner.store_timestamp = now_ms
            inner.queue_offset = offset
            inner.commit_log_offset = phys
            inner.msg_id = msg_id
            # compute_tags_code's usual case (tags hash) without its call, but for the delay topic
            inner.tags_code = (compute_tags_code(topic, inner.properties, now_ms, delay_levels)
                               if scheduled else tags_to_tags_code(inner.properties.get(_TAGS)))
            phys += size
            if counted:
                offset += 1

    # -- reading --

    def get_message(self, offset: int, size: int) -> memoryview | None:
        """``size`` bytes at ``offset`` as a slice of the mapping; None if gone or unwritten."""
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.view(offset - mf.file_from_offset, size)

    def get_record(self, offset: int) -> memoryview | None:
        """The whole record at ``offset`` (size read from its TOTALSIZE), or None."""
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + 8 > mf.wrote_position:
            return None
        total, magic = _BLANK.unpack_from(mf.mm, pos)
        if magic != MESSAGE_MAGIC_CODE or total <= 0:
            return None
        return mf.view(pos, total)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``offset``, or -1 (``pickupStoreTimestamp``)."""
        if offset < self.min_offset:
            return -1
        view = self.get_message(offset, size)
        if view is None or size < 64:
            return -1
        try:
            (sys_flag,) = _int_at(view, 36)
            return _long_at(view, store_timestamp_pos(sys_flag))[0]
        finally:
            view.release()

    # -- recovery --

    def load(self) -> None:
        self.mfq.load()

    def _check_record(self, mf: MappedFile, pos: int, check_crc: bool,
                      seen: dict[tuple[bytes, int], int] | None = None) -> int:
        """Size of the whole record at ``pos``, or a verdict: ``_END_OF_FILE`` at the
        end-of-file filler (or no room for one), ``_EMPTY`` at unwritten (zero) bytes,
        ``_CRC_FAILED`` for a well-formed record whose body CRC disagrees, ``_INVALID``.
        ``seen`` gets, per (topic bytes, queueId), the queue offset of the newest whole
        record that has a consume-queue unit."""
        mm = mf.mm
        limit = self.file_size
        if pos + END_FILE_MIN_BLANK_LENGTH > limit:
            return _END_OF_FILE
        total, magic = _BLANK.unpack_from(mm, pos)
        if magic == BLANK_MAGIC_CODE:
            return _END_OF_FILE if total == limit - pos else _INVALID
        if magic == 0 and total == 0:
            return _EMPTY
        if magic != MESSAGE_MAGIC_CODE or total < 91 or pos + total > limit:
            return _INVALID
        _, _, body_crc, queue_id, _, queue_offset, phys, sys_flag = _HEAD.unpack_from(mm, pos)
        if phys != mf.file_from_offset + pos:
            return _INVALID
        hosts = (20 if sys_flag & _BORN_V6 else 8) + (20 if sys_flag & _STORE_V6 else 8)
        p = pos + 68 + hosts
        if p + 4 > pos + total:
            return _INVALID
        (body_len,) = _int_at(mm, p)
        if body_len < 0 or p + 4 + body_len + 1 > pos + total:
            return _INVALID
        body_start = p + 4
        p = body_start + body_len
        topic_len = mm[p]
        p += 1 + topic_len
        if topic_len == 0 or topic_len > 127 or p + 2 > pos + total \
                or mm[p - topic_len:p].translate(None, _TOPIC_BYTES):
            return _INVALID  # every stored topic passed the send's character check
        props_len = struct.unpack_from(">h", mm, p)[0]
        if props_len < 0 or p + 2 + props_len != pos + total:
            return _INVALID
        if check_crc and zlib.crc32(mm[body_start:body_start + body_len]) & 0x7FFFFFFF != body_crc:
            return _CRC_FAILED
        if seen is not None:
            tx = sys_flag & 0xC
            if tx != _PREPARED and tx != _ROLLBACK:
                seen[mm[p - topic_len:p], queue_id] = queue_offset
        return total

    def recover(self, *, check_from: int, zero_tail: bool,
                seen: dict[tuple[bytes, int], int] | None = None) -> CommitLogRecovery:
        """Find the end of the last whole record, cut everything after it.

        Every record from ``check_from`` (a record boundary, normally a segment start) on
        is checked, its body CRC too when ``check_crc_on_recover`` (upstream's
        ``checkCRCOnRecover``): the first that is not whole ends the log, whatever a
        checkpoint claims, and the segments after it are deleted. The cut tail is zeroed
        after a crash (``zero_tail``) or when damage was found, so stale bytes can never
        line up as a record later. An offset below the first segment checks them all.
        ``seen`` collects what ``_check_record`` says of the records kept.
        """
        files = self.mfq.files
        if not files:
            self.mfq.reset_positions(0)
            return CommitLogRecovery(0, "", 0, 0)
        found = self.mfq.find_mapped_file_by_offset(check_from)
        if found is None:
            idx, pos = 0, 0
        else:
            idx, pos = files.index(found), check_from - found.file_from_offset
        check_crc = self.config.check_crc_on_recover
        while True:
            mf = files[idx]
            while True:
                verdict = self._check_record(mf, pos, check_crc, seen)
                if verdict <= 0:
                    break
                pos += verdict
            if verdict == _END_OF_FILE and idx + 1 < len(files):
                idx += 1
                pos = 0
                continue
            process = mf.file_from_offset + pos
            break
        damage = ""
        if verdict == _CRC_FAILED:
            damage = "body CRC check failed"
        elif verdict == _INVALID:
            damage = "bad record"
        elif verdict == _EMPTY and self._nonzero_after(mf, pos):
            damage = "zeroed record"
        dropped_bytes = self._written_bytes_from(idx, pos) if damage or idx + 1 < len(files) else 0
        dropped_segments = len(files) - idx - 1
        if damage:
            log.info("store.commit_log_damaged", offset=process, reason=damage,
                     dropped_bytes=dropped_bytes, dropped_segments=dropped_segments)
        elif zero_tail:
            log.warn("store.commit_log_recovered_after_crash", recovered_to=process)
        self.mfq.truncate_dirty_files(process, zero_tail=zero_tail or bool(damage) or dropped_bytes > 0)
        self.mfq.reset_positions(process)
        return CommitLogRecovery(process, damage, dropped_bytes, dropped_segments)

    def _nonzero_after(self, mf: MappedFile, pos: int) -> bool:
        """Whether the next 64 KiB after ``pos`` hold a non-zero byte (zeros inside data)."""
        end = min(pos + 65536, self.file_size)
        return mf.mm[pos:end].count(0) != end - pos

    def _written_bytes_from(self, idx: int, pos: int) -> int:
        """Bytes from ``files[idx]`` at ``pos`` on that recovery cuts: in each segment, up
        to its last non-zero byte (an unwritten tail is not data)."""
        files = self.mfq.files
        total = 0
        for i in range(idx, len(files)):
            mm = files[i].mm
            start = pos if i == idx else 0
            end = self.file_size
            while end > start:  # back over the zero tail, a chunk at a time
                lo = max(start, end - len(_ZERO_CHUNK))
                chunk = mm[lo:end]
                if chunk != _ZERO_CHUNK[:end - lo]:
                    end = lo + len(chunk.rstrip(b"\0"))
                    break
                end = lo
            total += end - start
        return total

    def iter_dispatch_requests(self, start: int, end: int) -> Iterator[DispatchRequest]:
        """Dispatch requests of the whole records in ``[start, end)`` (recovery re-dispatch).

        ``recover`` checked the records from its ``check_from`` on; older ones are read
        as they are, and one that does not decode (damage in a segment recovery did not
        check) is logged and the rest of its segment skipped, instead of stopping the start.
        """
        offset = max(start, self.min_offset)
        while offset < end:
            mf = self.mfq.find_mapped_file_by_offset(offset)
            if mf is None:
                return
            pos = offset - mf.file_from_offset
            next_segment = mf.file_from_offset + self.file_size
            if pos + END_FILE_MIN_BLANK_LENGTH > mf.wrote_position:
                offset = next_segment
                continue
            total, magic = _BLANK.unpack_from(mf.mm, pos)
            if magic == BLANK_MAGIC_CODE:
                offset = next_segment
                continue
            try:
                if magic != MESSAGE_MAGIC_CODE or total <= 0 or pos + total > mf.wrote_position:
                    raise MessageDecodeError(f"bad record at {offset}: TOTALSIZE {total}")
                req = dispatch_request_from_record(mf.mm, pos, self.delay_levels)
                if not req.topic or req.topic.encode("utf-8", "replace").translate(None, _TOPIC_BYTES):
                    raise MessageDecodeError(f"bad record at {offset}: topic {req.topic!r}")
            except MessageDecodeError as exc:
                log.warn("store.redispatch_skipped", offset=offset,
                         skipped_to=min(next_segment, end), error=str(exc))
                offset = next_segment
                continue
            yield req
            offset += total

    def close(self) -> None:
        self.mfq.close()

    def physical_offset_at(self, view: memoryview) -> int:
        return _long_at(view, PHYSICAL_OFFSET_POS)[0]
