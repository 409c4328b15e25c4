"""Reconnect storms: every reconnect path backs off (protocol/backoff.py), on 127.0.0.1.

A peer that is "there but not serving" (a listener that accepts and at once closes each
connection: a proxy or load balancer in front of a dead master, a port taken over by
something else) is the storm case: connects succeed, so nothing waited between them. Over
10 s against such a listener, measured on the 2-core test machine:

* stock 4.9.7's slave (``HAService.HAClient``: 5 s pause only after a *failed* connect, an
  immediate redial after a closed one): 85,140 connections
  (``tests/interop/test_stock_ha_reconnect.py`` measures it again, without asserting on it);
* our slave before the backoff: 65,278 connections; with it: at most 14 (0.1 s doubling
  to a 2 s cap, half of each delay fixed), asserted below with a margin (<= 30).

A refused port (nothing listening, ECONNREFUSED) was already paced by both (5 s between
attempts); ours now redials within 2 s, so a master that comes back is found quickly: the
slave test ends with a real SYNC_MASTER taking over the address and the slave catching up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client.remoting import RemotingClient
from aiorocketmq.protocol.codes import ResponseCode
from tests.integration.test_broker_send_pull import send
from tests.integration.test_ha import ha_conf, send_until_ok, wait_caught_up
from tests.procs import ServerProcess, broker_process

pytestmark = pytest.mark.timeout(180)

Factory = Callable[[ServerProcess], ServerProcess]
WINDOW = 10.0
MAX_IN_WINDOW = 30  # the backoff allows 14; stock's slave made 85,140


class DropListener:
    """Accepts every connection on 127.0.0.1 and closes it at once, counting them."""

    def __init__(self) -> None:
        self.accepted = 0
        self._server: asyncio.Server | None = None

    async def start(self, port: int = 0) -> int:
        listener = self

        class Drop(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                listener.accepted += 1
                transport.close()

        self._server = await asyncio.get_running_loop().create_server(Drop, "127.0.0.1", port)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None


async def wait_for(cond: Callable[[], bool], what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def count_over(listener: DropListener, seconds: float) -> int:
    before = listener.accepted
    await asyncio.sleep(seconds)
    return listener.accepted - before


async def test_slave_backs_off_from_a_dropping_master_address_then_catches_up(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    listener = DropListener()
    port = await listener.start()
    try:
        slave = server_factory(broker_process(
            tmp_path, namesrv.address, name="slave",
            conf=ha_conf("SLAVE", 1, haMasterAddress=f"127.0.0.1:{port}")))
        await wait_for(lambda: listener.accepted >= 1, "the slave never dialled its master")
        dialled = await count_over(listener, WINDOW)
    finally:
        await listener.stop()
    print(f"our slave: {dialled} connections in {WINDOW}s")
    assert 3 <= dialled <= MAX_IN_WINDOW, f"{dialled} connections in {WINDOW}s"

    # The address now refuses; a real master takes it over and the slave follows.
    master = server_factory(broker_process(
        tmp_path, namesrv.address, name="master",
        conf=ha_conf("SYNC_MASTER", 0, haListenPort=str(port))))
    client = RemotingClient()
    try:
        await send_until_ok(client, master.address, "Backoff", timeout=30)
        for i in range(20):
            r = await send(client, master.address, "Backoff", f"m{i}".encode())
            assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        await wait_caught_up(client, master.address, slave.address)
    finally:
        await client.close()
