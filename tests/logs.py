"""Capture the library's log events in tests, the way ``structlog.testing.capture_logs`` did.

Our modules log through stdlib ``logging`` (``aiorocketmq.logs``), so structlog's capture no
longer sees them. ``capture_logs()`` attaches a handler to the ``aiorocketmq`` logger, opens
it to DEBUG for the duration, and yields a list of event dicts: ``event``, the key/values,
``log_level`` (``"info"``, ``"warning"``, ...) and ``logger`` (the stdlib logger's name).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["capture_logs"]


class _ListHandler(logging.Handler):
    def __init__(self, entries: list[dict[str, Any]]) -> None:
        super().__init__(logging.DEBUG)
        self.entries = entries

    def emit(self, record: logging.LogRecord) -> None:
        entry = dict(record.msg) if isinstance(record.msg, dict) else {"event": record.getMessage()}
        entry["log_level"] = record.levelname.lower()
        entry["logger"] = record.name
        self.entries.append(entry)


@contextmanager
def capture_logs(name: str = "aiorocketmq") -> Iterator[list[dict[str, Any]]]:
    """Collect every record of ``name`` and its children, at every level."""
    entries: list[dict[str, Any]] = []
    handler = _ListHandler(entries)
    logger = logging.getLogger(name)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield entries
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
