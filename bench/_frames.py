"""The captured Apache RocketMQ 4.9.7 frames the micro-benchmarks run on, shipped with them.

``data/frames.jsonl`` holds five records of the test suite's ``tests/data/vectors/
frames.jsonl`` (captured between stock 4.9.7 Java processes; same fields, same ``id``): the
SEND_MESSAGE_V2 request and its answer in JSON and ROCKETMQ headers, and a PULL_MESSAGE
answer with 11 stored messages (id 60). ``codec_bench`` and ``channel_bench`` read them here,
so they run from an installed package, not only from a checkout.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

__all__ = ["body_bytes", "frame_bytes", "frames_where", "load_frames"]


@functools.cache
def load_frames() -> dict[int, dict[str, Any]]:
    """The shipped records by ``id``."""
    text = resources.files(__package__ or "aiorocketmq.bench").joinpath(
        "data", "frames.jsonl").read_text(encoding="utf-8")
    records = (json.loads(line) for line in text.splitlines() if line.strip())
    return {r["id"]: r for r in records}


def frame_bytes(frame_id: int) -> bytes:
    """The whole frame (length prefix included) of record ``frame_id``."""
    return bytes.fromhex(load_frames()[frame_id]["frame_hex"])


def body_bytes(frame_id: int) -> bytes:
    return bytes.fromhex(load_frames()[frame_id]["body_hex"])


def frames_where(**criteria: Any) -> list[dict[str, Any]]:
    """Records whose fields equal every criterion, in ``id`` order (as ``tests.vectors``)."""
    return [f for _, f in sorted(load_frames().items())
            if all(f.get(k) == v for k, v in criteria.items())]
