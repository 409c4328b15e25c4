"""Pull-response bodies straight into Arrow columns: the Spark source's decode path.

Contract:

* ``ColumnarDecoder(broker_name, include_properties, tags)``; ``decode(windows)`` takes
  PULL_MESSAGE response bodies (stored records back to back, ``protocol.message``), each
  with the end of the offset window it was pulled for, and returns one
  ``pyarrow.RecordBatch`` in ``rows.arrow_schema(include_properties)`` order, or None
  when no record is kept. Kept are the records whose queue offset is below their window's
  end and, with ``tags``, whose ``TAGS`` property is one of them (``RocketMQLink.read_window_raw``
  pulls them). The rows are exactly those ``rows.RowBatchBuilder`` builds from
  ``decode_messages`` of the same bodies (``tests/unit/test_spark_columnar.py`` checks).
* One Python step per record (the TOTALSIZE walk); every field is then read for all
  records at once: fixed fields by one numpy gather of the 88-byte heads, bodies and
  property strings as byte slices joined into Arrow buffers, properties split on their
  ``\\x01`` / ``\\x02`` separators with numpy. No ``MessageExt`` is built.
* Where the C extension ``_records`` (``spark_sink/_records.c``, built by pip from
  source; optional) is there, it does all of the above in one pass over the records and
  hands back Arrow buffers, and the numpy path is not used (``native=False`` forces it:
  the tests run both on the same records; ``AIOROCKETMQ_NO_EXTENSIONS=1`` turns C off). A repeated property key of any length is
  merged there.
* Whatever this path does not read itself falls back, for the whole call, to the
  per-message path (``decode_messages`` + ``RowBatchBuilder``), which gives the same rows
  or raises the same ``MessageDecodeError``: v2 records, IPv6 hosts, compressed bodies
  (zlib inflates per message anyway), a property key of over 16 bytes repeated within a
  message (shorter ones are merged as ``decode_properties`` merges them), strings
  that are not UTF-8, and any record whose lengths do not add up.
"""

from __future__ import annotations

from collections.abc import Sequence
from struct import Struct
from typing import TYPE_CHECKING, Any

import numpy as np

from aiorocketmq import NO_EXTENSIONS, refuse_extension
from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag
from aiorocketmq.protocol.message import MESSAGE_MAGIC_CODE, decode_messages

from .link import PulledWindow
from .rows import RowBatchBuilder, arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from numpy.typing import NDArray

__all__ = ["ColumnarDecoder", "NATIVE"]

try:
    refuse_extension("aiorocketmq.spark_sink._records")
    from . import _records
except ImportError:  # no C compiler, or AIOROCKETMQ_NO_EXTENSIONS: the numpy path
    _records = None  # type: ignore[assignment]

NATIVE = _records is not None  # whether the C record decoder is there


_HEAD_SIZE = 88  # TOTALSIZE .. BODY length of a v1 record with IPv4 hosts
_MIN_RECORD = 91
_INT_UNPACK = Struct(">i").unpack_from
_NOT_FAST = (MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
             | MessageSysFlag.COMPRESSED_FLAG)
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_MAX_MS = (2**63 - 1) // 1000  # the largest millisecond time a microsecond int64 holds
_MASKED_MAX = 1024  # longest value gathered as masked rows (see ``_gather``)
_TAGS = MessageConst.PROPERTY_TAGS
_KEYS = MessageConst.PROPERTY_KEYS
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX

class _Fallback(Exception):
    """This call's records need the per-message path."""


def _field(head: NDArray[np.uint8], pos: int, width: int) -> NDArray[np.int64]:
    """Big-endian signed ints at ``pos`` of every head, as int64."""
    dtype = ">i4" if width == 4 else ">i8"
    return np.ascontiguousarray(head[:, pos:pos + width]).view(dtype).ravel().astype(np.int64)


def _be_at(a: NDArray[np.uint8], pos: NDArray[np.int64], width: int) -> NDArray[np.int64]:
    """Big-endian signed ints (1, 2 bytes) at positions ``pos`` of ``a``."""
    if width == 1:
        return a[pos].astype(np.int64)
    return (a[pos].astype(np.int64) << 8 | a[pos + 1]).astype(np.int16).astype(np.int64)


def _join(buf: bytes, starts: Any, ends: Any) -> bytes:
    """The slices ``buf[s:e]`` back to back (one bytes object: an Arrow data buffer)."""
    return b"".join([buf[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)])


def _rows(a: NDArray[np.uint8], starts: NDArray[np.int64], width: int) -> NDArray[np.uint8]:
    """The ``width`` bytes from each of ``starts`` as (n, width) rows: one memcpy each (a
    fancy index of ``a`` seen as overlapping ``width``-byte items; every
    ``start + width`` must be within ``a``)."""
    if width > len(a):
        raise _Fallback("record out of bounds")
    items = np.ndarray(shape=(len(a) - width + 1,), dtype=np.dtype((np.void, width)),
                       buffer=a, strides=(1,))
    return items[starts].view(np.uint8).reshape(len(starts), width)


def _gather(buf: bytes, a: NDArray[np.uint8], starts: NDArray[np.int64],
            lengths: NDArray[np.int64]) -> bytes:
    """``_join`` of ``buf[start:start+length]``; numpy row copies when every length is the
    same (bodies of one producer, UNIQ_KEYs, tags of one kind) or none is much longer than
    the rest (rows of the longest, masked), else slices."""
    n = len(starts)
    if n == 0:
        return b""
    first = int(lengths[0])
    if (lengths == first).all():
        return _rows(a, starts, first).tobytes() if first else b""
    longest = int(lengths.max())
    if longest <= _MASKED_MAX and longest * n <= 4 * int(lengths.sum()) + 64 * n and \
            int((starts + longest).max()) <= len(a):
        rows = _rows(a, starts, longest)
        return rows[np.arange(longest) < lengths[:, None]].tobytes()
    return _join(buf, starts, starts + lengths)


def _offsets(lengths: NDArray[np.int64]) -> NDArray[np.int32]:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    if out[-1] >= 2**31:
        raise _Fallback("more than 2 GiB in one column")
    return out.astype(np.int32)


def _string_array(kind: pa.DataType, lengths: NDArray[np.int64], data: bytes,
                  valid: NDArray[np.bool_] | None = None, *, check: bool = True) -> pa.Array:
    """An Arrow string/binary array from value lengths and their bytes back to back;
    ``valid`` False rows are null (their length must be 0). Strings are checked UTF-8."""
    import pyarrow as pa

    n = len(lengths)
    bitmap = None
    nulls = 0
    if valid is not None and not valid.all():
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
        nulls = int(n - np.count_nonzero(valid))
    arr = pa.Array.from_buffers(kind, n, [bitmap, pa.py_buffer(_offsets(lengths).tobytes()),
                                          pa.py_buffer(data)], null_count=nulls)
    if check and kind == pa.string():
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid as exc:
            raise _Fallback(str(exc)) from exc
    return arr


def _repeat_string(value: str, n: int) -> pa.Array:
    """``value`` n times (``pa.repeat`` would import pandas)."""
    import pyarrow as pa

    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int64) * len(raw)
    if n and offsets[-1] >= 2**31:
        raise _Fallback("more than 2 GiB in one column")
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(raw * n)])


def _hosts(ip_port: NDArray[np.uint8]) -> pa.Array:
    """``"a.b.c.d:port"`` strings for (n, 8) IPv4 + int32 port rows."""
    import pyarrow as pa

    n = len(ip_port)
    keys = np.ascontiguousarray(ip_port).view(">u8").ravel()
    if n and (keys == keys[0]).all():
        uniques: Any = keys[:1]
        inverse: Any = np.zeros(n, dtype=np.int32)
    else:
        uniques, inverse = np.unique(keys, return_inverse=True)
    texts = []
    for k in uniques.tolist():
        b = int(k).to_bytes(8, "big")
        texts.append(f"{b[0]}.{b[1]}.{b[2]}.{b[3]}:{int.from_bytes(b[4:], 'big', signed=True)}")
    if len(texts) == 1:
        return _repeat_string(texts[0], n)
    return pa.array(texts, pa.string()).take(pa.array(inverse.astype(np.int32)))


class _Properties:
    """The property strings of n records split into (record, key, value) segments, as
    ``decode_properties`` splits them (segments without a key or a value are dropped)."""

    def __init__(self, buf: bytes, a: NDArray[np.uint8], starts: NDArray[np.int64],
                 lengths: NDArray[np.int64], *, merge_repeats: bool) -> None:
        n = len(starts)
        self.n = n
        self.data = data = _gather(buf, a, starts, lengths)
        po = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=po[1:])
        self.p = p = np.frombuffer(data, dtype=np.uint8)
        nonempty = lengths > 0
        # UTF-8 (``decode_properties`` reads "replace"d text; other bytes take the slow
        # path): the whole is valid and no record starts inside a character, so is each.
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Fallback("properties not UTF-8") from exc
        heads = p[po[:-1][nonempty]]
        if ((heads >= 0x80) & (heads < 0xC0)).any():
            raise _Fallback("properties not UTF-8")
        # Segments lie between boundaries: record starts/ends and the \x02 bytes (a segment
        # after a \x02 starts one byte later). A \x02 at a record's start is both. One pass
        # finds every boundary and \x01 (the events); the rest works on the events only.
        size = len(p)
        nz = np.flatnonzero(nonempty)  # records with segments; their starts are distinct
        rec_mark = np.zeros(size + 1, dtype=bool)
        rec_mark[po[nz]] = True
        mark = rec_mark.copy()
        mark[size] = True
        mark[:-1] |= (p - 1) <= 1  # \x01 or \x02 (uint8: 0 wraps to 255)
        ev = np.flatnonzero(mark)  # the last one is ``size``
        is_rec = rec_mark[ev]
        byte = np.zeros(len(ev), dtype=np.uint8)
        byte[:-1] = p[ev[:-1]]
        is2 = byte == 2
        bi = np.flatnonzero(is_rec | is2)
        if not len(bi) or bi[-1] != len(ev) - 1:
            bi = np.append(bi, len(ev) - 1)
        first = bi[:-1]
        seg_start = ev[first] + is2[first]
        seg_end = ev[bi[1:]]
        # The key ends at the segment's first \x01: the event after its boundary, unless
        # the boundary itself is one (an empty key) or the next event is no \x01.
        nxt = first + 1
        nv = ev[nxt]
        keep = (byte[first] != 1) & (byte[nxt] == 1) & (nv > seg_start) & (nv < seg_end - 1)
        self.rec = nz[(np.cumsum(is_rec) - 1)[first[keep]]]
        self.key_start = seg_start[keep]
        self.key_len = nv[keep] - self.key_start
        self.val_start = nv[keep] + 1
        self.val_len = seg_end[keep] - self.val_start
        if merge_repeats:
            self._merge_repeats()

    def _prefix(self, starts: NDArray[np.int64], lengths: NDArray[np.int64]) -> NDArray[np.uint64]:
        """Up to 8 bytes from ``starts`` (zero past ``lengths``) as one integer each."""
        cols = np.arange(8)
        idx = np.minimum(starts[:, None] + cols, max(len(self.p) - 1, 0))
        got = np.where(cols < lengths[:, None], self.p[idx], 0).astype(np.uint8)
        return np.ascontiguousarray(got).view("<u8").ravel()

    def _merge_repeats(self) -> None:
        """For the properties column: a key repeated within one record keeps the first
        one's place and the last one's value, as ``decode_properties`` (stock 4.9.7 batch
        members carry ``WAIT`` twice). Keys are told apart by length and first and last 8
        bytes, which is the whole key up to 16 bytes; a longer look-alike pair takes the
        per-message path."""
        m = len(self.rec)
        if m < 2:
            return
        ks, kl = self.key_start, self.key_len
        first = self._prefix(ks, kl)
        last = self._prefix(np.maximum(ks + kl - 8, ks), kl)
        order = np.lexsort((first, last, kl, self.rec))  # stable: repeats stay in order
        same = np.ones(m - 1, dtype=bool)
        for c in (self.rec, kl, first, last):
            sc = c[order]
            same &= sc[1:] == sc[:-1]
        if not same.any():
            return
        if (kl[order][1:][same] > 16).any():
            raise _Fallback("repeated long property key")
        group_first = np.concatenate(([True], ~same))
        group_last = np.concatenate((~same, [True]))
        place = order[group_first]  # the first segment of each key
        value = order[group_last]  # the last one
        by_place = np.argsort(place)
        place, value = place[by_place], value[by_place]
        self.rec = self.rec[place]
        self.key_start = self.key_start[place]
        self.key_len = self.key_len[place]
        self.val_start = self.val_start[value]
        self.val_len = self.val_len[value]

    def column(self, key: str) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
        """Per record: start and length of ``key``'s value in ``data``, and whether present."""
        n = self.n
        start = np.zeros(n, dtype=np.int64)
        length = np.zeros(n, dtype=np.int64)
        present = np.zeros(n, dtype=bool)
        name = np.frombuffer(key.encode(), dtype=np.uint8)
        hit = np.flatnonzero(self.key_len == len(name))
        if len(hit):
            hit = hit[(_rows(self.p, self.key_start[hit], len(name)) == name)
                      .all(axis=1)]
        rec = self.rec[hit]
        if len(rec) > 1:  # a repeated key: its last value (segments are in record order)
            hit = hit[np.concatenate((rec[1:] != rec[:-1], [True]))]
            rec = self.rec[hit]
        start[rec] = self.val_start[hit]
        length[rec] = self.val_len[hit]
        present[rec] = True
        return start, length, present

    def string_column(self, key: str) -> pa.Array:
        import pyarrow as pa

        start, length, present = self.column(key)
        if not present.any():
            return pa.nulls(self.n, pa.string())
        return _string_array(pa.string(), length,
                             _gather(self.data, self.p, start[present], length[present]),
                             present, check=False)  # checked whole

    def map_column(self) -> pa.Array:
        import pyarrow as pa

        counts = np.bincount(self.rec, minlength=self.n)
        keys = _string_array(pa.string(), self.key_len,
                             _gather(self.data, self.p, self.key_start, self.key_len), check=False)
        values = _string_array(pa.string(), self.val_len,
                               _gather(self.data, self.p, self.val_start, self.val_len),
                               check=False)
        return pa.MapArray.from_arrays(pa.array(_offsets(counts)), keys, values)


class ColumnarDecoder:
    """Pull bodies -> one Arrow batch per ``decode`` call (see the module docstring)."""

    __slots__ = ("broker_name", "include_properties", "tags", "schema", "fallbacks", "native")

    def __init__(self, broker_name: str, include_properties: bool,
                 tags: frozenset[str] | None = None, *, native: bool = NATIVE) -> None:
        if native and not NATIVE:
            why = ("AIOROCKETMQ_NO_EXTENSIONS is set" if NO_EXTENSIONS else
                   "it is not built (pip install builds it where a C compiler is found)")
            raise RuntimeError(f"aiorocketmq.spark_sink._records is not used: {why}")
        self.broker_name = broker_name
        self.include_properties = include_properties
        self.tags = tags or None
        self.schema = arrow_schema(include_properties)
        self.fallbacks = 0  # calls that took the per-message path
        self.native = native

    def decode(self, windows: Sequence[PulledWindow]) -> pa.RecordBatch | None:
        try:
            batch = self._native(windows) if self.native else self._fast(windows)
        except _Fallback:
            self.fallbacks += 1
            batch = self._per_message(windows)
        return batch if batch is not None and batch.num_rows else None

    # -- the per-message path ------------------------------------------------------------

    def _per_message(self, windows: Sequence[PulledWindow]) -> pa.RecordBatch | None:
        builder = RowBatchBuilder(self.broker_name, self.include_properties)
        tags = self.tags
        for body, end in windows:
            for m in decode_messages(body):
                if m.queue_offset >= end:
                    break
                if tags is None or m.properties.get(_TAGS) in tags:
                    builder.add(m)
        return builder.flush() if builder.rows else None

    # -- the C path ---------------------------------------------------------------------

    def _native(self, windows: Sequence[PulledWindow]) -> pa.RecordBatch | None:
        import pyarrow as pa

        assert _records is not None
        got = _records.scan(windows if isinstance(windows, list) else list(windows),
                            self.include_properties)
        if got is None:
            raise _Fallback("records the C decoder leaves to the per-message path")
        n, fixed, topic, msg_id, tags, keys, body, host, props = got
        if not n:
            return None
        buf = pa.py_buffer

        def strings(col: tuple[bytes, bytes], kind: pa.DataType = pa.string()) -> pa.Array:
            return pa.Array.from_buffers(kind, n, [None, buf(col[0]), buf(col[1])])

        def nullable(col: tuple[bytes | None, int, bytes, bytes]) -> pa.Array:
            valid, nulls, offsets, data = col
            return pa.Array.from_buffers(pa.string(), n, [None if valid is None else buf(valid),
                                                          buf(offsets), buf(data)],
                                         null_count=nulls)

        qid, qoff, born, store, recon = fixed
        ts = pa.timestamp("us", tz="UTC")
        tags_col = nullable(tags)
        columns = [
            strings(topic),
            _repeat_string(self.broker_name, n),
            pa.Array.from_buffers(pa.int32(), n, [None, buf(qid)]),
            pa.Array.from_buffers(pa.int64(), n, [None, buf(qoff)]),
            strings(msg_id),
            tags_col,
            nullable(keys),
            strings(body, pa.binary()),
            pa.Array.from_buffers(ts, n, [None, buf(born)]),
            pa.Array.from_buffers(ts, n, [None, buf(store)]),
            strings(host),
            pa.Array.from_buffers(pa.int32(), n, [None, buf(recon)]),
        ]
        if props is not None:
            entries, key_offsets, key_data, value_offsets, value_data = props
            m = len(key_offsets) // 4 - 1
            columns.append(pa.MapArray.from_arrays(
                pa.Array.from_buffers(pa.int32(), n + 1, [None, buf(entries)]),
                pa.Array.from_buffers(pa.string(), m, [None, buf(key_offsets), buf(key_data)]),
                pa.Array.from_buffers(pa.string(), m, [None, buf(value_offsets),
                                                       buf(value_data)])))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        return self._filter_tags(batch, tags_col)

    def _filter_tags(self, batch: pa.RecordBatch, tags: pa.Array,
                     keep: NDArray[np.bool_] | None = None) -> pa.RecordBatch:
        """``batch`` without the rows whose tag is not one of ``self.tags`` (with a
        ``tags`` filter) or whose ``keep`` is False."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.tags is not None:
            wanted = np.asarray(pc.fill_null(pc.is_in(tags, pa.array(sorted(self.tags),
                                                                     pa.string())), False))
            keep = wanted if keep is None else keep & wanted
        if keep is None or keep.all():
            return batch
        return batch.filter(pa.array(keep))

    # -- the columnar path ---------------------------------------------------------------

    @staticmethod
    def _starts(windows: Sequence[PulledWindow], guess: bool = True
                ) -> tuple[list[int], NDArray[np.int64], NDArray[np.int64] | None]:
        """Record starts in the bodies back to back, records per body, and (``guess``) the
        stride assumed per body. A body whose length is a multiple of its first record's
        TOTALSIZE is assumed to hold records of that size (records of one producer often
        are): the caller checks every TOTALSIZE against it, and walks when one differs."""
        starts: list[int] = []
        counts: list[int] = []
        strides: list[int] = []
        base = 0
        unpack = _INT_UNPACK
        for body, _end in windows:
            n_body = len(body)
            before = len(starts)
            if n_body:
                if n_body < _MIN_RECORD:
                    raise _Fallback("truncated record")
                first = unpack(body, 0)[0]
                if guess and first >= _MIN_RECORD and n_body % first == 0:
                    starts.extend(range(base, base + n_body, first))
                    strides.append(first)
                    counts.append(len(starts) - before)
                    base += n_body
                    continue
            pos = 0
            append = starts.append
            while pos < n_body:
                if n_body - pos < _MIN_RECORD:
                    raise _Fallback("truncated record")
                total = unpack(body, pos)[0]
                if total < _MIN_RECORD or total > n_body - pos:
                    raise _Fallback("bad TOTALSIZE")
                append(base + pos)
                pos += total
            counts.append(len(starts) - before)
            strides.append(0)  # walked: no guess to check
            base += n_body
        counts_a = np.array(counts, dtype=np.int64)
        if not guess:
            return starts, counts_a, None
        return starts, counts_a, np.array(strides, dtype=np.int64)

    def _fast(self, windows: Sequence[PulledWindow]) -> pa.RecordBatch | None:
        import pyarrow as pa

        starts, counts, strides = self._starts(windows)
        n = len(starts)
        if n == 0:
            return None
        buf = b"".join([body for body, _ in windows])
        a = np.frombuffer(buf, dtype=np.uint8)
        s = np.array(starts, dtype=np.int64)
        head = _rows(a, s, _HEAD_SIZE)
        total = _field(head, 0, 4)
        guessed = np.repeat(strides, counts) if strides is not None else None
        if guessed is not None and ((guessed != 0) & (total != guessed)).any():
            # a guessed stride was wrong: walk record by record
            starts, counts, _ = self._starts(windows, guess=False)
            s = np.array(starts, dtype=np.int64)
            head = _rows(a, s, _HEAD_SIZE)
            total = _field(head, 0, 4)
        ends = [end for _, end in windows]
        if (_field(head, 4, 4) != MESSAGE_MAGIC_CODE).any():
            raise _Fallback("not a v1 record")
        sys_flag = _field(head, 36, 4)
        if (sys_flag & _NOT_FAST).any():
            raise _Fallback("IPv6 host or compressed body")
        body_len = _field(head, 84, 4)
        body_start = s + _HEAD_SIZE
        topic_pos = body_start + body_len
        if ((body_len < 0) | (_HEAD_SIZE + body_len + 1 > total)).any():
            raise _Fallback("bad body length")
        topic_len = _be_at(a, topic_pos, 1)
        if ((topic_len > 127) | (_HEAD_SIZE + body_len + 1 + topic_len + 2 > total)).any():
            raise _Fallback("bad topic length")
        props_len = _be_at(a, topic_pos + 1 + topic_len, 2)
        if ((props_len < 0) | (_MIN_RECORD + body_len + topic_len + props_len != total)).any():
            raise _Fallback("bad properties length")
        props_start = topic_pos + 3 + topic_len

        queue_offset = _field(head, 20, 8)
        per_window = counts
        past = queue_offset >= np.repeat(np.array(ends, dtype=np.int64), per_window)
        # a window's records stop at its first one past the window's end
        seen = np.concatenate(([0], np.cumsum(past)))  # records past an end, among the first k
        window_start = np.cumsum(per_window) - per_window
        keep = seen[1:] == np.repeat(seen[window_start], per_window)
        props = _Properties(buf, a, props_start, props_len,
                            merge_repeats=self.include_properties)
        tags = props.string_column(_TAGS)

        uniq_start, uniq_len, has_uniq = props.column(_UNIQ_KEY)
        if has_uniq.all():
            msg_id = _string_array(pa.string(), uniq_len,
                                   _gather(props.data, props.p, uniq_start, uniq_len),
                                   check=False)
        else:
            ident = np.concatenate((head[:, 64:72], head[:, 28:36]), axis=1)  # store host, offset
            hexed = np.empty((n, 32), dtype=np.uint8)
            hexed[:, 0::2] = _HEX[ident >> 4]
            hexed[:, 1::2] = _HEX[ident & 15]
            if not has_uniq.any():
                msg_id = _string_array(pa.string(), np.full(n, 32, dtype=np.int64),
                                       hexed.tobytes(), check=False)
            else:
                hex_rows = hexed.tobytes()
                data = props.data
                parts = [data[us:us + ul] if hu else hex_rows[i * 32:i * 32 + 32]
                         for i, (us, ul, hu) in enumerate(zip(uniq_start.tolist(), uniq_len.tolist(),
                                                              has_uniq.tolist(), strict=True))]
                msg_id = _string_array(pa.string(), np.where(has_uniq, uniq_len, 32),
                                       b"".join(parts), check=False)

        topic_start = topic_pos + 1
        first = buf[int(topic_start[0]):int(topic_start[0] + topic_len[0])]
        t0 = len(first)
        if t0 and (topic_len == t0).all() and (_rows(a, topic_start, t0)
                                        == np.frombuffer(first, dtype=np.uint8)).all():
            try:
                topic = _repeat_string(first.decode("utf-8"), n)
            except UnicodeDecodeError as exc:
                raise _Fallback("topic not UTF-8") from exc
        else:
            topic = _string_array(pa.string(), topic_len,
                                  _gather(buf, a, topic_start, topic_len))

        born, store = _field(head, 40, 8), _field(head, 56, 8)
        # (a range test, not np.abs: the absolute value of the int64 minimum wraps negative)
        if ((born > _MAX_MS) | (born < -_MAX_MS) | (store > _MAX_MS) | (store < -_MAX_MS)).any():
            raise _Fallback("a timestamp past int64 microseconds")
        ts = pa.timestamp("us", tz="UTC")
        columns = [
            topic,
            _repeat_string(self.broker_name, n),
            pa.array(_field(head, 12, 4).astype(np.int32)),
            pa.array(queue_offset),
            msg_id,
            tags,
            props.string_column(_KEYS),
            _string_array(pa.binary(), body_len, _gather(buf, a, body_start, body_len)),
            pa.array(born * 1000).view(ts),  # pa.array(x, ts) is 500x slower
            pa.array(store * 1000).view(ts),
            _hosts(head[:, 48:56]),
            pa.array(_field(head, 72, 4).astype(np.int32)),
        ]
        if self.include_properties:
            columns.append(props.map_column())
        return self._filter_tags(pa.RecordBatch.from_arrays(columns, schema=self.schema),
                                 tags, keep)
