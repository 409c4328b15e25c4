"""Store checkpoint and the abort marker: what recovery after a crash may trust.

Contract:

* ``StoreCheckpoint`` holds upstream's three timestamps (``physicMsgTimestamp``,
  ``logicsMsgTimestamp``, ``indexMsgTimestamp``) and, in addition, the commit-log
  offsets they correspond to: ``physic_offset`` (commit log durable up to here),
  ``logics_offset`` (every consume queue durable for all records below here) and
  ``index_offset`` (the index likewise). Recovery re-dispatches from
  ``min(logics_offset, index_offset)``; offsets are exact where store timestamps are
  only monotonic by convention, which is why we keep both (upstream recovers from the
  first commit-log file whose first record is older than the minimum timestamp).
* ``flush()`` writes the file atomically: temp file, fsync, rename, fsync of the
  directory. A missing or corrupt checkpoint reads as all zeros (recover everything).
* File layout (big-endian): three int64 timestamps at 0/8/16 as upstream, then
  int64 physic/logics/index offsets, then the CRC32 of the 48 bytes before it.
* ``AbortFile``: created when the store starts, removed at clean shutdown; finding it
  at start means the last run did not stop cleanly (upstream ``abort`` file).

Upstream: ``store/StoreCheckpoint.java``, ``DefaultMessageStore.createTempFile``,
``isTempFileExist``, ``deleteFile``.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import zlib

__all__ = ["StoreCheckpoint", "AbortFile"]

_LAYOUT = struct.Struct(">qqqqqq")
_CRC = struct.Struct(">I")


class StoreCheckpoint:
    """The checkpoint file; fields are plain ints updated by the flusher, persisted by ``flush``."""

    __slots__ = ("path", "physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp",
                 "physic_offset", "logics_offset", "index_offset", "loaded_ok", "_lock")

    def __init__(self, path: str) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.physic_offset = 0
        self.logics_offset = 0
        self.index_offset = 0
        self.loaded_ok = False
        # Two flushes may run at once on the store's worker threads (the periodic logics
        # flush and an explicit one): they share the temp file, so they take turns.
        self._lock = threading.Lock()
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                data = fh.read(_LAYOUT.size + _CRC.size)
        except FileNotFoundError:
            return
        if len(data) != _LAYOUT.size + _CRC.size:
            return
        (crc,) = _CRC.unpack_from(data, _LAYOUT.size)
        if crc != zlib.crc32(data[:_LAYOUT.size]):
            return
        (self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
         self.physic_offset, self.logics_offset, self.index_offset) = _LAYOUT.unpack_from(data)
        self.loaded_ok = True

    @property
    def min_timestamp(self) -> int:
        """``getMinTimestamp``: the older of physic/logics, minus 3 s of slack, floored at 0."""
        return max(min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000, 0)

    @property
    def recover_from_offset(self) -> int:
        """The commit-log offset below which consume queues and index are known durable."""
        return min(self.logics_offset, self.index_offset, self.physic_offset)

    def encode(self) -> bytes:
        body = _LAYOUT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp,
                            self.index_msg_timestamp, self.physic_offset, self.logics_offset,
                            self.index_offset)
        return body + _CRC.pack(zlib.crc32(body))

    def flush(self) -> None:
        """Persist atomically (blocking: call it from a worker thread on a live store)."""
        with self._lock:
            data = self.encode()
            directory = os.path.dirname(self.path) or "."
            os.makedirs(directory, exist_ok=True)
            tmp = self.path + ".tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            dfd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)


class AbortFile:
    """The ``abort`` marker telling a crash from a clean stop."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def create(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
