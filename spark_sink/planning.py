"""Micro-batch planning: how far each queue advances, and how ranges become Spark partitions.

Contract (pure functions, no I/O, no clock: the caller passes ``now_ms``):

* ``rate_limit(start, latest, max_total)`` caps a batch at ``max_total`` messages, split
  across queues in proportion to each queue's backlog (largest remainder, so the sum is
  exactly ``max_total`` when the backlog exceeds it and no queue passes its latest offset);
  the same inputs always give the same answer, so a batch re-planned after a restart is the
  same batch. Spark's Kafka source splits ``maxOffsetsPerTrigger`` the same way.
* ``should_wait(...)`` is minOffsetsPerTrigger + maxTriggerDelay: hold the batch back while
  the backlog is under the minimum and the delay since the last batch has not expired.
* ``byte_limit(start, latest, bytes_per_offset, max_bytes)`` is maxBytesPerTrigger: the
  backlog's bytes are estimated from each queue's bytes per offset (``link.bytes_per_offset``
  samples them; a queue without a sample takes the mean of the others), and when they
  exceed ``max_bytes`` the batch is cut to ``max_bytes / (bytes per offset over the whole
  backlog)`` offsets, at least one, split as ``rate_limit`` splits.
* ``plan_ranges(start, end, min_partitions, max_records)`` makes one ``QueueRange`` per
  queue whose range is non-empty, cuts every range of more than ``max_records`` offsets into
  ``ceil(size / max_records)`` near-equal pieces (maxRecordsPerPartition), then, when
  ``min_partitions`` asks for more partitions than that, cuts large ranges into near-equal
  pieces in proportion to their size (Kafka's ``KafkaOffsetRangeCalculator``). Ranges are
  half-open ``[start, end)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .offsets import Offsets, QueueKey

__all__ = ["QueueRange", "rate_limit", "byte_limit", "should_wait", "plan_ranges", "backlog"]


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Messages ``[start, end)`` of one queue: the unit of work of one Spark task."""

    queue: QueueKey
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def backlog(start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int]) -> int:
    """Messages between ``start`` and ``latest`` over the queues both name."""
    return sum(max(0, end - start[key]) for key, end in latest.items() if key in start)


def rate_limit(start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int],
               max_total: int) -> Offsets:
    """End offsets advancing at most ``max_total`` messages past ``start`` in all.

    Queues missing from ``start`` stay at their ``latest`` offset (they are new and start
    there). A queue whose latest is below its start keeps its start.
    """
    sizes = {k: max(0, v - start[k]) for k, v in latest.items() if k in start}
    total = sum(sizes.values())
    if total <= max_total:
        return {k: max(v, start.get(k, v)) for k, v in latest.items()}
    shares: dict[QueueKey, int] = {}
    remainders: list[tuple[int, QueueKey]] = []
    for key in sorted(sizes):
        numerator = sizes[key] * max_total
        shares[key] = numerator // total
        remainders.append((numerator % total, key))
    left = max_total - sum(shares.values())
    # Largest remainder first, ties in queue order: the plan is deterministic.
    remainders.sort(key=lambda item: (-item[0], item[1]))
    for _, key in remainders[:left]:
        shares[key] += 1
    return {k: (start[k] + shares[k]) if k in start else v for k, v in latest.items()}


def byte_limit(start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int],
               bytes_per_offset: Mapping[QueueKey, float], max_bytes: int) -> Offsets:
    """End offsets whose estimated bytes past ``start`` stay within ``max_bytes`` (at least
    one offset in all, so that a batch always moves on); see the module docstring."""
    sizes = {k: max(0, v - start[k]) for k, v in latest.items() if k in start}
    rows = sum(sizes.values())
    known = [bytes_per_offset[k] for k, n in sizes.items() if n and k in bytes_per_offset]
    if not known:
        return rate_limit(start, latest, rows)  # nothing measured: no cap
    fallback = sum(known) / len(known)
    total = sum(n * bytes_per_offset.get(k, fallback) for k, n in sizes.items())
    if total <= max_bytes:
        return rate_limit(start, latest, rows)
    return rate_limit(start, latest, max(1, int(max_bytes * rows // total)))


def should_wait(available: int, min_rows: int | None, last_batch_ms: int | None, now_ms: int,
                max_delay_ms: int) -> bool:
    """True when a batch should be skipped to let at least ``min_rows`` accumulate.

    ``last_batch_ms`` is when the previous batch was planned (or the reader started);
    None means unknown, and then we do not wait.
    """
    if min_rows is None or available >= min_rows or last_batch_ms is None:
        return False
    return now_ms - last_batch_ms < max_delay_ms


def _cut(r: QueueRange, parts: int) -> list[QueueRange]:
    """``r`` in ``parts`` near-equal consecutive pieces (the first ones one larger)."""
    base, extra = divmod(r.size, parts)
    out = []
    pos = r.start
    for i in range(parts):
        step = base + (1 if i < extra else 0)
        out.append(QueueRange(r.queue, pos, pos + step))
        pos += step
    return out


def plan_ranges(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int],
                min_partitions: int | None = None,
                max_records: int | None = None) -> list[QueueRange]:
    """Non-empty per-queue ranges ``[start, end)``, none over ``max_records`` offsets,
    split further to reach ``min_partitions``.

    Queues in ``end`` but not in ``start`` are new this batch and contribute nothing: their
    end offset is where they start.
    """
    ranges = [
        QueueRange(key, start[key], end[key])
        for key in sorted(end)
        if key in start and end[key] > start[key]
    ]
    if max_records:
        ranges = [piece for r in ranges for piece in _cut(r, -(-r.size // max_records))]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[QueueRange] = []
    for r in ranges:
        out += _cut(r, min(r.size, max(1, -(-r.size * min_partitions // total))))
    return out
