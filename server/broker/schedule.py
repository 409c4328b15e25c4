"""Delivery of delayed messages parked in ``SCHEDULE_TOPIC_XXXX`` (upstream ``ScheduleMessageService``).

Contract (docs/PROTOCOL.md 6.5, 6.9):

* The store parks a message whose ``DELAY`` level is positive in ``SCHEDULE_TOPIC_XXXX``
  queue ``level - 1`` (levels above the table clamped to the last), with ``REAL_TOPIC`` /
  ``REAL_QID`` added; its consume-queue tags code is the due time (store time + the level's
  delay, ``messageDelayLevel``). That part lives in the store (``CommitLog.apply_delay``).
* This service runs one routine per level. Each walks its queue in order from the level's
  offset; a unit whose due time has come is re-stored in ``REAL_TOPIC`` / ``REAL_QID``
  (``message_timeup``) and the offset moves past it. The routine then sleeps until the
  next unit is due or, when the queue is drained, until the store reports a new unit for
  that queue (``notify_message_arriving``): hold-and-notify, no fixed re-poll. A failed
  put is retried after 100 ms (``DELAY_FOR_A_WHILE``), a crashed pass after 10 s; neither
  skips the message. The first pass runs 1 s after start, as upstream.
* A due time further away than ``now + level delay`` (the wall clock went back) counts
  as due now (``correctDeliverTimestamp``).
* Upstream quirk kept: the delivered record's properties string is taken before ``DELAY``
  is cleared, so it still carries ``DELAY``, ``REAL_TOPIC``, ``REAL_QID`` and the original
  ``WAIT`` (vectors frame id 595); the store's own map has ``WAIT=false`` and no ``DELAY``
  (so it is not parked again). Records whose real topic is the transactional half topic
  are discarded, as upstream.
* Progress: ``offset_table`` (level -> next queue offset) is persisted to
  ``<storeRoot>/config/delayOffset.json`` in upstream's form ``{"offsetTable":{1:3,2:0}}``
  by the ``ConfigManager`` machinery (atomic write, ``.bak``), after every delivery
  (writes coalesce) and at ``stop()``. A restart resumes at the persisted offsets: a
  delivered message is delivered again only if the broker died before its offset was
  written (at-least-once, as upstream). An offset outside the queue's range after a
  restart is clamped into it.
* GET_ALL_DELAY_OFFSET (45) answers the same JSON (``AdminBrokerProcessor.getAllDelayOffset``).

Upstream: ``store/schedule/ScheduleMessageService.java``, ``DelayOffsetSerializeWrapper.java``,
``broker/processor/AdminBrokerProcessor.java`` (getAllDelayOffset).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import MessageConst, RequestCode, ResponseCode, SystemTopic
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.fastjson import dumps, loads
from aiorocketmq.protocol.message import MessageExt, encode_properties, socket_address_to_bytes
from aiorocketmq.protocol.routine import cancel_and_wait
from aiorocketmq.server.store.inner import MessageExtBrokerInner, PutMessageStatus

from .config_manager import ConfigManager

if TYPE_CHECKING:
    from aiorocketmq.server.store.message_store import MessageStore

__all__ = [
    "ScheduleMessageService",
    "message_timeup",
    "compute_deliver_timestamp",
    "correct_deliver_timestamp",
    "delay_level_to_queue_id",
    "queue_id_to_delay_level",
    "encode_delay_offsets",
    "decode_delay_offsets",
    "FIRST_DELAY_TIME",
    "DELAY_FOR_A_WHILE",
    "DELAY_FOR_A_PERIOD",
]

log = get_logger("aiorocketmq.broker.schedule")

FIRST_DELAY_TIME = 1.0  # FIRST_DELAY_TIME 1000 ms
DELAY_FOR_A_WHILE = 0.1  # DELAY_FOR_A_WHILE 100 ms: retry after a failed put
DELAY_FOR_A_PERIOD = 10.0  # DELAY_FOR_A_PERIOD 10 s: after an unexpected error

_SCHEDULE_TOPIC = SystemTopic.SCHEDULE_TOPIC
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
_REAL_TOPIC = MessageConst.PROPERTY_REAL_TOPIC
_REAL_QID = MessageConst.PROPERTY_REAL_QUEUE_ID
_DELIVERED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
              PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE)


# -- pure parts --------------------------------------------------------------------------


def delay_level_to_queue_id(level: int) -> int:
    return level - 1


def queue_id_to_delay_level(queue_id: int) -> int:
    return queue_id + 1


def compute_deliver_timestamp(delay_levels: Mapping[int, int], level: int, store_timestamp: int) -> int:
    """``computeDeliverTimestamp``: store time + the level's delay (1 s for an unknown level)."""
    return store_timestamp + delay_levels.get(level, 1000)


def correct_deliver_timestamp(now_ms: int, deliver_ms: int, level_delay_ms: int) -> int:
    """``correctDeliverTimestamp``: a due time beyond ``now + delay`` (clock went back) is now."""
    return now_ms if deliver_ms > now_ms + level_delay_ms else deliver_ms


def message_timeup(msg: MessageExt) -> MessageExtBrokerInner:
    """``messageTimeup``: the record to store in the real topic/queue for a parked message.

    Raises:
        ValueError: ``REAL_TOPIC`` or ``REAL_QID`` missing or not a number.
    """
    props = dict(msg.properties)
    stored = encode_properties(props)  # before DELAY is cleared: the upstream quirk
    real_topic = props.get(_REAL_TOPIC)
    real_qid = props.get(_REAL_QID)
    if not real_topic or real_qid is None:
        raise ValueError(f"parked message {msg.offset_msg_id} has no REAL_TOPIC/REAL_QID")
    props[_WAIT] = "false"
    props.pop(_DELAY, None)
    return MessageExtBrokerInner(
        topic=real_topic, queue_id=int(real_qid), body=msg.body, flag=msg.flag,
        properties=props, properties_string=stored, sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp, born_host=socket_address_to_bytes(msg.born_host),
        store_host=socket_address_to_bytes(msg.store_host), reconsume_times=msg.reconsume_times)


def encode_delay_offsets(table: Mapping[int, int]) -> bytes:
    """``DelayOffsetSerializeWrapper`` as fastjson writes it: ``{"offsetTable":{1:3}}``."""
    return dumps({"offsetTable": {int(k): int(v) for k, v in sorted(table.items())}})


def decode_delay_offsets(data: bytes | str) -> dict[int, int]:
    """Read ``delayOffset.json`` (bare or quoted integer keys).

    Raises:
        ValueError: not a JSON object with an ``offsetTable`` map of numbers.
    """
    obj = loads(data)
    if not isinstance(obj, dict):
        raise ValueError("delay offsets: not a JSON object")
    table = obj.get("offsetTable") or {}
    if not isinstance(table, dict):
        raise ValueError("delay offsets: offsetTable is not a map")
    return {int(k): int(v) for k, v in table.items()}


# -- the service -------------------------------------------------------------------------


class ScheduleMessageService(ConfigManager):
    """Per-level delivery routines and their persisted offsets; see the module docstring."""

    def __init__(self, store: MessageStore, store_root: str | Path) -> None:
        super().__init__(Path(store_root) / "config" / "delayOffset.json")
        self._store = store
        self.delay_levels: dict[int, int] = dict(store.delay_levels)
        self.max_delay_level = max(self.delay_levels) if self.delay_levels else 0
        self.offset_table: dict[int, int] = {}
        self._wakeups: dict[int, asyncio.Event] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False

    # -- ConfigManager ------------------------------------------------------------------

    def snapshot(self) -> dict[int, int]:
        return dict(self.offset_table)

    def encode_snapshot(self, entries: dict[int, int]) -> bytes:
        return encode_delay_offsets(entries)

    def decode(self, data: bytes) -> None:
        self.offset_table = decode_delay_offsets(data)

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the persistence routine and one delivery routine per level (after ``load``)."""
        super().start()
        self.start_delivery()

    def start_delivery(self) -> None:
        """Start one delivery routine per level, unless running (a broker becoming master)."""
        if self._running:
            return
        self._running = True
        loop = asyncio.get_running_loop()
        for level in sorted(self.delay_levels):
            self._wakeups[level] = asyncio.Event()
            self._tasks.append(loop.create_task(self._deliver_routine(level),
                                                name=f"ScheduleMessageTimer_{level}"))

    async def stop_delivery(self) -> None:
        """Stop the delivery routines and keep the persistence one (a DLedger broker that
        stops leading: upstream ``handleScheduleMessageService(SLAVE)``). Idempotent."""
        self._running = False
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        self._wakeups.clear()

    async def stop(self) -> None:
        """Stop the routines, then write the offsets once more. Idempotent."""
        await self.stop_delivery()
        await super().stop()

    def notify_message_arriving(self, topic: str, queue_id: int) -> None:
        """Store callback: a unit was added to ``topic``/``queue_id`` (wakes that level)."""
        if topic != _SCHEDULE_TOPIC:
            return
        event = self._wakeups.get(queue_id_to_delay_level(queue_id))
        if event is not None:
            event.set()

    def build_running_stats(self, stats: dict[str, str]) -> None:
        """``buildRunningStats``: ``scheduleMessageOffset_<level>`` = ``"<offset>,<max offset>"``
        for every level with a recorded offset (GET_BROKER_RUNTIME_INFO, vectors frame 1013)."""
        for level, offset in self.offset_table.items():
            max_offset = self._store.get_max_offset_in_queue(
                _SCHEDULE_TOPIC, delay_level_to_queue_id(level))
            stats[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"

    # -- GET_ALL_DELAY_OFFSET -----------------------------------------------------------

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset}

    def get_all_delay_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.create_response(ResponseCode.SUCCESS, None, None, self.encode())

    # -- delivery -----------------------------------------------------------------------

    async def _deliver_routine(self, level: int) -> None:
        wakeup = self._wakeups[level]
        await asyncio.sleep(FIRST_DELAY_TIME)
        while True:
            wakeup.clear()
            try:
                wait = await self.deliver_due(level)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug or a corrupt record must not end delivery for the level for good.
                log.exception("broker.schedule.deliver_failed", level=level,
                              offset=self.offset_table.get(level, 0))
                wait = DELAY_FOR_A_PERIOD
            if wait is None:
                await wakeup.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), wait)

    async def deliver_due(self, level: int) -> float | None:
        """Deliver every due message of ``level`` in order.

        Returns:
            seconds until the next parked message is due (or until a failed put is
            retried), or ``None`` when the level's queue is drained.
        """
        store = self._store
        cq = store.find_consume_queue(_SCHEDULE_TOPIC, delay_level_to_queue_id(level))
        if cq is None:
            return None
        offset = self._valid_offset(level, cq.min_offset, cq.max_offset)
        clock_ms = store.commit_log.clock_ms
        level_delay = self.delay_levels[level]
        while offset < cq.max_offset:
            unit = cq.get_unit(offset)
            if unit is None:
                offset = self._advance(level, offset + 1)
                continue
            phy_offset, _size, tags_code = unit
            now = clock_ms()
            due = correct_deliver_timestamp(now, tags_code, level_delay)
            if due > now:
                return (due - now) / 1000
            msg = store.look_message_by_offset(phy_offset)
            if msg is None:
                log.warning("broker.schedule.parked_message_missing", level=level, offset=offset,
                            phy_offset=phy_offset)
                offset = self._advance(level, offset + 1)
                continue
            try:
                inner = message_timeup(msg)
            except ValueError as exc:
                log.error("broker.schedule.parked_message_invalid", level=level, offset=offset, error=str(exc))
                offset = self._advance(level, offset + 1)
                continue
            if inner.topic == SystemTopic.TRANS_HALF_TOPIC:
                log.error("broker.schedule.half_message_discarded", level=level, offset=offset,
                          msg_id=msg.offset_msg_id)
                offset = self._advance(level, offset + 1)
                continue
            result = await store.put_message(inner)
            if result.status not in _DELIVERED:
                log.warning("broker.schedule.deliver_put_failed", level=level, offset=offset,
                            topic=inner.topic, status=result.status.name)
                return DELAY_FOR_A_WHILE
            log.debug("broker.schedule.delivered", level=level, offset=offset, topic=inner.topic,
                      queue_id=inner.queue_id, msg_id=inner.msg_id)
            offset = self._advance(level, offset + 1)
        return None

    def _advance(self, level: int, offset: int) -> int:
        self.offset_table[level] = offset
        self.mark_dirty()
        return offset

    def _valid_offset(self, level: int, min_offset: int, max_offset: int) -> int:
        offset = self.offset_table.get(level, 0)
        if offset < min_offset or offset > max_offset:
            fixed = min_offset if offset < min_offset else max_offset
            log.error("broker.schedule.offset_invalid", level=level, offset=offset, min_offset=min_offset,
                      max_offset=max_offset, reset_to=fixed)
            offset = self._advance(level, fixed)
        return offset
