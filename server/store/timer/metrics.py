"""Pending timers per real topic, ``<storeRoot>/config/timermetrics`` (upstream ``TimerMetrics``).

Contract:

* ``timing_count``: real topic -> ``[count, timestamp]``. As upstream's ``addMetric``: a unit
  appended to the timer log counts +1 for its ``REAL_TOPIC`` (a delete unit -1), a put back
  (a delivery or a roll's parking again) -1; a message already due when read (put back at
  once, ``TIMER_ENQUEUE_MS`` = 2^63-1) is not counted either way. So a count is the timers of
  that topic still waiting; ``total`` is their sum (memory: one entry per topic).
* ``encode()``: upstream's ``TimerMetricsSerializeWrapper`` JSON, the body of
  GET_TIMER_METRICS (61) and the file's content:
  ``{"dataVersion":{"counter":..,"timestamp":..},"timingCount":{"<topic>":{"count":..,"timeStamp":..}}}``.
  ``add`` moves the DataVersion on, as upstream's ``addAndGet``.
* ``persist()`` writes the file atomically (every ``timerFlushIntervalMs`` with the other
  timer files, and at shutdown); ``load()`` reads it back (a missing or damaged file: empty).
  As upstream, the counts are only as fresh as the last write: after a SIGKILL they miss
  what changed since (at most one flush interval); the timers themselves are not affected.
* ``adopt_master(body)``: a slave's copy of its master's GET_TIMER_METRICS answer, replaced
  and written when it differs (``SlaveSynchronize``); ``clear()``: every count forgotten
  (a timer store rebuilt from the timer topic counts anew).

Upstream: ``store/timer/TimerMetrics.java``, ``TimerMessageStore.addMetric``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.atomic_file import write_file_atomic

__all__ = ["TimerMetrics"]

log = get_logger("aiorocketmq.store.timer")


def _now_ms() -> int:
    return int(time.time() * 1000)


class TimerMetrics:
    """Pending timers per real topic; see the module docstring."""

    __slots__ = ("path", "timing_count", "counter", "timestamp", "_persisted")

    def __init__(self, path: str) -> None:
        self.path = path
        self.timing_count: dict[str, list[int]] = {}
        self.counter = 0
        self.timestamp = _now_ms()
        self._persisted = -1

    def add(self, topic: str, value: int) -> None:
        pair = self.timing_count.get(topic)
        now = _now_ms()
        if pair is None:
            pair = self.timing_count[topic] = [0, now]
        pair[0] += value
        pair[1] = now
        self.counter += 1
        self.timestamp = now

    def count(self, topic: str) -> int:
        pair = self.timing_count.get(topic)
        return 0 if pair is None else pair[0]

    @property
    def total(self) -> int:
        return sum(pair[0] for pair in self.timing_count.values())

    def remove(self, topic: str) -> None:
        """``removeTimingCount`` (a deleted topic)."""
        self.timing_count.pop(topic, None)

    def to_json(self) -> dict[str, object]:
        return {"dataVersion": {"counter": self.counter, "timestamp": self.timestamp},
                "timingCount": {topic: {"count": c, "timeStamp": ts}
                                for topic, (c, ts) in self.timing_count.items()}}

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode("utf-8")

    def load(self) -> None:
        try:
            raw = Path(self.path).read_bytes()
        except FileNotFoundError:
            return
        try:
            self._adopt(raw)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("store.timer.metrics_unreadable", path=self.path, error=repr(exc))
        self._persisted = self.counter

    def _adopt(self, raw: bytes) -> bool:
        """Take the counts and DataVersion of an encoded body; False when they are ours already.

        Raises:
            ValueError, TypeError, KeyError, AttributeError: not such a body.
        """
        data = json.loads(raw)
        version = data.get("dataVersion") or {}
        counts = {str(topic): [int(m["count"]), int(m.get("timeStamp", 0))]
                  for topic, m in (data.get("timingCount") or {}).items()}
        counter, timestamp = int(version.get("counter", 0)), int(version.get("timestamp", 0))
        if (counter, timestamp) == (self.counter, self.timestamp) and counts == self.timing_count:
            return False
        self.timing_count = counts
        self.counter, self.timestamp = counter, timestamp
        return True

    def adopt_master(self, body: bytes) -> bool:
        """A slave's copy of its master's GET_TIMER_METRICS answer (upstream
        ``SlaveSynchronize.syncTimerMetrics``): replaced and written when the DataVersion
        differs; True when it was.

        Raises:
            ValueError: not a TimerMetrics body.
            OSError: the file cannot be written.
        """
        try:
            changed = self._adopt(body)
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a timer metrics body: {exc!r}") from exc
        if changed:
            self.write((self.counter, self.encode()))
        return changed

    def clear(self) -> None:
        """Forget every count (a timer store rebuilt from the timer topic counts anew)."""
        self.timing_count = {}
        self.counter += 1
        self.timestamp = _now_ms()

    def snapshot(self) -> tuple[int, bytes] | None:
        """What ``write`` needs, taken on the event loop; None when nothing changed since the
        last write."""
        if self.counter == self._persisted:
            return None
        return self.counter, self.encode()

    def write(self, snap: tuple[int, bytes]) -> None:
        """Write a snapshot atomically (may run on a worker thread)."""
        write_file_atomic(Path(self.path), snap[1])
        self._persisted = snap[0]

    def persist(self) -> None:
        snap = self.snapshot()
        if snap is not None:
            self.write(snap)
