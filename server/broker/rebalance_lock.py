"""The broker's ordered-consumption lock table (upstream ``RebalanceLockManager``).

Contract (docs/PROTOCOL.md 4.7, 6.9):

* One entry per (consumer group, ``MessageQueue``): the client id holding it and the time
  of its last lock or re-lock. A lock is held while ``now - last_update <= 60 s``
  (``rocketmq.broker.rebalance.lockMaxLiveTime``; configurable here for tests).
* ``try_lock_batch(group, mqs, client_id)`` returns the subset of ``mqs`` now locked by
  ``client_id``: queues it already holds (refreshed), free queues and queues whose lock
  expired (taken over). Queues held by another live client are left out.
* ``unlock_batch`` releases only the queues ``client_id`` holds; another client's lock is
  never touched (upstream logs and ignores).
* Pure: no I/O, no event loop; the clock is injected (milliseconds). Every call runs on
  one event loop, so upstream's lock around the table is not needed.
* Bounded: a group's table holds one entry per queue ever locked; ``remove_expired``
  drops expired entries (the controller may call it periodically) and an unlock deletes
  the entry.
* In memory only, as upstream: after a broker restart every queue is free and the
  consumers take their queues again on their next re-lock (20 s).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import MessageQueue

__all__ = ["RebalanceLockManager", "LockEntry", "REBALANCE_LOCK_MAX_LIVE_TIME_MS"]

log = get_logger("aiorocketmq.broker.lock")

REBALANCE_LOCK_MAX_LIVE_TIME_MS = 60_000  # rocketmq.broker.rebalance.lockMaxLiveTime


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class LockEntry:
    """Who holds one queue, and since when it was last (re)locked."""

    __slots__ = ("client_id", "last_update_ms")

    def __init__(self, client_id: str, last_update_ms: int) -> None:
        self.client_id = client_id
        self.last_update_ms = last_update_ms

    def is_expired(self, now_ms: int, max_live_ms: int) -> bool:
        return now_ms - self.last_update_ms > max_live_ms

    def is_locked_by(self, client_id: str, now_ms: int, max_live_ms: int) -> bool:
        return self.client_id == client_id and not self.is_expired(now_ms, max_live_ms)

    def __repr__(self) -> str:
        return f"LockEntry({self.client_id!r}, last_update_ms={self.last_update_ms})"


class RebalanceLockManager:
    """(group, MessageQueue) -> ``LockEntry``; see the module docstring."""

    __slots__ = ("max_live_ms", "_clock_ms", "table")

    def __init__(self, *, max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS,
                 clock_ms: Callable[[], int] | None = None) -> None:
        if max_live_ms <= 0:
            raise ValueError(f"lock max live time must be positive, got {max_live_ms}")
        self.max_live_ms = max_live_ms
        self._clock_ms = clock_ms or _monotonic_ms
        self.table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """True when ``client_id`` holds a live lock on ``mq`` (without refreshing it)."""
        entry = self.table.get(group, {}).get(mq)
        return entry is not None and entry.is_locked_by(client_id, self._clock_ms(), self.max_live_ms)

    def holder(self, group: str, mq: MessageQueue) -> str | None:
        """The client id holding a live lock on ``mq``, or ``None``."""
        entry = self.table.get(group, {}).get(mq)
        if entry is None or entry.is_expired(self._clock_ms(), self.max_live_ms):
            return None
        return entry.client_id

    def try_lock(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        return mq in self.try_lock_batch(group, (mq,), client_id)

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str
                       ) -> list[MessageQueue]:
        """Lock what can be locked for ``client_id``; the queues it now holds, in input order."""
        now = self._clock_ms()
        max_live = self.max_live_ms
        entries = self.table.setdefault(group, {})
        locked: list[MessageQueue] = []
        for mq in mqs:
            entry = entries.get(mq)
            if entry is None:
                entries[mq] = LockEntry(client_id, now)
                log.info("broker.mq_locked", group=group, client_id=client_id, mq=str(mq))
                locked.append(mq)
            elif entry.client_id == client_id:
                # The holder re-locking refreshes its lock, expired or not (upstream isLocked
                # then the expired branch end in the same state).
                entry.last_update_ms = now
                locked.append(mq)
            elif entry.is_expired(now, max_live):
                log.warning("broker.mq_lock_expired_taken", group=group, old_client_id=entry.client_id,
                            client_id=client_id, mq=str(mq))
                entry.client_id = client_id
                entry.last_update_ms = now
                locked.append(mq)
            else:
                log.debug("broker.mq_lock_held_by_other", group=group, holder=entry.client_id,
                          client_id=client_id, mq=str(mq))
        if not entries:
            del self.table[group]
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> int:
        """Release the queues of ``mqs`` that ``client_id`` holds; how many were released."""
        entries = self.table.get(group)
        if entries is None:
            log.warning("broker.mq_unlock_group_missing", group=group, client_id=client_id)
            return 0
        released = 0
        for mq in mqs:
            entry = entries.get(mq)
            if entry is None:
                continue
            if entry.client_id == client_id:
                del entries[mq]
                released += 1
                log.info("broker.mq_unlocked", group=group, client_id=client_id, mq=str(mq))
            else:
                log.warning("broker.mq_unlock_not_holder", group=group, holder=entry.client_id,
                            client_id=client_id, mq=str(mq))
        if not entries:
            del self.table[group]
        return released

    def remove_expired(self) -> int:
        """Drop every expired entry; how many were dropped."""
        now = self._clock_ms()
        dropped = 0
        for group in list(self.table):
            entries = self.table[group]
            for mq in [mq for mq, e in entries.items() if e.is_expired(now, self.max_live_ms)]:
                del entries[mq]
                dropped += 1
            if not entries:
                del self.table[group]
        return dropped
