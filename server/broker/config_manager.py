"""Durable JSON metadata files of the broker (upstream ``ConfigManager`` + ``MixAll.string2File``).

Contract: a ``ConfigManager`` subclass owns one file (``topics.json``,
``subscriptionGroup.json``, ``consumerOffset.json`` under ``<storeRoot>/config``) and
implements ``snapshot()`` (a copy of its table, entry name -> entry, taken on the event
loop), ``encode_snapshot(entries) -> bytes`` and ``decode(bytes)``. ``encode()`` writes the
snapshot; should one entry not encode (a name the edge checks let through by mistake),
that entry is left out, logged once with the file and the entry, and every other entry
is still written: one entry can never block its file. ``load()`` reads the file, falling
back to ``<file>.bak`` when the file is missing, empty or does not decode, as upstream
does, and first removes the temp files a crash left. Writes are atomic: temp file, fsync,
previous file kept as ``.bak``, rename, directory fsync, so a failed write leaves the
previous file intact.

Writes never block the event loop: ``mark_dirty()`` (callable from plain handlers) wakes
the manager's ``_persist_routine``, which encodes on the loop and writes in a worker
thread; bursts coalesce into one write. ``persist()`` awaits one write; writes run one at
a time, each encoding the table when its turn comes and finishing even if its caller is
cancelled, so the file ends at the newest table (``client.atomic_file.AtomicFileWriter``).
``stop()`` writes whatever is dirty and ends the routine. ``persist_sync()`` is for
shutdown paths without a loop and for tests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.atomic_file import (
    AtomicFileWriter,
    remove_stale_temp_files,
    write_file_atomic,
)

__all__ = ["ConfigManager", "write_file_atomic"]

log = get_logger("aiorocketmq.broker.config")

# What encoding one entry can raise: a lone surrogate, a number JSON cannot write, depth.
_ENCODE_ERRORS = (UnicodeError, ValueError, TypeError, OverflowError, RecursionError)


class ConfigManager:
    """Base of the broker's persisted tables; see the module docstring."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._dirty = asyncio.Event()
        self._writer = AtomicFileWriter(self.path, backup=True)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._unwritable: set[str] = set()  # entries already logged as not encodable

    # -- subclass hooks -----------------------------------------------------------------

    def snapshot(self) -> dict[Any, Any]:
        raise NotImplementedError

    def encode_snapshot(self, entries: dict[Any, Any]) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> None:
        raise NotImplementedError

    # -- encoding -----------------------------------------------------------------------

    def encode(self) -> bytes:
        """The file's content: every entry that encodes (see the module docstring)."""
        entries = self.snapshot()
        try:
            return self.encode_snapshot(entries)
        except _ENCODE_ERRORS:
            pass
        good: dict[Any, Any] = {}
        for key, entry in entries.items():
            try:
                self.encode_snapshot({key: entry})
            except _ENCODE_ERRORS as exc:
                label = ascii(key)[:200]
                if label not in self._unwritable:
                    self._unwritable.add(label)
                    log.error("broker.config_entry_not_persisted", path=str(self.path),
                              entry=label, error=f"{exc.__class__.__name__}: {exc}"[:300])
            else:
                good[key] = entry
        return self.encode_snapshot(good)

    # -- loading ------------------------------------------------------------------------

    def load(self) -> bool:
        """Load the file or its ``.bak``; ``True`` also when neither exists (fresh store)."""
        remove_stale_temp_files(self.path)
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                data = candidate.read_bytes()
            except FileNotFoundError:
                continue
            if not data.strip():
                continue
            try:
                self.decode(data)
            except Exception as exc:
                log.error("broker.config_load_failed", path=str(candidate), error=str(exc))
                continue
            log.info("broker.config_loaded", path=str(candidate))
            return True
        return not self.path.exists()

    # -- persisting ---------------------------------------------------------------------

    def mark_dirty(self) -> None:
        """Ask for a write soon (coalesced); safe to call from plain handlers."""
        self._dirty.set()

    def persist_sync(self) -> None:
        write_file_atomic(self.path, self.encode(), backup=True)

    async def persist(self) -> None:
        """Write the table in a worker thread, encoded when this write's turn comes."""

        def encode() -> bytes:
            self._dirty.clear()  # this write carries every change made so far
            return self.encode()

        await self._writer.write(encode)

    @property
    def started(self) -> bool:
        """``start`` ran and ``stop`` has not: the table may have changed since ``load``."""
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._persist_routine(), name=f"persist:{self.path.name}")

    async def _persist_routine(self) -> None:
        while not self._stopping:
            await self._dirty.wait()
            if self._stopping:
                break
            try:
                await self.persist()
            except Exception as exc:
                # A full disk (or a bug) must not end the routine: the previous file stays
                # intact (atomic write) and the next change retries the write.
                log.error("broker.config_persist_failed", path=str(self.path),
                          error=f"{exc.__class__.__name__}: {exc}")

    async def stop(self) -> None:
        """End the routine and write the current table once more. Idempotent."""
        self._stopping = True
        task = self._task
        self._task = None
        if task is not None:
            self._dirty.set()
            await task
        await self.persist()
