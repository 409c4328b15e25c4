"""FaultProxy: a TCP proxy on 127.0.0.1 that injects network faults between two processes.

Put it on a link (a slave's ``haMasterAddress``, a broker's ``namesrvAddr``, the broker
address clients learn from the nameserver) and change what the link does while the
processes run:

* ``passthrough()`` / ``heal()``: forward both ways at once; whatever was held or delayed
  is delivered first, in order (a healed link behaves as TCP does once its retransmissions
  get through: nothing lost, nothing reordered);
* ``latency(ms, jitter_ms)``: deliver each chunk ``ms`` +- ``jitter_ms`` after it arrived,
  never reordering a direction;
* ``drop_new(rst=False)``: close every new connection as soon as it is accepted (with an RST
  when ``rst``), established ones go on;
* ``blackhole(new_connections=True)``: every established stream stays open and its bytes are
  accepted (read and held) but nothing is delivered, either way, and no close or reset gets
  through; new connections are accepted and held the same way, the target is dialled only
  at the heal. ``new_connections=False`` leaves new connections passing (one stale
  connection, not a partition);
* ``reset()``: cut every current connection with an RST on both sides (``SO_LINGER`` 0, then
  close), at once: held and delayed bytes are discarded. The mode stays as it was.

Held bytes are bounded per direction (``hold_limit``); beyond it the proxy stops reading that
side, so the sender's socket buffers fill as they would behind a dead route.

Two ways to run it:

* ``FaultProxy``: on the running event loop (``async with FaultProxy(target) as proxy``),
  the fault methods are coroutines;
* ``ThreadedFaultProxy``: on an event loop of its own in a background thread, the same
  methods as plain calls; usable from synchronous code and from tests whose event loop
  blocks (a stock Java driver waited for), and from async tests too.

``stats()`` gives counters for assertions (connections accepted, dropped, reset, active;
bytes delivered and held per direction; failed dials). Only 127.0.0.1 is ever bound.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import random
import socket
import struct
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["FaultProxy", "ProxyStats", "ThreadedFaultProxy"]

HOST = "127.0.0.1"
DEFAULT_HOLD_LIMIT = 8 * 1024 * 1024
CONNECT_TIMEOUT = 5.0

T = TypeVar("T")


class Mode(enum.Enum):
    PASS = "pass"
    LATENCY = "latency"
    DROP_NEW = "drop_new"
    BLACKHOLE = "blackhole"


@dataclass(frozen=True)
class ProxyStats:
    """A snapshot of a proxy's counters. ``up`` is client -> target, ``down`` the reverse."""

    mode: str
    accepted: int  # connections accepted (dropped ones included)
    dropped: int  # closed at once by drop_new
    reset: int  # connections cut by reset()
    active: int  # connections open now
    dial_failures: int  # the target refused or did not answer
    bytes_up: int  # delivered to the target
    bytes_down: int  # delivered to the clients
    held_up: int  # read from clients, not delivered (yet)
    held_down: int


_EOF = object()  # a pipe item: half-close the destination after what came before
_RESET = object()  # a pipe item: reset the destination after what came before


def _address(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


def _rst(transport: asyncio.BaseTransport | None) -> None:
    """Close with an RST: SO_LINGER on, timeout 0, then abort."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _End(asyncio.Protocol):
    """One socket of a proxied connection (the accepted one or the dialled one)."""

    def __init__(self, link: _Link, up: bool) -> None:
        self.link = link
        self.up = up  # True: the socket towards the target
        self.transport: asyncio.Transport | None = None
        self.reading_paused_by: set[str] = set()
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if not self.up:  # accepted: dial the target now, or at the heal
            self.link.start()

    def data_received(self, data: bytes) -> None:
        self.link.pipe_from(self).feed(data)

    def eof_received(self) -> bool:
        self.link.pipe_from(self).feed(_EOF)
        return True  # keep the other direction open until the link decides

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if exc is not None:
            self.link.pipe_from(self).feed(_RESET)
        self.link.end_lost(self)

    def pause_writing(self) -> None:
        self.link.pipe_to(self).source_pause("backpressure")

    def resume_writing(self) -> None:
        self.link.pipe_to(self).source_resume("backpressure")

    def pause(self, why: str) -> None:
        if self.transport is not None and not self.transport.is_closing() and not self.reading_paused_by:
            self.transport.pause_reading()
        self.reading_paused_by.add(why)

    def resume(self, why: str) -> None:
        if why not in self.reading_paused_by:
            return
        self.reading_paused_by.discard(why)
        if self.transport is not None and not self.transport.is_closing() and not self.reading_paused_by:
            self.transport.resume_reading()


class _Pipe:
    """One direction of a link: items (bytes, _EOF, _RESET) with their delivery times."""

    def __init__(self, link: _Link, src: _End, dst: _End) -> None:
        self.link = link
        self.src = src
        self.dst = dst
        self.items: collections.deque[tuple[float, Any]] = collections.deque()
        self.queued_bytes = 0
        self.last_due = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.finished = False  # _EOF or _RESET delivered

    @property
    def proxy(self) -> FaultProxy:
        return self.link.proxy

    def feed(self, item: Any) -> None:
        if self.finished:
            return
        proxy = self.proxy
        now = proxy.loop.time()
        due = now + proxy.delay() if proxy.mode is Mode.LATENCY else now
        self.last_due = max(self.last_due, due)
        self.items.append((self.last_due, item))
        if isinstance(item, bytes):
            self.queued_bytes += len(item)
            if self.queued_bytes > proxy.hold_limit:
                self.src.pause("held")
        self.pump()

    def pump(self) -> None:
        """Deliver every item that is due, unless the link is held or not connected yet."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        link = self.link
        if link.held or not link.dialled:
            return
        transport = self.dst.transport
        now = self.proxy.loop.time()
        while self.items:
            due, item = self.items[0]
            if due > now:
                self.timer = self.proxy.loop.call_at(due, self.pump)
                return
            self.items.popleft()
            if isinstance(item, bytes):
                self.queued_bytes -= len(item)
                if transport is not None and not transport.is_closing():
                    transport.write(item)
                    self.proxy.count_delivered(self.dst.up, len(item))
            elif item is _EOF:
                self.finished = True
                if transport is not None and not transport.is_closing() and transport.can_write_eof():
                    try:
                        transport.write_eof()
                    except OSError:  # the peer is gone already (reset, not yet read)
                        link.close(rst=True)
                        return
                link.half_closed()
            else:  # _RESET
                self.finished = True
                link.close(rst=True)
            if self.finished:
                self.items.clear()
                self.queued_bytes = 0
                return
        if self.queued_bytes <= self.proxy.hold_limit:
            self.src.resume("held")

    def rush(self) -> None:
        """Make everything due now (heal), then deliver."""
        now = self.proxy.loop.time()
        self.items = collections.deque((min(due, now), item) for due, item in self.items)
        self.last_due = min(self.last_due, now)
        self.pump()

    def discard(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.items.clear()
        self.queued_bytes = 0

    def source_pause(self, why: str) -> None:
        self.src.pause(why)

    def source_resume(self, why: str) -> None:
        self.src.resume(why)


class _Link:
    """One proxied connection: the accepted socket, the dialled one, a pipe each way."""

    def __init__(self, proxy: FaultProxy, held: bool) -> None:
        self.proxy = proxy
        self.held = held
        self.dialled = False
        self.dialling = False
        self.closed = False
        self.client = _End(self, up=False)
        self.server = _End(self, up=True)
        self.up = _Pipe(self, self.client, self.server)
        self.down = _Pipe(self, self.server, self.client)
        self.dial_task: asyncio.Task[None] | None = None

    def pipe_from(self, end: _End) -> _Pipe:
        return self.up if end is self.client else self.down

    def pipe_to(self, end: _End) -> _Pipe:
        return self.down if end is self.client else self.up

    def start(self) -> None:
        if not self.held:
            self.dial()

    def dial(self) -> None:
        if self.dialled or self.dialling or self.closed:
            return
        self.dialling = True
        self.dial_task = self.proxy.loop.create_task(self._dial())

    async def _dial(self) -> None:
        host, port = _address(self.proxy.target)
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                await self.proxy.loop.create_connection(lambda: self.server, host, port)
        except (OSError, TimeoutError):
            self.proxy.dial_failures += 1
            self.close(rst=False)
            return
        finally:
            self.dialling = False
        if self.closed:
            _rst(self.server.transport)
            return
        self.dialled = True
        self.up.pump()
        self.down.pump()

    def hold(self) -> None:
        self.held = True

    def release(self) -> None:
        self.held = False
        if not self.dialled:
            if self.client.closed:  # gave up before the target ever heard of it
                self.close(rst=False)
                return
            self.dial()
        self.up.rush()
        self.down.rush()

    def half_closed(self) -> None:
        if self.up.finished and self.down.finished:
            self.close(rst=False)

    def end_lost(self, end: _End) -> None:
        # The socket is gone: what it still had to send stays queued in its pipe (a held
        # link delivers it at the heal, then the reset); nothing can be delivered to it.
        self.pipe_to(end).discard()
        if self.pipe_from(end).finished:
            self.close(rst=True)

    def close(self, *, rst: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.up.discard()
        self.down.discard()
        for end in (self.client, self.server):
            if rst:
                _rst(end.transport)
            elif end.transport is not None and not end.transport.is_closing():
                end.transport.close()
        if self.dial_task is not None and not self.dial_task.done():
            self.dial_task.cancel()
        self.proxy.links.discard(self)


class FaultProxy:
    """A fault-injecting TCP proxy on the running event loop; see the module docstring."""

    def __init__(self, target: str, *, port: int = 0, hold_limit: int = DEFAULT_HOLD_LIMIT,
                 seed: int | None = None) -> None:
        self.target = target
        self.requested_port = port
        self.hold_limit = hold_limit
        self.mode = Mode.PASS
        self.latency_ms = 0.0
        self.jitter_ms = 0.0
        self.drop_rst = False
        self.hold_new = True
        self.links: set[_Link] = set()
        self.accepted = self.dropped = self.resets = self.dial_failures = 0
        self.bytes_up = self.bytes_down = 0
        self._rng = random.Random(seed)
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "FaultProxy not started"
        return self._loop

    async def start(self) -> FaultProxy:
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(self._accept, HOST, self.requested_port)
        return self

    @property
    def port(self) -> int:
        assert self._server is not None, "FaultProxy not started"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    async def close(self) -> None:
        """Stop listening and close every connection (an RST)."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for link in list(self.links):
            link.close(rst=True)
        await asyncio.sleep(0)

    async def __aenter__(self) -> FaultProxy:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- faults -----------------------------------------------------------------------------

    async def passthrough(self) -> None:
        """Forward at once; deliver everything held or delayed first."""
        self.mode = Mode.PASS
        self.latency_ms = self.jitter_ms = 0.0
        for link in list(self.links):
            link.release()

    heal = passthrough

    async def latency(self, ms: float, jitter_ms: float = 0.0) -> None:
        """Delay every chunk by ``ms`` +- ``jitter_ms`` (order kept per direction)."""
        if ms < 0 or jitter_ms < 0:
            raise ValueError("latency and jitter must be >= 0")
        await self.passthrough()
        self.mode = Mode.LATENCY
        self.latency_ms, self.jitter_ms = ms, jitter_ms

    async def drop_new(self, *, rst: bool = False) -> None:
        """Close each new connection as soon as it is accepted; established ones go on as
        they were (still held after a blackhole, until the heal)."""
        self.mode = Mode.DROP_NEW
        self.drop_rst = rst

    async def blackhole(self, *, new_connections: bool = True) -> None:
        """Hold every byte, close and reset of every established connection (and of new
        ones, unless ``new_connections`` is False)."""
        self.mode = Mode.BLACKHOLE
        self.hold_new = new_connections
        for link in list(self.links):
            link.hold()

    async def reset(self) -> int:
        """RST every current connection, both sides; the number cut. The mode stays."""
        links = list(self.links)
        for link in links:
            link.close(rst=True)
        self.resets += len(links)
        await asyncio.sleep(0)
        return len(links)

    async def retarget(self, target: str) -> None:
        """Dial ``target`` for connections from now on."""
        self.target = target

    def stats(self) -> ProxyStats:
        held_up = sum(link.up.queued_bytes for link in self.links)
        held_down = sum(link.down.queued_bytes for link in self.links)
        return ProxyStats(self.mode.value, self.accepted, self.dropped, self.resets, len(self.links),
                          self.dial_failures, self.bytes_up, self.bytes_down, held_up, held_down)

    # -- internals ----------------------------------------------------------------------------

    def delay(self) -> float:
        ms = self.latency_ms
        if self.jitter_ms:
            ms += self._rng.uniform(-self.jitter_ms, self.jitter_ms)
        return max(0.0, ms) / 1000

    def count_delivered(self, up: bool, n: int) -> None:
        if up:
            self.bytes_up += n
        else:
            self.bytes_down += n

    def _accept(self) -> asyncio.Protocol:
        self.accepted += 1
        if self.mode is Mode.DROP_NEW:
            self.dropped += 1
            return _Dropper(self.drop_rst)
        link = _Link(self, held=self.mode is Mode.BLACKHOLE and self.hold_new)
        self.links.add(link)
        return link.client


class _Dropper(asyncio.Protocol):
    def __init__(self, rst: bool) -> None:
        self.rst = rst

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.rst:
            _rst(transport)
        else:
            transport.close()


class ThreadedFaultProxy:
    """A FaultProxy on its own event loop in a daemon thread; the fault methods are plain
    calls that return once the change is in effect. ``with ThreadedFaultProxy(t) as p:``."""

    def __init__(self, target: str, *, port: int = 0, hold_limit: int = DEFAULT_HOLD_LIMIT,
                 seed: int | None = None) -> None:
        self.proxy = FaultProxy(target, port=port, hold_limit=hold_limit, seed=seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="FaultProxy",
                                        daemon=True)

    def _call(self, make: Callable[[], Awaitable[T]], timeout: float = 10.0) -> T:
        async def run() -> T:
            return await make()
        coro: Coroutine[Any, Any, T] = run()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def start(self) -> ThreadedFaultProxy:
        self._thread.start()
        self._call(self.proxy.start)
        return self

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        try:
            self._call(self.proxy.close)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self) -> ThreadedFaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        return self.proxy.port

    @property
    def address(self) -> str:
        return self.proxy.address

    def passthrough(self) -> None:
        self._call(self.proxy.passthrough)

    heal = passthrough

    def latency(self, ms: float, jitter_ms: float = 0.0) -> None:
        self._call(lambda: self.proxy.latency(ms, jitter_ms))

    def drop_new(self, *, rst: bool = False) -> None:
        self._call(lambda: self.proxy.drop_new(rst=rst))

    def blackhole(self, *, new_connections: bool = True) -> None:
        self._call(lambda: self.proxy.blackhole(new_connections=new_connections))

    def reset(self) -> int:
        return self._call(self.proxy.reset)

    def retarget(self, target: str) -> None:
        self._call(lambda: self.proxy.retarget(target))

    def stats(self) -> ProxyStats:
        async def snapshot() -> ProxyStats:
            return self.proxy.stats()
        return self._call(snapshot)
