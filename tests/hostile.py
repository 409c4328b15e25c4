"""Raw requests that our own encoder refuses to build, for the hostile-input tests.

``RemotingCommand.encode`` writes UTF-8 and so cannot carry a lone UTF-16 surrogate, but
JSON can (``"G\\ud800"`` is legal JSON, and fastjson reads it into a Java string). A
``RawConnection`` writes the JSON header with ``json.dumps`` (``ensure_ascii``: every
non-ASCII character as ``\\uXXXX``), so any Python string, integers beyond Java's ranges
included, reaches the server as a hostile client would send it. Answers are decoded with
our ``RemotingCommand.decode``.
"""

# ASYNC109: ``timeout`` is each call's budget in seconds.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import struct
from typing import Any

from aiorocketmq.protocol.command import RemotingCommand

__all__ = ["RawConnection", "raw_invoke", "encode_raw_request", "invoke_sync", "connect_sync"]

_opaque = itertools.count(1)
_LEN = struct.Struct(">I")


def encode_raw_request(code: int, ext_fields: dict[str, Any] | None, body: bytes = b"",
                       *, opaque: int | None = None, oneway: bool = False) -> tuple[int, bytes]:
    """``(opaque, frame)``: a JSON-serialized request whose header is written by ``json.dumps``."""
    op = next(_opaque) if opaque is None else opaque
    header: dict[str, Any] = {"code": code, "flag": 2 if oneway else 0, "language": "JAVA",
                              "opaque": op, "serializeTypeCurrentRPC": "JSON", "version": 395}
    if ext_fields is not None:
        header["extFields"] = ext_fields
    head = json.dumps(header, ensure_ascii=True).encode("ascii")
    return op, _LEN.pack(4 + len(head) + len(body)) + _LEN.pack(len(head)) + head + body


class RawConnection:
    """One TCP connection to ``addr``; requests are answered in order of their opaques."""

    def __init__(self, addr: str) -> None:
        self.addr = addr
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self, timeout: float) -> None:
        host, port = self.addr.rsplit(":", 1)
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(host, int(port)), timeout)

    async def invoke(self, code: int, ext_fields: dict[str, Any] | None, body: bytes = b"",
                     *, timeout: float = 10.0) -> RemotingCommand:
        """Send one request and wait for its answer (reconnects if the last one closed)."""
        if self._writer is None or self._writer.is_closing():
            await self._connect(timeout)
        assert self._reader is not None and self._writer is not None
        opaque, frame = encode_raw_request(code, ext_fields, body)
        self._writer.write(frame)
        try:
            async with asyncio.timeout(timeout):
                await self._writer.drain()
                while True:
                    size = _LEN.unpack(await self._reader.readexactly(4))[0]
                    cmd = RemotingCommand.decode(await self._reader.readexactly(size))
                    if cmd.opaque == opaque:
                        return cmd
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass


async def raw_invoke(addr: str, code: int, ext_fields: dict[str, Any] | None,
                     body: bytes = b"", *, timeout: float = 10.0) -> RemotingCommand:
    """One request on a connection of its own."""
    conn = RawConnection(addr)
    try:
        return await conn.invoke(code, ext_fields, body, timeout=timeout)
    finally:
        await conn.close()


def invoke_sync(sock: socket.socket, code: int, ext_fields: dict[str, Any] | None,
                body: bytes = b"") -> RemotingCommand:
    """One request on a connected blocking socket (its own timeout applies); the answer."""
    opaque, frame = encode_raw_request(code, ext_fields, body)
    sock.sendall(frame)
    while True:
        size = _LEN.unpack(_recv_exactly(sock, 4))[0]
        cmd = RemotingCommand.decode(_recv_exactly(sock, size))
        if cmd.opaque == opaque:
            return cmd


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"{sock.getpeername()} closed the connection")
        buf += chunk
    return bytes(buf)


def connect_sync(addr: str, timeout: float = 10.0) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)
