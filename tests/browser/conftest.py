"""Fixtures for the dashboard tests in headless Chromium (Debian's ``chromium`` package).

One nameserver + broker (real processes), the known workload of ``workload.py``, one
``mqdashboard`` process (the console script's module, port 0, its readiness line read from
stdout), and one Chromium driven by Playwright's sync API with a fresh profile per module.

Chromium comes from the system (``make browser-deps`` installs it with apt-get); Playwright's
own browser download is never used. A missing chromium or playwright FAILS these tests with
what to run: the browser tests are part of the suite, not optional.

The test modules share from here: ``running_dashboard`` (a dashboard process for a module's
own ``dashboard`` fixture), the ``http_api`` fixture (``Http`` on whichever ``dashboard``
the module has), ``go`` (open a route, wait until it has rendered) and ``expect``.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.browser.http import Http
from tests.browser.workload import Workload
from tests.procs import ServerProcess, namesrv_and_broker

expect: Any
try:
    from playwright.sync_api import expect
except ImportError:  # the browser_context fixture fails the test with what to install
    expect = None

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DASHBOARD_READY = re.compile(r"mqdashboard listening on http://(?P<addr>\S+)")


def dashboard_process(tmp: Path, namesrv_addr: str, *extra: str) -> ServerProcess:
    argv = [sys.executable, "-m", "aiorocketmq.client.dashboard.main", "-n", namesrv_addr,
            "--port", "0", "--sample-interval-ms", "1000", *extra]
    return ServerProcess(argv, DASHBOARD_READY, tmp / "dashboard" / "dashboard.log")


@contextmanager
def running_dashboard(tmp: Path, namesrv_addr: str, *extra: str, config: str | None = None,
                      log_lines: int = 40) -> Iterator[str]:
    """A running ``mqdashboard`` (its base URL), with ``config`` as its config file's text
    when given; stopped on exit, the last ``log_lines`` of its log printed."""
    if config is not None:
        path = tmp / "dashboard.toml"
        path.write_text(config)
        extra = ("-c", str(path), *extra)
    proc = dashboard_process(tmp, namesrv_addr, *extra).start()
    try:
        yield "http://" + proc.address
    finally:
        proc.stop()
        print(f"---- mqdashboard ----\n{proc.log_tail(log_lines)}")


def go(page: Any, base: str, fragment: str, timeout_ms: float | None = None) -> float:
    """Open a page and wait until the router has rendered that very route; the seconds it
    took (``timeout_ms``: how long the route may take to appear, Playwright's default if
    None)."""
    started = time.perf_counter()
    page.goto(f"{base}/#{fragment}")
    expect(page.locator("main")).to_have_attribute("data-route", fragment, timeout=timeout_ms)
    expect(page.locator("main")).to_have_attribute("aria-busy", "false")
    return time.perf_counter() - started


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with namesrv_and_broker(tmp_path_factory.mktemp("cluster")) as pair:
        yield pair


@pytest.fixture(scope="module")
def workload(cluster: tuple[ServerProcess, ServerProcess]) -> Iterator[Workload]:
    with Workload(cluster[0].address) as w:
        yield w


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory, cluster: tuple[ServerProcess, ServerProcess],
              workload: Workload) -> Iterator[str]:
    """The dashboard's base URL."""
    with running_dashboard(tmp_path_factory.mktemp("dash"), cluster[0].address,
                           log_lines=80) as base:
        yield base


@pytest.fixture(scope="module")
def http_api(dashboard: str) -> Http:
    """The JSON API of the module's ``dashboard``."""
    return Http(dashboard)


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tests save their screenshots (printed): ``DASHBOARD_SCREENSHOTS`` if set,
    else pytest's tmp dir (which keeps only the last few runs)."""
    chosen = os.environ.get("DASHBOARD_SCREENSHOTS")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    print(f"dashboard screenshots: {path}")
    return path


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if shutil.which(CHROMIUM) is None and not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"chromium not found at {CHROMIUM}: run `make browser-deps` (apt-get install "
                    "chromium) or set CHROMIUM=/path/to/chromium", pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright (PyPI) is missing: run `make venv` (the dev extra installs it); "
                    "never `playwright install`, the tests use the system chromium", pytrace=False)
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1360, "height": 900})
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser_context: Any, dashboard: str) -> Iterator[Any]:
    """A fresh tab on the dashboard; console errors fail the test."""
    tab = browser_context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.set_default_timeout(20_000)
    tab.goto(dashboard + "/")
    try:
        yield tab
    finally:
        tab.close()
    unexpected = [e for e in errors if "status of 4" not in e]  # 4xx answers we provoke
    assert not unexpected, f"browser console errors: {unexpected}"
