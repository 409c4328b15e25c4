"""``MetricsHttpServer``: the smallest HTTP/1.1 server that serves ``GET /metrics``.

Contract:

* ``GET /metrics`` (any query string) answers 200 with ``render()`` as
  ``text/plain; version=0.0.4``; every other method or path answers 404. A request head
  over ``max_request_bytes`` answers 431, a malformed one 400; both close the connection.
  A request carrying a body (``Content-Length`` > 0 or ``Transfer-Encoding``) is a 400:
  a scrape has none, and refusing it keeps reads bounded.
* Connections are kept alive (HTTP/1.1 default, as Prometheus scrapes) until the client
  asks to close, sends HTTP/1.0 without keep-alive, or stays silent for ``idle_timeout``
  seconds; at most ``max_connections`` are served at once, further ones are closed at
  accept.
* ``start()`` binds (port 0 picks a free port, read back from ``port``); ``stop()`` stops
  accepting, cancels the connection tasks it owns and waits for them. Idempotent.

Rendering runs on the event loop; every family is bounded (registry.py), so a scrape is
short.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiorocketmq.logs import get_logger

from .registry import CONTENT_TYPE

__all__ = ["MetricsHttpServer"]

log = get_logger("aiorocketmq.remoting.metrics")

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found",
            431: "Request Header Fields Too Large"}


class _BadRequest(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class MetricsHttpServer:
    """Serves ``render()`` on ``GET /metrics``; see the module docstring."""

    def __init__(self, render: Callable[[], str], *, host: str = "127.0.0.1", port: int = 0,
                 max_request_bytes: int = 8192, idle_timeout: float = 30.0,
                 max_connections: int = 32) -> None:
        self._render = render
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopped = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def serving(self) -> bool:
        return self._server is not None and not self._stopped

    async def start(self) -> None:
        """Bind and serve. Raises ``OSError`` if the port is taken."""
        if self._server is not None or self._stopped:
            raise RuntimeError("cannot call MetricsHttpServer.start(): already started or stopped")
        self._server = await asyncio.start_server(
            self._connection_routine, self.host, self.port, limit=self.max_request_bytes,
            reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("remoting.metrics_http_started", address=self.address)

    async def stop(self) -> None:
        """Stop accepting, close every connection and wait for their tasks. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        server = self._server
        if server is not None:
            server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()
        log.info("remoting.metrics_http_stopped", address=self.address)

    # -- connections ------------------------------------------------------------------------

    async def _connection_routine(self, reader: asyncio.StreamReader,
                                  writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._stopped or len(self._tasks) >= self.max_connections:
            writer.close()
            return
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the client went away or idled out: nothing left to answer
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                async with asyncio.timeout(self.idle_timeout):
                    head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                await self._respond(writer, 431, b"request head too large\n", close=True)
                return
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    log.debug("remoting.metrics_http_truncated_request", size=len(exc.partial))
                return
            try:
                path, keep_alive = _parse_head(head)
            except _BadRequest as exc:
                await self._respond(writer, exc.status, f"{exc}\n".encode(), close=True)
                return
            if path == "/metrics":
                await self._respond(writer, 200, self._render().encode("utf-8"),
                                    close=not keep_alive, content_type=CONTENT_TYPE)
            else:
                await self._respond(writer, 404, b"not found; try GET /metrics\n",
                                    close=not keep_alive)
            if not keep_alive:
                return

    async def _respond(self, writer: asyncio.StreamWriter, status: int, body: bytes, *,
                       close: bool, content_type: str = "text/plain; charset=utf-8") -> None:
        head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
                f"Content-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n"
                + ("Connection: close\r\n" if close else "")
                + "\r\n")
        writer.writelines((head.encode("latin-1"), body))
        async with asyncio.timeout(self.idle_timeout):
            await writer.drain()


def _parse_head(head: bytes) -> tuple[str | None, bool]:
    """``(path if GET /metrics-able else None, keep_alive)``; raises ``_BadRequest``."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes every byte
        raise _BadRequest(400, "undecodable request") from exc
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(400, "malformed request line")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise _BadRequest(400, "malformed header line")
        headers[name.lower()] = value.strip().lower()
    if "transfer-encoding" in headers or headers.get("content-length", "0") not in ("0", ""):
        raise _BadRequest(400, "a request body is not accepted")
    conn = headers.get("connection", "")
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    path = target.split("?", 1)[0]
    return (path if method == "GET" else None), keep_alive
