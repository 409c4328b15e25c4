"""Channel ``eager_requests``: when an answered request reaches the transport.

The contract (protocol/channel.py, "Writing"): with ``eager_requests`` a request sent by
``invoke`` / ``invoke_async`` is handed to the transport inside the call while the
transport holds nothing unsent; otherwise (option off, a backed-up transport, oneway
requests, responses) frames wait for the one coalesced write at the end of the loop
iteration. A recording transport shows each write; coroutines are stepped by hand so
"inside the call" needs no timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import RpcFlag
from aiorocketmq.protocol.command import RemotingCommand


class RecordingTransport:
    """Just enough of ``asyncio.Transport`` for a Channel; keeps every write."""

    def __init__(self, backlog: int = 0) -> None:
        self.writes: list[bytes] = []
        self.backlog = backlog  # what get_write_buffer_size reports

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 10911), "sockname": ("127.0.0.1", 50000)}.get(
            name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return self.backlog

    def writelines(self, parts: list[bytes]) -> None:
        self.writes.append(b"".join(bytes(p) for p in parts))

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def _channel(eager: bool, backlog: int = 0) -> tuple[Channel, RecordingTransport]:
    channel = Channel(eager_requests=eager)
    transport = RecordingTransport(backlog)
    channel.connection_made(transport)  # type: ignore[arg-type]
    return channel, transport


def _step(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` up to its first suspension; return what it yielded."""
    return coro.send(None)


def _finish(coro: Coroutine[Any, Any, Any]) -> Any:
    with pytest.raises(StopIteration) as stop:
        coro.send(None)
    return stop.value.value


def _answer(channel: Channel, request: RemotingCommand) -> None:
    response = RemotingCommand(0, opaque=request.opaque, flag=int(RpcFlag.RESPONSE),
                               remark="ok")
    head, body = response.encode_parts()
    channel.data_received(head + (body or b""))


async def _next_iteration() -> None:
    # One pass of the loop: callbacks scheduled with call_soon before this have run.
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.call_soon(done.set_result, None)
    await done


async def test_eager_invoke_writes_inside_the_call_and_still_resolves() -> None:
    channel, transport = _channel(eager=True)
    request = RemotingCommand.create_request(310, {"a": "1"}, b"body")
    coro = channel.invoke(request, 3.0)
    _step(coro)
    assert len(transport.writes) == 1
    assert RemotingCommand.decode(transport.writes[0][4:]).opaque == request.opaque
    _answer(channel, request)
    assert _finish(coro).remark == "ok"
    await _next_iteration()  # the iteration's scheduled flush finds nothing left to write
    assert len(transport.writes) == 1
    channel.abort()


async def test_without_eager_requests_wait_for_the_iteration_flush() -> None:
    channel, transport = _channel(eager=False)
    requests = [RemotingCommand.create_request(310, {"a": str(i)}, b"body") for i in range(3)]
    coros = [channel.invoke(r, 3.0) for r in requests]
    for coro in coros:
        _step(coro)
    assert transport.writes == []
    await _next_iteration()
    assert len(transport.writes) == 1  # all three frames in one write, in order
    data = transport.writes[0]
    opaques = []
    while data:
        length = int.from_bytes(data[:4], "big")
        opaques.append(RemotingCommand.decode(data[4:4 + length]).opaque)
        data = data[4 + length:]
    assert opaques == [r.opaque for r in requests]
    for request, coro in zip(requests, coros, strict=True):
        _answer(channel, request)
        _finish(coro)
    channel.abort()


async def test_eager_coalesces_while_the_transport_holds_unsent_bytes() -> None:
    channel, transport = _channel(eager=True, backlog=4096)
    request = RemotingCommand.create_request(310, {"a": "1"}, b"body")
    coro = channel.invoke(request, 3.0)
    _step(coro)
    assert transport.writes == []
    await _next_iteration()
    assert len(transport.writes) == 1
    _answer(channel, request)
    _finish(coro)
    channel.abort()


async def test_eager_invoke_async_writes_inside_the_call() -> None:
    channel, transport = _channel(eager=True)
    request = RemotingCommand.create_request(310, {"a": "1"}, b"body")
    fut = await channel.invoke_async(request, 3.0)
    assert len(transport.writes) == 1
    _answer(channel, request)
    assert fut.result().remark == "ok"
    channel.abort()


async def test_eager_keeps_oneway_and_responses_coalesced() -> None:
    channel, transport = _channel(eager=True)
    await channel.invoke_oneway(RemotingCommand.create_request(310, {"a": "1"}, b"x"), 3.0)
    assert channel.send_response(RemotingCommand(0, opaque=7, remark="late"))
    assert transport.writes == []
    await _next_iteration()
    assert len(transport.writes) == 1
    channel.abort()


async def test_eager_write_sends_earlier_queued_frames_first() -> None:
    channel, transport = _channel(eager=True)
    await channel.invoke_oneway(RemotingCommand.create_request(11, {"k": "v"}, b"x"), 3.0)
    request = RemotingCommand.create_request(310, {"a": "1"}, b"body")
    coro = channel.invoke(request, 3.0)
    _step(coro)
    assert len(transport.writes) == 1
    data = transport.writes[0]
    first_len = int.from_bytes(data[:4], "big")
    first = RemotingCommand.decode(data[4:4 + first_len])
    second = RemotingCommand.decode(data[8 + first_len:])
    assert (first.code, second.code) == (11, 310)
    _answer(channel, request)
    _finish(coro)
    channel.abort()
