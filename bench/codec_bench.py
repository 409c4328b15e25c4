"""Encode and decode rates of RemotingCommand for two typical frames, in both header types.

* SEND_MESSAGE_V2 request: a captured 4.9.7 frame (JSON and ROCKETMQ captures).
* PULL_MESSAGE response with a 32-message body: the captured records of frame 60 (an
  11-message pull body) repeated until there are 32; each stored record carries its own
  length, so repeating whole records keeps the body well formed.

Prints one line per case; asserts nothing. Run: ``.venv/bin/python -m aiorocketmq.bench.codec_bench``.
"""

from __future__ import annotations

import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiorocketmq.protocol.codes import RequestCode, SerializeType
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.frame import FrameDecoder
from tests.vectors import body_bytes, frame_bytes, frames_where

_INT = struct.Struct(">i")


def send_request(serialize: str) -> RemotingCommand:
    rec = frames_where(code=RequestCode.SEND_MESSAGE_V2, is_response=False, serialize=serialize)[0]
    return RemotingCommand.decode(frame_bytes(rec["id"])[4:])


def pull_response_32(stype: int) -> RemotingCommand:
    body = body_bytes(60)
    records: list[bytes] = []
    pos = 0
    while pos < len(body):
        size = _INT.unpack_from(body, pos)[0]
        records.append(body[pos : pos + size])
        pos += size
    big = b"".join(records[i % len(records)] for i in range(32))
    cmd = RemotingCommand.decode(frame_bytes(60)[4:])
    cmd.body = big
    cmd.serialize_type = stype
    return cmd


def rate(fn: Callable[[], object], budget: float = 0.4) -> float:
    """Calls per second of ``fn``, measured over about ``budget`` seconds."""
    n = 0
    batch = 200
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        n += batch
        elapsed = time.perf_counter() - start
        if elapsed >= budget:
            return n / elapsed


def bench(name: str, cmd: RemotingCommand) -> None:
    encode_parts = cmd.encode_parts
    wire = cmd.encode()
    payload = wire[4:]
    decode = RemotingCommand.decode
    enc = rate(encode_parts)
    dec = rate(lambda: decode(payload))

    # The read path as the Channel runs it: 64 frames per feed through FrameDecoder.
    stream = wire * 64

    def feed() -> None:
        FrameDecoder().feed_and_decode(stream)

    stream_rate = rate(feed) * 64
    stype = SerializeType(cmd.serialize_type).name
    print(f"{name:<28} {stype:<8} frame={len(wire):>6}B  encode {enc:>10,.0f}/s  "
          f"decode {dec:>10,.0f}/s  stream-decode {stream_rate:>10,.0f}/s")


def main() -> None:
    print(f"python {sys.version.split()[0]}; rates in commands per second")
    bench("SEND_MESSAGE_V2 request", send_request("JSON"))
    bench("SEND_MESSAGE_V2 request", send_request("ROCKETMQ"))
    bench("PULL_MESSAGE resp 32 msgs", pull_response_32(SerializeType.JSON))
    bench("PULL_MESSAGE resp 32 msgs", pull_response_32(SerializeType.ROCKETMQ))


if __name__ == "__main__":
    main()
