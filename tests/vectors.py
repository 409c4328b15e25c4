"""Access to the captured Apache RocketMQ 4.9.7 wire vectors in ``tests/data/vectors``.

The vectors were captured between stock 4.9.7 Java processes (README.md there says how)
and are kept in the repository as test data, so a fresh clone passes on its own.
``AIOROCKETMQ_VECTORS`` points the suite at another copy.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
VECTORS_DIR = Path(os.environ.get("AIOROCKETMQ_VECTORS", REPO_ROOT / "tests" / "data" / "vectors"))


@functools.cache
def load_frames() -> tuple[dict[str, Any], ...]:
    """Every record of frames.jsonl, in file order (``id`` == index)."""
    path = VECTORS_DIR / "frames.jsonl"
    with path.open(encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


def frame(frame_id: int) -> dict[str, Any]:
    return load_frames()[frame_id]


def frame_bytes(frame_id: int) -> bytes:
    return bytes.fromhex(load_frames()[frame_id]["frame_hex"])


def body_bytes(frame_id: int) -> bytes:
    return bytes.fromhex(load_frames()[frame_id]["body_hex"])


def frames_where(**criteria: Any) -> list[dict[str, Any]]:
    """Frames whose fields equal every given criterion, e.g. ``frames_where(code=105, is_response=False)``."""
    return [f for f in load_frames() if all(f.get(k) == v for k, v in criteria.items())]


def vector_file(name: str) -> bytes:
    return (VECTORS_DIR / name).read_bytes()
