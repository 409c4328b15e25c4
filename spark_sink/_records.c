/* aiorocketmq.spark_sink._records: stored records of PULL_MESSAGE bodies -> Arrow buffers.
 *
 * The compiled twin of the numpy path in columnar.py (``ColumnarDecoder``), built from
 * source by pip (setuptools, optional: without a C compiler the numpy path is used).
 * It reads the same records as ``protocol.message.decode_messages`` (upstream
 * ``MessageDecoder.decode``) and produces the columns of ``rows.arrow_schema`` as raw
 * buffers that Python wraps with ``pyarrow.Array.from_buffers``.
 *
 * scan(windows, with_properties) -> tuple | None
 *
 *   windows: a list of (body, end) pairs; body is a bytes-like object of stored records
 *   back to back, end the end of the offset window it was pulled for. A body's records
 *   are kept up to its first one whose queue offset is >= end (the per-message path's
 *   ``break``). Every record of every body is checked as ``decode_message`` checks it.
 *
 *   Returns None whenever this code does not give exactly the per-message path's rows,
 *   and the caller takes that path (which then raises its own error where there is one):
 *   a record that does not decode, a v2 record, an IPv6 host, a compressed body, a topic
 *   or properties string that is not strict UTF-8 (the reference reads "replace"d text),
 *   a timestamp whose microseconds overflow int64, or a column over 2 GiB.
 *
 *   Otherwise (n, fixed, topic, msg_id, tags, keys, body, born_host, properties):
 *     n          rows kept
 *     fixed      (queue_id int32[n], queue_offset int64[n], born_us int64[n],
 *                 store_us int64[n], reconsume_times int32[n]) as bytes, native order
 *     topic, msg_id, body, born_host
 *                (offsets int32[n + 1], data) as bytes
 *     tags, keys (validity bitmap or None, null count, offsets, data): the property's
 *                value, null where the record has none
 *     properties None, or with with_properties (entry offsets int32[n + 1], key offsets,
 *                key data, value offsets, value data): every property in the order of its
 *                first occurrence with its last value (``decode_properties``: segments
 *                split on \x02, key and value on the first \x01, empty keys and values
 *                dropped).
 *   msg_id is the UNIQ_KEY property, else the offset message id: the store host's 4 IP
 *   bytes, its port and the commit log offset, 16 bytes as 32 upper-case hex digits.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_stored_record.h"  /* protocol/: the record checks, shared with protocol/_message.c */

#define MAX_COLUMN 0x7FFFFFFFLL

typedef struct { char *p; Py_ssize_t len, cap; } Buf;

static int buf_reserve(Buf *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    char *p = PyMem_RawRealloc(b->p, (size_t)cap);  /* Raw: called without the GIL */
    if (!p) return -1;  /* the caller raises MemoryError once it holds the GIL again */
    b->p = p; b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    if (n) memcpy(b->p + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

/* One property: key and value inside the record's properties string. */
typedef struct { const unsigned char *k, *v; Py_ssize_t kl, vl; } Prop;

typedef struct {
    Buf qid, qoff, born, store, recon;
    Buf topic_o, topic_d, id_o, id_d, body_o, body_d, host_o, host_d;
    Buf tags_v, tags_o, tags_d, keys_v, keys_o, keys_d;
    Buf map_o, key_o, key_d, val_o, val_d;
    Buf props;  /* Prop scratch for one record */
    Py_ssize_t n, tags_nulls, keys_nulls, entries;
    unsigned char host_key[8];  /* the last born host's IP and port, and its text */
    char host[HOST_TEXT_MAX];
    int host_len;
} Out;

#define OUT_BUFS(o) { &o->qid, &o->qoff, &o->born, &o->store, &o->recon, &o->topic_o, \
    &o->topic_d, &o->id_o, &o->id_d, &o->body_o, &o->body_d, &o->host_o, &o->host_d, \
    &o->tags_v, &o->tags_o, &o->tags_d, &o->keys_v, &o->keys_o, &o->keys_d, &o->map_o, \
    &o->key_o, &o->key_d, &o->val_o, &o->val_d, &o->props }
#define N_BUFS 25

static void out_free(Out *o) {
    Buf *all[N_BUFS] = OUT_BUFS(o);
    for (int i = 0; i < N_BUFS; i++) PyMem_RawFree(all[i]->p);
}

/* Appends the end offset of a value just written to data ``d`` (offsets ``o``). */
static inline int put_offset(Buf *o, const Buf *d) {
    if (d->len > MAX_COLUMN) return 1;  /* over 2 GiB: let the caller fall back */
    int32_t v = (int32_t)d->len;
    return buf_put(o, &v, 4) < 0 ? -1 : 0;
}

/* A string value that may be null: validity bit, offset, data. */
static int put_nullable(Buf *valid, Buf *o, Buf *d, Py_ssize_t row, const Prop *p,
                        Py_ssize_t *nulls) {
    if ((row & 7) == 0) {
        unsigned char zero = 0;
        if (buf_put(valid, &zero, 1) < 0) return -1;
    }
    if (p) {
        valid->p[row >> 3] |= (char)(1 << (row & 7));
        if (buf_put(d, p->v, p->vl) < 0) return -1;
    } else {
        (*nulls)++;
    }
    return put_offset(o, d);
}

static const Prop *find_prop(const Prop *ps, Py_ssize_t n, const char *key, Py_ssize_t kl) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (ps[i].kl == kl && memcmp(ps[i].k, key, (size_t)kl) == 0) return &ps[i];
    return NULL;
}

/* Splits one record's properties (``decode_properties``) into out->props. */
static int split_props(Out *o, const unsigned char *s, Py_ssize_t len, Py_ssize_t *count) {
    o->props.len = 0;
    Py_ssize_t n = 0, pos = 0;
    Prop p;
    while (next_property(s, len, &pos, &p.k, &p.kl, &p.v, &p.vl)) {
        Prop *same = (Prop *)find_prop((const Prop *)o->props.p, n, (const char *)p.k, p.kl);
        if (same) {
            same->v = p.v;
            same->vl = p.vl;
        } else {
            if (buf_put(&o->props, &p, sizeof p) < 0) return -1;
            n++;
        }
    }
    *count = n;
    return 0;
}

/* One record known to be well formed; returns -1 on error, 1 to fall back, 0 done. */
static int add_record(Out *o, const unsigned char *r, const StoredRecord *rec, int with_props) {
    int rc;
    int32_t qid = be32(r + 12), recon = be32(r + 72);
    int64_t qoff = be64(r + 20), born = be64(r + 40), store = be64(r + 56);
    if (born > INT64_MAX / 1000 || born < INT64_MIN / 1000 || store > INT64_MAX / 1000
        || store < INT64_MIN / 1000)
        return 1;
    born *= 1000; store *= 1000;
    if (buf_put(&o->qid, &qid, 4) < 0 || buf_put(&o->qoff, &qoff, 8) < 0
        || buf_put(&o->born, &born, 8) < 0 || buf_put(&o->store, &store, 8) < 0
        || buf_put(&o->recon, &recon, 4) < 0)
        return -1;
    if (buf_put(&o->body_d, rec->body, rec->body_len) < 0) return -1;
    if ((rc = put_offset(&o->body_o, &o->body_d))) return rc;
    if (buf_put(&o->topic_d, rec->topic, rec->topic_len) < 0) return -1;
    if ((rc = put_offset(&o->topic_o, &o->topic_d))) return rc;

    if (!o->host_len || memcmp(o->host_key, r + 48, 8) != 0) {  /* one producer: one host */
        memcpy(o->host_key, r + 48, 8);
        o->host_len = host_text(r + 48, o->host);
    }
    if (buf_put(&o->host_d, o->host, o->host_len) < 0) return -1;
    if ((rc = put_offset(&o->host_o, &o->host_d))) return rc;

    Py_ssize_t np = 0;
    if (split_props(o, rec->props, rec->props_len, &np) < 0) return -1;
    const Prop *ps = (const Prop *)o->props.p;
    const Prop *uniq = find_prop(ps, np, "UNIQ_KEY", 8);
    if (uniq) {
        if (buf_put(&o->id_d, uniq->v, uniq->vl) < 0) return -1;
    } else {
        char hex[32];
        offset_msg_id(r, hex);
        if (buf_put(&o->id_d, hex, 32) < 0) return -1;
    }
    if ((rc = put_offset(&o->id_o, &o->id_d))) return rc;
    Py_ssize_t row = o->n;
    if ((rc = put_nullable(&o->tags_v, &o->tags_o, &o->tags_d, row,
                           find_prop(ps, np, "TAGS", 4), &o->tags_nulls)))
        return rc;
    if ((rc = put_nullable(&o->keys_v, &o->keys_o, &o->keys_d, row,
                           find_prop(ps, np, "KEYS", 4), &o->keys_nulls)))
        return rc;
    if (with_props) {
        for (Py_ssize_t i = 0; i < np; i++) {
            if (buf_put(&o->key_d, ps[i].k, ps[i].kl) < 0) return -1;
            if ((rc = put_offset(&o->key_o, &o->key_d))) return rc;
            if (buf_put(&o->val_d, ps[i].v, ps[i].vl) < 0) return -1;
            if ((rc = put_offset(&o->val_o, &o->val_d))) return rc;
        }
        o->entries += np;
        if (o->entries > MAX_COLUMN) return 1;
        int32_t e = (int32_t)o->entries;
        if (buf_put(&o->map_o, &e, 4) < 0) return -1;
    }
    o->n++;
    return 0;
}

/* Checks and adds the records of one body; -1 error, 1 fall back, 0 done. */
static int scan_body(Out *o, const unsigned char *b, Py_ssize_t len, int64_t end, int with_props) {
    Py_ssize_t pos = 0;
    int keep = 1;
    StoredRecord rec;
    while (pos < len) {
        const unsigned char *r = b + pos;
        if (!stored_record_lengths(r, len - pos, &rec)) return 1;
        if (keep && be64(r + 20) >= end) keep = 0;
        if (keep) {
            int rc = add_record(o, r, &rec, with_props);
            if (rc) return rc;
        }
        pos += rec.total;
    }
    return 0;
}

static PyObject *as_bytes(const Buf *b) {
    return PyBytes_FromStringAndSize(b->p ? b->p : "", b->len);
}

static PyObject *string_col(const Buf *o, const Buf *d) {
    return Py_BuildValue("(NN)", as_bytes(o), as_bytes(d));
}

static PyObject *nullable_col(const Buf *v, Py_ssize_t nulls, const Buf *o, const Buf *d) {
    if (nulls == 0)
        return Py_BuildValue("(OnNN)", Py_None, nulls, as_bytes(o), as_bytes(d));
    return Py_BuildValue("(NnNN)", as_bytes(v), nulls, as_bytes(o), as_bytes(d));
}

static PyObject *scan(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *windows;
    int with_props;
    if (!PyArg_ParseTuple(args, "O!p:scan", &PyList_Type, &windows, &with_props)) return NULL;
    Out out;
    memset(&out, 0, sizeof out);
    Out *o = &out;
    PyObject *result = NULL;
    int32_t zero = 0;
    Buf *starts[] = {&o->topic_o, &o->id_o, &o->body_o, &o->host_o, &o->tags_o, &o->keys_o,
                     &o->map_o, &o->key_o, &o->val_o};
    for (size_t i = 0; i < sizeof starts / sizeof *starts; i++)
        if (buf_put(starts[i], &zero, 4) < 0) { PyErr_NoMemory(); goto done; }
    /* The bodies are held (buffer views) while the records are read without the GIL: the
     * link's loop thread goes on pulling meanwhile. */
    Py_ssize_t nw = PyList_GET_SIZE(windows), held = 0;
    Py_buffer *views = PyMem_Calloc((size_t)nw + 1, sizeof(Py_buffer));
    long long *ends = PyMem_Calloc((size_t)nw + 1, sizeof(long long));
    if (!views || !ends) { PyErr_NoMemory(); goto release; }
    for (; held < nw; held++) {
        PyObject *w = PyList_GET_ITEM(windows, held);
        PyObject *body_obj;
        if (!PyTuple_Check(w) || !PyArg_ParseTuple(w, "OL:window", &body_obj, &ends[held])) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a window is a (body, end) tuple");
            goto release;
        }
        if (PyObject_GetBuffer(body_obj, &views[held], PyBUF_SIMPLE) < 0) goto release;
    }
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nw && rc == 0; i++)
        rc = scan_body(o, views[i].buf, views[i].len, ends[i], with_props);
    Py_END_ALLOW_THREADS
    if (rc < 0) PyErr_NoMemory();
    else if (rc > 0) result = Py_NewRef(Py_None);
release:
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(ends);
    if (result || PyErr_Occurred()) goto done;
    PyObject *props = with_props
        ? Py_BuildValue("(NNNNN)", as_bytes(&o->map_o), as_bytes(&o->key_o),
                        as_bytes(&o->key_d), as_bytes(&o->val_o), as_bytes(&o->val_d))
        : Py_NewRef(Py_None);
    if (!props) goto done;
    result = Py_BuildValue(
        "(n(NNNNN)NNNNNNN)", o->n,
        as_bytes(&o->qid), as_bytes(&o->qoff), as_bytes(&o->born), as_bytes(&o->store),
        as_bytes(&o->recon),
        string_col(&o->topic_o, &o->topic_d), string_col(&o->id_o, &o->id_d),
        nullable_col(&o->tags_v, o->tags_nulls, &o->tags_o, &o->tags_d),
        nullable_col(&o->keys_v, o->keys_nulls, &o->keys_o, &o->keys_d),
        string_col(&o->body_o, &o->body_d), string_col(&o->host_o, &o->host_d), props);
done:
    out_free(o);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(windows, with_properties) -> tuple | None: stored records -> Arrow buffers "
     "(see the module source's head comment)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_records",
    "Stored records of pull bodies -> Arrow buffers (the C twin of columnar.py's numpy path).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__records(void) { return PyModule_Create(&module); }
