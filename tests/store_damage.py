"""Damage a stopped broker's store the same way for ours and for stock RocketMQ 4.9.7, then
judge what a consumer gets back.

Both stores share one layout under ``storePathRootDir``: ``commitlog/<20-digit offset>``
segments, ``consumequeue/<topic>/<queueId>/<20-digit offset>`` files of 20-byte units,
``index/``, ``checkpoint`` and the ``abort`` marker. Commit-log records are the stock ones
(``protocol/message.py``): 4-byte TOTALSIZE, 4-byte MAGICCODE (0xdaa320a7 a message,
0xcbd43194 the end-of-segment filler), ... The checkpoints differ: stock's is a 4 KiB page
with three timestamps at 0/8/16; ours adds the commit-log offsets they stand for and a CRC
(``server/store/checkpoint.py``), so :func:`checkpoint_beyond` takes the flavour.

Every damage function returns a :class:`Damage` whose ``first_bad_offset`` is the
commit-log offset of the first byte it spoiled (None: the commit log is untouched); every
record ending at or before it is intact, and a broker that recovers properly serves all of
them. :func:`classify` sorts what a consumer got back into intact, corrupted and missing.

The scenario both process-level suites run (``tests/integration/test_store_damage.py``
for ours, ``tests/interop/test_stock_store_damage.py`` beside stock) is here too:
:data:`CASES` and :func:`apply_case`, :func:`fill` (3,000 sync sends of 1 KiB bodies with
keys, by our producer), :func:`read_back` (a non-suspending pull of every queue from
offset 0, each record decoded alone) and :func:`query_key`.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import struct
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from aiorocketmq.client import Message, MessageQueue, Producer, PullStatus, SendStatus
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.api import MQClientAPI
from aiorocketmq.protocol.bodies import TopicConfig, build_subscription_data
from aiorocketmq.protocol.codes import PullSysFlag
from aiorocketmq.protocol.errors import MQBrokerError, TopicNotExistError
from aiorocketmq.protocol.headers import PullMessageRequestHeader
from aiorocketmq.protocol.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MessageDecodeError,
    MessageExt,
    decode_message,
)

MAGIC_MESSAGE = MESSAGE_MAGIC_CODE & 0xFFFFFFFF  # 0xdaa320a7
MAGIC_BLANK = BLANK_MAGIC_CODE & 0xFFFFFFFF  # 0xcbd43194
_HEAD = struct.Struct(">iI")  # TOTALSIZE, MAGICCODE
_LONG = struct.Struct(">q")

SEGMENT_SIZE = 1024 * 1024
CQ_FILE_SIZE = 6000  # 300 units: a queue of 750 messages has three files
TOPIC = "StoreDamage"
QUEUES = 4
COUNT = 3000
BODY_SIZE = 1024
SEED = 20240917

# broker.conf entries ours and stock both get for these scenarios.
STORE_CONF = {
    "mappedFileSizeCommitLog": str(SEGMENT_SIZE),
    "mappedFileSizeConsumeQueue": str(CQ_FILE_SIZE),
    "maxHashSlotNum": "50000",
    "maxIndexNum": "200000",
    "flushDiskType": "ASYNC_FLUSH",
    "autoCreateTopicEnable": "true",
}

# -- the layout -------------------------------------------------------------------------------


def segments(store: Path) -> list[Path]:
    """The commit-log segments, oldest first (20-digit names sort as offsets)."""
    return sorted(p for p in (store / "commitlog").iterdir() if p.name.isdigit())


def newest_segment(store: Path) -> Path:
    found = segments(store)
    assert found, f"no commit-log segment under {store}"
    return found[-1]


def segment_base(segment: Path) -> int:
    return int(segment.name)


def _walk(data: bytes | bytearray) -> tuple[list[tuple[int, int]], int]:
    """(position, TOTALSIZE) of each message record from the segment start, and where the
    written data ends: at the filler, at the first position holding no message record, or at
    the end of the data."""
    records = []
    pos = 0
    while pos + _HEAD.size <= len(data):
        total, magic = _HEAD.unpack_from(data, pos)
        if magic != MAGIC_MESSAGE or total <= 0 or pos + total > len(data):
            break  # MAGIC_BLANK (the filler), zeros, or a cut record
        records.append((pos, total))
        pos += total
    return records, pos


def written_end(segment: Path) -> int:
    """Position in ``segment`` just past its last whole message record."""
    return _walk(segment.read_bytes())[1]


@dataclass(frozen=True)
class Record:
    """One message record of a commit log, as written."""

    offset: int  # commit-log offset
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    keys: str

    @property
    def end(self) -> int:
        return self.offset + self.size


def walk_records(store: Path) -> list[Record]:
    """Every message record of the store's commit log, oldest first (each decoded with its
    body CRC checked: call it on an undamaged store)."""
    out = []
    for seg in segments(store):
        data = seg.read_bytes()
        base = segment_base(seg)
        for pos, _total in _walk(data)[0]:
            msg, end = decode_message(data, pos, decompress=False, check_crc=True)
            out.append(Record(base + pos, end - pos, msg.topic, msg.queue_id, msg.queue_offset,
                              msg.body, msg.properties.get("KEYS", "")))
    return out


def describe_offset(store: Path, offset: int) -> str:
    """Which record and field a commit-log offset falls in (for a failure message)."""
    seg = next((s for s in reversed(segments(store)) if segment_base(s) <= offset), None)
    if seg is None:
        return f"offset {offset}: before the first segment"
    data = seg.read_bytes()
    for pos, total in _walk(data)[0]:
        rel = offset - segment_base(seg) - pos
        if 0 <= rel < total:
            fields = [(0, "TOTALSIZE"), (4, "MAGICCODE"), (8, "BODYCRC"), (12, "QUEUEID"),
                      (16, "FLAG"), (20, "QUEUEOFFSET"), (28, "PHYSICALOFFSET"), (36, "SYSFLAG"),
                      (40, "BORNTIMESTAMP"), (48, "BORNHOST"), (56, "STORETIMESTAMP"),
                      (64, "STOREHOST"), (72, "RECONSUMETIMES"), (76, "PREPAREDOFFSET"),
                      (84, "BODYLENGTH"), (88, "BODY")]
            name = [n for start, n in fields if rel >= start][-1]
            if name == "BODY":
                body_len = struct.unpack_from(">i", data, pos + 84)[0]
                if rel >= 88 + body_len:
                    name = "TOPIC/PROPERTIES"
            return f"offset {offset}: record at {segment_base(seg) + pos} (+{rel}, {name})"
    return f"offset {offset}: past the last whole record of {seg.name}"


# -- damage -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Damage:
    """What a damage function did. ``first_bad_offset``: commit-log offset of the first byte
    it spoiled, None when the commit log is untouched."""

    kind: str
    first_bad_offset: int | None
    detail: str

    def intact_before(self, records: Iterable[Record]) -> list[Record]:
        """The records the damage left whole."""
        if self.first_bad_offset is None:
            return list(records)
        return [r for r in records if r.end <= self.first_bad_offset]


def flip_bits(store: Path, *, bits: int = 20, seed: int = SEED, window: int = 64 * 1024) -> Damage:
    """Flip ``bits`` distinct bits at seeded-random positions within the last ``window`` bytes
    of written data of the newest commit-log segment."""
    seg = newest_segment(store)
    data = bytearray(seg.read_bytes())
    end = _walk(data)[1]
    start = max(0, end - window)
    rng = random.Random(seed)
    positions = sorted(rng.sample(range(start * 8, end * 8), bits))
    for bit in positions:
        data[bit // 8] ^= 1 << (bit % 8)
    seg.write_bytes(data)
    first = segment_base(seg) + positions[0] // 8
    return Damage("flip_bits", first, f"{bits} bits in {seg.name}[{start}:{end}] (seed {seed}), "
                  f"bytes {sorted({b // 8 for b in positions})}")


def zero_tail(store: Path, *, nbytes: int = 8 * 1024) -> Damage:
    """Zero the last ``nbytes`` of written data of the newest commit-log segment."""
    seg = newest_segment(store)
    data = bytearray(seg.read_bytes())
    end = _walk(data)[1]
    start = max(0, end - nbytes)
    data[start:end] = bytes(end - start)
    seg.write_bytes(data)
    return Damage("zero_tail", segment_base(seg) + start, f"{seg.name}[{start}:{end}] zeroed")


def truncate_newest(store: Path, *, cut_back: int = 20_000) -> Damage:
    """Cut the newest commit-log segment short, ``cut_back`` bytes before its written end
    (the file ends inside a record)."""
    seg = newest_segment(store)
    end = written_end(seg)
    keep = max(0, end - cut_back)
    with seg.open("r+b") as fh:
        fh.truncate(keep)
    return Damage("truncate", segment_base(seg) + keep,
                  f"{seg.name} cut to {keep} bytes (data written to {end})")


def consume_queue_files(store: Path, topic: str, queue_id: int) -> list[Path]:
    d = store / "consumequeue" / topic / str(queue_id)
    return sorted(p for p in d.iterdir() if p.name.isdigit())


def zero_consume_queue_file(store: Path, topic: str, queue_id: int, *, index: int = 0) -> Damage:
    """Zero the ``index``-th file of one consume queue (its size kept)."""
    files = consume_queue_files(store, topic, queue_id)
    path = files[index]
    path.write_bytes(bytes(path.stat().st_size))
    return Damage("zero_consume_queue", None,
                  f"consumequeue/{topic}/{queue_id}/{path.name} zeroed ({len(files)} files)")


def delete_index(store: Path) -> Damage:
    shutil.rmtree(store / "index")
    return Damage("delete_index", None, "index/ deleted")


def garbage_checkpoint(store: Path, *, seed: int = SEED) -> Damage:
    """Overwrite the whole checkpoint file with seeded-random bytes (its size kept)."""
    path = store / "checkpoint"
    size = path.stat().st_size
    path.write_bytes(random.Random(seed).randbytes(size))
    return Damage("garbage_checkpoint", None, f"checkpoint ({size} bytes) overwritten")


def checkpoint_beyond(store: Path, flavor: Literal["ours", "stock"], *,
                      beyond: int = 8 * 1024) -> Damage:
    """A checkpoint claiming data beyond what is written: timestamps a day ahead and, in ours,
    the physic/logics/index offsets ``beyond`` bytes past the written end of the log."""
    path = store / "checkpoint"
    future = int(time.time() * 1000) + 24 * 3600 * 1000
    seg = newest_segment(store)
    claimed = segment_base(seg) + written_end(seg) + beyond
    if flavor == "stock":
        data = bytearray(path.read_bytes())
        for at in (0, 8, 16):
            _LONG.pack_into(data, at, future)
        path.write_bytes(data)
        return Damage("checkpoint_beyond", None, f"stock checkpoint timestamps set to {future}")
    from aiorocketmq.server.store.checkpoint import StoreCheckpoint

    cp = StoreCheckpoint(str(path))
    assert cp.loaded_ok, "our checkpoint did not load before the damage"
    cp.physic_msg_timestamp = cp.logics_msg_timestamp = cp.index_msg_timestamp = future
    cp.physic_offset = cp.logics_offset = cp.index_offset = claimed
    cp.flush()
    return Damage("checkpoint_beyond", None, f"checkpoint offsets set to {claimed}, timestamps to {future}")


def add_abort(store: Path) -> None:
    """The ``abort`` marker a crashed broker leaves."""
    (store / "abort").touch()


# -- the cases both suites run ----------------------------------------------------------------

DAMAGED_QUEUE = 1  # the consume queue zero_consume_queue spoils

CASES = (
    "flip_bits",
    "flip_bits_abort",
    "zero_tail",
    "truncate",
    "zero_consume_queue",
    "delete_index",
    "garbage_checkpoint",
    "checkpoint_beyond",
    "checkpoint_beyond_abort",
)
# Cases that spoil commit-log records: a broker must drop them and say so.
LOG_DAMAGE = frozenset({"flip_bits", "flip_bits_abort", "zero_tail", "truncate"})


def apply_case(store: Path, case: str, flavor: Literal["ours", "stock"]) -> Damage:
    """Damage a stopped broker's ``store`` as ``case`` says (same seed for every flavour)."""
    if case in ("flip_bits", "flip_bits_abort"):
        damage = flip_bits(store)
    elif case == "zero_tail":
        damage = zero_tail(store)
    elif case == "truncate":
        damage = truncate_newest(store)
    elif case == "zero_consume_queue":
        damage = zero_consume_queue_file(store, TOPIC, DAMAGED_QUEUE)
    elif case == "delete_index":
        damage = delete_index(store)
    elif case == "garbage_checkpoint":
        damage = garbage_checkpoint(store)
    elif case in ("checkpoint_beyond", "checkpoint_beyond_abort"):
        damage = checkpoint_beyond(store, flavor)
    else:
        raise ValueError(f"unknown case {case!r}")
    if case.endswith("_abort"):
        add_abort(store)
    return damage


def copy_store(pristine: Path, dest: Path) -> Path:
    """A copy of a stopped broker's store to damage (the pristine one serves every case)."""
    shutil.copytree(pristine, dest)
    return dest


# -- what a consumer got back -----------------------------------------------------------------


@dataclass
class Served:
    """Records a broker served: decoded ones, a note for each body that stopped decoding, and
    each request the broker refused (its queue was read no further)."""

    messages: list[MessageExt] = field(default_factory=list)
    undecodable: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class Classified:
    intact: set[int]  # indices of sent messages served with their body and a matching BODYCRC
    corrupted: list[str]  # served records not intact: unknown body, CRC mismatch, undecodable
    missing: set[int]  # indices sent and never served intact
    duplicates: int  # intact records served more than once
    errors: list[str]  # requests the broker refused while reading

    def summary(self) -> str:
        text = (f"{len(self.intact)} intact, {len(self.corrupted)} corrupted, "
                f"{len(self.missing)} missing, {self.duplicates} duplicates")
        if self.errors:
            text += f", {len(self.errors)} refused reads ({self.errors[0]})"
        return text


def body_crc(body: bytes) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


def classify(sent: Mapping[bytes, int], served: Served) -> Classified:
    """``sent`` maps each body sent to its index."""
    intact: set[int] = set()
    corrupted = list(served.undecodable)
    duplicates = 0
    for m in served.messages:
        index = sent.get(m.body)
        if body_crc(m.body) != m.body_crc:
            corrupted.append(f"queue {m.queue_id} offset {m.queue_offset} (log {m.commit_log_offset}): "
                             f"BODYCRC {m.body_crc} does not match its body")
        elif index is None:
            corrupted.append(f"queue {m.queue_id} offset {m.queue_offset} (log {m.commit_log_offset}): "
                             f"a body never sent ({m.body[:24]!r}...)")
        elif index in intact:
            duplicates += 1
        else:
            intact.add(index)
    missing = set(sent.values()) - intact
    return Classified(intact, corrupted, missing, duplicates, list(served.errors))


def split_records(body: bytes, note: str) -> Served:
    """A pull body's records decoded one by one; the first that does not decode ends it."""
    out = Served()
    pos = 0
    while pos < len(body):
        try:
            msg, pos = decode_message(body, pos, decompress=False)
        except MessageDecodeError as exc:
            out.undecodable.append(f"{note}: {exc}")
            break
        out.messages.append(msg)
    return out


# -- the scenario: fill, read back, query -----------------------------------------------------


def message_body(i: int) -> bytes:
    """A distinct ``BODY_SIZE``-byte ASCII body naming its index."""
    head = f"store-damage-{i:05d}|".encode()
    filler = (f"{i * 7919 % 100003:06d}".encode() * (BODY_SIZE // 6 + 1))
    return (head + filler)[:BODY_SIZE]


def message_key(i: int) -> str:
    return f"sdkey-{i:05d}"


async def fill(namesrv_addr: str, broker_addr: str, broker_name: str, *, count: int = COUNT,
               senders: int = 8) -> dict[bytes, int]:
    """Create ``TOPIC`` with ``QUEUES`` queues, then send ``count`` messages with our producer
    (sync sends, ``senders`` at a time; message i to queue i % QUEUES, key ``message_key(i)``).
    Returns body -> index."""
    async with MQAdmin(namesrv_addr, timeout=10.0) as admin:
        await admin.create_topic(broker_addr, TopicConfig(topic_name=TOPIC, read_queue_nums=QUEUES,
                                                          write_queue_nums=QUEUES))
        for _ in range(300):  # the broker registers the topic with the nameserver
            try:
                route = await admin.topic_route(TOPIC)
            except TopicNotExistError:
                route = None
            if route is not None and any(q.write_queue_nums == QUEUES for q in route.queue_datas):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"no route of {TOPIC} with {QUEUES} queues on {namesrv_addr}")
    sent = {message_body(i): i for i in range(count)}
    assert len(sent) == count
    async with Producer("PG-StoreDamage", namesrv_addr, send_msg_timeout_ms=10_000) as producer:
        async def sender(k: int) -> None:
            for i in range(k, count, senders):
                msg = Message(TOPIC, message_body(i), keys=message_key(i))
                r = await producer.send(msg, MessageQueue(TOPIC, broker_name, i % QUEUES))
                assert r.status is SendStatus.SEND_OK, (i, r)

        await asyncio.gather(*(sender(k) for k in range(senders)))
    return sent


async def read_queue(api: MQClientAPI, addr: str, broker_name: str, queue_id: int, *,
                     timeout: float = 10.0, max_pulls: int = 2000) -> Served:
    """Every record of one queue of ``TOPIC`` from offset 0: pulls without suspending or
    committing, 32 at a time, until the queue's max offset (moving past offsets the broker
    skips: OFFSET_MOVED, NO_MATCHED). A request the broker refuses ends the queue's read and
    is noted in ``Served.errors``."""
    mq = MessageQueue(TOPIC, broker_name, queue_id)
    sub = build_subscription_data(TOPIC, "*")
    out = Served()
    try:
        high = await api.get_max_offset(addr, mq, timeout)
    except MQBrokerError as exc:
        out.errors.append(f"queue {queue_id} max offset: {exc}")
        return out
    offset = 0
    for _ in range(max_pulls):
        if offset >= high:
            break
        header = PullMessageRequestHeader(
            consumer_group="CG-StoreDamage", topic=TOPIC, queue_id=queue_id, queue_offset=offset,
            max_msg_nums=32,
            sys_flag=PullSysFlag.build(commit_offset=False, suspend=False, subscription=True),
            commit_offset=0, suspend_timeout_millis=0, subscription=sub.sub_string, sub_version=0,
            expression_type="TAG", bname=broker_name)
        try:
            r = await api.pull_message(addr, header, timeout, decode=False)
        except MQBrokerError as exc:
            out.errors.append(f"queue {queue_id} pull at {offset}: {exc}")
            break
        if r.status is PullStatus.FOUND and r.body:
            part = split_records(r.body, f"queue {queue_id} pull at {offset}")
            out.messages += part.messages
            out.undecodable += part.undecodable
        if r.next_begin_offset <= offset:
            break
        offset = r.next_begin_offset
    return out


async def read_back(namesrv_addr: str, addr: str, broker_name: str,
                    queue_ids: Sequence[int] = tuple(range(QUEUES))) -> dict[int, Served]:
    """What the broker at ``addr`` serves of each queue of ``TOPIC``."""
    async with MQAdmin(namesrv_addr, timeout=10.0) as admin:
        return {q: await read_queue(admin.api, addr, broker_name, q) for q in queue_ids}


async def query_key(namesrv_addr: str, addr: str, key: str) -> list[MessageExt]:
    """QUERY_MESSAGE by key straight to the broker at ``addr`` (the records that carry it)."""
    async with MQAdmin(namesrv_addr, timeout=10.0) as admin:
        return await admin.api.query_message(addr, TOPIC, key, max_num=32, timeout=10.0)


def merge(served: Mapping[int, Served]) -> Served:
    out = Served()
    for part in served.values():
        out.messages += part.messages
        out.undecodable += part.undecodable
        out.errors += part.errors
    return out
