"""Fixtures for the stock Apache RocketMQ 4.9.7 suites (``test_stock_*.py``); imported by
``tests/interop/conftest.py``. The processes themselves are in :mod:`tests.interop.stock`.

* ``stock_java`` (session): the built classpath; FAILS (never skips) every test that uses a
  stock fixture when java, mvn or ``make java-deps``'s output is missing, before anything starts.
* ``stock_namesrv(name="stock-namesrv", props=None) -> JavaServer`` (started)
* ``stock_broker(namesrv_addr, *, name="broker-a", conf=None) -> JavaServer`` (started; conf
  entries go into broker.conf, any role)
* ``stock_cluster -> (namesrv, broker)``: one of each, default settings
* ``java_driver(scenario, *, namesrv, serialize_type=None, name=None, jvm_props=None, **options)
  -> DriverProcess`` (started; ``.wait()`` -> DriverResult, ``.wait().check()`` asserts success)
* ``mqadmin(namesrv_addr, command, *args, timeout=60.0, serialize_type=None) -> AdminResult``

All servers and drivers are stopped / killed at teardown, servers' log tails printed (pytest
shows them for a failed test), with each JVM's start time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop import stock
from tests.interop.stock import (
    AdminResult,
    DriverProcess,
    JavaEnv,
    JavaServer,
    StockHarnessError,
    require_java,
    start_driver,
    start_stock_broker,
    start_stock_namesrv,
    stop_all,
)

__all__ = ["stock_java", "stock_servers", "stock_namesrv", "stock_broker", "stock_cluster", "java_driver",
           "mqadmin"]


@pytest.fixture(scope="session")
def stock_java() -> JavaEnv:
    """Fails (never skips) every test that needs the Java harness when it is not built."""
    try:
        return require_java()
    except StockHarnessError as exc:
        missing = str(exc)
    pytest.fail(missing, pytrace=False)


@pytest.fixture
def stock_servers() -> Iterator[list[JavaServer]]:
    """Every stock server this test started; all stopped together at teardown (SIGTERM,
    SIGKILL after 15 s)."""
    started: list[JavaServer] = []
    yield started
    codes = stop_all(reversed(started))
    for server in reversed(started):
        code = codes[server]
        print(f"---- stock {server.home.name} {server.address} (started in {server.startup_seconds:.1f}s, "
              f"exit {code}) ----\n{server.log_tail(60)}")


@pytest.fixture
def stock_namesrv(stock_java: JavaEnv, tmp_path: Path,
                  stock_servers: list[JavaServer]) -> Callable[..., JavaServer]:
    def start(name: str = "stock-namesrv", props: dict[str, str] | None = None) -> JavaServer:
        server = start_stock_namesrv(tmp_path, name=name, props=props)
        stock_servers.append(server)
        return server
    return start


@pytest.fixture
def stock_broker(stock_java: JavaEnv, tmp_path: Path,
                 stock_servers: list[JavaServer]) -> Callable[..., JavaServer]:
    def start(namesrv_addr: str, *, name: str = "broker-a", conf: dict[str, str] | None = None) -> JavaServer:
        server = start_stock_broker(tmp_path, namesrv_addr, name=name, conf=conf)
        stock_servers.append(server)
        return server
    return start


@pytest.fixture
def stock_cluster(stock_namesrv: Callable[..., JavaServer],
                  stock_broker: Callable[..., JavaServer]) -> tuple[JavaServer, JavaServer]:
    ns = stock_namesrv()
    return ns, stock_broker(ns.address)


@pytest.fixture
def java_driver(stock_java: JavaEnv, tmp_path: Path) -> Iterator[Callable[..., DriverProcess]]:
    started: list[DriverProcess] = []

    def start(scenario: str, **kwargs: Any) -> DriverProcess:
        proc = start_driver(tmp_path, scenario, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.result is None:  # still running or never collected: a test failed
            proc.kill()
            print(proc.wait(5).describe())


@pytest.fixture
def mqadmin(stock_java: JavaEnv, tmp_path: Path) -> Callable[..., AdminResult]:
    return functools.partial(stock.mqadmin, tmp_path)
