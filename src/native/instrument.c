/* Instrumented calls and API regions (see instrument.h). */
#define _GNU_SOURCE
#include "native/instrument.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/filter.h"
#include "sampling/addrtab.h"
#include "sampling/modules.h"
#include "sampling/symbols.h"
#include "native/mpi.h"
#include "session/session.h"

#define EXPORT __attribute__((visibility("default")))
#define NOTRACE __attribute__((no_instrument_function))

#define FN_BITS 18            /* 256 Ki functions and region names */
/* labels[id]: 0 not named yet, SKIP left out by the filters, else label + 1 */
#define SKIP UINT32_MAX

static struct {
    st_session_t *s;
    st_recorder_t *rec;
    st_addrtab_t fns;          /* function addresses and region names -> ids */
    _Atomic uint32_t *labels;
    st_filter_t filter;
    st_modules_t mods;         /* under lock */
    st_symbols_t *sym;
    pthread_mutex_t lock;      /* naming */
    pthread_key_t key;         /* thread end: its name */
    int key_made;
    _Atomic int on;
    _Atomic int entered;       /* something was entered (a function, a region) */
    _Atomic int paused;        /* strata_stop(): no call is entered until strata_start() */
    _Atomic uint64_t marks, counts; /* strata_mark and strata_counter calls */
    struct {
        const char *key;       /* the name's address as first given */
        char name[64];
        uint32_t track;
    } counter[64];             /* counter tracks, under lock */
    uint32_t ncounters;
} ni = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Pushes while paused, popped without a region (per thread). */
static __thread uint32_t pushes_paused __attribute__((tls_model("initial-exec")));

/* 1 when a call entered now is recorded: running and not paused. */
NOTRACE static inline int entering(void)
{
    return atomic_load_explicit(&ni.on, memory_order_relaxed) &&
           !atomic_load_explicit(&ni.paused, memory_order_relaxed);
}

int st_ninstr_entered(void)
{
    return atomic_load(&ni.entered);
}

/* Waits on locks: see instrument.h. A thread inside one of strata's own waits
 * (the recorder registering it takes a lock) is not measured again. */
static __thread int in_wait __attribute__((tls_model("initial-exec")));
static uint32_t wait_labels[2]; /* contended mutex, condition variable */

/* 1 for the API's own wrappers (the Fortran module's, or the C header's when a
 * compiler kept them out of line): a region opens in its caller, not inside a
 * call that ends before it. */
NOTRACE static int is_api(const char *name)
{
    static const char *const api[] = {"strata_push", "strata_pop", "strata_mark",
                                      "strata_counter", "strata_start", "strata_stop"};
    if (strncmp(name, "__strata_MOD_", 13) == 0) /* the Fortran module's */
        return 1;
    /* the name, or the Fortran module's specific procedures (strata_counter_r8) */
    for (size_t i = 0; i < sizeof api / sizeof api[0]; i++) {
        size_t n = strlen(api[i]);
        if (strncmp(name, api[i], n) == 0 && (name[n] == '\0' || name[n] == '_'))
            return 1;
    }
    return 0;
}

/* The label of a function's address: its outermost frame there (the function
 * itself, not one inlined into it), tagged with (file, 0, name); SKIP
 * when the filters leave it out. Under the lock. */
NOTRACE static uint32_t name_function(uintptr_t fn)
{
    if (st_modules_find(&ni.mods, fn, 0) < 0)
        st_modules_refresh(&ni.mods); /* a library loaded since */
    const st_symframe_t *fr;
    int n = ni.sym ? st_symbols_resolve(ni.sym, fn, 0, &fr) : -1;
    if (n < 1)
        return SKIP;
    const st_symframe_t *f = &fr[n - 1];
    const char *file = f->file ? f->file : f->module ? f->module : "~";
    if (!st_filter_keeps(&ni.filter, f->function, file) || is_api(f->function))
        return SKIP;
    uint32_t loc, label;
    /* line 0, as the stack sampler names functions: one label for both */
    if (st_loctab_add(&ni.s->locs, file, 0, f->function, &loc) < 0 ||
        st_intern_tagged(&ni.s->labels, f->function, strlen(f->function), loc, &label) < 0 ||
        st_loctab_set_id(&ni.s->locs, label, loc) < 0)
        return SKIP;
    return label;
}

/* The label of a text (interned; ST_PATH_NONE when out of memory). */
NOTRACE static uint32_t text_label(const char *text)
{
    uint32_t label;
    int outer = in_wait;
    in_wait = 1; /* strata's own lock: not the program's wait */
    if (st_intern_id(&ni.s->labels, text, strlen(text), &label) < 0)
        label = ST_PATH_NONE;
    in_wait = outer;
    return label;
}

/* The label of id `id` (key `key`), made on first use. */
NOTRACE static uint32_t label_of(uint32_t id, uintptr_t key, int region)
{
    uint32_t v = atomic_load_explicit(&ni.labels[id], memory_order_acquire);
    if (v)
        return v == SKIP ? SKIP : v - 1;
    int outer = in_wait;
    in_wait = 1; /* strata's own lock: not the program's wait */
    pthread_mutex_lock(&ni.lock);
    v = atomic_load_explicit(&ni.labels[id], memory_order_acquire);
    if (!v) {
        uint32_t label = region ? text_label((const char *)key) : name_function(key);
        if (label == ST_PATH_NONE)
            label = SKIP;
        v = label == SKIP ? SKIP : label + 1;
        atomic_store_explicit(&ni.labels[id], v, memory_order_release);
        atomic_store(&ni.entered, 1);
    }
    pthread_mutex_unlock(&ni.lock);
    in_wait = outer;
    return v == SKIP ? SKIP : v - 1;
}

/* Each thread's last labels, by function address (direct-mapped): the common
 * enter is one compare, not a table probe. */
#define CACHE 256
static __thread struct {
    const void *fn;
    uint32_t label;
} cache[CACHE] __attribute__((tls_model("initial-exec")));

/* The label of function `fn`, or SKIP. */
NOTRACE static inline uint32_t fn_label(void *fn)
{
    uintptr_t h = ((uintptr_t)fn >> 4) & (CACHE - 1);
    if (__builtin_expect(cache[h].fn == fn, 1))
        return cache[h].label;
    uint32_t id = st_addrtab_id(&ni.fns, (uintptr_t)fn, NULL);
    uint32_t label = id == ST_ADDRTAB_NONE ? SKIP : label_of(id, (uintptr_t)fn, 0);
    cache[h].fn = fn;
    cache[h].label = label;
    return label;
}

EXPORT NOTRACE void __cyg_profile_func_enter(void *fn, void *site)
{
    (void)site;
    if (!entering())
        return;
    uint32_t label = fn_label(fn);
    if (label != SKIP)
        st_rec_enter(st_rec_self(ni.rec), label, fn);
}

/* The exit of a function entered (its frame's key is fn); a function the filters
 * left out was not entered, and the top frame is another's. */
EXPORT NOTRACE void __cyg_profile_func_exit(void *fn, void *site)
{
    (void)site;
    if (!atomic_load_explicit(&ni.on, memory_order_relaxed))
        return;
    st_rec_thread_t *th = st_rec_self(ni.rec);
    st_rec_exit_key_t(th, fn, th->tracing);
}

/* A thread's last region names: the name's address, its label and the label's
 * text (interned strings never move), checked against the name's text at every
 * push, inline (a region name is short; strcmp's call costs more than it). */
#define RCACHE 64
static __thread struct {
    const char *name, *text;
    uint32_t label;
} rcache[RCACHE] __attribute__((tls_model("initial-exec")));

NOTRACE static inline int same_text(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* The label of a region's or an MPI call's name. */
NOTRACE static inline uint32_t name_label(const char *name)
{
    uintptr_t h = ((uintptr_t)name >> 3) & (RCACHE - 1);
    if (__builtin_expect(rcache[h].name == name, 1) && same_text(rcache[h].text, name))
        return rcache[h].label;
    /* cached by the name's address, checked against its text: a buffer whose text
     * changed names another region */
    uint32_t id = st_addrtab_id(&ni.fns, (uintptr_t)name, NULL);
    uint32_t label = id == ST_ADDRTAB_NONE ? SKIP : label_of(id, (uintptr_t)name, 1);
    if (label == SKIP || strcmp(st_intern_str(&ni.s->labels, label), name) != 0)
        label = text_label(name);
    if (label != ST_PATH_NONE) {
        rcache[h].name = name;
        rcache[h].text = st_intern_str(&ni.s->labels, label);
        rcache[h].label = label;
    }
    return label;
}

int st_ninstr_enter_text(const char *text, const void *key)
{
    if (!entering())
        return 0;
    atomic_store_explicit(&ni.entered, 1, memory_order_relaxed);
    st_rec_enter(st_rec_self(ni.rec), name_label(text), key);
    return 1;
}

void st_ninstr_exit_key(const void *key)
{
    if (!atomic_load_explicit(&ni.on, memory_order_relaxed))
        return;
    st_rec_thread_t *th = st_rec_self(ni.rec);
    st_rec_exit_key_t(th, key, th->tracing);
}

void st_ninstr_alloc(const char *site, const void *addr, uint64_t bytes)
{
    if (atomic_load_explicit(&ni.on, memory_order_relaxed))
        st_rec_alloc(st_rec_self(ni.rec), text_label(site), (uint64_t)(uintptr_t)addr, bytes);
}

void st_ninstr_free(const void *addr)
{
    if (atomic_load_explicit(&ni.on, memory_order_relaxed))
        st_rec_free_addr(st_rec_self(ni.rec), (uint64_t)(uintptr_t)addr);
}

EXPORT NOTRACE void strata__push(const char *name)
{
    if (!atomic_load_explicit(&ni.on, memory_order_relaxed) || !name)
        return;
    if (atomic_load_explicit(&ni.paused, memory_order_relaxed)) {
        pushes_paused++; /* its pop closes nothing */
        return;
    }
    st_rec_enter(st_rec_self(ni.rec), name_label(name), name);
}

/* MPI calls (mpi.h): a call of its own under the caller, keyed by its name, with
 * its bytes in the mpi_bytes metric. */
static uint32_t mpi_bytes = ST_METRIC_NONE;

void st_ninstr_mpi_metric(uint32_t metric)
{
    mpi_bytes = metric;
}

EXPORT NOTRACE int strata__mpi_enter(const char *name, uint64_t bytes)
{
    if (!entering() || !name)
        return 0;
    atomic_store_explicit(&ni.entered, 1, memory_order_relaxed);
    /* the wrappers' names are constants: known by their address alone */
    uintptr_t h = ((uintptr_t)name >> 3) & (RCACHE - 1);
    uint32_t label = rcache[h].name == name ? rcache[h].label : name_label(name);
    st_rec_thread_t *th = st_rec_self(ni.rec);
    st_rec_enter(th, label, name);
    if (bytes && mpi_bytes != ST_METRIC_NONE)
        st_rec_add_top(th, mpi_bytes, bytes);
    in_wait++; /* the implementation's own lock waits are the call's time */
    return 1;
}

EXPORT NOTRACE void strata__mpi_exit(const char *name)
{
    in_wait--;
    st_ninstr_exit_key(name);
}

EXPORT NOTRACE void strata__mpi_rank(int rank, int size)
{
    if (atomic_load(&ni.on) && rank >= 0 && size > 1)
        st_session_set_rank(ni.s, (uint32_t)rank);
}

EXPORT NOTRACE void strata__pop(void)
{
    if (pushes_paused) {
        pushes_paused--;
        return;
    }
    if (atomic_load_explicit(&ni.on, memory_order_relaxed))
        st_rec_exit(st_rec_self(ni.rec));
}

/* Stopped, no call or region is entered, on any thread; those open go on and end
 * as they would (their exits are still seen), so the tree stays balanced. */
EXPORT NOTRACE void strata__stop(void)
{
    atomic_store_explicit(&ni.paused, 1, memory_order_relaxed);
}

EXPORT NOTRACE void strata__start(void)
{
    atomic_store_explicit(&ni.paused, 0, memory_order_relaxed);
}

EXPORT NOTRACE void strata__mark(const char *name)
{
    if (!entering() || !name)
        return;
    atomic_fetch_add_explicit(&ni.marks, 1, memory_order_relaxed);
    st_rec_instant(st_rec_self(ni.rec), text_label(name));
}

/* The counter track named `name` (made at its first value), or UINT32_MAX. */
NOTRACE static uint32_t counter_track(const char *name)
{
    uint32_t track = UINT32_MAX;
    pthread_mutex_lock(&ni.lock);
    for (uint32_t i = 0; i < ni.ncounters && track == UINT32_MAX; i++)
        if (ni.counter[i].key == name || strncmp(ni.counter[i].name, name,
                                                 sizeof ni.counter[i].name) == 0)
            track = ni.counter[i].track;
    if (track == UINT32_MAX && ni.ncounters < sizeof ni.counter / sizeof ni.counter[0]) {
        uint32_t i = ni.ncounters;
        snprintf(ni.counter[i].name, sizeof ni.counter[i].name, "%s", name);
        ni.counter[i].key = name;
        if (st_rec_add_track(ni.rec, ST_TRACK_COUNTER, ni.counter[i].name, ST_DOMAIN_HOST, 1, 0,
                             &ni.counter[i].track) == 0) {
            track = ni.counter[i].track;
            ni.ncounters++;
        }
    }
    pthread_mutex_unlock(&ni.lock);
    return track;
}

EXPORT NOTRACE void strata__counter(const char *name, double value)
{
    if (!entering() || !name)
        return;
    atomic_fetch_add_explicit(&ni.counts, 1, memory_order_relaxed);
    st_rec_thread_t *th = st_rec_self(ni.rec);
    if (!th->tracing)
        return;
    uint32_t track = counter_track(name);
    if (track != UINT32_MAX)
        st_rec_counter(th, track, value);
}

void st_ninstr_api_events(uint64_t *marks, uint64_t *counts)
{
    *marks = atomic_load(&ni.marks);
    *counts = atomic_load(&ni.counts);
}

/* A thread ends: named as the kernel knows it (pthread_setname_np). */
NOTRACE static void thread_end(void *arg)
{
    if (atomic_load(&ni.on))
        st_rec_thread_name_kernel(arg);
}

/* Registers the calling thread and names it at its end. */
NOTRACE static void watch_thread(void)
{
    st_rec_thread_t *th = st_rec_self(ni.rec);
    if (th && ni.key_made)
        pthread_setspecific(ni.key, th);
}

static int instr_start(st_collector_t *c, st_session_t *s, st_msg_t *msg)
{
    (void)c;
    int rc = st_filter_init(&ni.filter, &s->settings, msg);
    if (rc < 0)
        return rc;
    if (st_addrtab_new(&ni.fns, FN_BITS) < 0 ||
        !(ni.labels = calloc((size_t)1 << FN_BITS, sizeof *ni.labels))) {
        st_addrtab_free(&ni.fns);
        st_filter_free(&ni.filter);
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    }
    st_modules_refresh(&ni.mods);
    ni.sym = st_symbols_new(&ni.mods, 0);
    ni.s = s;
    ni.rec = &s->rec;
    if (!ni.key_made)
        ni.key_made = pthread_key_create(&ni.key, thread_end) == 0;
    static const char *const waits[2] = {"pthread_mutex_lock (contended)",
                                         "pthread_cond_wait"};
    for (int i = 0; i < 2; i++)
        if (st_intern_id(&s->labels, waits[i], strlen(waits[i]), &wait_labels[i]) < 0)
            wait_labels[i] = ST_PATH_NONE;
    s->timed = 1;
    atomic_store(&ni.on, 1);
    watch_thread();
    return 0;
}

static void instr_stop(st_collector_t *c, st_session_t *s)
{
    (void)c;
    if (!atomic_load(&ni.on))
        return;
    atomic_store(&ni.on, 0);
    for (uint32_t i = 0; i < s->rec.nthreads; i++)
        st_rec_thread_name_kernel(s->rec.threads[i]);
    /* the labels stay (the session's); the tables go */
    if (ni.sym)
        st_symbols_free(ni.sym);
    ni.sym = NULL;
    st_modules_free(&ni.mods);
    st_filter_free(&ni.filter);
}

const st_collector_t st_ninstr_collector = {
    .name = "instrumented calls",
    .start = instr_start,
    .stop = instr_stop,
};

int st_ninstr_wait_begin(int what)
{
    if (!atomic_load_explicit(&ni.on, memory_order_relaxed) || in_wait)
        return 0;
    in_wait = 1;
    st_rec_enter(st_rec_self(ni.rec), wait_labels[what], wait_labels);
    return 1;
}

void st_ninstr_wait_end(void)
{
    st_rec_thread_t *th = st_rec_self(ni.rec);
    st_rec_exit_key_t(th, wait_labels, th->tracing);
    in_wait = 0;
}

int st_ninstr_measuring(void)
{
    return atomic_load_explicit(&ni.on, memory_order_relaxed) && !in_wait;
}

NOTRACE void st_ninstr_thread_start(void)
{
    if (atomic_load(&ni.on))
        watch_thread();
}
