"""Fixtures that start real nameserver and broker processes on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.procs import ServerProcess, broker_process, namesrv_process


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[[ServerProcess], ServerProcess]]:
    """Start servers inside a test; all are stopped (and their logs printed) at teardown."""
    started: list[ServerProcess] = []

    def start(proc: ServerProcess) -> ServerProcess:
        started.append(proc)
        return proc.start()

    yield start
    for proc in reversed(started):
        proc.stop()
        print(f"---- {proc.log_path} ----\n{proc.log_tail(200)}")


@pytest.fixture
def namesrv(tmp_path: Path, server_factory: Callable[[ServerProcess], ServerProcess]) -> ServerProcess:
    return server_factory(namesrv_process(tmp_path))


@pytest.fixture
def broker(tmp_path: Path, namesrv: ServerProcess,
           server_factory: Callable[[ServerProcess], ServerProcess]) -> ServerProcess:
    return server_factory(broker_process(tmp_path, namesrv.address))


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    """A bare RemotingClient for raw requests, closed at teardown."""
    c = RemotingClient()
    try:
        yield c
    finally:
        await c.close()
