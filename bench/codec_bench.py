"""Encode and decode rates of RemotingCommand for two typical frames, in both header types.

* SEND_MESSAGE_V2 request: a captured 4.9.7 frame (JSON and ROCKETMQ captures).
* PULL_MESSAGE response with a 32-message body: the captured records of frame 60 (an
  11-message pull body) repeated until there are 32; each stored record carries its own
  length, so repeating whole records keeps the body well formed.

Then the ROCKETMQ header alone (the broker's send path: a captured SEND_MESSAGE_V2 request
decoded, its captured response encoded), in µs per call through ``RemotingCommand``'s codec
(C where ``protocol/_command.c`` is built) and through the Python reference; and the JSON
header decode of the same request for comparison.

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

from aiorocketmq.bench._frames import body_bytes, frame_bytes, frames_where
from aiorocketmq.protocol import command as command_module
from aiorocketmq.protocol.codes import RequestCode, SerializeType
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.frame import FrameDecoder

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


def send_response(serialize: str) -> RemotingCommand:
    rec = frames_where(request_code=RequestCode.SEND_MESSAGE_V2, is_response=True,
                       serialize=serialize)[0]
    return RemotingCommand.decode(frame_bytes(rec["id"])[4:])


def header_codec() -> None:
    """µs per ROCKETMQ header decode / encode: the codec as dispatched, and Python's."""
    request, response = send_request("ROCKETMQ"), send_response("ROCKETMQ")
    header = memoryview(request.encode_header())
    cls = RemotingCommand
    json_header = memoryview(send_request("JSON").encode_header())
    native = ("C" if command_module._c_decode_rocketmq is not None
              else "off: not built, or AIOROCKETMQ_NO_EXTENSIONS")
    cases: list[tuple[str, Callable[[], object], Callable[[], object] | None]] = [
        (f"decode SEND_MESSAGE_V2 request ({len(header)} B)",
         lambda: cls._decode_rocketmq_header(header),
         lambda: cls._decode_rocketmq_header_py(header)),
        ("encode SEND_MESSAGE_V2 request", request._encode_rocketmq_header,
         request._encode_rocketmq_header_py),
        (f"encode its response ({len(response.encode_header())} B)",
         response._encode_rocketmq_header, response._encode_rocketmq_header_py),
        (f"JSON: decode the request ({len(json_header)} B)",
         lambda: cls._decode_json_header(json_header), None),
    ]
    print(f"ROCKETMQ header codec, µs per call (codec: {native}; then the Python reference)")
    for name, codec, reference in cases:
        line = f"  {name:<40} {1e6 / rate(codec):>7.3f} µs"
        if reference is not None:
            line += f"   python {1e6 / rate(reference):>7.3f} µs"
        print(line)


def main() -> None:
    print(f"python {sys.version.split()[0]}; rates in commands per second")
    bench("SEND_MESSAGE_V2 request", send_request("JSON"))
    bench("SEND_MESSAGE_V2 request", send_request("ROCKETMQ"))
    bench("PULL_MESSAGE resp 32 msgs", pull_response_32(SerializeType.JSON))
    bench("PULL_MESSAGE resp 32 msgs", pull_response_32(SerializeType.ROCKETMQ))
    header_codec()


if __name__ == "__main__":
    main()
