"""CPU per send on the broker's hot path, in process: frames in, answers out, no sockets.

A ``BrokerController`` (ASYNC_FLUSH store in a temporary directory, default metrics, no
nameserver) is started on uvloop; one connection is built exactly as its server builds
them (``RemotingServer._make_channel``) on a transport that discards what it is given.
SEND_MESSAGE_V2 frames (``--size`` B bodies, one topic, 4 queues, ``--serialize`` headers:
ROCKETMQ by default, as stock's benchmark Producer is run) are handed to
``Channel.data_received`` in reads of ``--read-kib`` KiB, one read per loop iteration, as
a socket would deliver them; every answer is encoded and written. Process CPU seconds
over ``--messages`` sends, per send, median of ``--runs`` runs (the first run warms up and
is dropped). Decoding, the send handler, the store's append and dispatch, the answer.

The broker's fast failure is off (``broker_fast_failure_enable=False``): with it, a read
whose sends are not all handled within ``wait_time_in_send_queue_ms`` (200 ms; a busy
machine deschedules the process that long) has its later sends answered SYSTEM_BUSY and
not stored, which would time refusals instead of sends. The checks still run on every
send; only their refusal is off. Every send must be stored, or the run fails.

Run: ``.venv/bin/python -m aiorocketmq.bench.send_path_bench`` (from another checkout:
``cd <tree> && <venv>/bin/python -m aiorocketmq.bench.send_path_bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiorocketmq import NO_EXTENSIONS
from aiorocketmq.protocol.codes import RequestCode, SerializeType
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
from aiorocketmq.protocol.message import Message, encode_batch, encode_properties
from aiorocketmq.server.broker.config import BrokerConfig
from aiorocketmq.server.broker.controller import BrokerController
from aiorocketmq.server.store.config import MessageStoreConfig

TOPIC = "SendPathBench"


class NullTransport(asyncio.Transport):
    """Takes every write and drops it; reports a TCP peer.

    ``close()``/``abort()`` call the protocol's ``connection_lost(None)`` on the next loop
    iteration, once, as a socket transport does: ``Channel.wait_closed()`` (and so the
    broker's shutdown) waits for it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self._closing = False
        self._protocol: asyncio.BaseProtocol | None = None

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        assert self._protocol is not None
        return self._protocol

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 10911)}.get(name, default)

    def writelines(self, list_of_data: Any) -> None:
        for piece in list_of_data:
            self.written += len(piece)

    def write(self, data: Any) -> None:
        self.written += len(data)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            if self._protocol is not None:
                asyncio.get_running_loop().call_soon(self._protocol.connection_lost, None)

    def abort(self) -> None:
        self.close()


def frames(count: int, size: int, serialize: SerializeType = SerializeType.ROCKETMQ,
           batch: int = 0) -> list[bytes]:
    if batch:
        return batch_frames(count, size, serialize, batch)
    body = (bytes(range(256)) * (size // 256 + 1))[:size]
    return [_send_frame(RequestCode.SEND_MESSAGE_V2, i % 4,
                        {"UNIQ_KEY": f"7F0000010001{i:020X}", "WAIT": "true", "TAGS": "t"},
                        body, serialize)
            for i in range(count)]


def batch_frames(count: int, size: int, serialize: SerializeType, batch: int) -> list[bytes]:
    """SEND_BATCH_MESSAGE frames of ``batch`` members each, as stock's client sends them:
    each member with its own UNIQ_KEY and WAIT, the batch's header with WAIT only."""
    body = (bytes(range(256)) * (size // 256 + 1))[:size]
    out = []
    n = 0
    for i in range((count + batch - 1) // batch):
        k = min(batch, count - n)
        members = [Message(TOPIC, body, properties={"WAIT": "true",
                                                    "UNIQ_KEY": f"7F0000010001{n + j:020X}"})
                   for j in range(k)]
        n += k
        out.append(_send_frame(RequestCode.SEND_BATCH_MESSAGE, i % 4, {"WAIT": "true"},
                               encode_batch(members), serialize, batch=True))
    return out


def _send_frame(code: int, queue_id: int, properties: dict[str, str], body: bytes,
                serialize: SerializeType, batch: bool = False) -> bytes:
    """One send request to ``TOPIC`` with a SEND_MESSAGE_V2 header, encoded."""
    header = SendMessageRequestHeader(
        producer_group="BenchPG", topic=TOPIC, default_topic="TBW102",
        default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties(properties), reconsume_times=0, batch=batch)
    request = RemotingCommand.create_request(
        code, SendMessageRequestHeaderV2.from_v1(header).to_ext_fields(), body)
    request.serialize_type = serialize
    return request.encode()


def reads(encoded: list[bytes], read_bytes: int) -> list[bytes]:
    out: list[bytes] = []
    cur = bytearray()
    for f in encoded:
        cur += f
        if len(cur) >= read_bytes:
            out.append(bytes(cur[:read_bytes]))
            del cur[:read_bytes]
    if cur:
        out.append(bytes(cur))
    return out


async def run(args: argparse.Namespace) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="send_path_bench") as tmp:
        store = MessageStoreConfig(store_path_root_dir=tmp, mapped_file_size_commit_log=1 << 30,
                                   max_hash_slot_num=50000, max_index_num=200000)
        broker = BrokerController(BrokerConfig(broker_name="bench", listen_port=0,
                                               broker_fast_failure_enable=False), store)
        await broker.start()
        try:
            broker.topics.create_topic_in_send_message_method(TOPIC, "TBW102", "bench", 4, 0)
            channel = broker.server._make_channel()
            transport = NullTransport()
            transport.set_protocol(channel)
            channel.connection_made(transport)
            per_send = []
            for _ in range(args.runs + 1):
                chunks = reads(frames(args.messages, args.size, SerializeType[args.serialize],
                                      args.batch), args.read_kib * 1024)
                await asyncio.sleep(0)
                cpu = time.process_time()
                for chunk in chunks:
                    channel.data_received(chunk)
                    await asyncio.sleep(0)  # one loop iteration per read, as from a socket
                per_send.append((time.process_time() - cpu) / args.messages * 1e6)
            await asyncio.sleep(0)  # a batch's queue units are written on the next iteration
            stored = sum(broker.store.get_max_offset_in_queue(TOPIC, q) for q in range(4))
            assert stored == (args.runs + 1) * args.messages, f"{stored} sends stored"
            channel.close()
            report(args, per_send[1:])  # now: the figures do not depend on the shutdown
            return per_send[1:]
        finally:
            await broker.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--read-kib", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=0,
                        help="SEND_BATCH_MESSAGE of this many members (stock's batch send); "
                             "0: SEND_MESSAGE_V2, one message per send")
    parser.add_argument("--serialize", choices=("ROCKETMQ", "JSON"), default="ROCKETMQ",
                        help="request header encoding (answers use the request's); default "
                             "ROCKETMQ, as stock's benchmark Producer is run")
    parser.add_argument("--python-put", action="store_true",
                        help="the send's properties and the store's put path in Python although "
                             "server/store/_put.c is built (the other C modules stay on): "
                             "its before/after")
    parser.add_argument("--python-header", action="store_true",
                        help="SEND_MESSAGE_V2's header fields in Python (_send_v2_fast) although "
                             "protocol/_command.c's send_v2_header is built: its before/after")
    args = parser.parse_args()
    if args.python_header:
        from aiorocketmq.protocol import headers
        headers._c_send_v2_header = None  # type: ignore[assignment]
    if args.python_put:
        from aiorocketmq.server.broker.processors import send
        from aiorocketmq.server.store import commit_log, index
        commit_log._write_record = None  # type: ignore[assignment]
        index._index_put = None  # type: ignore[assignment]
        send._send_properties = None  # type: ignore[assignment]
    logging.disable(logging.WARNING)
    import uvloop
    uvloop.run(run(args))


def report(args: argparse.Namespace, per_send: list[float]) -> None:
    print(f"send path: {statistics.median(per_send):.2f} us CPU per message (median of {args.runs}; "
          f"runs {', '.join(f'{x:.2f}' for x in per_send)}), {args.size} B bodies, "
          f"{f'batches of {args.batch}, ' if args.batch else ''}"
          f"{args.read_kib} KiB reads, {args.serialize} headers, C extensions "
          f"{'off' if NO_EXTENSIONS else 'on'}{', Python put' if args.python_put else ''}"
          f"{', Python send header' if args.python_header else ''}",
          flush=True)


if __name__ == "__main__":
    main()
