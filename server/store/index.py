"""Message key index: ``topic#key`` -> commit-log offsets, persisted in hash-slot files.

Contract (docs/PROTOCOL.md 4.10): every record except a transactional ROLLBACK is indexed
under ``topic#UNIQ_KEY`` and ``topic#k`` for each space-separated entry ``k`` of ``KEYS``.
``query`` returns commit-log offsets of candidate records, newest files first; a
candidate may be a hash collision (the store's ``query_message`` re-checks the record).

File format: upstream's ``IndexFile``, one file per ``max_index_num`` entries, named by
its creation time (``yyyyMMddHHmmssSSS``) under ``<root>/index``::

    header (40 B)  beginTimestamp i64, endTimestamp i64, beginPhyOffset i64,
                   endPhyOffset i64, hashSlotCount i32, indexCount i32 (starts at 1)
    slots          max_hash_slot_num x i32: number of the newest entry in this slot
    entries        max_index_num x (keyHash i32, phyOffset i64, timeDiff i32 seconds
                   since beginTimestamp, prevIndex i32), entry 0 unused

so a file is bounded (``40 + 4*slots + 20*entries`` bytes), lookups follow one chain,
and it is rebuildable from the commit log: ``recover`` cuts the entries of records at
or beyond the checkpoint's index offset out of the file that holds them (``truncate``),
destroys the newer files, and returns the commit-log offset from which the dispatcher
must re-index (the end of the last file kept).

Key hash: upstream's ``abs(String.hashCode())`` is a Python loop per character, the
dearest step of a put. Files we create hash keys with CRC-32 instead (C speed; the format
is otherwise upstream's, and only this broker reads it): such a file carries
``CRC32_MAGIC`` as the key hash of its unused entry 0, and a file without it (written
before, or by upstream) keeps the Java hash, so old indexes still answer queries.

Divergence: upstream compares ``begin`` against the entry's time truncated to whole
seconds, so a message stored in the same second just after ``begin`` is missed; we
allow for the truncation.

Upstream: ``store/index/IndexService.java``, ``IndexFile.java``, ``IndexHeader.java``.
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
import zlib

from aiorocketmq import refuse_extension
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.javautil import java_string_hash

from .mapped_file import MappedFile, sweep_creating

# A CRC-32 keyed file's entry, slot and header written by one C call (server/store/_put.c),
# else None: the Python lines of ``IndexFile.put_key`` below, its reference.
try:
    refuse_extension("aiorocketmq.server.store._put")
    from ._put import index_put as _index_put
    from ._put import index_put_many as _index_put_many
except ImportError:
    _index_put = None  # type: ignore[assignment]
    _index_put_many = None  # type: ignore[assignment]

__all__ = ["IndexFile", "IndexService", "QueryOffsetResult"]

log = get_logger("aiorocketmq.store")

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
INVALID_INDEX = 0

_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_I32 = struct.Struct(">i")
_i32_at = _I32.unpack_from
_i32_into = _I32.pack_into
_entry_into = _ENTRY.pack_into
_header_into = _HEADER.pack_into
_crc32 = zlib.crc32
CRC32_MAGIC = 0x43524331  # "CRC1" in entry 0's key-hash field: keys hashed by crc32_key_hash


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``abs(key.hashCode())``, 0 for ``Integer.MIN_VALUE``."""
    h = abs(java_string_hash(key))
    return 0 if h > 0x7FFFFFFF else h


def crc32_key_hash(key: str) -> int:
    """The key hash of files marked with ``CRC32_MAGIC``: CRC-32 of the UTF-8 key, 31 bits."""
    return zlib.crc32(key.encode("utf-8")) & 0x7FFFFFFF


def build_key(topic: str, key: str) -> str:
    return topic + "#" + key


class IndexFile:
    """One index file (hash slots + chained entries) in a mapping."""

    __slots__ = ("mf", "hash_slot_num", "index_num", "begin_timestamp", "end_timestamp",
                 "begin_phy_offset", "end_phy_offset", "hash_slot_count", "index_count", "dirty",
                 "key_hash", "_entries_base")

    def __init__(self, path: str, hash_slot_num: int, index_num: int, *, create: bool,
                 end_phy_offset: int = 0, end_timestamp: int = 0,
                 preallocate: bool = False) -> None:
        size = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE
        entries_base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        # The header, the hash slots (written anywhere) and the first entries reserved at
        # creation; later entries as they come (ensure_capacity, put_key).
        self.mf = MappedFile(path, 0, size, create=create, preallocate=preallocate,
                             allocate=entries_base + 2 * INDEX_SIZE)
        self.mf.wrote_position = size
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.dirty = create
        self._entries_base = entries_base
        if create:
            self.begin_timestamp = self.end_timestamp = end_timestamp
            self.begin_phy_offset = self.end_phy_offset = end_phy_offset
            self.hash_slot_count = 0
            self.index_count = 1
            self._write_header()
            _ENTRY.pack_into(self.mf.mm, self._entries_base, CRC32_MAGIC, 0, 0, 0)
            self.key_hash = crc32_key_hash
        else:
            (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
             self.hash_slot_count, self.index_count) = _HEADER.unpack_from(self.mf.mm, 0)
            marked = _I32.unpack_from(self.mf.mm, self._entries_base)[0] == CRC32_MAGIC
            self.key_hash = crc32_key_hash if marked else index_key_hash

    @property
    def path(self) -> str:
        return self.mf.path

    def _write_header(self) -> None:
        _HEADER.pack_into(self.mf.mm, 0, self.begin_timestamp, self.end_timestamp,
                          self.begin_phy_offset, self.end_phy_offset, self.hash_slot_count,
                          self.index_count)

    @property
    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    @property
    def is_empty(self) -> bool:
        return self.index_count <= 1

    def header_problem(self) -> str:
        """Why this file's header cannot be one this store wrote ("" when it can)."""
        if not 1 <= self.index_count <= self.index_num:
            return f"index count {self.index_count} outside 1..{self.index_num}"
        if not 0 <= self.hash_slot_count <= self.hash_slot_num:
            return f"hash slot count {self.hash_slot_count} outside 0..{self.hash_slot_num}"
        if self.begin_phy_offset < 0 or self.end_phy_offset < self.begin_phy_offset:
            return f"offsets {self.begin_phy_offset}..{self.end_phy_offset}"
        return ""

    def reserve_entries(self, n: int) -> None:
        """Reserve the disk blocks of the slots and the next ``n`` entries. Raises OSError."""
        self.mf.allocate_to(self._entries_base + (self.index_count + n) * INDEX_SIZE)

    def put_keys(self, prefix: str, keys: list[str], phy_offsets: list[int],
                 store_timestamp: int) -> bool:
        """``put_key(prefix + keys[i], phy_offsets[i], store_timestamp)`` for each key in
        turn, in one C call (``_put.index_put_many``); False, nothing written, unless this
        CRC-32 keyed file has room for all of them and the C module is in use."""
        count = self.index_count
        n = len(keys)
        if _index_put_many is None or self.key_hash is not crc32_key_hash or not n \
                or count + n > self.index_num:
            return False
        if self._entries_base + (count + n) * INDEX_SIZE > self.mf.allocated:
            self.reserve_entries(n)
        if count <= 1:
            self.begin_phy_offset = phy_offsets[0]
            self.begin_timestamp = store_timestamp
        self.hash_slot_count = _index_put_many(
            self.mf.mm, self.hash_slot_num, self._entries_base, count, prefix.encode("utf-8"),
            keys, phy_offsets, store_timestamp, self.begin_timestamp, self.begin_phy_offset,
            self.hash_slot_count)
        self.index_count = count + n
        self.end_phy_offset = phy_offsets[-1]
        self.end_timestamp = store_timestamp
        self.dirty = True
        return True

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add one entry; False when the file is full. Raises OSError (no disk for it)."""
        count = self.index_count
        if count >= self.index_num:
            return False
        if self._entries_base + (count + 1) * INDEX_SIZE > self.mf.allocated:
            self.reserve_entries(1)
        mm = self.mf.mm
        crc_keyed = self.key_hash is crc32_key_hash
        if crc_keyed and _index_put is not None:
            if count <= 1:
                self.begin_phy_offset = phy_offset
                self.begin_timestamp = store_timestamp
            self.hash_slot_count = _index_put(
                mm, self.hash_slot_num, self._entries_base, count, key, phy_offset,
                store_timestamp, self.begin_timestamp, self.begin_phy_offset,
                self.hash_slot_count)
            self.index_count = count + 1
            self.end_phy_offset = phy_offset
            self.end_timestamp = store_timestamp
            self.dirty = True
            return True
        key_hash = (_crc32(key.encode("utf-8")) & 0x7FFFFFFF if crc_keyed
                    else self.key_hash(key))
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        slot_value = _i32_at(mm, slot_pos)[0]
        if slot_value <= INVALID_INDEX or slot_value > count:
            slot_value = INVALID_INDEX
        if count <= 1:
            # The first entry fixes the file's time base (upstream sets it after computing
            # timeDiff, which leaves the first entry's diff 0 all the same).
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        begin_ts = self.begin_timestamp
        time_diff = 0
        if begin_ts > 0:
            time_diff = (store_timestamp - begin_ts) // 1000
            if time_diff < 0:
                time_diff = 0
            elif time_diff > 0x7FFFFFFF:
                time_diff = 0x7FFFFFFF
        # Entry, slot, then header, in that order (as before): the header's count covers
        # an entry only once the entry and its slot are written.
        _entry_into(mm, self._entries_base + count * INDEX_SIZE, key_hash, phy_offset, time_diff,
                    slot_value)
        _i32_into(mm, slot_pos, count)
        if slot_value == INVALID_INDEX:
            self.hash_slot_count += 1
        count += 1
        self.index_count = count
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        _header_into(mm, 0, begin_ts, store_timestamp, self.begin_phy_offset, phy_offset,
                     self.hash_slot_count, count)
        self.dirty = True
        return True

    def is_time_matched(self, begin: int, end: int) -> bool:
        """``IndexFile.isTimeMatched``: the file's time range overlaps ``[begin, end]``."""
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def select_phy_offsets(self, out: list[int], key: str, max_num: int, begin: int, end: int) -> None:
        if self.index_count <= 1:
            return
        mm = self.mf.mm
        key_hash = self.key_hash(key)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        (nxt,) = _I32.unpack_from(mm, slot_pos)
        if nxt <= INVALID_INDEX or nxt > self.index_count:
            return
        base = self._entries_base
        begin_floor = begin - 999  # entry times are truncated to whole seconds
        while len(out) < max_num:
            hash_read, phy, diff, prev = _ENTRY.unpack_from(mm, base + nxt * INDEX_SIZE)
            if diff < 0:
                break
            time_read = self.begin_timestamp + diff * 1000
            if hash_read == key_hash and begin_floor <= time_read <= end:
                out.append(phy)
            if prev <= INVALID_INDEX or prev > self.index_count or prev == nxt or time_read < begin_floor:
                break
            nxt = prev

    def truncate(self, trusted_offset: int) -> bool:
        """Drop the entries of records at or beyond ``trusted_offset``; False if it cannot.

        Entries are appended in commit-log order, so those to drop are a tail: found by
        bisection, then every slot whose chain starts in that tail is pointed at the newest
        entry kept (following ``prevIndex``). Costs a few reads per dropped entry, not a
        pass over the file. False when the tail does not look like entries (the caller
        destroys the file instead).
        """
        mm, base, count = self.mf.mm, self._entries_base, self.index_count
        if not 1 <= count <= self.index_num:
            return False
        lo, hi = 1, count
        while lo < hi:
            mid = (lo + hi) // 2
            if _ENTRY.unpack_from(mm, base + mid * INDEX_SIZE)[1] < trusted_offset:
                lo = mid + 1
            else:
                hi = mid
        keep = lo
        if keep == count:
            return True
        for n in range(keep, count):
            key_hash = _I32.unpack_from(mm, base + n * INDEX_SIZE)[0]
            if key_hash < 0:
                return False
            slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
            (head,) = _I32.unpack_from(mm, slot_pos)
            if head < keep:
                continue  # fixed already, or the chain starts before the tail
            while head >= keep:
                prev = _ENTRY.unpack_from(mm, base + head * INDEX_SIZE)[3]
                if prev >= head:
                    return False
                head = max(prev, INVALID_INDEX)
            _I32.pack_into(mm, slot_pos, head)
            if head == INVALID_INDEX:
                self.hash_slot_count -= 1
        self.index_count = keep
        if keep > 1:
            _, phy, diff, _ = _ENTRY.unpack_from(mm, base + (keep - 1) * INDEX_SIZE)
            self.end_phy_offset = phy
            self.end_timestamp = self.begin_timestamp + diff * 1000 + 999  # diff is whole seconds
        else:
            self.end_phy_offset, self.end_timestamp = self.begin_phy_offset, self.begin_timestamp
        self._write_header()
        self.dirty = True
        return True

    def flush(self) -> None:
        """Make the whole file durable (worker thread)."""
        if not self.dirty:
            return
        self.dirty = False
        mf = self.mf
        mf.flushed_position = 0
        mf.flush(0)

    def close(self) -> None:
        self.mf.close()

    def destroy(self) -> None:
        self.mf.destroy()


class QueryOffsetResult:
    __slots__ = ("phy_offsets", "index_last_update_timestamp", "index_last_update_phyoffset")

    def __init__(self, phy_offsets: list[int], ts: int, phy: int) -> None:
        self.phy_offsets = phy_offsets
        self.index_last_update_timestamp = ts
        self.index_last_update_phyoffset = phy


class IndexService:
    """The list of index files; writes go to the newest, queries walk newest to oldest."""

    __slots__ = ("store_path", "hash_slot_num", "index_num", "files", "last_indexed_offset",
                 "damage", "preallocate")

    def __init__(self, store_path: str, hash_slot_num: int, index_num: int, *,
                 preallocate: bool = False) -> None:
        if hash_slot_num <= 0 or index_num <= 1:
            raise ValueError("index needs at least one hash slot and two entries")
        self.store_path = store_path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.preallocate = preallocate  # whole files at creation (warmMapedFileEnable)
        self.files: list[IndexFile] = []
        # Commit-log offset of the newest record indexed; records at or below it are skipped.
        self.last_indexed_offset = -1
        # Set by ``load``: why index files were dropped ("" when none was).
        self.damage = ""

    def load(self) -> None:
        """Map the index files. One that is not an index file of this configuration (wrong
        size, a header that cannot be) is deleted with every newer one, and ``damage``
        says so: recovery then re-indexes from the end of the last file kept."""
        if not os.path.isdir(self.store_path):
            return
        sweep_creating(self.store_path)
        names = sorted(n for n in os.listdir(self.store_path) if n.isdigit())
        for i, name in enumerate(names):
            path = os.path.join(self.store_path, name)
            try:
                f = IndexFile(path, self.hash_slot_num, self.index_num, create=False)
            except (ValueError, OSError) as exc:
                reason = str(exc)
            else:
                reason = f.header_problem()
                if not reason:
                    self.files.append(f)
                    continue
                f.mf.close()
            self.damage = f"index file {name}: {reason}"
            for doomed in names[i:]:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.store_path, doomed))
            break

    def recover(self, trusted_offset: int) -> int:
        """Drop files that may hold entries at or beyond ``trusted_offset``; return where to re-index.

        ``trusted_offset`` is the commit-log offset below which the index is known durable
        (the checkpoint's index offset, capped by the recovered end of the log). Returns the
        commit-log offset of the newest record still indexed (re-indexing skips it), or -1
        when nothing is left and the whole log must be indexed.
        """
        keep: list[IndexFile] = []
        for i, f in enumerate(self.files):
            if f.end_phy_offset >= trusted_offset:
                # Upstream destroys such a file whole (IndexService.load), losing the entries
                # of its older records or forcing a re-index from the start of the log: cut
                # it back to the trusted offset instead, when it has entries older than that.
                if not f.is_empty and f.begin_phy_offset < trusted_offset \
                        and f.truncate(trusted_offset) and not f.is_empty:
                    keep.append(f)
                    i += 1
                for doomed in self.files[i:]:
                    doomed.destroy()
                break
            if f.is_empty:
                for doomed in self.files[i:]:
                    doomed.destroy()
                break
            keep.append(f)
        self.files = keep
        self.last_indexed_offset = keep[-1].end_phy_offset if keep else -1
        return self.last_indexed_offset

    def _new_file(self) -> IndexFile:
        os.makedirs(self.store_path, exist_ok=True)
        now_ms = int(time.time() * 1000)
        last = self.files[-1] if self.files else None
        while True:
            lt = time.localtime(now_ms // 1000)
            name = time.strftime("%Y%m%d%H%M%S", lt) + f"{now_ms % 1000:03d}"
            path = os.path.join(self.store_path, name)
            if not os.path.exists(path) and (last is None or name > os.path.basename(last.path)):
                break
            now_ms += 1
        f = IndexFile(path, self.hash_slot_num, self.index_num, create=True,
                      end_phy_offset=last.end_phy_offset if last else 0,
                      end_timestamp=last.end_timestamp if last else 0,
                      preallocate=self.preallocate)
        self.files.append(f)
        return f

    def build_index(self, topic: str, keys: str | None, uniq_key: str | None,
                    phy_offset: int, store_timestamp: int) -> None:
        """Index one record (the dispatcher skips ROLLBACK records). Raises OSError on file creation."""
        if phy_offset <= self.last_indexed_offset:
            return
        self.last_indexed_offset = phy_offset
        if uniq_key:
            # _put(build_key(...)) inlined for the usual key, the UNIQ_KEY: the current file
            # takes it unless it is full, then _put opens the next one.
            key = topic + "#" + uniq_key
            files = self.files
            f = files[-1] if files else None
            if f is None or f.index_count >= f.index_num \
                    or not f.put_key(key, phy_offset, store_timestamp):
                self._put(key, phy_offset, store_timestamp)
        if keys:
            for k in keys.split(" "):
                if k:
                    self._put(build_key(topic, k), phy_offset, store_timestamp)

    def build_index_uniq(self, topic: str, uniq_keys: list[str], phy_offsets: list[int],
                         store_timestamp: int) -> bool:
        """``build_index(topic, None, uniq_keys[i], phy_offsets[i], store_timestamp)`` for
        records in ascending order, all in the current file by one C call; False, nothing
        written, when they are not all new and do not all fit there (the caller indexes
        them one at a time)."""
        if not phy_offsets or phy_offsets[0] <= self.last_indexed_offset:
            return False
        files = self.files
        if not files or not files[-1].put_keys(topic + "#", uniq_keys, phy_offsets,
                                               store_timestamp):
            return False
        self.last_indexed_offset = phy_offsets[-1]
        return True

    def ensure_capacity(self, n_keys: int) -> None:
        """Open a new file now if the current one cannot take ``n_keys`` more entries.

        Called before the record is appended, so a full disk fails the put up front.
        Raises OSError.
        """
        if n_keys <= 0:
            return
        f = self.files[-1] if self.files else None
        if f is None or f.index_count + n_keys > f.index_num:
            f = self._new_file()
        f.reserve_entries(n_keys)

    def _put(self, key: str, phy_offset: int, store_timestamp: int) -> None:
        f = self.files[-1] if self.files else None
        if f is None or f.is_write_full:
            f = self._new_file()
        if not f.put_key(key, phy_offset, store_timestamp):
            f = self._new_file()
            f.put_key(key, phy_offset, store_timestamp)

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        out: list[int] = []
        last_ts = last_phy = 0
        full_key = build_key(topic, key)
        for i in range(len(self.files) - 1, -1, -1):
            f = self.files[i]
            if i == len(self.files) - 1:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select_phy_offsets(out, full_key, max_num, begin, end)
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return QueryOffsetResult(out, last_ts, last_phy)

    def detach_expired(self, min_phy_offset: int) -> list[IndexFile]:
        """Detach leading files whose every entry points below ``min_phy_offset`` (never the last)."""
        n = 0
        for f in self.files[:-1]:
            if f.end_phy_offset < min_phy_offset:
                n += 1
            else:
                break
        out = self.files[:n]
        del self.files[:n]
        return out

    def flush(self) -> None:
        for f in list(self.files):
            f.flush()

    def close(self) -> None:
        for f in self.files:
            f.close()

    def destroy(self) -> None:
        for f in self.files:
            f.destroy()
        self.files = []
        self.last_indexed_offset = -1
