/* aiorocketmq.server.store._put: the store's put path, in C.
 *
 * The compiled twins of two Python steps of every stored message, built from source by
 * pip (setuptools, optional: without a C compiler, or under AIOROCKETMQ_NO_EXTENSIONS,
 * the Python code runs; tests/unit/test_store_put_native.py holds both to the same
 * results).
 *
 * write_record(buf, pos, topic_b, queue_id, flag, queue_offset, physical_offset,
 *              sys_flag, born_timestamp, born_host, store_timestamp, store_host,
 *              reconsume_times, prepared_transaction_offset, body, props_b)
 *     -> (size, offset_msg_id)
 *
 *   Writes the v1 stored record protocol/message.py's ``pack_stored_record`` returns
 *   (BODYCRC = CRC-32 of the body & 0x7FFFFFFF) into the writable buffer ``buf`` at
 *   ``pos``, and returns its size and ``create_offset_msg_id(store_host,
 *   physical_offset)``. The V6 sysflag bits are written as given (the caller sets
 *   them from the host sizes, as for the Python packer). Refuses, before writing
 *   anything: a host not 8 or 20 bytes, a topic over 127 or properties over 32767
 *   bytes (ValueError); a record that does not fit in ``buf`` from ``pos``
 *   (IndexError); an int out of its field's Java range (OverflowError).
 *
 * write_batch(buf, pos, topic_b, queue_id, queue_offset, counted, physical_offset,
 *             sys_flag, born_timestamp, born_host, store_timestamp, store_host,
 *             reconsume_times, prepared_transaction_offset, [(flag, body, props_b), ...])
 *     -> ([offset_msg_id, ...], [size, ...])
 *
 *   ``write_record`` for each member of a list in turn (bodies and properties as bytes),
 *   the records back to back from ``pos`` / ``physical_offset``, the queue offset going up
 *   by one a record when ``counted`` (else every record takes ``queue_offset``), the
 *   other fields shared. Makes write_record's refusals, for any member, and TypeError for
 *   a member not (int, bytes, bytes), all before writing anything, as it does when the
 *   whole batch does not fit in ``buf`` from ``pos`` (IndexError).
 *
 * index_put(buf, hash_slot_num, entries_base, count, key, phy_offset, store_timestamp,
 *           begin_timestamp, begin_phy_offset, hash_slot_count) -> hash_slot_count
 *
 *   index.py's ``IndexFile.put_key`` for a CRC-32 keyed file past its checks (the file
 *   has room for entry ``count``; the caller has set the begin fields of a first
 *   entry): hashes ``key`` (CRC-32 of its UTF-8, 31 bits), writes entry ``count``
 *   (hash, phy offset, seconds since ``begin_timestamp`` clamped to 0..2^31-1, the
 *   slot's previous entry or 0), points the slot at it and rewrites the 40-byte header
 *   (end fields = this entry, index count = count + 1). Returns the new hash slot count.
 *   Refuses (IndexError) any slot, entry or header outside ``buf``, and (ValueError) a
 *   ``hash_slot_num`` or ``count`` below 1.
 *
 * index_put_many(buf, hash_slot_num, entries_base, count, prefix, keys, phy_offsets,
 *                store_timestamp, begin_timestamp, begin_phy_offset, hash_slot_count)
 *     -> hash_slot_count
 *
 *   ``index_put`` for each key of the list ``keys`` in turn, as the key ``prefix`` (bytes,
 *   the UTF-8 of ``topic#``) + key, with ``phy_offsets[i]`` (a list as long), entries
 *   ``count`` .. ``count + n - 1``, every entry at one ``store_timestamp``; the header
 *   rewritten once, as the last ``index_put`` leaves it. Refuses, before writing
 *   anything: lists of different lengths, empty, of non-str keys or non-int offsets
 *   (TypeError, OverflowError, UnicodeEncodeError), entries or slots outside ``buf``
 *   (IndexError), ``hash_slot_num`` or ``count`` below 1 (ValueError).
 *
 * cq_units(buf, pos, offsets, end, tags_codes) -> None
 *
 *   consume_queue.py's ``put_unit`` fast path for each record of a batch in turn: the
 *   20-byte units (commit-log offset int64, size int32, tags code int64, big-endian) of
 *   records lying back to back at ``offsets`` (a list, ascending), the last ending at
 *   ``end``, written one after another into ``buf`` from ``pos``; record i's size is
 *   offsets[i + 1] - offsets[i] (``end`` - its offset for the last). Refuses, before
 *   writing anything: lists of different lengths or of non-ints (TypeError, OverflowError),
 *   a size not in 1..2^31-1 (ValueError), units that do not fit in ``buf`` from ``pos``
 *   (IndexError).
 *
 * send_properties(raw, cluster, suffix) -> (props, stored, wait) | None
 *
 *   processors/send.py's ``stored_properties`` for a canonical properties string: every
 *   ``\x02``-separated segment ``key\x01value`` with both non-empty, no key twice, no
 *   ``CLUSTER`` key. ``props``: the pairs in order without ``WAIT``, then ``CLUSTER`` =
 *   ``cluster``, then ``WAIT`` when it was there; ``stored``: ``raw`` without its ``WAIT``
 *   segment, then ``suffix`` (``\x02CLUSTER\x01`` + cluster; without its separator when
 *   nothing is left before it); ``wait``: WAIT's value or None. None for any other
 *   string (the Python function reads it). ``raw``, ``cluster`` and ``suffix`` are str.
 *
 * batch_members(body, batch_props, batch_str) -> [(flag, body, props, stored), ...] | None
 *
 *   processors/send.py's ``batch_members`` for a SEND_BATCH_MESSAGE body whose members
 *   all decode (MessageDecoder's batch format: TOTALSIZE, MAGICCODE, BODYCRC, FLAG, body
 *   length + body, properties length + properties, every length checked against
 *   TOTALSIZE and the body) and whose properties are each empty or canonical: valid
 *   UTF-8, ``\x02``-separated segments (one trailing ``\x02`` allowed, as stock's client
 *   writes) each ``key\x01value`` with exactly one ``\x01``, both sides non-empty, no key
 *   twice. ``props``: the member's pairs, then ``batch_props`` over them; ``stored``: the
 *   member's string without its trailing separator, ``\x02``, ``batch_str`` (only
 *   ``batch_str`` when the member has none). None for an empty body or any other member
 *   (the Python function reads it, with its errors). ``batch_props`` is a dict,
 *   ``batch_str`` a str.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <zlib.h>
#include <stdint.h>
#include <string.h>

#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define MIN_RECORD 91
#define MAX_TOPIC 127
#define MAX_PROPS 32767
#define INDEX_HEADER 40
#define INDEX_ENTRY 20

static inline void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static inline void put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static inline int32_t get32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* Body CRC as zlib.crc32, in chunks: zlib's length is a uInt. */
static uint32_t body_crc(const unsigned char *p, Py_ssize_t n) {
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt chunk = n > (Py_ssize_t)0x40000000 ? 0x40000000u : (uInt)n;
        crc = crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

static int int32_arg(long long v, const char *name) {
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s %lld out of int32 range", name, v);
        return -1;
    }
    return 0;
}

static PyObject *offset_msg_id(const unsigned char *host, Py_ssize_t host_len, int64_t phys) {
    static const char hex[] = "0123456789ABCDEF";
    char out[2 * (20 + 8)];
    unsigned char raw[20 + 8];
    memcpy(raw, host, (size_t)host_len);
    put64(raw + host_len, (uint64_t)phys);
    Py_ssize_t n = host_len + 8;
    for (Py_ssize_t i = 0; i < n; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 0xF];
    }
    return PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, out, 2 * n);
}

/* The fields every record of a write shares with its caller's arguments. */
typedef struct {
    const unsigned char *topic, *born, *store;
    Py_ssize_t topic_len, born_len, store_len;
    long long queue_id, sys_flag, born_ts, store_ts, reconsume, prep_off;
} record_fields;

/* Checks of write_record common to write_batch: -1 with an exception set. */
static int check_fields(const record_fields *f) {
    if ((f->born_len != 8 && f->born_len != 20) || (f->store_len != 8 && f->store_len != 20)) {
        PyErr_SetString(PyExc_ValueError, "a host address is 8 or 20 bytes");
        return -1;
    }
    if (f->topic_len > MAX_TOPIC) {
        PyErr_SetString(PyExc_ValueError, "topic over 127 or properties over 32767 bytes");
        return -1;
    }
    if (int32_arg(f->queue_id, "queue_id") || int32_arg(f->sys_flag, "sys_flag")
        || int32_arg(f->reconsume, "reconsume_times"))
        return -1;
    return 0;
}

/* TOTALSIZE of a record of these lengths with the hosts of ``f`` (lengths checked). */
static Py_ssize_t record_len(const record_fields *f, Py_ssize_t body_len, Py_ssize_t props_len) {
    return MIN_RECORD + body_len + f->topic_len + props_len + (f->born_len - 8)
        + (f->store_len - 8);
}

/* The size of one record, or -1 with an exception set (a member's own checks). */
static Py_ssize_t member_size(const record_fields *f, long long flag, Py_ssize_t body_len,
                              Py_ssize_t props_len) {
    if (props_len > MAX_PROPS) {
        PyErr_SetString(PyExc_ValueError, "topic over 127 or properties over 32767 bytes");
        return -1;
    }
    if (int32_arg(flag, "flag")) return -1;
    /* body.len < 2^31 - 200 keeps every sum below int32 */
    if (body_len > (Py_ssize_t)INT32_MAX - 256) {
        PyErr_SetString(PyExc_OverflowError, "body too long for a record");
        return -1;
    }
    return record_len(f, body_len, props_len);
}

/* Write one record of ``size`` bytes at ``p`` (checked by the callers). */
static void fill_record(unsigned char *p, Py_ssize_t size, const record_fields *f, long long flag,
                        long long queue_offset, long long phys, const unsigned char *body,
                        Py_ssize_t body_len, const unsigned char *props, Py_ssize_t props_len) {
    put32(p, (uint32_t)size);
    put32(p + 4, (uint32_t)MAGIC_V1);
    put32(p + 8, body_crc(body, body_len) & 0x7FFFFFFFu);
    put32(p + 12, (uint32_t)f->queue_id);
    put32(p + 16, (uint32_t)flag);
    put64(p + 20, (uint64_t)queue_offset);
    put64(p + 28, (uint64_t)phys);
    put32(p + 36, (uint32_t)f->sys_flag);
    put64(p + 40, (uint64_t)f->born_ts);
    p += 48;
    memcpy(p, f->born, (size_t)f->born_len);
    p += f->born_len;
    put64(p, (uint64_t)f->store_ts);
    p += 8;
    memcpy(p, f->store, (size_t)f->store_len);
    p += f->store_len;
    put32(p, (uint32_t)f->reconsume);
    put64(p + 4, (uint64_t)f->prep_off);
    put32(p + 12, (uint32_t)body_len);
    p += 16;
    memcpy(p, body, (size_t)body_len);
    p += body_len;
    *p++ = (unsigned char)f->topic_len;
    memcpy(p, f->topic, (size_t)f->topic_len);
    p += f->topic_len;
    p[0] = (unsigned char)(props_len >> 8);
    p[1] = (unsigned char)props_len;
    memcpy(p + 2, props, (size_t)props_len);
}

static PyObject *write_record(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer buf, topic, born, store, body, props;
    Py_ssize_t pos;
    long long queue_id, flag, queue_offset, phys, sys_flag, born_ts, store_ts, reconsume,
        prep_off;
    if (!PyArg_ParseTuple(args, "w*ny*LLLLLLy*Ly*LLy*y*:write_record", &buf, &pos, &topic,
                          &queue_id, &flag, &queue_offset, &phys, &sys_flag, &born_ts, &born,
                          &store_ts, &store, &reconsume, &prep_off, &body, &props))
        return NULL;
    PyObject *result = NULL;
    record_fields f = {topic.buf, born.buf, store.buf, topic.len, born.len, store.len,
                       queue_id, sys_flag, born_ts, store_ts, reconsume, prep_off};
    if (check_fields(&f) < 0) goto done;
    Py_ssize_t size = member_size(&f, flag, body.len, props.len);
    if (size < 0) goto done;
    if (pos < 0 || pos > buf.len || size > buf.len - pos) {
        PyErr_SetString(PyExc_IndexError, "record does not fit in the buffer");
        goto done;
    }
    result = offset_msg_id(store.buf, store.len, (int64_t)phys);
    if (!result) goto done;
    fill_record((unsigned char *)buf.buf + pos, size, &f, flag, queue_offset, phys, body.buf,
                body.len, props.buf, props.len);
    PyObject *t = Py_BuildValue("(nN)", size, result);
    result = t;
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&topic);
    PyBuffer_Release(&born);
    PyBuffer_Release(&store);
    PyBuffer_Release(&body);
    PyBuffer_Release(&props);
    return result;
}

static PyObject *write_batch(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer buf, topic, born, store;
    Py_ssize_t pos;
    long long queue_id, queue_offset, phys, sys_flag, born_ts, store_ts, reconsume, prep_off;
    int counted;
    PyObject *members;
    if (!PyArg_ParseTuple(args, "w*ny*LLpLLLy*Ly*LLO!:write_batch", &buf, &pos, &topic,
                          &queue_id, &queue_offset, &counted, &phys, &sys_flag, &born_ts, &born,
                          &store_ts, &store, &reconsume, &prep_off, &PyList_Type, &members))
        return NULL;
    PyObject *result = NULL, *ids = NULL, *sizes = NULL;
    record_fields f = {topic.buf, born.buf, store.buf, topic.len, born.len, store.len,
                       queue_id, sys_flag, born_ts, store_ts, reconsume, prep_off};
    Py_ssize_t n = PyList_GET_SIZE(members), total = 0;
    if (check_fields(&f) < 0) goto done;
    /* Every member checked and the whole batch found to fit before anything is written. */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(members, i);
        if (!PyTuple_Check(m) || PyTuple_GET_SIZE(m) != 3
            || !PyBytes_Check(PyTuple_GET_ITEM(m, 1)) || !PyBytes_Check(PyTuple_GET_ITEM(m, 2))) {
            PyErr_SetString(PyExc_TypeError, "a member is (flag, body bytes, properties bytes)");
            goto done;
        }
        long long flag = PyLong_AsLongLong(PyTuple_GET_ITEM(m, 0));
        if (flag == -1 && PyErr_Occurred()) goto done;
        Py_ssize_t size = member_size(&f, flag, PyBytes_GET_SIZE(PyTuple_GET_ITEM(m, 1)),
                                      PyBytes_GET_SIZE(PyTuple_GET_ITEM(m, 2)));
        if (size < 0) goto done;
        total += size;
    }
    if (pos < 0 || pos > buf.len || total > buf.len - pos) {
        PyErr_SetString(PyExc_IndexError, "batch does not fit in the buffer");
        goto done;
    }
    ids = PyList_New(n);
    sizes = PyList_New(n);
    if (!ids || !sizes) goto done;
    /* The answers allocated first: once writing starts nothing can fail. */
    long long at = phys;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(members, i);
        Py_ssize_t size = record_len(&f, PyBytes_GET_SIZE(PyTuple_GET_ITEM(m, 1)),
                                     PyBytes_GET_SIZE(PyTuple_GET_ITEM(m, 2)));
        PyObject *size_o = PyLong_FromSsize_t(size);
        if (!size_o) goto done;
        PyList_SET_ITEM(sizes, i, size_o);
        PyObject *msg_id = offset_msg_id(store.buf, store.len, (int64_t)at);
        if (!msg_id) goto done;
        PyList_SET_ITEM(ids, i, msg_id);
        at += size;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(members, i), *body = PyTuple_GET_ITEM(m, 1),
                 *props = PyTuple_GET_ITEM(m, 2);
        long long flag = PyLong_AsLongLong(PyTuple_GET_ITEM(m, 0));
        Py_ssize_t size = PyLong_AsSsize_t(PyList_GET_ITEM(sizes, i));
        fill_record((unsigned char *)buf.buf + pos, size, &f, flag, queue_offset, phys,
                    (const unsigned char *)PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body),
                    (const unsigned char *)PyBytes_AS_STRING(props), PyBytes_GET_SIZE(props));
        pos += size;
        phys += size;
        if (counted) queue_offset++;
    }
    result = PyTuple_Pack(2, ids, sizes);
done:
    Py_XDECREF(ids);
    Py_XDECREF(sizes);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&topic);
    PyBuffer_Release(&born);
    PyBuffer_Release(&store);
    return result;
}

/* Seconds from begin_ts to store_ts clamped to 0..2^31-1 (0 without a begin). */
static long long index_time_diff(long long store_ts, long long begin_ts) {
    if (begin_ts <= 0) return 0;
    long long d = store_ts - begin_ts;
    /* Python's // floors; C's / truncates toward zero: a negative d clamps to 0 either way */
    long long diff = d < 0 ? 0 : d / 1000;
    return diff > INT32_MAX ? INT32_MAX : diff;
}

/* Entry ``count`` for a key of this hash (the caller checked slot and entry in bounds);
 * the slot then points at it. Returns the hash slot count, one more for an empty slot. */
static long long index_entry(unsigned char *mm, long long slots, long long entries_base,
                             long long count, int32_t hash, long long phy, long long diff,
                             long long slot_count) {
    long long slot_pos = INDEX_HEADER + (long long)(hash % slots) * 4;
    int32_t prev = get32(mm + slot_pos);
    if (prev <= 0 || prev > count) prev = 0;
    unsigned char *e = mm + entries_base + count * INDEX_ENTRY;
    put32(e, (uint32_t)hash);
    put64(e + 4, (uint64_t)phy);
    put32(e + 12, (uint32_t)diff);
    put32(e + 16, (uint32_t)prev);
    put32(mm + slot_pos, (uint32_t)count);
    return prev == 0 ? slot_count + 1 : slot_count;
}

static void index_header(unsigned char *mm, long long begin_ts, long long end_ts,
                         long long begin_phy, long long end_phy, long long slot_count,
                         long long index_count) {
    put64(mm, (uint64_t)begin_ts);
    put64(mm + 8, (uint64_t)end_ts);
    put64(mm + 16, (uint64_t)begin_phy);
    put64(mm + 24, (uint64_t)end_phy);
    put32(mm + 32, (uint32_t)slot_count);
    put32(mm + 36, (uint32_t)index_count);
}

/* Entries count .. count + n - 1 and every slot inside ``len`` bytes? */
static int index_room(Py_ssize_t len, long long slots, long long entries_base, long long count,
                      long long n) {
    long long end, slot_end;
    if (slots < 1 || count < 1 || entries_base < 0 || n < 0) {
        PyErr_SetString(PyExc_ValueError, "hash_slot_num and count are at least 1");
        return 0;
    }
    if (__builtin_add_overflow(count, n, &end) || end > (long long)INT32_MAX
        || __builtin_mul_overflow(end, (long long)INDEX_ENTRY, &end)
        || __builtin_add_overflow(end, entries_base, &end) || end > (long long)len
        || __builtin_mul_overflow(slots, 4LL, &slot_end)
        || __builtin_add_overflow(slot_end, (long long)INDEX_HEADER, &slot_end)
        || slot_end > (long long)len) {
        PyErr_SetString(PyExc_IndexError, "index slot or entry outside the buffer");
        return 0;
    }
    return 1;
}

static PyObject *index_put(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer buf;
    PyObject *key;
    long long slots, entries_base, count, phy, store_ts, begin_ts, begin_phy, slot_count;
    if (!PyArg_ParseTuple(args, "w*LLLULLLLL:index_put", &buf, &slots, &entries_base, &count,
                          &key, &phy, &store_ts, &begin_ts, &begin_phy, &slot_count))
        return NULL;
    PyObject *result = NULL;
    if (slots < 1 || count < 1 || entries_base < 0) {
        PyErr_SetString(PyExc_ValueError, "hash_slot_num and count are at least 1");
        goto done;
    }
    Py_ssize_t key_len;
    const char *key_b = PyUnicode_AsUTF8AndSize(key, &key_len);
    if (!key_b) goto done;
    int32_t hash = (int32_t)(body_crc((const unsigned char *)key_b, key_len) & 0x7FFFFFFFu);
    long long slot_pos = INDEX_HEADER + (long long)(hash % slots) * 4;
    long long entry_pos;
    if (__builtin_mul_overflow(count, (long long)INDEX_ENTRY, &entry_pos)
        || __builtin_add_overflow(entry_pos, entries_base, &entry_pos)
        || slot_pos + 4 > buf.len || entry_pos > (long long)buf.len - INDEX_ENTRY
        || count > INT32_MAX - 1) {
        PyErr_SetString(PyExc_IndexError, "index slot or entry outside the buffer");
        goto done;
    }
    unsigned char *mm = buf.buf;
    slot_count = index_entry(mm, slots, entries_base, count, hash, phy,
                             index_time_diff(store_ts, begin_ts), slot_count);
    index_header(mm, begin_ts, store_ts, begin_phy, phy, slot_count, count + 1);
    result = PyLong_FromLongLong(slot_count);
done:
    PyBuffer_Release(&buf);
    return result;
}

static PyObject *index_put_many(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer buf, prefix;
    PyObject *keys, *phys;
    long long slots, entries_base, count, store_ts, begin_ts, begin_phy, slot_count;
    if (!PyArg_ParseTuple(args, "w*LLLy*O!O!LLLL:index_put_many", &buf, &slots, &entries_base,
                          &count, &prefix, &PyList_Type, &keys, &PyList_Type, &phys, &store_ts,
                          &begin_ts, &begin_phy, &slot_count))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(phys) != n || n < 1) {
        PyErr_SetString(PyExc_TypeError, "keys and offsets differ in length or are empty");
        goto done;
    }
    if (!index_room(buf.len, slots, entries_base, count, n)) goto done;
    if (prefix.len > 0x40000000) {
        PyErr_SetString(PyExc_ValueError, "index key prefix over 1 GiB");
        goto done;
    }
    /* Every key and offset read before anything is written. */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "index keys are str");
            goto done;
        }
        if (!PyUnicode_AsUTF8AndSize(key, NULL)) goto done;
        long long phy = PyLong_AsLongLong(PyList_GET_ITEM(phys, i));
        if (phy == -1 && PyErr_Occurred()) goto done;
    }
    uLong seed = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)prefix.buf, (uInt)prefix.len);
    unsigned char *mm = buf.buf;
    long long diff = index_time_diff(store_ts, begin_ts);
    long long phy = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t key_len;
        const char *key_b = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(keys, i), &key_len);
        uLong crc = seed;
        const unsigned char *p = (const unsigned char *)key_b;
        while (key_len > 0) {
            uInt chunk = key_len > (Py_ssize_t)0x40000000 ? 0x40000000u : (uInt)key_len;
            crc = crc32(crc, p, chunk);
            p += chunk;
            key_len -= chunk;
        }
        phy = PyLong_AsLongLong(PyList_GET_ITEM(phys, i));
        slot_count = index_entry(mm, slots, entries_base, count + i,
                                 (int32_t)(crc & 0x7FFFFFFFu), phy, diff, slot_count);
    }
    index_header(mm, begin_ts, store_ts, begin_phy, phy, slot_count, count + n);
    result = PyLong_FromLongLong(slot_count);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&prefix);
    return result;
}

#define CQ_UNIT 20

static PyObject *cq_units(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos;
    PyObject *offsets, *tags;
    long long end;
    if (!PyArg_ParseTuple(args, "w*nO!LO!:cq_units", &buf, &pos, &PyList_Type, &offsets, &end,
                          &PyList_Type, &tags))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = PyList_GET_SIZE(offsets);
    if (PyList_GET_SIZE(tags) != n) {
        PyErr_SetString(PyExc_TypeError, "offsets and tags codes differ in length");
        goto done;
    }
    if (pos < 0 || pos > buf.len || n > (buf.len - pos) / CQ_UNIT) {
        PyErr_SetString(PyExc_IndexError, "units do not fit in the buffer");
        goto done;
    }
    /* Every size and tags code checked before anything is written. */
    for (Py_ssize_t i = 0; i < n; i++) {
        long long at = PyLong_AsLongLong(PyList_GET_ITEM(offsets, i));
        if (at == -1 && PyErr_Occurred()) goto done;
        long long next = end;
        if (i + 1 < n) {
            next = PyLong_AsLongLong(PyList_GET_ITEM(offsets, i + 1));
            if (next == -1 && PyErr_Occurred()) goto done;
        }
        long long size;
        if (__builtin_sub_overflow(next, at, &size) || size < 1 || size > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "a record size is not in 1..2^31-1");
            goto done;
        }
        long long code = PyLong_AsLongLong(PyList_GET_ITEM(tags, i));
        if (code == -1 && PyErr_Occurred()) goto done;
    }
    unsigned char *u = (unsigned char *)buf.buf + pos;
    for (Py_ssize_t i = 0; i < n; i++, u += CQ_UNIT) {
        long long at = PyLong_AsLongLong(PyList_GET_ITEM(offsets, i));
        long long next = i + 1 < n ? PyLong_AsLongLong(PyList_GET_ITEM(offsets, i + 1)) : end;
        put64(u, (uint64_t)at);
        put32(u + 8, (uint32_t)(next - at));
        put64(u + 12, (uint64_t)PyLong_AsLongLong(PyList_GET_ITEM(tags, i)));
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&buf);
    return result;
}

static PyObject *send_properties(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *raw, *cluster, *suffix;
    if (!PyArg_ParseTuple(args, "UUU:send_properties", &raw, &cluster, &suffix)) return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(raw), segments = 0;
    int kind = PyUnicode_KIND(raw);
    const void *data = PyUnicode_DATA(raw);
    PyObject *props = PyDict_New(), *wait = NULL, *result = NULL;
    Py_ssize_t wait_start = -1, wait_end = -1;  /* the WAIT segment, [start, end) */
    if (!props) return NULL;
    if (n == 0) goto not_canonical;
    for (Py_ssize_t start = 0; start <= n;) {
        Py_ssize_t end = start, sep = -1;
        while (end < n) {
            Py_UCS4 c = PyUnicode_READ(kind, data, end);
            if (c == 2) break;
            if (c == 1 && sep < 0) sep = end;
            end++;
        }
        /* key = [start, sep), value = [sep + 1, end): both non-empty */
        if (sep <= start || sep + 1 >= end) goto not_canonical;
        PyObject *key = PyUnicode_Substring(raw, start, sep);
        if (!key) goto error;
        PyObject *value = PyUnicode_Substring(raw, sep + 1, end);
        if (!value) { Py_DECREF(key); goto error; }
        int is_wait = PyUnicode_CompareWithASCIIString(key, "WAIT") == 0;
        int is_cluster = PyUnicode_CompareWithASCIIString(key, "CLUSTER") == 0;
        int rc = 0;
        segments++;
        if (is_cluster || (is_wait && wait)) {
            rc = 1;
        } else if (is_wait) {
            wait = value;
            value = NULL;
            wait_start = start;
            wait_end = end;
        } else {
            rc = PyDict_SetItem(props, key, value) < 0 ? -1 : 0;
        }
        Py_DECREF(key);
        Py_XDECREF(value);
        if (rc < 0) goto error;
        if (rc > 0) goto not_canonical;
        start = end + 1;
    }
    if (PyDict_GET_SIZE(props) + (wait ? 1 : 0) != segments) goto not_canonical;  /* a key twice */
    if (PyDict_SetItemString(props, "CLUSTER", cluster) < 0) goto error;
    if (wait && PyDict_SetItemString(props, "WAIT", wait) < 0) goto error;
    PyObject *stored;
    if (!wait) {
        stored = PyUnicode_Concat(raw, suffix);
    } else {
        /* raw without [wait_start, wait_end) and one separator next to it */
        PyObject *before = NULL, *after = NULL, *base = NULL;
        if (wait_start > 0) {
            before = PyUnicode_Substring(raw, 0, wait_start - 1);
            after = PyUnicode_Substring(raw, wait_end, n);
        } else {
            before = PyUnicode_Substring(raw, 0, 0);
            after = PyUnicode_Substring(raw, wait_end < n ? wait_end + 1 : n, n);
        }
        if (before && after) base = PyUnicode_Concat(before, after);
        Py_XDECREF(before);
        Py_XDECREF(after);
        if (!base) goto error;
        if (PyUnicode_GET_LENGTH(base) == 0) {
            stored = PyUnicode_Substring(suffix, 1, PyUnicode_GET_LENGTH(suffix));
        } else {
            stored = PyUnicode_Concat(base, suffix);
        }
        Py_DECREF(base);
    }
    if (!stored) goto error;
    result = Py_BuildValue("(NNO)", props, stored, wait ? wait : Py_None);
    props = NULL;
    goto error;  /* the common exit: release what is still held */
not_canonical:
    result = Py_NewRef(Py_None);
error:
    Py_XDECREF(props);
    Py_XDECREF(wait);
    return result;
}

#define BATCH_HEAD 20
#define BATCH_MIN (BATCH_HEAD + 2)

/* The pairs of a member's canonical properties bytes ``p[0..n)`` (n > 0) into ``into``:
 * 1 when canonical, 0 when not, -1 on error. */
static int canonical_pairs(const char *p, Py_ssize_t n, PyObject *into) {
    if (p[n - 1] == 2) n--;  /* stock's client ends every pair with \x02 */
    if (n == 0) return 0;
    Py_ssize_t segments = 0;
    for (Py_ssize_t start = 0; start <= n;) {
        Py_ssize_t end = start, sep = -1, seps = 0;
        while (end < n && p[end] != 2) {
            if (p[end] == 1) { if (sep < 0) sep = end; seps++; }
            end++;
        }
        if (seps != 1 || sep == start || sep + 1 == end) return 0;
        PyObject *key = PyUnicode_DecodeUTF8(p + start, sep - start, NULL);
        if (!key) return -1;
        PyObject *value = PyUnicode_DecodeUTF8(p + sep + 1, end - sep - 1, NULL);
        if (!value) { Py_DECREF(key); return -1; }
        int rc = PyDict_SetItem(into, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (rc < 0) return -1;
        segments++;
        start = end + 1;
    }
    return PyDict_GET_SIZE(into) == segments;  /* else a key twice */
}

static PyObject *batch_members(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer buf;
    PyObject *batch_props, *batch_str;
    if (!PyArg_ParseTuple(args, "y*O!U:batch_members", &buf, &PyDict_Type, &batch_props,
                          &batch_str))
        return NULL;
    const unsigned char *b = buf.buf;
    Py_ssize_t n = buf.len, pos = 0, batch_len;
    char *joined = NULL;
    PyObject *out = PyList_New(0);
    if (!out) goto error;
    if (n == 0) goto not_handled;
    const char *batch_utf8 = PyUnicode_AsUTF8AndSize(batch_str, &batch_len);
    if (!batch_utf8) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) goto error;
        PyErr_Clear();
        goto not_handled;
    }
    /* A member's stored string is built as UTF-8 (its own pairs, \002, the batch's) and
     * decoded once; the largest member's properties fit in 32767 bytes. */
    joined = PyMem_Malloc(32767 + 1 + (size_t)batch_len);
    if (!joined) {
        PyErr_NoMemory();
        goto error;
    }
    while (pos < n) {
        if (n - pos < BATCH_MIN) goto not_handled;
        int32_t total = get32(b + pos), flag = get32(b + pos + 12), body_len = get32(b + pos + 16);
        if (total < BATCH_MIN || total > n - pos || body_len < 0 || body_len > total - BATCH_MIN)
            goto not_handled;
        Py_ssize_t end = pos + total, p = pos + BATCH_HEAD + body_len;
        int16_t props_len = (int16_t)((uint16_t)b[p] << 8 | b[p + 1]);
        p += 2;
        if (props_len < 0 || p + props_len != end) goto not_handled;
        PyObject *props = PyDict_New(), *stored = NULL;
        if (!props) goto error;
        if (props_len > 0) {
            /* The stored string decoded first: it validates the member's whole string as
             * UTF-8 (a trailing \002 left out of it is ASCII), which canonical_pairs needs,
             * as it cuts the pairs at ASCII separators. */
            Py_ssize_t own_len = b[end - 1] == 2 ? props_len - 1 : props_len;
            memcpy(joined, b + p, (size_t)own_len);
            joined[own_len] = 2;
            memcpy(joined + own_len + 1, batch_utf8, (size_t)batch_len);
            stored = PyUnicode_DecodeUTF8(joined, own_len + 1 + batch_len, NULL);
            if (!stored) {
                Py_DECREF(props);
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto error;
                PyErr_Clear();
                goto not_handled;
            }
            int rc = canonical_pairs((const char *)b + p, props_len, props);
            if (rc <= 0) {
                Py_DECREF(props);
                Py_DECREF(stored);
                if (rc < 0) goto error;
                goto not_handled;
            }
        } else {
            stored = Py_NewRef(batch_str);
        }
        PyObject *body = stored ? PyBytes_FromStringAndSize((const char *)b + pos + BATCH_HEAD,
                                                            body_len) : NULL;
        if (!body || PyDict_Update(props, batch_props) < 0) {
            Py_DECREF(props);
            Py_XDECREF(stored);
            Py_XDECREF(body);
            goto error;
        }
        PyObject *flag_o = PyLong_FromLong(flag), *member = flag_o ? PyTuple_New(4) : NULL;
        if (!member) {
            Py_XDECREF(flag_o);
            Py_DECREF(body);
            Py_DECREF(props);
            Py_DECREF(stored);
            goto error;
        }
        PyTuple_SET_ITEM(member, 0, flag_o);
        PyTuple_SET_ITEM(member, 1, body);
        PyTuple_SET_ITEM(member, 2, props);
        PyTuple_SET_ITEM(member, 3, stored);
        if (PyList_Append(out, member) < 0) {
            Py_DECREF(member);
            goto error;
        }
        Py_DECREF(member);
        pos = end;
    }
    PyMem_Free(joined);
    PyBuffer_Release(&buf);
    return out;
not_handled:
    PyMem_Free(joined);
    PyBuffer_Release(&buf);
    Py_XDECREF(out);
    Py_RETURN_NONE;
error:
    PyMem_Free(joined);
    PyBuffer_Release(&buf);
    Py_XDECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"batch_members", batch_members, METH_VARARGS,
     "A batch body's members (flag, body, properties, stored string), or None."},
    {"send_properties", send_properties, METH_VARARGS,
     "A send's stored properties from a canonical string, or None."},
    {"write_record", write_record, METH_VARARGS,
     "Write one stored record into a buffer; (size, offset msg id)."},
    {"write_batch", write_batch, METH_VARARGS,
     "Write a batch's records, one queue's, back to back into a buffer; (msg ids, sizes)."},
    {"cq_units", cq_units, METH_VARARGS,
     "Write the consume-queue units of records lying back to back into a buffer."},
    {"index_put", index_put, METH_VARARGS,
     "Add one entry to a CRC-32 keyed index file's mapping; the new hash slot count."},
    {"index_put_many", index_put_many, METH_VARARGS,
     "index_put for prefix + each key in turn, the header written once; the new slot count."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_put", "The store's put path in C (see _put.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__put(void) { return PyModule_Create(&module); }
