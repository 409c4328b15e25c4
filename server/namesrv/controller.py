"""NamesrvController: wires config, routes, KV store and server, and owns their lifecycle.

Upstream ``NamesrvController`` + ``BrokerHousekeepingService``:

* ``start()``: load the KV file (and drop the temp files a crash left next to it and the
  configuration file), bind the RemotingServer (port 0 picks a free port), then
  create ``_scan_task`` running ``_scan_routine``, which every ``scanNotActiveBrokerInterval``
  removes brokers silent for longer than ``brokerChannelExpiredTime`` and closes their
  connections (upstream: every 10 s after 5 s, 120 s).
* A connection that closes (peer gone, error, idle) removes the broker registered over it at
  once (``onChannelClose`` / ``onChannelException`` / ``onChannelIdle`` -> ``onChannelDestroy``).
* ``stop()`` is idempotent and ordered: stop the metrics endpoint, cancel and await the scan
  task, then stop the server (closes every connection, waits for in-flight handlers, so a
  KV write finishes first).
* ``metrics`` (server/metrics/): its request observer goes to the server; its families are
  attached at construction and its HTTP endpoint (if any) starts after the server.

A failed ``start()`` undoes what it did and re-raises (``OSError`` for a taken port,
``KVConfigLoadError`` for a corrupt KV file).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.atomic_file import remove_stale_temp_files
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.remoting_server import RemotingServer
from aiorocketmq.protocol.tls import TlsConfig
from aiorocketmq.server.metrics import NamesrvMetrics

from .config import NamesrvConfig
from .kv_config import KVConfigManager
from .processor import NamesrvProcessor
from .route_info import RouteInfoManager

__all__ = ["NamesrvController"]

log = get_logger("aiorocketmq.namesrv")

_FIRST_SCAN_DELAY = 5.0  # upstream scheduleAtFixedRate(scanNotActiveBroker, 5, 10, SECONDS)


class NamesrvController:
    """One nameserver: ``await start()``, serve, ``await stop()``."""

    def __init__(self, config: NamesrvConfig, *, metrics: NamesrvMetrics | None = None,
                 tls: TlsConfig | None = None) -> None:
        """``tls``: upstream's ``tls.server.mode`` and friends (protocol/tls.py); None is
        their defaults, as for a stock nameserver started without ``-D``: permissive, a
        self-signed certificate for TLS clients."""
        if tls is None:
            tls = TlsConfig.from_properties()
        self.config = config
        self.kv = KVConfigManager(config.kv_config_path)
        self.routes = RouteInfoManager(
            broker_channel_expired_ms=config.broker_channel_expired_time_ms)
        self.processor = NamesrvProcessor(config, self.routes, self.kv)
        self.metrics = metrics if metrics is not None else NamesrvMetrics()
        self.server = RemotingServer(
            self.processor.table,
            host=config.bind_address,
            port=config.listen_port,
            on_channel_close=self._on_channel_close,
            idle_timeout=float(config.server_channel_max_idle_time_seconds),
            oneway_permits=config.server_oneway_semaphore_value,
            async_permits=config.server_async_semaphore_value,
            request_observer=self.metrics.observer,
            ssl_context=tls.maybe_server_context(),
            tls_mode=tls.mode,
        )
        self.metrics.attach(self)
        self._scan_task: asyncio.Task[None] | None = None
        self._started = False
        self._start_failed = False
        self._stopped = False

    @property
    def address(self) -> str:
        """``host:port`` the server listens on (the real port once started)."""
        return self.server.address

    async def start(self) -> None:
        """Load state, listen, start the expiry scan."""
        if self._started:
            raise RuntimeError("NamesrvController.start(): already started")
        self._started = True
        try:
            self.kv.load()
            if self.config.config_store_path:
                remove_stale_temp_files(Path(self.config.config_store_path))
            try:
                await self.server.start()
            except OSError as exc:
                # The address, which the errno's text does not say (mqnamesrv prints it).
                raise OSError(exc.errno, f"cannot listen on {self.config.bind_address}:"
                              f"{self.config.listen_port}: {(exc.strerror or str(exc)).lower()}"
                              ) from None
            # Port 0 means "any": report the port actually bound (GET_NAMESRV_CONFIG).
            self.config.listen_port = self.server.port
            await self.metrics.start()
            self._scan_task = asyncio.get_running_loop().create_task(
                self._scan_routine(), name="namesrv-scan-not-active-broker")
        except BaseException:
            self._start_failed = True  # stop() then says nothing: it never ran
            await self.stop()
            raise
        log.info("namesrv.started", address=self.address, kv_path=str(self.kv.path),
                 broker_expired_ms=self.config.broker_channel_expired_time_ms,
                 scan_interval_ms=self.config.scan_not_active_broker_interval_ms,
                 metrics=self.metrics.address)

    async def stop(self) -> None:
        """Stop the scan, then the server. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        await self.metrics.stop()
        task = self._scan_task
        self._scan_task = None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                # Our own child, just cancelled; re-raise if *we* are being cancelled.
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
            except Exception:  # the routine logged it already; stopping goes on
                log.warning("namesrv.scan_routine_was_dead")
        if self._start_failed:
            if self.server.is_serving:  # bound, then something later failed
                await self.server.stop()
            return
        await self.server.stop()
        log.info("namesrv.stopped", address=self.address)

    async def __aenter__(self) -> NamesrvController:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- broker housekeeping --------------------------------------------------------------

    def _on_channel_close(self, channel: Channel, exc: BaseException | None) -> None:
        removed = self.routes.on_channel_destroy(channel.remote_addr, channel)
        if removed is not None:
            log.info("namesrv.broker_channel_closed", broker_addr=removed,
                     peer=channel.remote_addr, reason=None if exc is None else str(exc))

    async def _scan_routine(self) -> None:
        # Both timings are read on every pass, so UPDATE_NAMESRV_CONFIG changes them live.
        try:
            await asyncio.sleep(min(_FIRST_SCAN_DELAY, self.config.scan_interval))
            while True:
                self.scan_not_active_brokers()
                await asyncio.sleep(self.config.scan_interval)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("namesrv.scan_routine_failed")
            raise

    def scan_not_active_brokers(self, now_ms: int | None = None) -> int:
        """One expiry pass; closes the expired brokers' connections. Returns the count."""
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        self.routes.broker_channel_expired_ms = self.config.broker_channel_expired_time_ms
        removed = self.routes.scan_not_active_brokers(now_ms=now_ms)
        for _addr, channel in removed:
            if isinstance(channel, Channel):
                channel.close()
        return len(removed)
