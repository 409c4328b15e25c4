"""DLedger's entry and index-unit formats, byte for byte (sans-IO).

An entry in a ``data/`` segment::

    magic        int32   1 (``CURRENT_MAGIC``); -1 starts the filler that ends a segment
    size         int32   the whole entry, header included
    index        int64   0, 1, 2, ... without gaps
    term         int64   the leader's term when it was appended
    pos          int64   the entry's own offset in the data stream
    channel      int32   reserved, 0
    chainCrc     int32   never computed by DLedger 0.3.x, 0
    bodyCrc      int32   never computed by DLedger 0.3.x, 0
    bodySize     int32
    body         bodySize bytes (in RocketMQ: one stored commit-log record)

so the body starts ``BODY_OFFSET`` (48) bytes after ``pos``: a message's commit-log offset is
its entry's ``pos + 48``. An entry never straddles two segments: when it does not fit with
``MIN_BLANK_LEN`` (8) bytes to spare, the rest of the segment is a filler (magic -1, then
the bytes left, then zeros) and the entry starts the next segment (``next_entry_pos``).

An index unit (``index/`` segments, unit ``i`` at ``i * 32``, never a filler)::

    magic int32, pos int64, size int32, index int64, term int64

Equality of entries (``same_entry``) is DLedger's ``DLedgerEntry.equals``: size, magic,
index, term, channel, pos and body.

Upstream: ``entry/DLedgerEntry.java``, ``entry/DLedgerEntryCoder.java``,
``store/file/MmapFileList.preAppend`` (the filler), ``DLedgerMmapFileStore.INDEX_UNIT_SIZE``
(dledger 0.3.1.2, the version rocketmq 4.9.7 uses).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["DLedgerEntry", "HEADER", "INDEX_UNIT", "HEADER_SIZE", "BODY_OFFSET", "POS_OFFSET",
           "INDEX_UNIT_SIZE", "CURRENT_MAGIC", "BLANK_MAGIC_CODE", "MIN_BLANK_LEN",
           "encode_entry", "encode_header", "decode_entry", "decode_header", "encode_index_unit",
           "next_entry_pos", "same_entry", "EntryDecodeError"]

CURRENT_MAGIC = 1
BLANK_MAGIC_CODE = -1
MIN_BLANK_LEN = 8
POS_OFFSET = 4 + 4 + 8 + 8
HEADER_SIZE = POS_OFFSET + 8 + 4 + 4 + 4  # 44: everything before bodySize
BODY_OFFSET = HEADER_SIZE + 4  # 48
INDEX_UNIT_SIZE = 32

# magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodySize
HEADER = struct.Struct(">iiqqqiiii")
# magic, pos, size, index, term
INDEX_UNIT = struct.Struct(">iqiqq")
assert HEADER.size == BODY_OFFSET and INDEX_UNIT.size == INDEX_UNIT_SIZE


class EntryDecodeError(ValueError):
    """Bytes that are not a whole entry."""


@dataclass(slots=True)
class DLedgerEntry:
    """One log entry; ``size`` is the whole entry (``HEADER + body``)."""

    index: int
    term: int
    pos: int
    body: bytes
    magic: int = CURRENT_MAGIC
    channel: int = 0
    chain_crc: int = 0
    body_crc: int = 0

    @property
    def size(self) -> int:
        return BODY_OFFSET + len(self.body)

    @property
    def end(self) -> int:
        """The offset just past the entry."""
        return self.pos + self.size

    def __repr__(self) -> str:
        return f"DLedgerEntry(index={self.index}, term={self.term}, pos={self.pos}, size={self.size})"


def encode_header(index: int, term: int, pos: int, body_size: int, *, magic: int = CURRENT_MAGIC,
                  channel: int = 0, chain_crc: int = 0, body_crc: int = 0) -> bytes:
    return HEADER.pack(magic, BODY_OFFSET + body_size, index, term, pos, channel, chain_crc,
                       body_crc, body_size)


def encode_entry(entry: DLedgerEntry) -> bytes:
    """The entry's bytes as a ``data/`` segment holds them."""
    return encode_header(entry.index, entry.term, entry.pos, len(entry.body), magic=entry.magic,
                         channel=entry.channel, chain_crc=entry.chain_crc,
                         body_crc=entry.body_crc) + bytes(entry.body)


def decode_header(buf: object, offset: int = 0) -> tuple[int, int, int, int, int, int, int, int, int]:
    """``(magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodySize)`` at ``offset``."""
    return HEADER.unpack_from(buf, offset)  # type: ignore[arg-type]


def decode_entry(buf: object, offset: int = 0) -> DLedgerEntry:
    """The whole entry at ``offset`` of ``buf`` (bytes, mmap or memoryview).

    Raises:
        EntryDecodeError: a filler, an unknown magic, sizes that disagree, or a short buffer.
    """
    try:
        magic, size, index, term, pos, channel, chain_crc, body_crc, body_size = \
            HEADER.unpack_from(buf, offset)  # type: ignore[arg-type]
    except struct.error as exc:
        raise EntryDecodeError(f"short entry header at {offset}") from exc
    if magic != CURRENT_MAGIC:
        raise EntryDecodeError(f"magic {magic} at {offset}")
    if body_size < 0 or size != BODY_OFFSET + body_size:
        raise EntryDecodeError(f"size {size} != {BODY_OFFSET} + {body_size} at {offset}")
    start = offset + BODY_OFFSET
    body = bytes(buf[start:start + body_size])  # type: ignore[index]
    if len(body) != body_size:
        raise EntryDecodeError(f"short entry body at {offset}")
    return DLedgerEntry(index, term, pos, body, magic, channel, chain_crc, body_crc)


def encode_index_unit(pos: int, size: int, index: int, term: int, magic: int = CURRENT_MAGIC) -> bytes:
    return INDEX_UNIT.pack(magic, pos, size, index, term)


def next_entry_pos(end: int, size: int, file_size: int) -> int:
    """Where an entry of ``size`` bytes goes when the data stream ends at ``end``: there, or at
    the next segment's start when it does not fit with ``MIN_BLANK_LEN`` to spare
    (``MmapFileList.preAppend``). ``end`` at a segment boundary starts that segment."""
    used = end % file_size
    if size + MIN_BLANK_LEN > file_size - used:
        return end - used + file_size
    return end


def same_entry(a: DLedgerEntry, b: DLedgerEntry) -> bool:
    """``DLedgerEntry.equals``."""
    return (a.index == b.index and a.term == b.term and a.pos == b.pos and a.magic == b.magic
            and a.channel == b.channel and len(a.body) == len(b.body) and a.body == b.body)
