/* aiorocketmq.server.store._units: the consume-queue walk of an unfiltered pull, in C.
 *
 * The compiled twin of message_store.py's ``scan_units`` (the loop of upstream
 * ``DefaultMessageStore.getMessage`` for a pull without filters), built from source by
 * pip (setuptools, optional: without a C compiler the Python loop runs).
 *
 * scan_units(units, max_msg_nums, max_phy, in_memory, bytes_in_memory, count_in_memory,
 *            bytes_in_disk, count_in_disk) -> (runs, total, count, looked) | None
 *
 *   units: consume-queue units back to back (20 bytes each: commit-log offset int64, size
 *   int32, tags code int64, big-endian); a trailing partial unit is ignored.
 *   Walks the units while the transfer limits allow, as the Python loop does: a unit is
 *   taken unless ``count >= max_msg_nums`` or, past the first, the next one would exceed
 *   the in-memory limits (``max_phy - offset <= in_memory``) or else the on-disk ones.
 *   Returns the runs of adjacent records as (start, end) commit-log ranges, the bytes and
 *   records taken, and the offset of the last unit looked at; None where the Python loop
 *   returns None (a unit of size <= 0 is reached) and where an offset sum would overflow
 *   int64 (the caller's general loop handles both).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_stored_record.h"  /* protocol/: be32 / be64 */

#define UNIT 20

static int add_run(PyObject *runs, int64_t start, int64_t end) {
    PyObject *t = Py_BuildValue("(LL)", (long long)start, (long long)end);
    if (!t) return -1;
    int rc = PyList_Append(runs, t);
    Py_DECREF(t);
    return rc;
}

static PyObject *scan_units(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer view;
    long long max_msg_nums, max_phy, in_memory, bytes_mem, count_mem, bytes_disk, count_disk;
    if (!PyArg_ParseTuple(args, "y*LLLLLLL:scan_units", &view, &max_msg_nums, &max_phy,
                          &in_memory, &bytes_mem, &count_mem, &bytes_disk, &count_disk))
        return NULL;
    const unsigned char *u = view.buf;
    Py_ssize_t n = view.len / UNIT;
    int64_t total = 0, count = 0, looked = 0, run_start = -1, run_end = -1;
    PyObject *runs = PyList_New(0);
    PyObject *out = NULL;
    if (!runs) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t off = be64(u + i * UNIT), size = be32(u + i * UNIT + 8), distance, next;
        looked = off;
        if (count) {
            if (count >= max_msg_nums) break;
            if (__builtin_sub_overflow((int64_t)max_phy, off, &distance)
                || __builtin_add_overflow(total, size, &next))
                goto fall_back;
            if (distance > in_memory) {
                if (next > bytes_disk || count > count_disk - 1) break;
            } else if (next > bytes_mem || count > count_mem - 1) {
                break;
            }
        }
        if (size <= 0) goto fall_back;
        if (off != run_end) {
            if (run_end >= 0 && add_run(runs, run_start, run_end) < 0) goto done;
            run_start = off;
        }
        if (__builtin_add_overflow(off, size, &run_end)) goto fall_back;
        total += size;
        count++;
    }
    if (run_end >= 0 && add_run(runs, run_start, run_end) < 0) goto done;
    out = Py_BuildValue("(OLLL)", runs, (long long)total, (long long)count, (long long)looked);
    goto done;
fall_back:
    out = Py_NewRef(Py_None);
done:
    Py_XDECREF(runs);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"scan_units", scan_units, METH_VARARGS,
     "scan_units(units, max_msg_nums, max_phy, in_memory, bytes_in_memory, count_in_memory, "
     "bytes_in_disk, count_in_disk) -> (runs, total, count, looked) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_units",
    "The consume-queue walk of an unfiltered pull (the C twin of message_store.scan_units).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__units(void) { return PyModule_Create(&module); }
