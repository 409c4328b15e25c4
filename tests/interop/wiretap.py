"""A loopback TCP proxy that records every RemotingCommand between ali-ons and our servers.

``WireTap(upstream)`` listens on 127.0.0.1 (port 0) and relays each accepted connection to
``upstream`` byte for byte, splitting both directions into frames (docs/PROTOCOL.md 1: int32
length, then the payload) and keeping each one as a ``TappedFrame``: the raw header bytes
(so a test can hold them to the strict ``JSON.parse`` ali-ons applies, docs/PROTOCOL.md 9) and
the decoded command.

The broker's address reaches ali-ons inside GET_ROUTEINFO_BY_TOPIC answers, so a tap in
front of the nameserver can point ali-ons at a second tap in front of the broker:
``rewrite_routes={real_broker_addr: broker_tap_addr}`` replaces the address in those
answers' bodies, the only bytes the tap ever changes (the header is relayed unchanged,
only the frame length is recomputed).

Each tap owns its server and relay tasks; ``close()`` stops them and waits for them.
When something ali-ons does fails against our servers, ``dump()`` prints the
conversation frame by frame.
"""

# ASYNC109: ``timeout`` is a wait's deadline in seconds.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass

from aiorocketmq.protocol.codes import RequestCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import ProtocolError

_LEN = struct.Struct(">i")

TO_SERVER = "->"
TO_CLIENT = "<-"


@dataclass(slots=True)
class TappedFrame:
    """One frame seen by a tap. ``header`` is the raw header as sent; ``command`` the
    decoded frame (None, with ``error``, when our decoder refused it)."""

    tap: str
    conn: int
    direction: str
    serialize_type: int
    header: bytes
    command: RemotingCommand | None
    error: str | None = None

    @property
    def is_response(self) -> bool:
        return self.command is not None and bool(self.command.flag & 1)

    def __str__(self) -> str:
        c = self.command
        if c is None:
            return f"{self.tap}#{self.conn} {self.direction} undecodable: {self.error}"
        body = len(c.body) if c.body else 0
        return (f"{self.tap}#{self.conn} {self.direction} code={c.code} opaque={c.opaque} "
                f"flag={c.flag} type={self.serialize_type} ext={c.ext_fields} "
                f"remark={c.remark!r} body={body}B")


class WireTap:
    """A recording relay in front of ``upstream`` (see module docstring)."""

    def __init__(self, name: str, upstream: str, *,
                 rewrite_routes: dict[str, str] | None = None) -> None:
        self.name = name
        self.upstream = upstream
        self.rewrite_routes = dict(rewrite_routes or {})
        self.frames: list[TappedFrame] = []
        self.address = ""
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []
        self._conns = 0
        self._changed = asyncio.Event()

    async def start(self) -> WireTap:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self._conns += 1
        conn = self._conns
        host, port = self.upstream.rsplit(":", 1)
        try:
            server_r, server_w = await asyncio.open_connection(host, int(port))
        except OSError:
            client_w.close()
            await client_w.wait_closed()
            return
        self._writers += [client_w, server_w]
        route_requests: set[int] = set()
        for task in (
            asyncio.create_task(self._relay_routine(conn, TO_SERVER, client_r, server_w, route_requests)),
            asyncio.create_task(self._relay_routine(conn, TO_CLIENT, server_r, client_w, route_requests)),
        ):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _relay_routine(self, conn: int, direction: str, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter, route_requests: set[int]) -> None:
        buf = bytearray()
        try:
            while data := await reader.read(65536):
                buf += data
                while len(buf) >= 4:
                    total = _LEN.unpack_from(buf, 0)[0]
                    if len(buf) < 4 + total:
                        break
                    frame = bytes(buf[: 4 + total])
                    del buf[: 4 + total]
                    writer.write(self._record(conn, direction, frame, route_requests))
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def _record(self, conn: int, direction: str, frame: bytes, route_requests: set[int]) -> bytes:
        word = _LEN.unpack_from(frame, 4)[0]
        stype, hlen = (word >> 24) & 0xFF, word & 0xFFFFFF
        header = frame[8: 8 + hlen]
        try:
            command: RemotingCommand | None = RemotingCommand.decode(frame[4:])
            error = None
        except ProtocolError as exc:
            command, error = None, str(exc)
        self.frames.append(TappedFrame(self.name, conn, direction, stype, header, command, error))
        self._changed.set()
        if command is None:
            return frame
        if direction == TO_SERVER and command.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            route_requests.add(command.opaque)
        elif (direction == TO_CLIENT and command.flag & 1 and command.opaque in route_requests
              and self.rewrite_routes and command.body):
            route_requests.discard(command.opaque)
            body = bytes(command.body)
            for real, tapped in self.rewrite_routes.items():
                body = body.replace(real.encode(), tapped.encode())
            return _LEN.pack(4 + hlen + len(body)) + frame[4: 8 + hlen] + body
        return frame

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in self._writers:
            w.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for w in self._writers:
            try:
                await w.wait_closed()
            except (ConnectionError, OSError):
                pass
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> WireTap:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- reading the conversation ----------------------------------------------------------

    async def wait_until(self, what: str, predicate: Callable[[], bool], *,
                         timeout: float) -> None:
        """Re-check ``predicate`` after every frame until it holds; AssertionError with the
        conversation's tail once ``timeout`` seconds have passed."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self._changed.clear()
                    if predicate():
                        return
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"{self.name} tap: timed out after {timeout}s waiting for {what}\n"
                f"{self.dump(60)}") from None

    def exchanges(self) -> list[tuple[TappedFrame, TappedFrame | None]]:
        """Each request sent to the server with its answer (None when unanswered)."""
        pending: dict[tuple[int, int], int] = {}
        pairs: list[tuple[TappedFrame, TappedFrame | None]] = []
        for f in self.frames:
            if f.command is None:
                continue
            key = (f.conn, f.command.opaque)
            if f.direction == TO_SERVER and not f.is_response:
                pending[key] = len(pairs)
                pairs.append((f, None))
            elif f.direction == TO_CLIENT and f.is_response and key in pending:
                i = pending.pop(key)
                pairs[i] = (pairs[i][0], f)
        return pairs

    def dump(self, limit: int = 200) -> str:
        return "\n".join(str(f) for f in self.frames[-limit:])
