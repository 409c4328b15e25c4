"""A fake broker / nameserver on 127.0.0.1 that answers with captured Java frames.

``ReplayServer(answers)`` listens on port 0. For every request a client sends, it calls
``answers[code](request)``, which names the captured frame (an id of
``tests/data/vectors/frames.jsonl``) to answer with, or returns ``None`` to hold the
request unanswered (as a broker holds a long-polling pull); codes without an entry and
oneway requests get no answer. The captured frame goes back byte for byte except:

* its opaque, set to the request's (``with_opaque``: in the JSON header text, or at its
  fixed place in a ROCKETMQ header), and
* ``rewrite``: body substrings replaced, used to point the broker address inside a
  captured route answer at another ``ReplayServer``.

``push(frame_id)`` sends a captured broker-initiated request (NOTIFY_CONSUMER_IDS_CHANGED,
GET_CONSUMER_RUNNING_INFO, ...) over the newest client connection and, unless it is
oneway, returns the client's response. Every request received is kept in ``requests``.
"""

# ASYNC109: ``timeout`` is a wait's deadline in seconds.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import re
import struct
from collections.abc import Callable, Mapping

from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.frame import FrameDecoder
from tests.vectors import frame_bytes

__all__ = ["ReplayServer", "with_opaque"]

_INT = struct.Struct(">i")
_OPAQUE_JSON = re.compile(rb'"opaque":-?\d+')
_OPAQUE_AT = 5  # ROCKETMQ header: code int16, language int8, version int16, then opaque

Answer = Callable[[RemotingCommand], int | None]


def with_opaque(raw: bytes, opaque: int, rewrite: Mapping[bytes, bytes] | None = None) -> bytes:
    """The captured frame ``raw`` with ``opaque`` and the body substitutions ``rewrite``."""
    word = _INT.unpack_from(raw, 4)[0]
    stype, hlen = (word >> 24) & 0xFF, word & 0xFFFFFF
    header, body = raw[8:8 + hlen], raw[8 + hlen:]
    if stype == 0:
        header, n = _OPAQUE_JSON.subn(b'"opaque":%d' % opaque, header, count=1)
        assert n == 1, "captured JSON header without opaque"
    else:
        header = header[:_OPAQUE_AT] + _INT.pack(opaque) + header[_OPAQUE_AT + 4:]
    for old, new in (rewrite or {}).items():
        body = body.replace(old, new)
    return (_INT.pack(4 + len(header) + len(body)) + _INT.pack(stype << 24 | len(header))
            + header + body)


class ReplayServer:
    """See module docstring."""

    def __init__(self, answers: Mapping[int, Answer],
                 rewrite: Mapping[bytes, bytes] | None = None) -> None:
        self.answers = dict(answers)
        self.rewrite = dict(rewrite or {})
        self.requests: list[RemotingCommand] = []
        self.address = ""
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._changed = asyncio.Event()
        self._push_opaque = 1 << 20  # well away from the client's own counter

    async def __aenter__(self) -> ReplayServer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.address = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._server is not None:
            self._server.close()
        for w in self._writers:
            w.close()  # each read loop then sees EOF and ends by itself
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for w in self._writers:
            try:
                await w.wait_closed()
            except (ConnectionError, OSError):
                pass
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for cmd in decoder.feed_and_decode(data):
                    self._on_command(cmd, writer)
        except (ConnectionError, OSError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    def _on_command(self, cmd: RemotingCommand, writer: asyncio.StreamWriter) -> None:
        if cmd.is_response:
            fut = self._waiting.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
            return
        self.requests.append(cmd)
        self._changed.set()
        answer = self.answers.get(cmd.code)
        if answer is None or cmd.is_oneway:
            return
        frame_id = answer(cmd)
        if frame_id is not None:
            writer.write(with_opaque(frame_bytes(frame_id), cmd.opaque, self.rewrite))

    def requests_of(self, code: int) -> list[RemotingCommand]:
        return [c for c in self.requests if c.code == code]

    async def wait_until(self, what: str, predicate: Callable[[], bool], *,
                         timeout: float = 30) -> None:
        """Re-check ``predicate`` after every request received, up to ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self._changed.clear()
                    if predicate():
                        return
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"replay server: timed out after {timeout}s waiting for "
                                 f"{what}; got codes {[c.code for c in self.requests]}") from None

    async def push(self, frame_id: int, *, timeout: float = 10) -> RemotingCommand | None:
        """Send captured request ``frame_id`` to the newest client; its response, if any."""
        assert self._writers, "no client connected"
        writer = self._writers[-1]
        self._push_opaque += 1
        opaque = self._push_opaque
        raw = with_opaque(frame_bytes(frame_id), opaque)
        oneway = bool(RemotingCommand.decode(raw[4:]).flag & 2)
        if oneway:
            writer.write(raw)
            await writer.drain()
            return None
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._waiting[opaque] = fut
        writer.write(raw)
        await writer.drain()
        async with asyncio.timeout(timeout):
            return await fut
