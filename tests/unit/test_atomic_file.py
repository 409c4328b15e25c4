"""write_file_atomic: the new content or the old, the previous content as .bak on request, a
temp file of its own per write; AtomicFileWriter: writes in order, each to its end even when
its caller is cancelled; remove_stale_temp_files: what a crash left, and only that."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from aiorocketmq.protocol.atomic_file import (
    AtomicFileWriter,
    remove_stale_temp_files,
    write_file_atomic,
)
from tests.logs import capture_logs


def test_replaces_and_keeps_the_previous_content_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "t.json"
    write_file_atomic(path, b"one", backup=True)  # creates the directory; nothing to back up
    assert path.read_bytes() == b"one" and not path.with_name("t.json.bak").exists()
    write_file_atomic(path, b"two", backup=True)
    assert path.read_bytes() == b"two" and path.with_name("t.json.bak").read_bytes() == b"one"
    write_file_atomic(path, b"three")
    assert path.read_bytes() == b"three" and path.with_name("t.json.bak").read_bytes() == b"one"
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.json", "t.json.bak"]  # no .tmp


def test_a_failed_write_removes_its_temp_file_and_keeps_the_old_content(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    write_file_atomic(path, b"old")
    path.with_name("t.json.bak").mkdir()  # the backup copy cannot be written
    with pytest.raises(OSError):
        write_file_atomic(path, b"new", backup=True)
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json", "t.json.bak"]


def test_writes_from_several_threads_never_share_a_temp_file(tmp_path: Path) -> None:
    """Writers that nothing serialises (two stores, a sync and an async path): each write
    stands on its own, so none fails and the file is one of the contents, whole."""
    path = tmp_path / "t.json"
    contents = [json.dumps({"writer": w, "pad": "y" * (20_000 + w)}).encode() for w in range(4)]
    errors: list[BaseException] = []

    def run(data: bytes) -> None:
        try:
            for _ in range(40):
                write_file_atomic(path, data, backup=True)
        except BaseException as exc:  # collected: the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(data,)) for data in contents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert path.read_bytes() in contents
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json", "t.json.bak"]


# -- cancelled writers --------------------------------------------------------------------

WRITERS = 40
# Each write carries padding of a random size: long enough for some to be cancelled while
# their thread runs, and unequal, so that a later write could overtake an earlier one.
MAX_PAD = 1_500_000


@pytest.mark.parametrize("seed", range(6))
async def test_writers_cancelled_at_random_points_leave_the_newest_state(
        tmp_path: Path, seed: int) -> None:
    """Many concurrent writers of one file, most cancelled at a random moment (before their
    turn, while their thread writes, after it): none fails, and once the writes are done the
    file parses, is exactly the newest state written, holds every acknowledged change, and
    no temp file is left."""
    rnd = random.Random(seed)
    loop = asyncio.get_running_loop()
    path = tmp_path / "table.json"
    writer = AtomicFileWriter(path, backup=True)
    table: dict[str, int] = {}
    acked: dict[str, int] = {}  # key -> highest value whose write returned to its caller
    encoded: list[bytes] = []
    counter = itertools.count()

    async def put(key: str, pause: int, pad: int) -> None:
        def encode() -> bytes:
            data = json.dumps({"table": table, "pad": "x" * pad}).encode()
            encoded.append(data)
            return data

        for _ in range(pause):
            await asyncio.sleep(0)
        value = next(counter)  # values only grow, per key too
        table[key] = value
        await writer.write(encode)
        acked[key] = max(acked.get(key, -1), value)

    tasks = []
    for _ in range(WRITERS):
        task = loop.create_task(put(f"k{rnd.randrange(6)}", rnd.randrange(4),
                                    rnd.randrange(MAX_PAD)))
        tasks.append(task)
        draw = rnd.random()
        if draw < 0.15:
            task.cancel()  # before it ever runs
        elif draw < 0.75:
            loop.call_later(rnd.random() * 0.03, task.cancel)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [r for r in results
                if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)]
    assert failures == []
    assert any(isinstance(r, asyncio.CancelledError) for r in results)
    assert acked, "no writer finished: nothing was checked"

    # A write after all of them waits until every started one is done, then skips.
    assert await writer.write(lambda: None) is False
    on_disk = path.read_bytes()
    assert on_disk == encoded[-1]  # the newest write is the one in place
    stored = json.loads(on_disk)["table"]
    for key, value in acked.items():
        assert stored[key] >= value, (key, stored, acked)
    for key, value in stored.items():
        assert value <= table[key]
    json.loads(path.with_name("table.json.bak").read_bytes())  # the copy parses too
    assert sorted(os.listdir(tmp_path)) == ["table.json", "table.json.bak"]


async def test_a_cancelled_write_is_not_overtaken_by_a_later_one(tmp_path: Path) -> None:
    """A long write whose caller is cancelled once its thread runs, then a short one: the
    short one waits, so the file ends at the short one's (newer) content."""
    path = tmp_path / "t.json"
    writer = AtomicFileWriter(path)
    loop = asyncio.get_running_loop()
    long = loop.create_task(writer.write(lambda: json.dumps({"v": 1, "pad": "x" * 20_000_000})
                                         .encode()))
    await asyncio.sleep(0)  # its thread is writing
    long.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long
    assert await writer.write(lambda: b'{"v": 2}') is True
    deadline = loop.time() + 60
    while any(name.endswith(".tmp") for name in os.listdir(tmp_path)):  # a write still runs
        assert loop.time() < deadline, os.listdir(tmp_path)
        await asyncio.sleep(0.01)
    assert json.loads(path.read_bytes()) == {"v": 2}
    assert os.listdir(tmp_path) == ["t.json"]


async def test_a_write_failing_after_its_caller_is_cancelled_frees_the_file(
        tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b"old")
    path.with_name("t.json.bak").mkdir()  # every backed-up write fails in its thread
    failing = AtomicFileWriter(path, backup=True)
    with capture_logs() as logs:
        task = asyncio.get_running_loop().create_task(failing.write(lambda: b"x" * 1_000_000))
        await asyncio.sleep(0)  # the thread has started
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline = asyncio.get_running_loop().time() + 30
        while not any(e["event"] == "atomic_file.write_failed" for e in logs):
            assert asyncio.get_running_loop().time() < deadline, "the failure was not logged"
            await asyncio.sleep(0.01)
        path.with_name("t.json.bak").rmdir()
        assert await failing.write(lambda: b"new") is True  # the failure released the file
    failed = [e for e in logs if e["event"] == "atomic_file.write_failed"]
    assert len(failed) == 1 and failed[0]["path"] == str(path)  # not lost with its caller
    assert path.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == ["t.json", "t.json.bak"]


# -- leftovers of a crash -----------------------------------------------------------------


def test_stale_temp_files_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    path = tmp_path / "kvConfig.json"
    path.write_bytes(b"{}")
    names = {
        "legacy": "kvConfig.json.tmp",
        "ours": f"kvConfig.json.{os.getpid()}.0123456789abcdef.tmp",
        "dead": f"kvConfig.json.{gone.pid}.fedcba9876543210.tmp",
        "live": "kvConfig.json.1.00112233445566ff.tmp",  # pid 1 is always running
        "other_file": f"topics.json.{gone.pid}.0123456789abcdef.tmp",
        "not_ours": "kvConfig.json.notes.tmp",
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"half")
    removed = remove_stale_temp_files(path)
    assert sorted(p.name for p in removed) == sorted(
        names[k] for k in ("legacy", "ours", "dead"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["kvConfig.json", names["live"], names["other_file"], names["not_ours"]])
    assert remove_stale_temp_files(tmp_path / "missing" / "x.json") == []
