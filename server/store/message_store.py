"""``MessageStore``: the facade the broker uses (upstream ``DefaultMessageStore``).

Lifecycle::

    store = MessageStore(config, store_host="127.0.0.1:10911", broker_cluster="DefaultCluster")
    await store.start()        # load, recover, start the flush and clean routines
    ...
    await store.shutdown()     # flush, checkpoint, remove the abort file, unmap

Threading model: every public method runs on the event loop that called ``start``.
Appends, dispatch (consume queue + index) and reads are plain in-memory work on
mapped files; fsync/msync, checkpoint writes, file deletion and recovery run on the
store's own worker threads. There is no put lock: an append and its dispatch run
without an ``await`` in between, so they are atomic with respect to other coroutines.

Writing (``put_message`` / ``put_messages``):

* Statuses are upstream's ``PutMessageStatus``. SERVICE_NOT_AVAILABLE when the store is
  not running or the disk is over ``disk_space_warning_level_ratio`` (90 %, checked by
  the cleaner); MESSAGE_ILLEGAL for a topic over 127 bytes or a record over
  ``max_message_size``; PROPERTIES_SIZE_EXCEEDED over 32767 bytes;
  CREATE_MAPEDFILE_FAILED when a segment (commit log, consume queue or index) cannot be
  created (e.g. ENOSPC): nothing is written in that case.
* The store parks delayed messages in ``SCHEDULE_TOPIC_XXXX`` as upstream's
  ``CommitLog.asyncPutMessage`` does (docs/PROTOCOL.md 6.5).
* ``put_message_hooks`` (upstream ``putMessageHookList``): called in order with each single
  put's message after the status checks, before the delay level and the append; a hook
  may rewrite the message (the timer store parks timer messages, ``server/store/timer``)
  or refuse it with a ``PutMessageStatus``, which the put returns. Batches skip them.
* ASYNC_FLUSH: the put returns PUT_OK without awaiting any I/O. SYNC_FLUSH: unless the
  message's ``WAIT`` property is ``"false"``, the put awaits the group-commit fsync
  covering it; after ``sync_flush_timeout_ms`` it returns FLUSH_DISK_TIMEOUT (the
  record is written and stays; ``result.is_ok`` is still true, as upstream).
* Cancelling a put while it waits for the flush does not undo the append.
* ``put_message_nowait`` / ``put_messages_nowait`` (the broker's send hot path) do the
  same work but return the ``PutMessageResult`` itself when there is nothing to wait
  for (ASYNC_FLUSH), and an awaitable of it otherwise (SYNC_FLUSH group commit).
* After each record that has a consume-queue unit, the arriving listener is called
  (``set_message_arriving_listener``) before any flush wait.
* ``defer_batch_dispatch`` (the broker sets it): a batch's consume-queue units, index
  entries and arriving calls are made on the next event-loop iteration instead of before
  ``put_messages_nowait`` returns, as upstream's ``ReputMessageService`` dispatches after
  the put has answered; the sender gets its answer while they are written. Appended
  batches are dispatched in order, before any later put (``_reserve``), any topic
  deletion and the shutdown, and before the loop reads the next request from a socket
  (callbacks queued by a request run before the next poll), so a client that has its
  answer finds the messages in the queues.
* ``append_observer`` (optional, metrics): called with the seconds a successful put spent
  reserving, appending and dispatching (the flush wait excluded).
* Page cache busy (upstream ``isOSPageCacheBusy``): a put whose append and dispatch ran
  longer than ``os_page_cache_busy_timeout_ms`` held the event loop as long as upstream's
  put lock is held; ``os_page_cache_busy_until`` is then the ``time.perf_counter()`` at which
  it ended (``-inf`` before any). Requests read before that moment waited behind it, and
  the broker's send path answers them SYSTEM_BUSY ``[PCBUSY_CLEAN_QUEUE]``, as upstream's
  fast failure empties the send queue while the page cache is busy. No put ever starts
  while another's append runs, so OS_PAGECACHE_BUSY (``[PC_SYNCHRONIZED]``, a put checked
  by another send thread during a long one) does not arise here.
* Replication (``server/store/ha``, attached as ``store.ha``): every append wakes the HA
  writers; on a SYNC_MASTER a put that waits (``WAIT`` not ``"false"``) also waits for a
  slave to acknowledge its end offset: FLUSH_SLAVE_TIMEOUT after ``slave_timeout_ms``,
  SLAVE_NOT_AVAILABLE at once when no slave is connected or the best one is more than
  ``ha_slave_fallbehind_max`` behind (``CommitLog.submitReplicaRequest``; the replica
  status wins over the flush status, as upstream's ``thenCombine``). A SLAVE refuses puts
  (SERVICE_NOT_AVAILABLE); its log grows only through ``append_to_commit_log`` (the
  master's bytes, byte for byte), after which the new whole records are dispatched to the
  consume queues and the index exactly as on a master (upstream ``ReputMessageService``:
  ``store.reput_service``, server/store/reput.py).

Reading: ``get_message`` implements docs/PROTOCOL.md 6.2's store lookup table and limits;
its ``GetMessageResult.message_buffers`` are memoryviews into the mapped commit log,
valid until ``result.release()`` (copy them once when building the response:
``result.body()``). ``suggest_pulling_from_slave`` is set when the reader is more than
``access_message_in_memory_max_ratio`` % of physical memory behind the log's end. ``query_message`` returns the records of an index lookup the same
way. Reads of queues that do not exist do not create them (upstream creates them on
read; the only visible difference is NO_MATCHED_LOGIC_QUEUE instead of
NO_MESSAGE_IN_QUEUE for a never-written queue).

Retention (``store.cleaner``, server/store/cleaner.py; this facade keeps the entry points
``clean_once``, ``delete_expired_commit_log_files``, ``clean_consume_queues`` and
``execute_delete_files_manually``): the clean routine (every
``clean_resource_interval_ms``) deletes commit-log segments older than ``file_reserved_time`` hours at the ``delete_when`` hour(s), at
once when the disk is over ``disk_max_used_space_ratio``, or when asked
(``execute_delete_files_manually``); the last segment is never deleted. It then deletes
consume-queue and index files wholly below the new minimum and corrects queue minimums.
``clean_once()`` runs one pass (tests, admin).

Upstream: ``store/DefaultMessageStore.java``, ``MessageStore.java``,
``GetMessageStatus.java``, ``GetMessageResult.java``, ``QueryMessageResult.java``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import fcntl
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from aiorocketmq import refuse_extension
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag, SystemTopic
from aiorocketmq.protocol.message import (
    MAX_TOPIC_LENGTH,
    MessageDecodeError,
    MessageExt,
    decode_message,
    socket_address_to_bytes,
)

from .checkpoint import AbortFile, StoreCheckpoint
from .cleaner import StoreCleaner
from .cleaner import disk_used_ratio as _disk_used_ratio
from .commit_log import CommitLog
from .config import CQ_STORE_UNIT_SIZE, MessageStoreConfig
from .consume_queue import CQ_UNIT, ConsumeQueue
from .dispatcher import (
    Dispatcher,
    parse_delay_levels,
)
from .flush import FlushService
from .index import IndexService
from .inner import (
    AppendMessageResult,
    AppendMessageStatus,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
    UniformBatch,
    batch_inners,
)
from .recovery import RecoveryReport, StoreRecovery
from .reput import ReputMessageService

if TYPE_CHECKING:
    from .ha import HAService

__all__ = [
    "MessageStore",
    "GetMessageStatus",
    "GetMessageResult",
    "QueryMessageResult",
    "BatchArrivingListener",
    "MessageArrivingListener",
    "MessageFilter",
    "RecordFilter",
]

log = get_logger("aiorocketmq.store")
_perf = time.perf_counter

# cb(topic, queue_id, max_offset_after_put, tags_code, store_timestamp, properties)
MessageArrivingListener = Callable[[str, int, int, int, int, dict[str, str]], None]
#: ``cb(topic, queue_id, members)`` once for a dispatched batch's members (each stamped
#: with its queue offset, tags code and store timestamp), instead of the listener per member.
BatchArrivingListener = Callable[[str, int, Sequence[MessageExtBrokerInner]], None]
# filter(tags_code) -> matched; applied to consume-queue units (docs/PROTOCOL.md 6.1)
MessageFilter = Callable[[int], bool]
RecordFilter = Callable[[memoryview], bool]

_KEYS = MessageConst.PROPERTY_KEYS
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
_PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_unpack_unit = CQ_UNIT.unpack_from


class GetMessageStatus(enum.Enum):
    """docs/PROTOCOL.md 6.2's store statuses (``GetMessageStatus``)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class GetMessageResult:
    """The answer of ``get_message``: status, offsets and zero-copy record slices."""

    __slots__ = ("status", "next_begin_offset", "min_offset", "max_offset", "message_buffers",
                 "message_queue_offsets", "message_count", "buffer_total_size",
                 "suggest_pulling_from_slave")

    def __init__(self, status: GetMessageStatus, next_begin_offset: int, min_offset: int,
                 max_offset: int) -> None:
        self.status = status
        self.next_begin_offset = next_begin_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        # slices of the commit log: one per message, or one per run of adjacent records
        self.message_buffers: list[memoryview] = []
        self.message_queue_offsets: list[int] = []
        self.message_count = 0
        self.buffer_total_size = 0
        self.suggest_pulling_from_slave = False

    def body(self) -> bytes:
        """The records concatenated: a PULL_MESSAGE response body (one copy)."""
        return b"".join(self.message_buffers)

    def release(self) -> None:
        """Drop the slices of the commit log (lets deleted segments be unmapped)."""
        for view in self.message_buffers:
            view.release()
        self.message_buffers = []

    def __repr__(self) -> str:
        return (f"GetMessageResult({self.status.name}, next={self.next_begin_offset}, "
                f"min={self.min_offset}, max={self.max_offset}, count={self.message_count}, "
                f"bytes={self.buffer_total_size})")


class QueryMessageResult:
    """The answer of ``query_message`` (QUERY_MESSAGE, docs/PROTOCOL.md 4.10)."""

    __slots__ = ("message_buffers", "buffer_total_size", "index_last_update_timestamp",
                 "index_last_update_phyoffset")

    def __init__(self) -> None:
        self.message_buffers: list[memoryview] = []
        self.buffer_total_size = 0
        self.index_last_update_timestamp = 0
        self.index_last_update_phyoffset = 0

    def body(self) -> bytes:
        return b"".join(self.message_buffers)

    def release(self) -> None:
        for view in self.message_buffers:
            view.release()
        self.message_buffers = []


def _total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 1024 * 1024 * 1024


def scan_units(units: Any, max_msg_nums: int, max_phy: int, in_memory: int,
               bytes_in_memory: int, count_in_memory: int, bytes_in_disk: int,
               count_in_disk: int) -> tuple[list[tuple[int, int]], int, int, int] | None:
    """The unit walk of ``getMessage`` for a pull without filters.

    Takes units while the transfer limits allow (past the first unit: at most
    ``max_msg_nums``, and the in-memory limits where ``max_phy - offset <= in_memory``, else
    the on-disk ones). Returns the runs of adjacent records as (start, end) commit-log
    ranges, the bytes and records taken, and the offset of the last unit looked at; None
    when a unit of size <= 0 is reached. ``_units.scan_units`` (C, server/store/_units.c)
    is the same walk where it is built.
    """
    runs: list[tuple[int, int]] = []
    total = count = 0
    run_start = run_end = -1
    looked = 0
    whole = len(units) - len(units) % CQ_STORE_UNIT_SIZE
    for off, size, _tags in CQ_UNIT.iter_unpack(units[:whole]):
        looked = off
        if count:
            if count >= max_msg_nums:
                break
            if max_phy - off > in_memory:
                if total + size > bytes_in_disk or count > count_in_disk - 1:
                    break
            elif total + size > bytes_in_memory or count > count_in_memory - 1:
                break
        if size <= 0:
            return None
        if off != run_end:
            if run_end >= 0:
                runs.append((run_start, run_end))
            run_start = off
        run_end = off + size
        total += size
        count += 1
    if run_end >= 0:
        runs.append((run_start, run_end))
    return runs, total, count, looked


try:
    refuse_extension("aiorocketmq.server.store._units")
    from ._units import scan_units as _scan_units
except ImportError:  # no C compiler, or AIOROCKETMQ_NO_EXTENSIONS: the Python walk
    _scan_units = scan_units


class MessageStore:
    """The broker's durable store. See the module docstring for the contract."""

    def __init__(self, config: MessageStoreConfig, *, store_host: str, broker_name: str = "",
                 broker_cluster: str = "",
                 disk_used_ratio: Callable[[str], float] | None = None,
                 clock_ms: Callable[[], int] | None = None) -> None:
        """Args:
            config: the store options (read once, at ``start``).
            store_host: ``"ip:port"`` written into every record's STOREHOSTADDRESS and
                offset message ids (the broker's listen address).
            broker_name / broker_cluster: informational (runtime info, logs).
            disk_used_ratio: ``f(path) -> used fraction`` of the partition holding
                ``path``; defaults to ``statvfs``. Embedders and tests may replace it.
            clock_ms: the source of store timestamps (wall-clock ms by default).
        """
        self.config = config
        self.store_host = store_host
        self.store_host_bytes = socket_address_to_bytes(store_host)
        self.broker_name = broker_name
        self.broker_cluster = broker_cluster
        self.delay_levels = parse_delay_levels(config.message_delay_level)
        self._disk_used_ratio = disk_used_ratio or _disk_used_ratio
        self.commit_log = CommitLog(config, self.store_host_bytes, self.delay_levels, clock_ms)
        self.consume_queue_table: dict[tuple[str, int], ConsumeQueue] = {}
        self.index: IndexService | None = (
            IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num,
                         preallocate=config.warm_maped_file_enable)
            if config.message_index_enable else None
        )
        self.checkpoint: StoreCheckpoint | None = None
        self.abort_file = AbortFile(config.abort_path)
        self.dispatcher = Dispatcher(self.find_or_create_consume_queue, self.index)
        self._listener: MessageArrivingListener | None = None
        self._batch_listener: BatchArrivingListener | None = None
        self.defer_batch_dispatch = False  # module docstring
        self._undispatched: list[tuple[Sequence[MessageExtBrokerInner] | UniformBatch, int,
                                       Callable[[], None] | None]] = []
        self.append_observer: Callable[[float], None] | None = None
        self.put_message_hooks: list[Callable[[MessageExtBrokerInner], PutMessageStatus | None]] = []
        self.os_page_cache_busy_until = float("-inf")  # module docstring, "Page cache busy"
        # Replication, attached by the broker (server/store/ha); None in a bare store.
        self.ha: HAService | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._flush: FlushService | None = None
        self._state = "new"
        # Retention (server/store/cleaner.py) and the slave's dispatch of replicated
        # records (server/store/reput.py).
        self.cleaner = StoreCleaner(self)
        self.reput_service = ReputMessageService(self)
        self._in_memory_bytes = int(_total_physical_memory() * config.access_message_in_memory_max_ratio / 100)
        self.last_exit_ok = True
        # Records the last start re-dispatched to the consume queues and the index.
        self.recovery_redispatched = 0
        # What the last start's recovery found (None before a start, or on an empty log).
        self.recovery: RecoveryReport | None = None
        self._lock_fd = -1

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Load the files, recover (after a crash: from the checkpoint), start routines.

        Raises:
            RuntimeError: started twice, or another process holds the store directory.
            ValueError: segment sizes on disk differ from the configuration.
            OSError: the store directory cannot be read or written.
        """
        if self._state != "new":
            raise RuntimeError(f"MessageStore.start(): store is {self._state}")
        self._state = "starting"
        self._executor = ThreadPoolExecutor(max_workers=3, thread_name_prefix="store-io")
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._load_and_recover)
        except BaseException:
            self._executor.shutdown(wait=True)
            self._close_files()
            self._unlock_store_dir()
            self._state = "stopped"
            raise
        assert self.checkpoint is not None
        self._flush = FlushService(self.config, self.commit_log, self.consume_queue_table.values,
                                   self.index, self.dispatcher, self.checkpoint, self._executor)
        self._flush.start()
        self.cleaner.start()
        self._state = "running"
        log.info("store.started", root=self.config.store_path_root_dir, last_exit_ok=self.last_exit_ok,
                 max_phy_offset=self.commit_log.max_offset, queues=len(self.consume_queue_table))

    def _open_root(self) -> StoreCheckpoint:
        """Create and lock the store directory, note whether the last run stopped cleanly,
        and read the checkpoint (the first step of every store's ``_load_and_recover``)."""
        cfg = self.config
        os.makedirs(cfg.store_path_root_dir, exist_ok=True)
        self._lock_store_dir()
        self.last_exit_ok = not self.abort_file.exists()
        self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
        return self.checkpoint

    def _load_and_recover(self) -> None:
        self._open_root()
        self.commit_log.load()
        self._load_consume_queues()
        if self.index is not None:
            self.index.load()
        if not self.commit_log.mfq.files:
            self._destroy_logics()
            self.commit_log.mfq.reset_positions(0)
            self.abort_file.create()
            return
        report = self.recovery = StoreRecovery(self).run()
        self.dispatcher.dispatched_offset = report.end
        self.recovery_redispatched = report.redispatched
        self._recover_topic_queue_table()
        self.cleaner.last_physical_min_offset = self.commit_log.min_offset
        self.abort_file.create()
        report.log_line()
        log.info("store.recovered", last_exit_ok=self.last_exit_ok, max_phy_offset=report.end,
                 redispatched=report.redispatched, dispatched_from=report.dispatched_from)

    def _lock_store_dir(self) -> None:
        """One store per directory (upstream locks ``<root>/lock`` the same way)."""
        fd = os.open(os.path.join(self.config.store_path_root_dir, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise RuntimeError(
                f"store {self.config.store_path_root_dir} is in use by another process") from exc
        self._lock_fd = fd

    def _unlock_store_dir(self) -> None:
        if self._lock_fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _load_consume_queues(self) -> None:
        root = self.config.consume_queue_dir
        if not os.path.isdir(root):
            return
        for topic in os.listdir(root):
            topic_dir = os.path.join(root, topic)
            if not os.path.isdir(topic_dir):
                continue
            for qid_s in os.listdir(topic_dir):
                try:
                    qid = int(qid_s)
                except ValueError:
                    continue
                cq = ConsumeQueue(topic, qid, root, self.config.consume_queue_file_size,
                                  preallocate=self.config.warm_maped_file_enable)
                cq.load()
                self.consume_queue_table[(topic, qid)] = cq

    def _recover_topic_queue_table(self) -> None:
        min_phy = self.commit_log.min_offset
        table = self.commit_log.topic_queue_table
        table.clear()
        for key, cq in self.consume_queue_table.items():
            table[key] = cq.max_offset
            cq.correct_min_offset(min_phy)

    def _destroy_logics(self) -> None:
        for cq in self.consume_queue_table.values():
            cq.destroy()
        self.consume_queue_table.clear()
        if self.index is not None:
            self.index.destroy()

    async def shutdown(self) -> None:
        """Flush everything, write the checkpoint, remove the abort file, unmap. Idempotent."""
        if self._state in ("stopped", "new"):
            self._state = "stopped"
            return
        self._state = "stopping"
        self.dispatch_batches()
        await self.cleaner.stop()
        clean = True
        if self._flush is not None:
            try:
                await self._flush.stop()
            except OSError as exc:
                clean = False
                log.error("store.final_flush_failed", error=repr(exc))
        loop = asyncio.get_running_loop()
        assert self._executor is not None
        if clean and self._flush is not None and self._flush.flush_error is None:
            await loop.run_in_executor(self._executor, self.abort_file.remove)
        self._close_files()
        self._executor.shutdown(wait=True)
        self._unlock_store_dir()
        self._state = "stopped"
        log.info("store.shutdown", clean=clean, max_phy_offset=self.commit_log.max_offset)

    def _close_files(self) -> None:
        self.commit_log.close()
        for cq in self.consume_queue_table.values():
            cq.close()
        if self.index is not None:
            self.index.close()

    async def __aenter__(self) -> MessageStore:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def set_message_arriving_listener(self, cb: MessageArrivingListener | None,
                                      batch_cb: BatchArrivingListener | None = None) -> None:
        """``cb(topic, queue_id, max_offset, tags_code, store_timestamp, properties)`` per
        dispatched put; ``batch_cb``, when given, once for the members of a batch whose
        units were written by one call (else ``cb`` is called for each of them too)."""
        self._listener = cb
        self._batch_listener = batch_cb if cb is not None else None

    @property
    def flush_error(self) -> BaseException | None:
        """The error that stopped the flusher, if any (puts then answer FLUSH_DISK_TIMEOUT)."""
        return self._flush.flush_error if self._flush is not None else None

    @property
    def fsync_count(self) -> int:
        return self._flush.fsync_count if self._flush is not None else 0

    # ------------------------------------------------------------------ queues

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.consume_queue_table.get((topic, queue_id))

    def find_or_create_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.consume_queue_table.get(key)
        if cq is None:
            cq = ConsumeQueue(topic, queue_id, self.config.consume_queue_dir,
                              self.config.consume_queue_file_size,
                              preallocate=self.config.warm_maped_file_enable)
            self.consume_queue_table[key] = cq
        return cq

    # ------------------------------------------------------------------ writing

    def _check_store_status(self) -> PutMessageStatus | None:
        if self._state != "running":
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.config.broker_role == "SLAVE":
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.cleaner.disk_full:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        return None

    def _reserve(self, topic: str, queue_id: int, sys_flag: int, count: int, n_keys: int) -> None:
        """Create every file the append and its dispatch will need. Raises OSError."""
        if self._undispatched:
            self.dispatch_batches()
        tx = sys_flag & 0xC
        if tx != _PREPARED and tx != _ROLLBACK:
            key = (topic, queue_id)
            cq = self.consume_queue_table.get(key)
            if cq is None:
                cq = self.find_or_create_consume_queue(topic, queue_id)
            cq.reserve(self.commit_log.topic_queue_table.get(key, 0), count)  # next_queue_offset
        if self.index is not None and tx != _ROLLBACK:
            self.index.ensure_capacity(n_keys)

    def _dispatch_inner(self, inner: MessageExtBrokerInner, size: int) -> None:
        props = inner.properties
        unit = self.dispatcher.dispatch_record(
            inner.topic, inner.queue_id, inner.commit_log_offset, size, inner.tags_code,
            inner.store_timestamp, inner.queue_offset, props.get(_KEYS), props.get(_UNIQ),
            inner.sys_flag)
        if unit and self._listener is not None:
            try:
                self._listener(inner.topic, inner.queue_id, inner.queue_offset + 1, inner.tags_code,
                               inner.store_timestamp, props)
            except Exception:
                # The record is stored and dispatched; a listener bug must not fail the put.
                log.exception("store.arriving_listener_failed", topic=inner.topic, queue_id=inner.queue_id)

    def _dispatch_appended_batch(self, inners: Sequence[MessageExtBrokerInner], end: int) -> None:
        """Dispatch an appended batch ending at ``end``: its units in one call where it can."""
        if not self._dispatch_batch(inners, end):
            for i, inner in enumerate(inners):
                nxt = inners[i + 1].commit_log_offset if i + 1 < len(inners) else end
                self._dispatch_inner(inner, nxt - inner.commit_log_offset)

    def dispatch_batches(self) -> None:
        """Dispatch every batch appended but not dispatched yet, in order (module docstring,
        ``defer_batch_dispatch``). A batch whose dispatch fails is logged and the others
        are still dispatched: the records are stored, and recovery rebuilds their units."""
        while self._undispatched:
            pending, self._undispatched = self._undispatched, []
            for batch, end, stamp_members in pending:
                inners = batch_inners(batch)
                try:
                    if stamp_members is not None:
                        stamp_members()
                    self._dispatch_appended_batch(inners, end)
                except Exception as exc:
                    first = inners[0]
                    log.error("store.dispatch_failed", topic=first.topic, queue_id=first.queue_id,
                              offset=first.commit_log_offset, error=repr(exc))

    def _dispatch_batch(self, inners: Sequence[MessageExtBrokerInner], end: int) -> bool:
        """``_dispatch_inner`` for each member of an appended batch, its queue units written
        by one call (``Dispatcher.dispatch_batch_units``). False, nothing dispatched, unless
        the members share one sys flag and get units that call can write (then the caller
        dispatches each member). The listener and the index then see every unit of the
        batch written, where ``_dispatch_inner`` writes them one at a time."""
        first = inners[0]
        sys_flag = first.sys_flag
        if len(inners) < 2 or any(m.sys_flag != sys_flag for m in inners):
            return False
        dispatcher = self.dispatcher
        offsets = [m.commit_log_offset for m in inners]
        if not dispatcher.dispatch_batch_units(
                first.topic, first.queue_id, offsets, end,
                [m.tags_code for m in inners], first.queue_offset, sys_flag):
            return False
        index = dispatcher.index
        batch_listener = self._batch_listener
        listener = self._listener if batch_listener is None else None
        topic = first.topic
        queue_id = first.queue_id
        if index is not None:
            # The usual batch (every member a UNIQ_KEY, no KEYS, one store timestamp):
            # its index entries in one call; otherwise one member at a time.
            uniqs = []
            for inner in inners:
                props = inner.properties
                uniq = props.get(_UNIQ)
                if not uniq or props.get(_KEYS) or inner.store_timestamp != first.store_timestamp:
                    break
                uniqs.append(uniq)
            else:
                if index.build_index_uniq(topic, uniqs, offsets, first.store_timestamp):
                    index = None
        if index is not None or listener is not None:
            for inner in inners:
                props = inner.properties
                if index is not None:
                    index.build_index(topic, props.get(_KEYS), props.get(_UNIQ),
                                      inner.commit_log_offset, inner.store_timestamp)
                if listener is not None:
                    try:
                        listener(topic, queue_id, inner.queue_offset + 1, inner.tags_code,
                                 inner.store_timestamp, props)
                    except Exception:
                        # The record is stored and dispatched; a listener bug must not fail the put.
                        log.exception("store.arriving_listener_failed", topic=topic,
                                      queue_id=queue_id)
        if batch_listener is not None:
            try:
                batch_listener(topic, queue_id, inners)
            except Exception:
                log.exception("store.arriving_listener_failed", topic=topic, queue_id=queue_id)
        last = inners[-1]
        if end > dispatcher.dispatched_offset:
            dispatcher.dispatched_offset = end
            dispatcher.dispatched_timestamp = last.store_timestamp
        return True

    def _append_failed(self, exc: OSError, topic: str, queue_id: int) -> PutMessageResult:
        log.error("store.create_mapped_file_failed", topic=topic, queue_id=queue_id,
                  error=repr(exc))
        return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED)

    _APPEND_STATUS = {
        AppendMessageStatus.MESSAGE_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
        AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
        AppendMessageStatus.END_OF_FILE: PutMessageStatus.UNKNOWN_ERROR,
        AppendMessageStatus.UNKNOWN_ERROR: PutMessageStatus.UNKNOWN_ERROR,
    }

    async def put_message(self, inner: MessageExtBrokerInner) -> PutMessageResult:
        """Append one message, dispatch it and (SYNC_FLUSH) wait for its fsync.

        Returns a ``PutMessageResult``; never raises for store conditions (see the module
        docstring for the statuses). On success ``inner`` carries its store timestamp,
        queue offset, commit-log offset, offset msg id and tags code.
        """
        result = self.put_message_nowait(inner)
        if isinstance(result, PutMessageResult):
            return result
        return await result

    def _refuse_put(self, inner: MessageExtBrokerInner) -> PutMessageResult | None:
        """Why a put is refused before anything is written (the store's state, the topic's
        length, a ``put_message_hooks`` hook), or None to append it."""
        refused = self._check_store_status()
        if refused is None and len(inner.topic.encode("utf-8")) > MAX_TOPIC_LENGTH:
            refused = PutMessageStatus.MESSAGE_ILLEGAL
        if refused is None:
            for hook in self.put_message_hooks:
                refused = hook(inner)
                if refused is not None:
                    break
        return None if refused is None else PutMessageResult(refused)

    def _refuse_batch(self, batch: Sequence[MessageExtBrokerInner] | UniformBatch
                      ) -> PutMessageResult | None:
        """``_refuse_put`` for a batch: also an empty one, or one of several topics or queues."""
        refused = self._check_store_status()
        if refused is not None:
            return PutMessageResult(refused)
        if not len(batch):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if isinstance(batch, UniformBatch):
            topic = batch.topic
        else:
            first = batch[0]
            topic = first.topic
            if any(m.topic != topic or m.queue_id != first.queue_id for m in batch):
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if len(topic.encode("utf-8")) > MAX_TOPIC_LENGTH:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        return None

    def put_message_nowait(self, inner: MessageExtBrokerInner
                           ) -> PutMessageResult | Awaitable[PutMessageResult]:
        """``put_message`` without a coroutine when nothing has to be waited for.

        The append and dispatch happen now, before this returns. The result is a
        ``PutMessageResult`` when the answer is known at once (ASYNC_FLUSH, ``WAIT`` =
        ``"false"``, or any failure); under SYNC_FLUSH it is an awaitable of the result
        that completes when the group commit covering the record is done (the flush is
        requested before this returns). The send hot path calls this to avoid a task
        per message (upstream ``asyncPutMessage`` likewise completes its future inline).
        """
        refused = self._refuse_put(inner)
        if refused is not None:
            return refused
        started = _perf()
        commit_log = self.commit_log
        commit_log.apply_delay(inner)
        try:
            props = inner.properties
            keys = props.get(_KEYS)  # index entries: the UNIQ_KEY and each of KEYS
            self._reserve(inner.topic, inner.queue_id, inner.sys_flag, 1,
                          (1 if props.get(_UNIQ) else 0)
                          + (sum(1 for k in keys.split(" ") if k) if keys else 0))
            result = commit_log.append(inner)
        except OSError as exc:
            return self._append_failed(exc, inner.topic, inner.queue_id)
        if result.status is not AppendMessageStatus.PUT_OK:
            return PutMessageResult(self._APPEND_STATUS[result.status], result)
        self._dispatch_inner(inner, result.wrote_bytes)
        ended = _perf()
        if (ended - started) * 1000.0 > self.config.os_page_cache_busy_timeout_ms:
            self._page_cache_busy(started, ended)
        observe = self.append_observer
        if observe is not None:
            observe(ended - started)
        return self._after_append(result, inner.properties)

    async def put_messages(self, inners: Sequence[MessageExtBrokerInner]) -> PutMessageResult:
        """Append the messages of one batch (same topic and queue) with consecutive queue offsets.

        Delay levels are not applied to batches (upstream refuses delayed batches at the
        broker). Statuses as ``put_message``; MESSAGE_ILLEGAL when the messages do not
        share one topic and queue or the batch exceeds ``max_message_size``.
        """
        result = self.put_messages_nowait(inners)
        if isinstance(result, PutMessageResult):
            return result
        return await result

    def put_messages_nowait(self, batch: Sequence[MessageExtBrokerInner] | UniformBatch
                            ) -> PutMessageResult | Awaitable[PutMessageResult]:
        """``put_messages`` answering at once when no flush wait is needed (see ``put_message_nowait``)."""
        refused = self._refuse_batch(batch)
        if refused is not None:
            return refused
        if isinstance(batch, UniformBatch):
            shared: UniformBatch | MessageExtBrokerInner = batch
            props_of = [m[2] for m in batch.members]
        else:
            shared = batch[0]
            props_of = [m.properties for m in batch]
        started = _perf()
        try:
            n_keys = 0
            for props in props_of:  # index entries: each UNIQ_KEY and each of KEYS
                if props.get(_UNIQ):
                    n_keys += 1
                keys = props.get(_KEYS)
                if keys:
                    n_keys += sum(1 for k in keys.split(" ") if k)
            self._reserve(shared.topic, shared.queue_id, shared.sys_flag, len(batch), n_keys)
            result = self.commit_log.append_batch(batch, stamp=not self.defer_batch_dispatch)
        except OSError as exc:
            return self._append_failed(exc, shared.topic, shared.queue_id)
        if result.status is not AppendMessageStatus.PUT_OK:
            return PutMessageResult(self._APPEND_STATUS[result.status], result)
        end = result.wrote_offset + result.wrote_bytes
        if self.defer_batch_dispatch:
            if not self._undispatched:
                asyncio.get_running_loop().call_soon(self.dispatch_batches)
            self._undispatched.append((batch, end, result.stamp_members))
            result.stamp_members = None
        else:
            self._dispatch_appended_batch(batch_inners(batch), end)
        ended = _perf()
        if (ended - started) * 1000.0 > self.config.os_page_cache_busy_timeout_ms:
            self._page_cache_busy(started, ended)
        observe = self.append_observer
        if observe is not None:
            observe(ended - started)
        return self._after_append(result, props_of[0])

    def _page_cache_busy(self, started: float, ended: float) -> None:
        """A put's append and dispatch ran past ``os_page_cache_busy_timeout_ms`` (module docstring)."""
        self.os_page_cache_busy_until = ended
        log.warning("store.page_cache_busy", put_ms=round((ended - started) * 1000.0, 1),
                    os_page_cache_busy_timeout_ms=self.config.os_page_cache_busy_timeout_ms)

    def _after_append(self, result: AppendMessageResult, props: dict[str, str]
                      ) -> PutMessageResult | Awaitable[PutMessageResult]:
        end = result.wrote_offset + result.wrote_bytes
        wait = props.get(_WAIT) != "false"
        ha = self.ha
        replica: asyncio.Future[bool] | None = None
        if ha is not None:
            ha.wakeup_writers()
            if wait and self.config.broker_role == "SYNC_MASTER":
                if not ha.is_slave_ok(end):
                    replica_refused = PutMessageResult(PutMessageStatus.SLAVE_NOT_AVAILABLE, result)
                    if not self.config.is_sync_flush:
                        return replica_refused
                    assert self._flush is not None
                    return self._await_flush_then(self._flush.request_flush(end), replica_refused)
                if not self.config.is_sync_flush:
                    # The put's own future, resolved by the slave's acknowledgement: no
                    # coroutine and no task per waiting send.
                    return ha.submit_replica_result(
                        end, PutMessageResult(PutMessageStatus.PUT_OK, result),
                        PutMessageResult(PutMessageStatus.FLUSH_SLAVE_TIMEOUT, result))
                replica = ha.submit_replica(end)
        if self.config.is_sync_flush and wait:
            assert self._flush is not None
            return self._await_flush(result, self._flush.request_flush(end), replica)
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    @staticmethod
    async def _await_flush_then(flushed: Awaitable[bool], answer: PutMessageResult) -> PutMessageResult:
        await flushed
        return answer

    @staticmethod
    async def _await_flush(result: AppendMessageResult, flushed: Awaitable[bool] | None,
                           replica: Awaitable[bool] | None = None) -> PutMessageResult:
        status = PutMessageStatus.PUT_OK
        if flushed is not None and not await flushed:
            log.warn("store.flush_disk_timeout", offset=result.wrote_offset)
            status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        if replica is not None and not await replica:
            log.warn("store.flush_slave_timeout", offset=result.wrote_offset)
            status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        return PutMessageResult(status, result)

    # ------------------------------------------------------------------ replication

    def get_commit_log_data(self, offset: int) -> memoryview | None:
        """The written bytes of the segment holding ``offset``, from ``offset`` to its write
        position (``getCommitLogData`` / ``CommitLog.getData``; offset 0 falls back to the
        first segment, as upstream). None when nothing is there yet."""
        if self._state != "running":
            return None
        mf = self.commit_log.mfq.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        pos = offset % self.commit_log.file_size
        size = mf.wrote_position - pos
        if size <= 0:
            return None
        return mf.view(pos, size)

    def append_to_commit_log(self, start_offset: int, data: bytes | bytearray | memoryview,
                             *, dispatch: bool = True) -> bool:
        """A slave's append of the master's bytes at ``start_offset`` (``appendToCommitLog``).

        The bytes go to the last segment (created at ``start_offset``'s segment start when
        the log is empty or full), then every whole record now in the log is dispatched
        (with ``dispatch=False`` not yet: the caller calls ``dispatch_appended()``, as the
        HA client does once it has acknowledged the bytes to the master; upstream's reput
        runs on its own thread, after the acknowledgement too).
        False when the store is not running, ``start_offset`` is not the log's end, the
        bytes do not fit the segment, or the segment cannot be created.
        """
        if self._state != "running":
            return False
        mfq = self.commit_log.mfq
        try:
            mf = mfq.get_last_mapped_file(start_offset)
        except OSError as exc:
            log.error("store.ha_append_create_failed", offset=start_offset, error=repr(exc))
            return False
        assert mf is not None
        if mf.file_from_offset + mf.wrote_position != start_offset or not mf.append(data):
            log.error("store.ha_append_refused", offset=start_offset, size=len(data),
                      segment=mf.file_from_offset, wrote_position=mf.wrote_position)
            return False
        if dispatch:
            self._reput()
        return True

    def dispatch_appended(self) -> None:
        """Dispatch the records ``append_to_commit_log(..., dispatch=False)`` left undispatched."""
        if self._state == "running":
            self._reput()

    def _reput(self) -> None:
        """Dispatch the whole records between the dispatched offset and the log's end
        (server/store/reput.py; the DLedger store overrides this with its own)."""
        self.reput_service.reput()

    # ------------------------------------------------------------------ reading

    def _is_batch_full(self, size: int, max_msg_nums: int, total: int, count: int, in_disk: bool) -> bool:
        """``isTheBatchFull``: docs/PROTOCOL.md 6.2's transfer limits; the first message always fits."""
        if total == 0 or count == 0:
            return False
        if max_msg_nums <= count:
            return True
        cfg = self.config
        if in_disk:
            return (total + size > cfg.max_transfer_bytes_on_message_in_disk
                    or count > cfg.max_transfer_count_on_message_in_disk - 1)
        return (total + size > cfg.max_transfer_bytes_on_message_in_memory
                or count > cfg.max_transfer_count_on_message_in_memory - 1)

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    message_filter: MessageFilter | None = None,
                    record_filter: RecordFilter | None = None) -> GetMessageResult:
        """Look up to ``max_msg_nums`` messages of a queue from ``offset`` (docs/PROTOCOL.md 6.2).

        ``message_filter(tags_code)`` rejects units by tag code; ``record_filter(record)``
        rejects a read record (upstream ``isMatchedByCommitLog``: SQL92 on its properties).
        A rejected message is skipped but counts as scanned. ``group`` is only for
        logs. Release (or drop) the result after copying its buffers.
        """
        max_phy = self.commit_log.max_offset
        # nextOffsetCorrection: a slave keeps the requested offset unless offsetCheckInSlave.
        keep = self.config.is_slave and not self.config.offset_check_in_slave
        cq = self.consume_queue_table.get((topic, queue_id))
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, offset if keep else 0, 0, 0)
        min_offset = cq.min_offset
        max_offset = cq.max_offset
        S = GetMessageStatus
        if max_offset == 0:
            return GetMessageResult(S.NO_MESSAGE_IN_QUEUE, offset if keep else 0, min_offset, max_offset)
        if offset < min_offset:
            return GetMessageResult(S.OFFSET_TOO_SMALL, offset if keep else min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetMessageResult(S.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            return GetMessageResult(S.OFFSET_OVERFLOW_BADLY, offset if keep else max_offset,
                                    min_offset, max_offset)
        units = cq.get_index_buffer(offset)
        if units is None:
            log.warn("store.consume_queue_unit_unreadable", group=group, topic=topic,
                     queue_id=queue_id, offset=offset, min_offset=min_offset, max_offset=max_offset)
            return GetMessageResult(S.OFFSET_FOUND_NULL, offset if keep else cq.roll_next_file(offset),
                                    min_offset, max_offset)
        result = GetMessageResult(S.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        buffers = result.message_buffers
        queue_offsets = result.message_queue_offsets
        total = 0
        next_phy_file_start = -1
        max_filter_bytes = max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE)
        limit = min(len(units), max_filter_bytes)
        in_memory = self._in_memory_bytes
        get_log = self.commit_log.get_message
        if (message_filter is None and record_filter is None
                and self._get_unfiltered(result, units, offset, max_msg_nums, max_phy, limit)):
            units.release()
            return result
        i = 0
        offset_py = 0
        try:
            while i < limit:
                offset_py, size_py, tags_code = _unpack_unit(units, i)
                if next_phy_file_start >= 0 and offset_py < next_phy_file_start:
                    i += CQ_STORE_UNIT_SIZE
                    continue
                in_disk = max_phy - offset_py > in_memory
                if self._is_batch_full(size_py, max_msg_nums, total, len(buffers), in_disk):
                    break
                i += CQ_STORE_UNIT_SIZE
                if message_filter is not None and not message_filter(tags_code):
                    continue
                view = get_log(offset_py, size_py)
                if view is None:
                    if total == 0:
                        result.status = S.MESSAGE_WAS_REMOVING
                    next_phy_file_start = self.commit_log.roll_next_file(offset_py)
                    continue
                if record_filter is not None and not record_filter(view):
                    view.release()
                    continue
                buffers.append(view)
                queue_offsets.append(offset + (i // CQ_STORE_UNIT_SIZE) - 1)
                total += size_py
                result.status = S.FOUND
                next_phy_file_start = -1
        finally:
            units.release()
        result.message_count = len(buffers)
        result.buffer_total_size = total
        result.next_begin_offset = offset + i // CQ_STORE_UNIT_SIZE
        # maxPhyOffsetPulling is the last unit looked at (getMessage).
        result.suggest_pulling_from_slave = max_phy - offset_py > in_memory
        return result

    def _get_unfiltered(self, result: GetMessageResult, units: memoryview, offset: int,
                        max_msg_nums: int, max_phy: int, limit: int) -> bool:
        """``get_message``'s loop for a pull without filters: the same limits, one pass
        over the units (``scan_units``), and one commit-log slice per run of adjacent
        records (a batch send stores its members back to back) instead of one per message.
        False, with ``result`` untouched, when a record is not readable where its unit says
        (a removed segment, a run across segments): the general loop handles that."""
        cfg = self.config
        in_memory = self._in_memory_bytes
        scanned = _scan_units(
            units[:limit - limit % CQ_STORE_UNIT_SIZE], max_msg_nums, max_phy, in_memory,
            cfg.max_transfer_bytes_on_message_in_memory,
            cfg.max_transfer_count_on_message_in_memory,
            cfg.max_transfer_bytes_on_message_in_disk, cfg.max_transfer_count_on_message_in_disk)
        if scanned is None:
            return False
        runs, total, count, looked = scanned
        get_log = self.commit_log.get_message
        views: list[memoryview] = []
        for start, end in runs:
            view = get_log(start, end - start)
            if view is None:
                for v in views:
                    v.release()
                return False
            views.append(view)
        result.message_buffers = views
        result.message_queue_offsets = list(range(offset, offset + count))
        result.message_count = count
        result.buffer_total_size = total
        if count:
            result.status = GetMessageStatus.FOUND
        result.next_begin_offset = offset + count
        result.suggest_pulling_from_slave = max_phy - looked > in_memory
        return True

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """One past the last unit (GET_MAX_OFFSET); 0 for an unknown queue."""
        cq = self.find_consume_queue(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """First unit still present (GET_MIN_OFFSET); 0 for an unknown queue (Java creates it, giving 0)."""
        cq = self.find_consume_queue(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: first offset stored at or after ``timestamp``; 0 if unknown."""
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None:
            return 0
        return cq.get_offset_in_queue_by_time(timestamp, self.commit_log.pickup_store_timestamp,
                                              self.commit_log.min_offset)

    def _unit_store_time(self, cq: ConsumeQueue | None, index: int) -> int:
        if cq is None:
            return -1
        unit = cq.get_unit(index)
        if unit is None:
            return -1
        return self.commit_log.pickup_store_timestamp(unit[0], unit[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """GET_EARLIEST_MSG_STORETIME: store time of the queue's first message, -1 if none."""
        cq = self.find_consume_queue(topic, queue_id)
        return self._unit_store_time(cq, cq.min_offset) if cq is not None else -1

    def get_message_store_timestamp(self, topic: str, queue_id: int, consume_offset: int) -> int:
        return self._unit_store_time(self.find_consume_queue(topic, queue_id), consume_offset)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, consume_offset: int) -> int:
        cq = self.find_consume_queue(topic, queue_id)
        unit = cq.get_unit(consume_offset) if cq is not None else None
        return unit[0] if unit is not None else 0

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        """The message stored at ``commit_log_offset`` decoded (body as stored), or None."""
        view = self.commit_log.get_record(commit_log_offset)
        if view is None:
            return None
        try:
            return decode_message(view, 0, decompress=False)[0]
        except MessageDecodeError:
            return None
        finally:
            view.release()

    def select_one_message_by_offset(self, commit_log_offset: int) -> bytes | None:
        """The raw record at ``commit_log_offset`` (VIEW_MESSAGE_BY_ID body), or None."""
        view = self.commit_log.get_record(commit_log_offset)
        if view is None:
            return None
        try:
            return bytes(view)
        finally:
            view.release()

    def query_message(self, topic: str, key: str, max_num: int, begin_timestamp: int,
                      end_timestamp: int) -> QueryMessageResult:
        """QUERY_MESSAGE: records whose ``KEYS`` entry or ``UNIQ_KEY`` equals ``key`` (docs/PROTOCOL.md 4.10).

        At most ``min(max_num, 64)`` records (upstream ``maxMsgsNumBatch``), oldest first.
        Index hash collisions are filtered out here.
        """
        result = QueryMessageResult()
        if self.index is None:
            return result
        max_num = min(max_num, 64)
        found = self.index.query(topic, key, max(max_num * 2, max_num + 32), begin_timestamp, end_timestamp)
        result.index_last_update_timestamp = found.index_last_update_timestamp
        result.index_last_update_phyoffset = found.index_last_update_phyoffset
        for phy in sorted(set(found.phy_offsets)):
            if len(result.message_buffers) >= max_num:
                break
            view = self.commit_log.get_record(phy)
            if view is None:
                continue
            try:
                msg = decode_message(view, 0, read_body=False)[0]
            except MessageDecodeError:
                view.release()
                continue
            keys = msg.properties.get(_KEYS, "")
            if msg.topic != topic or not (msg.properties.get(_UNIQ) == key or key in keys.split(" ")):
                view.release()
                continue
            result.message_buffers.append(view)
            result.buffer_total_size += len(view)
        return result

    def get_max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    def get_min_phy_offset(self) -> int:
        return max(self.commit_log.min_offset, 0)

    def dispatch_behind_bytes(self) -> int:
        """Bytes appended but not yet dispatched; dispatch is synchronous here, so 0."""
        return max(self.commit_log.max_offset - self.dispatcher.dispatched_offset, 0)

    def commit_log_disk_ratio(self) -> float:
        return self._disk_used_ratio(self.config.commit_log_dir)

    def runtime_info(self) -> dict[str, str]:
        """A subset of ``getRuntimeInfo`` with upstream key names (GET_BROKER_RUNTIME_INFO)."""
        cp = self.checkpoint
        return {
            "commitLogDiskRatio": str(self.commit_log_disk_ratio()),
            "commitLogMinOffset": str(self.get_min_phy_offset()),
            "commitLogMaxOffset": str(self.get_max_phy_offset()),
            "dispatchBehindBytes": str(self.dispatch_behind_bytes()),
            "consumeQueueDiskRatio": str(self._disk_used_ratio(self.config.consume_queue_dir)),
            "putMessageDistributeTime": "",
            "earliestMessageTimeStamp": str(self._earliest_message_time()),
            "physicMsgTimestamp": str(cp.physic_msg_timestamp if cp else 0),
            "brokerName": self.broker_name,
        }

    def _earliest_message_time(self) -> int:
        view = self.commit_log.get_record(self.get_min_phy_offset())
        if view is None:
            return -1
        size = len(view)
        view.release()
        return self.commit_log.pickup_store_timestamp(self.get_min_phy_offset(), size)

    # ------------------------------------------------------------------ topics

    def delete_topics(self, topics: Iterable[str]) -> int:
        """Drop the consume queues of ``topics`` (their records stay in the log until cleaned)."""
        self.dispatch_batches()
        doomed = set(topics)
        n = 0
        for key in [k for k in self.consume_queue_table if k[0] in doomed]:
            cq = self.consume_queue_table.pop(key)
            self.commit_log.topic_queue_table.pop(key, None)
            cq.destroy()
            n += 1
        return n

    def clean_unused_topic(self, topics: Iterable[str]) -> int:
        """Drop the consume queues of every topic not in ``topics`` (system queues kept)."""
        keep = set(topics) | {SystemTopic.SCHEDULE_TOPIC, SystemTopic.TRANS_OP_HALF_TOPIC}
        return self.delete_topics({t for t, _ in self.consume_queue_table if t not in keep})

    # ------------------------------------------------------------------ retention

    def execute_delete_files_manually(self) -> None:
        """Delete expired files on the next passes regardless of the hour (``executeDeleteFilesManually``)."""
        self.cleaner.execute_delete_files_manually()

    async def clean_once(self, *, now_ms: int | None = None) -> int:
        """One retention pass; returns the number of commit-log segments deleted."""
        deleted = await self.delete_expired_commit_log_files(now_ms=now_ms)
        await self.clean_consume_queues()
        return deleted

    async def delete_expired_commit_log_files(self, *, now_ms: int | None = None) -> int:
        """``CleanCommitLogService.deleteExpiredFiles`` (server/store/cleaner.py)."""
        return await self.cleaner.delete_expired_commit_log_files(now_ms=now_ms)

    async def clean_consume_queues(self) -> None:
        """``CleanConsumeQueueService`` (server/store/cleaner.py)."""
        await self.cleaner.clean_consume_queues()
