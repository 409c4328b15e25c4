"""``HAService``: the store's replication endpoint, master and slave sides.

Contract (upstream ``store/ha/HAService.java``):

* ``start(host, port)`` listens on the HA port (``AcceptSocketService``; port 0 = any free
  port, then ``port`` tells which) on every role, as upstream, and starts the slave's
  ``HAClient`` when the role is SLAVE. Each accepted socket is an ``HAConnection``
  (an ``asyncio.Protocol``; it adds itself with ``add_connection``).
* ``push2slave_max_offset``: the largest offset any slave acknowledged. ``is_slave_ok(end)``
  is upstream's ``isSlaveOK``: at least one connection, and ``end - push2SlaveMaxOffset <
  haSlaveFallbehindMax``. ``submit_replica(end)`` queues a SYNC_MASTER wait in the
  ``GroupTransferService`` (``slaveTimeout``); ``submit_replica_result(end, ok, failed)``
  is the same wait resolved with the caller's values.
* ``wakeup_writers()`` is called by the store after every append; it wakes the idle
  connection writers (upstream ``WaitNotifyObject.wakeupAll``).
* ``update_master_address(addr)`` points the slave's client at a master HA address.
* ``stop()``: stop the client, stop listening, close every connection, fail SYNC_MASTER
  waiters (idempotent).

Everything runs on the store's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, TypeVar

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.routine import ServiceState

from .client import HAClient
from .connection import HAConnection
from .group_transfer import GroupTransferService

if TYPE_CHECKING:
    from ..config import MessageStoreConfig
    from ..message_store import MessageStore

__all__ = ["HAService", "SlaveConnectionInfo"]

log = get_logger("aiorocketmq.store.ha")

T = TypeVar("T")


class SlaveConnectionInfo:
    """One connected slave as the master sees it (ops, metrics)."""

    __slots__ = ("addr", "ack_offset", "lag_bytes")

    def __init__(self, addr: str, ack_offset: int, lag_bytes: int) -> None:
        self.addr = addr
        self.ack_offset = ack_offset
        self.lag_bytes = lag_bytes

    def __repr__(self) -> str:
        return f"SlaveConnectionInfo({self.addr!r}, ack={self.ack_offset}, lag={self.lag_bytes})"


class HAService:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.config: MessageStoreConfig = store.config
        self.connections: list[HAConnection] = []
        self.push2slave_max_offset = 0
        self.group_transfer = GroupTransferService(self.config.slave_timeout_ms)
        self.client = HAClient(store, self.config) if self.config.is_slave else None
        self._server: asyncio.AbstractServer | None = None
        self.port = 0
        self._state = ServiceState.CREATE_JUST

    # -- lifecycle --

    async def start(self, host: str, port: int) -> None:
        """Listen on ``host:port`` and, on a slave, start following the master.

        Raises:
            OSError: the HA port cannot be bound.
        """
        if self._state is not ServiceState.CREATE_JUST:
            raise RuntimeError(f"HAService.start(): service is {self._state.name}")
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: HAConnection(self), host, port,
                                                reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        self._state = ServiceState.RUNNING
        if self.client is not None:
            master = self.config.ha_master_address
            if master and len(master) >= 6:  # BrokerController.initialize
                self.client.update_master_address(master)
            self.client.start()
        log.info("ha.started", port=self.port, role=self.config.broker_role)

    async def stop(self) -> None:
        running = self._state is ServiceState.RUNNING
        self._state = ServiceState.SHUTDOWN_ALREADY
        if not running:
            return
        if self.client is not None:
            await self.client.stop()
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            await conn.close()
        self.connections.clear()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        self.group_transfer.close()

    def add_connection(self, conn: HAConnection) -> bool:
        """An accepted slave connection (``HAConnection.connection_made``); False once stopped."""
        if self._state is not ServiceState.RUNNING:
            return False
        self.connections.append(conn)
        return True

    def remove_connection(self, conn: HAConnection) -> None:
        with contextlib.suppress(ValueError):
            self.connections.remove(conn)

    # -- master side --

    @property
    def connection_count(self) -> int:
        return len(self.connections)

    def is_slave_ok(self, master_put_where: int) -> bool:
        return (bool(self.connections)
                and master_put_where - self.push2slave_max_offset < self.config.ha_slave_fallbehind_max)

    def submit_replica(self, end_offset: int) -> asyncio.Future[bool]:
        return self.group_transfer.submit(end_offset)

    def submit_replica_result(self, end_offset: int, ok: T, failed: T) -> asyncio.Future[T]:
        """``submit_replica`` resolved with ``ok`` (acknowledged) or ``failed`` (timed out)."""
        return self.group_transfer.submit_result(end_offset, ok, failed)

    def notify_transfer_some(self, offset: int) -> None:
        if offset > self.push2slave_max_offset:
            self.push2slave_max_offset = offset
            self.group_transfer.notify_acked(offset)

    def wakeup_writers(self) -> None:
        for conn in self.connections:
            conn.wakeup()

    def slave_fall_behind_much(self) -> int:
        """Bytes the best slave is behind (``DefaultMessageStore.slaveFallBehindMuch``)."""
        return self.store.get_max_phy_offset() - self.push2slave_max_offset

    def slaves(self) -> list[SlaveConnectionInfo]:
        end = self.store.get_max_phy_offset()
        return [SlaveConnectionInfo(c.client_addr, c.slave_ack_offset,
                                    max(0, end - max(c.slave_ack_offset, 0)))
                for c in self.connections]

    # -- slave side --

    def update_master_address(self, addr: str | None) -> None:
        if self.client is not None and addr:
            self.client.update_master_address(addr)
