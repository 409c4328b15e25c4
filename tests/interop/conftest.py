"""Fixtures for the ali-ons interop suite (and, imported from ``java_conftest.py``, the stock
RocketMQ 4.9.7 suites).

The server fixtures are the integration ones (real ``mqnamesrv`` / ``mqbroker`` processes
on 127.0.0.1, logs printed at teardown); ``ons`` starts harness scripts and reaps them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import broker, namesrv, server_factory
from tests.interop.java_conftest import (
    java_driver,
    mqadmin,
    stock_broker,
    stock_cluster,
    stock_java,
    stock_namesrv,
    stock_servers,
)
from tests.interop.node import HarnessError, NodeScript, require_node

__all__ = ["broker", "namesrv", "server_factory", "ons", "stock_java", "stock_namesrv",
           "stock_broker", "stock_cluster", "stock_servers", "java_driver", "mqadmin"]

StartScript = Callable[..., Awaitable[NodeScript]]


@pytest.fixture(autouse=True)
def _node_and_ali_ons(request: pytest.FixtureRequest) -> None:
    """Fail (never skip) every interop test, before any server starts, when node or the
    ali-ons package is missing; the message says to run ``make interop-deps``. Tests of the
    stock Java suites (they use ``stock_java``, which has its own check) do not need node."""
    if "stock_java" in request.fixturenames:
        return
    try:
        require_node()
    except HarnessError as exc:
        missing = str(exc)
    else:
        return
    pytest.fail(missing, pytrace=False)


@pytest.fixture
async def ons(tmp_path: Path) -> AsyncIterator[StartScript]:
    """``await ons(script, config, name=...)`` starts a harness script; all are reaped at
    teardown and their stderr printed (shown by pytest when the test fails)."""
    started: list[NodeScript] = []

    async def start(script: str, config: dict[str, Any], *, name: str) -> NodeScript:
        s = NodeScript(script, config, name=name, log_dir=tmp_path / "node")
        started.append(s)
        return await s.start()

    yield start
    for s in reversed(started):
        await s.kill()
        print(s.describe(last=10))
