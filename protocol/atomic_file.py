"""Crash-safe file replacement: the one atomic write every persisted table uses.

Contract:

* ``write_file_atomic(path, data, backup=...)`` leaves ``path`` holding either its old
  content or ``data``, never a mix, whatever the moment of a crash: the bytes go to a temp
  file of their own in the same directory (``<name>.<pid>.<random>.tmp``, created
  exclusively, so two writes never share one), are fsynced, renamed over ``path``, and the
  directory is fsynced so the rename itself survives. A write that fails removes its temp
  file. With ``backup`` the previous content is first copied to ``<name>.bak`` (upstream
  ``MixAll.string2File``), which the readers fall back to when the file is missing or
  damaged. Blocking: call it from a worker thread on an event loop.
* ``AtomicFileWriter(path).write(encode)`` is the async path: this file's writes run one at
  a time in call order, each on a worker thread, and ``encode()`` is called on the loop
  when the write's turn comes, so the last write carries the newest state. Once its thread
  has started a write holds the file until the thread is done, even if the awaiting
  coroutine is cancelled (a client hanging up mid-request): the write is shielded, a
  cancelled caller's failure is logged, and no later write can overtake it. A caller
  cancelled while it still waits for its turn writes nothing.
* ``remove_stale_temp_files(path)`` is for loaders, before serving: it removes the temp
  files a crash left behind for ``path`` (ours from an earlier process, those of processes
  that are gone, the old fixed ``<name>.tmp``), never one a live writer is using.

Users: the broker's ``ConfigManager`` tables and the nameserver's kvConfig and
configuration files (server/), and ``LocalFileOffsetStore`` (client/).
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import threading
from collections.abc import Callable
from pathlib import Path

from aiorocketmq.logs import get_logger

__all__ = ["write_file_atomic", "AtomicFileWriter", "remove_stale_temp_files"]

log = get_logger("aiorocketmq.protocol.atomic_file")

_in_flight: set[str] = set()  # temp files this process is writing right now
_in_flight_lock = threading.Lock()


def _temp_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")


def write_file_atomic(path: Path, data: bytes, *, backup: bool = False) -> None:
    """Replace ``path`` by ``data`` so that a crash leaves the old or the new content.

    Args:
        backup: first copy the current content (if any) to ``<name>.bak``.

    Raises:
        OSError: the directory or a file could not be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_path(path)
    key = str(tmp)
    with _in_flight_lock:
        _in_flight.add(key)
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if backup and path.exists():
            path.with_name(path.name + ".bak").write_bytes(path.read_bytes())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        with _in_flight_lock:
            _in_flight.discard(key)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def remove_stale_temp_files(path: Path) -> list[Path]:
    """Remove the temp files an interrupted write of ``path`` left; the ones removed.

    Kept: a temp file this process is writing, or one whose process is still alive.
    """
    pattern = re.compile(re.escape(path.name) + r"(?:\.(\d+)\.[0-9a-f]{16})?\.tmp")
    removed: list[Path] = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed  # no directory yet (or unreadable: the load reports that)
    me = os.getpid()
    for name in names:
        m = pattern.fullmatch(name)
        if m is None:
            continue
        candidate = path.with_name(name)
        if m.group(1) is not None:
            pid = int(m.group(1))
            with _in_flight_lock:
                busy = str(candidate) in _in_flight
            if busy or (pid != me and _process_alive(pid)):
                continue
        try:
            candidate.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("atomic_file.stale_temp_kept", path=str(candidate), error=str(exc))
            continue
        removed.append(candidate)
        log.info("atomic_file.stale_temp_removed", path=str(candidate))
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    except OverflowError:
        return False
    return True


class AtomicFileWriter:
    """One file's async writes: one at a time, in call order, each to its end."""

    __slots__ = ("path", "backup", "_lock")

    def __init__(self, path: Path, *, backup: bool = False) -> None:
        self.path = path
        self.backup = backup
        self._lock = asyncio.Lock()

    async def write(self, encode: Callable[[], bytes | None],
                    written: Callable[[], None] | None = None) -> bool:
        """Write ``encode()`` once every earlier write of this file is done.

        ``encode`` runs on the loop when this write's turn comes; ``None`` skips the write
        (nothing left to do). ``written`` runs on the loop once the bytes are in place,
        before the next write's turn, whether or not the caller still waits. Returns whether
        a write happened.

        Raises:
            OSError: the file could not be written (the previous content stays).
        """
        lock = self._lock
        await lock.acquire()
        try:
            data = encode()
            if data is None:
                lock.release()
                return False
            future = asyncio.get_running_loop().run_in_executor(
                None, self._write_now, data)
        except BaseException:
            lock.release()
            raise
        # Not a task: nothing (not even the loop's shutdown) cancels it, so the file stays
        # held until the thread has returned.
        waiter = asyncio.shield(future)

        def done(fut: asyncio.Future[None]) -> None:
            try:
                exc = None if fut.cancelled() else fut.exception()
                if exc is None and written is not None:
                    written()
                elif exc is not None and waiter.cancelled():
                    log.error("atomic_file.write_failed", path=str(self.path),
                              error=f"{exc.__class__.__name__}: {exc}")
            finally:
                lock.release()

        future.add_done_callback(done)
        await waiter
        return True

    def _write_now(self, data: bytes) -> None:
        write_file_atomic(self.path, data, backup=self.backup)
