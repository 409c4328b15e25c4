"""``DLedgerMessageStore``: the broker's store when ``enableDLegerCommitLog=true``.

The ``MessageStore`` facade, reads and all, with its commit log replaced by the DLedger log
(commit_log.py) and a ``RaftNode`` on the peer port (server.py). What differs:

* Files: ``<storePathRootDir>/dledger-<dLegerSelfId>/{data,index,checkpoint,currterm}``
  (``data`` at ``storePathDLedgerCommitLog`` when set) hold the log; consume queues,
  index files, the store checkpoint and the abort file are where they always are. No
  ``commitlog`` directory, no HA port.
* Writing: only the leader takes puts (SERVICE_NOT_AVAILABLE elsewhere, and while the
  broker's role is still SLAVE: the broker turns a leader into its master only once it is
  caught up, see the controller). Each message becomes one entry (a batch: one entry per
  message), its record encoded for commit-log offset ``entry pos + 48``. The put answers
  once a quorum holds the entry: PUT_OK; SERVICE_NOT_AVAILABLE when this node stopped
  leading; OS_PAGECACHE_BUSY when no quorum answered within 2.5 s or too many appends
  wait (upstream's mapping of WAIT_QUORUM_ACK_TIMEOUT / LEADER_PENDING_FULL, which stock
  clients do not retry on another broker); UNKNOWN_ERROR when leadership changed before
  the commit (the message may still be stored). ``flushDiskType`` does not apply: the
  quorum is the durability (upstream likewise).
* Dispatch: consume-queue units and index entries come from committed entries only, on the
  leader and the followers alike (upstream's ``ReputMessageService`` bounded by
  ``committedPos``), in log order, whenever the committed index moves.
* Start: the DLedger files are recovered (mmap_store.py), consume queues cut back to the
  log's end, and dispatch resumes from the store checkpoint's logics offset (units already
  written are skipped, so re-dispatching is harmless); ``currterm`` gives back the term and
  vote. The node starts as a candidate.
* Retention (each pass of the store's clean routine, on every member, as stock's DLedger
  mode: the broker hands ``fileReservedTime + 1`` hours, ``deleteWhen`` and
  ``cleanFileForciblyEnable`` to DLedger's ``CleanSpaceService``): at a ``deleteWhen`` hour,
  or whenever the DLedger directory's or data directory's partition is over 70 % used,
  data segments last written ``fileReservedTime + 1`` hours ago or more (at least one
  hour) are deleted, any age when over 85 % with ``cleanFileForciblyEnable``; never the
  last, nor one holding the committed entry or anything after it, nor anything not yet
  dispatched (mmap_store.py ``detach_expired``). The log's min offset is then the first
  segment's start; consume queues and index files below it go as in the normal store.
* Timing: heartbeats every ``HEARTBEAT_INTERVAL_MS`` (1 s, stock 2 s), a follower stands
  after three missed (3 s, stock 6 s); ``preferredLeaderId`` (``;``-separated ids) makes a
  leader hand over to a caught-up preferred member (core.py).

``on_role_change(term, role)`` is the broker's hook (upstream ``DLedgerRoleChangeHandler``);
``leader_ready`` says whether this leader has committed and dispatched its whole log.

Upstream: ``store/dledger/DLedgerCommitLog.java``, ``DefaultMessageStore`` in DLedger mode.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import MessageConst
from aiorocketmq.protocol.dledger.entry import BLANK_MAGIC_CODE, BODY_OFFSET, CURRENT_MAGIC
from aiorocketmq.protocol.dledger.wire import DLedgerResponseCode, parse_peers
from aiorocketmq.protocol.message import MessageDecodeError, decode_message

from ..cleaner import is_it_time_to_do
from ..config import ASYNC_FLUSH, MessageStoreConfig
from ..dispatcher import DispatchRequest, compute_tags_code
from ..flush import FlushService
from ..inner import (
    AppendMessageResult,
    AppendMessageStatus,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
    UniformBatch,
    batch_inners,
)
from ..message_store import MessageStore
from .commit_log import DLedgerCommitLog
from .core import MakeBody, RaftError, RaftNode, Timing
from .log import LogError
from .member_state import MemberState, Role, broker_id_of
from .mmap_store import DLedgerMmapFileStore
from .server import DLedgerServer

__all__ = ["DLedgerMessageStore"]

log = get_logger("aiorocketmq.store.dledger")

C = DLedgerResponseCode
_HEAD = struct.Struct(">ii")
_KEYS = MessageConst.PROPERTY_KEYS
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_CHECKPOINT_INTERVAL = 3.0  # DLedgerConfig.checkPointInterval
# Our leader beats every second (stock: 2 s), and a follower stands after 3 beats of silence
# (3 s; stock 6 s). Safe with stock members either way: a stock follower still waits its
# 6 s, and a stock leader's 2 s beats (and its 1 s commit pushes) stay well inside our 3 s.
HEARTBEAT_INTERVAL_MS = 1000
_INDEX_FLUSH_INTERVAL = 1.0
# DLedgerConfig.diskSpaceRatioToCheckExpired / diskSpaceRatioToForceClean (0.3.1.2 defaults).
_RATIO_CHECK_EXPIRED = 0.70
_RATIO_FORCE_CLEAN = 0.85

# DLedgerCommitLog.asyncPutMessage's answer for each DLedger response code.
_PUT_STATUS = {
    C.SUCCESS: PutMessageStatus.PUT_OK,
    C.INCONSISTENT_LEADER: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    C.NOT_LEADER: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    C.LEADER_NOT_READY: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    C.DISK_FULL: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    C.LEADER_TRANSFERRING: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    C.WAIT_QUORUM_ACK_TIMEOUT: PutMessageStatus.OS_PAGECACHE_BUSY,
    C.LEADER_PENDING_FULL: PutMessageStatus.OS_PAGECACHE_BUSY,
}


def _put_status(code: int) -> PutMessageStatus:
    try:
        return _PUT_STATUS.get(C(code), PutMessageStatus.UNKNOWN_ERROR)
    except ValueError:
        return PutMessageStatus.UNKNOWN_ERROR


class DLedgerMessageStore(MessageStore):
    """See the module docstring."""

    def __init__(self, config: MessageStoreConfig, *, store_host: str, broker_name: str = "",
                 broker_cluster: str = "", host: str | None = None, timing: Timing | None = None,
                 disk_used_ratio: Callable[[str], float] | None = None,
                 clock_ms: Callable[[], int] | None = None) -> None:
        """``host``: the address the peer port binds; None binds the host of this member's
        own ``dLegerPeers`` address (stock binds every interface).

        Raises:
            ValueError: dLegerPeers / dLegerSelfId missing or malformed, or the self id not
                among the peers.
        """
        super().__init__(config, store_host=store_host, broker_name=broker_name,
                         broker_cluster=broker_cluster, disk_used_ratio=disk_used_ratio,
                         clock_ms=clock_ms)
        if not config.d_leger_peers:
            raise ValueError("enableDLegerCommitLog=true needs dLegerPeers")
        if not config.d_leger_self_id:
            raise ValueError("enableDLegerCommitLog=true needs dLegerSelfId")
        self.peers = parse_peers(config.d_leger_peers)
        self.self_id = config.d_leger_self_id
        if self.self_id not in self.peers:
            raise ValueError(f"dLegerSelfId {self.self_id} is not in dLegerPeers {config.d_leger_peers}")
        self.follower_broker_id = broker_id_of(self.self_id)
        self.group = config.d_leger_group or broker_name or "default"
        self.host = host if host is not None else self.peers[self.self_id].rsplit(":", 1)[0].strip("[]")
        self.timing = timing or Timing(heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)
        self.dledger_dir = os.path.join(config.store_path_root_dir, f"dledger-{self.self_id}")
        self.dstore = DLedgerMmapFileStore(self.dledger_dir, config.mapped_file_size_commit_log,
                                           data_dir=config.store_path_dledger_commit_log)
        self.dledger_log = DLedgerCommitLog(config, self.store_host_bytes, self.delay_levels,
                                            self.dstore, clock_ms)
        self.commit_log = self.dledger_log
        self.member_state: MemberState | None = None
        self.dledger: DLedgerServer | None = None
        self.on_role_change: Callable[[int, Role], None] | None = None
        self._dledger_task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ state

    @property
    def node(self) -> RaftNode | None:
        return self.dledger.node if self.dledger is not None else None

    @property
    def leader_ready(self) -> bool:
        """Leader, everything committed and dispatched (``DLedgerRoleChangeHandler``'s wait)."""
        node = self.node
        ds = self.dstore
        return (node is not None and node.is_leader and ds.committed_index == ds.end_index
                and self.dispatcher.dispatched_offset >= ds.committed_pos)

    def recover_topic_queue_table(self) -> None:
        """Next queue offsets from the consume queues (a new master, upstream
        ``recoverTopicQueueTable``)."""
        self._recover_topic_queue_table()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Recover, start the routines, then listen on the peer port.

        Raises:
            RuntimeError, ValueError, OSError: as ``MessageStore.start``; OSError also when
                the peer port cannot be bound.
            LogError: DLedger files that cannot be reconciled.
        """
        if self._state != "new":
            raise RuntimeError(f"DLedgerMessageStore.start(): store is {self._state}")
        self._state = "starting"
        loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=3, thread_name_prefix="store-io")
        try:
            await loop.run_in_executor(self._executor, self._load_and_recover)
        except BaseException:
            self._executor.shutdown(wait=True)
            self._close_files()
            self._unlock_store_dir()
            self._state = "stopped"
            raise
        assert self.checkpoint is not None and self.member_state is not None
        node = RaftNode(self.member_state, self.dstore, timing=self.timing,
                        noop_factory=self._noop, now=time.monotonic() * 1000.0,
                        preferred_leader_ids=(self.config.preferred_leader_id or "").split(";"))
        self.dledger = DLedgerServer(node, host=self.host)
        self.dledger.on_commit = self._on_commit
        self.dledger.on_role_change = self._role_changed
        # The quorum is the durability: data are flushed in the background whatever
        # flushDiskType says (no put waits for a group commit).
        flush_config = dataclasses.replace(self.config, flush_disk_type=ASYNC_FLUSH)
        self._flush = FlushService(flush_config, self.commit_log, self.consume_queue_table.values,
                                   self.index, self.dispatcher, self.checkpoint, self._executor)
        self._flush.start()
        self.cleaner.start()
        self._dledger_task = loop.create_task(self._dledger_routine(), name="dledger-flush")
        self._state = "running"
        self._reput()
        try:
            await self.dledger.start()
        except BaseException:
            await self.shutdown()
            raise
        log.info("store.started", root=self.config.store_path_root_dir, last_exit_ok=self.last_exit_ok,
                 dledger_end=self.dstore.end_index, committed=self.dstore.committed_index,
                 term=self.member_state.term, queues=len(self.consume_queue_table))

    def _load_and_recover(self) -> None:
        cp = self._open_root()
        os.makedirs(self.dledger_dir, exist_ok=True)
        self.member_state = MemberState(self.group, self.self_id, self.peers, self.dledger_dir)
        ds = self.dstore
        ds.load_and_recover()
        self._load_consume_queues()
        if self.index is not None:
            self.index.load()
        begin = max(ds.data.min_offset, 0)
        end = ds.end_pos
        if ds.end_index < 0:
            self._destroy_logics()
            self.dispatcher.dispatched_offset = begin
            self.abort_file.create()
            return
        dispatch_from = min(cp.logics_offset, end) if cp.loaded_ok else begin
        for key, cq in list(self.consume_queue_table.items()):
            damage = cq.recover()
            if damage:
                log.warn("store.consume_queue_rebuilt", queue=f"{key[0]}:{key[1]}", reason=damage)
                self.consume_queue_table.pop(key)
                cq.destroy()
                dispatch_from = begin
                continue
            if cq.max_physic_offset > end:
                cq.truncate_dirty_logic_files(end)
        if self.index is not None:
            indexed = self.index.recover(min(cp.index_offset, end) if cp.loaded_ok else 0)
            dispatch_from = min(dispatch_from, indexed - BODY_OFFSET if indexed >= 0 else begin)
        self.dispatcher.dispatched_offset = max(dispatch_from, begin)
        self._recover_topic_queue_table()
        self.cleaner.last_physical_min_offset = self.commit_log.min_offset
        self.abort_file.create()
        log.info("store.recovered", last_exit_ok=self.last_exit_ok, dledger_end=ds.end_index,
                 end_pos=end, committed=ds.committed_index, dispatch_from=self.dispatcher.dispatched_offset)

    async def shutdown(self) -> None:
        """Stop the Raft node, flush the DLedger files and checkpoints, then the store's own."""
        if self._state in ("stopped", "new"):
            await super().shutdown()
            return
        if self.dledger is not None:
            await self.dledger.stop()
        task = self._dledger_task
        self._dledger_task = None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        if self._executor is not None:
            try:
                await asyncio.get_running_loop().run_in_executor(self._executor, self._dledger_flush, True)
            except OSError as exc:
                log.error("dledger.final_flush_failed", error=repr(exc))
        await super().shutdown()

    def _dledger_flush(self, checkpoint: bool) -> None:
        self.dstore.flush()
        if checkpoint:
            self.dstore.persist_checkpoint()

    async def _dledger_routine(self) -> None:
        """The DLedger index (the data have the store's flusher) and checkpoint, as
        upstream's ``FlushDataService``."""
        loop = asyncio.get_running_loop()
        last_checkpoint = time.monotonic()
        while True:
            await asyncio.sleep(_INDEX_FLUSH_INTERVAL)  # a period, not a synchronisation
            due = time.monotonic() - last_checkpoint >= _CHECKPOINT_INTERVAL
            try:
                await loop.run_in_executor(self._executor, self._dledger_flush, due)
            except Exception:
                log.exception("dledger.flush_failed")
                continue
            if due:
                last_checkpoint = time.monotonic()

    # ------------------------------------------------------------------ Raft events

    def _noop(self) -> tuple[int, MakeBody]:
        st = self.member_state
        assert st is not None
        return self.dledger_log.noop_record(st.term, st.self_id)

    def _role_changed(self, term: int, role: Role) -> None:
        log.info("dledger.role_changed", self_id=self.self_id, term=term, role=role.value,
                 end=self.dstore.end_index, committed=self.dstore.committed_index)
        if self.on_role_change is not None:
            self.on_role_change(term, role)

    def _on_commit(self, index: int) -> None:
        self._reput()

    # ------------------------------------------------------------------ dispatch

    def _reput(self) -> None:
        """Dispatch the committed entries from the dispatched offset on (module docstring)."""
        ds = self.dstore
        end = ds.committed_pos
        offset = self.dispatcher.dispatched_offset
        if offset >= end:
            return
        file_size = ds.file_size
        find = ds.data.find_mapped_file_by_offset
        table = self.commit_log.topic_queue_table
        listener = self._listener
        dispatcher = self.dispatcher
        while offset < end:
            mf = find(offset)
            if mf is None:
                first = ds.data.first
                if first is not None and offset < first.file_from_offset:
                    offset = first.file_from_offset
                    continue
                break
            rel = offset - mf.file_from_offset
            if rel + 8 > file_size:
                offset = mf.file_from_offset + file_size
                continue
            magic, size = _HEAD.unpack_from(mf.mm, rel)
            if magic == BLANK_MAGIC_CODE:
                offset = mf.file_from_offset + file_size
                continue
            if magic != CURRENT_MAGIC or size <= BODY_OFFSET or rel + size > file_size:
                log.error("store.reput_bad_entry", offset=offset, magic=magic, size=size)
                break
            try:
                msg, _ = decode_message(mf.mm, rel + BODY_OFFSET, read_body=False, decompress=False)
            except MessageDecodeError as exc:
                # Not a commit-log record (a raw DLedger append): nothing to dispatch.
                log.warn("store.reput_skipped_entry", offset=offset, error=str(exc))
                offset += size
                dispatcher.dispatched_offset = offset
                continue
            props = msg.properties
            req = DispatchRequest(
                msg.topic, msg.queue_id, msg.commit_log_offset, msg.store_size,
                compute_tags_code(msg.topic, props, msg.store_timestamp, self.delay_levels),
                msg.store_timestamp, msg.queue_offset, props.get(_KEYS), props.get(_UNIQ),
                msg.sys_flag)
            try:
                dispatcher.dispatch(req)
            except OSError as exc:
                log.error("store.reput_dispatch_failed", offset=offset, error=repr(exc))
                break  # retried at the next commit
            offset += size
            dispatcher.dispatched_offset = offset
            if req.has_queue_unit:
                key = (req.topic, req.queue_id)
                if table.get(key, 0) <= req.consume_queue_offset:
                    table[key] = req.consume_queue_offset + 1
                if listener is not None:
                    try:
                        listener(req.topic, req.queue_id, req.consume_queue_offset + 1,
                                 req.tags_code, req.store_timestamp, props)
                    except Exception:
                        log.exception("store.arriving_listener_failed", topic=req.topic,
                                      queue_id=req.queue_id)

    # ------------------------------------------------------------------ writing

    def _check_store_status(self) -> PutMessageStatus | None:
        refused = super()._check_store_status()
        if refused is not None:
            return refused
        node = self.node
        if node is None or not node.is_leader:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        return None

    def put_message_nowait(self, inner: MessageExtBrokerInner
                           ) -> PutMessageResult | Awaitable[PutMessageResult]:
        refused = self._refuse_put(inner)
        if refused is not None:
            return refused
        self.commit_log.apply_delay(inner)
        return self._append([inner])

    def put_messages_nowait(self, batch: Sequence[MessageExtBrokerInner] | UniformBatch
                            ) -> PutMessageResult | Awaitable[PutMessageResult]:
        inners = batch_inners(batch)
        refused = self._refuse_batch(inners)
        if refused is not None:
            return refused
        return self._append(inners)

    def _append(self, inners: Sequence[MessageExtBrokerInner]
                ) -> PutMessageResult | Awaitable[PutMessageResult]:
        """One entry per message; the answer once the last one is committed."""
        cl = self.dledger_log
        prepared = []
        for inner in inners:
            topic_b, props_b, store_host, size, refused = cl.prepare(inner)
            if refused is not None:
                return PutMessageResult(self._APPEND_STATUS[refused],
                                        AppendMessageResult(refused))
            prepared.append((inner, topic_b, props_b, store_host, size))
        dledger = self.dledger
        assert dledger is not None
        started = time.perf_counter()
        now = cl.clock_ms()
        last: asyncio.Future[int] | None = None
        wrote = 0
        for n, (inner, topic_b, props_b, store_host, size) in enumerate(prepared):
            def make(pos: int, inner: MessageExtBrokerInner = inner, topic_b: bytes = topic_b,
                     props_b: bytes = props_b, store_host: bytes = store_host) -> bytes:
                return bytes(cl.encode_record(inner, topic_b, props_b, store_host,
                                              pos + BODY_OFFSET, now))
            try:
                _, last = dledger.append(size, make)
            except RaftError as exc:
                status = _put_status(exc.code) if n == 0 else PutMessageStatus.UNKNOWN_ERROR
                return PutMessageResult(status)
            except (LogError, OSError) as exc:
                log.error("store.dledger_append_failed", topic=inner.topic, error=repr(exc))
                return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED if n == 0
                                        else PutMessageStatus.UNKNOWN_ERROR)
            cl.advance_queue_offset(inner)
            wrote += size
        first = inners[0]
        ids = [m.msg_id for m in inners]
        result = AppendMessageResult(
            AppendMessageStatus.PUT_OK, wrote_offset=first.commit_log_offset, wrote_bytes=wrote,
            msg_id=",".join(ids), store_timestamp=now, logics_offset=first.queue_offset,
            msg_num=len(ids), msg_ids=ids)
        observe = self.append_observer
        if observe is not None:
            observe(time.perf_counter() - started)
        assert last is not None
        return self._await_commit(result, last)

    @staticmethod
    async def _await_commit(result: AppendMessageResult, committed: asyncio.Future[int]
                            ) -> PutMessageResult:
        code = await asyncio.shield(committed)
        status = _put_status(code)
        if status is not PutMessageStatus.PUT_OK:
            try:
                name: str | int = C(code).name
            except ValueError:
                name = code
            log.warn("store.dledger_put_not_committed", offset=result.wrote_offset, code=name)
        return PutMessageResult(status, result)

    # ------------------------------------------------------------------ no HA; retention

    def get_commit_log_data(self, offset: int) -> memoryview | None:
        return None

    def append_to_commit_log(self, start_offset: int, data: bytes | bytearray | memoryview, *,
                             dispatch: bool = True) -> bool:
        return False

    async def delete_expired_commit_log_files(self, *, now_ms: int | None = None) -> int:
        """Delete expired DLedger data segments when due (module docstring); how many."""
        cleaner = self.cleaner
        cleaner.update_disk_state()
        cfg = self.config
        ds = self.dstore
        ratio = max(self._disk_used_ratio(self.dledger_dir), self._disk_used_ratio(ds.data.store_path))
        now = int(time.time() * 1000) if now_ms is None else now_ms
        time_up = is_it_time_to_do(cfg.delete_when, time.localtime(now / 1000).tm_hour)
        if not (time_up or ratio > _RATIO_CHECK_EXPIRED):
            return 0
        force = cfg.clean_file_forcibly_enable and ratio > _RATIO_FORCE_CLEAN
        reserved_ms = max(cfg.file_reserved_time + 1, 1) * 3600 * 1000
        found = ds.pos_size(ds.committed_index)
        keep = min(found[0] if found is not None else 0, self.dispatcher.dispatched_offset)
        data, index = ds.detach_expired(reserved_ms, now, force, keep)
        await cleaner.destroy_off_loop([*data, *index])
        return len(data)

    def runtime_info(self) -> dict[str, str]:
        info = super().runtime_info()
        node = self.node
        info["dLedgerRole"] = node.role.value if node is not None else ""
        info["dLedgerTerm"] = str(node.term if node is not None else -1)
        info["dLedgerLeaderId"] = (node.leader_id or "") if node is not None else ""
        info["dLedgerEndIndex"] = str(self.dstore.end_index)
        info["dLedgerCommittedIndex"] = str(self.dstore.committed_index)
        return info
