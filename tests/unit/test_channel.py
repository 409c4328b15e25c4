"""Channel, RemotingServer and RemotingClient over real 127.0.0.1 sockets.

Fast enough to count as unit tests. Nothing sleeps: tests wait on futures and events, or
poll a condition under a deadline.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol.channel import Channel, Permits, ResponseFuture
from aiorocketmq.protocol.codes import RequestCode, ResponseCode, SerializeType
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import (
    ConnectionClosedError,
    HeaderError,
    MQClientError,
    RemotingConnectError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from aiorocketmq.protocol.frame import FrameDecoder
from aiorocketmq.protocol.remoting_client import RemotingClient, parse_namesrv_addr
from aiorocketmq.protocol.remoting_server import RemotingServer
from tests.logs import capture_logs

pytestmark = pytest.mark.timeout(30)

ECHO = 9001  # request codes private to these tests
HOLD = 9002
RAISE = 9003
BAD_HEADER = 9004
ASYNC_ECHO = 9005
CLOSE = 9006
ONEWAY_SINK = 9007

BOTH_TYPES = pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ])


def echo(channel: Channel, request: RemotingCommand) -> RemotingCommand:
    return request.create_response(ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields or {}),
                                   body=request.body)


def raising(channel: Channel, request: RemotingCommand) -> RemotingCommand:
    raise RuntimeError("boom")


def bad_header(channel: Channel, request: RemotingCommand) -> RemotingCommand:
    raise HeaderError("the custom field <topic> is null")


async def async_echo(channel: Channel, request: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(0)  # a real suspension, so the task path is exercised
    return echo(channel, request)


class Held:
    """Requests a HOLD handler kept, to answer later (the long-poll shape)."""

    def __init__(self) -> None:
        self.items: asyncio.Queue[tuple[Channel, RemotingCommand]] = asyncio.Queue(maxsize=100)

    async def handler(self, channel: Channel, request: RemotingCommand) -> None:
        await self.items.put((channel, request))
        return None


def request(code: int, stype: int = SerializeType.JSON, body: bytes | None = b"payload",
            **ext: str) -> RemotingCommand:
    return RemotingCommand.create_request(code, ext_fields=ext or None, body=body,
                                          serialize_type=stype)


async def wait_until(cond: Callable[[], bool], within: float = 5.0) -> None:
    """Poll ``cond`` once per loop iteration until true, failing after ``within`` seconds.

    For state that has no event of its own (a done-callback that runs one iteration later).
    """
    async with asyncio.timeout(within):
        while not cond():  # noqa: ASYNC110 - a poll under a deadline, by design
            await asyncio.sleep(0)


@pytest.fixture
def held() -> Held:
    return Held()


@pytest.fixture
async def server(held: Held) -> AsyncIterator[RemotingServer]:
    srv = RemotingServer({
        ECHO: echo,
        RAISE: raising,
        BAD_HEADER: bad_header,
        ASYNC_ECHO: async_echo,
        HOLD: held.handler,
    })
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


# -- round trips ------------------------------------------------------------------------


@BOTH_TYPES
async def test_sync_round_trip_mirrors_serialize_type(channel: Channel, stype: int) -> None:
    req = request(ECHO, stype, topic="T", queueId="3")
    resp = await channel.invoke(req, timeout=5)
    assert resp.is_response
    assert resp.opaque == req.opaque
    assert resp.code == ResponseCode.SUCCESS
    assert resp.serialize_type == stype
    assert resp.ext_fields == {"topic": "T", "queueId": "3"}
    assert resp.body == b"payload"
    assert channel.pending_count == 0


@BOTH_TYPES
async def test_handler_response_is_forced_to_request_type(server: RemotingServer,
                                                          channel: Channel, stype: int) -> None:
    def wrong_type(ch: Channel, req: RemotingCommand) -> RemotingCommand:
        other = SerializeType.JSON if stype == SerializeType.ROCKETMQ else SerializeType.ROCKETMQ
        return RemotingCommand(ResponseCode.SUCCESS, remark="made by hand", serialize_type=other)

    server.register(ECHO + 100, wrong_type)  # registered after start: read live
    resp = await channel.invoke(request(ECHO + 100, stype), timeout=5)
    assert resp.serialize_type == stype
    assert resp.remark == "made by hand"


@BOTH_TYPES
async def test_async_round_trip_callback_once(channel: Channel, stype: int) -> None:
    seen: list[ResponseFuture] = []
    req = request(ASYNC_ECHO, stype, k="v")
    fut = await channel.invoke_async(req, 5, seen.append)
    resp = await fut
    await wait_until(lambda: len(seen) == 1)
    assert seen[0].response is resp
    assert seen[0].cause is None and not seen[0].is_timeout
    assert resp.serialize_type == stype and resp.ext_fields == {"k": "v"}
    assert resp.body == b"payload"
    assert channel._async_permits.available == channel._async_permits.limit


@BOTH_TYPES
async def test_oneway_is_delivered_and_never_answered(server: RemotingServer, channel: Channel,
                                                      stype: int) -> None:
    got: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()

    def sink(ch: Channel, req: RemotingCommand) -> RemotingCommand:
        got.set_result(req)
        return req.create_response(ResponseCode.SUCCESS)  # must not be written for oneway

    server.register(ONEWAY_SINK, sink)
    with capture_logs() as logs:
        await channel.invoke_oneway(request(ONEWAY_SINK, stype), timeout=5)
        req = await got
        assert req.is_oneway and req.serialize_type == stype
        # A later request on the same connection is answered; any reply to the oneway
        # would have arrived before it and been logged as unmatched.
        await channel.invoke(request(ECHO, stype), timeout=5)
    assert not [e for e in logs if e["event"] == "remoting.response_unmatched"]
    assert channel._oneway_permits.available == channel._oneway_permits.limit


async def test_coroutine_handler_none_then_send_response(channel: Channel, held: Held) -> None:
    call = asyncio.ensure_future(channel.invoke(request(HOLD), timeout=5))
    server_channel, req = await held.items.get()
    assert not call.done()
    assert server_channel.send_response(req.create_response(ResponseCode.SUCCESS, body=b"late"))
    resp = await call
    assert resp.body == b"late" and resp.opaque == req.opaque


async def test_server_initiated_requests_reach_client_processors() -> None:
    opened: asyncio.Future[Channel] = asyncio.get_running_loop().create_future()
    notified: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()

    def on_notify(ch: Channel, req: RemotingCommand) -> None:
        notified.set_result(req)

    async with RemotingServer(on_channel_open=opened.set_result) as srv:
        async with RemotingClient({RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: on_notify,
                                   ECHO: echo}) as client:
            await client.get_channel(srv.address)
            server_side = await opened
            await srv.invoke_oneway(
                server_side,
                request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, consumerGroup="G"), timeout=5)
            assert (await notified).ext_fields == {"consumerGroup": "G"}
            resp = await srv.invoke(server_side, request(ECHO, body=b"ping"), timeout=5)
            assert resp.body == b"ping"


# -- error responses --------------------------------------------------------------------


@BOTH_TYPES
async def test_unknown_code_answers_3_and_keeps_connection(channel: Channel, stype: int) -> None:
    with capture_logs() as logs:
        resp = await channel.invoke(request(4242, stype), timeout=5)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.remark == " request type 4242 not supported"
    assert resp.serialize_type == stype
    assert any(e["event"] == "remoting.request_code_not_supported" for e in logs)
    assert channel.is_active
    assert (await channel.invoke(request(ECHO, stype), timeout=5)).code == ResponseCode.SUCCESS


async def test_default_handler_takes_unknown_codes(server: RemotingServer) -> None:
    def default(ch: Channel, req: RemotingCommand) -> RemotingCommand:
        return req.create_response(ResponseCode.SUCCESS, remark=f"default {req.code}")

    server.register_default(default)
    ch = await Channel.connect("127.0.0.1", server.port)
    try:
        assert (await ch.invoke(request(4243), timeout=5)).remark == "default 4243"
    finally:
        ch.close()
        await ch.wait_closed()


@BOTH_TYPES
async def test_handler_exception_answers_system_error(channel: Channel, stype: int) -> None:
    with capture_logs() as logs:
        resp = await channel.invoke(request(RAISE, stype), timeout=5)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark is not None and resp.remark.startswith("RuntimeError: boom, raising(")
    assert resp.serialize_type == stype
    failed = [e for e in logs if e["event"] == "remoting.handler_failed"]
    assert failed and failed[0]["code"] == RAISE and failed[0]["peer"] == channel.local_addr


async def test_header_error_answers_system_error_with_message(channel: Channel) -> None:
    resp = await channel.invoke(request(BAD_HEADER), timeout=5)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "the custom field <topic> is null"


# -- timeouts and permits ---------------------------------------------------------------


async def test_sync_timeout_raises_once_and_forgets_entry(channel: Channel, held: Held) -> None:
    req = request(HOLD)
    with pytest.raises(RemotingTimeoutError) as info:
        await channel.invoke(req, timeout=0.05)
    assert isinstance(info.value, TimeoutError)
    text = str(info.value)
    assert channel.remote_addr in text and "50ms" in text
    assert f"code={HOLD}" in text and f"opaque={req.opaque}" in text
    assert channel.pending_count == 0
    # The late answer is dropped with a log line, and the connection keeps working.
    server_channel, held_req = await held.items.get()
    with capture_logs() as logs:
        server_channel.send_response(held_req.create_response(ResponseCode.SUCCESS))
        assert (await channel.invoke(request(ECHO), timeout=5)).code == ResponseCode.SUCCESS
    unmatched = [e for e in logs if e["event"] == "remoting.response_unmatched"]
    assert len(unmatched) == 1 and unmatched[0]["opaque"] == req.opaque


async def test_answer_to_a_cancelled_request_is_only_a_debug_line(channel: Channel,
                                                                  held: Held) -> None:
    # A consumer cancels its parked pulls at shutdown; the broker's later answer is expected.
    sync_req, async_req = request(HOLD), request(HOLD)
    call = asyncio.ensure_future(channel.invoke(sync_req, timeout=5))
    future = await channel.invoke_async(async_req, timeout=5)
    answers = [await held.items.get(), await held.items.get()]
    call.cancel()
    future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert channel.pending_count == 0
    with capture_logs() as logs:
        for server_channel, held_req in answers:
            server_channel.send_response(held_req.create_response(ResponseCode.SUCCESS))
        assert (await channel.invoke(request(ECHO), timeout=5)).code == ResponseCode.SUCCESS
    dropped = [(e["event"], e["log_level"], e["opaque"]) for e in logs
               if e["event"].startswith("remoting.response_")]
    assert sorted(dropped) == sorted([("remoting.response_abandoned", "debug", sync_req.opaque),
                                      ("remoting.response_abandoned", "debug", async_req.opaque)])


async def test_sync_timeouts_sharing_a_slot_each_fire_once(channel: Channel, held: Held) -> None:
    # Deadlines this close share a timeout slot (one timer): each call still fails once,
    # with its own opaque, and answered neighbours are unaffected.
    reqs = [request(HOLD) for _ in range(8)]
    calls = [asyncio.ensure_future(channel.invoke(r, timeout=0.05)) for r in reqs]
    echoed = await channel.invoke(request(ECHO), timeout=5)
    assert echoed.code == ResponseCode.SUCCESS
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, RemotingTimeoutError) for r in results)
    for req, err in zip(reqs, results, strict=True):
        assert f"opaque={req.opaque}" in str(err)
    assert channel.pending_count == 0
    assert not channel._slots or all(not slot for slot in channel._slots.values())
    for _ in reqs:
        await held.items.get()


async def test_close_cancels_slot_timers_and_fails_sync_calls(server: RemotingServer,
                                                              held: Held) -> None:
    ch = await Channel.connect("127.0.0.1", server.port)
    calls = [asyncio.ensure_future(ch.invoke(request(HOLD), timeout=10)) for _ in range(3)]
    for _ in calls:
        await held.items.get()
    assert ch._slot_timers
    ch.close()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, ConnectionClosedError) for r in results)
    assert not ch._slot_timers and not ch._slots and ch.pending_count == 0
    await ch.wait_closed()


async def test_async_timeout_by_scan_fires_exactly_once(server: RemotingServer,
                                                        held: Held) -> None:
    ch = await Channel.connect("127.0.0.1", server.port, scan_interval=0.05, async_permits=4)
    try:
        calls: list[ResponseFuture] = []
        fut = await ch.invoke_async(request(HOLD), 0.05, calls.append)
        assert ch._async_permits.available == 3
        with pytest.raises(RemotingTimeoutError):
            await fut
        await wait_until(lambda: len(calls) == 1)
        assert calls[0].is_timeout
        assert ch.pending_count == 0
        assert ch._async_permits.available == 4
        # Further scans find nothing: a round trip later, still one callback.
        await ch.invoke(request(ECHO), timeout=5)
        assert len(calls) == 1 and ch._async_permits.available == 4
    finally:
        ch.close()
        await ch.wait_closed()


async def test_async_semaphore_exhaustion(server: RemotingServer, held: Held) -> None:
    ch = await Channel.connect("127.0.0.1", server.port, async_permits=1)
    try:
        first = await ch.invoke_async(request(HOLD), 5)
        with pytest.raises(RemotingTooMuchRequestError) as info:
            await ch.invoke_async(request(HOLD), 0.05)
        assert str(info.value) == ("invokeAsyncImpl tryAcquire semaphore timeout, 50ms, "
                                   "waiting thread nums: 0 semaphoreAsyncValue: 0")
        # Answering the first request frees its permit for the next caller.
        server_channel, held_req = await held.items.get()
        server_channel.send_response(held_req.create_response(ResponseCode.SUCCESS))
        assert (await first).code == ResponseCode.SUCCESS
        second = await ch.invoke_async(request(ECHO), 5)
        assert (await second).code == ResponseCode.SUCCESS
    finally:
        ch.close()
        await ch.wait_closed()


async def test_oneway_semaphore_exhaustion(server: RemotingServer) -> None:
    permits = Permits(1)
    assert await permits.acquire(0)
    ch = await Channel.connect("127.0.0.1", server.port, oneway_permits=permits)
    try:
        with pytest.raises(RemotingTooMuchRequestError) as info:
            await ch.invoke_oneway(request(ECHO), 0.05)
        assert str(info.value) == ("invokeOnewayImpl tryAcquire semaphore timeout, 50ms, "
                                   "waiting thread nums: 0 semaphoreOnewayValue: 0")
        permits.release()
        await ch.invoke_oneway(request(ECHO), 1)
        await wait_until(lambda: permits.available == 1)
    finally:
        ch.close()
        await ch.wait_closed()


async def test_permits_fifo_and_cancellation() -> None:
    permits = Permits(1)
    assert permits.try_acquire_nowait()
    waiter = asyncio.ensure_future(permits.acquire(5))
    await wait_until(lambda: permits.waiting == 1)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    permits.release()
    assert permits.available == 1 and permits.waiting == 0


async def test_cancelled_invoke_forgets_its_entry(channel: Channel, held: Held) -> None:
    call = asyncio.ensure_future(channel.invoke(request(HOLD), timeout=10))
    await held.items.get()
    assert channel.pending_count == 1
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await wait_until(lambda: channel.pending_count == 0)
    assert channel.is_active


async def test_paused_writes_block_invocations_until_the_peer_reads() -> None:
    started: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
        asyncio.get_running_loop().create_future())

    async def not_reading(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        started.set_result((reader, writer))

    srv = await asyncio.start_server(not_reading, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    ch = await Channel.connect("127.0.0.1", port, write_high_water=64 * 1024,
                               write_low_water=16 * 1024)
    reader, writer = await started
    drain: asyncio.Task[None] | None = None
    try:
        body = bytes(256 * 1024)
        with pytest.raises(RemotingTimeoutError) as info:
            for _ in range(2000):  # the kernel buffers fill within a few dozen MiB
                await ch.invoke_oneway(request(ECHO, body=body), 0.2)
        assert "paused" in str(info.value) and ch.remote_addr in str(info.value)
        assert ch._oneway_permits.available == ch._oneway_permits.limit

        async def read_everything() -> None:
            while await reader.read(1 << 20):
                pass

        drain = asyncio.ensure_future(read_everything())
        await ch.invoke_oneway(request(ECHO, body=body), 10)  # resumes once the peer reads
    finally:
        ch.close()
        await ch.wait_closed()
        if drain is not None:
            await drain
        writer.close()
        await writer.wait_closed()
        srv.close()
        await srv.wait_closed()


# -- closing ----------------------------------------------------------------------------


async def test_peer_closing_fails_pending_requests(server: RemotingServer, held: Held) -> None:
    ch = await Channel.connect("127.0.0.1", server.port)
    closed: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    ch._on_close = lambda c, exc: closed.set_result(exc)
    try:
        calls: list[ResponseFuture] = []
        sync_call = asyncio.ensure_future(ch.invoke(request(HOLD), timeout=10))
        async_fut = await ch.invoke_async(request(HOLD), 10, calls.append)
        server_channel, _ = await held.items.get()
        await held.items.get()
        server_channel.close()
        for waiter in (sync_call, async_fut):
            with pytest.raises(ConnectionClosedError) as info:
                await waiter
            assert ch.remote_addr in str(info.value)
            assert info.value.__cause__ is not None
        assert isinstance(await closed, BaseException)
        await wait_until(lambda: len(calls) == 1)
        assert ch._async_permits.available == ch._async_permits.limit
        with pytest.raises(ConnectionClosedError):
            await ch.invoke(request(ECHO), timeout=1)
    finally:
        ch.close()
        await ch.wait_closed()


async def test_close_is_idempotent_and_calls_on_close_once(server: RemotingServer,
                                                           held: Held) -> None:
    reasons: list[BaseException | None] = []
    ch = await Channel.connect("127.0.0.1", server.port,
                               on_close=lambda c, exc: reasons.append(exc))
    call = asyncio.ensure_future(ch.invoke(request(HOLD), timeout=10))
    await held.items.get()
    ch.close()
    ch.close()
    ch.abort()
    with pytest.raises(ConnectionClosedError):
        await call
    await ch.wait_closed()
    assert reasons == [None]


async def test_malformed_frame_closes_only_that_connection(server: RemotingServer,
                                                           channel: Channel) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        with capture_logs() as logs:
            # Length 2 is smaller than the header-length word: not a frame.
            writer.write(struct.pack(">i", 2) + b"xx")
            await writer.drain()
            assert await reader.read() == b""  # closed by the server, no response
        warned = [e for e in logs if e["event"] == "remoting.protocol_error"]
        assert len(warned) == 1
        assert warned[0]["peer"] == "{}:{}".format(*writer.get_extra_info("sockname")[:2])
        assert "smaller than the header-length word" in warned[0]["reason"]
    finally:
        writer.close()
        await writer.wait_closed()
    assert (await channel.invoke(request(ECHO), timeout=5)).code == ResponseCode.SUCCESS


async def test_a_handler_cancelled_before_it_starts_is_closed_not_left_unawaited() -> None:
    """A request and a malformed frame in one read: the connection closes before the
    request's task takes its first step. The handler's coroutine must be closed, not
    dropped unstarted (Python warns "coroutine ... was never awaited")."""
    made: list[Coroutine[Any, Any, RemotingCommand]] = []

    def handler(channel: Channel, req: RemotingCommand) -> Awaitable[RemotingCommand]:
        coro = async_echo(channel, req)
        made.append(coro)
        return coro

    srv = RemotingServer({ASYNC_ECHO: handler})
    await srv.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        try:
            writer.write(request(ASYNC_ECHO).encode() + struct.pack(">i", 2) + b"xx")
            await writer.drain()
            assert await reader.read() == b""  # closed by the server, no response
        finally:
            writer.close()
            await writer.wait_closed()
        await wait_until(lambda: len(made) == 1
                         and inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED)
    finally:
        await srv.stop()


async def test_bad_header_frame_closes_connection(server: RemotingServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        header = b"{not json"
        writer.write(struct.pack(">ii", 4 + len(header), len(header)) + header)
        await writer.drain()
        assert await reader.read() == b""
    finally:
        writer.close()
        await writer.wait_closed()


async def test_idle_channel_closes_itself() -> None:
    closed: asyncio.Future[Channel] = asyncio.get_running_loop().create_future()
    async with RemotingServer({ECHO: echo}, idle_timeout=0.2, scan_interval=0.05,
                              on_channel_close=lambda c, exc: closed.set_result(c)) as srv:
        ch = await Channel.connect("127.0.0.1", srv.port)
        try:
            assert (await ch.invoke(request(ECHO), timeout=5)).code == ResponseCode.SUCCESS
            server_side = await closed
            assert server_side.remote_addr == ch.local_addr
            await wait_until(lambda: ch.is_closed)
            assert not srv.channels
        finally:
            ch.close()
            await ch.wait_closed()


async def test_ten_thousand_in_flight_on_one_connection(channel: Channel) -> None:
    n = 10_000
    sync_calls = [channel.invoke(request(ECHO, body=i.to_bytes(4, "big")), timeout=20)
                  for i in range(n // 2)]
    async_futs = [await channel.invoke_async(request(ECHO, body=i.to_bytes(4, "big")), 20)
                  for i in range(n // 2, n)]
    assert channel.pending_count == n // 2
    results = await asyncio.gather(*sync_calls, *async_futs)
    assert [int.from_bytes(r.body, "big") for r in results] == list(range(n))
    assert channel.pending_count == 0


async def test_server_stop_closes_channels_and_cancels_handlers(held: Held) -> None:
    srv = RemotingServer({HOLD: held.handler})
    await srv.start()
    ch = await Channel.connect("127.0.0.1", srv.port)
    try:
        call = asyncio.ensure_future(ch.invoke(request(HOLD), timeout=10))
        await held.items.get()
        assert len(srv.channels) == 1
        await srv.stop()
        await srv.stop()
        assert not srv.channels
        with pytest.raises(ConnectionClosedError):
            await call
    finally:
        ch.close()
        await ch.wait_closed()


# -- arbitrary chunking and arbitrary bytes --------------------------------------------

_FIXTURE_REUSE = settings(max_examples=30, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture])


async def _read_all_frames(reader: asyncio.StreamReader, count: int | None) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    while count is None or len(out) < count:
        data = await reader.read(65536)
        if not data:
            break
        out.extend(decoder.feed_and_decode(data))
    return out


@_FIXTURE_REUSE
@given(types=st.lists(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
                      min_size=1, max_size=8),
       cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12))
async def test_requests_split_anywhere_are_answered_in_order(
        server: RemotingServer, types: list[int], cuts: list[int]) -> None:
    reqs = [request(ECHO, t, body=bytes([i]) * (i * 37), n=str(i)) for i, t in enumerate(types)]
    stream = b"".join(r.encode() for r in reqs)
    points = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        for lo, hi in zip(points, points[1:], strict=False):
            writer.write(stream[lo:hi])
            await writer.drain()
        answers = await _read_all_frames(reader, len(reqs))
    finally:
        writer.close()
        await writer.wait_closed()
    assert [a.opaque for a in answers] == [r.opaque for r in reqs]
    assert [a.serialize_type for a in answers] == types
    assert [a.body or b"" for a in answers] == [r.body for r in reqs]
    assert all(a.is_response and a.code == ResponseCode.SUCCESS for a in answers)


@_FIXTURE_REUSE
@given(junk=st.binary(max_size=300))
async def test_arbitrary_bytes_never_break_the_server(server: RemotingServer,
                                                      junk: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(junk)
        writer.write_eof()  # the server either answered whole frames or closes on bad ones
        answers = await _read_all_frames(reader, None)
    finally:
        writer.close()
        await writer.wait_closed()
    assert all(a.is_response for a in answers)
    ch = await Channel.connect("127.0.0.1", server.port)
    try:
        assert (await ch.invoke(request(ECHO), timeout=5)).code == ResponseCode.SUCCESS
    finally:
        ch.close()
        await ch.wait_closed()


# -- RemotingClient ---------------------------------------------------------------------


async def test_client_reuses_and_recreates_channels(server: RemotingServer) -> None:
    async with RemotingClient() as client:
        a = await client.get_channel(server.address)
        assert await client.get_channel(server.address) is a
        assert (await client.invoke(server.address, request(ECHO), 5)).code == 0
        client.close_channel(server.address)
        assert a.is_closed
        b = await client.get_channel(server.address)
        assert b is not a and b.is_active
        # The server drops the connection: the next call dials again.
        for server_side in server.channels:
            server_side.close()
        await wait_until(lambda: b.is_closed)
        c = await client.get_channel(server.address)
        assert c is not b
        fut = await client.invoke_async(server.address, request(ECHO), 5)
        assert (await fut).code == ResponseCode.SUCCESS
        await client.invoke_oneway(server.address, request(ECHO), 5)
    with pytest.raises(MQClientError):
        await client.get_channel(server.address)


async def test_client_concurrent_get_channel_dials_once(server: RemotingServer) -> None:
    async with RemotingClient() as client:
        channels = await asyncio.gather(*(client.get_channel(server.address) for _ in range(20)))
        assert len({id(c) for c in channels}) == 1
        assert len(server.channels) == 1


def _dead_address() -> str:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def test_client_connect_error_names_address() -> None:
    dead = _dead_address()
    async with RemotingClient(connect_timeout=2) as client:
        with pytest.raises(RemotingConnectError) as info:
            await client.invoke(dead, request(ECHO), 2)
        assert dead in str(info.value)


async def test_namesrv_failover_skips_a_dead_address(server: RemotingServer) -> None:
    dead = _dead_address()
    async with RemotingClient() as client:
        client.update_namesrv_address_list(f" {dead} ; {server.address};")
        assert sorted(client.namesrv_addr_list) == sorted([dead, server.address])
        for _ in range(3):
            resp = await client.invoke_namesrv(request(ECHO), 5)
            assert resp.code == ResponseCode.SUCCESS
            assert client.namesrv_addr_chosen == server.address


async def test_namesrv_rotates_after_timeout() -> None:
    hang: dict[int, bool] = {}
    kept: list[RemotingCommand] = []

    def maybe_hang(port: int) -> Callable[[Channel, RemotingCommand], Any]:
        def handler(ch: Channel, req: RemotingCommand) -> RemotingCommand | None:
            if hang.get(port):
                kept.append(req)
                return None
            return req.create_response(ResponseCode.SUCCESS, remark=str(port))
        return handler

    a, b = RemotingServer(), RemotingServer()
    async with a, b:
        a.register(ECHO, maybe_hang(a.port))
        b.register(ECHO, maybe_hang(b.port))
        async with RemotingClient() as client:
            client.update_namesrv_address_list([a.address, b.address])
            first = await client.invoke_namesrv(request(ECHO), 5)
            chosen = client.namesrv_addr_chosen
            assert chosen is not None and first.remark == chosen.rsplit(":", 1)[1]
            hang[int(first.remark)] = True
            with pytest.raises(RemotingTimeoutError):
                await client.invoke_namesrv(request(ECHO), 0.1)
            second = await client.invoke_namesrv(request(ECHO), 5)
            assert second.remark != first.remark
            assert client.namesrv_addr_chosen != chosen


def test_namesrv_list_parsing_and_update_rules() -> None:
    assert parse_namesrv_addr("a:1; b:2 ;;") == ["a:1", "b:2"]
    client = RemotingClient()
    client.update_namesrv_address_list("a:1;b:2;c:3")
    assert sorted(client.namesrv_addr_list) == ["a:1", "b:2", "c:3"]
    before = client.namesrv_addr_list
    client.update_namesrv_address_list(["c:3", "a:1", "b:2"])  # same set: kept as is
    assert client.namesrv_addr_list == before
    client.update_namesrv_address_list([])  # empty: ignored, as upstream
    assert client.namesrv_addr_list == before


async def test_namesrv_all_dead_raises_connect_error() -> None:
    dead1, dead2 = _dead_address(), _dead_address()
    async with RemotingClient() as client:
        client.update_namesrv_address_list([dead1, dead2])
        with pytest.raises(RemotingConnectError) as info:
            await client.invoke_namesrv(request(ECHO), 5)
        assert dead1 in str(info.value) and dead2 in str(info.value)

