"""The log a Raft node works on: ``RaftLog`` (the interface) and ``MemoryLog`` (in memory).

Contract of a ``RaftLog``:

* Entries have consecutive indexes ``begin_index .. end_index`` (both -1 when empty);
  ``end_term`` is the last entry's term (-1 when empty); ``end_pos`` is the offset just
  past the last entry in the data stream (where the next one goes, or the next segment's
  start when it does not fit: ``next_pos(size)``, ``entry.next_entry_pos``).
* ``append(entry)`` adds ``entry`` at ``end_index + 1``; its ``pos`` must be
  ``next_pos(entry.size)``, else ``LogError`` and nothing changes.
* ``truncate_after(index)`` keeps the entries up to ``index`` (-1: none) and forgets the
  rest; ``committed_index`` never goes past ``end_index``.
* ``get(index)`` is the entry, or None outside ``begin_index .. end_index``.
* ``set_committed(index)`` records the commit point (it only moves forward; the store
  persists it lazily, so a restart may come back with an older one: it is a lower bound).
* ``committed_pos`` is the end of the committed entry (0 when nothing is committed).
* ``reset_to(entry)`` drops everything and begins the log with ``entry``, past the end
  (a follower behind the leader's first entry after retention); ``LogError`` when the
  log cannot (``MemoryLog`` never can).

``MemoryLog`` keeps everything in a list; the simulation uses it, and its positions follow
the data-segment rule of ``file_size`` so they are the ones an mmap store would give.
``DLedgerMmapFileStore`` (mmap_store.py) is the durable one.

Upstream: ``store/DLedgerStore.java``, ``store/DLedgerMemoryStore.java``.
"""

from __future__ import annotations

from typing import Protocol

from aiorocketmq.protocol.dledger.entry import DLedgerEntry, next_entry_pos

__all__ = ["RaftLog", "MemoryLog", "LogError"]


class LogError(Exception):
    """An append or truncation the log cannot do (a position or index that does not fit)."""


class RaftLog(Protocol):
    file_size: int

    @property
    def begin_index(self) -> int: ...

    @property
    def end_index(self) -> int: ...

    @property
    def end_term(self) -> int: ...

    @property
    def end_pos(self) -> int: ...

    @property
    def committed_index(self) -> int: ...

    @property
    def committed_pos(self) -> int: ...

    def get(self, index: int) -> DLedgerEntry | None: ...

    def term_at(self, index: int) -> int: ...

    def next_pos(self, size: int) -> int: ...

    def append(self, entry: DLedgerEntry) -> None: ...

    def truncate_after(self, index: int) -> None: ...

    def set_committed(self, index: int) -> None: ...

    def reset_to(self, entry: DLedgerEntry) -> None: ...


class MemoryLog:
    """A ``RaftLog`` in a Python list (module docstring)."""

    def __init__(self, file_size: int = 1 << 30) -> None:
        self.file_size = file_size
        self.entries: list[DLedgerEntry] = []
        self._committed = -1

    @property
    def begin_index(self) -> int:
        return 0 if self.entries else -1

    @property
    def end_index(self) -> int:
        return len(self.entries) - 1

    @property
    def end_term(self) -> int:
        return self.entries[-1].term if self.entries else -1

    @property
    def end_pos(self) -> int:
        return self.entries[-1].end if self.entries else 0

    @property
    def committed_index(self) -> int:
        return self._committed

    @property
    def committed_pos(self) -> int:
        return self.entries[self._committed].end if self._committed >= 0 else 0

    def get(self, index: int) -> DLedgerEntry | None:
        if 0 <= index < len(self.entries):
            return self.entries[index]
        return None

    def term_at(self, index: int) -> int:
        entry = self.get(index)
        return entry.term if entry is not None else -1

    def next_pos(self, size: int) -> int:
        return next_entry_pos(self.end_pos, size, self.file_size)

    def append(self, entry: DLedgerEntry) -> None:
        if entry.index != len(self.entries):
            raise LogError(f"append index {entry.index}, log ends at {self.end_index}")
        if entry.pos != self.next_pos(entry.size):
            raise LogError(f"append pos {entry.pos}, expected {self.next_pos(entry.size)}")
        self.entries.append(entry)

    def truncate_after(self, index: int) -> None:
        del self.entries[max(index + 1, 0):]
        self._committed = min(self._committed, self.end_index)

    def reset_to(self, entry: DLedgerEntry) -> None:
        raise LogError("a MemoryLog always begins at index 0")

    def set_committed(self, index: int) -> None:
        index = min(index, self.end_index)
        if index > self._committed:
            self._committed = index
