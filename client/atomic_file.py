"""Crash-safe file replacement: the one atomic write every persisted table uses.

Contract: ``write_file_atomic(path, data, backup=...)`` leaves ``path`` holding either its
old content or ``data``, never a mix, whatever the moment of a crash: the bytes go to
``<name>.tmp``, are fsynced, renamed over ``path``, and the directory is fsynced so the
rename itself survives. With ``backup`` the previous content is first copied to
``<name>.bak`` (upstream ``MixAll.string2File``), which the readers fall back to when the
file is missing or damaged. Blocking: call it from a worker thread on an event loop.

Users: the broker's ``ConfigManager`` tables and the nameserver's kvConfig and
configuration files (server/), and ``LocalFileOffsetStore`` (client/).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_file_atomic"]


def write_file_atomic(path: Path, data: bytes, *, backup: bool = False) -> None:
    """Replace ``path`` by ``data`` so that a crash leaves the old or the new content.

    Args:
        backup: first copy the current content (if any) to ``<name>.bak``.

    Raises:
        OSError: the directory or a file could not be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    if backup and path.exists():
        path.with_name(path.name + ".bak").write_bytes(path.read_bytes())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
