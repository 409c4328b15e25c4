"""Request/response round trips per second over loopback: our Channel against our RemotingServer.

Request: a captured SEND_MESSAGE_V2 header with a 128-byte body; reply: the captured
SEND_MESSAGE_V2 response header (msgId, queueId, queueOffset, ...), made by a trivial inline
handler. Beside it, the ceiling: a bare asyncio.Protocol echo server that answers each
length-prefixed frame with a same-sized frame, driven by the same client pattern (N
workers, each sending one frame and awaiting its answer) over a bare protocol client that
does no header encoding or decoding at all.

Client and server share one process and one event loop (uvloop when importable, then the
default loop for comparison). Prints one line per configuration; asserts nothing.
Run: ``.venv/bin/python -m aiorocketmq.bench.channel_bench``.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import collections
import logging
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiorocketmq.bench._frames import frame_bytes, frames_where
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import RequestCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.remoting_server import RemotingServer

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
    uvloop = None  # type: ignore[assignment]

DURATION = 0.8  # seconds per configuration
BODY = bytes(range(128))
_LEN = struct.Struct(">i")


def captured(code_filter: dict[str, object]) -> RemotingCommand:
    rec = frames_where(**code_filter)[0]
    return RemotingCommand.decode(frame_bytes(rec["id"])[4:])


SEND_REQ = captured({"code": RequestCode.SEND_MESSAGE_V2, "is_response": False,
                     "serialize": "JSON"})
SEND_RESP = captured({"request_code": RequestCode.SEND_MESSAGE_V2, "is_response": True,
                      "serialize": "JSON"})
REQ_EXT = SEND_REQ.ext_fields or {}
RESP_EXT = SEND_RESP.ext_fields or {}


def send_handler(channel: Channel, request: RemotingCommand) -> RemotingCommand:
    return request.create_response(0, ext_fields=RESP_EXT)


async def drive(concurrency: int, one: Callable[[], Awaitable[object]]) -> float:
    """Round trips per second with ``concurrency`` workers each awaiting ``one()`` in turn."""
    loop = asyncio.get_running_loop()
    for _ in range(200):  # warm-up
        await one()
    count = 0
    stop_at = loop.time() + DURATION

    async def worker() -> None:
        nonlocal count
        while loop.time() < stop_at:
            await one()
            count += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - start)


async def bench_channel(concurrency: int) -> tuple[float, int, int]:
    async with RemotingServer({RequestCode.SEND_MESSAGE_V2: send_handler}) as server:
        channel = await Channel.connect("127.0.0.1", server.port)
        try:
            def one() -> Awaitable[RemotingCommand]:
                req = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, REQ_EXT, BODY)
                return channel.invoke(req, 5)

            req_size = len(RemotingCommand.create_request(310, REQ_EXT, BODY).encode())
            resp_size = len((await one()).encode())
            return await drive(concurrency, one), req_size, resp_size
        finally:
            channel.close()
            await channel.wait_closed()


class EchoServer(asyncio.Protocol):
    """Answers every length-prefixed frame with a frame of the same size (the bytes back)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        out = []
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            end = pos + 4 + _LEN.unpack_from(buf, pos)[0]
            if end > n:
                break
            out.append(bytes(buf[pos:end]))
            pos = end
        del buf[:pos]
        if out and self.transport is not None:
            self.transport.writelines(out)


class EchoClient(asyncio.Protocol):
    """Sends whole frames; answers come back in order, so waiters form a FIFO."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiters: collections.deque[asyncio.Future[bytes]] = collections.deque()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            end = pos + 4 + _LEN.unpack_from(buf, pos)[0]
            if end > n:
                break
            self.waiters.popleft().set_result(bytes(buf[pos:end]))
            pos = end
        del buf[:pos]

    def request(self, frame: bytes) -> asyncio.Future[bytes]:
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        assert self.transport is not None
        self.transport.write(frame)
        return fut


async def bench_echo(concurrency: int, frame: bytes) -> float:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(EchoServer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport, client = await loop.create_connection(EchoClient, "127.0.0.1", port)
    try:
        return await drive(concurrency, lambda: client.request(frame))
    finally:
        transport.close()
        server.close()
        await server.wait_closed()


async def run_all(loop_name: str) -> None:
    frame = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, REQ_EXT, BODY).encode()
    for concurrency in (1, 64):
        rps, req_size, resp_size = await bench_channel(concurrency)
        print(f"{loop_name:<7} channel  concurrency={concurrency:<3} {rps:>9,.0f} round trips/s "
              f"(request {req_size}B, response {resp_size}B)")
        ceiling = await bench_echo(concurrency, frame)
        print(f"{loop_name:<7} echo     concurrency={concurrency:<3} {ceiling:>9,.0f} round trips/s "
              f"(bare frames of {len(frame)}B each way: the ceiling)")


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    print(f"python {sys.version.split()[0]}; client and server in one process, one loop")
    if uvloop is not None:
        uvloop.run(run_all("uvloop"))
    asyncio.run(run_all("asyncio"))


if __name__ == "__main__":
    main()
