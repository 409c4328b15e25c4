"""``TlsSniffingAcceptor``: one port serving TLS and plain connections, as upstream's
``NettyRemotingServer.HandshakeHandler``.

Contract: ``await TlsSniffingAcceptor.create(...)`` binds ``host:port`` (0 = any free port)
and returns an object with ``asyncio.Server``'s surface (``sockets``, ``is_serving``,
``start_serving``, ``close``, ``wait_closed``), so ``RemotingServer`` uses it where it would use
``loop.create_server``'s server; it accepts in one routine once serving. Each connection's first byte is peeked (``MSG_PEEK``, not consumed):
``0x16``, a TLS handshake record, gets a TLS transport built on ``ssl_context``; anything
else gets a plain transport in ``permissive`` mode and is closed in ``enforcing`` mode. The
transport is made with ``loop.connect_accepted_socket(protocol_factory, ...)``, so the
protocol (a ``Channel``) sees only cleartext, the first byte included. A connection that
sends nothing within ``first_byte_timeout`` or fails its handshake within
``handshake_timeout`` is closed with a log line naming the peer. ``close()`` stops
accepting; ``await wait_closed()`` also cancels connections still being sniffed.
(Upstream's ``disabled`` mode needs no acceptor: the plain server closes a TLS hello as a
malformed frame.)
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.tls import TLS_HANDSHAKE_BYTE, TLS_SHUTDOWN_TIMEOUT, TlsMode

__all__ = ["TlsSniffingAcceptor"]

log = get_logger("aiorocketmq.remoting.server")


def _set_ready(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class TlsSniffingAcceptor(asyncio.AbstractServer):
    """See the module docstring."""

    @classmethod
    async def create(cls, protocol_factory: Callable[[], asyncio.Protocol], host: str,
                     port: int, *, ssl_context: ssl.SSLContext, mode: TlsMode,
                     backlog: int = 1024, start_serving: bool = True,
                     first_byte_timeout: float = 120.0, handshake_timeout: float = 10.0,
                     reuse_address: bool = True) -> TlsSniffingAcceptor:
        acceptor = cls(protocol_factory, host=host, port=port, ssl_context=ssl_context,
                       mode=mode, backlog=backlog, first_byte_timeout=first_byte_timeout,
                       handshake_timeout=handshake_timeout)
        acceptor.bind()
        if start_serving:
            await acceptor.start_serving()
        return acceptor

    def __init__(self, protocol_factory: Callable[[], asyncio.Protocol], *, host: str,
                 port: int, ssl_context: ssl.SSLContext, mode: TlsMode, backlog: int = 1024,
                 first_byte_timeout: float = 120.0, handshake_timeout: float = 10.0) -> None:
        if mode is TlsMode.DISABLED:
            raise ValueError("TlsSniffingAcceptor is for permissive or enforcing mode")
        self._factory = protocol_factory
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self.mode = mode
        self._backlog = backlog
        self._first_byte_timeout = first_byte_timeout
        self._handshake_timeout = handshake_timeout
        self._sock: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._sniff_tasks: set[asyncio.Task[None]] = set()

    def bind(self) -> None:
        """Bind without listening: until ``start_serving`` a connection is refused, as with
        ``loop.create_server(start_serving=False)`` (a broker opens its port only once its
        store has recovered)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
        except BaseException:
            sock.close()
            raise
        sock.setblocking(False)
        self._sock = sock
        self.port = sock.getsockname()[1]

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return () if self._sock is None else (self._sock,)

    def is_serving(self) -> bool:
        return self._accept_task is not None and self._sock is not None

    async def start_serving(self) -> None:
        if self._sock is not None and self._accept_task is None:
            self._sock.listen(self._backlog)
            self._accept_task = asyncio.get_running_loop().create_task(
                self._accept_routine(self._sock), name=f"accept {self.host}:{self.port}")

    async def serve_forever(self) -> None:
        await self.start_serving()
        if self._accept_task is not None:
            await self._accept_task

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def close(self) -> None:
        """Stop accepting (idempotent); connections already handed over are not touched."""
        if self._accept_task is not None:
            self._accept_task.cancel()
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    async def wait_closed(self) -> None:
        self.close()
        tasks = list(self._sniff_tasks)
        if self._accept_task is not None:
            tasks.append(self._accept_task)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _accept_routine(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as exc:
                if self._sock is None:
                    return
                log.warning("remoting.accept_failed", address=f"{self.host}:{self.port}",
                            error=str(exc))
                continue
            task = loop.create_task(self._sniff(conn))
            self._sniff_tasks.add(task)
            task.add_done_callback(self._sniff_tasks.discard)

    async def _sniff(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        peer = "?"
        try:
            peer = "{}:{}".format(*conn.getpeername()[:2])
            first = await self._peek(loop, conn)
        except (OSError, TimeoutError) as exc:
            log.info("remoting.no_first_byte", peer=peer, reason=str(exc) or type(exc).__name__)
            conn.close()
            return
        except asyncio.CancelledError:
            conn.close()
            raise
        if not first:
            conn.close()
            return
        use_tls = first[0] == TLS_HANDSHAKE_BYTE
        if not use_tls and self.mode is TlsMode.ENFORCING:
            log.warning("remoting.plain_refused", peer=peer,
                        reason="the server is running in SSL enforcing mode")
            conn.close()
            return
        try:
            if use_tls:
                await loop.connect_accepted_socket(
                    self._factory, sock=conn, ssl=self._ssl,
                    ssl_handshake_timeout=self._handshake_timeout,
                    ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT)
                # Upstream's HandshakeHandler logs each TLS connection at info too.
                log.info("remoting.tls_accepted", peer=peer)
            else:
                await loop.connect_accepted_socket(self._factory, sock=conn)
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            log.warning("remoting.tls_handshake_failed" if use_tls else "remoting.accept_failed",
                        peer=peer, error=str(exc) or type(exc).__name__)
            conn.close()

    async def _peek(self, loop: asyncio.AbstractEventLoop, conn: socket.socket) -> bytes:
        """The first byte, left in the socket for the transport to read."""
        readable: asyncio.Future[None] = loop.create_future()
        fd = conn.fileno()
        loop.add_reader(fd, _set_ready, readable)
        try:
            async with asyncio.timeout(self._first_byte_timeout):
                await readable
        finally:
            loop.remove_reader(fd)
        return conn.recv(1, socket.MSG_PEEK)
