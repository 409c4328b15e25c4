/* aiorocketmq.protocol._command: the ROCKETMQ header of a RemotingCommand, both ways.
 *
 * The compiled twin of protocol/command.py's ``_decode_rocketmq_header_py`` and
 * ``_encode_rocketmq_header_py`` (upstream ``RocketMQSerializable``), built from source by
 * pip (setuptools, optional: without a C compiler command.py does both in Python, and the
 * Python functions stay the reference). The layout, big-endian::
 *
 *     int16 code | int8 language | int16 version | int32 opaque | int32 flag
 *     | int32 remarkLength | remark (UTF-8)
 *     | int32 extFieldsLength | { int16 keyLength | key | int32 valueLength | value }*
 *
 * decode_rocketmq_header(header, command_type, serialize_type) -> RemotingCommand | None
 *
 *   header: a bytes-like object holding the header and nothing else (anything else, a
 *   non-contiguous view included, is handed back).
 *   command_type: protocol.command.RemotingCommand (its slots are written directly: the
 *   first call looks their offsets up and checks they are object slots).
 *   Gives what the Python decoder gives: code, language, version, opaque and flag as ints,
 *   remark None when its length is 0, ext_fields None when its length is 0 (else a dict in
 *   wire order; a repeated key keeps its first place and takes the last value), body None,
 *   serialize_type the object passed.
 *   Returns None for anything the Python decoder raises on (a length past its bounds, a
 *   key length of 0x8000 or more, text that is not strict UTF-8, trailing bytes) and for a
 *   type with anything but slots; the caller then runs the Python decoder, which raises.
 *
 * encode_rocketmq_header(command) -> bytes | None
 *
 *   The header bytes, as the Python encoder writes them: remark None or "" as length 0,
 *   ext_fields None or {} as length 0, dict order, None keys and values skipped.
 *   Returns None for anything else (a number out of its field's range or not an int, a
 *   remark or key or value that is not exactly a str or has a lone surrogate, ext_fields
 *   not exactly a dict, a key over 32767 bytes, a map over 2**31-1 bytes, an unset slot);
 *   the caller then runs the Python encoder, which writes it or raises.
 *
 * send_v2_header(ext, header_type, known) -> header | None | NotImplemented
 *
 *   The compiled twin of protocol/headers.py's ``_send_v2_fast``: the letters of a
 *   SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header (``ext``, exactly a dict) into a new
 *   ``header_type`` (SendMessageRequestHeader, its slots written directly as above) when
 *   a, b, c, d, e, f, g, h are present, d e f h (and j, l when present) are 1-9 ASCII
 *   digits and g 1-18; k and m are true when they lower-case to "true"; ``extra`` holds
 *   the keys not in ``known`` in dict order ({} when none). Returns None where the Python
 *   fast path returns None (the caller then runs the general path, which raises its
 *   HeaderError), and NotImplemented for anything it does not decide (ext not exactly a
 *   dict, a d..m value not exactly a str, a type whose fields are not object slots or with
 *   its own __new__); the caller then runs ``_send_v2_fast``.
 *
 * pull_header(ext, header_type, known) -> header | None | NotImplemented
 *
 *   The compiled twin of protocol/headers.py's ``_pull_fast``: a PULL_MESSAGE /
 *   LITE_PULL_MESSAGE header (``ext``, exactly a dict) into a new ``header_type``
 *   (PullMessageRequestHeader, its slots written directly as above) when consumerGroup,
 *   topic and the seven numbers are present, queueId, maxMsgNums and sysFlag 1-9 ASCII
 *   digits, queueOffset, commitOffset, suspendTimeoutMillis and subVersion 1-18;
 *   subscription, expressionType and bname None when absent; ``extra`` as above. None
 *   where ``_pull_fast`` gives None (the caller then runs the general decoder, which
 *   raises its HeaderError), NotImplemented for what it does not decide (ext not exactly
 *   a dict, a number's value not exactly a str, a type as above); the caller then runs
 *   ``_pull_fast``.
 *
 * all_text(ext) -> bool
 *
 *   The compiled twin of protocol/validation.py's ``_all_text_py``: True when ``ext`` is
 *   exactly a dict whose keys and values are all exact str that encode as UTF-8 (no lone
 *   surrogate), else False (the edge then walks the fields for its remark).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include "_stored_record.h"

#define FIXED 17  /* code .. remarkLength */
#define INT32_LIMIT 0x7FFFFFFF

enum { S_CODE, S_LANGUAGE, S_VERSION, S_OPAQUE, S_FLAG, S_REMARK, S_EXT_FIELDS, S_BODY,
       S_SERIALIZE_TYPE, N_SLOTS };
static const char *SLOT_NAMES[N_SLOTS] = {
    "code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body",
    "serialize_type",
};
static PyTypeObject *slots_of;  /* the type the offsets below are for (a strong ref) */
static Py_ssize_t slot_offset[N_SLOTS];

#define MAX_MEMBERS 16  /* the most names resolve_member_offsets is asked for */

/* The offsets of ``tp``'s members ``names[0..n)`` into ``offset`` (looked up once per
 * type: ``*of`` is the type they are for, a strong ref). 0 when they are known, -1 with
 * an exception set, 1 when ``tp`` is not a slots-only type whose named fields are all
 * object slots (or, with ``plain_new``, when it has its own ``__new__``). */
static int resolve_member_offsets(PyTypeObject *tp, PyTypeObject **of,
                                  const char *const *names, int n, Py_ssize_t *offset,
                                  int plain_new) {
    if (tp == *of) return 0;
    if (tp->tp_dictoffset || tp->tp_itemsize
        || (plain_new && tp->tp_new != PyBaseObject_Type.tp_new))
        return 1;
    Py_ssize_t offsets[MAX_MEMBERS];  /* kept only once every one is found */
    for (int i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttrString((PyObject *)tp, names[i]);
        if (!d) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            return 1;
        }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type)
            && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (ok) offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) return 1;
    }
    memcpy(offset, offsets, (size_t)n * sizeof offsets[0]);
    Py_XSETREF(*of, (PyTypeObject *)Py_NewRef(tp));
    return 0;
}

/* RemotingCommand's slots: see resolve_member_offsets. */
static int resolve_slots(PyTypeObject *tp) {
    return resolve_member_offsets(tp, &slots_of, SLOT_NAMES, N_SLOTS, slot_offset, 0);
}

static inline PyObject **slot(PyObject *o, int i) {
    return (PyObject **)((char *)o + slot_offset[i]);
}

/* Strict UTF-8 text; NULL with an exception set, or NULL and *bad = 1 for text Python's
 * decoder refuses (UnicodeDecodeError: the caller hands the header back). */
static PyObject *text(const unsigned char *s, Py_ssize_t n, int *bad) {
    PyObject *t = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
    if (!t && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        *bad = 1;
    }
    return t;
}

static inline int16_t be16(const unsigned char *p) {
    return (int16_t)((uint16_t)p[0] << 8 | p[1]);
}

static PyObject *decode_rocketmq_header(PyObject *Py_UNUSED(module), PyObject *const *args,
                                        Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "decode_rocketmq_header(header, command_type, serialize_type)");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)args[1];
    int r = resolve_slots(tp);
    if (r) return r < 0 ? NULL : Py_NewRef(Py_None);
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        /* not one contiguous bytes-like object: bytes() in the Python decoder decides */
        if (!PyErr_ExceptionMatches(PyExc_TypeError)
            && !PyErr_ExceptionMatches(PyExc_BufferError))
            return NULL;
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    const unsigned char *p = view.buf;
    const Py_ssize_t hlen = view.len;
    PyObject *remark = NULL, *ext = NULL, *cmd = NULL;
    int bad = 0;

    if (hlen < FIXED + 4) goto back;
    Py_ssize_t pos = FIXED;
    int32_t rlen = be32(p + 13);
    if (rlen < 0 || rlen > hlen - pos - 4) goto back;
    if (rlen) {
        if (!(remark = text(p + pos, rlen, &bad))) goto fail;
        pos += rlen;
    }
    int32_t elen = be32(p + pos);
    pos += 4;
    if (elen < 0 || elen > hlen - pos) goto back;
    const Py_ssize_t end = pos + elen;
    if (end != hlen) goto back;  /* trailing bytes */
    if (elen) {
        if (!(ext = PyDict_New())) goto fail;
        while (pos < end) {
            if (end - pos < 2) goto back;
            Py_ssize_t klen = (uint16_t)be16(p + pos);
            pos += 2;
            if (klen >= 0x8000 || klen + 4 > end - pos) goto back;
            PyObject *key = text(p + pos, klen, &bad);
            if (!key) goto fail;
            pos += klen;
            int32_t vlen = be32(p + pos);
            pos += 4;
            if (vlen < 0 || vlen > end - pos) {
                Py_DECREF(key);
                goto back;
            }
            PyObject *value = text(p + pos, vlen, &bad);
            pos += vlen;
            int err = !value || PyDict_SetItem(ext, key, value) < 0;
            Py_DECREF(key);
            Py_XDECREF(value);
            if (err) goto fail;
        }
    }
    PyObject *fields[N_SLOTS];
    fields[S_CODE] = PyLong_FromLong(be16(p));
    fields[S_LANGUAGE] = PyLong_FromLong((int8_t)p[2]);
    fields[S_VERSION] = PyLong_FromLong(be16(p + 3));
    fields[S_OPAQUE] = PyLong_FromLong(be32(p + 5));
    fields[S_FLAG] = PyLong_FromLong(be32(p + 9));
    fields[S_REMARK] = remark ? remark : Py_NewRef(Py_None);
    fields[S_EXT_FIELDS] = ext ? ext : Py_NewRef(Py_None);
    fields[S_BODY] = Py_NewRef(Py_None);
    fields[S_SERIALIZE_TYPE] = Py_NewRef(args[2]);
    remark = ext = NULL;  /* owned by fields now */
    int ok = 1;
    for (int i = 0; i < N_SLOTS; i++) ok &= fields[i] != NULL;
    if (ok) cmd = tp->tp_alloc(tp, 0);
    for (int i = 0; i < N_SLOTS; i++) {
        if (cmd) *slot(cmd, i) = fields[i];  /* the new object's slots are all NULL */
        else Py_XDECREF(fields[i]);
    }
    PyBuffer_Release(&view);
    return cmd;
fail:
    if (!bad) {
        Py_XDECREF(remark);
        Py_XDECREF(ext);
        PyBuffer_Release(&view);
        return NULL;
    }
back:  /* not what the Python decoder reads without raising: it decodes (and raises) */
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    PyBuffer_Release(&view);
    return Py_NewRef(Py_None);
}

/* An int slot's value if it is an int in [lo, hi]; 0 (and no exception) otherwise. */
static int int_field(PyObject *v, long lo, long hi, long *out) {
    if (!v || !PyLong_Check(v)) return 0;
    int overflow;
    long x = PyLong_AsLongAndOverflow(v, &overflow);
    if (overflow || x < lo || x > hi) return 0;  /* (-1 with overflow set: no exception) */
    *out = x;
    return 1;
}

/* The UTF-8 of an exact str; 0 and no exception when there is none (a lone surrogate). */
static int utf8_of(PyObject *s, const char **out, Py_ssize_t *n) {
    if (!PyUnicode_CheckExact(s)) return 0;
    *out = PyUnicode_AsUTF8AndSize(s, n);
    if (*out) return 1;
    PyErr_Clear();  /* UnicodeEncodeError (or MemoryError): the Python encoder's to raise */
    return 0;
}

typedef struct { const char *key, *value; Py_ssize_t klen, vlen; } Field;

static inline unsigned char *put32(unsigned char *w, uint32_t x) {
    w[0] = (unsigned char)(x >> 24);
    w[1] = (unsigned char)(x >> 16);
    w[2] = (unsigned char)(x >> 8);
    w[3] = (unsigned char)x;
    return w + 4;
}

static PyObject *encode_rocketmq_header(PyObject *Py_UNUSED(module), PyObject *cmd) {
    int r = resolve_slots(Py_TYPE(cmd));
    if (r) return r < 0 ? NULL : Py_NewRef(Py_None);
    long code, language, version, opaque, flag;
    if (!int_field(*slot(cmd, S_CODE), -0x8000, 0x7FFF, &code)
        || !int_field(*slot(cmd, S_LANGUAGE), -0x80, 0x7F, &language)
        || !int_field(*slot(cmd, S_VERSION), -0x8000, 0x7FFF, &version)
        || !int_field(*slot(cmd, S_OPAQUE), -INT32_LIMIT - 1, INT32_LIMIT, &opaque)
        || !int_field(*slot(cmd, S_FLAG), -INT32_LIMIT - 1, INT32_LIMIT, &flag))
        return Py_NewRef(Py_None);
    PyObject *remark = *slot(cmd, S_REMARK), *ef = *slot(cmd, S_EXT_FIELDS);
    if (!remark || !ef) return Py_NewRef(Py_None);
    const char *rs = NULL;
    Py_ssize_t rlen = 0;
    if (remark != Py_None && !(PyUnicode_CheckExact(remark) && PyUnicode_GET_LENGTH(remark) == 0)
        && !utf8_of(remark, &rs, &rlen))
        return Py_NewRef(Py_None);
    if (rlen > INT32_LIMIT) return Py_NewRef(Py_None);
    Py_ssize_t count = 0;
    if (ef != Py_None) {
        if (!PyDict_CheckExact(ef)) return Py_NewRef(Py_None);
        count = PyDict_GET_SIZE(ef);
    }
    /* Pass 1: every key and value's UTF-8 and the map's length. No Python code runs from
     * here to the end, so the dict cannot change under the pointers kept. */
    Field stack_fields[32];
    Field *fields = stack_fields;
    if (count > 32 && !(fields = PyMem_Malloc((size_t)count * sizeof(Field))))
        return PyErr_NoMemory();
    PyObject *out = Py_None;  /* Py_None: hand back; NULL: error */
    Py_ssize_t n = 0, area = 0, i = 0;
    PyObject *k, *v;
    while (count && PyDict_Next(ef, &i, &k, &v)) {
        if (k == Py_None || v == Py_None) continue;
        Field *f = &fields[n];
        if (!utf8_of(k, &f->key, &f->klen) || !utf8_of(v, &f->value, &f->vlen)
            || f->klen > 0x7FFF || f->vlen > INT32_LIMIT - area)
            goto done;
        area += 2 + f->klen + 4 + f->vlen;
        if (area > INT32_LIMIT) goto done;
        n++;
    }
    /* Pass 2: the bytes. */
    out = PyBytes_FromStringAndSize(NULL, FIXED + rlen + 4 + area);
    if (!out) goto done;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    w[0] = (unsigned char)(code >> 8);
    w[1] = (unsigned char)code;
    w[2] = (unsigned char)language;
    w[3] = (unsigned char)(version >> 8);
    w[4] = (unsigned char)version;
    w = put32(w + 5, (uint32_t)opaque);
    w = put32(w, (uint32_t)flag);
    w = put32(w, (uint32_t)rlen);
    if (rlen) memcpy(w, rs, (size_t)rlen);
    w = put32(w + rlen, (uint32_t)area);
    for (Py_ssize_t j = 0; j < n; j++) {
        const Field *f = &fields[j];
        *w++ = (unsigned char)(f->klen >> 8);
        *w++ = (unsigned char)f->klen;
        memcpy(w, f->key, (size_t)f->klen);
        w = put32(w + f->klen, (uint32_t)f->vlen);
        memcpy(w, f->value, (size_t)f->vlen);
        w += f->vlen;
    }
done:
    if (fields != stack_fields) PyMem_Free(fields);
    return out == Py_None ? Py_NewRef(Py_None) : out;
}


/* -- send_v2_header ------------------------------------------------------------------ */

enum { H_A, H_B, H_C, H_D, H_E, H_F, H_G, H_H, H_I, H_J, H_K, H_L, H_M, H_N, H_EXTRA,
       N_HSLOTS };
_Static_assert(N_SLOTS <= MAX_MEMBERS && N_HSLOTS <= MAX_MEMBERS, "MAX_MEMBERS");
static const char *HSLOT_NAMES[N_HSLOTS] = {
    "producer_group", "topic", "default_topic", "default_topic_queue_nums", "queue_id",
    "sys_flag", "born_timestamp", "flag", "properties", "reconsume_times", "unit_mode",
    "max_reconsume_times", "batch", "bname", "extra",
};
static PyTypeObject *hslots_of;
static Py_ssize_t hslot_offset[N_HSLOTS];
static PyObject *letter[14];  /* "a" .. "n", interned */
static PyObject *str_true;

/* A typed-header decoder's arguments (ext, header_type, known) checked and the header
 * type's slots resolved (a plain ``__new__``: see resolve_member_offsets): -1 an error is
 * set, 1 not this decoder's case (the caller answers NotImplemented), 0 go on. */
static int header_args(PyObject *const *args, Py_ssize_t nargs, const char *usage,
                       PyTypeObject **of, const char *const *names, int n,
                       Py_ssize_t *offset) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    if (!PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "header_type must be a type");
        return -1;
    }
    if (!PyDict_CheckExact(args[0])) return 1;
    return resolve_member_offsets((PyTypeObject *)args[1], of, names, n, offset, 1);
}

/* ext[letter i] borrowed, or NULL when absent (no exception: the keys are exact str). */
static inline PyObject *get_letter(PyObject *ext, int i) {
    return PyDict_GetItemWithError(ext, letter[i]);
}

/* 1 when ``v`` is 1..max ASCII digits, 0 when not; *out its value. */
static int digits(PyObject *v, int max, long long *out) {
    if (!PyUnicode_IS_ASCII(v)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(v);
    if (n < 1 || n > max) return 0;
    const unsigned char *s = PyUnicode_1BYTE_DATA(v);
    long long r = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        r = r * 10 + (s[i] - '0');
    }
    *out = r;
    return 1;
}

/* v.lower() == "true": 1, 0, or -1 with an exception set. */
static int is_true(PyObject *v) {
    if (PyUnicode_IS_ASCII(v)) {
        if (PyUnicode_GET_LENGTH(v) != 4) return 0;
        const unsigned char *s = PyUnicode_1BYTE_DATA(v);
        return (s[0] | 0x20) == 't' && (s[1] | 0x20) == 'r' && (s[2] | 0x20) == 'u'
            && (s[3] | 0x20) == 'e';
    }
    PyObject *low = PyObject_CallMethod(v, "lower", NULL);
    if (!low) return -1;
    int r = PyUnicode_Check(low) && PyUnicode_Compare(low, str_true) == 0;
    Py_DECREF(low);
    if (PyErr_Occurred()) return -1;
    return r;
}

/* A new dict of ``ext``'s items whose key is not in ``known``, in dict order ({} when
 * none; ``headers._extra_of``); NULL with an exception set. */
static PyObject *extra_of(PyObject *ext, PyObject *known) {
    PyObject *extra = PyDict_New();
    if (!extra) return NULL;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(ext, &pos, &key, &value)) {
        int c = PySet_Contains(known, key);
        if (c < 0 || (c == 0 && PyDict_SetItem(extra, key, value) < 0)) {
            Py_DECREF(extra);
            return NULL;
        }
    }
    return extra;
}

static PyObject *send_v2_header(PyObject *Py_UNUSED(module), PyObject *const *args,
                                Py_ssize_t nargs) {
    int r = header_args(args, nargs, "send_v2_header(ext, header_type, known)", &hslots_of,
                        HSLOT_NAMES, N_HSLOTS, hslot_offset);
    if (r < 0) return NULL;
    if (r > 0) Py_RETURN_NOTIMPLEMENTED;
    PyObject *ext = args[0], *known = args[2];
    PyTypeObject *tp = (PyTypeObject *)args[1];
    PyObject *v[14];
    for (int i = 0; i < 14; i++) {
        v[i] = get_letter(ext, i);
        if (!v[i] && PyErr_Occurred()) return NULL;
    }
    /* d..h, j, k, l, m: what the Python fast path reads as str */
    static const int typed[] = {H_D, H_E, H_F, H_G, H_H, H_J, H_K, H_L, H_M};
    for (size_t t = 0; t < sizeof typed / sizeof typed[0]; t++) {
        PyObject *x = v[typed[t]];
        if (x && !PyUnicode_CheckExact(x)) Py_RETURN_NOTIMPLEMENTED;
    }
    long long num[14] = {0};
    if (!v[H_D] || !v[H_E] || !v[H_F] || !v[H_G] || !v[H_H]
            || !digits(v[H_D], 9, &num[H_D]) || !digits(v[H_E], 9, &num[H_E])
            || !digits(v[H_F], 9, &num[H_F]) || !digits(v[H_H], 9, &num[H_H])
            || !digits(v[H_G], 18, &num[H_G])
            || (v[H_J] && !digits(v[H_J], 9, &num[H_J]))
            || (v[H_L] && !digits(v[H_L], 9, &num[H_L]))
            || !v[H_A] || !v[H_B] || !v[H_C])
        Py_RETURN_NONE;
    int unit_mode = 0, batch = 0;
    if (v[H_K] && (unit_mode = is_true(v[H_K])) < 0) return NULL;
    if (v[H_M] && (batch = is_true(v[H_M])) < 0) return NULL;
    PyObject *extra = extra_of(ext, known);
    if (!extra) return NULL;
    PyObject *vals[N_HSLOTS];
    vals[H_A] = Py_NewRef(v[H_A]);
    vals[H_B] = Py_NewRef(v[H_B]);
    vals[H_C] = Py_NewRef(v[H_C]);
    vals[H_I] = Py_NewRef(v[H_I] ? v[H_I] : Py_None);
    vals[H_N] = Py_NewRef(v[H_N] ? v[H_N] : Py_None);
    vals[H_K] = PyBool_FromLong(unit_mode);
    vals[H_M] = PyBool_FromLong(batch);
    vals[H_EXTRA] = extra;
    static const int nums[] = {H_D, H_E, H_F, H_G, H_H, H_J, H_L};
    int failed = 0;
    for (size_t t = 0; t < sizeof nums / sizeof nums[0]; t++) {
        int i = nums[t];
        if ((i == H_J || i == H_L) && !v[i]) {
            vals[i] = Py_NewRef(Py_None);
            continue;
        }
        vals[i] = PyLong_FromLongLong(num[i]);
        if (!vals[i]) failed = 1;
    }
    PyObject *hdr = failed ? NULL : tp->tp_alloc(tp, 0);
    if (!hdr) {
        for (int i = 0; i < N_HSLOTS; i++) Py_XDECREF(vals[i]);
        return NULL;
    }
    for (int i = 0; i < N_HSLOTS; i++)
        *(PyObject **)((char *)hdr + hslot_offset[i]) = vals[i];
    return hdr;
}

/* -- pull_header --------------------------------------------------------------------- */

enum { P_GROUP, P_TOPIC, P_QUEUE_ID, P_QUEUE_OFFSET, P_MAX_NUMS, P_SYS_FLAG, P_COMMIT,
       P_SUSPEND, P_SUBSCRIPTION, P_SUB_VERSION, P_EXPRESSION_TYPE, P_BNAME, P_EXTRA,
       N_PSLOTS };
_Static_assert(N_PSLOTS <= MAX_MEMBERS, "MAX_MEMBERS");
static const char *PSLOT_NAMES[N_PSLOTS] = {
    "consumer_group", "topic", "queue_id", "queue_offset", "max_msg_nums", "sys_flag",
    "commit_offset", "suspend_timeout_millis", "subscription", "sub_version",
    "expression_type", "bname", "extra",
};
static const char *PULL_KEYS[P_EXTRA] = {
    "consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
    "commitOffset", "suspendTimeoutMillis", "subscription", "subVersion", "expressionType",
    "bname",
};
static PyObject *pull_key[P_EXTRA];  /* PULL_KEYS, interned */
static PyTypeObject *pslots_of;
static Py_ssize_t pslot_offset[N_PSLOTS];

static PyObject *pull_header(PyObject *Py_UNUSED(module), PyObject *const *args,
                             Py_ssize_t nargs) {
    int r = header_args(args, nargs, "pull_header(ext, header_type, known)", &pslots_of,
                        PSLOT_NAMES, N_PSLOTS, pslot_offset);
    if (r < 0) return NULL;
    if (r > 0) Py_RETURN_NOTIMPLEMENTED;
    PyObject *ext = args[0], *known = args[2];
    PyTypeObject *tp = (PyTypeObject *)args[1];
    PyObject *v[P_EXTRA];
    for (int i = 0; i < P_EXTRA; i++) {
        v[i] = PyDict_GetItemWithError(ext, pull_key[i]);
        if (!v[i] && PyErr_Occurred()) return NULL;
    }
    /* the numbers: what the Python fast path reads as str, 1-9 (int) or 1-18 (long)
     * ASCII digits; all required, as consumerGroup and topic are */
    static const int numbers[] = {P_QUEUE_ID, P_QUEUE_OFFSET, P_MAX_NUMS, P_SYS_FLAG,
                                  P_COMMIT, P_SUSPEND, P_SUB_VERSION};
    static const int width[] = {9, 18, 9, 9, 18, 18, 18};
    enum { N_NUMBERS = sizeof numbers / sizeof numbers[0] };
    for (int t = 0; t < N_NUMBERS; t++) {
        PyObject *x = v[numbers[t]];
        if (x && !PyUnicode_CheckExact(x)) Py_RETURN_NOTIMPLEMENTED;
    }
    long long num[N_NUMBERS];
    for (int t = 0; t < N_NUMBERS; t++) {
        PyObject *x = v[numbers[t]];
        if (!x || !digits(x, width[t], &num[t])) Py_RETURN_NONE;
    }
    if (!v[P_GROUP] || !v[P_TOPIC]) Py_RETURN_NONE;
    PyObject *vals[N_PSLOTS];
    static const int texts[] = {P_GROUP, P_TOPIC, P_SUBSCRIPTION, P_EXPRESSION_TYPE, P_BNAME};
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        PyObject *x = v[texts[t]];
        vals[texts[t]] = Py_NewRef(x ? x : Py_None);
    }
    int failed = !(vals[P_EXTRA] = extra_of(ext, known));
    for (int t = 0; t < N_NUMBERS; t++)
        failed |= !(vals[numbers[t]] = PyLong_FromLongLong(num[t]));
    PyObject *hdr = failed ? NULL : tp->tp_alloc(tp, 0);
    if (!hdr) {
        for (int i = 0; i < N_PSLOTS; i++) Py_XDECREF(vals[i]);
        return NULL;
    }
    for (int i = 0; i < N_PSLOTS; i++)
        *(PyObject **)((char *)hdr + pslot_offset[i]) = vals[i];
    return hdr;
}

/* -- all_text ------------------------------------------------------------------------ */

/* validation.py's ``_all_text_py``: True when ``ext`` (exactly a dict) has only exact str
 * keys and values that UTF-8 can carry, False for anything else (the caller's per-field
 * walk then decides). Text that is not ASCII is encoded once (CPython keeps that UTF-8). */
static PyObject *all_text(PyObject *Py_UNUSED(module), PyObject *ext) {
    if (!PyDict_CheckExact(ext)) Py_RETURN_FALSE;
    Py_ssize_t pos = 0;
    PyObject *kv[2];
    while (PyDict_Next(ext, &pos, &kv[0], &kv[1])) {
        for (int i = 0; i < 2; i++) {
            if (!PyUnicode_CheckExact(kv[i])) Py_RETURN_FALSE;
            if (PyUnicode_IS_ASCII(kv[i])) continue;
            if (!PyUnicode_AsUTF8AndSize(kv[i], NULL)) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return NULL;
                PyErr_Clear();
                Py_RETURN_FALSE;
            }
        }
    }
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"decode_rocketmq_header", (PyCFunction)(void (*)(void))decode_rocketmq_header,
     METH_FASTCALL,
     "decode_rocketmq_header(header, command_type, serialize_type) -> command | None "
     "(see the module source's head comment)"},
    {"encode_rocketmq_header", encode_rocketmq_header, METH_O,
     "encode_rocketmq_header(command) -> bytes | None (see the module source's head comment)"},
    {"send_v2_header", (PyCFunction)(void (*)(void))send_v2_header, METH_FASTCALL,
     "send_v2_header(ext, header_type, known) -> header | None | NotImplemented "
     "(see the module source's head comment)"},
    {"pull_header", (PyCFunction)(void (*)(void))pull_header, METH_FASTCALL,
     "pull_header(ext, header_type, known) -> header | None | NotImplemented "
     "(see the module source's head comment)"},
    {"all_text", all_text, METH_O,
     "all_text(ext) -> bool (see the module source's head comment)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_command",
    "The ROCKETMQ header of a RemotingCommand (the C twin of command.py's codec).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__command(void) {
    for (int i = 0; i < 14; i++) {
        char name[2] = {(char)('a' + i), 0};
        if (!letter[i] && !(letter[i] = PyUnicode_InternFromString(name))) return NULL;
    }
    for (int i = 0; i < P_EXTRA; i++)
        if (!pull_key[i] && !(pull_key[i] = PyUnicode_InternFromString(PULL_KEYS[i])))
            return NULL;
    if (!str_true && !(str_true = PyUnicode_InternFromString("true"))) return NULL;
    return PyModule_Create(&module);
}
