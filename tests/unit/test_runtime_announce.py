"""``announce``: a readiness line reaches a shared pipe in one ``write(2)``.

The instances of ``mqbroker --instances N`` share their supervisor's stdout; a line written
in two pieces (text, then newline, as ``print`` does) can interleave with a sibling's and
glue two readiness lines into one, which a reader counting lines then misses.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from aiorocketmq.protocol import runtime


def test_one_write_per_line_on_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    read_fd, write_fd = os.pipe()
    writes: list[bytes] = []
    real_write = os.write

    def counting_write(fd: int, data: bytes) -> int:
        if fd == write_fd:
            writes.append(bytes(data))
        return real_write(fd, data)

    with os.fdopen(write_fd, "w", closefd=False) as out, os.fdopen(read_fd, "rb") as reader:
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(runtime.os, "write", counting_write)
        runtime.announce("The broker[b-0, 127.0.0.1:10911] boot success.")
        runtime.announce("The broker[b-1, 127.0.0.1:10921] boot success.")
        os.close(write_fd)
        assert reader.read().decode().splitlines() == [
            "The broker[b-0, 127.0.0.1:10911] boot success.",
            "The broker[b-1, 127.0.0.1:10921] boot success.",
        ]
    assert [w.endswith(b"\n") and w.count(b"\n") == 1 for w in writes] == [True, True]


def test_buffered_text_before_the_line_is_not_reordered(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    path = tmp_path / "out"
    with open(path, "w", buffering=io.DEFAULT_BUFFER_SIZE) as out:
        monkeypatch.setattr(sys, "stdout", out)
        out.write("earlier\n")  # still in the text buffer
        runtime.announce("ready")
    with open(path) as fh:
        assert fh.read() == "earlier\nready\n"
