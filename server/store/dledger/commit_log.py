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
from aiorocketmq.protocol.dledger.entry import BODY_OFFSET
from aiorocketmq.protocol.message import pack_stored_record

from ..commit_log import CommitLog
from ..config import MessageStoreConfig
from ..inner import AppendMessageResult, AppendMessageStatus, MessageExtBrokerInner, UniformBatch
from .mmap_store import DLedgerMmapFileStore

__all__ = ["DLedgerCommitLog", "MARKER_TOPIC"]

MARKER_TOPIC = "rmq_sys_dledger_leader"
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

    def append_batch(self, batch: Sequence[MessageExtBrokerInner] | UniformBatch, *,
                     stamp: bool = True) -> AppendMessageResult:
        raise NotImplementedError("DLedger mode appends through the leader (DLedgerMessageStore)")

    def close(self) -> None:
        self.dstore.close()
