/* aiorocketmq.protocol._message: stored records of a pull body -> MessageExt objects,
 * and a producer's batch of messages -> a SEND_BATCH_MESSAGE body (``encode_batch``, its
 * contract above the function).
 *
 * The compiled twin of protocol/message.py's ``decode_messages`` for the common records
 * (upstream ``MessageDecoder.decodes``), built from source by pip (setuptools, optional:
 * without a C compiler message.py decodes in Python).
 *
 * decode_records(body, message_ext_type) -> list[MessageExt] | None
 *
 *   body: a bytes-like object of stored records back to back, to its exact end.
 *   message_ext_type: protocol.message.MessageExt (its slots are written directly: the
 *   first call looks their offsets up and checks they are object slots).
 *
 *   Each object carries exactly what ``decode_message`` sets: topic, body, flag,
 *   properties (``decode_properties``: segments split on \x02, key and value on the first
 *   \x01, empty keys and values dropped, a repeated key keeps its first place and takes
 *   the last value), transaction_id None, queue_id, store_size, queue_offset, sys_flag,
 *   born/store timestamps and "ip:port" hosts, commit_log_offset, body_crc,
 *   reconsume_times, prepared_transaction_offset and msg_id (UNIQ_KEY, else the offset
 *   message id: store IP, port and commit log offset as 32 upper-case hex digits).
 *
 *   Returns None at the first record of anything else (what was built so far is
 *   dropped), and the caller decodes the whole body in Python, which also raises the
 *   errors: a record that does not decode, a v2 record, an IPv6 host, a compressed body,
 *   a topic or properties string that is not strict UTF-8 (Python reads "replace"d text).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include "_stored_record.h"

/* The slots written, in this order; their offsets in the MessageExt type. */
enum {
    S_TOPIC, S_BODY, S_FLAG, S_PROPERTIES, S_TRANSACTION_ID, S_QUEUE_ID, S_STORE_SIZE,
    S_QUEUE_OFFSET, S_SYS_FLAG, S_BORN_TIMESTAMP, S_BORN_HOST, S_STORE_TIMESTAMP,
    S_STORE_HOST, S_MSG_ID, S_COMMIT_LOG_OFFSET, S_BODY_CRC, S_RECONSUME_TIMES,
    S_PREPARED_OFFSET, N_SLOTS
};
static const char *SLOT_NAMES[N_SLOTS] = {
    "topic", "body", "flag", "properties", "transaction_id", "queue_id", "store_size",
    "queue_offset", "sys_flag", "born_timestamp", "born_host", "store_timestamp",
    "store_host", "msg_id", "commit_log_offset", "body_crc", "reconsume_times",
    "prepared_transaction_offset",
};
static PyTypeObject *slots_of;  /* the type the offsets below are for (a strong ref) */
static Py_ssize_t slot_offset[N_SLOTS];
static PyObject *uniq_key;  /* "UNIQ_KEY" */

static int resolve_slots(PyTypeObject *tp) {
    if (tp == slots_of) return 0;
    if (tp->tp_dictoffset || tp->tp_itemsize) {
        PyErr_SetString(PyExc_TypeError, "decode_records needs a type with __slots__ only");
        return -1;
    }
    Py_ssize_t offsets[N_SLOTS];  /* kept only once every one is found */
    for (int i = 0; i < N_SLOTS; i++) {
        PyObject *d = PyObject_GetAttrString((PyObject *)tp, SLOT_NAMES[i]);
        if (!d) return -1;
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type)
            && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (ok) offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", tp->tp_name, SLOT_NAMES[i]);
            return -1;
        }
    }
    memcpy(slot_offset, offsets, sizeof offsets);
    Py_XSETREF(slots_of, (PyTypeObject *)Py_NewRef(tp));
    return 0;
}

static inline void set_slot(PyObject *m, int i, PyObject *v) {  /* steals v */
    PyObject **p = (PyObject **)((char *)m + slot_offset[i]);
    Py_XSETREF(*p, v);
}

/* Property keys repeat from record to record: their str objects are kept. */
#define KEY_CACHE 32
#define KEY_MAX 32
static struct { Py_ssize_t len; char bytes[KEY_MAX]; PyObject *str; } key_cache[KEY_CACHE];
static int key_cache_used;

static PyObject *key_str(const char *s, Py_ssize_t n) {  /* new reference */
    if (n <= KEY_MAX) {
        for (int i = 0; i < key_cache_used; i++)
            if (key_cache[i].len == n && memcmp(key_cache[i].bytes, s, (size_t)n) == 0)
                return Py_NewRef(key_cache[i].str);
    }
    PyObject *str = PyUnicode_DecodeUTF8(s, n, "strict");
    if (str && n <= KEY_MAX && key_cache_used < KEY_CACHE) {
        key_cache[key_cache_used].len = n;
        memcpy(key_cache[key_cache_used].bytes, s, (size_t)n);
        key_cache[key_cache_used].str = Py_NewRef(str);
        key_cache_used++;
    }
    return str;
}

/* decode_properties of a record's properties bytes; NULL with an exception on error. */
static PyObject *properties(const unsigned char *s, Py_ssize_t len) {
    PyObject *d = PyDict_New();
    Py_ssize_t pos = 0, kl, vl;
    const unsigned char *k, *v;
    while (d && next_property(s, len, &pos, &k, &kl, &v, &vl)) {
        PyObject *key = key_str((const char *)k, kl);
        PyObject *value = key ? PyUnicode_DecodeUTF8((const char *)v, vl, "strict") : NULL;
        if (!value || PyDict_SetItem(d, key, value) < 0) Py_CLEAR(d);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return d;
}

typedef struct { unsigned char key[8]; PyObject *text; } HostCache;

static PyObject *host(HostCache *c, const unsigned char *ip_port) {  /* new reference */
    if (c->text && memcmp(c->key, ip_port, 8) == 0) return Py_NewRef(c->text);
    char text[HOST_TEXT_MAX];
    PyObject *t = PyUnicode_FromStringAndSize(text, host_text(ip_port, text));
    if (t) {
        memcpy(c->key, ip_port, 8);
        Py_XSETREF(c->text, Py_NewRef(t));
    }
    return t;
}

static PyObject *record(PyTypeObject *tp, const unsigned char *r, const StoredRecord *rec,
                        PyObject **topic_cache, HostCache *born_c, HostCache *store_c) {
    PyObject *m = tp->tp_alloc(tp, 0);
    if (!m) return NULL;
    const unsigned char *t = rec->topic;
    Py_ssize_t topic_len = rec->topic_len;
    PyObject *topic;
    if (*topic_cache && PyUnicode_GET_LENGTH(*topic_cache) == topic_len
        && PyUnicode_IS_ASCII(*topic_cache)
        && memcmp(PyUnicode_DATA(*topic_cache), t, (size_t)topic_len) == 0) {
        topic = Py_NewRef(*topic_cache);
    } else {
        topic = PyUnicode_DecodeUTF8((const char *)t, topic_len, "strict");
        if (!topic) goto fail;
        Py_XSETREF(*topic_cache, Py_NewRef(topic));
    }
    set_slot(m, S_TOPIC, topic);
    PyObject *v;
#define SET(slot, expr) do { if (!(v = (expr))) goto fail; set_slot(m, slot, v); } while (0)
    SET(S_BODY, PyBytes_FromStringAndSize((const char *)rec->body, rec->body_len));
    SET(S_FLAG, PyLong_FromLong(be32(r + 16)));
    PyObject *props = properties(rec->props, rec->props_len);
    SET(S_PROPERTIES, props);
    set_slot(m, S_TRANSACTION_ID, Py_NewRef(Py_None));
    SET(S_QUEUE_ID, PyLong_FromLong(be32(r + 12)));
    SET(S_STORE_SIZE, PyLong_FromSsize_t(rec->total));
    SET(S_QUEUE_OFFSET, PyLong_FromLongLong(be64(r + 20)));
    SET(S_SYS_FLAG, PyLong_FromLong(be32(r + 36)));
    SET(S_BORN_TIMESTAMP, PyLong_FromLongLong(be64(r + 40)));
    SET(S_BORN_HOST, host(born_c, r + 48));
    SET(S_STORE_TIMESTAMP, PyLong_FromLongLong(be64(r + 56)));
    SET(S_STORE_HOST, host(store_c, r + 64));
    PyObject *uniq = PyDict_GetItemWithError(props, uniq_key);  /* borrowed */
    if (uniq) {
        set_slot(m, S_MSG_ID, Py_NewRef(uniq));
    } else {
        if (PyErr_Occurred()) goto fail;
        char hex[32];
        offset_msg_id(r, hex);
        SET(S_MSG_ID, PyUnicode_FromStringAndSize(hex, 32));
    }
    SET(S_COMMIT_LOG_OFFSET, PyLong_FromLongLong(be64(r + 28)));
    SET(S_BODY_CRC, PyLong_FromLong(be32(r + 8)));
    SET(S_RECONSUME_TIMES, PyLong_FromLong(be32(r + 72)));
    SET(S_PREPARED_OFFSET, PyLong_FromLongLong(be64(r + 76)));
#undef SET
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}

static PyObject *decode_records(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *body_obj;
    PyTypeObject *tp;
    if (!PyArg_ParseTuple(args, "OO!:decode_records", &body_obj, &PyType_Type, &tp)) return NULL;
    if (resolve_slots(tp) < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(body_obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = view.buf;
    Py_ssize_t len = view.len;
    StoredRecord rec;
    PyObject *topic_cache = NULL;
    HostCache born_c = {{0}, NULL}, store_c = {{0}, NULL};
    PyObject *out = PyList_New(0);
    for (Py_ssize_t pos = 0; out && pos < len; pos += rec.total) {
        if (!stored_record_lengths(b + pos, len - pos, &rec)) {
            Py_SETREF(out, Py_NewRef(Py_None));  /* the whole body goes to Python */
            break;
        }
        PyObject *m = record(tp, b + pos, &rec, &topic_cache, &born_c, &store_c);
        if (!m || PyList_Append(out, m) < 0) Py_CLEAR(out);
        Py_XDECREF(m);
    }
    Py_XDECREF(topic_cache);
    Py_XDECREF(born_c.text);
    Py_XDECREF(store_c.text);
    PyBuffer_Release(&view);
    return out;
}

/* encode_batch(messages) -> bytes | None: the C twin of message.py's ``encode_batch``
 * (``MessageDecoder.encodeMessages``): per message TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG,
 * BODY length (big-endian int32 each), BODY, a big-endian int16 properties length, and the
 * properties as ``k\x01v`` joined by \x02 in dict order, None values skipped.
 *
 * Only the common case: a list or tuple of objects whose ``body`` is exactly bytes,
 * ``flag`` an int in int32 range and ``properties`` exactly a dict of str keys and str or
 * None values, the text encodable as UTF-8, each message's properties at most 32767 bytes
 * and its TOTALSIZE in int32 range. Anything else returns None (with no error set) and
 * the caller encodes in Python, which also raises the errors. */
typedef struct { char *p; size_t len, cap; } wbuf;

static int wb_reserve(wbuf *w, size_t more) {
    if (w->len + more <= w->cap) return 0;
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->len + more) cap *= 2;
    char *p = PyMem_Realloc(w->p, cap);
    if (!p) { PyErr_NoMemory(); return -1; }
    w->p = p;
    w->cap = cap;
    return 0;
}

static void put_be32(char *p, uint32_t v) {
    p[0] = (char)(v >> 24); p[1] = (char)(v >> 16); p[2] = (char)(v >> 8); p[3] = (char)v;
}

static PyObject *s_body, *s_flag, *s_properties;

/* 1: written; 0: not the common case (no error set); -1: error set. */
static int encode_member(wbuf *w, PyObject *m) {
    PyObject *body = PyObject_GetAttr(m, s_body);
    if (!body) { PyErr_Clear(); return 0; }
    PyObject *flag = PyObject_GetAttr(m, s_flag);
    if (!flag) { Py_DECREF(body); PyErr_Clear(); return 0; }
    PyObject *props = PyObject_GetAttr(m, s_properties);
    if (!props) { Py_DECREF(body); Py_DECREF(flag); PyErr_Clear(); return 0; }
    int rc = 0;
    long flag_v = 0;
    if (!PyBytes_CheckExact(body) || !PyLong_CheckExact(flag) || !PyDict_CheckExact(props))
        goto done;
    int overflow = 0;
    flag_v = PyLong_AsLongAndOverflow(flag, &overflow);
    if (overflow || flag_v < INT32_MIN || flag_v > INT32_MAX) goto done;
    if (flag_v == -1 && PyErr_Occurred()) { PyErr_Clear(); goto done; }
    Py_ssize_t body_len = PyBytes_GET_SIZE(body);
    if (body_len > INT32_MAX) goto done;
    size_t start = w->len;
    if (wb_reserve(w, 20 + (size_t)body_len + 2) < 0) { rc = -1; goto done; }
    char *h = w->p + start;
    memset(h + 4, 0, 8);  /* MAGICCODE 0, BODYCRC 0 */
    put_be32(h + 12, (uint32_t)(int32_t)flag_v);
    put_be32(h + 16, (uint32_t)body_len);
    memcpy(h + 20, PyBytes_AS_STRING(body), (size_t)body_len);
    w->len = start + 20 + (size_t)body_len + 2;  /* the properties length after them */
    size_t props_start = w->len;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int first = 1;
    while (PyDict_Next(props, &pos, &k, &v)) {
        if (v == Py_None) continue;
        if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v)) goto undo;
        Py_ssize_t klen, vlen;
        const char *kb = PyUnicode_AsUTF8AndSize(k, &klen);
        if (!kb) { PyErr_Clear(); goto undo; }
        const char *vb = PyUnicode_AsUTF8AndSize(v, &vlen);
        if (!vb) { PyErr_Clear(); goto undo; }
        size_t need = (size_t)klen + (size_t)vlen + 2;
        if (w->len - props_start + need > 32767 + 1) goto undo;  /* over 32767 after this */
        if (wb_reserve(w, need) < 0) { rc = -1; goto done; }
        char *q = w->p + w->len;
        if (!first) *q++ = '\x02';
        memcpy(q, kb, (size_t)klen); q += klen;
        *q++ = '\x01';
        memcpy(q, vb, (size_t)vlen); q += vlen;
        w->len = (size_t)(q - w->p);
        first = 0;
    }
    size_t props_len = w->len - props_start;
    if (props_len > 32767) goto undo;
    size_t total = 20 + (size_t)body_len + 2 + props_len;
    if (total > INT32_MAX) goto undo;
    h = w->p + start;
    put_be32(h, (uint32_t)total);
    h[20 + body_len] = (char)(props_len >> 8);
    h[20 + body_len + 1] = (char)props_len;
    rc = 1;
    goto done;
undo:
    w->len = start;
done:
    Py_DECREF(body);
    Py_DECREF(flag);
    Py_DECREF(props);
    return rc;
}

static PyObject *encode_batch(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyList_CheckExact(arg) && !PyTuple_CheckExact(arg)) Py_RETURN_NONE;
    PyObject *seq = PySequence_Fast(arg, "a list or tuple");
    if (!seq) return NULL;
    wbuf w = {NULL, 0, 0};
    PyObject *out = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        int rc = encode_member(&w, PySequence_Fast_GET_ITEM(seq, i));
        if (rc < 0) goto end;
        if (rc == 0) { out = Py_NewRef(Py_None); goto end; }
    }
    out = PyBytes_FromStringAndSize(w.p ? w.p : "", (Py_ssize_t)w.len);
end:
    PyMem_Free(w.p);
    Py_DECREF(seq);
    return out;
}

static PyMethodDef methods[] = {
    {"encode_batch", encode_batch, METH_O,
     "encode_batch(messages) -> bytes | None: a SEND_BATCH_MESSAGE body (see the comment "
     "above the function in the module source)"},
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(body, message_ext_type) -> list | None: stored records -> MessageExt "
     "objects (see the module source's head comment)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_message",
    "Stored records -> MessageExt objects (the C twin of message.py's decode_messages).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__message(void) {
    uniq_key = PyUnicode_InternFromString("UNIQ_KEY");
    if (!uniq_key) return NULL;
    s_body = PyUnicode_InternFromString("body");
    s_flag = PyUnicode_InternFromString("flag");
    s_properties = PyUnicode_InternFromString("properties");
    if (!s_body || !s_flag || !s_properties) return NULL;
    return PyModule_Create(&module);
}
