"""Hold-and-notify long polling (upstream ``PullRequestHoldService``; docs/PROTOCOL.md 6.2).

Contract:

* ``suspend(pull)`` parks a pull that found nothing under ``topic@queueId`` until
  ``pull.deadline`` (loop time). It returns ``False`` when a cap is reached; the caller
  then answers at once (see "Bounds").
* ``notify_message_arriving(topic, queue_id, max_offset, tags_code, properties)`` is the
  store's message-arriving listener: it runs inline on the event loop, takes the queue's
  parked pulls and hands every one whose ``offset < max_offset`` and whose filter matches
  the new message (its tags code, then, for SQL92, its ``properties``; upstream
  ``isMatchedByConsumeQueue`` then ``isMatchedByCommitLog``: a pull is not woken for a
  message it would not select) to ``wakeup(channel, request)`` (the pull processor re-runs the request with
  suspension disallowed and answers with ``channel.send_response``). No polling: a put
  wakes its waiters within the same loop iteration that dispatched it.
* Each parked pull also has its own expiry timer at its deadline, which re-runs it once
  (typically answering PULL_NOT_FOUND with nextBeginOffset = offset). Upstream only
  checks expiry in its periodic pass, answering up to 5 s late; we answer at the deadline.
* A checker pass every 5 s (every ``shortPollingTimeMills`` with long polling disabled)
  compares each parked queue's max offset with the parked offsets, catching anything a
  notification did not cover.
* ``drop_channel(channel)`` forgets the parked pulls of a closed connection.
* ``wake_observer`` (optional, metrics): called for each woken pull with the seconds from
  the notification to its answer being queued (expiries are not wake-ups).

Bounds (not upstream, which is bounded only by memory): at most
``max_per_queue`` (``maxSuspendedPullsPerQueue``, default 1024) parked pulls per queue and
``max_total`` (``maxSuspendedPulls``, default 65536) overall. Beyond a cap the pull is not
parked and the processor answers ``SYSTEM_BUSY``, which makes a Java push consumer back
off (``pullTimeDelayMillsWhenException``) instead of re-pulling in a tight loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.routine import Routine

__all__ = ["PullRequest", "PullRequestHoldService", "CHECK_INTERVAL_MS"]

log = get_logger("aiorocketmq.broker.long_polling")

CHECK_INTERVAL_MS = 5000  # PullRequestHoldService.run: waitForRunning(5 * 1000)

_perf = time.perf_counter

WakeupCallback = Callable[[Channel, RemotingCommand], None]


class MessageFilterLike(Protocol):
    """What a parked pull asks of its filter (``broker.filter.ExpressionMessageFilter``)."""

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool: ...

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool: ...
MaxOffsetLookup = Callable[[str, int], int]


class PullRequest:
    """One parked pull: where to answer, what to re-run, from which offset, with which filter.

    ``code_set`` is the subscription's tag-code set, or ``None`` to accept every tag
    (``*``, no subscription, or a non-TAG expression). ``message_filter``, when given, is the
    pull's ``ExpressionMessageFilter`` and decides instead (tags code, then properties).
    """

    __slots__ = ("channel", "request", "key", "offset", "code_set", "deadline", "timer",
                 "message_filter")

    def __init__(self, channel: Channel, request: RemotingCommand, topic: str, queue_id: int,
                 offset: int, code_set: frozenset[int] | None, deadline: float,
                 message_filter: MessageFilterLike | None = None) -> None:
        self.channel = channel
        self.request = request
        self.key = f"{topic}@{queue_id}"
        self.offset = offset
        self.code_set = code_set
        self.deadline = deadline
        self.timer: asyncio.TimerHandle | None = None
        self.message_filter = message_filter

    def matches(self, tags_code: int | None, properties: Mapping[str, str] | None = None) -> bool:
        """``isMatchedByConsumeQueue``, then (with properties) ``isMatchedByCommitLog``."""
        mf = self.message_filter
        if mf is not None:
            if not mf.is_matched_by_consume_queue(tags_code):
                return False
            return properties is None or mf.is_matched_by_commit_log(properties)
        code_set = self.code_set
        if code_set is None or tags_code is None:
            return True
        # Java compares tagsCode.intValue(): the low 32 bits, signed.
        low = tags_code & 0xFFFFFFFF
        return (low - 0x100000000 if low >= 0x80000000 else low) in code_set


class PullRequestHoldService:
    """Parked pulls keyed by ``topic@queueId``; see the module docstring."""

    def __init__(
        self,
        *,
        wakeup: WakeupCallback,
        max_offset: MaxOffsetLookup,
        long_polling_enable: bool = True,
        short_polling_time_ms: int = 1000,
        max_per_queue: int = 1024,
        max_total: int = 65536,
    ) -> None:
        self._wakeup = wakeup
        self._max_offset = max_offset
        self._check_interval = (CHECK_INTERVAL_MS if long_polling_enable
                                else short_polling_time_ms) / 1000
        self.max_per_queue = max_per_queue
        self.max_total = max_total
        self._table: dict[str, list[PullRequest]] = {}
        self._total = 0
        self._routine = Routine(self._check_routine, "PullRequestHoldService")
        self._stopped = False
        self.wake_observer: Callable[[float], None] | None = None

    @property
    def suspended_count(self) -> int:
        return self._total

    # -- parking --------------------------------------------------------------------------

    def suspend(self, pull: PullRequest) -> bool:
        """Park ``pull``; ``False`` (not parked) when the broker is stopping or a cap is full."""
        if self._stopped:
            return False
        if self._total >= self.max_total:
            log.warning("broker.pull_hold_full", scope="broker", limit=self.max_total, key=pull.key)
            return False
        waiting = self._table.get(pull.key)
        if waiting is None:
            waiting = self._table[pull.key] = []
        elif len(waiting) >= self.max_per_queue:
            log.warning("broker.pull_hold_full", scope="queue", limit=self.max_per_queue,
                        key=pull.key)
            return False
        waiting.append(pull)
        self._total += 1
        pull.timer = asyncio.get_running_loop().call_at(pull.deadline, self._expire, pull)
        return True

    def _remove(self, pull: PullRequest) -> bool:
        waiting = self._table.get(pull.key)
        if waiting is None:
            return False
        try:
            waiting.remove(pull)
        except ValueError:
            return False
        self._total -= 1
        if not waiting:
            del self._table[pull.key]
        return True

    def _run(self, pull: PullRequest) -> None:
        if pull.timer is not None:
            pull.timer.cancel()
            pull.timer = None
        if pull.channel.is_closed:
            return
        try:
            self._wakeup(pull.channel, pull.request)
        except Exception:
            log.exception("broker.pull_wakeup_failed", key=pull.key, peer=pull.channel.remote_addr,
                          opaque=pull.request.opaque)

    def _expire(self, pull: PullRequest) -> None:
        pull.timer = None
        if self._remove(pull):
            self._run(pull)

    # -- waking -----------------------------------------------------------------------------

    def is_waiting(self, topic: str, queue_id: int) -> bool:
        """Whether a pull of ``topic@queue_id`` is parked."""
        table = self._table
        return bool(table) and bool(table.get(f"{topic}@{queue_id}"))

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int,
                                tags_code: int | None = None,
                                properties: Mapping[str, str] | None = None) -> None:
        """Wake the parked pulls of ``topic@queue_id`` that the new message satisfies.

        Without ``tags_code`` and ``properties`` (the periodic check) every pull behind
        ``max_offset`` is woken; its re-run then scans and filters what arrived.
        """
        table = self._table
        if not table:
            return  # no pull parked anywhere: every put while producers outrun consumers
        key = f"{topic}@{queue_id}"
        waiting = table.get(key)
        if not waiting:
            return
        observe = self.wake_observer
        started = _perf() if observe is not None else 0.0
        ready: list[PullRequest] = []
        keep: list[PullRequest] = []
        newest = max_offset
        for pull in waiting:
            if newest <= pull.offset:
                # As upstream: a late notification may carry an older max; ask the store.
                newest = max(newest, self._max_offset(topic, queue_id))
            if newest > pull.offset and pull.matches(tags_code, properties):
                ready.append(pull)
            else:
                keep.append(pull)
        if not ready:
            return
        if keep:
            self._table[key] = keep
        else:
            del self._table[key]
        self._total -= len(ready)
        for pull in ready:
            self._run(pull)
            if observe is not None:
                observe(_perf() - started)

    def check_hold_requests(self) -> None:
        """One checker pass (upstream ``checkHoldRequest``): re-run pulls behind the max offset."""
        for key in list(self._table):
            topic, _, qid = key.rpartition("@")
            try:
                queue_id = int(qid)
                max_offset = self._max_offset(topic, queue_id)
            except Exception:
                log.exception("broker.pull_check_failed", key=key)
                continue
            self.notify_message_arriving(topic, queue_id, max_offset, None)

    def drop_channel(self, channel: Channel) -> int:
        """Forget the parked pulls of ``channel`` (closed connection); the number dropped."""
        dropped = 0
        for key in list(self._table):
            waiting = self._table[key]
            keep = [p for p in waiting if p.channel is not channel]
            if len(keep) == len(waiting):
                continue
            for pull in waiting:
                if pull.channel is channel and pull.timer is not None:
                    pull.timer.cancel()
                    pull.timer = None
            dropped += len(waiting) - len(keep)
            if keep:
                self._table[key] = keep
            else:
                del self._table[key]
        self._total -= dropped
        return dropped

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._routine.start()

    async def _check_routine(self) -> None:
        while True:
            await asyncio.sleep(self._check_interval)
            self.check_hold_requests()

    async def stop(self) -> None:
        """Answer every parked pull now (with what the store holds) and stop the checker."""
        self._stopped = True
        await self._routine.stop()
        pending = [p for waiting in self._table.values() for p in waiting]
        self._table.clear()
        self._total = 0
        for pull in pending:
            self._run(pull)
