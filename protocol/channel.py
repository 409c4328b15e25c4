"""Channel: one remoting connection on asyncio, both directions (the one I/O module of protocol/).

Contract (upstream ``NettyRemotingAbstract`` + ``ResponseFuture``; docs/PROTOCOL.md 1, 2.1):

* Reading: ``data_received`` feeds a ``FrameDecoder`` and drains every whole frame.
  Responses (flag bit 0) complete the pending entry of their opaque; an unmatched one is
  logged (``remoting.response_unmatched``, a warning) and dropped, except the answer to a
  request its caller cancelled (a consumer's pull at shutdown), which is expected and
  logged at debug (``remoting.response_abandoned``; the last 1024 such opaques are kept). Requests go through the processor
  table (docs/ARCHITECTURE.md "Processor contract"): a plain handler runs inline, a
  coroutine result gets one task owned by the channel, an ``asyncio.Future`` result is
  answered by its done callback (no task; one cancelled is not answered), ``None`` means
  the handler answers later with ``send_response``; oneway requests are never answered.
* A ``ProtocolError`` from the decoder closes the connection (no response), as upstream's
  ``NettyDecoder`` does.
* Writing: frames are queued as ``encode_parts()`` pieces and flushed with one
  ``transport.writelines`` per loop iteration, so the responses to one read batch leave
  together. With ``eager_requests`` (clients: the peer is another process), a request
  that expects an answer (``invoke``, ``invoke_async``) is instead written at once when
  the transport holds nothing unsent, so the peer starts on it while we still prepare the
  next ones (the two processes pipeline instead of taking turns); oneway requests and
  responses stay coalesced. The transport's write watermarks gate ``invoke*`` (and, on
  servers, reading).
* Timeouts: a sync ``invoke`` is expired by a timer shared with the other sync requests
  whose deadlines fall in the same 1/128 s slot (one timer per slot, not per request: the
  timeout fires once, at most one slot after the deadline, as ``RemotingTimeoutError``);
  ``invoke_async`` entries are expired by a periodic scan like upstream
  ``scanResponseTable`` (deadline + 1 s, every second), which also closes idle channels.
* Permits: async and oneway invocations take a permit from a ``Permits`` pool (upstream
  ``semaphoreAsync`` / ``semaphoreOneway``), shared by every channel of one client or server.
* ``close()`` / ``abort()`` are idempotent: every pending request fails with
  ``ConnectionClosedError`` naming the peer (cause chained), permits are released, handler
  tasks are cancelled (``wait_closed()`` awaits them) and ``on_close(channel, exc)`` runs once.
* Observing (optional, servers' metrics and slow-request log): an ``observer`` sees each
  dispatched request start (``request_started`` returns its start mark) and finish once
  (``request_finished`` with the response just queued, or ``None`` when nothing was
  written: oneway, or kept for a later ``send_response``), and each ``send_response``
  (``late_response``). Without one, dispatch pays a single ``is None`` test.
* Arrival (servers' flow control): with a ``ReceiveClock``, ``received_at`` is the
  ``time.perf_counter()`` at which the reads of the current event-loop iteration began,
  stamped once per iteration for every channel sharing the clock (one ``call_soon`` per
  iteration clears it), and read by a handler as its request's arrival: a request read late
  in a long iteration (many connections, large batches) has waited since the iteration
  started. The broker's send path answers SYSTEM_BUSY from it (server/broker/processors/send.py).
  Without a clock ``received_at`` stays ``inf`` (nothing waited).
"""

# ASYNC109: ``timeout`` is the request's budget, handed to one per-request timer inside the
# channel (docs/STYLE.md 3), which is exactly what that rule asks callers to do.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import collections
import functools
import os
import socket
import ssl as ssl_module
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeAlias, cast

from aiorocketmq.logs import get_logger

from .codes import ResponseCode, RpcFlag
from .command import RemotingCommand
from .errors import (
    ConnectionClosedError,
    HeaderError,
    ProtocolError,
    RemotingConnectError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from .frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder
from .tls import TLS_SHUTDOWN_TIMEOUT

__all__ = [
    "Channel",
    "Handler",
    "ReceiveClock",
    "InvokeCallback",
    "Permits",
    "RequestHook",
    "RequestObserver",
    "ResponseFuture",
    "CLIENT_ASYNC_PERMITS",
    "CLIENT_ONEWAY_PERMITS",
    "SERVER_ASYNC_PERMITS",
    "SERVER_ONEWAY_PERMITS",
    "DEFAULT_IDLE_TIMEOUT",
]

log = get_logger("aiorocketmq.remoting")

# Upstream NettySystemConfig / NettyServerConfig defaults.
CLIENT_ASYNC_PERMITS = 65535  # clientAsyncSemaphoreValue
CLIENT_ONEWAY_PERMITS = 65535  # clientOnewaySemaphoreValue
SERVER_ASYNC_PERMITS = 64  # serverAsyncSemaphoreValue
SERVER_ONEWAY_PERMITS = 256  # serverOnewaySemaphoreValue
DEFAULT_IDLE_TIMEOUT = 120.0  # client/serverChannelMaxIdleTimeSeconds (all-idle)
SCAN_INTERVAL = 1.0  # NettyRemotingClient/Server: scanResponseTable every 1000 ms
SCAN_GRACE = 1.0  # scanResponseTable: beginTimestamp + timeoutMillis + 1000 <= now
# Netty's defaults when writeBufferHigh/LowWaterMark are 0 are 64/32 KiB; a broker streams
# pull bodies of up to a few MiB, so the pause point sits higher to keep writes batched.
DEFAULT_WRITE_HIGH_WATER = 4 * 1024 * 1024
DEFAULT_WRITE_LOW_WATER = 1024 * 1024
_FLUSH_AT = 256 * 1024  # queued bytes that trigger a flush before the end of the iteration
# Sync deadlines are rounded up to 1/128 s slots (exact in binary floating point), and each
# slot has one timer: a per-request timer costs a timer handle created and cancelled per call.
_SLOTS_PER_SECOND = 128
_ABANDONED_KEPT = 1024  # opaques of cancelled requests remembered per channel


_perf = time.perf_counter


def _note_abandoned(abandoned: dict[int, None], opaque: int) -> None:
    abandoned[opaque] = None
    if len(abandoned) > _ABANDONED_KEPT:
        del abandoned[next(iter(abandoned))]

_RESPONSE = int(RpcFlag.RESPONSE)
_ONEWAY = int(RpcFlag.ONEWAY)
_SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)
_NOT_SUPPORTED = int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)

Handler: TypeAlias = Callable[
    ["Channel", RemotingCommand],
    "RemotingCommand | None | Awaitable[RemotingCommand | None]",
]
# Runs before a request's handler (upstream server RPCHook.doBeforeRequest, e.g. the broker's
# ACL check): None lets the request through, a response refuses it and is sent instead.
RequestHook: TypeAlias = Callable[["Channel", RemotingCommand], "RemotingCommand | None"]
OpenCallback: TypeAlias = Callable[["Channel"], None]
CloseCallback: TypeAlias = Callable[["Channel", "BaseException | None"], None]
InvokeCallback: TypeAlias = Callable[["ResponseFuture"], None]


class RequestObserver(Protocol):
    """Watches the requests a channel dispatches (see the module docstring, "Observing")."""

    def request_started(self, channel: Channel, request: RemotingCommand) -> float: ...

    def request_finished(self, channel: Channel, request: RemotingCommand,
                         response: RemotingCommand | None, started: float) -> None: ...

    def late_response(self, channel: Channel, response: RemotingCommand) -> None: ...


class Permits:
    """A counting semaphore whose ``acquire`` waits at most ``timeout`` and reports why not.

    Upstream's ``Semaphore.tryAcquire(timeout)``; ``waiting`` and ``available`` feed the
    "waiting thread nums ... semaphoreAsyncValue" error text. FIFO: a released permit goes
    to the oldest waiter, so a burst of callers cannot starve an early one.
    """

    __slots__ = ("_value", "_waiters", "limit")

    def __init__(self, value: int) -> None:
        if value < 1:
            raise ValueError(f"permits must be positive, got {value}")
        self.limit = value
        self._value = value
        self._waiters: collections.deque[asyncio.Future[bool]] = collections.deque()

    @property
    def available(self) -> int:
        return self._value

    @property
    def waiting(self) -> int:
        return sum(1 for w in self._waiters if not w.done())

    def try_acquire_nowait(self) -> bool:
        if self._value > 0 and not self._waiters:
            self._value -= 1
            return True
        return False

    async def acquire(self, timeout: float) -> bool:
        """Take one permit, waiting at most ``timeout`` seconds; ``False`` if none came.

        Cancelling the caller while it waits gives back a permit it was just handed.
        """
        if self._value > 0 and not self._waiters:
            self._value -= 1
            return True
        if timeout <= 0:
            return False
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(timeout, _resolve_false, waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.result():
                self.release()
            raise
        finally:
            timer.cancel()
            try:
                self._waiters.remove(waiter)
            except ValueError:
                pass

    def release(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(True)  # the permit passes straight to the waiter
                return
        self._value += 1


class ReceiveClock:
    """When the reads of the current event-loop iteration began (module docstring, "Arrival").

    Shared by the channels of one server on one loop: the first ``arrival`` of an iteration
    takes ``time.perf_counter()`` and schedules its own reset with one ``call_soon``, which
    runs after every read callback of that iteration; later arrivals return the same stamp.
    """

    __slots__ = ("_stamp", "_clear")

    def __init__(self) -> None:
        self._stamp = -1.0
        self._clear = self._reset  # bound once: no method object per iteration

    def arrival(self, loop: asyncio.AbstractEventLoop) -> float:
        stamp = self._stamp
        if stamp < 0.0:
            stamp = self._stamp = _perf()
            loop.call_soon(self._clear)
        return stamp

    def _reset(self) -> None:
        self._stamp = -1.0


def _resolve_false(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


class ResponseFuture:
    """A pending request: the opaque-table entry and what an ``invoke_async`` callback sees.

    Upstream ``ResponseFuture``. ``future`` completes exactly once (response, timeout,
    connection closed, or cancelled by the caller); that completion removes the entry from
    the table, releases its permit and runs its callback, each once. A sync ``invoke``
    builds its entry with ``watch=False`` and does that cleanup itself when its await ends
    (no done-callback per request).
    """

    __slots__ = (
        "opaque",
        "request_code",
        "timeout",
        "deadline",
        "future",
        "callback",
        "_permits",
        "_slot",
        "_table",
        "_abandoned",
    )

    def __init__(
        self,
        opaque: int,
        request_code: int,
        timeout: float,
        deadline: float,
        future: asyncio.Future[RemotingCommand],
        table: dict[int, ResponseFuture],
        permits: Permits | None = None,
        callback: InvokeCallback | None = None,
        *,
        watch: bool = True,
        abandoned: dict[int, None] | None = None,
    ) -> None:
        self.opaque = opaque
        self.request_code = request_code
        self.timeout = timeout
        self.deadline = deadline
        self.future = future
        self.callback = callback
        self._permits = permits
        self._slot: dict[int, ResponseFuture] | None = None  # a sync request's timeout slot
        self._table = table
        self._abandoned = abandoned
        if watch:
            future.add_done_callback(self._on_done)

    @property
    def response(self) -> RemotingCommand | None:
        """The response, or ``None`` if the request failed or is still pending."""
        f = self.future
        if f.done() and not f.cancelled() and f.exception() is None:
            return f.result()
        return None

    @property
    def cause(self) -> BaseException | None:
        """Why the request failed (``None`` on success or while pending)."""
        f = self.future
        if not f.done():
            return None
        if f.cancelled():
            return asyncio.CancelledError()
        return f.exception()

    @property
    def is_timeout(self) -> bool:
        return isinstance(self.cause, RemotingTimeoutError)

    def _on_done(self, fut: asyncio.Future[RemotingCommand]) -> None:
        table = self._table
        if table.get(self.opaque) is self:
            del table[self.opaque]
            if fut.cancelled() and self._abandoned is not None:
                _note_abandoned(self._abandoned, self.opaque)
        permits = self._permits
        if permits is not None:
            self._permits = None
            permits.release()
        callback = self.callback
        if callback is not None:
            if not fut.cancelled():
                fut.exception()  # the callback is the consumer: no "never retrieved" noise
            try:
                callback(self)
            except Exception:
                log.exception("remoting.callback_failed", opaque=self.opaque,
                              code=self.request_code)

    def __repr__(self) -> str:
        return (f"ResponseFuture(opaque={self.opaque} code={self.request_code} "
                f"timeout={self.timeout}s done={self.future.done()})")


class Channel(asyncio.Protocol):
    """One remoting connection; sends and answers requests in both directions.

    Args:
        processors: request code -> handler (read live, so an owner may add entries later).
        default_handler: used for codes missing from ``processors`` (upstream
            ``defaultRequestProcessor``); without one, unknown codes get
            ``REQUEST_CODE_NOT_SUPPORTED``.
        on_open / on_close: owner callbacks; ``on_close(channel, exc_or_None)`` runs once.
        async_permits / oneway_permits: a shared ``Permits`` pool or a size for a private one.
        idle_timeout: seconds without traffic either way before the channel closes itself.
        scan_interval: how often timed-out async requests and idleness are checked.
        read_backpressure: stop reading while the peer does not drain our writes (servers:
            a client that pipelines requests without reading answers cannot grow our buffers).
        eager_requests: write each answered request at once while the transport has
            nothing unsent (module docstring, "Writing"). Pays when the peer runs in
            another process: with 16 sync sends in flight to a broker it lifts throughput
            from ~10k to ~18k msg/s on 2 cores. Costs a send syscall per request, so it is
            off by default (client and server in one event loop gain nothing from it).
        observer: optional ``RequestObserver`` (metrics, slow-request log).
        request_hook: optional ``RequestHook`` run before each request's handler (servers:
            the broker's ACL check); its response, if any, answers the request instead.
        receive_clock: optional ``ReceiveClock`` (servers): stamps ``received_at`` once per
            loop iteration (module docstring, "Arrival").
    """

    __slots__ = (
        "_processors",
        "default_handler",
        "_on_open",
        "_on_close",
        "_async_permits",
        "_oneway_permits",
        "idle_timeout",
        "_scan_interval",
        "_read_backpressure",
        "_eager",
        "_write_limits",
        "_decoder",
        "_loop",
        "_transport",
        "remote_addr",
        "local_addr",
        "attrs",
        "_pending",
        "_abandoned",
        "_slots",
        "_slot_timers",
        "_tasks",
        "_wbuf",
        "_wrelease",
        "_wbuf_size",
        "_flush_scheduled",
        "_writable",
        "_last_activity",
        "_scan_handle",
        "_closing",
        "_close_exc",
        "_lost",
        "_observer",
        "_request_hook",
        "_receive_clock",
        "received_at",
    )

    def __init__(
        self,
        processors: Mapping[int, Handler] | None = None,
        *,
        default_handler: Handler | None = None,
        on_open: OpenCallback | None = None,
        on_close: CloseCallback | None = None,
        async_permits: Permits | int = CLIENT_ASYNC_PERMITS,
        oneway_permits: Permits | int = CLIENT_ONEWAY_PERMITS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        scan_interval: float = SCAN_INTERVAL,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        read_backpressure: bool = False,
        eager_requests: bool = False,
        write_high_water: int = DEFAULT_WRITE_HIGH_WATER,
        write_low_water: int = DEFAULT_WRITE_LOW_WATER,
        observer: RequestObserver | None = None,
        request_hook: RequestHook | None = None,
        receive_clock: ReceiveClock | None = None,
    ) -> None:
        self._processors: Mapping[int, Handler] = processors if processors is not None else {}
        self.default_handler = default_handler
        self._on_open = on_open
        self._on_close = on_close
        self._async_permits = (
            async_permits if isinstance(async_permits, Permits) else Permits(async_permits)
        )
        self._oneway_permits = (
            oneway_permits if isinstance(oneway_permits, Permits) else Permits(oneway_permits)
        )
        self.idle_timeout = idle_timeout
        self._scan_interval = scan_interval
        self._read_backpressure = read_backpressure
        self._eager = eager_requests
        self._write_limits = (write_high_water, write_low_water)
        self._decoder = FrameDecoder(max_frame_length)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._transport: asyncio.Transport | None = None
        self.remote_addr = "?"
        self.local_addr = "?"
        self.attrs: dict[str, Any] = {}  # owner data, e.g. a broker's client id for this peer
        self._pending: dict[int, ResponseFuture] = {}
        self._abandoned: dict[int, None] = {}  # opaques of requests their callers cancelled
        # slot number -> sync entries expiring at its end, and that slot's one timer
        self._slots: dict[int, dict[int, ResponseFuture]] = {}
        self._slot_timers: dict[int, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._wbuf: list[bytes | bytearray | memoryview] = []
        self._wrelease: list[Permits] = []
        self._wbuf_size = 0
        self._flush_scheduled = False
        self._writable = asyncio.Event()
        self._writable.set()
        self._last_activity = 0.0
        self._scan_handle: asyncio.TimerHandle | None = None
        self._closing = False
        self._close_exc: BaseException | None = None
        self._lost: asyncio.Future[None] | None = None
        self._observer = observer
        self._request_hook = request_hook
        self._receive_clock = receive_clock
        # perf_counter() when the requests now being dispatched were read (servers with a
        # receive clock); inf otherwise: nothing reads it, and nothing counts as waiting.
        self.received_at = float("inf")

    # -- construction ---------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        processors: Mapping[int, Handler] | None = None,
        timeout: float = 3.0,
        ssl: ssl_module.SSLContext | None = None,
        **opts: Any,
    ) -> Channel:
        """Open a client connection to ``host:port`` (upstream connectTimeoutMillis = 3 s).

        ``ssl``: a client context for a TLS connection (the handshake counts in ``timeout``).
        ``opts`` are the keyword options of ``Channel(...)``; a misspelt one is a TypeError.

        Raises:
            RemotingConnectError: refused, unreachable, or not connected within ``timeout``.
        """
        loop = asyncio.get_running_loop()
        channel = cls(processors, **opts)
        try:
            async with asyncio.timeout(timeout):
                if ssl is None:
                    await loop.create_connection(lambda: channel, host, port)
                else:
                    await loop.create_connection(lambda: channel, host, port, ssl=ssl,
                                                 server_hostname=host,
                                                 ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            reason = f"no connection within {timeout}s" if isinstance(exc, TimeoutError) else exc
            raise RemotingConnectError(f"connect to {host}:{port} failed: {reason}") from exc
        return channel

    # -- state ----------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        """Connected and not closing (upstream ``ChannelWrapper.isOK``)."""
        return self._transport is not None and not self._closing

    @property
    def is_closed(self) -> bool:
        return self._closing

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    @property
    def handler_tasks(self) -> frozenset[asyncio.Task[None]]:
        """Tasks of coroutine handlers still running (a server drains them before closing)."""
        return frozenset(self._tasks)

    def __repr__(self) -> str:
        state = "closed" if self._closing else ("open" if self._transport else "new")
        return f"<Channel {self.local_addr}->{self.remote_addr} {state} pending={len(self._pending)}>"

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        tr = cast(asyncio.Transport, transport)
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._transport = tr
        self._lost = loop.create_future()
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass  # already-closed socket; connection_lost follows
        self.remote_addr = _format_addr(transport.get_extra_info("peername"))
        self.local_addr = _format_addr(transport.get_extra_info("sockname"))
        high, low = self._write_limits
        tr.set_write_buffer_limits(high=high, low=low)
        self._last_activity = loop.time()
        self._scan_handle = loop.call_later(self._scan_interval, self._scan)
        if self._on_open is not None:
            self._on_open(self)

    def data_received(self, data: bytes) -> None:
        loop = self._loop
        assert loop is not None
        self._last_activity = loop.time()
        clock = self._receive_clock
        if clock is not None:
            self.received_at = clock.arrival(loop)
        decoder = self._decoder
        try:
            decoder.feed(data)
        except ProtocolError as exc:
            self._on_protocol_error(exc)
            return
        next_command = decoder.next_command
        on_response = self._on_response
        on_request = self._on_request
        while not self._closing:
            try:
                cmd = next_command()
            except ProtocolError as exc:
                self._on_protocol_error(exc)
                return
            if cmd is None:
                return
            if cmd.flag & _RESPONSE:
                on_response(cmd)
            else:
                on_request(cmd)

    def eof_received(self) -> bool | None:
        return None  # let the transport close; connection_lost fails what is pending

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        lost = self._lost
        if lost is not None and not lost.done():
            lost.set_result(None)
        if not self._closing:
            cause = exc if exc is not None else ConnectionResetError("closed by peer")
            self._shutdown(cause, f"connection to {self.remote_addr} lost")

    def pause_writing(self) -> None:
        self._writable.clear()
        if self._read_backpressure and self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._writable.set()
        if self._read_backpressure and self._transport is not None and not self._closing:
            self._transport.resume_reading()

    # -- inbound --------------------------------------------------------------------------

    def _on_response(self, cmd: RemotingCommand) -> None:
        entry = self._pending.pop(cmd.opaque, None)
        if entry is None:
            abandoned = self._abandoned
            if cmd.opaque in abandoned:
                del abandoned[cmd.opaque]
                log.debug("remoting.response_abandoned", peer=self.remote_addr,
                          opaque=cmd.opaque, code=cmd.code)
            else:
                log.warning("remoting.response_unmatched", peer=self.remote_addr,
                            opaque=cmd.opaque, code=cmd.code)
            return
        fut = entry.future
        if not fut.done():
            fut.set_result(cmd)

    def _on_request(self, request: RemotingCommand) -> None:
        observer = self._observer
        started = 0.0 if observer is None else observer.request_started(self, request)
        handler = self._processors.get(request.code) or self.default_handler
        if handler is None:
            log.error("remoting.request_code_not_supported", peer=self.remote_addr,
                      code=request.code, opaque=request.opaque)
            self._reply(request, request.create_response(
                _NOT_SUPPORTED, f" request type {request.code} not supported"), started)
            return
        hook = self._request_hook
        try:
            if hook is not None:
                refusal = hook(self, request)
                if refusal is not None:
                    self._reply(request, refusal, started)
                    return
            result = handler(self, request)
        except Exception as exc:
            self._handler_failed(request, exc, started)
            return
        if result is None or isinstance(result, RemotingCommand):
            self._reply(request, result, started)
            return
        if isinstance(result, asyncio.Future):
            # A future needs no task: its callback answers (a SYNC_MASTER send waiting for
            # its slave's acknowledgement is one).
            result.add_done_callback(functools.partial(self._future_done, request, started))
            return
        task = self._loop.create_task(self._handler_routine(request, result, started))  # type: ignore[union-attr]
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._handler_done, result))

    def _handler_done(self, result: Awaitable[RemotingCommand | None],
                      task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled() and asyncio.iscoroutine(result):
            # Cancelled before its first step (the connection closed in the same read, e.g.
            # a request followed by a malformed frame): the handler's coroutine never ran.
            # Closing it ends it without Python's "coroutine ... was never awaited".
            result.close()

    def _future_done(self, request: RemotingCommand, started: float,
                     fut: asyncio.Future[RemotingCommand | None]) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            if isinstance(exc, Exception):
                self._handler_failed(request, exc, started)
            return
        self._reply(request, fut.result(), started)

    async def _handler_routine(
        self, request: RemotingCommand, result: Awaitable[RemotingCommand | None],
        started: float,
    ) -> None:
        try:
            response = await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._handler_failed(request, exc, started)
            return
        self._reply(request, response, started)

    def _reply(self, request: RemotingCommand, response: RemotingCommand | None,
               started: float) -> None:
        if response is not None and not request.flag & _ONEWAY:
            # As upstream's RemotingResponseCallback: the request's opaque and serialize type.
            response.opaque = request.opaque
            response.flag |= _RESPONSE
            response.serialize_type = request.serialize_type
            self._write_response(response)
        else:
            response = None
        observer = self._observer
        if observer is not None:
            observer.request_finished(self, request, response, started)

    def _handler_failed(self, request: RemotingCommand, exc: Exception, started: float) -> None:
        if isinstance(exc, HeaderError):
            remark = str(exc)
            log.warning("remoting.bad_request_header", peer=self.remote_addr, code=request.code,
                        opaque=request.opaque, reason=remark)
        else:
            remark = _simple_desc(exc)
            log.error("remoting.handler_failed", peer=self.remote_addr, code=request.code,
                      opaque=request.opaque, exc_info=exc)
        self._reply(request, request.create_response(_SYSTEM_ERROR, remark), started)

    def _on_protocol_error(self, exc: ProtocolError) -> None:
        log.warning("remoting.protocol_error", peer=self.remote_addr, reason=str(exc))
        self._shutdown(exc, f"connection to {self.remote_addr} closed: malformed frame")

    # -- outbound -------------------------------------------------------------------------

    def send_response(self, response: RemotingCommand) -> bool:
        """Write a response built earlier with ``request.create_response`` (held requests).

        Returns ``False`` (and drops it) if the channel is already closed.
        """
        if self._closing:
            log.info("remoting.response_dropped", peer=self.remote_addr, opaque=response.opaque,
                     code=response.code)
            return False
        response.flag |= _RESPONSE
        self._write_response(response)
        observer = self._observer
        if observer is not None:
            observer.late_response(self, response)
        return True

    def _write_response(self, response: RemotingCommand) -> None:
        if self._closing:
            return
        try:
            head, body = response.encode_parts()
        except Exception as exc:  # e.g. a header over 16 MiB: answer, never kill the reader
            log.error("remoting.response_encode_failed", peer=self.remote_addr,
                      code=response.code, opaque=response.opaque, exc_info=exc)
            head, body = RemotingCommand(
                _SYSTEM_ERROR, opaque=response.opaque, flag=_RESPONSE,
                remark=f"response could not be encoded: {exc}",
                serialize_type=response.serialize_type).encode_parts()
        self._queue(head, body)

    def _write(self, cmd: RemotingCommand) -> None:
        head, body = cmd.encode_parts()
        self._queue(head, body)

    def _queue(self, head: bytes, body: bytes | bytearray | memoryview | None) -> None:
        wbuf = self._wbuf
        wbuf.append(head)
        size = self._wbuf_size + len(head)
        if body is not None:
            wbuf.append(body)
            size += len(body)
        self._wbuf_size = size
        if size >= _FLUSH_AT:
            # A caller sending in a loop without yielding would otherwise buffer without
            # bound here; handing the batch over now lets the transport's watermarks
            # pause it (invoke* then wait for resume_writing).
            self._flush_now()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)  # type: ignore[union-attr]

    def _queue_eager(self, head: bytes, body: bytes | bytearray | memoryview | None) -> None:
        transport = self._transport
        if transport is None or transport.get_write_buffer_size():
            # The kernel is not taking our bytes as fast as we make them: an immediate
            # write would only append to the transport's buffer, so coalesce as usual.
            self._queue(head, body)
            return
        wbuf = self._wbuf
        wbuf.append(head)
        if body is not None:
            wbuf.append(body)
        # Anything queued before this frame leaves with it, in order; a flush still
        # scheduled for the iteration then finds an empty buffer.
        self._flush_now()

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._flush_now()

    def _flush_now(self) -> None:
        transport = self._transport
        buf = self._wbuf
        if buf:
            self._wbuf = []
            self._wbuf_size = 0
            if transport is not None and not self._closing:
                transport.writelines(buf)
                self._last_activity = self._loop.time()  # type: ignore[union-attr]
        release = self._wrelease
        if release:
            self._wrelease = []
            for permits in release:
                permits.release()

    async def _wait_writable(self, deadline: float, cmd: RemotingCommand) -> None:
        loop = self._loop
        assert loop is not None
        remaining = deadline - loop.time()
        try:
            async with asyncio.timeout(remaining if remaining > 0 else 0):
                await self._writable.wait()
        except TimeoutError:
            raise RemotingTimeoutError(
                f"write to {self.remote_addr} still paused (peer not reading) after the "
                f"request's timeout, code={cmd.code} opaque={cmd.opaque}") from None
        self._check_open(cmd)

    def _check_open(self, cmd: RemotingCommand) -> None:
        if self._closing or self._transport is None:
            err = ConnectionClosedError(
                f"connection to {self.remote_addr} is closed; cannot send request "
                f"code={cmd.code} opaque={cmd.opaque}")
            err.__cause__ = self._close_exc
            raise err

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request and wait for its response (upstream ``invokeSyncImpl``).

        Args:
            timeout: seconds for the whole call (waiting for a paused write included).

        Raises:
            RemotingTimeoutError: no response within ``timeout`` (also a TimeoutError).
            ConnectionClosedError: the connection is or became closed.

        Cancelling the call forgets the request; a late response is dropped (debug log).
        """
        self._check_open(cmd)
        loop = self._loop
        assert loop is not None
        deadline = loop.time() + timeout
        if not self._writable.is_set():
            await self._wait_writable(deadline, cmd)
        cmd.flag &= ~_RESPONSE
        head, body = cmd.encode_parts()  # before registering: an encode error leaves no entry
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        opaque = cmd.opaque
        entry = ResponseFuture(opaque, cmd.code, timeout, deadline, fut, self._pending,
                               watch=False)
        number = -int(-deadline * _SLOTS_PER_SECOND // 1)  # ceil: never before the deadline
        slot = self._slots.get(number)
        if slot is None:
            slot = self._slots[number] = {}
            self._slot_timers[number] = loop.call_at(number / _SLOTS_PER_SECOND,
                                                     self._expire_slot, number)
        slot[opaque] = entry
        entry._slot = slot
        self._register(entry)
        if self._eager:
            self._queue_eager(head, body)
        else:
            self._queue(head, body)
        try:
            return await fut
        finally:
            # Answered, expired, failed by close, or cancelled: forget the entry either way.
            if slot.get(opaque) is entry:
                del slot[opaque]
            pending = self._pending
            if pending.get(opaque) is entry:
                del pending[opaque]
                if fut.cancelled():
                    _note_abandoned(self._abandoned, opaque)

    def _expire_slot(self, number: int) -> None:
        self._slot_timers.pop(number, None)
        slot = self._slots.pop(number, None)
        if slot:
            for entry in list(slot.values()):
                self._expire(entry)

    def _register(self, entry: ResponseFuture) -> None:
        pending = self._pending
        old = pending.get(entry.opaque)
        if old is not None and not old.future.done():
            # Opaques come from one process-wide counter; a clash means a caller re-sent a
            # command object. The older waiter would never be answered: fail it clearly.
            old.future.set_exception(ConnectionClosedError(
                f"request opaque={entry.opaque} to {self.remote_addr} was superseded by "
                f"a new request with the same opaque"))
        pending[entry.opaque] = entry

    def _expire(self, entry: ResponseFuture) -> None:
        pending = self._pending
        if pending.get(entry.opaque) is entry:
            del pending[entry.opaque]
        fut = entry.future
        if not fut.done():
            fut.set_exception(RemotingTimeoutError(
                f"wait response on the channel <{self.remote_addr}> timeout, "
                f"{int(entry.timeout * 1000)}ms, request code={entry.request_code} "
                f"opaque={entry.opaque}"))

    async def invoke_async(
        self,
        cmd: RemotingCommand,
        timeout: float,
        callback: InvokeCallback | None = None,
    ) -> asyncio.Future[RemotingCommand]:
        """Send a request; return the future of its response (upstream ``invokeAsyncImpl``).

        Awaiting this call waits (at most ``timeout``) for an async permit and a writable
        transport; the returned future then completes with the response, or fails with
        ``RemotingTimeoutError`` once the periodic scan finds it past ``timeout`` + 1 s, or
        with ``ConnectionClosedError``. ``callback(response_future)`` runs exactly once when
        the request completes in any way; the permit is released at that moment.
        Cancelling the returned future abandons the request (callback and release still run;
        a late response is dropped with a debug log).

        Raises:
            RemotingTooMuchRequestError: no permit within ``timeout``.
            ConnectionClosedError: the channel is closed.
        """
        self._check_open(cmd)
        loop = self._loop
        assert loop is not None
        begin = loop.time()
        deadline = begin + timeout
        permits = self._async_permits
        if not permits.try_acquire_nowait() and not await permits.acquire(timeout):
            raise self._too_much("invokeAsyncImpl", "semaphoreAsyncValue", timeout, permits)
        try:
            if loop.time() >= deadline:
                raise RemotingTimeoutError(
                    f"invokeAsyncImpl call timeout: permit for code={cmd.code} "
                    f"opaque={cmd.opaque} to {self.remote_addr} took longer than {timeout}s")
            if not self._writable.is_set():
                await self._wait_writable(deadline, cmd)
            else:
                self._check_open(cmd)
            cmd.flag &= ~_RESPONSE
            head, body = cmd.encode_parts()
        except BaseException:
            permits.release()
            raise
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        entry = ResponseFuture(cmd.opaque, cmd.code, timeout, deadline, fut, self._pending,
                               permits, callback, abandoned=self._abandoned)
        self._register(entry)
        if self._eager:
            self._queue_eager(head, body)
        else:
            self._queue(head, body)
        return fut

    async def invoke_oneway(self, cmd: RemotingCommand, timeout: float) -> None:
        """Send a request that gets no response (upstream ``invokeOnewayImpl``).

        Sets the oneway flag. Waits at most ``timeout`` for a oneway permit, which is
        released when the frame is handed to the transport.

        Raises:
            RemotingTooMuchRequestError: no permit within ``timeout``.
            ConnectionClosedError: the channel is closed.
        """
        self._check_open(cmd)
        loop = self._loop
        assert loop is not None
        deadline = loop.time() + timeout
        cmd.flag = (cmd.flag | _ONEWAY) & ~_RESPONSE
        permits = self._oneway_permits
        if not permits.try_acquire_nowait() and not await permits.acquire(timeout):
            raise self._too_much("invokeOnewayImpl", "semaphoreOnewayValue", timeout, permits)
        try:
            if not self._writable.is_set():
                await self._wait_writable(deadline, cmd)
            else:
                self._check_open(cmd)
            head, body = cmd.encode_parts()
        except BaseException:
            permits.release()
            raise
        self._wrelease.append(permits)  # before queueing: an early flush releases it
        self._queue(head, body)

    def _too_much(self, where: str, what: str, timeout: float,
                  permits: Permits) -> RemotingTooMuchRequestError:
        if timeout <= 0:
            return RemotingTooMuchRequestError(f"{where} invoke too fast")
        info = (f"{where} tryAcquire semaphore timeout, {int(timeout * 1000)}ms, "
                f"waiting thread nums: {permits.waiting} {what}: {permits.available}")
        log.warning("remoting.too_much_request", peer=self.remote_addr, info=info)
        return RemotingTooMuchRequestError(info)

    # -- timers ---------------------------------------------------------------------------

    def _scan(self) -> None:
        self._scan_handle = None
        if self._closing:
            return
        loop = self._loop
        assert loop is not None
        now = loop.time()
        if now - self._last_activity >= self.idle_timeout:
            log.info("remoting.idle_close", peer=self.remote_addr, idle_timeout=self.idle_timeout)
            self._shutdown(
                ConnectionClosedError(f"connection to {self.remote_addr} idle for "
                                      f"{self.idle_timeout}s"),
                f"connection to {self.remote_addr} closed after {self.idle_timeout}s idle")
            return
        pending = self._pending
        if pending:
            limit = now - SCAN_GRACE
            expired = [e for e in pending.values() if e._slot is None and e.deadline <= limit]
            for entry in expired:
                log.warning("remoting.request_timeout", peer=self.remote_addr,
                            opaque=entry.opaque, code=entry.request_code, timeout=entry.timeout)
                self._expire(entry)
        self._scan_handle = loop.call_later(self._scan_interval, self._scan)

    # -- closing --------------------------------------------------------------------------

    def close(self) -> None:
        """Close gracefully: queued frames are still written. Idempotent."""
        if self._closing:
            return
        self._shutdown(None, f"connection to {self.remote_addr} closed locally")

    def abort(self, exc: BaseException | None = None) -> None:
        """Close at once, dropping unsent frames. Idempotent."""
        if self._closing:
            return
        self._wbuf = []
        self._wbuf_size = 0
        self._shutdown(exc, f"connection to {self.remote_addr} aborted", abort=True)

    async def wait_closed(self) -> None:
        """Wait until handler tasks have finished and the socket is closed."""
        tasks = list(self._tasks)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        lost = self._lost
        if lost is not None:
            await asyncio.shield(lost)

    def _shutdown(self, exc: BaseException | None, reason: str, *, abort: bool = False) -> None:
        self._closing = True
        self._close_exc = exc
        if self._scan_handle is not None:
            self._scan_handle.cancel()
            self._scan_handle = None
        if self._slot_timers:
            for timer in self._slot_timers.values():
                timer.cancel()
            self._slot_timers.clear()
            self._slots.clear()
        transport = self._transport
        if transport is not None:
            if self._wbuf and not abort:
                transport.writelines(self._wbuf)
            self._wbuf = []
            self._wbuf_size = 0
            if abort:
                transport.abort()
            else:
                transport.close()
        self._writable.set()  # wake writers so they observe the closed state
        release = self._wrelease
        self._wrelease = []
        for permits in release:
            permits.release()
        pending = self._pending
        if pending:
            entries = list(pending.values())
            pending.clear()
            for entry in entries:
                fut = entry.future
                if not fut.done():
                    err = ConnectionClosedError(
                        f"{reason} with request code={entry.request_code} "
                        f"opaque={entry.opaque} pending")
                    err.__cause__ = exc
                    fut.set_exception(err)
        for task in self._tasks:
            task.cancel()
        if transport is None and self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        on_close = self._on_close
        if on_close is not None:
            self._on_close = None
            try:
                on_close(self, exc)
            except Exception:
                log.exception("remoting.on_close_failed", peer=self.remote_addr)


def _format_addr(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return "?" if addr is None else str(addr)


def _simple_desc(exc: BaseException) -> str:
    """Upstream ``RemotingHelper.exceptionSimpleDesc``: the exception and where it arose."""
    desc = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    tb = exc.__traceback__
    if tb is None:
        return desc
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return f"{desc}, {code.co_name}({os.path.basename(code.co_filename)}:{tb.tb_lineno})"
