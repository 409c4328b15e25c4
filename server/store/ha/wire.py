"""The HA wire protocol of RocketMQ 4.9, sans-IO: bytes in, offsets and frames out.

A slave connects to the master's HA port (``haListenPort``, by default listenPort + 1)
and the two sides then speak a raw stream, no RemotingCommand:

* slave -> master: its commit-log max offset, 8 bytes big-endian, on connect, after each
  transfer it appended, and at least every ``haSendHeartbeatInterval``. The master reads
  them 8-byte aligned and keeps only the last whole one in what it received
  (``HAConnection.ReadSocketService.processReadEvent``).
* master -> slave: frames of an 8-byte big-endian commit-log offset, a 4-byte big-endian
  size, then ``size`` bytes of the commit log from that offset
  (``HAConnection.WriteSocketService``). Size 0 is a heartbeat, sent when nothing was
  written for ``haSendHeartbeatInterval``. A frame never crosses a segment boundary.

``SlaveFrameDecoder`` is the slave's reader (``HAClient.dispatchReadRequest``);
``OffsetReportDecoder`` the master's. Both are fed whatever the socket gave and never
raise for short input; a negative frame size is the only malformed input (``HAWireError``).
"""

from __future__ import annotations

import struct

__all__ = ["FRAME_HEADER", "HEADER_SIZE", "HAWireError", "OffsetReportDecoder",
           "SlaveFrameDecoder", "encode_frame_header", "encode_offset_report"]

FRAME_HEADER = struct.Struct(">qi")  # master physical offset, body size
HEADER_SIZE = FRAME_HEADER.size  # 12
_OFFSET = struct.Struct(">q")
_unpack_header = FRAME_HEADER.unpack_from
_unpack_offset = _OFFSET.unpack_from

encode_frame_header = FRAME_HEADER.pack
encode_offset_report = _OFFSET.pack


class HAWireError(ValueError):
    """The peer sent bytes that are not an HA frame (the connection is then closed)."""


class OffsetReportDecoder:
    """The master's side: the slave's latest acknowledged offset from its 8-byte reports."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> int | None:
        """Buffer ``data``; the last whole report received so far, or None if none completed.

        As upstream, only the last 8-byte-aligned long counts; a partial tail is kept.
        """
        buf = self._buf
        buf += data
        whole = len(buf) - len(buf) % 8
        if whole == 0:
            return None
        (offset,) = _unpack_offset(buf, whole - 8)
        del buf[:whole]
        return int(offset)


class SlaveFrameDecoder:
    """The slave's side: whole transfer frames out of the master's stream.

    ``feed(data)`` buffers; ``next_frame()`` returns ``(offset, body)`` for each whole
    frame (``body`` a ``memoryview`` of the buffer, still valid after later feeds), or None when the
    next frame is incomplete. ``pending_header()`` is the offset of a frame whose header
    has arrived but not its body (upstream checks it against the slave's max offset
    before the body is complete).
    """

    __slots__ = ("_buf", "_pos")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos:
            # A new buffer, not ``del buf[:pos]``: bodies handed out stay valid.
            self._buf = self._buf[self._pos:]
            self._pos = 0
        self._buf += data

    def pending_header(self) -> tuple[int, int] | None:
        """``(offset, size)`` of the next frame once its 12-byte header is here."""
        if len(self._buf) - self._pos < HEADER_SIZE:
            return None
        offset, size = _unpack_header(self._buf, self._pos)
        if size < 0:
            raise HAWireError(f"HA frame at master offset {offset} has negative size {size}")
        return offset, size

    def next_frame(self) -> tuple[int, memoryview] | None:
        header = self.pending_header()
        if header is None:
            return None
        offset, size = header
        start = self._pos + HEADER_SIZE
        end = start + size
        if end > len(self._buf):
            return None
        self._pos = end
        return offset, memoryview(self._buf)[start:end]

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos
