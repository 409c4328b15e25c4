"""Fixed-size, memory-mapped segment files and the ordered queue of them.

Contract:

* A ``MappedFile`` is one file of exactly ``file_size`` bytes, named by its start
  offset in the logical stream as 20 zero-padded digits (``UtilAll.offset2FileName``).
  A segment appears under its name only at full size: it is created as
  ``<name>.creating`` and then linked into place (failing, as ``O_EXCL`` would, when
  the name exists). Upstream's ``map()`` extends the file in one step; without this a
  SIGKILL between the create and the extension left a short segment that stopped
  the next start. Loaders delete leftover ``.creating`` files (``sweep_creating``).
* Disk blocks: a full disk must show up as ``OSError`` before a write, never as SIGBUS
  while writing into the mapping, so every byte is written only where ``posix_fallocate``
  has reserved blocks (``allocated``). By default a segment is sparse, as stock's are
  (``ftruncate``): blocks are reserved ahead of the write position in chunks
  (``allocate_to``; the first chunk at creation), so a fresh broker takes a few MiB, not
  the 1 GiB commit-log segment and 400 MB index of its full sizes. ``preallocate=True``
  (the store's ``warmMapedFileEnable``) reserves the whole file at creation instead.
  Writers call ``allocate_to`` before they write (the store's ``reserve`` steps, so a
  put fails before any byte of it is written); ``append`` and ``write_at`` check too.
* Writers (the event loop) append with one memcpy into the mapping and advance
  ``wrote_position``; readers get ``memoryview`` slices of the mapping (no copy).
* ``flush`` (``msync`` through ``mmap.flush`` then ``fdatasync``) runs on a worker
  thread; it only reads ``wrote_position`` and advances ``flushed_position``, under
  the file's lock, which ``destroy`` also takes.
* ``MappedFileQueue`` keeps the segments in offset order: find by offset, create the
  next one, truncate everything beyond an offset (recovery), delete expired heads.
  Its list is mutated on the event loop only; flush threads take a snapshot.

A destroyed file whose mapping is still referenced by a pull response's memoryview
is unlinked at once and unmapped when the last view goes away (the role of upstream's
``ReferenceResource`` hold/release counting).

Upstream: ``store/MappedFile.java``, ``store/MappedFileQueue.java``.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import ClassVar

from aiorocketmq.logs import get_logger

__all__ = ["MappedFile", "MappedFileQueue", "OS_PAGE_SIZE", "allocation_chunk", "offset_to_file_name",
           "sweep_creating"]

log = get_logger("aiorocketmq.store")

OS_PAGE_SIZE = 4096
_ZERO_CHUNK = bytes(1024 * 1024)
CREATING_SUFFIX = ".creating"


def offset_to_file_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: 20 zero-padded decimal digits."""
    return f"{offset:020d}"


def sweep_creating(directory: str) -> None:
    """Delete the ``.creating`` leftovers of segments whose creation a crash interrupted."""
    for name in os.listdir(directory):
        if name.endswith(CREATING_SUFFIX):
            log.info("store.partial_file_removed", path=os.path.join(directory, name))
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))


def allocation_chunk(file_size: int) -> int:
    """Bytes reserved per ``posix_fallocate`` call of a sparse segment: 1/256 of the file,
    between 64 KiB and 4 MiB (4 MiB for a 1 GiB commit-log segment), whole pages."""
    chunk = min(max(file_size // 256, 64 * 1024), 4 * 1024 * 1024)
    return min(file_size, chunk - chunk % OS_PAGE_SIZE)


def _reserve_blocks(fd: int, offset: int, length: int) -> None:
    """``posix_fallocate``; a file system without it (EOPNOTSUPP, EINVAL) is left sparse."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class MappedFile:
    """One memory-mapped segment. Not thread-safe except ``flush`` against ``destroy``."""

    __slots__ = (
        "path", "file_from_offset", "file_size", "mm", "wrote_position", "flushed_position",
        "_lock", "_dir_synced", "last_modified_ms", "first_create_in_queue", "destroyed",
        "allocated", "_chunk",
    )

    # Called as ``durable_observer(path, end)`` after each flush, on the flushing thread,
    # once bytes ``[0, end)`` of the file at ``path`` are on disk (msync + fdatasync done);
    # before the flush's caller learns of it. Durability tests record it; None otherwise.
    durable_observer: ClassVar[Callable[[str, int], None] | None] = None

    def __init__(self, path: str, file_from_offset: int, file_size: int, *, create: bool,
                 pad_short: bool = False, preallocate: bool = False,
                 allocate: int = 0) -> None:
        """Create (``create``) or open one segment.

        A new segment has its first ``max(allocate, allocation_chunk)`` bytes' blocks
        reserved, or all of them with ``preallocate``; OSError (ENOSPC) if the disk cannot
        hold them, and then no segment appears. An opened one reserves as it is written.
        """
        self.path = path
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        self.wrote_position = 0
        self.flushed_position = 0
        self._lock = threading.Lock()
        self._dir_synced = not create
        self.first_create_in_queue = False
        self.destroyed = False
        self._chunk = allocation_chunk(file_size)
        # Blocks of [0, allocated) are known to be reserved; an opened file learns its own.
        self.allocated = 0
        if create and os.path.exists(path):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
        creating = path + CREATING_SUFFIX
        fd = os.open(creating if create else path,
                     os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0), 0o644)
        try:
            if create:
                try:
                    first = file_size if preallocate else self._chunk_end(allocate)
                    _reserve_blocks(fd, 0, first)
                    os.ftruncate(fd, file_size)  # the rest sparse (a no-op when preallocated)
                    self.allocated = first
                    os.link(creating, path)  # EEXIST if the name appeared meanwhile
                finally:
                    with contextlib.suppress(OSError):
                        os.unlink(creating)
            else:
                actual = os.fstat(fd).st_size
                if pad_short and actual < file_size:
                    # A cut-short segment (a damaged disk or a copy that stopped): the
                    # missing part reads as zeros, so recovery ends the data where it ends.
                    log.warn("store.segment_padded", path=path, size=actual, expected=file_size)
                    os.ftruncate(fd, file_size)
                elif actual != file_size:
                    raise ValueError(
                        f"segment {path} is {actual} bytes, expected {file_size}; "
                        "the configured file size does not match the store on disk"
                    )
            self.mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            if fd >= 0:
                os.close(fd)
        self.last_modified_ms = int(os.stat(path).st_mtime * 1000) if not create else int(time.time() * 1000)

    # -- writing (event loop) --

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def free_space(self) -> int:
        return self.file_size - self.wrote_position

    def _chunk_end(self, end: int) -> int:
        """``end`` rounded up to the next chunk boundary, at most the file size."""
        chunk = self._chunk
        return min(self.file_size, max(chunk, -(-end // chunk) * chunk))

    def allocate_to(self, end: int) -> None:
        """Reserve disk blocks for ``[0, end)`` (and up to the next chunk boundary).

        Raises OSError (ENOSPC): the disk is full; nothing was written.
        """
        if end <= self.allocated:
            return
        new_end = self._chunk_end(end)
        fd = os.open(self.path, os.O_RDWR)
        try:
            _reserve_blocks(fd, self.allocated, new_end - self.allocated)
        finally:
            os.close(fd)
        self.allocated = new_end

    def append(self, data: bytes | bytearray | memoryview) -> bool:
        """Write ``data`` at the write position if it fits; False otherwise.

        Raises OSError when the blocks for it cannot be reserved (nothing written).
        """
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            return False
        if end > self.allocated:
            self.allocate_to(end)
        self.mm[pos:end] = data
        self.wrote_position = end
        self.last_modified_ms = int(time.time() * 1000)
        return True

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at ``pos``. Raises OSError when its blocks cannot be reserved."""
        end = pos + len(data)
        if end > self.allocated:
            self.allocate_to(end)
        self.mm[pos:end] = data

    # -- reading --

    def view(self, pos: int, size: int) -> memoryview | None:
        """A zero-copy slice of written data, or None when ``[pos, pos+size)`` is not written."""
        if pos < 0 or size < 0 or pos + size > self.wrote_position:
            return None
        return memoryview(self.mm)[pos:pos + size]

    # -- durability (worker thread) --

    def is_able_to_flush(self, least_pages: int) -> bool:
        """``MappedFile.isAbleToFlush``: a full file always; else at least ``least_pages`` dirty pages."""
        flushed = self.flushed_position
        wrote = self.wrote_position
        if self.is_full and flushed < wrote:
            return True
        if least_pages > 0:
            return (wrote // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE) >= least_pages
        return wrote > flushed

    def flush(self, least_pages: int = 0) -> int:
        """Make ``[flushed_position, wrote_position)`` durable; return the new flushed position."""
        with self._lock:
            wrote = self.wrote_position
            flushed = self.flushed_position
            if (wrote <= flushed or self.destroyed or self.mm.closed
                    or not self.is_able_to_flush(least_pages)):
                return flushed
            start = flushed - flushed % mmap.PAGESIZE
            self.mm.flush(start, wrote - start)
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
            if not self._dir_synced:
                _fsync_dir(os.path.dirname(self.path))
                self._dir_synced = True
            self.flushed_position = wrote
            observer = MappedFile.durable_observer
            if observer is not None:
                observer(self.path, wrote)
            return wrote

    # -- lifecycle --

    def zero_from(self, pos: int) -> None:
        """Zero ``[pos, file_size)`` where it is not zero already (recovery truncation)."""
        mm = self.mm
        end = self.file_size
        while pos < end:
            n = min(len(_ZERO_CHUNK), end - pos)
            if mm[pos:pos + n] != _ZERO_CHUNK[:n]:
                mm[pos:pos + n] = _ZERO_CHUNK[:n]
            pos += n

    def close(self) -> None:
        with self._lock:
            self._close_mapping()

    def _close_mapping(self) -> None:
        if not self.mm.closed:
            try:
                self.mm.close()
            except BufferError:
                # A response still holds a slice; the mapping is released with it.
                pass

    def destroy(self) -> None:
        """Unmap and delete the file."""
        with self._lock:
            self.destroyed = True
            self._close_mapping()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, wrote={self.wrote_position}, flushed={self.flushed_position})"


class MappedFileQueue:
    """Ordered segments of one logical stream (the commit log, or one consume queue)."""

    __slots__ = ("store_path", "file_size", "files", "flushed_where", "spares", "padded_from",
                 "preallocate")

    def __init__(self, store_path: str, file_size: int, *, preallocate: bool = False) -> None:
        self.store_path = store_path
        self.file_size = file_size
        # New segments reserve all their blocks at once (warmMapedFileEnable), else in chunks.
        self.preallocate = preallocate
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        # Segments created ahead of need by ``reserve`` (not yet part of the stream).
        self.spares: list[MappedFile] = []
        # Start offset of a last segment ``load`` found short and padded with zeros.
        self.padded_from: int | None = None

    def load(self) -> None:
        """Map every segment on disk, marking all of them fully written (recovery trims).

        The last segment may be shorter than ``file_size`` (cut short by a damaged disk):
        it is extended with zeros and ``padded_from`` names it, so recovery checks it.
        Any other segment of the wrong size is a configuration mismatch (ValueError).
        """
        if not os.path.isdir(self.store_path):
            return
        sweep_creating(self.store_path)
        names = sorted(n for n in os.listdir(self.store_path) if n.isdigit() and len(n) == 20)
        for i, name in enumerate(names):
            path = os.path.join(self.store_path, name)
            last = i == len(names) - 1
            if last and os.path.getsize(path) < self.file_size:
                self.padded_from = int(name)
            mf = MappedFile(path, int(name), self.file_size, create=False, pad_short=last)
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    def __iter__(self) -> Iterator[MappedFile]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    @property
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    @property
    def min_offset(self) -> int:
        """Start offset of the first segment, or -1 when there is none (``getMinOffset``)."""
        return self.files[0].file_from_offset if self.files else -1

    @property
    def max_offset(self) -> int:
        """One past the last written byte (``getMaxOffset``)."""
        last = self.last
        return last.file_from_offset + last.wrote_position if last else 0

    def create_file(self, start_offset: int, *, allocate: int = 0) -> MappedFile:
        """Create the segment starting at ``start_offset``, its first ``allocate`` bytes'
        blocks reserved. Raises OSError (e.g. ENOSPC); then no segment was added."""
        mf = None
        spares = self.spares
        while spares and spares[0].file_from_offset != start_offset:
            spares.pop(0).destroy()  # reserved for a layout that did not happen
        if spares:
            mf = spares.pop(0)
            try:
                mf.allocate_to(allocate)
            except OSError:
                mf.destroy()
                raise
        else:
            mf = self._new_segment(start_offset, allocate)
        if not self.files:
            mf.first_create_in_queue = True
        self.files.append(mf)
        return mf

    def _new_segment(self, start_offset: int, allocate: int = 0) -> MappedFile:
        os.makedirs(self.store_path, exist_ok=True)
        path = os.path.join(self.store_path, offset_to_file_name(start_offset))
        return MappedFile(path, start_offset, self.file_size, create=True,
                          preallocate=self.preallocate, allocate=allocate)

    def reserve(self, end_offset: int, start_offset: int = 0) -> None:
        """Create now every segment needed to write up to ``end_offset`` (exclusive), and
        reserve the disk blocks of the bytes up to it.

        Lets a writer fail with OSError before it writes anything, instead of half-way.
        The segments join the stream when ``get_last_mapped_file`` reaches them.
        """
        files = self.files
        last = files[-1] if files else None
        if (last is not None and not self.spares
                and end_offset <= last.file_from_offset + last.allocated):
            return  # the common case: room reserved in the segment being written
        self._create_spares(last, end_offset, start_offset)
        for mf in (*self.files[-1:], *self.spares):
            if mf.file_from_offset < end_offset:
                mf.allocate_to(min(self.file_size, end_offset - mf.file_from_offset))

    def _create_spares(self, last: MappedFile | None, end_offset: int, start_offset: int) -> None:
        if self.spares:
            next_start = self.spares[-1].file_from_offset + self.file_size
        elif last is not None:
            next_start = last.file_from_offset + self.file_size
        else:
            next_start = start_offset - start_offset % self.file_size
        while next_start < end_offset:
            self.spares.append(self._new_segment(next_start))
            next_start += self.file_size

    def get_last_mapped_file(self, start_offset: int = 0, *, create: bool = True) -> MappedFile | None:
        """The segment to append to: the last one, or a new one when it is full or absent."""
        files = self.files
        last = files[-1] if files else None
        if last is not None and last.wrote_position < last.file_size:  # not last.is_full
            return last
        if not create:
            return last
        if last is None:
            start = start_offset - start_offset % self.file_size
        else:
            start = last.file_from_offset + self.file_size
        return self.create_file(start)

    def find_mapped_file_by_offset(self, offset: int, return_first_if_not_found: bool = False) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        first = files[0]
        if first.file_from_offset <= offset < files[-1].file_from_offset + self.file_size:
            idx = offset // self.file_size - first.file_from_offset // self.file_size
            if 0 <= idx < len(files):
                mf = files[idx]
                if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                    return mf
            for mf in files:  # a gap in the sequence; fall back to a scan
                if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                    return mf
        return first if return_first_if_not_found else None

    def truncate_dirty_files(self, offset: int, *, zero_tail: bool = True) -> None:
        """Drop everything at or beyond ``offset``: trim the segment holding it, delete later ones.

        ``zero_tail`` clears the trimmed segment past ``offset`` so that stale bytes can
        never be read back as data; a clean shutdown left zeros there already.
        """
        keep: list[MappedFile] = []
        for mf in self.files:
            file_tail = mf.file_from_offset + self.file_size
            if file_tail <= offset:
                keep.append(mf)
            elif offset >= mf.file_from_offset:
                pos = offset - mf.file_from_offset
                if zero_tail:
                    mf.zero_from(pos)
                mf.wrote_position = pos
                mf.flushed_position = pos
                keep.append(mf)
            else:
                mf.destroy()
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset)

    def delete_last_mapped_file(self) -> None:
        if self.files:
            self.files.pop().destroy()

    def reset_positions(self, offset: int) -> None:
        """After recovery: the flushed point is the recovered end."""
        self.flushed_where = offset

    def detach_expired_by_time(self, expired_ms: int, now_ms: int, clean_immediately: bool,
                               max_batch: int = 10) -> list[MappedFile]:
        """Remove from the queue the leading segments older than ``expired_ms`` (never the last).

        The caller destroys the returned files (off the event loop). Stops at the first
        segment that must be kept so no hole opens in the middle
        (``deleteExpiredFileByTime``).
        """
        out: list[MappedFile] = []
        for mf in self.files[:-1]:
            if now_ms >= mf.last_modified_ms + expired_ms or clean_immediately:
                out.append(mf)
                if len(out) >= max_batch:
                    break
            else:
                break
        del self.files[:len(out)]
        return out

    def detach_expired_by_offset(self, phy_offset: int, unit_size: int) -> list[MappedFile]:
        """Remove the leading consume-queue segments whose last unit points below ``phy_offset``."""
        out: list[MappedFile] = []
        for mf in self.files[:-1]:
            last_unit = mf.view(self.file_size - unit_size, 8)
            if last_unit is None:
                break
            max_phy = int.from_bytes(last_unit, "big", signed=True)
            last_unit.release()
            if max_phy < phy_offset:
                out.append(mf)
            else:
                break
        del self.files[:len(out)]
        return out

    def flush(self, least_pages: int = 0) -> int:
        """Flush forward from ``flushed_where``; safe on a worker thread. Returns the new point."""
        files = list(self.files)
        where = self.flushed_where
        for mf in files:
            end = mf.file_from_offset + self.file_size
            if end <= where:
                continue
            if mf.file_from_offset > where:
                where = mf.file_from_offset
            flushed = mf.flush(least_pages)
            where = max(where, mf.file_from_offset + flushed)
            if flushed < mf.file_size:
                break
        self.flushed_where = where
        return where

    def close(self) -> None:
        for mf in self.files + self.spares:
            mf.close()

    def destroy(self) -> None:
        for mf in self.files + self.spares:
            mf.destroy()
        self.files = []
        self.spares = []
        self.flushed_where = 0
        with contextlib.suppress(OSError):
            os.rmdir(self.store_path)
