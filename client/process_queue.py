"""ProcessQueue: the messages pulled for one queue and not yet consumed.

Upstream ``org.apache.rocketmq.client.impl.consumer.ProcessQueue`` (docs/PROTOCOL.md 8):
an offset-ordered cache (Java's ``msgTreeMap``), message count and body size for flow
control, the span between the lowest and highest cached offsets, the orderly "consuming"
subset (``consumingMsgOrderlyTreeMap``) with ``commit`` / ``rollback``, and the per-queue
flags the rebalance and pull loops read: ``dropped``, ``locked``, last pull / consume /
lock times.

``remove_message`` returns the offset that is safe to commit: the lowest offset still
cached, or one past the highest offset ever cached when nothing is left; ``-1`` when the
cache was already empty (nothing to commit). Only the event loop touches a ProcessQueue,
so upstream's read/write lock has no counterpart. Times are kept on the monotonic clock
for the expiry checks and reported as wall-clock milliseconds like Java's.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable

from aiorocketmq.protocol.bodies import ProcessQueueInfo
from aiorocketmq.protocol.codes import MessageConst
from aiorocketmq.protocol.message import MessageExt

__all__ = [
    "ProcessQueue",
    "REBALANCE_LOCK_MAX_LIVE_TIME_MS",
    "REBALANCE_LOCK_INTERVAL_MS",
    "PULL_MAX_IDLE_TIME_MS",
]

# rocketmq.client.rebalance.lockMaxLiveTime / lockInterval, rocketmq.client.pull.pullMaxIdleTime
REBALANCE_LOCK_MAX_LIVE_TIME_MS = 30_000
REBALANCE_LOCK_INTERVAL_MS = 20_000
PULL_MAX_IDLE_TIME_MS = 120_000

_MAX_OFFSET = MessageConst.PROPERTY_MAX_OFFSET


def _mono_ms() -> float:
    return time.monotonic() * 1000.0


class ProcessQueue:
    """Cached messages of one MessageQueue, ordered by queue offset.

    Args:
        clock: monotonic milliseconds (tests pass a fake one).
    """

    __slots__ = (
        "_msgs",
        "_offsets",
        "_consuming_orderly",
        "msg_count",
        "msg_size",
        "queue_offset_max",
        "dropped",
        "locked",
        "consuming",
        "msg_acc_cnt",
        "try_unlock_times",
        "_clock",
        "last_pull_time",
        "last_consume_time",
        "last_lock_time",
        "consume_lock",
    )

    def __init__(self, clock: Callable[[], float] = _mono_ms) -> None:
        self._msgs: dict[int, MessageExt] = {}
        self._offsets: list[int] = []  # sorted keys of _msgs (TreeMap order)
        self._consuming_orderly: dict[int, MessageExt] = {}
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.dropped = False
        self.locked = False
        self.consuming = False
        self.msg_acc_cnt = 0
        self.try_unlock_times = 0
        self._clock = clock
        now = clock()
        self.last_pull_time = now
        self.last_consume_time = now
        self.last_lock_time = now
        # Orderly consumption holds it while a listener runs; rebalance takes it before
        # giving the queue's broker lock away (upstream ProcessQueue.consumeLock).
        self.consume_lock = asyncio.Lock()

    # -- flags and times --------------------------------------------------------------------

    def touch_pull(self) -> None:
        self.last_pull_time = self._clock()

    def touch_lock(self) -> None:
        self.last_lock_time = self._clock()

    def is_lock_expired(self) -> bool:
        return self._clock() - self.last_lock_time > REBALANCE_LOCK_MAX_LIVE_TIME_MS

    def is_pull_expired(self) -> bool:
        return self._clock() - self.last_pull_time > PULL_MAX_IDLE_TIME_MS

    # -- the cache --------------------------------------------------------------------------

    def put_messages(self, msgs: Iterable[MessageExt]) -> bool:
        """Cache pulled messages; True when a consume round should be dispatched.

        A message whose offset is already cached replaces it without being counted again
        (``TreeMap.put``). Dispatch is asked for once until ``take_messages`` finds the
        cache empty again (orderly), as upstream's ``consuming`` flag does.
        """
        msgs_ = msgs if isinstance(msgs, list) else list(msgs)
        cache = self._msgs
        offsets = self._offsets
        valid = 0
        for msg in msgs_:
            off = msg.queue_offset
            if off in cache:
                cache[off] = msg
                continue
            cache[off] = msg
            if not offsets or off > offsets[-1]:
                offsets.append(off)
            else:
                insort(offsets, off)
            valid += 1
            self.queue_offset_max = off
            self.msg_size += len(msg.body)
        self.msg_count += valid
        dispatch = False
        if cache and not self.consuming:
            dispatch = True
            self.consuming = True
        if msgs_:
            last = msgs_[-1]
            prop = last.properties.get(_MAX_OFFSET)
            if prop is not None:
                try:
                    acc = int(prop) - last.queue_offset
                except ValueError:
                    acc = 0
                if acc > 0:
                    self.msg_acc_cnt = acc
        return dispatch

    @property
    def max_span(self) -> int:
        """Highest minus lowest cached offset (flow control for concurrent consumers)."""
        offsets = self._offsets
        return offsets[-1] - offsets[0] if offsets else 0

    @property
    def cached_count(self) -> int:
        return len(self._msgs)

    def has_temp_message(self) -> bool:
        return bool(self._msgs)

    def first_offset(self) -> int | None:
        return self._offsets[0] if self._offsets else None

    def _discard(self, off: int) -> MessageExt | None:
        msg = self._msgs.pop(off, None)
        if msg is not None:
            offsets = self._offsets
            i = bisect_left(offsets, off)
            del offsets[i]
        return msg

    def remove_message(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages; the offset now safe to commit, or -1 (see module doc)."""
        self.last_consume_time = self._clock()
        if not self._msgs:
            return -1
        result = self.queue_offset_max + 1
        removed = 0
        for msg in msgs:
            if self._discard(msg.queue_offset) is not None:
                removed += 1
                self.msg_size -= len(msg.body)
        self.msg_count -= removed
        if self._offsets:
            result = self._offsets[0]
        return result

    # -- orderly consumption ----------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to ``batch_size`` lowest-offset messages into the consuming set (orderly)."""
        self.last_consume_time = self._clock()
        out: list[MessageExt] = []
        offsets = self._offsets
        if offsets:
            n = min(batch_size, len(offsets))
            taken = offsets[:n]
            del offsets[:n]
            cache = self._msgs
            consuming = self._consuming_orderly
            for off in taken:
                msg = cache.pop(off)
                out.append(msg)
                consuming[off] = msg
        if not out:
            self.consuming = False
        return out

    def commit(self) -> int:
        """Orderly success: drop the consuming set; the offset to commit, or -1."""
        consuming = self._consuming_orderly
        if not consuming:
            return -1
        last = max(consuming)
        self.msg_count -= len(consuming)
        self.msg_size -= sum(len(m.body) for m in consuming.values())
        consuming.clear()
        return last + 1

    def rollback(self) -> None:
        """Put the whole consuming set back in the cache."""
        self.make_message_to_consume_again(list(self._consuming_orderly.values()))

    def make_message_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        cache = self._msgs
        for msg in msgs:
            off = msg.queue_offset
            self._consuming_orderly.pop(off, None)
            if off not in cache:
                insort(self._offsets, off)
            cache[off] = msg

    def clear(self) -> None:
        self._msgs.clear()
        self._offsets.clear()
        self._consuming_orderly.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0

    def messages(self) -> list[MessageExt]:
        """The cached messages in offset order (a copy)."""
        return [self._msgs[o] for o in self._offsets]

    # -- reporting --------------------------------------------------------------------------

    def _wall_ms(self, mono_ms: float) -> int:
        return int(time.time() * 1000 - (self._clock() - mono_ms))

    def info(self) -> ProcessQueueInfo:
        """``fillProcessQueueInfo``: this queue's entry of ConsumerRunningInfo.mqTable."""
        offsets = self._offsets
        consuming = self._consuming_orderly
        return ProcessQueueInfo(
            cached_msg_min_offset=offsets[0] if offsets else 0,
            cached_msg_max_offset=offsets[-1] if offsets else 0,
            cached_msg_count=len(offsets),
            cached_msg_size_in_mib=self.msg_size // (1024 * 1024) if offsets else 0,
            transaction_msg_min_offset=min(consuming) if consuming else 0,
            transaction_msg_max_offset=max(consuming) if consuming else 0,
            transaction_msg_count=len(consuming),
            locked=self.locked,
            try_unlock_times=self.try_unlock_times,
            last_lock_timestamp=self._wall_ms(self.last_lock_time),
            dropped=self.dropped,
            last_pull_timestamp=self._wall_ms(self.last_pull_time),
            last_consume_timestamp=self._wall_ms(self.last_consume_time),
        )

    def __repr__(self) -> str:
        return (f"ProcessQueue(count={self.msg_count}, size={self.msg_size}, "
                f"span={self.max_span}, dropped={self.dropped}, locked={self.locked})")
