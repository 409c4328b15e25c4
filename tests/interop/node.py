"""Run the ali-ons harness scripts (``tests/interop/harness/*.js``) from asyncio tests.

Contract: a ``NodeScript`` starts ``node <script> <config-json>``; its stdout carries JSON
lines (the harness contract in ``harness/common.js``), read by one background task the
script object owns (started in ``start()``, awaited in ``close()``/``kill()``) so that a
chatty script never blocks on a full pipe while the test waits on another one. stderr
goes to a file under the test's tmp dir, quoted in every failure message.

Tests wait on conditions, never on time: ``wait_until(what, predicate, *scripts,
timeout=...)`` re-evaluates ``predicate`` each time any of the scripts prints a line and
fails with the events seen and the stderr tails when the deadline passes, when a script
reports ``failed`` or when it exits unexpectedly.
"""

# ASYNC109: ``timeout`` is each wait's deadline in seconds.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
HARNESS_DIR = HERE / "harness"
ALI_ONS_DIR = HERE / "node_modules" / "ali-ons"

T = TypeVar("T")
Event = dict[str, Any]


class HarnessError(AssertionError):
    """A harness script failed, exited early, or a wait on its output passed its deadline."""


def require_node() -> str:
    """The ``node`` executable; fails (never skips) when node or ali-ons is missing."""
    node = shutil.which("node")
    problems = []
    if node is None:
        problems.append("`node` is not on PATH")
    if not (ALI_ONS_DIR / "package.json").is_file():
        problems.append(f"{ALI_ONS_DIR.relative_to(HERE.parents[1])} is missing")
    if problems:
        raise HarnessError(
            "interop tests need Node.js and the npm ali-ons client: "
            + "; ".join(problems) + ". Run `make interop-deps` (it installs ali-ons 3.12.0 "
            "from tests/interop/package.json).")
    assert node is not None
    return node


class NodeScript:
    """One running harness script (see module docstring)."""

    def __init__(self, script: str, config: dict[str, Any], *, name: str, log_dir: Path) -> None:
        self.script = script
        self.config = config
        self.name = name
        self.stderr_path = log_dir / f"{name}.stderr.log"
        self.events: list[Event] = []
        self.returncode: int | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._listeners: set[asyncio.Event] = set()
        self._eof = False
        self._closing = False

    async def start(self) -> NodeScript:
        node = require_node()
        self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        with self.stderr_path.open("wb") as stderr:
            self._proc = await asyncio.create_subprocess_exec(
                node, str(HARNESS_DIR / self.script), json.dumps(self.config),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
                cwd=str(HERE),
            )
        self._reader_task = asyncio.create_task(self._read_routine(), name=f"read-{self.name}")
        return self

    async def _read_routine(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            while line := await self._proc.stdout.readline():
                try:
                    event = json.loads(line)
                except ValueError:
                    event = {"event": "unparsed", "line": line.decode(errors="replace")}
                self.events.append(event)
                self._notify()
            self.returncode = await self._proc.wait()
        finally:
            self._eof = True
            self._notify()

    def _notify(self) -> None:
        for listener in self._listeners:
            listener.set()

    # -- what the script said -------------------------------------------------------------

    def of(self, kind: str) -> list[Event]:
        """Every event of one kind, in order."""
        return [e for e in self.events if e.get("event") == kind]

    def received(self) -> list[Event]:
        return self.of("received")

    def latest(self, kind: str, **match: Any) -> Event | None:
        for e in reversed(self.events):
            if e.get("event") == kind and all(e.get(k) == v for k, v in match.items()):
                return e
        return None

    def stderr_tail(self, lines: int = 60) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no stderr)"
        return "\n".join(text.splitlines()[-lines:])

    def describe(self, last: int = 25) -> str:
        shown = "\n".join("    " + json.dumps(_compact(e)) for e in self.events[-last:])
        return (f"--- {self.name} ({self.script}), {len(self.events)} events, "
                f"exit {self.returncode}; last {min(last, len(self.events))}:\n{shown}\n"
                f"--- {self.name} stderr:\n{self.stderr_tail()}")

    def check_alive(self) -> None:
        failed = self.of("failed")
        if failed:
            raise HarnessError(f"{self.name} failed: {failed[0].get('message')}\n{self.describe()}")
        if self._eof and not self._closing:
            raise HarnessError(f"{self.name} exited unexpectedly\n{self.describe()}")

    # -- lifecycle ------------------------------------------------------------------------

    async def wait_exit(self, timeout: float) -> int:
        """Wait for the script to end by itself (producers); its exit code."""
        self._closing = True
        try:
            async with asyncio.timeout(timeout):
                assert self._reader_task is not None
                await self._reader_task
        except TimeoutError:
            await self.kill()
            raise HarnessError(f"{self.name} did not exit within {timeout}s\n{self.describe()}") from None
        assert self.returncode is not None
        return self.returncode

    async def close(self, timeout: float = 30.0) -> int:
        """Ask the script to close its client (a ``close`` line on stdin) and wait for it."""
        self._closing = True
        proc = self._proc
        if proc is not None and proc.stdin is not None and not self._eof:
            try:
                proc.stdin.write(b"close\n")
                await proc.stdin.drain()
                proc.stdin.close()
                await proc.stdin.wait_closed()
            except (BrokenPipeError, ConnectionResetError):
                pass
        return await self.wait_exit(timeout)

    async def kill(self) -> None:
        """SIGKILL if still running, then reap it (teardown path)."""
        self._closing = True
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        if self._reader_task is not None:
            await self._reader_task
        await proc.wait()


async def wait_until(what: str, predicate: Callable[[], T | None], *scripts: NodeScript,
                     timeout: float) -> T:
    """Re-check ``predicate`` whenever one of ``scripts`` prints; its first truthy value.

    Raises:
        HarnessError: the deadline passed, a script reported ``failed`` or exited early.
    """
    changed = asyncio.Event()
    for s in scripts:
        s._listeners.add(changed)
    try:
        async with asyncio.timeout(timeout):
            while True:
                changed.clear()
                result = predicate()
                if result:
                    return result
                for s in scripts:
                    s.check_alive()
                await changed.wait()
    except TimeoutError:
        details = "\n".join(s.describe() for s in scripts)
        raise HarnessError(f"timed out after {timeout}s waiting for {what}\n{details}") from None
    finally:
        for s in scripts:
            s._listeners.discard(changed)


def _compact(event: Event) -> Event:
    """An event without the bulky fields, for failure messages."""
    return {k: v for k, v in event.items() if k not in ("properties", "bornHost", "sysFlag")}
