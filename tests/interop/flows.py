"""Scenario flows run in the background, a few at a time, for the stock interop suites.

Most of a stock-client scenario's wall time is waiting: a JVM starting, a 1 s delay level, a
transaction check-back, a consumer's rebalance. A module submits every scenario (a plain
function running its drivers one after another) to a :class:`Flows` at setup; each test then
waits for its own flow's result and checks it, so a failure still names one scenario while the
waits of different scenarios overlap. At most ``workers`` flows run at once (2 cores).

Processes are spawned one at a time (``tests.procs.SPAWN_LOCK``, taken by the harness's Popen
calls): concurrent ``Popen`` from these threads once failed with ``OSError: [Errno 14] Bad
address``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.interop import stock
from tests.interop.stock import AdminResult, DriverProcess, DriverResult, start_driver


class Flows:
    def __init__(self, tmp: Path, namesrv: str, *, workers: int = 3) -> None:
        self.tmp = tmp
        self.namesrv = namesrv
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="flow")
        self.futures: dict[str, Future[Any]] = {}
        self.procs: list[DriverProcess] = []
        self.lock = threading.Lock()
        self.closed = False

    def submit(self, name: str, fn: Callable[[Flows], Any]) -> None:
        """Run ``fn(self)`` in the background; :meth:`result` ``(name)`` gives what it returns.
        A flow may wait for an earlier one's result (the pool runs them in submission order)."""
        assert name not in self.futures, name
        self.futures[name] = self.pool.submit(fn, self)

    def result(self, name: str, timeout: float = 150.0) -> Any:
        return self.futures[name].result(timeout)

    def start(self, scenario: str, **options: Any) -> DriverProcess:
        """Start a driver against this module's nameserver (killed at :meth:`close`)."""
        with self.lock:
            if self.closed:
                raise RuntimeError("flows closed")
            proc = start_driver(self.tmp, scenario, namesrv=self.namesrv, **options)
            self.procs.append(proc)
        return proc

    def mqadmin(self, command: str, *args: str) -> AdminResult:
        """The stock mqadmin against this module's nameserver."""
        return stock.mqadmin(self.tmp, self.namesrv, command, *args)

    def run(self, scenario: str, *, wait: float = 90.0, **options: Any) -> DriverResult:
        """Start a driver and wait for its successful end (StockHarnessError otherwise)."""
        return self.start(scenario, **options).wait(wait).check()

    def close(self) -> None:
        """Cancel flows not yet started, kill every driver still running, join the workers."""
        with self.lock:
            self.closed = True
        for fut in self.futures.values():
            fut.cancel()
        for proc in list(self.procs):
            if proc.result is None:
                proc.kill()
        self.pool.shutdown(wait=True)
