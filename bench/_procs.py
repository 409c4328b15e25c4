"""Start real ``mqnamesrv`` / ``mqbroker`` processes on 127.0.0.1 (benchmarks and tests).

Servers bind port 0 and print their readiness line with the real address, which we
read from their stdout under a deadline: no find-a-free-port-then-bind race. Their
logs (stderr) go to a file that the caller prints when it tears down, so a failing
run shows what the server said. The servers are started as ``sys.executable -m
aiorocketmq.server...``, so this works from an installed package as from a checkout:
the benchmarks use it, and ``tests/procs.py`` re-exports it for the test suite.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["BROKER_READY", "NAMESRV_READY", "SPAWN_LOCK", "CommandTimeout", "ServerProcess",
           "broker_process", "namesrv_and_broker", "namesrv_process", "run_command"]

NAMESRV_READY = re.compile(r"The Name Server boot success\. serializeType=\w+ address=(\S+)")
BROKER_READY = re.compile(r"The broker\[(?P<name>[^,]+), (?P<addr>[^\]]+)\] boot success")

# Every Popen of the test harness holds this: CPython 3.11 releases the GIL around vfork(), and
# Popen calls from several threads at once (fixtures starting servers in parallel, background
# scenario flows) once failed with "OSError: [Errno 14] Bad address" on exec.
SPAWN_LOCK = threading.Lock()


class CommandTimeout(Exception):
    """``run_command`` killed the command at its deadline; holds what it had printed."""

    def __init__(self, stdout: str, stderr: str) -> None:
        super().__init__("command did not finish in time")
        self.stdout, self.stderr = stdout, stderr


def run_command(argv: list[str], timeout: float) -> tuple[int, str, str]:
    """Run a one-shot command (spawned under SPAWN_LOCK): (exit code, stdout, stderr); at
    ``timeout`` it is killed and ``CommandTimeout`` carries its output."""
    with SPAWN_LOCK:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
    with proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            raise CommandTimeout(stdout or "", stderr or "") from None
    return proc.returncode, stdout, stderr


class ServerProcess:
    """One server process; ``address`` is known once ``start()`` returns."""

    def __init__(self, argv: list[str], ready: re.Pattern[str], log_path: Path,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.argv = argv
        self.ready = ready
        self.log_path = log_path
        self.env = env
        self.cwd = cwd  # None: this process's
        self.proc: subprocess.Popen[str] | None = None
        self.address: str = ""
        self.match: re.Match[str] | None = None
        self.stdout_lines: list[str] = []

    def start(self, timeout: float = 30.0) -> ServerProcess:
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if self.env:
            env.update(self.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        with SPAWN_LOCK:
            self.proc = subprocess.Popen(
                self.argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                text=True, env=env, cwd=self.cwd,
            )
        log.close()
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()  # also closes the stdout pipe
                    raise RuntimeError(f"{self.argv} not ready in {timeout}s\n{self.log_tail()}")
                if not sel.select(remaining):
                    continue
                line = self.proc.stdout.readline()
                if not line:
                    code = self.proc.wait()
                    self._close_pipes()
                    raise RuntimeError(f"{self.argv} exited with {code} before ready\n{self.log_tail()}")
                self.stdout_lines.append(line)
                m = self.ready.search(line)
                if m:
                    self.match = m
                    self.address = m.group("addr") if "addr" in m.groupdict() else m.group(1)
                    return self
        finally:
            sel.close()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, wait for a clean exit (SIGKILL after ``timeout``); the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close_pipes()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: an unclean stop."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def log_tail(self, lines: int = 80) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def namesrv_process(tmp: Path, *extra: str, name: str = "namesrv") -> ServerProcess:
    argv = [sys.executable, "-m", "aiorocketmq.server.namesrv.main", "--port", "0",
            "--kv-path", str(tmp / name / "kvConfig.json"), *extra]
    return ServerProcess(argv, NAMESRV_READY, tmp / name / "namesrv.log")


def broker_process(tmp: Path, namesrv_addr: str, *, name: str = "broker-a",
                   conf: dict[str, str] | None = None, extra: tuple[str, ...] = ()) -> ServerProcess:
    """A broker whose store lives under ``tmp/<name>``; ``conf`` entries go into its broker.conf."""
    home = tmp / name
    home.mkdir(parents=True, exist_ok=True)
    settings = {
        "brokerClusterName": "DefaultCluster",
        "brokerName": name,
        "brokerId": "0",
        "listenPort": "0",
        "storePathRootDir": str(home / "store"),
        "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
        "mappedFileSizeConsumeQueue": str(20 * 10000),
        # The default index file (5M slots, 20M entries) is ~420 MB; sparse now, but its
        # 20 MB of hash slots are reserved at once. 4 MB files roll over like larger ones.
        "maxHashSlotNum": "50000",
        "maxIndexNum": "200000",
        "flushDiskType": "ASYNC_FLUSH",
        "autoCreateTopicEnable": "true",
    }
    settings.update(conf or {})
    conf_path = home / "broker.conf"
    conf_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    argv = [sys.executable, "-m", "aiorocketmq.server.broker.main", "-n", namesrv_addr, "-c", str(conf_path),
            *extra]
    return ServerProcess(argv, BROKER_READY, home / "broker.log")


@contextlib.contextmanager
def namesrv_and_broker(tmp: Path, *, conf: dict[str, str] | None = None
                       ) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """A nameserver and one broker registered with it, for a module-scoped fixture; both are
    stopped on exit and their log tails printed (pytest shows them when a test failed)."""
    ns = namesrv_process(tmp).start()
    try:
        br = broker_process(tmp, ns.address, conf=conf).start()
    except BaseException:
        ns.stop()
        raise
    try:
        yield ns, br
    finally:
        br.stop()
        ns.stop()
        print(f"---- broker ----\n{br.log_tail(60)}\n---- namesrv ----\n{ns.log_tail(30)}")
