"""RemotingServer graceful drain: stop accepting, let running handlers answer, then stop.

Real 127.0.0.1 sockets, in-process. A handler blocked on an event stands for a SYNC_FLUSH
send waiting for its group commit. Nothing sleeps: every wait is on an event or future,
or a condition polled under a deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import ConnectionClosedError, RemotingConnectError
from aiorocketmq.protocol.remoting_server import RemotingServer

pytestmark = pytest.mark.timeout(30)

GATED = 9101
ECHO = 9102


class Gate:
    """A coroutine handler that answers only once ``release`` is set."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def handler(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        self.entered.set()
        await self.release.wait()
        return request.create_response(ResponseCode.SUCCESS, remark="answered after drain")


def echo(channel: Channel, request: RemotingCommand) -> RemotingCommand:
    return request.create_response(ResponseCode.SUCCESS)


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
async def server(gate: Gate) -> AsyncIterator[RemotingServer]:
    srv = RemotingServer({GATED: gate.handler, ECHO: echo})
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


async def test_in_flight_handler_is_answered_before_stop(server: RemotingServer, channel: Channel,
                                                         gate: Gate) -> None:
    pending = asyncio.ensure_future(
        channel.invoke(RemotingCommand.create_request(GATED), timeout=20))
    await gate.entered.wait()
    server.stop_accepting()
    server.stop_accepting()  # idempotent
    with pytest.raises(RemotingConnectError):
        await Channel.connect("127.0.0.1", server.port, timeout=5)
    # The live connection is still served while draining.
    ok = await channel.invoke(RemotingCommand.create_request(ECHO), timeout=5)
    assert ok.code == ResponseCode.SUCCESS
    drain = asyncio.ensure_future(server.drain(20))
    await asyncio.sleep(0)
    assert not drain.done()
    gate.release.set()
    assert await drain is True
    await server.stop()
    response = await pending
    assert response.code == ResponseCode.SUCCESS and response.remark == "answered after drain"


async def test_drain_without_running_handlers_returns_at_once(server: RemotingServer,
                                                              channel: Channel) -> None:
    assert (await channel.invoke(RemotingCommand.create_request(ECHO), timeout=5)).code == 0
    server.stop_accepting()
    assert await server.drain(20) is True


async def test_drain_is_bounded_and_stop_cancels_the_rest(server: RemotingServer, channel: Channel,
                                                          gate: Gate) -> None:
    pending = asyncio.ensure_future(
        channel.invoke(RemotingCommand.create_request(GATED), timeout=20))
    await gate.entered.wait()
    server.stop_accepting()
    assert await server.drain(0.05) is False
    await server.stop()
    with pytest.raises(ConnectionClosedError):
        await pending


async def test_stop_accepting_before_start_is_harmless() -> None:
    srv = RemotingServer({ECHO: echo})
    srv.stop_accepting()
    assert await srv.drain(1) is True
    await srv.stop()
