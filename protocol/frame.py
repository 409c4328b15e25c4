"""Incremental frame splitting: bytes in, ``RemotingCommand`` objects out (sans-IO).

Framing is upstream's ``LengthFieldBasedFrameDecoder(maxFrameLength, 0, 4, 0, 4)``
(docs/PROTOCOL.md 1): an int32 big-endian length that does not count itself, then that
many bytes. Like Netty, the limit applies to ``length + 4``; an over-long frame is a
``FrameTooLargeError`` raised *before* anything is buffered for it, so a hostile
length word cannot make us allocate. After a ``ProtocolError`` the decoder is
poisoned: the stream has lost sync and the connection must be closed.

Contract (h11-style): ``feed(data)`` only buffers; ``next_command()`` returns a
command or ``None`` when more bytes are needed. ``ProtocolError`` is the only
exception either raises on bad input; anything else is a bug.
"""

from __future__ import annotations

import struct

from .command import RemotingCommand
from .errors import FrameTooLargeError, ProtocolError

__all__ = ["FrameDecoder", "DEFAULT_MAX_FRAME_LENGTH"]

DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024  # com.rocketmq.remoting.frameMaxLength default
_unpack_len = struct.Struct(">i").unpack_from


class FrameDecoder:
    """Splits a byte stream into RemotingCommands."""

    __slots__ = ("_buf", "_max", "_error")

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self._buf = bytearray()
        self._max = max_frame_length
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held that do not yet form a whole frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer ``data``; decode nothing yet."""
        if self._error is not None:
            raise self._error
        self._buf += data

    def next_command(self) -> RemotingCommand | None:
        """The next whole command, or ``None`` if the buffer holds no whole frame."""
        if self._error is not None:
            raise self._error
        buf = self._buf
        if len(buf) < 4:
            return None
        length = _unpack_len(buf, 0)[0]
        if length < 4 or length + 4 > self._max:
            self._error = (
                FrameTooLargeError(f"frame length {length} + 4 exceeds maximum {self._max}")
                if length >= 4
                else ProtocolError(f"frame length {length} is smaller than the header-length word")
            )
            self._buf = bytearray()
            raise self._error
        end = 4 + length
        if len(buf) < end:
            return None
        try:
            cmd = RemotingCommand.decode(memoryview(buf)[4:end])
        except ProtocolError as exc:
            self._error = exc
            # A fresh buffer: the failed decode's traceback may still hold a view of the old one.
            self._buf = bytearray()
            raise
        del buf[:end]  # bytearray deletes from the front in O(1) amortised
        return cmd

    def feed_and_decode(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """``feed(data)`` then drain every whole command (the hot-path entry)."""
        self.feed(data)
        out: list[RemotingCommand] = []
        nxt = self.next_command
        while True:
            cmd = nxt()
            if cmd is None:
                return out
            out.append(cmd)
