"""``DLedgerCommitLog``: the broker's commit log when the DLedger log holds the records.

Every message is one DLedger entry whose body is its stored commit-log record, so a
record's commit-log offset (``PHYSICALOFFSET``, offset msg ids, consume-queue units) is its
entry's ``pos + 48``: the first message of a fresh group is at 0x30, and every member
has every record at the same offset. Reads (``get_message``, ``get_record``,
``pickup_store_timestamp``, ``roll_next_file``) are ``CommitLog``'s own, on the DLedger
``data/`` segments; ``max_offset`` is the end of the committed entries (upstream
``getMaxOffset`` is ``committedPos``), so nothing uncommitted is ever served.

Writing is the store's (dledger/store.py): ``encode_record`` builds a record for a known
entry position without touching the queue-offset table, which the store advances only
once the entry is in the log (``advance_queue_offset``). ``noop_record`` is the marker a
new leader appends when its log has uncommitted entries (core.py): a ROLLBACK-type record
of topic ``rmq_sys_dledger_leader``, which no consume queue and no index takes (stock
DLedger members dispatch it the same way).

Upstream: ``store/dledger/DLedgerCommitLog.java`` (the append hook writing ``pos +
BODY_OFFSET`` into ``PHYSICALOFFSET``, ``getMaxOffset``, ``checkMessageAndReturnSize``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from aiorocketmq.protocol.codes import MessageSysFlag
from aiorocketmq.protocol.message import create_offset_msg_id, pack_stored_record

from ..commit_log import CommitLog
from ..config import MessageStoreConfig
from ..dispatcher import compute_tags_code
from ..inner import AppendMessageResult, AppendMessageStatus, MessageExtBrokerInner
from .entry import BODY_OFFSET
from .mmap_store import DLedgerMmapFileStore

__all__ = ["DLedgerCommitLog", "MARKER_TOPIC"]

MARKER_TOPIC = "rmq_sys_dledger_leader"
_PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_BORN_V6 = MessageSysFlag.BORNHOST_V6_FLAG
_STORE_V6 = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG


class DLedgerCommitLog(CommitLog):
    """``CommitLog``'s reads over a ``DLedgerMmapFileStore`` (module docstring)."""

    __slots__ = ("dstore",)

    def __init__(self, config: MessageStoreConfig, store_host: bytes, delay_levels: Mapping[int, int],
                 dstore: DLedgerMmapFileStore, clock_ms: Callable[[], int] | None = None) -> None:
        super().__init__(config, store_host, delay_levels, clock_ms)
        self.dstore = dstore
        self.mfq = dstore.data  # CommitLog's reads and the flusher work on the DLedger data

    @property
    def min_offset(self) -> int:
        return self.dstore.data.min_offset

    @property
    def max_offset(self) -> int:
        return self.dstore.committed_pos

    @property
    def written_offset(self) -> int:
        """The end of the data, committed or not."""
        return self.dstore.end_pos

    # -- writing ------------------------------------------------------------------------

    def prepare(self, inner: MessageExtBrokerInner
                ) -> tuple[bytes, bytes, bytes, int, AppendMessageStatus | None]:
        """Encoded topic and properties, store host, record size, or a refusal status
        (``CommitLog``'s checks: properties, topic and message sizes)."""
        return self._prepare(inner)

    def encode_record(self, inner: MessageExtBrokerInner, topic_b: bytes, props_b: bytes,
                      store_host: bytes, phys: int, now_ms: int) -> bytes:
        """The stored record of ``inner`` at commit-log offset ``phys``; fills in ``inner``'s
        store fields (queue offset from the table, which is not advanced here)."""
        tx = inner.sys_flag & 0xC
        counted = tx != _PREPARED and tx != _ROLLBACK
        queue_offset = self.topic_queue_table.get((inner.topic, inner.queue_id), 0) if counted else 0
        sys_flag = inner.sys_flag & ~(_BORN_V6 | _STORE_V6)
        if len(inner.born_host) == 20:
            sys_flag |= _BORN_V6
        if len(store_host) == 20:
            sys_flag |= _STORE_V6
        record = pack_stored_record(
            topic_b, inner.queue_id, inner.flag, queue_offset, phys, sys_flag,
            inner.born_timestamp, inner.born_host, now_ms, store_host, inner.reconsume_times,
            inner.prepared_transaction_offset, inner.body, props_b)
        inner.sys_flag = sys_flag
        inner.store_timestamp = now_ms
        inner.queue_offset = queue_offset
        inner.commit_log_offset = phys
        inner.msg_id = create_offset_msg_id(store_host, phys)
        inner.tags_code = compute_tags_code(inner.topic, inner.properties, now_ms, self.delay_levels)
        return bytes(record)

    def advance_queue_offset(self, inner: MessageExtBrokerInner) -> None:
        """The entry of ``inner`` is in the log: its queue's next offset moves on."""
        tx = inner.sys_flag & 0xC
        if tx != _PREPARED and tx != _ROLLBACK:
            self.topic_queue_table[(inner.topic, inner.queue_id)] = inner.queue_offset + 1

    def noop_record(self, term: int, self_id: str) -> tuple[int, Callable[[int], bytes]]:
        """(size, make_body) of the new-leader marker (module docstring)."""
        topic_b = MARKER_TOPIC.encode()
        body = f"leader={self_id} term={term}".encode()
        store_host = self.store_host
        sys_flag = _ROLLBACK | (_STORE_V6 if len(store_host) == 20 else 0) \
            | (_BORN_V6 if len(store_host) == 20 else 0)
        now = self.clock_ms()

        def make(pos: int) -> bytes:
            return bytes(pack_stored_record(topic_b, 0, 0, 0, pos + BODY_OFFSET, sys_flag, now,
                                            store_host, now, store_host, 0, 0, body, b""))

        return len(make(0)), make

    def append(self, inner: MessageExtBrokerInner) -> AppendMessageResult:
        raise NotImplementedError("DLedger mode appends through the leader (DLedgerMessageStore)")

    def append_batch(self, inners: Sequence[MessageExtBrokerInner]) -> AppendMessageResult:
        raise NotImplementedError("DLedger mode appends through the leader (DLedgerMessageStore)")

    def close(self) -> None:
        self.dstore.close()
