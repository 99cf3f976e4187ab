/* The Python frame walker and its load-time check (frames.h). */
/* Python.h first: its pyconfig.h defines _GNU_SOURCE (process_vm_readv). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include "python/frames.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif
#include <sys/uio.h>
#include <unistd.h>

#include "base/err.h"

/* Where the walk reads, for the minor version compiled for (CPython's
 * Include/internal/pycore_frame.h, pycore_interpframe_structs.h and pycore_code.h of
 * each version; checked at load by st_pyframes_check). */
typedef struct {
    int cframe;         /* 1: tstate->cframe->current_frame (3.11, 3.12) */
    size_t ts_frame;    /* in the tstate: cframe, or current_frame (3.13+) */
    size_t cf_current;  /* in a _PyCFrame: current_frame */
    size_t fr_code;     /* in a _PyInterpreterFrame: f_code / f_executable */
    size_t fr_prev;     /* previous */
    size_t fr_instr;    /* prev_instr (3.11, 3.12) / instr_ptr (3.13+) */
    size_t fr_owner;    /* owner (a char) */
    int shim_owner;     /* owners from this one up are not Python frames (entry
                           frames, 3.15's base sentinel): skipped; -1: none */
    int max_owner;      /* highest owner value on the chain */
    size_t co_adaptive; /* in a PyCodeObject: co_code_adaptive */
    uintptr_t code_tag; /* low bits of f_executable that tag it (3.14+: a _PyStackRef) */
} layout_t;

#if defined(Py_GIL_DISABLED)
#define HAVE_LAYOUT 0
#elif PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define HAVE_LAYOUT 1
static const layout_t L = {1, 56, 8, 32, 48, 56, 69, -1, 2, 184, 0};
#elif PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
#define HAVE_LAYOUT 1
static const layout_t L = {1, 56, 0, 0, 8, 56, 70, 3, 3, 192, 0};
#elif PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x030E0000
#define HAVE_LAYOUT 1
static const layout_t L = {0, 72, 0, 0, 8, 56, 70, 3, 3, 200, 0};
#elif PY_VERSION_HEX >= 0x030E0000 && PY_VERSION_HEX < 0x03100000
#define HAVE_LAYOUT 1
/* 3.14 and 3.15 alike: owner moved past return_offset, f_executable tagged; 3.14's
 * FRAME_OWNED_BY_CSTACK (4) is defined, never used, and skipped like 3.15's
 * sentinel base frame (3) */
static const layout_t L = {0, 72, 0, 0, 8, 56, 74, 3, 4, 208, 3};
#else
#define HAVE_LAYOUT 0
#endif

#if HAVE_LAYOUT
/* bytes of a frame header read: every field above */
#if PY_VERSION_HEX >= 0x030E0000
#define FRAME_READ 80
#else
#define FRAME_READ 72
#endif
#define MAX_HOPS 4096      /* frames visited in one walk, shims included */

static int walker_on;      /* the check passed */
static pid_t self_pid;     /* process_vm_readv's target: this process */

/* Copies n bytes at src, or fails (-1) where they are not mapped. Signal-safe. */
static int rd(void *dst, uintptr_t src, size_t n)
{
    struct iovec l = {dst, n}, r = {(void *)src, n};
    return process_vm_readv(self_pid, &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* Whether p may be read as an object: the walker runs and p is aligned. A block
 * AddressSanitizer knows as freed is not: it keeps a freed block's contents and
 * writes its own record over the count. */
static int may_read(const void *p)
{
#ifdef __SANITIZE_ADDRESS__
    if (p && __asan_address_is_poisoned(p))
        return 0;
#endif
    return walker_on && p && ((uintptr_t)p & 7) == 0;
}

/* {ob_refcnt, ob_type} of a code object: a freed object's count is 0 (it was freed
 * at 0), or the allocator's free-list link there (pymalloc, glibc's tcache: a heap
 * address, far above any count). */
static int code_header(const uintptr_t hdr[2])
{
    return hdr[0] > 0 && hdr[0] < ((uintptr_t)1 << 32) && hdr[1] == (uintptr_t)&PyCode_Type;
}

int st_pyframes_is_code(const void *p)
{
    uintptr_t hdr[2];
    return may_read(p) && rd(hdr, (uintptr_t)p, sizeof hdr) == 0 && code_header(hdr);
}

static uintptr_t word_at(const unsigned char *buf, size_t off)
{
    uintptr_t v;
    memcpy(&v, buf + off, sizeof v);
    return v;
}

/* An object's first word, ob_refcnt, as a live object's: 3.14+ keeps the count in
 * its low 32 bits, then 16 bits of overflow (0) and 16 of flags (a static object's);
 * before, a count from 1 to 2^32 (immortal objects: 2^32 - 1). */
static int live_count(uintptr_t w)
{
#if PY_VERSION_HEX >= 0x030E0000
    return (uint32_t)w != 0 && ((w >> 32) & 0xffff) == 0;
#else
    return w > 0 && w < ((uintptr_t)1 << 32);
#endif
}

/* The object fields every code object has, and their types. */
#define CODE_FIELDS 9
static const struct {
    size_t at;
    PyTypeObject *type;
} code_fields[CODE_FIELDS] = {
    {offsetof(PyCodeObject, co_consts), &PyTuple_Type},
    {offsetof(PyCodeObject, co_names), &PyTuple_Type},
    {offsetof(PyCodeObject, co_exceptiontable), &PyBytes_Type},
    {offsetof(PyCodeObject, co_localsplusnames), &PyTuple_Type},
    {offsetof(PyCodeObject, co_localspluskinds), &PyBytes_Type},
    {offsetof(PyCodeObject, co_filename), &PyUnicode_Type},
    {offsetof(PyCodeObject, co_name), &PyUnicode_Type},
    {offsetof(PyCodeObject, co_qualname), &PyUnicode_Type},
    {offsetof(PyCodeObject, co_linetable), &PyBytes_Type},
};

int st_pyframes_is_whole_code(const void *p)
{
    unsigned char co[offsetof(PyCodeObject, co_code_adaptive)];
    if (!may_read(p) || rd(co, (uintptr_t)p, sizeof co) < 0)
        return 0;
    uintptr_t hdr[2];
    memcpy(hdr, co, sizeof hdr);
    intptr_t units = (intptr_t)word_at(co, offsetof(PyVarObject, ob_size));
    if (!code_header(hdr) || units <= 0 || units >= ((intptr_t)1 << 28))
        return 0;
    /* each field's {ob_refcnt, ob_type}, in one read */
    uintptr_t fhdr[CODE_FIELDS][2];
    struct iovec l[CODE_FIELDS], r[CODE_FIELDS];
    for (int i = 0; i < CODE_FIELDS; i++) {
        uintptr_t f = word_at(co, code_fields[i].at);
        if (!f || (f & 7))
            return 0;
        l[i] = (struct iovec){fhdr[i], sizeof fhdr[i]};
        r[i] = (struct iovec){(void *)f, sizeof fhdr[i]};
    }
    if (process_vm_readv(self_pid, l, CODE_FIELDS, r, CODE_FIELDS, 0) != (ssize_t)sizeof fhdr)
        return 0;
    for (int i = 0; i < CODE_FIELDS; i++)
        if (!live_count(fhdr[i][0]) || fhdr[i][1] != (uintptr_t)code_fields[i].type)
            return 0;
    return 1;
}

/* The thread's data-stack chunks, where the frames of running calls live (a
 * generator's frame lives in the generator). The chunks linked from the thread
 * state are mapped while the walk interrupts the thread (a chunk is unlinked before
 * it is freed, by the thread itself), so a frame that lies inside one is read in
 * place: one system call a frame saved. */
#define MAX_SPANS 8
typedef struct {
    uintptr_t lo, hi;
} span_t;

static int chunk_spans(uintptr_t chunk, span_t *sp)
{
    int n = 0;
    while (chunk && n < MAX_SPANS) {
        _PyStackChunk h;
        if ((chunk & 7) || rd(&h, chunk, offsetof(_PyStackChunk, data)) < 0 ||
            h.size <= offsetof(_PyStackChunk, data) || h.size > ((size_t)1 << 30))
            break;
        sp[n].lo = chunk + offsetof(_PyStackChunk, data);
        sp[n].hi = chunk + h.size;
        n++;
        chunk = (uintptr_t)h.previous;
    }
    return n;
}

/* Reads a frame header: in place inside a chunk, else through the kernel. */
static int read_frame(unsigned char *buf, uintptr_t f, const span_t *sp, int nsp)
{
    for (int i = 0; i < nsp; i++)
        if (f >= sp[i].lo && f + FRAME_READ <= sp[i].hi) {
            memcpy(buf, (const void *)f, FRAME_READ);
            return 0;
        }
    return rd(buf, f, FRAME_READ);
}

/* The thread state's words at `off` (its frame pointer or cframe) and at the chunk
 * pointer, in one read when they are close. */
#define TS_CHUNK offsetof(PyThreadState, datastack_chunk)

static int read_ts(uintptr_t ts, uintptr_t *frame, uintptr_t *chunk)
{
    size_t lo = L.ts_frame < TS_CHUNK ? L.ts_frame : TS_CHUNK;
    size_t hi = (L.ts_frame > TS_CHUNK ? L.ts_frame : TS_CHUNK) + sizeof(uintptr_t);
    unsigned char buf[512];
    if (hi - lo <= sizeof buf) {
        if (rd(buf, ts + lo, hi - lo) < 0)
            return -1;
        memcpy(frame, buf + (L.ts_frame - lo), sizeof *frame);
        memcpy(chunk, buf + (TS_CHUNK - lo), sizeof *chunk);
        return 0;
    }
    return rd(frame, ts + L.ts_frame, sizeof *frame) < 0 || rd(chunk, ts + TS_CHUNK, sizeof *chunk) < 0
               ? -1
               : 0;
}

/* The walk; *shims counts the shim frames skipped. Returns frames or ST_EINVAL. */
static int walk(uintptr_t ts, st_pyframe_t *out, int cap, int *shims, st_pyframes_known_fn known,
                void *ctx)
{
    uintptr_t f, chunk;
    if (read_ts(ts, &f, &chunk) < 0)
        return ST_EINVAL;
    if (L.cframe && f && rd(&f, f + L.cf_current, sizeof f) < 0)
        return ST_EINVAL;
    span_t sp[MAX_SPANS];
    int nsp = f ? chunk_spans(chunk, sp) : 0;
    int n = 0;
    for (int hops = 0; f && n < cap; hops++) {
        unsigned char buf[FRAME_READ];
        if (hops == MAX_HOPS || (f & 7) || read_frame(buf, f, sp, nsp) < 0)
            return ST_EINVAL;
        int owner = (signed char)buf[L.fr_owner];
        uintptr_t prev = word_at(buf, L.fr_prev);
        if (owner < 0 || owner > L.max_owner || prev == f)
            return ST_EINVAL;
        if (L.shim_owner >= 0 && owner >= L.shim_owner) {
            (*shims)++;
            f = prev;
            continue;
        }
        uintptr_t code = word_at(buf, L.fr_code) & ~L.code_tag;
        uintptr_t hdr[3]; /* refcount, type, size in code units */
        intptr_t size = known && code ? known((const void *)code, ctx) : 0;
        if (size > 0)
            hdr[2] = (uintptr_t)size;
        else if (!code || (code & 7) || rd(hdr, code, sizeof hdr) < 0 ||
                 hdr[1] != (uintptr_t)&PyCode_Type)
            return ST_EINVAL;
        intptr_t d = (intptr_t)(word_at(buf, L.fr_instr) - (code + L.co_adaptive));
        if (d & 1 || d / 2 < -1 || d / 2 >= (intptr_t)hdr[2])
            return ST_EINVAL;
        out[n].code = (const void *)code;
        out[n].idx = (int32_t)(d / 2);
        n++;
        f = prev;
    }
    return n;
}
#endif

struct _PyInterpreterFrame *st_pyframes_bottom(struct _PyInterpreterFrame *frame)
{
#if HAVE_LAYOUT
    char *f = (char *)frame;
    while (f) {
        char *prev;
        memcpy(&prev, f + L.fr_prev, sizeof prev);
        if (!prev)
            break;
        f = prev;
    }
    return (struct _PyInterpreterFrame *)f;
#else
    (void)frame;
    return NULL;
#endif
}

int st_pyframes_walk(const void *tstate, st_pyframe_t *out, int cap)
{
    return st_pyframes_walk_known(tstate, out, cap, NULL, NULL);
}

int st_pyframes_walk_known(const void *tstate, st_pyframe_t *out, int cap,
                           st_pyframes_known_fn known, void *ctx)
{
#if HAVE_LAYOUT
    if (!walker_on || !tstate)
        return ST_EINVAL;
    int saved = errno, shims = 0;
    int n = walk((uintptr_t)tstate, out, cap, &shims, known, ctx);
    errno = saved;
    return n;
#else
    (void)tstate;
    (void)out;
    (void)cap;
    (void)known;
    (void)ctx;
    return ST_EINVAL;
#endif
}

#if HAVE_LAYOUT

static void after_fork_child(void)
{
    self_pid = getpid();
}

#if PY_VERSION_HEX >= 0x030D0000
/* Where, in _Py_DebugOffsets (the head of _PyRuntime, 3.13+: CPython's
 * pycore_runtime.h, then pycore_debug_offsets.h; stable between patch releases),
 * the interpreter says its fields are: byte offsets of the words compared with the
 * layout above. 3.14 added thread and frame fields before these, 3.15 more. */
typedef struct {
    size_t ts_current_frame, ts_datastack_chunk, fr_previous, fr_executable, fr_instr_ptr,
        fr_owner, co_code_adaptive, ob_type;
} debug_at_t;
#if PY_VERSION_HEX < 0x030E0000
static const debug_at_t AT = {184, 208, 232, 240, 248, 264, 344, 360};
#elif PY_VERSION_HEX < 0x030F0000
static const debug_at_t AT = {208, 232, 256, 264, 272, 288, 384, 408};
#else
static const debug_at_t AT = {208, 256, 320, 328, 336, 352, 448, 472};
#endif

typedef struct {
    char cookie[8];
    uint64_t version, free_threaded;
} debug_head_t;

static uint64_t debug_word(const void *d, size_t at)
{
    uint64_t v;
    memcpy(&v, (const char *)d + at, sizeof v);
    return v;
}

static const char *check_debug_offsets(void)
{
    const debug_head_t *d = dlsym(RTLD_DEFAULT, "_PyRuntime");
    if (!d)
        return "the interpreter does not export _PyRuntime";
    if (memcmp(d->cookie, "xdebugpy", 8) != 0)
        return "_PyRuntime does not start with its debug offsets";
    if ((d->version >> 16) != (PY_VERSION_HEX >> 16))
        return "the interpreter's debug offsets are for another version";
    /* the table's own layout above is the final release's (3.15's betas moved its
     * fields) */
    if ((d->version & 0xF0) != 0xF0)
        return "the interpreter is a pre-release, whose debug offsets strata does not know";
    if (d->free_threaded)
        return "the interpreter's debug offsets are for another build";
    if (debug_word(d, AT.ts_current_frame) != L.ts_frame ||
        debug_word(d, AT.fr_previous) != L.fr_prev ||
        debug_word(d, AT.fr_executable) != L.fr_code ||
        debug_word(d, AT.fr_instr_ptr) != L.fr_instr ||
        debug_word(d, AT.fr_owner) != L.fr_owner ||
        debug_word(d, AT.co_code_adaptive) != L.co_adaptive ||
        debug_word(d, AT.ts_datastack_chunk) != TS_CHUNK ||
        debug_word(d, AT.ob_type) != offsetof(PyObject, ob_type))
        return "the interpreter's debug offsets differ from the frame layout strata knows";
    return NULL;
}
#endif

#define PROBE_CAP 256

/* What the probe found: NULL when the walk and the public API agree. */
static const char *probe_why;

/* Compares the walk of this thread with the public API's frames. */
static const char *compare_chains(void)
{
    st_pyframe_t got[PROBE_CAP];
    int shims = 0;
    int n = walk((uintptr_t)PyThreadState_Get(), got, PROBE_CAP, &shims, NULL, NULL);
    if (n < 0)
        return "the frame walk failed a check";
    if (L.shim_owner >= 0 && shims == 0)
        return "the frame walk found no entry frame where this version has them";
    PyFrameObject *f = PyEval_GetFrame();
    Py_XINCREF(f);
    int i = 0;
    const char *why = NULL;
    for (; f && !why; i++) {
        if (i == n) { /* deeper than the array: what was walked matched */
            if (n < PROBE_CAP)
                why = "the frame walk found fewer frames than the interpreter";
            break;
        }
        PyCodeObject *code = PyFrame_GetCode(f);
        int lasti = PyFrame_GetLasti(f);
        if (got[i].code != (const void *)code)
            why = "the frame walk found other code objects than the interpreter";
        else if (lasti < 0 ? got[i].idx >= 0 : got[i].idx != lasti / 2)
            why = "the frame walk found other instructions than the interpreter";
        else if (i < 2 && strcmp(PyUnicode_AsUTF8(code->co_name), i ? "probe_a" : "probe_b"))
            why = "the frame walk did not start at the probe";
        Py_DECREF(code);
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
    if (!why && i != n)
        why = "the frame walk found more frames than the interpreter";
    if (!why && i < 2)
        why = "the frame walk's probe did not run";
    return why;
}

static PyObject *probe_c(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    probe_why = compare_chains();
    Py_RETURN_NONE;
}

static PyMethodDef probe_def = {"probe_c", probe_c, METH_NOARGS, NULL};

/* Runs probe_a -> probe_b -> probe_c (C). */
static const char *run_probe(void)
{
    static const char src[] = "def probe_a(f):\n    return probe_b(f)\n"
                              "def probe_b(f):\n    x = f()\n    return x\n";
    const char *why = "the frame probe could not run";
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *globals = PyDict_New();
    PyObject *code = Py_CompileString(src, "<strata frame probe>", Py_file_input);
    PyObject *fn = PyCFunction_New(&probe_def, NULL);
    PyObject *res = NULL;
    if (globals && code && fn &&
        PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) == 0) {
        res = PyEval_EvalCode(code, globals, globals);
        PyObject *a = res ? PyDict_GetItemString(globals, "probe_a") : NULL;
        Py_XDECREF(res);
        probe_why = why;
        res = a ? PyObject_CallOneArg(a, fn) : NULL;
        if (res)
            why = probe_why;
    }
    if (!res)
        PyErr_Clear();
    Py_XDECREF(res);
    Py_XDECREF(fn);
    Py_XDECREF(code);
    Py_XDECREF(globals);
    PyErr_Restore(et, ev, tb);
    return why;
}

static const char *check(void)
{
    if ((Py_Version >> 16) != (PY_VERSION_HEX >> 16))
        return "the interpreter is not the version strata was built for";
    if (Py_Version < 0x030B01F0 && (Py_Version >> 16) == 0x030B)
        return "Python before 3.11.1 may leave cleared frames linked (gh-99729)";
    self_pid = getpid();
    if (pthread_atfork(NULL, NULL, after_fork_child) != 0)
        return "pthread_atfork failed";
    uintptr_t one = 1, copy = 0;
    if (rd(&copy, (uintptr_t)&one, sizeof one) < 0 || copy != 1)
        return "the process cannot read its own memory with process_vm_readv "
               "(a seccomp filter?)";
#if PY_VERSION_HEX >= 0x030D0000
    const char *why = check_debug_offsets();
    if (why)
        return why;
#endif
    return run_probe();
}
#endif

int st_pyframes_check(const char **why)
{
    static int done;
    static const char *verdict;
    if (!done) {
#if HAVE_LAYOUT
        verdict = check();
        walker_on = verdict == NULL;
#else
        verdict = "strata knows no frame layout for this Python version or build";
#endif
        done = 1;
    }
    if (why)
        *why = verdict;
    return verdict ? ST_EINVAL : 0;
}
