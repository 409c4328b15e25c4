"""``TimerMessageStore``: timer messages parked in ``rmq_sys_wheel_timer`` and put back when due
(upstream 5.x ``TimerMessageStore`` and the timer part of ``HookUtils.handleScheduleMessage``).

Accepting (``check_and_transform``, a store put hook and, for its answer codes, a send hook):

* Only NOT or COMMIT transaction types (half messages are timed when committed), never a
  record already on ``rmq_sys_wheel_timer`` (a roll) nor one carrying ``TIMER_OUT_MS``.
  A timer message has ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS`` or ``TIMER_DELIVER_MS``;
  a positive ``DELAY`` level wins: those three are removed and the level applies.
* ``timerWheelEnable=false``: WHEEL_TIMER_NOT_ENABLE. Delivery time: ``now + sec * 1000``,
  else ``now + ms``, else the absolute ms (Java ``Long.parseLong``, int64 arithmetic
  wrapping as Java's); a value that does not parse: WHEEL_TIMER_MSG_ILLEGAL.
* Due at or before now: stored as it is, a plain message (a ``TIMER_DEL_UNIQKEY`` one is
  WHEEL_TIMER_MSG_ILLEGAL). Later than ``timerMaxDelaySec`` from now: WHEEL_TIMER_MSG_ILLEGAL.
  Else the time is floored to the precision (``wheel.floor_deliver_ms``); a slot holding
  more than ``timerCongestNumEachSlot`` messages refuses some (WHEEL_TIMER_FLOW_CONTROL,
  ``isReject``: all beyond twice that). The message gets ``TIMER_OUT_MS`` (the slot time),
  ``REAL_TOPIC``, ``REAL_QID`` and goes to ``rmq_sys_wheel_timer`` queue 0.

Moving (one routine on the event loop, master only; ``run_once`` is one pass of it):

* Enqueue: every new unit of ``rmq_sys_wheel_timer`` queue 0 becomes a 52-byte timer-log
  unit chained into the wheel slot of its ``TIMER_OUT_MS`` (``doEnqueue``); a time more than
  ``timerRollWindowSlot`` slots ahead goes to a nearer slot marked roll, where the message
  is parked again (``TIMER_ROLL_TIMES`` + 1) to be enqueued anew. A unit already due when
  read (a backlog) is put back at once with ``TIMER_ENQUEUE_MS`` = 2^63-1, as upstream.
* Dequeue: the wheel's read time follows the write time (the wall clock floored to the
  precision); each slot before it is read back along its chain (oldest first) and its
  messages put back: real topic and queue, body, flag, sysflag, born data, reconsume times
  and every property, plus ``TIMER_ENQUEUE_MS`` (the unit's write time) and
  ``TIMER_DEQUEUE_MS`` (now). The stored properties keep ``REAL_TOPIC`` / ``REAL_QID``;
  the store's map has ``WAIT=false`` and neither (upstream's ``convertMessage``). A slot is
  read one precision after its time: never before the delivery time, at most one precision
  after it (plus the time the pass takes). Delete units (``TIMER_DEL_UNIQKEY`` =
  ``<real topic>+<UNIQ_KEY>``) cancel the normal message of that key in their slot and are
  not delivered themselves.
* A put refused for a passing reason (store not running, disk full, file creation) is
  retried 100 ms later, forever: no message is dropped (upstream gives up after 3 tries
  unless ``timerEnableRetryUntilSuccess``). A put refused for good (illegal, too large)
  is logged and skipped.

Exactly once across restarts, SIGKILL included: wheel, log and checkpoint are written
through their mappings (a killed process loses none of it). Each delivered unit gets a
mark in the log; a slot re-read after a restart skips marked units; the read time moves
past a slot only when all of its units are delivered. Before a put back the checkpoint
records it (``set_inflight``: what, and the commit-log offset where it lands); the mark or
queue offset follows the put without an ``await`` between; a restart that finds the record
of a put it has no mark for (the process died between the two) marks it instead of
delivering again. Recovery: the timer log is checked from the checkpoint's position to its
end (a torn unit is cut), the wheel revised for units beyond that position, the queue
offset moved past them; the read time resumes from the checkpoint (at most one wheel turn,
seven days at 1 s precision, back), so messages that fell due while the broker was down
are put back at once. After a power loss (msync'ed every ``timerFlushIntervalMs``) a
message may be delivered twice, never lost, as upstream.

DLedger mode (a replicated commit log): the timer store runs on the leader only. Every
member builds the timer topic's queue from committed entries, so a new leader's
``load_as_leader`` brings its own wheel and timer log up to date from that queue (a member
that never led starts from the queue's beginning, as stock rebuilds from the commit log).
Parked records already in the log when it became leader may have been put back by an
earlier leader, which left no mark here: until they are passed, each one is looked up by
its UNIQ_KEY in the index before it is put back (its put back has the same UNIQ_KEY,
TIMER_OUT_MS and born time, a TIMER_DEQUEUE_MS, a larger offset, in its real topic; a
roll's next parking is on the timer topic) and marked instead when found. A put back that
the old leader appended but never got committed is not in the log, so it is put back again:
each timer message is delivered once across failovers. ``suspend`` stops it when the
member stops leading. Without an index (``messageIndexEnable=false``) nothing is found and
a failover may deliver twice.

Master/slave mode: a slave runs no timer store; it replicates the parked records and their
put backs with the commit log, and copies its master's counts (``SlaveSynchronize``). A
store started as a slave removes the wheel, log and checkpoint it may keep from a time it
was a master (they no longer account for what the master puts back). ``load`` on a store
with no checkpoint while the timer topic's queue holds units (a slave's store restarted as
a master) rebuilds from the queue's beginning, counts anew, and sets ``verify_below`` to
the commit log's end, as ``load_as_leader`` does, kept in the checkpoint (a restart before
the wheel has passed those records still looks them up): each is delivered once.

Files: ``<root>/timerwheel``, ``<root>/timerlog/``, ``<root>/config/timercheck``
(``wheel.py``, ``log.py``, ``checkpoint.py``), and ``<root>/config/timermetrics``
(``metrics.py``: pending timers per real topic, -1 when a unit is put back or cancelled). Timer-log segments whose records left the
commit log are deleted every 30 s.

Upstream: ``store/timer/TimerMessageStore.java``, ``broker/util/HookUtils.java``
(``handleScheduleMessage``, ``checkIfTimerMessage``, ``transformTimerMessage``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import random
import re
import shutil
import threading
import time
from typing import TYPE_CHECKING, Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag, ResponseCode, SystemTopic
from aiorocketmq.protocol.javautil import java_string_hash
from aiorocketmq.protocol.message import MessageExt, encode_properties, socket_address_to_bytes
from aiorocketmq.protocol.routine import cancel_and_wait

from ..inner import MessageExtBrokerInner, PutMessageResult, PutMessageStatus
from .checkpoint import INFLIGHT_EXPIRED, INFLIGHT_NONE, INFLIGHT_UNIT, TimerCheckpoint
from .log import (
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    UNIT_SIZE,
    TimerLog,
    TimerUnit,
    encode_unit,
)
from .metrics import TimerMetrics
from .wheel import IGNORE, TimerWheel, floor_deliver_ms, snap_precision

if TYPE_CHECKING:
    from ..config import MessageStoreConfig
    from ..message_store import MessageStore

__all__ = ["TimerMessageStore", "TIMER_TOPIC", "TIMER_WHEEL_TTL_DAY", "DAY_SECS",
           "TIMER_BLANK_SLOTS", "LONG_MAX", "parse_java_long", "build_delete_key", "refusal"]

log = get_logger("aiorocketmq.store.timer")

TIMER_TOPIC = SystemTopic.TIMER_TOPIC
TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 24 * 3600
TIMER_BLANK_SLOTS = 60
LONG_MAX = (1 << 63) - 1
RETRY_WAIT = 0.1  # seconds before a refused put is tried again
CLEAN_INTERVAL = 30.0  # seconds between timer-log retention passes
_YIELD_EVERY = 256  # units handled between two yields to the event loop

_DELIVER_MS = MessageConst.PROPERTY_TIMER_DELIVER_MS
_DELAY_SEC = MessageConst.PROPERTY_TIMER_DELAY_SEC
_DELAY_MS = MessageConst.PROPERTY_TIMER_DELAY_MS
_OUT_MS = MessageConst.PROPERTY_TIMER_OUT_MS
_ENQUEUE_MS = MessageConst.PROPERTY_TIMER_ENQUEUE_MS
_DEQUEUE_MS = MessageConst.PROPERTY_TIMER_DEQUEUE_MS
_ROLL_TIMES = MessageConst.PROPERTY_TIMER_ROLL_TIMES
_DEL_UNIQKEY = MessageConst.PROPERTY_TIMER_DEL_UNIQKEY
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_REAL_TOPIC = MessageConst.PROPERTY_REAL_TOPIC
_REAL_QID = MessageConst.PROPERTY_REAL_QUEUE_ID
_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_HALF_TOPIC = SystemTopic.TRANS_HALF_TOPIC
_JAVA_LONG = re.compile(r"[+-]?[0-9]+\Z")
_DONE = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                   PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE})
_NO_RETRY = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                       PutMessageStatus.WHEEL_TIMER_NOT_ENABLE, PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
                       PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL})


def _wrap64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def parse_java_long(text: str) -> int:
    """``Long.parseLong``: an optional sign and decimal digits within int64.

    Raises:
        ValueError: anything else (blank, spaces, a fraction, out of range).
    """
    if not _JAVA_LONG.match(text):
        raise ValueError(f"not a Java long: {text!r}")
    value = int(text)
    if not -(1 << 63) <= value <= LONG_MAX:
        raise ValueError(f"out of the Java long range: {text!r}")
    return value


def build_delete_key(real_topic: str | None, uniq_key: str) -> str:
    """``TimerMessageStore.buildDeleteKey``: what a delete message's TIMER_DEL_UNIQKEY holds."""
    return f"{real_topic}+{uniq_key}"


def refusal(status: PutMessageStatus, config: MessageStoreConfig) -> tuple[int, str]:
    """The send answer for a WHEEL_TIMER_* status (``SendMessageProcessor.handlePutMessageResult``)."""
    if status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL:
        return ResponseCode.MESSAGE_ILLEGAL, (
            "timer message illegal, the delay time should not be bigger than the max delay "
            f"{config.timer_max_delay_sec * 1000}ms; or if set del msg, the delay time should be "
            "bigger than the current time")
    if status is PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL:
        n = config.timer_congest_num_each_slot
        return ResponseCode.SYSTEM_ERROR, (
            f"timer message is under flow control, max num limit is {n * 2} or the current value "
            f"is greater than {n} and less than {n * 2}, trigger random flow control")
    if status is PutMessageStatus.WHEEL_TIMER_NOT_ENABLE:
        enabled = "true" if config.timer_wheel_enable else "false"
        return ResponseCode.SYSTEM_ERROR, (
            f"accurate timer message is not enabled, timerWheelEnable is {enabled}")
    return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"


class _Tps:
    """Enqueue and put-back rates: counts since the last window of >= 1 s (upstream's
    ``perfCounterTicks`` ``getLastTps``)."""

    __slots__ = ("enqueued", "dequeued", "_at", "_last_enq", "_last_deq", "_rates")

    def __init__(self) -> None:
        self.enqueued = 0
        self.dequeued = 0
        self._at = time.monotonic()
        self._last_enq = self._last_deq = 0
        self._rates = (0.0, 0.0)

    def rates(self) -> tuple[float, float]:
        now = time.monotonic()
        span = now - self._at
        if span >= 1.0:
            self._rates = ((self.enqueued - self._last_enq) / span,
                           (self.dequeued - self._last_deq) / span)
            self._at, self._last_enq, self._last_deq = now, self.enqueued, self.dequeued
        return self._rates


class TimerMessageStore:
    """Timer messages of one broker's store; see the module docstring."""

    def __init__(self, store: MessageStore, config: MessageStoreConfig) -> None:
        self.store = store
        self.config = config
        self.precision_ms = snap_precision(config.timer_precision_ms)
        self.slots_total = TIMER_WHEEL_TTL_DAY * DAY_SECS
        roll = config.timer_roll_window_slot
        if roll > self.slots_total - TIMER_BLANK_SLOTS or roll < 2:
            roll = self.slots_total - TIMER_BLANK_SLOTS
        self.roll_window_slots = roll
        root = config.store_path_root_dir
        self.wheel_path = os.path.join(root, "timerwheel")
        self.log_path = os.path.join(root, "timerlog")
        self.checkpoint_path = os.path.join(root, "config", "timercheck")
        self.wheel: TimerWheel | None = None
        self.timer_log: TimerLog | None = None
        self.checkpoint: TimerCheckpoint | None = None
        self.metrics = TimerMetrics(os.path.join(root, "config", "timermetrics"))
        self._tps = _Tps()
        self.curr_read_ms = 0
        self.curr_write_ms = 0
        self.queue_offset = 0
        # Counters since start (runtime info, tests).
        self.enqueued = 0
        self.delivered = 0
        self.rolled = 0
        self.deleted = 0
        self.skipped = 0
        self.recovered_inflight = 0
        self._clock = store.commit_log.clock_ms
        self._wakeup: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._files_lock = threading.Lock()  # a flush thread against closing the mappings
        self._state = "new"
        # Replicated log (DLedger mode): parked records below this commit-log offset may have
        # been put back by another leader; each is looked up before it is put back.
        self.verify_below = -1
        self.verified_skips = 0
        self._claimed: set[int] = set()  # put backs found so (one per parked record)
        if config.is_slave and not config.is_dledger and os.path.exists(self.checkpoint_path):
            self._discard_files()

    # -- accepting (HookUtils.handleScheduleMessage) ------------------------------------

    def check_and_transform(self, inner: MessageExtBrokerInner) -> PutMessageStatus | None:
        """Park a timer message on ``rmq_sys_wheel_timer`` or refuse it; ``None`` = go on."""
        props = inner.properties
        if _DELIVER_MS not in props and _DELAY_SEC not in props and _DELAY_MS not in props:
            return None
        tx = inner.sys_flag & 0xC
        if (tx != 0 and tx != _COMMIT) or inner.topic == TIMER_TOPIC or inner.topic == _HALF_TOPIC:
            return None
        level = props.get(_DELAY)
        if level:
            try:
                positive = int(level) > 0
            except ValueError:
                positive = False
            if positive:  # a delay level wins; the store re-encodes the properties
                for key in (_DELIVER_MS, _DELAY_SEC, _DELAY_MS):
                    props.pop(key, None)
                return None
        if _OUT_MS in props:
            return None
        if not self.config.timer_wheel_enable:
            return PutMessageStatus.WHEEL_TIMER_NOT_ENABLE
        now = self._clock()
        try:
            if _DELAY_SEC in props:
                deliver = _wrap64(now + _wrap64(parse_java_long(props[_DELAY_SEC]) * 1000))
            elif _DELAY_MS in props:
                deliver = _wrap64(now + parse_java_long(props[_DELAY_MS]))
            else:
                deliver = parse_java_long(props[_DELIVER_MS])
        except ValueError:
            return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
        if deliver <= now:
            if _DEL_UNIQKEY in props:
                return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
            return None  # due already: a plain message
        if deliver - now > self.config.timer_max_delay_sec * 1000:
            return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
        deliver = floor_deliver_ms(deliver, self.precision_ms)
        if self.is_reject(deliver):
            return PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL
        props[_OUT_MS] = str(deliver)
        props[_REAL_TOPIC] = inner.topic
        props[_REAL_QID] = str(inner.queue_id)
        inner.properties_string = encode_properties(props)
        inner.topic = TIMER_TOPIC
        inner.queue_id = 0
        return None

    def is_reject(self, deliver_ms: int) -> bool:
        """``isReject``: slot flow control by ``timerCongestNumEachSlot``."""
        if self.wheel is None:
            return False
        limit = self.config.timer_congest_num_each_slot
        congest = self.wheel.get_num(deliver_ms)
        if congest <= limit:
            return False
        if congest >= limit * 2:
            return True
        return random.randrange(1000) > 1000 * (congest - limit) / (limit + 0.1)

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._state == "running"

    def load(self) -> None:
        """Open the files and recover (after the store's own recovery). Idempotent.

        Raises:
            ValueError: a wheel file of another size, or a timer-log segment of another size.
            OSError: the files cannot be created or mapped.
        """
        if self.wheel is not None:
            return
        self.wheel = TimerWheel(self.wheel_path, self.slots_total, self.precision_ms)
        self.timer_log = TimerLog(self.log_path, self.config.mapped_file_size_timer_log)
        self.timer_log.load()
        self.checkpoint = TimerCheckpoint(self.checkpoint_path)
        self.metrics = TimerMetrics(self.metrics.path)
        self.metrics.load()
        self._recover()
        ckpt = self.checkpoint
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if not ckpt.existed and cq is not None and cq.max_offset > 0:
            # A store that ran as a slave: rebuilt from the timer topic; the records parked
            # here may have been put back by its old master (module docstring). The counts
            # (a slave's copy of its master's) are counted anew.
            ckpt.verify_below = self.store.commit_log.max_offset
            self.metrics.clear()
            log.info("store.timer.rebuilt_from_timer_topic", verify_below=ckpt.verify_below,
                     queue_offset=self.queue_offset)
        self.verify_below = ckpt.verify_below
        self._state = "loaded"

    def start(self) -> None:
        """Start the enqueue/dequeue routine and the flush routine (after ``load``)."""
        if self._state != "loaded":
            raise RuntimeError(f"TimerMessageStore.start(): timer store is {self._state}")
        self._state = "running"
        self._wakeup = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._routine(), name="TimerMessageStore"),
                       loop.create_task(self._flush_routine(), name="TimerFlushService")]
        log.info("store.timer.started", read_time_ms=self.curr_read_ms, queue_offset=self.queue_offset,
                 precision_ms=self.precision_ms, timer_log_end=self._log().max_offset)

    async def shutdown(self) -> None:
        """Stop the routines, write everything down once more, close the files. Idempotent."""
        if self._state in ("stopped", "new"):
            self._state = "stopped"
            return
        self._state = "stopping"
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        try:
            await asyncio.get_running_loop().run_in_executor(None, self._flush_files, self._log().take_marked(),
                                                             self.metrics.snapshot())
        except OSError as exc:
            log.error("store.timer.final_flush_failed", error=repr(exc))
        self._close()
        self._state = "stopped"
        log.info("store.timer.stopped", read_time_ms=self.curr_read_ms, queue_offset=self.queue_offset)

    def close(self) -> None:
        """Close the files without the final flush (a store that was loaded, never started)."""
        self._close()
        self._state = "stopped"

    def load_as_leader(self) -> None:
        """``load`` for a member that just became the leader of a replicated log (DLedger
        mode): every parked record already in the log may have been put back by an earlier
        leader, so until the wheel has passed them each is looked up (by its UNIQ_KEY in the
        index) before it is put back, and one found put back is marked instead."""
        self.load()
        self.verify_below = self._ckpt().verify_below = self.store.commit_log.max_offset
        self._claimed.clear()
        log.info("store.timer.leader_loaded", verify_below=self.verify_below,
                 queue_offset=self.queue_offset, read_time_ms=self.curr_read_ms)

    async def suspend(self) -> None:
        """Stop as ``shutdown`` does, then go back to the state before ``load`` (a leader that
        lost its role: ``load_as_leader`` and ``start`` may follow again)."""
        await self.shutdown()
        self.wheel = None
        self.timer_log = None
        self.checkpoint = None
        self._state = "new"

    def _discard_files(self) -> None:
        """A store started as a slave (not DLedger): the wheel, log and checkpoint it kept
        from a time it was a master no longer account for what its master puts back; they
        go, and a start as a master rebuilds them from the timer topic (``load``)."""
        try:
            for path in (self.checkpoint_path, self.wheel_path):
                if os.path.exists(path):
                    os.remove(path)
            shutil.rmtree(self.log_path, ignore_errors=True)
        except OSError as exc:
            log.error("store.timer.discard_failed", error=repr(exc))
            return
        log.info("store.timer.discarded_on_slave", root=self.config.store_path_root_dir)

    def _close(self) -> None:
        with self._files_lock:
            for part in (self.wheel, self.timer_log, self.checkpoint):
                if part is not None:
                    part.close()

    def notify_message_arriving(self, topic: str, queue_id: int) -> None:
        """Store callback: a unit was added to ``topic``/``queue_id`` (wakes the enqueue)."""
        if topic == TIMER_TOPIC and self._wakeup is not None:
            self._wakeup.set()

    # -- accessors ------------------------------------------------------------------------

    def _wheel(self) -> TimerWheel:
        assert self.wheel is not None, "timer store not loaded"
        return self.wheel

    def _log(self) -> TimerLog:
        assert self.timer_log is not None, "timer store not loaded"
        return self.timer_log

    def _ckpt(self) -> TimerCheckpoint:
        assert self.checkpoint is not None, "timer store not loaded"
        return self.checkpoint

    def format_time(self, time_ms: int) -> int:
        return time_ms // self.precision_ms * self.precision_ms

    def enqueue_behind_messages(self) -> int:
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        return (cq.max_offset if cq is not None else 0) - self.queue_offset

    def dequeue_behind_ms(self) -> int:
        return self._clock() - self.curr_read_ms

    def congest_num(self, deliver_ms: int) -> int:
        return self._wheel().get_num(deliver_ms)

    def tps(self) -> tuple[float, float]:
        """Timers enqueued and put back per second, over the last few seconds."""
        return self._tps.rates()

    def pending_by_topic(self) -> dict[str, int]:
        """Timers waiting, per real topic (``TimerMetrics``)."""
        return {topic: pair[0] for topic, pair in self.metrics.timing_count.items()}

    def pending_num(self) -> int:
        """Messages counted in the wheel's live slots from the read time (``getAllCongestNum``)."""
        return self._wheel().get_all_num(self.curr_read_ms)

    # -- recovery -------------------------------------------------------------------------

    def _recover(self) -> None:
        wheel, tlog, ckpt = self._wheel(), self._log(), self._ckpt()
        begin = ckpt.last_timer_log_flush_pos
        end, beyond, last = tlog.recover(begin)
        queue_offset = ckpt.last_timer_queue_offset
        if begin <= end:
            for unit in beyond:  # appended, slot not yet updated, when the process died
                wheel.revise_slot(unit.slot_time_ms, IGNORE, unit.pos, True)
            if beyond:
                queue_offset = max(queue_offset, self._queue_offset_after(beyond[-1]))
        else:
            # The log lost its tail (power loss): rebuild slot ends from what is left, and
            # enqueue again whatever the lost units held.
            read_from = max(ckpt.last_read_time_ms, self._earliest_read_time())
            least = wheel.check_phy_pos(read_from, end - 1)
            if least < end:
                for unit in tlog.iter_units(least):
                    wheel.revise_slot(unit.slot_time_ms, IGNORE, unit.pos, True)
            queue_offset = min(queue_offset, self._queue_offset_after(last) if last else 0)
            log.warning("store.timer.log_lost_tail", checkpoint_pos=begin, end=end)
        ckpt.last_timer_log_flush_pos = end
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is not None:
            queue_offset = min(max(queue_offset, cq.min_offset), cq.max_offset)
        self.queue_offset = queue_offset
        ckpt.last_timer_queue_offset = queue_offset
        now = self._clock()
        self.curr_read_ms = max(self.format_time(ckpt.last_read_time_ms), self._earliest_read_time())
        ckpt.last_read_time_ms = self.curr_read_ms
        self.curr_write_ms = self.format_time(now)
        self._resolve_inflight()
        log.info("store.timer.recovered", timer_log_end=end, revised=len(beyond),
                 queue_offset=self.queue_offset, read_time_ms=self.curr_read_ms,
                 existed=ckpt.existed)

    def _earliest_read_time(self) -> int:
        p = self.precision_ms
        return self.format_time(self._clock()) - self.slots_total * p + TIMER_BLANK_SLOTS * p

    def _queue_offset_after(self, unit: TimerUnit) -> int:
        """One past the timer-topic queue offset of the record ``unit`` points at."""
        msg = self.store.look_message_by_offset(unit.offset_py)
        if msg is None or msg.topic != TIMER_TOPIC:
            return 0
        return msg.queue_offset + 1

    def _resolve_inflight(self) -> None:
        """Mark the put a killed process made but did not record (module docstring)."""
        ckpt, tlog = self._ckpt(), self._log()
        kind, key, expected = ckpt.inflight
        if kind == INFLIGHT_NONE:
            return
        parked: MessageExt | None = None
        unit: TimerUnit | None = None
        if kind == INFLIGHT_UNIT:
            unit = tlog.read_unit(key)
            if unit is not None and unit.delivered_ms == 0:
                parked = self.store.look_message_by_offset(unit.offset_py)
        elif kind == INFLIGHT_EXPIRED and key == self.queue_offset:
            cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
            cq_unit = cq.get_unit(key) if cq is not None else None
            if cq_unit is not None:
                parked = self.store.look_message_by_offset(cq_unit[0])
        if parked is not None and self._put_landed(parked, expected):
            self.recovered_inflight += 1
            if unit is not None:
                tlog.mark_delivered(unit.pos, self._clock())
            else:
                self._advance_queue_offset(key + 1)
            log.info("store.timer.inflight_recovered", kind=kind, key=key, offset=expected)
        ckpt.clear_inflight()

    def _put_landed(self, parked: MessageExt, expected: int) -> bool:
        """Whether the record at ``expected`` (or, past a segment's end, at the next segment's
        start) is the put back of ``parked``."""
        store = self.store
        size = store.config.mapped_file_size_commit_log
        for offset in (expected, expected + size - expected % size):
            msg = store.look_message_by_offset(offset)
            if msg is None:
                continue
            props = msg.properties
            return (_DEQUEUE_MS in props and msg.body == parked.body
                    and msg.born_timestamp == parked.born_timestamp
                    and props.get(_UNIQ) == parked.properties.get(_UNIQ)
                    and props.get(_OUT_MS) == parked.properties.get(_OUT_MS))
        return False

    # -- the routines ---------------------------------------------------------------------

    async def _routine(self) -> None:
        wakeup = self._wakeup
        assert wakeup is not None
        while True:
            wakeup.clear()
            try:
                retry = not await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug or a broken record must not end timer delivery for good.
                log.exception("store.timer.pass_failed", read_time_ms=self.curr_read_ms,
                              queue_offset=self.queue_offset)
                retry = True
            if retry:
                wait = RETRY_WAIT
            else:
                now = self._clock()
                wait = (self.format_time(now) + self.precision_ms - now + 1) / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wakeup.wait(), wait)

    async def run_once(self) -> bool:
        """One pass: move the write time, enqueue what arrived, deliver every due slot.

        Returns False when a put was refused and has to be retried.
        """
        self.curr_write_ms = max(self.curr_write_ms, self.format_time(self._clock()))
        if not await self._enqueue_all():
            return False
        return await self._dequeue_due()

    async def _flush_routine(self) -> None:
        loop = asyncio.get_running_loop()
        interval = max(self.config.timer_flush_interval_ms, 10) / 1000
        since_clean = 0.0
        last = (-1, -1)
        while True:
            await asyncio.sleep(interval)
            ckpt = self._ckpt()
            state = (self.curr_read_ms, self.queue_offset)
            if state != last:
                ckpt.next_version(self._clock())
                last = state
            try:
                await loop.run_in_executor(None, self._flush_files, self._log().take_marked(),
                                           self.metrics.snapshot())
            except OSError as exc:
                log.error("store.timer.flush_failed", error=repr(exc))
            since_clean += interval
            if since_clean >= CLEAN_INTERVAL:
                since_clean = 0.0
                await self.clean_expired_files()

    def _flush_files(self, marked: list[Any], metrics: tuple[int, bytes] | None = None) -> None:
        with self._files_lock:
            self._log().flush(marked)
            self._wheel().flush()
            self._ckpt().flush()
        if metrics is not None:
            self.metrics.write(metrics)

    async def clean_expired_files(self) -> int:
        """Delete timer-log segments whose records left the commit log; how many."""
        gone = self._log().detach_expired(self.store.get_min_phy_offset())
        if gone:
            def destroy_all() -> None:
                for mf in gone:
                    mf.destroy()

            await asyncio.get_running_loop().run_in_executor(None, destroy_all)
            log.info("store.timer.log_files_deleted", count=len(gone))
        return len(gone)

    # -- enqueue --------------------------------------------------------------------------

    def _advance_queue_offset(self, offset: int) -> None:
        self.queue_offset = offset
        self._ckpt().last_timer_queue_offset = offset

    async def _enqueue_all(self) -> bool:
        store = self.store
        cq = store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return True
        if self.queue_offset < cq.min_offset:
            log.warning("store.timer.queue_offset_below_min", queue_offset=self.queue_offset,
                        min_offset=cq.min_offset)
            self._advance_queue_offset(cq.min_offset)
        handled = 0
        while self.queue_offset < cq.max_offset:
            q = self.queue_offset
            unit = cq.get_unit(q)
            if unit is None:
                self._advance_queue_offset(q + 1)
                continue
            phy, size, _tags = unit
            msg = store.look_message_by_offset(phy)
            if msg is None:
                log.warning("store.timer.enqueue_miss", queue_offset=q, offset=phy)
                self._advance_queue_offset(q + 1)
                continue
            if not self._enqueue_one(q, phy, size, msg):
                return False
            handled += 1
            if handled % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
        return True

    def _enqueue_one(self, q: int, phy: int, size: int, msg: MessageExt) -> bool:
        try:
            delayed = parse_java_long(msg.properties.get(_OUT_MS, ""))
        except ValueError:
            log.error("store.timer.no_timer_out_ms", queue_offset=q, offset=phy)
            self._advance_queue_offset(q + 1)
            return True
        if delayed < self.curr_write_ms:
            # Due already when read (a backlog): put back at once (upstream's
            # "enqueue but expired", TIMER_ENQUEUE_MS = Long.MAX_VALUE).
            return self._deliver(msg, INFLIGHT_EXPIRED, q, LONG_MAX, roll=False)
        try:
            self._do_enqueue(phy, size, delayed, msg)
        except OSError as exc:
            log.error("store.timer.log_append_failed", error=repr(exc))
            return False
        self.enqueued += 1
        self._tps.enqueued += 1
        self._advance_queue_offset(q + 1)
        return True

    def _do_enqueue(self, offset_py: int, size_py: int, delayed: int, msg: MessageExt) -> None:
        """``doEnqueue``: append a unit to the log and chain it into its slot."""
        wheel, tlog = self._wheel(), self._log()
        write = self.curr_write_ms
        p = self.precision_ms
        window = self.roll_window_slots * p
        magic = MAGIC_DEFAULT
        if delayed - write >= window:
            magic |= MAGIC_ROLL
            if delayed - write - window < self.roll_window_slots // 3 * p:
                delayed = write + self.roll_window_slots // 2 * p
            else:
                delayed = write + window
        is_delete = _DEL_UNIQKEY in msg.properties
        if is_delete:
            magic |= MAGIC_DELETE
        real_topic = msg.properties.get(_REAL_TOPIC)
        slot = wheel.get_slot(delayed)
        pos = tlog.append(encode_unit(slot.last_pos, magic, write, delayed - write, offset_py,
                                      size_py, java_string_hash(real_topic) if real_topic else 0))
        wheel.put_slot(delayed, pos if slot.first_pos == -1 else slot.first_pos, pos,
                       slot.num - 1 if is_delete else slot.num + 1, slot.magic)
        if real_topic and not is_delete:
            self.metrics.add(real_topic, 1)
        self._ckpt().last_timer_log_flush_pos = pos + UNIT_SIZE

    # -- dequeue --------------------------------------------------------------------------

    def _move_read_time(self, time_ms: int) -> None:
        self.curr_read_ms = time_ms
        self._ckpt().last_read_time_ms = time_ms

    async def _dequeue_due(self) -> bool:
        wheel = self._wheel()
        p = self.precision_ms
        while self.curr_read_ms < self.curr_write_ms:
            nxt = next(wheel.live_slots(self.curr_read_ms, self.curr_write_ms), None)
            if nxt is None:
                self._move_read_time(self.curr_write_ms)
                break
            if nxt > self.curr_read_ms:
                self._move_read_time(nxt)
            if not await self._dequeue_slot(nxt):
                return False
            self._move_read_time(nxt + p)
            await asyncio.sleep(0)
        return True

    def _chain(self, last_pos: int) -> list[TimerUnit]:
        """The units of a slot, oldest first, following ``prev_pos`` from ``last_pos``."""
        tlog = self._log()
        units: list[TimerUnit] = []
        pos = last_pos
        seen = 0
        while pos >= 0:
            unit = tlog.read_unit(pos)
            if unit is None:
                log.warning("store.timer.chain_broken", pos=pos)
                break
            units.append(unit)
            pos = unit.prev_pos
            seen += 1
            if seen > (1 << 31):  # a loop in a damaged log
                break
        units.reverse()
        return units

    async def _dequeue_slot(self, time_ms: int) -> bool:
        """Deliver every unmarked unit of the slot at ``time_ms``; False to retry later."""
        slot = self._wheel().get_slot(time_ms)
        if slot.time_ms == -1:
            return True
        units = self._chain(slot.last_pos)
        store = self.store
        deleted: set[str] = set()
        normal: list[TimerUnit] = []
        for unit in units:
            if unit.is_delete and not unit.is_roll:
                msg = store.look_message_by_offset(unit.offset_py)
                if msg is not None and _DEL_UNIQKEY in msg.properties:
                    deleted.add(msg.properties[_DEL_UNIQKEY])
                if unit.delivered_ms == 0:
                    self._log().mark_delivered(unit.pos, self._clock())
            elif unit.delivered_ms == 0:
                normal.append(unit)
        handled = 0
        for unit in normal:
            msg = store.look_message_by_offset(unit.offset_py)
            if msg is None:
                log.warning("store.timer.dequeue_miss", pos=unit.pos, offset=unit.offset_py)
                self.skipped += 1
                self._log().mark_delivered(unit.pos, self._clock())
                continue
            uniq = msg.properties.get(_UNIQ)
            if deleted and uniq and build_delete_key(msg.properties.get(_REAL_TOPIC), uniq) in deleted:
                self.deleted += 1
                self._log().mark_delivered(unit.pos, self._clock())
                self._uncount(msg)
                continue
            if not self._deliver(msg, INFLIGHT_UNIT, unit.pos, unit.write_time_ms, roll=unit.is_roll):
                return False
            handled += 1
            if handled % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
        return True

    # -- putting back ---------------------------------------------------------------------

    def convert(self, msg: MessageExt, enqueue_time: int, roll: bool) -> MessageExtBrokerInner:
        """``convert`` + ``convertMessage``: the record to put back for a parked message."""
        props = dict(msg.properties)
        if enqueue_time != -1:
            props[_ENQUEUE_MS] = str(enqueue_time)
        if roll:
            try:
                times = parse_java_long(props.get(_ROLL_TIMES, "0")) + 1
            except ValueError:
                times = 1
            props[_ROLL_TIMES] = str(times)
        props[_DEQUEUE_MS] = str(self._clock())
        stored = encode_properties(props)
        if roll:
            topic, queue_id = msg.topic, msg.queue_id
        else:
            real_topic = props.pop(_REAL_TOPIC, None)
            real_qid = props.pop(_REAL_QID, None)
            if not real_topic or real_qid is None:
                raise ValueError(f"parked message {msg.offset_msg_id} has no REAL_TOPIC/REAL_QID")
            topic, queue_id = real_topic, int(real_qid)
        props[_WAIT] = "false"
        return MessageExtBrokerInner(
            topic=topic, queue_id=queue_id, body=msg.body, flag=msg.flag, properties=props,
            properties_string=stored, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
            born_host=socket_address_to_bytes(msg.born_host),
            store_host=socket_address_to_bytes(msg.store_host), reconsume_times=msg.reconsume_times)

    def _deliver(self, msg: MessageExt, kind: int, key: int, enqueue_time: int, roll: bool) -> bool:
        """Put ``msg`` back (or park it again for a roll) and record it; False to retry later.

        No ``await`` from the in-flight record to the mark: see the module docstring.
        """
        ckpt = self._ckpt()
        try:
            inner = self.convert(msg, enqueue_time, roll)
        except ValueError as exc:
            log.error("store.timer.parked_message_invalid", error=str(exc))
            self.skipped += 1
            self._done(kind, key, msg)
            return True
        if _DEL_UNIQKEY in inner.properties and not roll:
            # doPut: a delete message is never delivered itself.
            self._done(kind, key, msg)
            return True
        if 0 <= msg.commit_log_offset < self.verify_below and self._put_back_already(msg, roll):
            self.verified_skips += 1
            self._done(kind, key, msg)
            return True
        ckpt.set_inflight(kind, key, self.store.commit_log.max_offset)
        result: Any = self.store.put_message_nowait(inner)
        if not isinstance(result, PutMessageResult):
            # Not expected (WAIT=false answers at once); the record is appended already.
            if inspect.isawaitable(result):
                asyncio.ensure_future(result)
            status = PutMessageStatus.PUT_OK
        else:
            status = result.status
        if status not in _DONE:
            if status in _NO_RETRY:
                log.error("store.timer.put_back_refused", status=status.name, topic=inner.topic,
                          msg_id=msg.msg_id)
                self.skipped += 1
                self._done(kind, key, msg)
                ckpt.clear_inflight()
                return True
            ckpt.clear_inflight()
            log.warning("store.timer.put_back_failed", status=status.name, topic=inner.topic)
            return False
        self._done(kind, key, msg)
        ckpt.clear_inflight()
        if roll:
            self.rolled += 1
        else:
            self.delivered += 1
            self._tps.dequeued += 1
        return True

    def _put_back_already(self, parked: MessageExt, roll: bool) -> bool:
        """Whether the log holds, after ``parked``, its put back (same UNIQ_KEY and
        TIMER_OUT_MS, with TIMER_DEQUEUE_MS) in its real topic, or for a roll its next parking
        on the timer topic (found through the index; without an index nothing is found)."""
        store = self.store
        index = store.index
        uniq = parked.properties.get(_UNIQ)
        if index is None or not uniq:
            return False
        topic = parked.topic if roll else parked.properties.get(_REAL_TOPIC)
        if not topic:
            return False
        out_ms = parked.properties.get(_OUT_MS)
        found = index.query(topic, uniq, 64, 0, LONG_MAX)
        for phy in sorted(set(found.phy_offsets)):
            if phy <= parked.commit_log_offset or phy in self._claimed:
                continue
            msg = store.look_message_by_offset(phy)
            if msg is None or msg.topic != topic:
                continue
            props = msg.properties
            if (props.get(_UNIQ) == uniq and props.get(_OUT_MS) == out_ms and _DEQUEUE_MS in props
                    and msg.born_timestamp == parked.born_timestamp):
                log.info("store.timer.put_back_found", topic=topic, uniq_key=uniq, offset=phy)
                self._claimed.add(phy)
                return True
        return False

    def _uncount(self, msg: MessageExt) -> None:
        """A unit left the wheel (put back, or cancelled): -1 for its real topic."""
        topic = msg.properties.get(_REAL_TOPIC)
        if topic:
            self.metrics.add(topic, -1)

    def _done(self, kind: int, key: int, msg: MessageExt) -> None:
        self._record_done(kind, key)
        if kind == INFLIGHT_UNIT:
            self._uncount(msg)

    def _record_done(self, kind: int, key: int) -> None:
        if kind == INFLIGHT_UNIT:
            self._log().mark_delivered(key, self._clock())
        else:
            self._advance_queue_offset(key + 1)
