"""The slave's side of replication: upstream ``HAService.HAClient``.

Contract:

* Follows ``master_address`` (``host:haPort``; from ``haMasterAddress`` or the
  nameserver's REGISTER_BROKER answer). Without one it waits for one. A changed address
  is used at the next connect, at once (backoff reset) when the routine is waiting.
* Reconnects back off (``protocol.backoff.Backoff``: 0.1 s doubling to a 2 s cap, with
  jitter) after a failed connect and after a connection that ended within 5 s
  (``STABLE_AFTER``: a master, or anything on its address, that accepts and drops the
  connection, or a session ended at its first frame by an offset mismatch); a connection
  that stayed up longer resets the backoff, so a restarted master is redialled after
  0.1 s, and one back after a long outage is found within 2 s. Upstream ``HAClient.run`` waits 5 s
  (``waitForRunning(1000 * 5)``) only after a failed connect and redials at once after a
  closed connection: stock 4.9.7 made 85,140 connections in 10 s to a listener that
  accepts and closes, ours at most 14 (``tests/integration/test_reconnect_backoff.py``).
* On connect it reports its commit-log max offset (8 bytes, big-endian), again after
  the frames of each read were appended, and at least every ``haSendHeartbeatInterval``.
  Upstream's first report waits one heartbeat interval after connecting (its master,
  which waits for that report, sends nothing meanwhile and a SYNC_MASTER answers
  FLUSH_SLAVE_TIMEOUT); reporting at once saves those 5 s and changes nothing on the wire.
  Upstream reports after every frame; once per read is the same information.
* Each transfer frame is appended with ``MessageStore.append_to_commit_log`` at the
  frame's offset, which must equal the slave's max offset once the slave holds data
  (upstream closes the connection otherwise, and so do we: the next connect reports the
  slave's offset again and the master resumes from there). Heartbeat frames (size 0)
  append nothing. The records appended are dispatched (consume queue, index) right after
  the report that acknowledges them is written, not before: a SYNC_MASTER's sends wait for
  that report, and upstream's slave dispatches on its reput thread, after it too.
* End of stream, a write failure, a refused append or nothing read from the master for
  ``haHousekeepingInterval`` closes the connection; the routine then reconnects.
  (Upstream times the housekeeping from its own last write, so a master that hangs
  without closing the socket is never noticed; the master's heartbeats make reads the
  better clock.)
* ``stop()`` cancels the routine and closes the socket.

A connection is an ``asyncio.Protocol`` (``_Session``): frames are appended and the report
written in the callback that reads them, no stream reader, task wake-up or per-read
timeout on a SYNC_MASTER send's round trip; one timer, re-armed only when it fires,
keeps the heartbeat and the housekeeping.

Observability: ``connected``, ``master_address``, ``reported_offset`` and
``master_offset`` (the offset of the last frame header, a lower bound of the master's log
end).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, cast

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.backoff import Backoff
from aiorocketmq.protocol.routine import cancel_and_wait

from .wire import HAWireError, SlaveFrameDecoder, encode_offset_report

if TYPE_CHECKING:
    from ..config import MessageStoreConfig
    from ..message_store import MessageStore

__all__ = ["HAClient"]

log = get_logger("aiorocketmq.store.ha")

CONNECT_TIMEOUT = 3.0


class HAClient:
    def __init__(self, store: MessageStore, config: MessageStoreConfig) -> None:
        self._store = store
        self._config = config
        self.master_address: str | None = None
        self.connected = False
        self.reported_offset = 0
        self.master_offset = 0
        self._address_changed = asyncio.Event()
        self._backoff = Backoff()
        self._task: asyncio.Task[None] | None = None

    def update_master_address(self, addr: str) -> None:
        if addr != self.master_address:
            log.info("ha.master_address_updated", old=self.master_address, new=addr)
            self.master_address = addr
            self._address_changed.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._client_routine(), name="HAClient")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            await cancel_and_wait((task,))

    async def _client_routine(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = self._backoff
        while True:
            addr = self.master_address
            if not addr:
                self._address_changed.clear()
                await self._address_changed.wait()
                continue
            host, _, port = addr.rpartition(":")
            session = _Session(self, addr)
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    transport, _ = await loop.create_connection(
                        lambda: session, host, int(port))  # noqa: B023 (called within)
            except (OSError, TimeoutError, ValueError) as exc:
                delay = backoff.next_delay()
                log.info("ha.connect_master_failed", master=addr, error=str(exc) or type(exc).__name__,
                         retry_in_ms=int(delay * 1000))
                await self._pause(delay)
                continue
            connected_at = loop.time()
            try:
                error = await asyncio.shield(session.ended)
                if error is not None:
                    log.info("ha.master_connection_lost", master=addr, error=str(error))
            finally:
                self.connected = False
                self._store.dispatch_appended()  # whatever the session appended last
                transport.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(session.lost), 2.0)
            backoff.connection_ended(loop.time() - connected_at)
            await self._pause(backoff.next_delay())

    async def _pause(self, delay: float) -> None:
        """Wait ``delay`` seconds, or less when the master address changes (which also
        resets the backoff: a new master gets its first attempt at once)."""
        self._address_changed.clear()
        try:
            async with asyncio.timeout(delay):
                await self._address_changed.wait()
        except TimeoutError:
            return
        self._backoff.reset()


class _Session(asyncio.Protocol):
    """One connection to the master (``HAClient``'s read and report loop, as callbacks).

    ``ended`` resolves when the session is over: None for an orderly end (closed by the
    master, expired, offset mismatch, refused append), else the error. ``lost`` when the
    transport is gone.
    """

    def __init__(self, client: HAClient, addr: str) -> None:
        self._client = client
        self._store = client._store
        self._addr = addr
        self._loop = asyncio.get_running_loop()
        config = client._config
        self._heartbeat = config.ha_send_heartbeat_interval_ms / 1000
        self._housekeeping = config.ha_housekeeping_interval_ms / 1000
        self._decoder = SlaveFrameDecoder()
        self._transport: asyncio.Transport | None = None
        self._reported = 0
        self._last_read = self._last_write = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.ended: asyncio.Future[BaseException | None] = self._loop.create_future()
        self.lost: asyncio.Future[None] = self._loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        client = self._client
        client.connected = True
        reported = self._reported = client.reported_offset = self._store.get_max_phy_offset()
        log.info("ha.master_connected", master=self._addr, offset=reported)
        transport.write(encode_offset_report(reported))
        self._last_read = self._last_write = self._loop.time()
        self._timer = self._loop.call_at(self._last_write + min(self._heartbeat, self._housekeeping),
                                         self._on_timer)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if exc is None:
            log.info("ha.master_closed", master=self._addr)
        self._end(exc)
        if not self.lost.done():
            self.lost.set_result(None)

    def eof_received(self) -> bool:
        return False  # close the transport

    def _end(self, exc: BaseException | None = None) -> None:
        if not self.ended.done():
            self.ended.set_result(exc)
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.close()

    def data_received(self, data: bytes) -> None:
        if self.ended.done():
            return
        self._last_read = self._loop.time()
        store = self._store
        decoder = self._decoder
        try:
            decoder.feed(data)
            while True:
                header = decoder.pending_header()
                if header is None:
                    break
                master_offset = header[0]
                slave_offset = store.get_max_phy_offset()
                if slave_offset != 0 and slave_offset != master_offset:
                    log.error("ha.offset_mismatch", master=self._addr, master_offset=master_offset,
                              slave_offset=slave_offset)
                    self._end()
                    return
                frame = decoder.next_frame()
                if frame is None:
                    break
                offset, body = frame
                self._client.master_offset = offset + len(body)
                if body and not store.append_to_commit_log(offset, body, dispatch=False):
                    self._end()
                    return
        except HAWireError as exc:
            self._end(exc)
            return
        current = store.get_max_phy_offset()
        if current > self._reported:
            # The acknowledgement first (a SYNC_MASTER's sends wait for it), then the
            # consume queue and index entries of what was appended.
            self._reported = self._client.reported_offset = current
            assert self._transport is not None
            self._transport.write(encode_offset_report(current))
            self._last_write = self._last_read
            store.dispatch_appended()

    def _on_timer(self) -> None:
        self._timer = None
        transport = self._transport
        if self.ended.done() or transport is None:
            return
        now = self._loop.time()
        if now - self._last_read > self._housekeeping:
            log.warning("ha.master_expired", master=self._addr, idle_s=now - self._last_read)
            self._end()
            return
        if now - self._last_write >= self._heartbeat:
            transport.write(encode_offset_report(self._reported))
            self._last_write = now
        due = min(self._last_write + self._heartbeat, self._last_read + self._housekeeping)
        self._timer = self._loop.call_at(max(due, now + 0.001), self._on_timer)
