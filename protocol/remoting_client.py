"""RemotingClient: one ``Channel`` per address, created on demand and reused.

Upstream ``NettyRemotingClient``:

* ``get_channel(addr)`` returns the live channel for ``addr`` or connects one under a
  per-address lock (``createChannel``); a closed channel is dropped and the next call dials
  again. Connecting waits at most ``connect_timeout`` (connectTimeoutMillis, 3 s).
* Dialling backs off per address (``protocol.backoff.Backoff``: 0.1 s doubling to a 2 s
  cap, with jitter; upstream dials on every call). A failed connect, or a channel the
  peer closed (or broke) within 5 s of connecting, is a failure; after one, calls to that
  address fail at once with ``RemotingConnectError`` (the last failure's text, then when
  the next dial is due) until the delay has passed, and the first call after it dials.
  Only a first failure that is a dropped channel is redialled at once, as upstream. So
  however many producers, pull loops or routines use a dead address (refusing, or
  accepting and dropping), it is dialled a few times a second at most, and callers queued
  behind a failing dial fail with it instead of each dialling in turn. A channel that
  stayed up longer, or that we closed ourselves (timeouts, ``close_channel``), clears the
  address's backoff.
* Every channel shares the client's processor table (broker-initiated requests such as
  NOTIFY_CONSUMER_IDS_CHANGED, docs/PROTOCOL.md 3.5) and its async / oneway permit pools
  (clientAsyncSemaphoreValue / clientOnewaySemaphoreValue, 65535 each).
* A sync request that times out closes its channel (``clientCloseSocketIfTimeout``, true in
  4.9.7), as does a request that could not be written.
* ``rpc_hook`` (upstream ``RPCHook``, e.g. ``AclClientRPCHook``): ``do_before_request``
  runs on every request just before it is written (to brokers and nameservers alike),
  ``do_after_response`` after each sync answer. ``ssl``: every channel connects with TLS
  (upstream ``useTLS``).
* Nameservers: ``update_namesrv_address_list`` shuffles the list as upstream does;
  ``invoke_namesrv`` sticks to one chosen nameserver and moves on to the next one when it
  cannot connect, or after its channel was closed by a failure
  (``getAndCreateNameserverChannel``).
"""

# ASYNC109: ``timeout`` parameters are request budgets handed to the Channel's timers.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import random
import ssl
import warnings
from collections.abc import Callable, Mapping

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.acl import RPCHook
from aiorocketmq.protocol.backoff import STABLE_AFTER, Backoff
from aiorocketmq.protocol.channel import (
    CLIENT_ASYNC_PERMITS,
    CLIENT_ONEWAY_PERMITS,
    DEFAULT_IDLE_TIMEOUT,
    SCAN_INTERVAL,
    Channel,
    Handler,
    InvokeCallback,
    Permits,
)
from aiorocketmq.protocol.codes import SerializeType
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import (
    ConnectionClosedError,
    MQClientError,
    RemotingConnectError,
    RemotingTimeoutError,
)
from aiorocketmq.protocol.frame import DEFAULT_MAX_FRAME_LENGTH

__all__ = ["RemotingClient", "parse_namesrv_addr"]

log = get_logger("aiorocketmq.remoting.client")

DEFAULT_CONNECT_TIMEOUT = 3.0  # NettySystemConfig.connectTimeoutMillis


def parse_namesrv_addr(addrs: str) -> list[str]:
    """``"a:9876; b:9876"`` -> ``["a:9876", "b:9876"]`` (upstream splits on ``;``)."""
    return [a.strip() for a in addrs.split(";") if a.strip()]


class _DialBackoff:
    """An address's reconnect backoff: no dial before ``retry_at`` (loop time)."""

    __slots__ = ("backoff", "retry_at", "error")

    def __init__(self) -> None:
        self.backoff = Backoff()
        self.retry_at = 0.0
        self.error = ""

    def failed(self, now: float, error: str) -> None:
        self.retry_at = now + self.backoff.next_delay()
        self.error = error


def _split_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not host:
        raise MQClientError(f"address {addr!r} is not host:port")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise MQClientError(f"address {addr!r} has a non-numeric port") from None


class RemotingClient:
    """Channels to brokers and nameservers, keyed by ``"host:port"``.

    Args:
        processors: request code -> handler for requests the servers send us; read live.
        connect_timeout: seconds to wait for a TCP connection.
        close_socket_if_timeout: close a channel whose sync request timed out (upstream
            default true): a peer that stopped answering is dialled afresh next time.
        serialize_type: header encoding stamped on every request sent (``ClientConfig``'s,
            upstream ``serializeTypeConfigInThisServer``); None sends each as it was built.
        rpc_hook: signs (or otherwise amends) each request (module docstring).
        ssl: a client TLS context for every connection, or None for plain TCP.
    """

    def __init__(
        self,
        processors: Mapping[int, Handler] | None = None,
        *,
        default_handler: Handler | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        async_permits: int = CLIENT_ASYNC_PERMITS,
        oneway_permits: int = CLIENT_ONEWAY_PERMITS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        scan_interval: float = SCAN_INTERVAL,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        close_socket_if_timeout: bool = True,
        serialize_type: SerializeType | None = None,
        rpc_hook: RPCHook | None = None,
        ssl: ssl.SSLContext | None = None,
    ) -> None:
        self._processors: dict[int, Handler] = dict(processors or {})
        self._default_handler = default_handler
        self.connect_timeout = connect_timeout
        self._async_permits = Permits(async_permits)
        self._oneway_permits = Permits(oneway_permits)
        self._idle_timeout = idle_timeout
        self._scan_interval = scan_interval
        self._max_frame_length = max_frame_length
        self._close_socket_if_timeout = close_socket_if_timeout
        self.serialize_type = serialize_type
        self.rpc_hook = rpc_hook
        self.ssl = ssl
        self._channels: dict[str, Channel] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._dial_backoff: dict[str, _DialBackoff] = {}
        self._namesrv_addrs: list[str] = []
        self._namesrv_chosen: str | None = None
        self._namesrv_index = random.randrange(999)  # upstream initValueIndex()
        self._namesrv_lock = asyncio.Lock()
        self._used = False
        self._closed = False

    # -- configuration --------------------------------------------------------------------

    def register(self, code: int, handler: Handler) -> None:
        """Handle server-initiated request ``code`` on every channel of this client."""
        self._processors[int(code)] = handler

    @property
    def processors(self) -> Mapping[int, Handler]:
        return self._processors

    @property
    def channels(self) -> Mapping[str, Channel]:
        return dict(self._channels)

    # -- channels -------------------------------------------------------------------------

    async def get_channel(self, addr: str) -> Channel:
        """The live channel to ``addr``, connecting one if needed.

        Raises:
            RemotingConnectError: could not connect within ``connect_timeout``.
            MQClientError: the client is closed or ``addr`` is not ``host:port``.
        """
        channel = self._channels.get(addr)
        if channel is not None and channel.is_active:
            return channel
        self._check_open("get_channel")
        lock = self._locks.get(addr)
        if lock is None:
            lock = self._locks[addr] = asyncio.Lock()
        async with lock:
            channel = self._channels.get(addr)
            if channel is not None:
                if channel.is_active:
                    return channel
                del self._channels[addr]
            self._check_open("get_channel")
            host, port = _split_addr(addr)
            loop = asyncio.get_running_loop()
            dial = self._dial_backoff.get(addr)
            if dial is not None and loop.time() < dial.retry_at:
                raise RemotingConnectError(
                    f"{dial.error}; next attempt in {int((dial.retry_at - loop.time()) * 1000)}ms "
                    f"({dial.backoff.failures} failures in a row)")
            self._used = True
            try:
                channel = await Channel.connect(
                    host,
                    port,
                    processors=self._processors,
                    timeout=self.connect_timeout,
                    ssl=self.ssl,
                    default_handler=self._default_handler,
                    on_close=self._channel_closed,
                    async_permits=self._async_permits,
                    oneway_permits=self._oneway_permits,
                    idle_timeout=self._idle_timeout,
                    scan_interval=self._scan_interval,
                    max_frame_length=self._max_frame_length,
                    # The broker or nameserver is another process: let it start on each
                    # request while we prepare the next (protocol.channel, "Writing").
                    eager_requests=True,
                )
            except RemotingConnectError as exc:
                if dial is None:
                    dial = self._dial_backoff[addr] = _DialBackoff()
                dial.failed(loop.time(), str(exc))
                raise
            if self._closed:  # close() ran while we were dialling
                channel.close()
                await channel.wait_closed()
                self._check_open("get_channel")
            channel.attrs["addr"] = addr
            channel.attrs["connected_at"] = loop.time()
            self._channels[addr] = channel
            log.info("remoting.channel_connected", addr=addr, local=channel.local_addr)
            return channel

    def _channel_closed(self, channel: Channel, exc: BaseException | None) -> None:
        addr = channel.attrs.get("addr")
        if addr is not None and self._channels.get(addr) is channel:
            del self._channels[addr]
        log.info("remoting.channel_closed", addr=addr,
                 reason=None if exc is None else str(exc))
        if addr is None:
            return
        # exc is None when we closed it (close_channel, a timeout, close()).
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:  # closed outside the loop: nothing to time
            self._dial_backoff.pop(addr, None)
            return
        uptime = now - channel.attrs.get("connected_at", now)
        dial = self._dial_backoff.get(addr)
        if exc is None or uptime >= (dial.backoff.stable_after if dial else STABLE_AFTER):
            self._dial_backoff.pop(addr, None)
            return
        if dial is None:
            dial = self._dial_backoff[addr] = _DialBackoff()
        first = dial.backoff.failures == 0
        dial.failed(now, f"connection to {addr} lost {int(uptime * 1000)}ms after connecting: {exc}")
        if first:  # one dropped connection is redialled at once, as upstream
            dial.retry_at = now

    def close_channel(self, addr: str) -> None:
        """Close the channel to ``addr`` (if any); the next call dials again."""
        channel = self._channels.pop(addr, None)
        if channel is not None:
            channel.close()

    # -- invocations ----------------------------------------------------------------------

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Request/response to ``addr`` (upstream ``invokeSync``).

        ``timeout`` covers the whole call; connecting has its own ``connect_timeout``.

        Raises:
            RemotingConnectError, RemotingTimeoutError, ConnectionClosedError.
        """
        if self.serialize_type is not None:
            cmd.serialize_type = self.serialize_type
        hook = self.rpc_hook
        if hook is not None:
            hook.do_before_request(addr, cmd)
        channel = self._channels.get(addr)
        if channel is not None and channel.is_active:
            remaining = timeout  # the hot path: no coroutine or clock read before the channel
        else:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            channel = await self.get_channel(addr)
            remaining = deadline - loop.time()
        if remaining <= 0:
            raise RemotingTimeoutError(
                f"invokeSync call the addr[{addr}] timeout: connecting used the whole "
                f"{int(timeout * 1000)}ms, request code={cmd.code}")
        try:
            response = await channel.invoke(cmd, remaining)
        except RemotingTimeoutError:
            if self._close_socket_if_timeout:
                log.warning("remoting.close_on_timeout", addr=addr, code=cmd.code,
                            timeout=timeout)
                self._close_if_current(addr, channel)
            raise
        if hook is not None:
            hook.do_after_response(addr, cmd, response)
        return response

    async def _invoke_on(self, channel: Channel, addr: str, cmd: RemotingCommand,
                         remaining: float, timeout: float) -> RemotingCommand:
        if remaining <= 0:
            raise RemotingTimeoutError(
                f"invokeSync call the addr[{addr}] timeout: connecting used the whole "
                f"{int(timeout * 1000)}ms, request code={cmd.code}")
        try:
            return await channel.invoke(cmd, remaining)
        except RemotingTimeoutError:
            if self._close_socket_if_timeout:
                log.warning("remoting.close_on_timeout", addr=addr, code=cmd.code,
                            timeout=timeout)
                self._close_if_current(addr, channel)
            raise

    def _close_if_current(self, addr: str, channel: Channel) -> None:
        if self._channels.get(addr) is channel:
            del self._channels[addr]
        channel.close()

    async def invoke_async(
        self,
        addr: str,
        cmd: RemotingCommand,
        timeout: float,
        callback: InvokeCallback | None = None,
    ) -> asyncio.Future[RemotingCommand]:
        """Send to ``addr``; return the response future (see ``Channel.invoke_async``).

        Raises:
            RemotingConnectError, RemotingTooMuchRequestError, RemotingTimeoutError.
        """
        if self.serialize_type is not None:
            cmd.serialize_type = self.serialize_type
        if self.rpc_hook is not None:
            self.rpc_hook.do_before_request(addr, cmd)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        channel = await self.get_channel(addr)
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise RemotingTimeoutError(
                f"invokeAsync call the addr[{addr}] timeout: connecting used the whole "
                f"{int(timeout * 1000)}ms, request code={cmd.code}")
        return await channel.invoke_async(cmd, remaining, callback)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand, timeout: float) -> None:
        """Oneway request to ``addr`` (see ``Channel.invoke_oneway``)."""
        if self.serialize_type is not None:
            cmd.serialize_type = self.serialize_type
        if self.rpc_hook is not None:
            self.rpc_hook.do_before_request(addr, cmd)
        channel = await self.get_channel(addr)
        await channel.invoke_oneway(cmd, timeout)

    # -- nameservers ----------------------------------------------------------------------

    def update_namesrv_address_list(self, addrs: list[str] | str) -> None:
        """Replace the nameserver list (a list or a ``;``-separated string).

        As upstream: an unchanged set is ignored; a new one is shuffled, and the chosen
        nameserver is forgotten if it is no longer listed.
        """
        new = parse_namesrv_addr(addrs) if isinstance(addrs, str) else [a.strip() for a in addrs
                                                                        if a.strip()]
        if not new:
            return
        old = self._namesrv_addrs
        if len(new) == len(old) and all(a in old for a in new):
            return
        random.shuffle(new)
        log.info("remoting.namesrv_updated", new=new, old=old)
        self._namesrv_addrs = new
        if self._namesrv_chosen not in new:
            self._namesrv_chosen = None

    @property
    def namesrv_addr_list(self) -> list[str]:
        return list(self._namesrv_addrs)

    @property
    def namesrv_addr_chosen(self) -> str | None:
        return self._namesrv_chosen

    async def get_namesrv_channel(self) -> Channel:
        """The chosen nameserver's channel, choosing the next reachable one if needed.

        Raises:
            RemotingConnectError: no nameserver accepted a connection (names them all).
            MQClientError: no nameserver address is configured.
        """
        chosen = self._namesrv_chosen
        if chosen is not None:
            channel = self._channels.get(chosen)
            if channel is not None and channel.is_active:
                return channel
        async with self._namesrv_lock:
            chosen = self._namesrv_chosen
            if chosen is not None:
                channel = self._channels.get(chosen)
                if channel is not None and channel.is_active:
                    return channel
            addrs = self._namesrv_addrs
            if not addrs:
                raise MQClientError("no name server address is set "
                                    "(update_namesrv_address_list was never called)")
            errors: list[str] = []
            for _ in range(len(addrs)):
                self._namesrv_index += 1
                addr = addrs[self._namesrv_index % len(addrs)]
                self._namesrv_chosen = addr
                log.info("remoting.namesrv_chosen", old=chosen, new=addr)
                try:
                    return await self.get_channel(addr)
                except RemotingConnectError as exc:
                    errors.append(str(exc))
            raise RemotingConnectError(f"no name server reachable in {addrs}: "
                                       + "; ".join(errors))

    async def invoke_namesrv(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Request/response to the chosen nameserver (upstream ``invokeSync(null, ...)``).

        A nameserver that cannot be reached is skipped for the next one within this call;
        one that times out or drops the connection fails this call and is left for the
        next nameserver on the following call.
        """
        if self.serialize_type is not None:
            cmd.serialize_type = self.serialize_type
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        channel = await self.get_namesrv_channel()
        addr = channel.attrs["addr"]
        hook = self.rpc_hook
        if hook is not None:
            hook.do_before_request(addr, cmd)
        try:
            response = await self._invoke_on(channel, addr, cmd, deadline - loop.time(), timeout)
        except (RemotingTimeoutError, ConnectionClosedError):
            self._close_if_current(addr, channel)
            raise
        if hook is not None:
            hook.do_after_response(addr, cmd, response)
        return response

    # -- lifecycle ------------------------------------------------------------------------

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise MQClientError(f"cannot call RemotingClient.{what}(): the client is closed")

    async def close(self) -> None:
        """Close every channel and wait for them. Idempotent."""
        if self._closed:
            return
        self._closed = True
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            channel.close()
        for channel in channels:
            await channel.wait_closed()

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        if self._used and not self._closed:
            _warn("unclosed RemotingClient", ResourceWarning, source=self)
