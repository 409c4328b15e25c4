/* aiorocketmq.spark_sink._pull: the Spark source's PULL_MESSAGE frames, both ways.
 *
 * The compiled twin of spark_sink/pullwire.py (``pull_request_py`` / ``pull_answer_py``,
 * the reference; tests/unit/test_spark_pullwire.py runs both on the same inputs). The
 * reader keeps one connection per range and sends a pull as bytes built here, and reads
 * the answer's four offsets without a RemotingCommand or a dict per pull.
 *
 * pull_request(prefix, opaque, fixed, queue_offset, max_msg_nums) -> bytes
 *
 *   A whole PULL_MESSAGE frame, length prefix included, with a ROCKETMQ header
 *   (``RocketMQSerializable``): ``prefix`` is the header's first 5 bytes (code, language,
 *   version), then ``opaque``, flag 0, no remark, and the extFields map: the entries in
 *   ``fixed`` (already encoded: int16 key length, key, int32 value length, value) followed
 *   by queueOffset and maxMsgNums as decimal text. ValueError for a prefix that is not 5
 *   bytes or a header over the 24-bit length field.
 *
 * pull_answer(frame) -> tuple | None
 *
 *   ``frame`` is one frame without its length prefix (what ``RemotingCommand.decode``
 *   takes). Returns (opaque, code, next_begin_offset, min_offset, max_offset,
 *   suggest_which_broker_id, body_start) when the frame is a ROCKETMQ-serialized response
 *   whose code is one of a pull's four (0, 19, 20, 21), whose header decodes exactly as
 *   ``RemotingCommand.decode`` decodes it (lengths checked against the header, no bytes
 *   left over), with every string ASCII, and whose four offsets are there once each and
 *   parse as Java longs. ``body_start`` is where the body begins in ``frame``. Anything
 *   else returns None and the caller decodes the frame in Python (which raises its own
 *   errors), so this never answers differently from the reference.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SERIALIZE_ROCKETMQ 1
#define MAX_HEADER 0xFFFFFF

static inline uint32_t rd32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void wr32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

/* Decimal text of v into out (at least 20 bytes); returns its length. */
static int fmt_i64(char *out, long long v) {
    char tmp[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do { tmp[n++] = (char)('0' + (int)(u % 10)); u /= 10; } while (u);
    int len = 0;
    if (v < 0) out[len++] = '-';
    while (n) out[len++] = tmp[--n];
    return len;
}

static int put_entry(unsigned char *p, const char *key, int klen, const char *val, int vlen) {
    p[0] = (unsigned char)(klen >> 8); p[1] = (unsigned char)klen;
    memcpy(p + 2, key, (size_t)klen);
    wr32(p + 2 + klen, (uint32_t)vlen);
    memcpy(p + 6 + klen, val, (size_t)vlen);
    return 6 + klen + vlen;
}

static PyObject *pull_request(PyObject *self, PyObject *args) {
    Py_buffer prefix, fixed;
    int opaque, max_nums;
    long long offset;
    if (!PyArg_ParseTuple(args, "y*iy*Li", &prefix, &opaque, &fixed, &offset, &max_nums))
        return NULL;
    PyObject *out = NULL;
    char off_txt[24], max_txt[24];
    int off_len = fmt_i64(off_txt, offset), max_len = fmt_i64(max_txt, max_nums);
    static const char K_OFF[] = "queueOffset", K_MAX[] = "maxMsgNums";
    const int k_off = (int)sizeof(K_OFF) - 1, k_max = (int)sizeof(K_MAX) - 1;
    if (prefix.len != 5) {
        PyErr_SetString(PyExc_ValueError, "pull_request: prefix must be 5 bytes");
        goto done;
    }
    Py_ssize_t ext_len = fixed.len + 6 + k_off + off_len + 6 + k_max + max_len;
    Py_ssize_t hlen = 5 + 4 + 4 + 4 + 4 + ext_len;
    if (fixed.len > MAX_HEADER || hlen > MAX_HEADER) {
        PyErr_SetString(PyExc_ValueError, "pull_request: header over the 24-bit length field");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, 8 + hlen);
    if (!out) goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    wr32(p, (uint32_t)(4 + hlen));
    wr32(p + 4, ((uint32_t)SERIALIZE_ROCKETMQ << 24) | (uint32_t)hlen);
    p += 8;
    memcpy(p, prefix.buf, 5); p += 5;
    wr32(p, (uint32_t)opaque); p += 4;
    wr32(p, 0); p += 4;  /* flag: a request */
    wr32(p, 0); p += 4;  /* no remark */
    wr32(p, (uint32_t)ext_len); p += 4;
    if (fixed.len) memcpy(p, fixed.buf, (size_t)fixed.len);
    p += fixed.len;
    p += put_entry(p, K_OFF, k_off, off_txt, off_len);
    put_entry(p, K_MAX, k_max, max_txt, max_len);
done:
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&fixed);
    return out;
}

static int all_ascii(const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] & 0x80) return 0;
    return 1;
}

/* A Java long as [+-]?[0-9]+ (headers._parse_int64); 0 when it is not one. */
static int parse_i64(const unsigned char *p, Py_ssize_t n, long long *out) {
    Py_ssize_t i = 0;
    int neg = 0;
    if (n > 0 && (p[0] == '-' || p[0] == '+')) { neg = p[0] == '-'; i = 1; }
    if (i >= n) return 0;
    unsigned long long limit = neg ? 9223372036854775808ULL : 9223372036854775807ULL;
    unsigned long long v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (limit - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = neg ? (long long)(0ULL - v) : (long long)v;
    return 1;
}

static PyObject *pull_answer(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *f = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    PyObject *result = NULL;
    if (n < 4) goto none;
    uint32_t word = rd32(f);
    if ((word >> 24) != SERIALIZE_ROCKETMQ) goto none;
    Py_ssize_t hlen = (Py_ssize_t)(word & 0xFFFFFF);
    if (hlen > n - 4 || hlen < 17 + 4) goto none;
    const unsigned char *h = f + 4;
    int code = (int16_t)(((unsigned)h[0] << 8) | h[1]);
    int opaque = (int32_t)rd32(h + 5);
    int32_t flag = (int32_t)rd32(h + 9);
    int32_t rlen = (int32_t)rd32(h + 13);
    if (!(flag & 1)) goto none;  /* not a response */
    if (code != 0 && code != 19 && code != 20 && code != 21) goto none;
    Py_ssize_t pos = 17;
    if (rlen < 0 || rlen > hlen - pos - 4) goto none;
    if (!all_ascii(h + pos, rlen)) goto none;
    pos += rlen;
    int32_t elen = (int32_t)rd32(h + pos);
    pos += 4;
    if (elen < 0 || elen > hlen - pos) goto none;
    Py_ssize_t end = pos + elen;
    if (end != hlen) goto none;  /* trailing bytes: the reference refuses the header */
    long long vals[4] = {0, 0, 0, 0};
    int seen[4] = {0, 0, 0, 0};
    static const char *keys[4] = {"nextBeginOffset", "minOffset", "maxOffset",
                                  "suggestWhichBrokerId"};
    while (pos < end) {
        if (pos + 2 > end) goto none;
        Py_ssize_t klen = ((Py_ssize_t)h[pos] << 8) | h[pos + 1];
        pos += 2;
        if (klen >= 0x8000 || pos + klen + 4 > end) goto none;
        const unsigned char *key = h + pos;
        pos += klen;
        int32_t vlen = (int32_t)rd32(h + pos);
        pos += 4;
        if (vlen < 0 || vlen > end - pos) goto none;
        const unsigned char *val = h + pos;
        pos += vlen;
        if (!all_ascii(key, klen) || !all_ascii(val, vlen)) goto none;
        for (int k = 0; k < 4; k++) {
            if ((Py_ssize_t)strlen(keys[k]) == klen && memcmp(keys[k], key, (size_t)klen) == 0) {
                if (seen[k] || !parse_i64(val, vlen, &vals[k])) goto none;
                seen[k] = 1;
                break;
            }
        }
    }
    if (!(seen[0] && seen[1] && seen[2] && seen[3])) goto none;
    result = Py_BuildValue("iiLLLLn", opaque, code, vals[0], vals[1], vals[2], vals[3],
                           (Py_ssize_t)(4 + hlen));
    PyBuffer_Release(&view);
    return result;
none:
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"pull_request", pull_request, METH_VARARGS, "A PULL_MESSAGE frame (see module comment)."},
    {"pull_answer", pull_answer, METH_O, "A pull answer's offsets, or None (see module comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pull", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__pull(void) { return PyModule_Create(&module); }
