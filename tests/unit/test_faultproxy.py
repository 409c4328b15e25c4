"""tests/faultproxy.py itself: each fault, over real 127.0.0.1 sockets, against a small target
server that records what reached it. Waits are conditions under deadlines; "nothing
arrived" is checked over a short window after something else that must have happened."""

from __future__ import annotations

import asyncio
import socket
import socketserver
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from tests.faultproxy import FaultProxy, ThreadedFaultProxy

pytestmark = pytest.mark.timeout(60)

QUIET = 0.3  # how long "nothing arrives" is watched


class Target:
    """An echo server on 127.0.0.1 that records connections, bytes, EOFs and resets."""

    def __init__(self) -> None:
        self.connections = 0
        self.received = bytearray()
        self.eofs = 0
        self.resets = 0
        self.echo = True
        self.transports: list[asyncio.Transport] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        target = self

        class Echo(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                assert isinstance(transport, asyncio.Transport)
                self.transport = transport
                target.connections += 1
                target.transports.append(transport)

            def data_received(self, data: bytes) -> None:
                target.received += data
                if target.echo:
                    self.transport.write(data)

            def eof_received(self) -> bool:
                target.eofs += 1
                self.transport.write(b"<bye>")
                self.transport.write_eof()
                return True

            def connection_lost(self, exc: Exception | None) -> None:
                if isinstance(exc, ConnectionResetError):
                    target.resets += 1

        self._server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for t in self.transports:
            t.abort()
        await self._server.wait_closed()


@pytest.fixture
async def target() -> AsyncIterator[Target]:
    t = Target()
    t.address = await t.start()  # type: ignore[attr-defined]
    yield t
    await t.stop()


@pytest.fixture
async def proxy(target: Target) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(target.address, seed=7) as p:  # type: ignore[attr-defined]
        yield p


async def until(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def connect(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await writer.wait_closed()
    except ConnectionError:
        pass


async def test_pass_forwards_both_ways_and_counts(proxy: FaultProxy, target: Target) -> None:
    reader, writer = await connect(proxy)
    payload = bytes(range(256)) * 4096  # 1 MiB, past every socket buffer
    writer.write(payload)
    assert await reader.readexactly(len(payload)) == payload
    s = proxy.stats()
    assert (s.mode, s.accepted, s.active, s.bytes_up, s.bytes_down) == ("pass", 1, 1, len(payload), len(payload))
    # A half-close travels through, the other direction stays open until the target closes.
    writer.write_eof()
    assert await reader.read() == b"<bye>"
    await until(lambda: proxy.stats().active == 0, "the link to close")
    await close(writer)
    assert target.eofs == 1


async def test_latency_delays_and_keeps_order(proxy: FaultProxy) -> None:
    await proxy.latency(100, jitter_ms=80)
    reader, writer = await connect(proxy)
    began = time.monotonic()
    writer.write(b"ping")
    assert await reader.readexactly(4) == b"ping"
    assert time.monotonic() - began >= 2 * 0.1 - 2 * 0.08  # each way at least ms - jitter
    # Many small chunks with jitter: delivered in the order written.
    chunks = [f"<{i}>".encode() for i in range(200)]
    for c in chunks:
        writer.write(c)
        await writer.drain()
        await asyncio.sleep(0.001)
    expected = b"".join(chunks)
    assert await reader.readexactly(len(expected)) == expected
    await proxy.heal()
    writer.write(b"fast")
    assert await reader.readexactly(4) == b"fast"
    await close(writer)


async def test_drop_new_closes_new_connections_only(proxy: FaultProxy, target: Target) -> None:
    reader, writer = await connect(proxy)
    writer.write(b"a")
    assert await reader.readexactly(1) == b"a"
    await proxy.drop_new()
    r2, w2 = await connect(proxy)
    assert await r2.read() == b""  # closed at once
    await close(w2)
    await proxy.drop_new(rst=True)
    r3, w3 = await connect(proxy)
    with pytest.raises(ConnectionResetError):
        await r3.read()
    await close(w3)
    writer.write(b"b")  # the established one goes on
    assert await reader.readexactly(1) == b"b"
    assert target.connections == 1
    s = proxy.stats()
    assert (s.accepted, s.dropped, s.active) == (3, 2, 1)
    await proxy.heal()
    r4, w4 = await connect(proxy)
    w4.write(b"c")
    assert await r4.readexactly(1) == b"c"
    await close(w4)
    await close(writer)


async def test_blackhole_holds_everything_then_heals_in_order(proxy: FaultProxy, target: Target) -> None:
    reader, writer = await connect(proxy)
    writer.write(b"before")
    assert await reader.readexactly(6) == b"before"
    await proxy.blackhole()
    writer.write(b"held-1;")
    writer.write(b"held-2;")
    await until(lambda: proxy.stats().held_up == 14, "the proxy to take the bytes")
    # A new connection is accepted, its bytes taken, but the target never hears of it.
    r2, w2 = await connect(proxy)
    w2.write(b"new")
    await until(lambda: proxy.stats().held_up == 17, "the new connection's bytes")
    # The target writes too (the proxy holds it); a close from the client does not pass.
    target.transports[0].write(b"from-target")
    await until(lambda: proxy.stats().held_down == 11, "the target's bytes to be held")
    writer.write_eof()
    await asyncio.sleep(QUIET)
    assert bytes(target.received) == b"before"
    assert (target.connections, target.eofs) == (1, 0)
    assert not reader.at_eof() and len(reader._buffer) == 0  # type: ignore[attr-defined]
    s = proxy.stats()
    assert (s.mode, s.active, s.bytes_up) == ("blackhole", 2, 6)

    await proxy.heal()
    # Everything, in order: the held bytes, the echo, then the held EOF's answer.
    assert await reader.readexactly(11) == b"from-target"
    assert await reader.read() == b"held-1;held-2;<bye>"
    assert await r2.readexactly(3) == b"new"
    assert target.connections == 2 and target.eofs == 1
    assert proxy.stats().held_up == proxy.stats().held_down == 0
    await close(writer)
    await close(w2)


async def test_blackhole_of_established_only_lets_new_connections_pass(proxy: FaultProxy,
                                                                      target: Target) -> None:
    reader, writer = await connect(proxy)
    writer.write(b"x")
    assert await reader.readexactly(1) == b"x"
    await proxy.blackhole(new_connections=False)
    r2, w2 = await connect(proxy)
    w2.write(b"fresh")
    assert await r2.readexactly(5) == b"fresh"
    writer.write(b"stale")
    await until(lambda: proxy.stats().held_up == 5, "the stale bytes to be held")
    await proxy.heal()
    assert await reader.readexactly(5) == b"stale"
    await close(writer)
    await close(w2)


async def test_blackhole_bounds_what_it_holds(target: Target) -> None:
    target.echo = False
    async with FaultProxy(target.address, hold_limit=64 * 1024) as proxy:  # type: ignore[attr-defined]
        reader, writer = await connect(proxy)
        writer.write(b"0")
        await until(lambda: len(target.received) == 1, "the first byte")
        await proxy.blackhole()
        chunk = b"z" * 65536
        sent = 0
        for _ in range(64):  # 4 MiB offered; the proxy stops reading past its limit
            writer.write(chunk)
            sent += len(chunk)
        await until(lambda: proxy.stats().held_up > 64 * 1024, "the limit to be reached")
        await asyncio.sleep(QUIET)
        held = proxy.stats().held_up
        assert held < 64 * 1024 + 2 * 256 * 1024, held  # limit + what one read can bring
        await proxy.heal()
        await writer.drain()
        await until(lambda: len(target.received) == 1 + sent, "every byte after the heal")
        await close(writer)


async def test_reset_cuts_both_sides_with_rst(proxy: FaultProxy, target: Target) -> None:
    reader, writer = await connect(proxy)
    writer.write(b"hi")
    assert await reader.readexactly(2) == b"hi"
    assert await proxy.reset() == 1
    with pytest.raises(ConnectionResetError):
        await reader.read()
    await until(lambda: target.resets == 1, "the target to see the reset")
    await close(writer)
    s = proxy.stats()
    assert (s.reset, s.active) == (1, 0)
    r2, w2 = await connect(proxy)  # the mode is unchanged: new connections pass
    w2.write(b"again")
    assert await r2.readexactly(5) == b"again"
    await close(w2)


async def test_reset_of_a_held_link_discards_what_it_held(proxy: FaultProxy, target: Target) -> None:
    reader, writer = await connect(proxy)
    writer.write(b"a")
    assert await reader.readexactly(1) == b"a"
    await proxy.blackhole()
    writer.write(b"lost")
    await until(lambda: proxy.stats().held_up == 4, "the bytes to be held")
    await proxy.reset()
    await until(lambda: target.resets == 1, "the target to see the reset")
    await proxy.heal()
    await asyncio.sleep(QUIET)
    assert bytes(target.received) == b"a"
    await close(writer)


async def test_client_reset_is_held_then_delivered(proxy: FaultProxy, target: Target) -> None:
    reader, writer = await connect(proxy)
    writer.write(b"a")
    assert await reader.readexactly(1) == b"a"
    await proxy.blackhole()
    writer.write(b"late")
    await until(lambda: proxy.stats().held_up == 4, "the bytes to be held")
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    writer.transport.abort()
    await asyncio.sleep(QUIET)
    assert target.resets == 0
    await proxy.heal()
    await until(lambda: target.resets == 1, "the held reset")
    assert bytes(target.received) == b"alate"


async def test_refused_target_closes_the_client(target: Target) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        async with FaultProxy(dead) as proxy:
            reader, writer = await connect(proxy)
            assert await reader.read() == b""
            await close(writer)
            assert proxy.stats().dial_failures == 1
            await proxy.retarget(target.address)  # type: ignore[attr-defined]
            r2, w2 = await connect(proxy)
            w2.write(b"ok")
            assert await r2.readexactly(2) == b"ok"
            await close(w2)


class _EchoHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except ConnectionResetError:
            pass  # the reset test


@pytest.fixture
def threaded_echo() -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _EchoHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_threaded_proxy_from_blocking_code(threaded_echo: str) -> None:
    with ThreadedFaultProxy(threaded_echo) as proxy, \
            socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(b"one")
        assert sock.recv(3) == b"one"
        proxy.blackhole()
        sock.sendall(b"two")
        sock.settimeout(QUIET)
        with pytest.raises(TimeoutError):
            sock.recv(3)
        assert proxy.stats().held_up == 3
        proxy.latency(50, 10)  # delivers what was held, then delays
        sock.settimeout(10)
        assert sock.recv(3) == b"two"
        proxy.heal()
        assert proxy.reset() == 1
        with pytest.raises(ConnectionResetError):
            sock.recv(3)
        assert proxy.stats().reset == 1
