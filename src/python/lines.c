/* Line timings' slow paths: choosing functions, their tables, and what they give
 * the model when the results are written (see lines.h). With the GIL held. */
#include "python/lines.h"

#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/profile.h"
#include "python/memory.h"

/* The most functions whose lines are timed, and lines per function: tables are
 * made once per function, so memory stays bounded whatever -R selects. */
#define MAX_FUNCS 4096
#define MAX_LINES 100000
/* The most source lines kept for one function's block. */
#define MAX_SOURCE 20000
/* The most calls of chosen functions kept for memory over time (mprof's FUNC lines). */
#define MAX_CALLS 100000

typedef struct {
    uint32_t tab, level;
    uint64_t t0, t1;
    int64_t m0, m1;
} call_t;

static struct {
    st_pyltab_t **tabs;
    size_t n, cap;
    uint64_t too_many;       /* functions chosen beyond MAX_FUNCS */
    uint64_t lost;           /* calls not timed */
    /* --memory: the calls of chosen functions (memory over time) */
    call_t *calls;
    size_t ncalls, capcalls;
    uint64_t calls_dropped;
    /* what the model points to, made when the results are written */
    st_model_lfunc_t *funcs;
    size_t nfuncs;
    st_model_memtime_t memtime;
    int have_memtime;
} lt;

/* The last line of co (from co_lines()), or first when it has none. */
static uint32_t last_line(PyCodeObject *co, uint32_t first)
{
    uint32_t last = first;
    PyObject *it = PyObject_CallMethod((PyObject *)co, "co_lines", NULL);
    PyObject *iter = it ? PyObject_GetIter(it) : NULL;
    Py_XDECREF(it);
    PyObject *t;
    while (iter && (t = PyIter_Next(iter))) {
        PyObject *line = PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 3 ? PyTuple_GET_ITEM(t, 2)
                                                                       : NULL;
        if (line && PyLong_Check(line)) {
            long v = PyLong_AsLong(line);
            if (v > (long)last && v < (long)first + MAX_LINES)
                last = (uint32_t)v;
        }
        Py_DECREF(t);
    }
    Py_XDECREF(iter);
    PyErr_Clear();
    return last;
}

int st_pylines_choose(codeinfo_t *ci, PyCodeObject *co)
{
    if (ci->ltab)
        return 0;
    if (lt.n == MAX_FUNCS) {
        lt.too_many++;
        return -1;
    }
    if (lt.n == lt.cap) {
        size_t cap = lt.cap ? 2 * lt.cap : 16;
        st_pyltab_t **v = realloc(lt.tabs, cap * sizeof *v);
        if (!v) {
            lt.lost++;
            return -1;
        }
        lt.tabs = v;
        lt.cap = cap;
    }
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    uint32_t first = co->co_firstlineno > 0 ? (uint32_t)co->co_firstlineno : 1;
    uint32_t n = last_line(co, first) - first + 1;
    PyErr_Restore(et, ev, tb);
    st_pyltab_t *tab = calloc(1, sizeof *tab);
    uint64_t *hits = calloc(n, sizeof *hits), *ticks = calloc(n, sizeof *ticks);
    uint64_t *occ = st_py.line_memory ? calloc(n, sizeof *occ) : NULL;
    int64_t *inc = st_py.line_memory ? calloc(n, sizeof *inc) : NULL;
    int64_t *mem = st_py.line_memory ? calloc(n, sizeof *mem) : NULL;
    if (!tab || !hits || !ticks || (st_py.line_memory && (!occ || !inc || !mem))) {
        free(tab);
        free(hits);
        free(ticks);
        free(occ);
        free(inc);
        free(mem);
        lt.lost++;
        return -1;
    }
    *tab = (st_pyltab_t){.code = Py_NewRef((PyObject *)co), .first = first, .n = n,
                         .hits = hits, .ticks = ticks, .occ = occ, .inc = inc, .mem = mem};
    tab->index = (uint32_t)lt.n;
    lt.tabs[lt.n++] = tab;
    ci->ltab = tab;
    return 0;
}

int st_pylines_grow(st_pythread_t *ts)
{
    uint32_t cap = ts->lcap ? 2 * ts->lcap : 16;
    st_pylframe_t *v = cap <= (1u << 20) ? realloc(ts->lstack, cap * sizeof *v) : NULL;
    if (!v) {
        lt.lost++;
        return -1;
    }
    ts->lstack = v;
    ts->lcap = cap;
    return 0;
}

void st_pylines_lost(void) { lt.lost++; }

/* ------------------------------------------------------------------------- */
/* Memory (--memory), as memory_profiler measures it                          */

void st_pylines_mem_call(st_pylframe_t *f)
{
    PyFrameObject *frame = PyEval_GetFrame(); /* the frame starting (borrowed) */
    f->mline = frame ? PyFrame_GetLineNumber(frame) : (int)f->tab->first;
    if (lt.ncalls < MAX_CALLS) {
        f->call_ns = st_pymem_clock_ns();
        f->call_rss = st_pymem_rss();
    }
}

/* memory_profiler's CodeMap.trace: line `line` ran; memory is measured now. Its
 * increment is counted from the highest memory of `prev` (the line measured before,
 * looked up in this function) as memory_profiler counts it. */
static void mem_trace(st_pyltab_t *tab, int line, int prev)
{
    if (!tab->occ || line < (int)tab->first || (uint32_t)(line - (int)tab->first) >= tab->n)
        return;
    int64_t now = st_pymem_now();
    uint32_t slot = (uint32_t)(line - (int)tab->first);
    int64_t before = 0;
    if (prev > 0 && prev >= (int)tab->first) {
        uint32_t p = (uint32_t)(prev - (int)tab->first);
        if (p < tab->n && tab->occ[p])
            before = tab->mem[p];
    }
    tab->inc[slot] += now - before;
    if (now > tab->mem[slot])
        tab->mem[slot] = now;
    tab->occ[slot]++;
}

void st_pylines_mem_line(st_pythread_t *ts, st_pylframe_t *f, int line)
{
    mem_trace(f->tab, f->mline, ts->mprev);
    ts->mprev = f->mline;
    f->mline = line;
}

/* The call's end: its last line measured, and the call kept for memory over time
 * (mprof's FUNC line: its memory and time at both ends, its level among chosen calls). */
void st_pylines_mem_return(st_pythread_t *ts, st_pylframe_t *f)
{
    st_pylines_mem_line(ts, f, 0);
    if (lt.ncalls == MAX_CALLS) {
        lt.calls_dropped++;
        return;
    }
    if (lt.ncalls == lt.capcalls) {
        size_t cap = lt.capcalls ? 2 * lt.capcalls : 256;
        call_t *v = realloc(lt.calls, cap * sizeof *v);
        if (!v) {
            lt.calls_dropped++;
            return;
        }
        lt.calls = v;
        lt.capcalls = cap;
    }
    lt.calls[lt.ncalls++] = (call_t){f->tab->index, ts->ldepth - 1, f->call_ns,
                                     st_pymem_clock_ns(), f->call_rss, st_pymem_rss()};
}

st_pyltab_t *const *st_pylines_tables(size_t *n)
{
    *n = lt.n;
    return lt.tabs;
}

/* ------------------------------------------------------------------------- */
/* Results                                                                    */

/* s (a str) as owned UTF-8, without its line end. */
static char *source_line(PyObject *s)
{
    PyObject *hold = NULL;
    const char *text = PyUnicode_Check(s) ? st_pytext_utf8(s, &hold) : NULL;
    char *out = strdup(text ? text : "");
    Py_XDECREF(hold);
    if (out) {
        size_t n = strlen(out);
        if (n && out[n - 1] == '\n')
            out[--n] = '\0';
        if (n && out[n - 1] == '\r')
            out[--n] = '\0';
    }
    return out;
}

/* The block of source of a function from its first line, as line_profiler shows
 * it: inspect.getblock over linecache's lines of the file (read anew when it
 * changed). A list, or NULL when there is no source. New reference. */
static PyObject *block_of(const char *file, uint32_t first)
{
    PyObject *linecache = PyImport_ImportModule("linecache");
    PyObject *inspect = linecache ? PyImport_ImportModule("inspect") : NULL;
    PyObject *block = NULL, *lines = NULL;
    if (inspect) {
        /* the file as it is now if it changed since it was read; lines the cache holds
         * with no file behind them (IPython's cells) stay, for the program too */
        PyObject *r = PyObject_CallMethod(linecache, "checkcache", "s", file);
        Py_XDECREF(r);
        lines = PyObject_CallMethod(linecache, "getlines", "s", file);
    }
    PyObject *tail = lines ? PySequence_GetSlice(lines, (Py_ssize_t)first - 1, PY_SSIZE_T_MAX)
                           : NULL;
    if (tail) {
        block = PyObject_CallMethod(inspect, "getblock", "O", tail);
        if (!block) { /* source getblock cannot read: the lines from the first on */
            PyErr_Clear();
            block = Py_NewRef(tail);
        }
    }
    PyErr_Clear();
    Py_XDECREF(tail);
    Py_XDECREF(lines);
    Py_XDECREF(inspect);
    Py_XDECREF(linecache);
    if (block && (!PyList_Check(block) || PyList_GET_SIZE(block) == 0))
        Py_CLEAR(block);
    return block;
}

/* Fills f from tab: the lines run, the names and the source. -1: out of memory. */
static int make_func(st_model_lfunc_t *f, const st_pyltab_t *tab, double ns_per_tick)
{
    PyCodeObject *co = (PyCodeObject *)tab->code;
    PyObject *hold1 = NULL, *hold2 = NULL;
    const char *file = st_pytext_utf8(co->co_filename, &hold1);
    const char *qual = st_pytext_utf8(co->co_qualname, &hold2);
    f->file = strdup(file ? file : "?");
    f->function = strdup(qual ? qual : "?");
    Py_XDECREF(hold1);
    Py_XDECREF(hold2);
    f->first_line = tab->first;
    size_t n = 0;
    for (uint32_t i = 0; i < tab->n; i++)
        n += tab->hits[i] != 0 || (tab->occ && tab->occ[i]);
    st_model_lrow_t *rows = malloc((n ? n : 1) * sizeof *rows);
    if (!f->file || !f->function || !rows) {
        free(rows);
        return -1;
    }
    n = 0;
    for (uint32_t i = 0; i < tab->n; i++)
        if (tab->hits[i] || (tab->occ && tab->occ[i]))
            rows[n++] = (st_model_lrow_t){
                tab->first + i, tab->hits[i],
                (uint64_t)((double)tab->ticks[i] * ns_per_tick + 0.5),
                tab->occ ? tab->occ[i] : 0, tab->inc ? tab->inc[i] : 0, tab->mem ? tab->mem[i] : 0};
    f->rows = rows;
    f->nrows = n;
    PyObject *block = PyGILState_Check() ? block_of(f->file, tab->first) : NULL;
    if (!block)
        return 0;
    Py_ssize_t len = PyList_GET_SIZE(block);
    if (len > MAX_SOURCE)
        len = MAX_SOURCE;
    char **src = calloc(len ? (size_t)len : 1, sizeof *src);
    if (!src) {
        Py_DECREF(block);
        return -1;
    }
    f->source = (const char *const *)src;
    for (Py_ssize_t i = 0; i < len; i++) {
        if (!(src[i] = source_line(PyList_GET_ITEM(block, i))))
            break;
        f->nsource = (size_t)i + 1;
    }
    Py_DECREF(block);
    return f->nsource == (size_t)len ? 0 : -1;
}

/* Memory over time for the model (once): the series' samples and the calls, on the
 * run's clock (seconds since start_ns, real time). 0, or -1 when there is none. */
static int make_memtime(uint64_t start_ns)
{
    if (lt.have_memtime)
        return 0;
    const uint64_t *t;
    const int64_t *rss, *heap;
    uint64_t interval, mono0, real0;
    size_t n = st_pymem_series(&t, &rss, &heap, &interval);
    st_pymem_series_base(&mono0, &real0);
    if (!n)
        return -1;
    double shift = ((double)real0 - (double)start_ns) * 1e-9;
    double *secs = malloc(n * sizeof *secs);
    st_model_memcall_t *calls = calloc(lt.ncalls ? lt.ncalls : 1, sizeof *calls);
    if (!secs || !calls) {
        free(secs);
        free(calls);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        secs[i] = shift + ((double)t[i] - (double)mono0) * 1e-9;
    size_t k = 0;
    for (size_t i = 0; i < lt.ncalls; i++) {
        const call_t *c = &lt.calls[i];
        if (lt.nfuncs != lt.n)
            break; /* a function could not be named (no memory): names unknown */
        calls[k++] = (st_model_memcall_t){lt.funcs[c->tab].function,
                                          shift + ((double)c->t0 - (double)mono0) * 1e-9,
                                          shift + ((double)c->t1 - (double)mono0) * 1e-9,
                                          c->m0, c->m1, c->level};
    }
    lt.memtime = (st_model_memtime_t){(double)interval * 1e-9, n, secs, rss, heap, calls, k,
                                      lt.calls_dropped};
    lt.have_memtime = 1;
    return 0;
}

void st_pylines_contribute(st_model_t *m, double ns_per_tick)
{
    if (lt.n && !lt.funcs) {
        lt.funcs = calloc(lt.n, sizeof *lt.funcs);
        if (lt.funcs) {
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            for (size_t i = 0; i < lt.n; i++)
                if (make_func(&lt.funcs[lt.nfuncs], lt.tabs[i], ns_per_tick) == 0)
                    lt.nfuncs++;
            PyErr_Clear();
            PyErr_Restore(et, ev, tb);
        }
    }
    if (lt.nfuncs) {
        m->lfuncs = lt.funcs;
        m->nlfuncs = lt.nfuncs;
        m->line_time = st_py.line_time;
        m->line_memory = st_py.line_memory ? st_pymem_name() : NULL;
    }
    /* memory over time, with or without chosen functions (mprof run's job) */
    if (st_py.memory && make_memtime(m->start_ns) == 0)
        m->memtime = &lt.memtime;
}

static void free_tab(st_pyltab_t *tab)
{
    codeinfo_t *ci = stored_info((PyCodeObject *)tab->code);
    if (ci && ci->ltab == tab)
        ci->ltab = NULL;
    Py_DECREF(tab->code);
    free(tab->hits);
    free(tab->ticks);
    free(tab->occ);
    free(tab->inc);
    free(tab->mem);
    free(tab);
}

void st_pylines_new_session(void)
{
    for (size_t i = 0; i < lt.n; i++)
        free_tab(lt.tabs[i]);
    free(lt.tabs);
    for (size_t i = 0; i < lt.nfuncs; i++)
        st_profile_lfunc_free(&lt.funcs[i]);
    free(lt.funcs);
    free(lt.calls);
    if (lt.have_memtime) {
        free((void *)lt.memtime.t);
        free((void *)lt.memtime.calls);
    }
    memset(&lt, 0, sizeof lt);
}

void st_pylines_report(FILE *err)
{
    if (lt.too_many)
        fprintf(err, "[strata] line timings: %llu more functions were chosen than the %d whose "
                     "lines strata times; they were not timed (narrow -R/-MR)\n",
                (unsigned long long)lt.too_many, MAX_FUNCS);
    if (lt.lost)
        fprintf(err, "[strata] line timings: %llu call%s of chosen functions %s not timed "
                     "(the program's own trace function held the thread, or no memory)\n",
                (unsigned long long)lt.lost, lt.lost == 1 ? "" : "s",
                lt.lost == 1 ? "was" : "were");
}
