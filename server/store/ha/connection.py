"""One slave on the master: upstream ``HAConnection`` (its read and write services).

Contract:

* The read routine takes the slave's 8-byte offset reports (``wire.OffsetReportDecoder``).
  The first one is the slave's request offset; every one is its acknowledged offset and
  is passed to ``HAService.notify_transfer_some`` (SYNC_MASTER waiters). A report beyond
  the master's log end, end of stream, or no report for ``haHousekeepingInterval`` ends
  the connection.
* The write routine starts once the request offset is known: from that offset, or, for a
  slave reporting 0 (an empty slave), from the start of the master's last commit-log
  segment (``WriteSocketService``: ``maxOffset - maxOffset % mappedFileSizeCommitLog``).
  It sends frames of at most ``haTransferBatchSize`` bytes, never crossing a segment, as
  fast as the socket drains, and a heartbeat frame (size 0) when nothing was written for
  ``haSendHeartbeatInterval``. Between transfers it sleeps until ``wakeup()`` (an append).
* Either routine ending closes the socket and the other routine, and removes the
  connection from the service (``stopChannelAndSelector``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.routine import cancel_and_wait

from .wire import OffsetReportDecoder, encode_frame_header

if TYPE_CHECKING:
    from .service import HAService

__all__ = ["HAConnection"]

log = get_logger("aiorocketmq.store.ha")

_READ_SIZE = 64 * 1024


class HAConnection:
    """The master's end of one slave connection. Owned by ``HAService``."""

    def __init__(self, service: HAService, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self._service = service
        self._reader = reader
        self._writer = writer
        peer = writer.get_extra_info("peername")
        self.client_addr = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self._requested = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run_routine(), name=f"HAConnection[{self.client_addr}]")

    def wakeup(self) -> None:
        self._wakeup.set()

    async def close(self) -> None:
        task = self._task
        if task is not None and not task.done():
            await cancel_and_wait((task,))

    async def _run_routine(self) -> None:
        loop = asyncio.get_running_loop()
        read = loop.create_task(self._read_routine(), name=f"HA-read[{self.client_addr}]")
        write = loop.create_task(self._write_routine(), name=f"HA-write[{self.client_addr}]")
        try:
            done, _ = await asyncio.wait((read, write), return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exc = task.exception()
                if exc is not None and not isinstance(exc, (ConnectionError, OSError)):
                    log.error("ha.connection_failed", slave=self.client_addr, exc_info=exc)
                elif exc is not None:
                    log.info("ha.connection_lost", slave=self.client_addr, error=str(exc))
        finally:
            for task in (read, write):
                task.cancel()
            for task in (read, write):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
            self._service.remove_connection(self)
            log.info("ha.slave_disconnected", slave=self.client_addr, ack_offset=self.slave_ack_offset)

    async def _read_routine(self) -> None:
        service = self._service
        store = service.store
        decoder = OffsetReportDecoder()
        housekeeping = service.config.ha_housekeeping_interval_ms / 1000
        while True:
            try:
                async with asyncio.timeout(housekeeping):
                    data = await self._reader.read(_READ_SIZE)
            except TimeoutError:
                log.warning("ha.slave_expired", slave=self.client_addr, idle_s=housekeeping)
                return
            if not data:
                return
            offset = decoder.feed(data)
            if offset is None:
                continue
            self.slave_ack_offset = offset
            if self.slave_request_offset < 0:
                self.slave_request_offset = offset
                self._requested.set()
                log.info("ha.slave_request_offset", slave=self.client_addr, offset=offset)
            elif offset > store.get_max_phy_offset():
                log.warning("ha.slave_offset_beyond_master", slave=self.client_addr, offset=offset,
                            master_max_offset=store.get_max_phy_offset())
                return
            service.notify_transfer_some(offset)

    async def _write_routine(self) -> None:
        service = self._service
        store = service.store
        config = service.config
        writer = self._writer
        await self._requested.wait()
        if self.slave_request_offset == 0:
            max_offset = store.get_max_phy_offset()
            self.next_transfer_from = max(0, max_offset - max_offset % config.mapped_file_size_commit_log)
        else:
            self.next_transfer_from = self.slave_request_offset
        log.info("ha.transfer_start", slave=self.client_addr, offset=self.next_transfer_from,
                 requested=self.slave_request_offset)
        loop = asyncio.get_running_loop()
        heartbeat = config.ha_send_heartbeat_interval_ms / 1000
        batch = config.ha_transfer_batch_size
        wakeup = self._wakeup
        last_write = loop.time()
        while True:
            wakeup.clear()
            offset = self.next_transfer_from
            data = store.get_commit_log_data(offset)
            if data is not None:
                size = min(len(data), batch)
                # One copy out of the mapping: the transport may keep what it cannot send.
                chunk = bytes(data[:size])
                data.release()
                writer.writelines((encode_frame_header(offset, size), chunk))
                self.next_transfer_from = offset + size
                last_write = loop.time()
                await writer.drain()
                continue
            idle = loop.time() - last_write
            if idle >= heartbeat:
                writer.write(encode_frame_header(offset, 0))
                last_write = loop.time()
                await writer.drain()
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(heartbeat - idle):
                    await wakeup.wait()
