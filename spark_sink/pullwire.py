"""The Spark source's pulls on a connection of their own: frames as bytes, no per-pull objects.

Contract:

* ``pull_request(prefix, opaque, fixed, queue_offset, max_msg_nums)`` is one whole
  PULL_MESSAGE frame with a ROCKETMQ header (upstream ``RocketMQSerializable``), length
  prefix included: ``prefix`` the header's code, language and version (5 bytes), ``fixed``
  the extFields entries that stay the same for every pull of a range (``PullTemplate``),
  then queueOffset and maxMsgNums. ``pull_answer(frame)`` reads a pull's answer (a frame
  without its length prefix): ``(opaque, code, next_begin_offset, min_offset, max_offset,
  suggest_which_broker_id, body_start)``, or None when the frame is anything but a
  response with one of a pull's four codes and the four offsets; the caller then decodes
  it with ``RemotingCommand.decode`` for its error. Both are the C module ``_pull``
  (spark_sink/_pull.c) where it is built, else ``pull_request_py`` / ``pull_answer_py``,
  the reference (the C answers None wherever it is not sure to agree with it);
  ``AIOROCKETMQ_NO_EXTENSIONS=1`` selects the Python pair.
* ``PullStream`` is an asyncio protocol on one TCP (or TLS) connection to a broker, owned
  by one ``StreamRangeReader``, which writes the pulls it makes in one loop iteration in
  one write; the stream hands each answer to the reader by opaque. With ACL credentials each request goes through
  ``RemotingCommand`` and the client's RPC hook (the signature covers the offsets), then
  out on the same connection.
* ``StreamRangeReader`` is ``link.RangeReader``'s contract (``next()`` / ``close()``) on a
  ``PullStream``: ``pipeline`` windows of ``batch`` offsets in flight, each window pulled
  again from where an answer stopped until it is covered; statuses as
  ``RocketMQLink._window_results`` (FOUND bodies kept, NO_MATCHED_MSG skips,
  OFFSET_MOVED forward and NOT_FOUND below the window's end are data loss). A broker
  error code, a lost connection, or no progress of the oldest window within the timeout
  fails ``next()``.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl as ssl_module
import struct
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiorocketmq import refuse_extension
from aiorocketmq.protocol.codes import (
    CURRENT_VERSION,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import (
    ConnectionClosedError,
    HeaderError,
    MQBrokerError,
    MQClientError,
    ProtocolError,
    RemotingConnectError,
    RemotingTimeoutError,
)
from aiorocketmq.protocol.frame import DEFAULT_MAX_FRAME_LENGTH
from aiorocketmq.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from aiorocketmq.protocol.tls import TLS_SHUTDOWN_TIMEOUT

from .rows import ARROW_BATCH_ROWS

if TYPE_CHECKING:
    from aiorocketmq.protocol.acl import RPCHook

    from .offsets import QueueKey

__all__ = ["PullAnswer", "PullTemplate", "PullStream", "StreamRangeReader", "NATIVE",
           "pull_request", "pull_answer", "pull_request_py", "pull_answer_py"]

# (opaque, code, next_begin_offset, min_offset, max_offset, suggest_which_broker_id, body_start)
PullAnswer = tuple[int, int, int, int, int, int, int]

_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_PREFIX = struct.Struct(">hbh")
_HEAD = struct.Struct(">iiiiii")  # length, word, opaque, flag, remark length, ext length
_PULL_CODES = frozenset((ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
                         ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED))
_VARIABLE = ("queueOffset", "maxMsgNums")


def _entry(key: str, value: str) -> bytes:
    kb = key.encode()
    vb = value.encode()
    return _SHORT.pack(len(kb)) + kb + _INT.pack(len(vb)) + vb


def pull_request_py(prefix: bytes, opaque: int, fixed: bytes, queue_offset: int,
                    max_msg_nums: int) -> bytes:
    """The reference of ``pull_request`` (see module docstring)."""
    if len(prefix) != 5:
        raise ValueError("pull_request: prefix must be 5 bytes")
    ext = fixed + _entry("queueOffset", str(queue_offset)) + _entry("maxMsgNums",
                                                                    str(max_msg_nums))
    hlen = 5 + 16 + len(ext)
    if hlen > 0xFFFFFF:
        raise ValueError("pull_request: header over the 24-bit length field")
    return (_INT.pack(4 + hlen) + _INT.pack((SerializeType.ROCKETMQ << 24) | hlen) + prefix
            + _INT.pack(opaque) + b"\0\0\0\0\0\0\0\0" + _INT.pack(len(ext)) + ext)


def pull_answer_py(frame: bytes | bytearray | memoryview) -> PullAnswer | None:
    """The reference of ``pull_answer`` (see module docstring)."""
    try:
        cmd = RemotingCommand.decode(frame)
    except ProtocolError:
        return None
    if not cmd.flag & 1 or cmd.code not in _PULL_CODES:
        return None
    try:
        h = PullMessageResponseHeader.from_ext_fields(cmd.ext_fields)
    except HeaderError:
        return None
    body_start = len(frame) - (0 if cmd.body is None else len(cmd.body))
    return (cmd.opaque, cmd.code, h.next_begin_offset, h.min_offset, h.max_offset,
            h.suggest_which_broker_id, body_start)


try:
    refuse_extension("aiorocketmq.spark_sink._pull")
    from . import _pull
except ImportError:  # no C compiler, or AIOROCKETMQ_NO_EXTENSIONS: the reference runs
    _pull = None  # type: ignore[assignment]

pull_request: Callable[[bytes, int, bytes, int, int], bytes] = (
    pull_request_py if _pull is None else _pull.pull_request)
pull_answer: Callable[[Any], PullAnswer | None] = (
    pull_answer_py if _pull is None else _pull.pull_answer)
NATIVE = _pull is not None  # whether the C pull codec is there


class PullTemplate:
    """The parts of a range's pulls that do not change: the ROCKETMQ header's code,
    language and version, and its extFields but for queueOffset and maxMsgNums."""

    __slots__ = ("prefix", "fixed", "ext")

    def __init__(self, header: PullMessageRequestHeader) -> None:
        self.ext = {k: v for k, v in header.to_ext_fields().items() if k not in _VARIABLE}
        self.prefix = _PREFIX.pack(RequestCode.PULL_MESSAGE, LanguageCode.JAVA, CURRENT_VERSION)
        self.fixed = b"".join(_entry(k, v) for k, v in self.ext.items())

    def command(self, queue_offset: int, max_msg_nums: int) -> RemotingCommand:
        """The same pull as a ``RemotingCommand`` (for an RPC hook to sign)."""
        ext = dict(self.ext)
        ext["queueOffset"] = str(queue_offset)
        ext["maxMsgNums"] = str(max_msg_nums)
        return RemotingCommand.create_request(RequestCode.PULL_MESSAGE, ext,
                                              serialize_type=SerializeType.ROCKETMQ)


class _Window:
    """Offsets ``[cur, end)`` still to pull for one window that began at ``start``."""

    __slots__ = ("start", "cur", "end", "found", "size", "done")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.cur = start
        self.end = end
        self.found: list[tuple[bytes, int]] = []
        self.size = 0
        self.done = False


class PullStream(asyncio.Protocol):
    """One connection carrying one range's pulls (see module docstring)."""

    def __init__(self, on_answer: Callable[[PullAnswer, bytes | None], None],
                 on_frame: Callable[[memoryview], None],
                 on_lost: Callable[[BaseException], None]) -> None:
        self._on_answer = on_answer
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._rest = b""
        self.transport: asyncio.Transport | None = None
        self.peer = ""

    @classmethod
    async def open(cls, addr: str, *, ssl: ssl_module.SSLContext | None, timeout: float,
                   on_answer: Callable[[PullAnswer, bytes | None], None],
                   on_frame: Callable[[memoryview], None],
                   on_lost: Callable[[BaseException], None]) -> PullStream:
        host, _, port = addr.rpartition(":")
        loop = asyncio.get_running_loop()
        stream = cls(on_answer, on_frame, on_lost)
        stream.peer = addr
        try:
            async with asyncio.timeout(timeout):
                if ssl is None:
                    await loop.create_connection(lambda: stream, host, int(port))
                else:
                    await loop.create_connection(lambda: stream, host, int(port), ssl=ssl,
                                                 server_hostname=host,
                                                 ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            reason = f"no connection within {timeout}s" if isinstance(exc, TimeoutError) else exc
            raise RemotingConnectError(f"connect to {addr} failed: {reason}") from exc
        return stream

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def data_received(self, data: bytes) -> None:
        if self._rest:
            data = self._rest + data
        n = len(data)
        pos = 0
        mv = memoryview(data)
        unpack = _INT.unpack_from
        answer = pull_answer
        try:
            while n - pos >= 4:
                length = unpack(data, pos)[0]
                if length < 4 or length + 4 > DEFAULT_MAX_FRAME_LENGTH:
                    raise ProtocolError(f"frame length {length} out of range")
                end = pos + 4 + length
                if end > n:
                    break
                frame = mv[pos + 4:end]
                got = answer(frame)
                if got is None:
                    self._on_frame(frame)
                else:
                    start = pos + 4 + got[6]
                    self._on_answer(got, data[start:end] if end > start else None)
                pos = end
        except Exception as exc:  # a bad frame, or the reader refused an answer
            self._rest = b""
            self._on_lost(exc)
            if self.transport is not None:
                self.transport.abort()
            return
        self._rest = data[pos:] if pos < n else b""

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        err = ConnectionClosedError(f"connection to {self.peer} lost")
        err.__cause__ = exc if exc is not None else ConnectionResetError("closed by peer")
        self._on_lost(err)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class StreamRangeReader:
    """``RangeReader`` on a ``PullStream`` (see module docstring)."""

    CHUNK_ROWS = ARROW_BATCH_ROWS  # one chunk, one Arrow batch (as RangeReader)
    CHUNK_BYTES = 8 << 20

    def __init__(self, addr: str, key: QueueKey, start: int, end: int, *,
                 template: PullTemplate, batch: int, pipeline: int, timeout: float,
                 lost: Callable[[QueueKey, int, int, bool, str], int], fail_on_data_loss: bool,
                 hook: RPCHook | None = None) -> None:
        self._addr = addr
        self._key = key
        self._cursor = start
        self._end = end
        self._template = template
        self._batch = batch
        self._pipeline = max(1, pipeline)
        self._timeout = timeout
        self._lost = lost
        self._fail = fail_on_data_loss
        self._hook = hook
        self._windows: deque[_Window] = deque()
        self._by_opaque: dict[int, _Window] = {}
        self._opaques = itertools.count(1)
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self.stream: PullStream | None = None

    async def open(self, ssl: ssl_module.SSLContext | None, connect_timeout: float) -> None:
        self.stream = await PullStream.open(self._addr, ssl=ssl, timeout=connect_timeout,
                                            on_answer=self._answer, on_frame=self._frame,
                                            on_lost=self._fail_with)

    # -- sending ----------------------------------------------------------------------------

    def _frame_for(self, window: _Window) -> bytes:
        cur = window.cur
        count = window.end - cur
        if self._hook is None:
            opaque = next(self._opaques) & 0x7FFFFFFF
            frame = pull_request(self._template.prefix, opaque, self._template.fixed, cur,
                                 count)
        else:
            cmd = self._template.command(cur, count)
            self._hook.do_before_request(self._addr, cmd)
            opaque = cmd.opaque
            head, body = cmd.encode_parts()
            frame = head if body is None else head + bytes(body)
        self._by_opaque[opaque] = window
        return frame

    def _refill(self) -> None:
        if self._error is not None or self._closed:
            return
        frames = []
        while len(self._windows) < self._pipeline and self._cursor < self._end:
            s = self._cursor
            e = min(s + self._batch, self._end)
            self._cursor = e
            window = _Window(s, e)
            self._windows.append(window)
            frames.append(self._frame_for(window))
        if frames:
            self._send(frames)

    def _send(self, frames: list[bytes]) -> None:
        # Queued, and written once at the end of this loop iteration: the refills of every
        # window the reader takes in one pass (and the re-pulls of the answers read in one
        # read) leave in one write(2).
        self._out += frames
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        frames, self._out = self._out, []
        if not frames or self._closed or self._error is not None:
            return
        stream = self.stream
        transport = None if stream is None else stream.transport
        if transport is None:
            self._fail_with(ConnectionClosedError(f"connection to {self._addr} is closed"))
            return
        transport.write(frames[0] if len(frames) == 1 else b"".join(frames))

    # -- answers ----------------------------------------------------------------------------

    def _answer(self, got: PullAnswer, body: bytes | None) -> None:
        window = self._by_opaque.pop(got[0], None)
        if window is None or self._error is not None:
            return  # not ours (never sent on this connection), or the reader already failed
        code, nxt, max_offset = got[1], got[2], got[4]
        cur = window.cur
        key = self._key
        if code == ResponseCode.SUCCESS:
            if body:
                window.found.append((body, window.end))
                window.size += len(body)
        elif code == ResponseCode.PULL_RETRY_IMMEDIATELY:
            pass
        elif code == ResponseCode.PULL_OFFSET_MOVED and nxt > cur:
            nxt = self._lost(key, cur, nxt, self._fail, "below the queue's min offset")
        else:
            # PULL_NOT_FOUND (or a move backwards) below the window's end: the queue no
            # longer holds offsets it reported when the batch was planned.
            nxt = self._lost(key, cur, window.end, self._fail,
                             f"past the queue's max offset {max_offset}")
        if nxt <= cur:
            raise MQClientError(f"pull of {key} at offset {cur} did not advance (next {nxt}, "
                                f"code {code})")
        window.cur = nxt
        if nxt < window.end:
            self._send([self._frame_for(window)])
            return
        window.done = True
        waiter = self._waiter
        if waiter is not None and window is self._windows[0] and not waiter.done():
            waiter.set_result(None)

    def _frame(self, frame: memoryview) -> None:
        """A frame ``pull_answer`` left: an error answer, or one it could not read."""
        cmd = RemotingCommand.decode(frame)
        if not cmd.flag & 1:
            return  # a request from the broker: nothing on this connection answers them
        if cmd.opaque not in self._by_opaque:
            return
        if cmd.code not in _PULL_CODES:
            raise MQBrokerError.for_code(cmd.code, cmd.remark, self._addr)
        h = PullMessageResponseHeader.from_ext_fields(cmd.ext_fields)
        body = None if cmd.body is None else bytes(cmd.body)
        self._answer((cmd.opaque, cmd.code, h.next_begin_offset, h.min_offset, h.max_offset,
                      h.suggest_which_broker_id, 0), body)

    def _fail_with(self, exc: BaseException) -> None:
        if self._error is None and not self._closed:
            self._error = exc
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the reader's side ------------------------------------------------------------------

    async def _wait_head(self) -> None:
        head = self._windows[0]
        loop = asyncio.get_running_loop()
        while not head.done and self._error is None:
            self._waiter = waiter = loop.create_future()
            progress = head.cur
            try:
                async with asyncio.timeout(self._timeout):
                    await waiter
            except TimeoutError:
                if head.cur == progress and not head.done and self._error is None:
                    raise RemotingTimeoutError(
                        f"pull of {self._key} at offset {head.cur} from {self._addr}: no "
                        f"answer within {self._timeout:.0f}s") from None
            finally:
                self._waiter = None

    async def next(self) -> list[tuple[bytes, int]] | None:
        self._refill()
        if self._error is not None:
            self.close()
            raise self._error
        if not self._windows:
            return None
        out: list[tuple[bytes, int]] = []
        rows = 0
        size = 0
        try:
            while self._windows and rows < self.CHUNK_ROWS and size < self.CHUNK_BYTES:
                head = self._windows[0]
                if not head.done:
                    await self._wait_head()
                if self._error is not None:
                    raise self._error
                self._windows.popleft()
                out += head.found
                rows += head.end - head.start
                size += head.size
                self._refill()
        except BaseException:
            self.close()
            raise
        return out

    def close(self) -> None:
        self._closed = True
        self._windows.clear()
        self._by_opaque.clear()
        if self.stream is not None:
            self.stream.close()
