"""RemotingServer: accept connections and give each one a ``protocol.channel.Channel``.

Upstream ``NettyRemotingServer``: one processor table (plus a default processor) shared by
every connection, one async and one oneway permit pool shared by every connection
(``serverAsyncSemaphoreValue`` 64, ``serverOnewaySemaphoreValue`` 256), an all-idle
timeout of 120 s, and callbacks when a connection opens or closes (upstream
``ChannelEventListener``: the broker uses them to forget a client's channels).

The processor table may be extended after construction (``register``), since the broker
wires its processors after creating the server; channels read the table live.
``start()`` binds (port 0 picks a free port, read back from ``port``); ``stop()`` stops
accepting, closes every channel and waits for their handler tasks.

Graceful drain (a broker's shutdown, docs/STYLE.md 3): ``stop_accepting()`` closes the
listening socket (connections that still arrive are closed at once) while live
connections keep being served; ``await drain(timeout)`` then waits, at most ``timeout``
seconds, until no connection has a coroutine handler running (e.g. a SYNC_FLUSH send
waiting for its group commit), so those requests are answered before ``stop()`` closes
the channels (which writes every queued answer before closing, and cancels what is
still running).

``request_observer`` (optional) is handed to every connection: it counts and times the
requests (server/metrics/remoting.py); without one, channels pay nothing for it.

``receive_clock`` (a ``protocol.channel.ReceiveClock``, made here unless one is passed to
share with another server on the same loop) stamps, once per loop iteration, when the
requests its connections dispatch were read: ``Channel.received_at``, which the broker's
send path reads as the start of a request's wait (upstream's time in the send queue).

``request_hook`` (optional, upstream server ``RPCHook``) runs before every request's
handler on connections accepted after it is set; the broker's ACL check is one
(server/broker/acl/). With an ``ssl_context`` and ``tls_mode`` permissive or enforcing the
listening socket is a ``TlsSniffingAcceptor`` (protocol/tls_acceptor.py: upstream's
``HandshakeHandler``, TLS and plain on one port) instead of asyncio's server.
"""

# ASYNC109: ``timeout`` parameters are request budgets handed to the Channel's timers.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import ssl
import warnings
from collections.abc import Callable, Mapping
from typing import Any, cast

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channel import (
    DEFAULT_IDLE_TIMEOUT,
    SCAN_INTERVAL,
    SERVER_ASYNC_PERMITS,
    SERVER_ONEWAY_PERMITS,
    Channel,
    Handler,
    Permits,
    ReceiveClock,
    RequestHook,
    RequestObserver,
)
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.frame import DEFAULT_MAX_FRAME_LENGTH
from aiorocketmq.protocol.tls import TlsMode

from .tls_acceptor import TlsSniffingAcceptor

__all__ = ["RemotingServer"]

log = get_logger("aiorocketmq.remoting.server")

ChannelOpenCallback = Callable[[Channel], None]
ChannelCloseCallback = Callable[[Channel, "BaseException | None"], None]


class RemotingServer:
    """A listening socket whose connections dispatch requests through one processor table."""

    def __init__(
        self,
        processors: Mapping[int, Handler] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        default_handler: Handler | None = None,
        on_channel_open: ChannelOpenCallback | None = None,
        on_channel_close: ChannelCloseCallback | None = None,
        oneway_permits: int = SERVER_ONEWAY_PERMITS,
        async_permits: int = SERVER_ASYNC_PERMITS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        scan_interval: float = SCAN_INTERVAL,
        backlog: int = 1024,
        request_observer: RequestObserver | None = None,
        request_hook: RequestHook | None = None,
        ssl_context: ssl.SSLContext | None = None,
        tls_mode: TlsMode = TlsMode.PERMISSIVE,
        receive_clock: ReceiveClock | None = None,
    ) -> None:
        self._processors: dict[int, Handler] = dict(processors or {})
        self._default_handler = default_handler
        self.host = host
        self.port = port
        self._on_channel_open = on_channel_open
        self._on_channel_close = on_channel_close
        self._oneway_permits = Permits(oneway_permits)
        self._async_permits = Permits(async_permits)
        self._idle_timeout = idle_timeout
        self._max_frame_length = max_frame_length
        self._scan_interval = scan_interval
        self._backlog = backlog
        self.request_observer = request_observer
        self.request_hook = request_hook
        self.receive_clock = receive_clock if receive_clock is not None else ReceiveClock()
        self._ssl_context = None if tls_mode is TlsMode.DISABLED else ssl_context
        self.tls_mode = TlsMode.DISABLED if self._ssl_context is None else tls_mode
        self._server: asyncio.Server | None = None
        self._channels: set[Channel] = set()
        self._accepting = True
        self._stopped = False

    # -- configuration --------------------------------------------------------------------

    def register(self, code: int, handler: Handler) -> None:
        """Handle request ``code`` with ``handler`` on current and future connections."""
        self._processors[int(code)] = handler

    def register_default(self, handler: Handler | None) -> None:
        """Handler for codes without their own (upstream ``registerDefaultProcessor``)."""
        self._default_handler = handler
        for channel in self._channels:
            channel.default_handler = handler

    @property
    def processors(self) -> Mapping[int, Handler]:
        return self._processors

    @property
    def address(self) -> str:
        """``host:port`` as clients should dial it (valid after ``start()``)."""
        return f"{self.host}:{self.port}"

    @property
    def channels(self) -> frozenset[Channel]:
        """The live connections."""
        return frozenset(self._channels)

    @property
    def is_serving(self) -> bool:
        return self._server is not None and not self._stopped

    @property
    def is_accepting(self) -> bool:
        """Listening for new connections (False after ``stop_accepting`` or ``stop``)."""
        return self._server is not None and self._accepting

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, *, serve: bool = True) -> None:
        """Bind and start accepting. Raises ``OSError`` if the address is taken.

        With ``serve=False`` the port is only bound (``port`` is known, connections are
        refused) until ``start_serving()``: a broker learns its port before its store
        recovers, and listens once it can answer.
        """
        if self._server is not None or self._stopped:
            raise MQClientError("cannot call RemotingServer.start(): already started or stopped")
        loop = asyncio.get_running_loop()
        self._server = await self._create_server(
            loop, self._make_channel, self.host, self.port, backlog=self._backlog, reuse_address=True,
            start_serving=serve,
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        if serve:
            log.info("remoting.server_started", address=self.address)

    async def start_serving(self) -> None:
        """Listen and accept on the port ``start(serve=False)`` bound. Idempotent."""
        if self._server is None or self._stopped or not self._accepting:
            raise MQClientError("cannot call RemotingServer.start_serving(): not bound, or stopped")
        if not self._server.is_serving():
            await self._server.start_serving()
            log.info("remoting.server_started", address=self.address)

    async def _create_server(self, loop: asyncio.AbstractEventLoop,
                             factory: Callable[[], Channel], host: str, port: int,
                             **kw: Any) -> asyncio.Server:
        if self._ssl_context is None:
            return await loop.create_server(factory, host, port, **kw)
        acceptor = await TlsSniffingAcceptor.create(
            factory, host, port, ssl_context=self._ssl_context, mode=self.tls_mode,
            first_byte_timeout=self._idle_timeout, **kw)
        return cast(asyncio.Server, acceptor)

    def stop_accepting(self) -> None:
        """Close the listening socket; live connections are still served. Idempotent."""
        if not self._accepting:
            return
        self._accepting = False
        if self._server is not None:
            self._server.close()
            log.info("remoting.server_not_accepting", address=self.address)

    async def drain(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the running handler tasks of every connection.

        Requests that keep arriving on live connections are still served, within the same
        deadline. Returns True when no handler task is left, False on timeout (``stop()``
        then cancels what remains). Call ``stop_accepting()`` first.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            tasks = {task for channel in self._channels for task in channel.handler_tasks}
            if not tasks:
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                log.warning("remoting.drain_timeout", address=self.address, running=len(tasks),
                            timeout=timeout)
                return False
            await asyncio.wait(tasks, timeout=remaining)

    async def stop(self) -> None:
        """Stop accepting, close every connection and wait for their handlers. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._accepting = False
        server = self._server
        if server is not None:
            server.close()
        channels = list(self._channels)
        for channel in channels:
            channel.close()
        for channel in channels:
            await channel.wait_closed()
        if server is not None:
            await server.wait_closed()
        log.info("remoting.server_stopped", address=self.address)

    async def __aenter__(self) -> RemotingServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        if self._server is not None and not self._stopped:
            _warn(f"unstopped RemotingServer on {self.address}", ResourceWarning, source=self)

    # -- requests the server starts (broker -> client) ------------------------------------

    async def invoke(self, channel: Channel, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Request/response over a client's own connection (upstream ``invokeSync(channel)``)."""
        return await channel.invoke(cmd, timeout)

    async def invoke_oneway(self, channel: Channel, cmd: RemotingCommand, timeout: float) -> None:
        """Oneway request over a client's own connection (NOTIFY_CONSUMER_IDS_CHANGED, ...)."""
        await channel.invoke_oneway(cmd, timeout)

    # -- channels -------------------------------------------------------------------------

    def _make_channel(self) -> Channel:
        return Channel(
            self._processors,
            default_handler=self._default_handler,
            on_open=self._channel_opened,
            on_close=self._channel_closed,
            async_permits=self._async_permits,
            oneway_permits=self._oneway_permits,
            idle_timeout=self._idle_timeout,
            scan_interval=self._scan_interval,
            max_frame_length=self._max_frame_length,
            read_backpressure=True,
            observer=self.request_observer,
            request_hook=self.request_hook,
            receive_clock=self.receive_clock,
        )

    def _channel_opened(self, channel: Channel) -> None:
        if self._stopped or not self._accepting:
            channel.close()
            return
        self._channels.add(channel)
        log.debug("remoting.channel_open", peer=channel.remote_addr)
        if self._on_channel_open is not None:
            self._on_channel_open(channel)

    def _channel_closed(self, channel: Channel, exc: BaseException | None) -> None:
        was_open = channel in self._channels
        self._channels.discard(channel)
        log.debug("remoting.channel_close", peer=channel.remote_addr,
                  reason=None if exc is None else str(exc))
        if was_open and self._on_channel_close is not None:
            self._on_channel_close(channel, exc)
