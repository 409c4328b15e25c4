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
The client's ``RemotingClient`` (behind producers, consumers, admin, the broker's
nameserver registration and slave sync, the Spark link and the dashboard) gets the same
bound per address, for refused and for dropped connections, and still connects at once to
a server that appears.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RemotingConnectError, RemotingError
from aiorocketmq.protocol.remoting_client import RemotingClient
from aiorocketmq.protocol.remoting_server import RemotingServer
from tests.integration.test_broker_send_pull import send
from tests.integration.test_ha import ha_conf, send_until_ok, wait_caught_up
from tests.procs import ServerProcess, broker_process

pytestmark = pytest.mark.timeout(180)

Factory = Callable[[ServerProcess], ServerProcess]
WINDOW = 10.0
MAX_IN_WINDOW = 30  # the backoff allows 14; stock's slave made 85,140


def free_port() -> int:
    """A port nobody listens on right now (connects to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


async def _hammer(client: RemotingClient, addr: str, seconds: float) -> tuple[int, int]:
    """Call ``addr`` in a tight loop for ``seconds``: (calls made, calls refused by backoff)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    calls = held_back = 0
    while loop.time() < end:
        calls += 1
        try:
            await client.invoke(addr, RemotingCommand.create_request(RequestCode.GET_KV_CONFIG), 1.0)
        except RemotingConnectError as exc:
            held_back += "next attempt in" in str(exc)
        except RemotingError:
            pass  # the channel was dropped under the request
        await asyncio.sleep(0)
    return calls, held_back


async def test_client_dials_a_dropping_server_a_few_times_a_second() -> None:
    listener = DropListener()
    port = await listener.start()
    addr = f"127.0.0.1:{port}"
    try:
        async with RemotingClient() as client:
            calls, held_back = await _hammer(client, addr, 5.0)
    finally:
        await listener.stop()
    print(f"client: {listener.accepted} connections for {calls} calls in 5s")
    assert calls > 100 and held_back > 0, (calls, held_back)
    # 0.1 s doubling to 2 s: about 8 dials in 5 s (the first drop redials at once)
    assert 3 <= listener.accepted <= 15, (listener.accepted, calls)


async def test_client_backs_off_from_a_refused_address_and_connects_when_it_appears() -> None:
    port = free_port()
    addr = f"127.0.0.1:{port}"
    async with RemotingClient() as client:
        calls, held_back = await _hammer(client, addr, 3.0)
        print(f"client: {calls - held_back} dials for {calls} calls in 3s")
        assert calls > 100 and held_back > 0, (calls, held_back)
        assert calls - held_back <= 10, (calls, held_back)  # dials actually made
        server = RemotingServer({}, port=port)
        await server.start()
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    r = await client.invoke(addr, RemotingCommand.create_request(
                        RequestCode.GET_KV_CONFIG), 3.0)
                    break
                except RemotingConnectError:
                    assert time.monotonic() < deadline, "never connected to the new server"
                    await asyncio.sleep(0.05)
            assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            # Connected: the backoff is over, a dropped channel is redialled at once.
            client.close_channel(addr)
            assert (await client.invoke(addr, RemotingCommand.create_request(
                RequestCode.GET_KV_CONFIG), 3.0)).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        finally:
            await server.stop()
