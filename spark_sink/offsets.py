"""The source's offset model: per-queue consume-queue offsets as Spark-checkpointable JSON.

Contract:

* A queue is a ``QueueKey(topic, broker_name, queue_id)`` (upstream ``MessageQueue``); its
  offset is a consume-queue index (docs/PROTOCOL.md 4.5: ``GET_MAX_OFFSET`` is one past the last
  message), so a range ``[start, end)`` holds ``end - start`` messages before tag filtering.
* ``offsets_to_json`` writes ``{"topic": {"broker": {"queueId": offset}}}`` with every level's
  keys in sorted (string) order, so ``json.dumps`` of it equals ``json.dumps(...,
  sort_keys=True)``: Spark compares offsets by their JSON text, and a checkpoint written by
  one run must read back equal in the next. ``offsets_from_json`` is its inverse and refuses
  anything else with ``MQClientError``.
* ``OffsetSpec`` is a parsed ``startingOffsets`` / ``endingOffsets`` option: ``earliest``,
  ``latest`` or a per-queue JSON map in the same shape whose values may be the Kafka-style
  sentinels -2 (earliest) and -1 (latest).

Pure logic: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from aiorocketmq.protocol.errors import MQClientError, RocketMQError

__all__ = [
    "QueueKey",
    "Offsets",
    "OffsetSpec",
    "EARLIEST",
    "LATEST",
    "DataLossError",
    "offsets_to_json",
    "offsets_from_json",
    "parse_offset_spec",
    "resolve_spec",
]

EARLIEST = -2
LATEST = -1


class QueueKey(NamedTuple):
    """One message queue; tuples sort by (topic, broker, queue id)."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.broker_name}/{self.queue_id}"


Offsets = dict[QueueKey, int]


class DataLossError(RocketMQError):
    """Messages the query still needed are gone from the broker (failOnDataLoss=true).

    Raised when a queue's min offset moved past the offset the query must read next
    (retention deleted commit-log files), or a broker that held a queue is no longer in the
    route. The message names the queue and both offsets.
    """


def offsets_to_json(offsets: Mapping[QueueKey, int]) -> dict[str, Any]:
    """``{QueueKey: offset}`` -> nested JSON-ready dict, keys sorted at every level."""
    nested: dict[str, dict[str, dict[str, int]]] = {}
    for key in sorted(offsets, key=lambda k: (k.topic, k.broker_name, str(k.queue_id))):
        nested.setdefault(key.topic, {}).setdefault(key.broker_name, {})[str(key.queue_id)] = int(
            offsets[key]
        )
    return nested


def offsets_from_json(obj: Any, what: str = "offsets") -> Offsets:
    """Inverse of ``offsets_to_json``; also accepts the JSON text.

    Raises:
        MQClientError: not a ``{"topic": {"broker": {"queueId": int}}}`` map.
    """
    if isinstance(obj, (str, bytes)):
        try:
            obj = json.loads(obj)
        except ValueError as exc:
            raise MQClientError(f"{what} is not JSON: {exc}") from None
    out: Offsets = {}
    if not isinstance(obj, dict):
        raise MQClientError(f"{what} must be a JSON object {{topic: {{broker: {{queueId: offset}}}}}}")
    for topic, brokers in obj.items():
        if not isinstance(brokers, dict):
            raise MQClientError(f"{what}: topic {topic!r} must map broker names to objects")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise MQClientError(
                    f"{what}: {topic}/{broker} must map queue ids to offsets"
                )
            for qid, offset in queues.items():
                try:
                    queue_id = int(qid)
                except (TypeError, ValueError):
                    raise MQClientError(f"{what}: queue id {qid!r} of {topic}/{broker} is not an int") from None
                if isinstance(offset, bool) or not isinstance(offset, int):
                    raise MQClientError(
                        f"{what}: offset {offset!r} of {topic}/{broker}/{qid} is not an int"
                    )
                out[QueueKey(str(topic), str(broker), queue_id)] = offset
    return out


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """A parsed startingOffsets / endingOffsets option.

    ``kind`` is ``earliest``, ``latest`` or ``specific``; for ``specific``, ``per_queue``
    holds offsets or the sentinels ``EARLIEST`` (-2) / ``LATEST`` (-1), and queues it does
    not name fall back to ``default`` (Kafka's rule: unnamed partitions start at latest for
    startingOffsets; we use the option's own default kind).
    """

    kind: Literal["earliest", "latest", "specific"]
    per_queue: tuple[tuple[QueueKey, int], ...] = field(default=())

    def for_queue(self, key: QueueKey, default: int) -> int:
        """The offset or sentinel this spec gives ``key``."""
        if self.kind == "earliest":
            return EARLIEST
        if self.kind == "latest":
            return LATEST
        for k, v in self.per_queue:
            if k == key:
                return v
        return default

    def topics(self) -> set[str]:
        return {k.topic for k, _ in self.per_queue}


def parse_offset_spec(value: str, option: str) -> OffsetSpec:
    """``earliest`` | ``latest`` | JSON map -> OffsetSpec.

    Raises:
        MQClientError: anything else, or an offset below -2.
    """
    low = value.strip().lower()
    if low == "earliest":
        return OffsetSpec("earliest")
    if low == "latest":
        return OffsetSpec("latest")
    offsets = offsets_from_json(value, f"option {option}")
    for key, offset in offsets.items():
        if offset < EARLIEST:
            raise MQClientError(
                f"option {option}: offset {offset} of queue {key} must be >= 0, "
                f"or -2 (earliest) / -1 (latest)"
            )
    return OffsetSpec("specific", tuple(sorted(offsets.items())))


def resolve_spec(
    spec: OffsetSpec,
    queues: Iterable[QueueKey],
    min_offsets: Mapping[QueueKey, int],
    max_offsets: Mapping[QueueKey, int],
    *,
    default: int,
) -> Offsets:
    """Turn a spec into concrete offsets for ``queues``, clamped to ``[min, max]``.

    A queue the spec names explicitly is not clamped below its min offset: the caller's
    data-loss check must see it.
    """
    out: Offsets = {}
    for key in queues:
        wanted = spec.for_queue(key, default)
        if wanted == EARLIEST:
            out[key] = min_offsets[key]
        elif wanted == LATEST:
            out[key] = max_offsets[key]
        else:
            out[key] = min(wanted, max_offsets[key])
    return out
