"""The broker-side message the store appends, and the results of an append.

Contract: the broker fills a ``MessageExtBrokerInner`` (topic, queue, body, properties,
sysflag, born data, reconsume times, prepared-transaction offset) and hands it to
``MessageStore.put_message``; the store sets ``store_timestamp``, ``queue_offset``,
``commit_log_offset``, ``tags_code`` and ``msg_id`` on it. ``properties`` is the map
the store reads (TAGS, KEYS, UNIQ_KEY, DELAY, WAIT); ``properties_string``, when set,
is what gets stored verbatim (upstream keeps both, and the two may differ on purpose:
docs/PROTOCOL.md 6.5's delivered delayed messages keep ``DELAY`` in the stored string).

Upstream: ``store/MessageExtBrokerInner.java``, ``PutMessageStatus.java``,
``PutMessageResult.java``, ``AppendMessageStatus.java``, ``AppendMessageResult.java``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "MessageExtBrokerInner",
    "UniformBatch",
    "batch_inners",
    "PutMessageStatus",
    "AppendMessageStatus",
    "AppendMessageResult",
    "PutMessageResult",
]

_LOCALHOST_BYTES = bytes((127, 0, 0, 1, 0, 0, 0, 0))


@dataclass(slots=True)
class MessageExtBrokerInner:
    """A message on its way into the commit log (one record)."""

    topic: str
    queue_id: int
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    properties_string: str | None = None
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = _LOCALHOST_BYTES  # socket_address_to_bytes output: 8 or 20 bytes
    store_host: bytes | None = None  # None: the store's own address
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    # Set by the store.
    tags_code: int = 0
    store_timestamp: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    msg_id: str = ""


@dataclass(slots=True)
class UniformBatch:
    """A batch whose members share every field but flag, body and properties: a
    SEND_BATCH_MESSAGE's, as its header and body give them (``members``: flag, body,
    properties, stored properties string), before they are ``MessageExtBrokerInner``s.

    Its maker vouches for the sharing, so the store does not check it member by member,
    and writes the records from ``members`` directly; the ``MessageExtBrokerInner``s are
    built by ``inners()`` (once) when something needs them: the store's dispatch, after
    the send is answered, or a put path without the C batch write (module docstring of
    message_store.py, ``defer_batch_dispatch``).
    """

    topic: str
    queue_id: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    store_host: bytes | None
    reconsume_times: int
    members: list[tuple[int, bytes, dict[str, str], str]]
    _inners: list[MessageExtBrokerInner] | None = None

    def __len__(self) -> int:
        return len(self.members)

    def inners(self) -> list[MessageExtBrokerInner]:
        """The members as ``MessageExtBrokerInner``s (the same list on every call)."""
        inners = self._inners
        if inners is None:
            topic, queue_id, sys_flag = self.topic, self.queue_id, self.sys_flag
            born_ts, born_host, store_host = self.born_timestamp, self.born_host, self.store_host
            reconsume = self.reconsume_times
            # Positional: keywords cost about twice as much per member.
            inners = self._inners = [
                MessageExtBrokerInner(topic, queue_id, body, flag, props, stored, sys_flag,
                                      born_ts, born_host, store_host, reconsume)
                for flag, body, props, stored in self.members]
        return inners


def batch_inners(batch: Sequence[MessageExtBrokerInner] | UniformBatch
                 ) -> Sequence[MessageExtBrokerInner]:
    """A batch's members as ``MessageExtBrokerInner``s, whichever form it came in."""
    return batch.inners() if isinstance(batch, UniformBatch) else batch


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    # Timer messages (server/store/timer, 5.x): refused by the timer put hook.
    WHEEL_TIMER_FLOW_CONTROL = "WHEEL_TIMER_FLOW_CONTROL"
    WHEEL_TIMER_MSG_ILLEGAL = "WHEEL_TIMER_MSG_ILLEGAL"
    WHEEL_TIMER_NOT_ENABLE = "WHEEL_TIMER_NOT_ENABLE"


class AppendMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass(slots=True)
class AppendMessageResult:
    """Where a record (or a batch) landed.

    ``msg_id`` is the offset message id of the (first) record; for a batch
    ``msg_ids`` lists one id per record and ``msg_id`` is them comma-joined, as the
    SEND_BATCH_MESSAGE response's ``msgId`` (docs/PROTOCOL.md 5.5). ``logics_offset`` is
    the (first) queue offset.
    """

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_id: str = ""
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1
    msg_ids: list[str] = field(default_factory=list)
    #: ``CommitLog.append_batch(..., stamp=False)``: stamps the members' store fields
    #: (offsets, msgId, store timestamp, sys flag, tags code) when called; None when the
    #: append stamped them itself.
    stamp_members: Callable[[], None] | None = None


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append_result: AppendMessageResult | None = None

    @property
    def is_ok(self) -> bool:
        """The record was appended (``PutMessageResult.isOk``): also true for FLUSH_DISK_TIMEOUT."""
        return self.append_result is not None and self.append_result.status is AppendMessageStatus.PUT_OK
