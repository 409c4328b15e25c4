"""One slave on the master: upstream ``HAConnection`` (its read and write services).

Contract:

* The slave's 8-byte offset reports are read as they arrive (``wire.OffsetReportDecoder``).
  The first one is the slave's request offset; every one is its acknowledged offset and
  is passed to ``HAService.notify_transfer_some`` (SYNC_MASTER waiters). A report beyond
  the master's log end, end of stream, or no report for ``haHousekeepingInterval`` ends
  the connection.
* Transfers start once the request offset is known: from that offset, or, for a
  slave reporting 0 (an empty slave), from the start of the master's last commit-log
  segment (``WriteSocketService``: ``maxOffset - maxOffset % mappedFileSizeCommitLog``).
  Frames are of at most ``haTransferBatchSize`` bytes, never crossing a segment, written
  as long as the socket takes them (the transport's flow control pauses and resumes
  them), and a heartbeat frame (size 0) goes out when nothing was written for
  ``haSendHeartbeatInterval``. ``wakeup()`` (called after every append) schedules one
  transfer for the loop's next iteration, so the puts handled in one iteration leave in
  one frame.
* Anything that ends the connection closes the socket and removes the connection from
  the service (``stopChannelAndSelector``); ``close()`` waits for that.

It is an ``asyncio.Protocol``, not a reader and a writer task: a report is handled in
the callback that reads it and a transfer is a plain call, no task wake-up, event or
per-read timeout on a SYNC_MASTER send's round trip. One timer, re-armed only when it
fires, watches both the housekeeping and the heartbeat intervals.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import TYPE_CHECKING, cast

from aiorocketmq.logs import get_logger

from .wire import FRAME_HEADER, HEADER_SIZE, OffsetReportDecoder, encode_frame_header

if TYPE_CHECKING:
    from .service import HAService

__all__ = ["HAConnection"]

log = get_logger("aiorocketmq.store.ha")

_pack_header = FRAME_HEADER.pack_into
_CLOSE_WAIT = 2.0


class HAConnection(asyncio.Protocol):
    """The master's end of one slave connection. Created by ``HAService``'s listener."""

    def __init__(self, service: HAService) -> None:
        self._service = service
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self.client_addr = "?"
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self._decoder = OffsetReportDecoder()
        self._transferring = False  # request offset known: frames may flow
        self._scheduled = False  # a transfer is queued for the next iteration
        self._paused = False  # the transport's buffer is above its high-water mark
        self._last_read = 0.0
        self._last_write = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._closed: asyncio.Future[None] = self._loop.create_future()

    # -- asyncio.Protocol --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.client_addr = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._last_read = self._last_write = self._loop.time()
        if not self._service.add_connection(self):
            transport.close()
            return
        log.info("ha.slave_connected", slave=self.client_addr)
        self._arm_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._transferring = False
        if exc is not None:
            log.info("ha.connection_lost", slave=self.client_addr, error=str(exc))
        self._service.remove_connection(self)
        if not self._closed.done():
            self._closed.set_result(None)
        log.info("ha.slave_disconnected", slave=self.client_addr, ack_offset=self.slave_ack_offset)

    def data_received(self, data: bytes) -> None:
        self._last_read = self._loop.time()
        offset = self._decoder.feed(data)
        if offset is None:
            return
        self.slave_ack_offset = offset
        service = self._service
        try:
            if self.slave_request_offset < 0:
                self.slave_request_offset = offset
                log.info("ha.slave_request_offset", slave=self.client_addr, offset=offset)
                self._start_transfer()
            else:
                master_max = service.store.get_max_phy_offset()
                if offset > master_max:
                    log.warning("ha.slave_offset_beyond_master", slave=self.client_addr, offset=offset,
                                master_max_offset=master_max)
                    self._end()
                    return
            service.notify_transfer_some(offset)
        except Exception as exc:
            log.error("ha.connection_failed", slave=self.client_addr, exc_info=exc)
            self._end()

    def eof_received(self) -> bool:
        return False  # close the transport

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self.wakeup()

    # -- the service's side --

    def wakeup(self) -> None:
        if self._transferring and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._transfer)

    async def close(self) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._closed), _CLOSE_WAIT)
        except TimeoutError:
            if transport is not None:
                transport.abort()
            await self._closed

    # -- internals --

    def _end(self) -> None:
        self._transferring = False
        if self._transport is not None:
            self._transport.close()

    def _start_transfer(self) -> None:
        store = self._service.store
        if self.slave_request_offset == 0:
            max_offset = store.get_max_phy_offset()
            size = self._service.config.mapped_file_size_commit_log
            self.next_transfer_from = max(0, max_offset - max_offset % size)
        else:
            self.next_transfer_from = self.slave_request_offset
        log.info("ha.transfer_start", slave=self.client_addr, offset=self.next_transfer_from,
                 requested=self.slave_request_offset)
        self._transferring = True
        self._last_write = self._loop.time()
        if self._timer is not None:  # the heartbeat's interval counts from here
            self._timer.cancel()
        self._arm_timer()
        self._transfer()

    def _transfer(self) -> None:
        """Write frames from ``next_transfer_from`` while there is data and room."""
        self._scheduled = False
        transport = self._transport
        if not self._transferring or transport is None or transport.is_closing():
            return
        store = self._service.store
        batch = self._service.config.ha_transfer_batch_size
        wrote = False
        try:
            while not self._paused:
                offset = self.next_transfer_from
                data = store.get_commit_log_data(offset)
                if data is None:
                    break
                size = min(len(data), batch)
                # One copy out of the mapping, header and body in one buffer and one send
                # (the transport may keep what the socket does not take).
                frame = bytearray(HEADER_SIZE + size)
                _pack_header(frame, 0, offset, size)
                frame[HEADER_SIZE:] = data[:size]
                data.release()
                self.next_transfer_from = offset + size
                transport.write(frame)
                wrote = True
        except Exception as exc:
            log.error("ha.connection_failed", slave=self.client_addr, exc_info=exc)
            self._end()
            return
        if wrote:
            self._last_write = self._loop.time()

    def _arm_timer(self) -> None:
        config = self._service.config
        due = self._last_read + config.ha_housekeeping_interval_ms / 1000
        if self._transferring:
            due = min(due, self._last_write + config.ha_send_heartbeat_interval_ms / 1000)
        self._timer = self._loop.call_at(due, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        config = self._service.config
        now = self._loop.time()
        housekeeping = config.ha_housekeeping_interval_ms / 1000
        if now - self._last_read >= housekeeping:
            log.warning("ha.slave_expired", slave=self.client_addr, idle_s=housekeeping)
            self._end()
            return
        if (self._transferring and not self._paused
                and now - self._last_write >= config.ha_send_heartbeat_interval_ms / 1000):
            transport.write(encode_frame_header(self.next_transfer_from, 0))
            self._last_write = now
        self._arm_timer()
