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
  (REMOTING.md 6.5); transactional PREPARED/ROLLBACK records take queue offset 0 and do
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

import struct
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag, SystemTopic
from aiorocketmq.protocol.message import (
    BLANK_MAGIC_CODE,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    PHYSICAL_OFFSET_POS,
    create_offset_msg_id,
    encode_properties,
    pack_stored_record,
    record_size,
    store_timestamp_pos,
)

from .config import MessageStoreConfig
from .dispatcher import DispatchRequest, compute_tags_code, dispatch_request_from_record
from .inner import AppendMessageResult, AppendMessageStatus, MessageExtBrokerInner
from .mapped_file import MappedFile, MappedFileQueue

__all__ = ["CommitLog", "END_FILE_MIN_BLANK_LENGTH"]

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
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_SCHEDULE_TOPIC = SystemTopic.SCHEDULE_TOPIC

def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


# Recovery verdicts of _check_record besides a positive record size.
_END_OF_FILE = 0
_INVALID = -1


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
        self.mfq = MappedFileQueue(config.commit_log_dir, self.file_size)
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
        """Park a delayed NOT/COMMIT message in ``SCHEDULE_TOPIC_XXXX`` (REMOTING.md 6.5)."""
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
        if size + END_FILE_MIN_BLANK_LENGTH > mf.free_space:
            # Create the next segment first: if the disk is full, nothing has changed.
            nxt = self.mfq.create_file(mf.file_from_offset + self.file_size)
            free = mf.free_space
            if free >= END_FILE_MIN_BLANK_LENGTH:
                mf.write_at(mf.wrote_position, _BLANK.pack(free, BLANK_MAGIC_CODE))
            mf.wrote_position = mf.file_size
            mf = nxt
        return mf

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        return self.topic_queue_table.get((topic, queue_id), 0)

    def _encode_into(self, mf: MappedFile, inner: MessageExtBrokerInner, topic_b: bytes,
                     props_b: bytes, store_host: bytes, now_ms: int) -> int:
        phys = mf.file_from_offset + mf.wrote_position
        tx = inner.sys_flag & 0xC
        key = (inner.topic, inner.queue_id)
        counted = tx != _PREPARED and tx != _ROLLBACK
        queue_offset = self.topic_queue_table.get(key, 0) if counted else 0
        sys_flag = inner.sys_flag & ~(_BORN_V6 | _STORE_V6)
        if len(inner.born_host) == 20:
            sys_flag |= _BORN_V6
        if len(store_host) == 20:
            sys_flag |= _STORE_V6
        # _prepare checked the lengths and the V6 bits are set above: the unchecked packer.
        record = pack_stored_record(
            topic_b, inner.queue_id, inner.flag, queue_offset, phys, sys_flag,
            inner.born_timestamp, inner.born_host, now_ms, store_host, inner.reconsume_times,
            inner.prepared_transaction_offset, inner.body, props_b,
        )
        mf.append(record)
        if counted:
            self.topic_queue_table[key] = queue_offset + 1
        inner.sys_flag = sys_flag
        inner.store_timestamp = now_ms
        inner.queue_offset = queue_offset
        inner.commit_log_offset = phys
        inner.msg_id = create_offset_msg_id(store_host, phys)
        inner.tags_code = compute_tags_code(inner.topic, inner.properties, now_ms, self.delay_levels)
        return len(record)

    def append(self, inner: MessageExtBrokerInner) -> AppendMessageResult:
        """Append one record (after ``apply_delay``). Raises OSError when a segment cannot be created."""
        topic_b, props_b, store_host, size, refused = self._prepare(inner)
        if refused is not None:
            return AppendMessageResult(refused)
        mf = self._segment_for(size)
        now_ms = self.clock_ms()
        wrote = self._encode_into(mf, inner, topic_b, props_b, store_host, now_ms)
        return AppendMessageResult(
            AppendMessageStatus.PUT_OK, wrote_offset=inner.commit_log_offset, wrote_bytes=wrote,
            msg_id=inner.msg_id, store_timestamp=now_ms, logics_offset=inner.queue_offset,
            msg_num=1, msg_ids=[inner.msg_id],
        )

    def append_batch(self, inners: Sequence[MessageExtBrokerInner]) -> AppendMessageResult:
        """Append records of one queue back to back in one segment, with consecutive queue offsets."""
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

    def _check_record(self, mf: MappedFile, pos: int, check_crc: bool) -> int:
        """Size of the whole record at ``pos``, 0 at the end-of-file filler, -1 if not whole."""
        mm = mf.mm
        limit = self.file_size
        if pos + END_FILE_MIN_BLANK_LENGTH > limit:
            return _END_OF_FILE
        total, magic = _BLANK.unpack_from(mm, pos)
        if magic == BLANK_MAGIC_CODE:
            return _END_OF_FILE if total == limit - pos else _INVALID
        if magic != MESSAGE_MAGIC_CODE or total < 91 or pos + total > limit:
            return _INVALID
        _, _, body_crc, _, _, _, phys, sys_flag = _HEAD.unpack_from(mm, pos)
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
        if topic_len > 127 or p + 2 > pos + total:
            return _INVALID
        props_len = struct.unpack_from(">h", mm, p)[0]
        if props_len < 0 or p + 2 + props_len != pos + total:
            return _INVALID
        if check_crc and zlib.crc32(mm[body_start:body_start + body_len]) & 0x7FFFFFFF != body_crc:
            return _INVALID
        return total

    def recover(self, *, start_offset: int | None, fallback_last_files: int | None,
                zero_tail: bool) -> int:
        """Find the end of the last whole record, cut everything after it, return that offset.

        Checking starts at ``start_offset`` (a record boundary known durable, e.g. the
        checkpoint's flushed offset) when it lies within the log; otherwise at the first
        of the last ``fallback_last_files`` segments (all segments when None). After a
        crash (``zero_tail``) the cut tail is also zeroed.
        """
        files = self.mfq.files
        if not files:
            self.mfq.reset_positions(0)
            return 0
        idx, pos = 0, 0
        if fallback_last_files is not None:
            idx = max(len(files) - fallback_last_files, 0)
        if start_offset is not None and start_offset >= files[0].file_from_offset:
            found = self.mfq.find_mapped_file_by_offset(start_offset)
            if found is not None:
                idx, pos = files.index(found), start_offset - found.file_from_offset
            elif start_offset == files[-1].file_from_offset + self.file_size:
                idx, pos = len(files) - 1, self.file_size
        check_crc = self.config.check_crc_on_recover
        while True:
            mf = files[idx]
            while True:
                verdict = self._check_record(mf, pos, check_crc)
                if verdict <= 0:
                    break
                pos += verdict
            if verdict == _END_OF_FILE and idx + 1 < len(files):
                idx += 1
                pos = 0
                continue
            process = mf.file_from_offset + pos
            break
        if zero_tail:
            log.warn("store.commit_log_recovered_after_crash", recovered_to=process)
        self.mfq.truncate_dirty_files(process, zero_tail=zero_tail)
        self.mfq.reset_positions(process)
        return process

    def iter_dispatch_requests(self, start: int, end: int) -> Iterator[DispatchRequest]:
        """Dispatch requests of the whole records in ``[start, end)`` (recovery re-dispatch)."""
        offset = max(start, self.min_offset)
        while offset < end:
            mf = self.mfq.find_mapped_file_by_offset(offset)
            if mf is None:
                return
            pos = offset - mf.file_from_offset
            if pos + END_FILE_MIN_BLANK_LENGTH > mf.wrote_position:
                offset = mf.file_from_offset + self.file_size
                continue
            total, magic = _BLANK.unpack_from(mf.mm, pos)
            if magic == BLANK_MAGIC_CODE:
                offset = mf.file_from_offset + self.file_size
                continue
            yield dispatch_request_from_record(mf.mm, pos, self.delay_levels)
            offset += total

    def close(self) -> None:
        self.mfq.close()

    def physical_offset_at(self, view: memoryview) -> int:
        return _long_at(view, PHYSICAL_OFFSET_POS)[0]
