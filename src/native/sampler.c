/* The native stack sampler (see sampler.h). */
#define _GNU_SOURCE
#include "native/sampler.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampling/addrtab.h"
#include "sampling/modules.h"
#include "sampling/stacks.h"
#include "sampling/symbols.h"
#include "sampling/unwind.h"
#include "session/session.h"

#define PC_BITS 18                 /* 256 Ki distinct addresses */
#define PC_UNKNOWN (1u << PC_BITS) /* the id of an address that found no entry */

/* One thread's own state: what its unwinding needs. */
typedef struct {
    st_unwind_thread_t uw;
    st_sthread_t *t;
    volatile sig_atomic_t waking; /* wait_end lets the held signal in */
} nthread_t;

static st_stacks_t stacks = ST_STACKS_INIT;

static struct {
    st_addrtab_t pcs;
    _Atomic uint32_t *gens;        /* per id: the module generation first seen in */
    st_modules_t mods;             /* under `lock` */
    _Atomic uint32_t gen;          /* mods.gen, published for handlers */
    pthread_mutex_t lock;
    int method;                    /* ST_UNWIND_FP or ST_UNWIND_LIBUNWIND */
    const char *unwinder;          /* what walks stacks, for the note */
    int on;
    pthread_key_t key;             /* its destructor drops an ending thread */
    int key_made;
} ns = {.lock = PTHREAD_MUTEX_INITIALIZER};

static __thread nthread_t *self __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------------------------- */
/* The handler                                                               */

static int walk(st_sthread_t *t, void *ucontext, uint32_t *ids, int cap)
{
    nthread_t *n = t->ctx;
    uintptr_t pcs[ST_EV_MAX_FRAMES];
    int got = st_unwind(ucontext, &n->uw, ns.method, pcs, cap < ST_EV_MAX_FRAMES ? cap : ST_EV_MAX_FRAMES);
    if (got < 0)
        return got;
    /* the signal a wait held back comes in inside wait_end's sigmask call: that
     * libc frame is not where the thread waited (wait_end's own frame is left out
     * with strata's others; the wrapper, named as the call it wraps, stays) */
    int skip = n->waking && got > 1;
    uint32_t gen = atomic_load_explicit(&ns.gen, memory_order_acquire);
    for (int i = skip; i < got; i++) {
        int claimed = 0;
        uint32_t id = pcs[i] ? st_addrtab_id(&ns.pcs, pcs[i], &claimed) : ST_ADDRTAB_NONE;
        if (claimed)
            atomic_store_explicit(&ns.gens[id], gen, memory_order_relaxed);
        ids[i - skip] = id == ST_ADDRTAB_NONE ? PC_UNKNOWN : id;
    }
    return got - skip;
}

/* ------------------------------------------------------------------------- */
/* Threads                                                                   */

/* Names the thread's results as the kernel knows it (pthread_setname_np), if
 * it was named; on the thread, or at the end for another. */
static void name_thread(st_sthread_t *t)
{
    char path[64], name[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%llu/comm", (unsigned long long)t->tid);
    FILE *f = t->th ? fopen(path, "re") : NULL;
    if (!f)
        return;
    if (fgets(name, sizeof name, f)) {
        name[strcspn(name, "\n")] = '\0';
        if (*name)
            st_rec_thread_name(t->th, name);
    }
    fclose(f);
}

/* A thread ends (its thread-local destructor): named, its timer gone. */
static void thread_end(void *arg)
{
    nthread_t *n = arg;
    if (ns.on && n->t) {
        name_thread(n->t);
        st_stacks_drop(&stacks, n->t);
    }
}

/* Starts sampling the calling thread. */
static void add_self(void)
{
    if (self)
        return;
    nthread_t *n = calloc(1, sizeof *n);
    if (!n)
        return;
    st_msg_t msg;
    if (st_unwind_thread_init(&n->uw, &msg) < 0)
        st_stacks_note(&stacks, "%s", msg.text);
    self = n;
    n->t = st_stacks_add(&stacks, (uint64_t)st_sigsampler_gettid(), n);
    if (ns.key_made)
        pthread_setspecific(ns.key, n);
}

void st_nsampler_thread_start(void)
{
    if (ns.on)
        add_self();
}

void st_nsampler_loader_enter(void)
{
    if (self)
        self->uw.in_loader++;
}

/* Takes a new snapshot of the loaded objects and publishes its generation. */
static void refresh_modules(void)
{
    pthread_mutex_lock(&ns.lock);
    if (st_modules_refresh(&ns.mods) == ST_ERANGE)
        st_stacks_note(&stacks, "more than %d libraries were loaded: addresses in the later "
                                "ones are not named", ST_MODULES_MAX);
    atomic_store_explicit(&ns.gen, ns.mods.gen, memory_order_release);
    pthread_mutex_unlock(&ns.lock);
}

void st_nsampler_loader_leave(int unloaded)
{
    if (self && self->uw.in_loader > 0)
        self->uw.in_loader--;
    if (!ns.on)
        return;
    refresh_modules();
    if (unloaded && ns.method == ST_UNWIND_LIBUNWIND)
        st_unwind_libunwind_flush();
}

int st_nsampler_wait_begin(sigset_t *old)
{
    nthread_t *n = self;
    if (!ns.on || stacks.sig.clock != ST_SIGCLOCK_WALL || !n || !n->t)
        return 0;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, stacks.sig.signo);
    n->t->held = 1;
    pthread_sigmask(SIG_BLOCK, &one, old);
    return 1;
}

void st_nsampler_wait_end(const sigset_t *old)
{
    nthread_t *n = self;
    n->waking = 1;
    pthread_sigmask(SIG_SETMASK, old, NULL); /* the held signal is handled here */
    n->waking = 0;
    n->t->held = 0;
}

void st_nsampler_before_exec(void)
{
    if (!ns.on)
        return;
    st_stacks_pause(&stacks);
    /* a signal of ours already sent to this thread: taken now, not by the new image */
    sigset_t one, old;
    sigemptyset(&one);
    sigaddset(&one, stacks.sig.signo);
    pthread_sigmask(SIG_BLOCK, &one, &old);
    struct timespec zero = {0, 0};
    while (sigtimedwait(&one, NULL, &zero) > 0)
        ;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void st_nsampler_exec_failed(void)
{
    if (ns.on)
        st_stacks_resume(&stacks);
}

/* ------------------------------------------------------------------------- */
/* The collector                                                             */

static int sampler_start(st_collector_t *c, st_session_t *s, st_msg_t *msg)
{
    (void)c;
    const st_settings_t *set = &s->settings;
    double freq = st_settings_float(set, ST_S_SAMPLING_FREQ);
    st_sigclock_t clock =
        strcmp(st_settings_str(set, ST_S_SAMPLING_CLOCK), "wall") == 0 ? ST_SIGCLOCK_WALL
                                                                      : ST_SIGCLOCK_CPU;
    const char *want = st_settings_str(set, ST_S_SAMPLING_UNWIND);
    ns.method = ST_UNWIND_FP;
    ns.unwinder = "frame pointers";
    if (strcmp(want, "fp") != 0) {
        st_msg_t why;
        if (st_unwind_libunwind_load(&why) == 0) {
            ns.method = ST_UNWIND_LIBUNWIND;
            ns.unwinder = "libunwind";
        } else if (strcmp(want, "libunwind") == 0) {
            return st_msg_set(msg, ST_EINVAL, "STRATA_SAMPLING_UNWIND=libunwind: %s", why.text);
        } else {
            st_stacks_note(&stacks, "native stacks are walked by frame pointers: %s", why.text);
        }
    }
    if (st_addrtab_new(&ns.pcs, PC_BITS) < 0 ||
        !(ns.gens = calloc((size_t)1 << PC_BITS, sizeof *ns.gens))) {
        st_addrtab_free(&ns.pcs);
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    }
    int rc = st_stacks_start(&stacks, &s->rec, s->rec.m_samples,
                             (int)st_settings_int(set, ST_S_SAMPLING_SIGNAL), clock, freq, walk,
                             msg);
    if (rc < 0) {
        st_addrtab_free(&ns.pcs);
        free((void *)ns.gens);
        ns.gens = NULL;
        return rc;
    }
    if (!ns.key_made)
        ns.key_made = pthread_key_create(&ns.key, thread_end) == 0;
    refresh_modules();
    ns.on = 1;
    add_self();
    if (st_stacks_maint_start(&stacks, NULL, NULL) < 0) {
        ns.on = 0;
        st_stacks_stop(&stacks);
        st_stacks_end(&stacks);
        st_addrtab_free(&ns.pcs);
        return st_msg_set(msg, ST_EIO, "cannot start the stack sampler's thread");
    }
    s->stack_sampling = 1;
    return 0;
}

/* The preload library's wrappers of waiting calls (section strata_waits): their
 * frames are kept, named as the calls they wrap, where strata's others go. */
extern const char __start_strata_waits[] __attribute__((weak));
extern const char __stop_strata_waits[] __attribute__((weak));

static int in_wait_wrapper(uintptr_t pc)
{
    return __start_strata_waits && pc >= (uintptr_t)__start_strata_waits &&
           pc < (uintptr_t)__stop_strata_waits;
}

/* The path of the object holding strata's own code (its frames are left out). */
static const char *own_object(void)
{
    Dl_info info;
    return dladdr((void *)own_object, &info) && info.dli_fname ? info.dli_fname : NULL;
}

/* The label of one symbolised frame: its function, tagged with its location
 * (source file, or the module where there is none; line 0: the function, not
 * the call site), so that two functions of one name in two files are two. */
static int frame_label(st_session_t *s, const st_symframe_t *f, uint32_t *label)
{
    const char *file = f->file ? f->file : f->module ? f->module : "~";
    uint32_t loc;
    if (st_loctab_add(&s->locs, file, 0, f->function, &loc) < 0 ||
        st_intern_tagged(&s->labels, f->function, strlen(f->function), loc, label) < 0 ||
        st_loctab_set_id(&s->locs, *label, loc) < 0)
        return ST_ENOMEM;
    return 0;
}

/* Every claimed address as a chain of labels, outermost first (first/labels as
 * st_rec_fold_chains takes them), then the fold. */
static int fold(st_session_t *s)
{
    uint32_t nids = PC_UNKNOWN + 1;
    uint32_t *first = calloc((size_t)nids + 1, sizeof *first);
    uint32_t *count = calloc(nids, sizeof *count);
    uint32_t cap = 4096, nlabels = 0;
    uint32_t *labels = malloc(cap * sizeof *labels);
    st_symbols_t *sym = st_symbols_new(&ns.mods, 0);
    int rc = first && count && labels && sym ? 0 : ST_ENOMEM;
    const char *own = own_object();
    /* the chains, in claim order; each id's start is kept in first[] meanwhile
     * (start), overwritten in id order by the reordering below */
    uint32_t n = st_addrtab_count(&ns.pcs);
    uint32_t *start = first;
    for (uint32_t k = 0; rc == 0 && k < n; k++) {
        uint32_t id = st_addrtab_claimed(&ns.pcs, k);
        if (id == ST_ADDRTAB_NONE)
            continue;
        const st_symframe_t *fr;
        int nf = st_symbols_resolve(sym, st_addrtab_key(&ns.pcs, id), atomic_load(&ns.gens[id]),
                                    &fr);
        if (nf < 0) {
            rc = nf;
            break;
        }
        uintptr_t pc = st_addrtab_key(&ns.pcs, id);
        if (own && fr[0].module && strcmp(fr[0].module, own) == 0 && !in_wait_wrapper(pc))
            continue; /* strata's own frames: left out */
        if (nlabels + (uint32_t)nf > cap) {
            uint32_t *more = realloc(labels, (cap *= 2) * sizeof *labels);
            if (!more) {
                rc = ST_ENOMEM;
                break;
            }
            labels = more;
        }
        start[id] = nlabels;
        count[id] = (uint32_t)nf;
        for (int j = nf - 1; j >= 0 && rc == 0; j--)
            rc = frame_label(s, &fr[j], &labels[nlabels++]);
    }
    uint32_t unknown;
    if (rc == 0 && (rc = st_intern_id(&s->labels, "<unknown>", 9, &unknown)) == 0) {
        if (nlabels == cap) {
            uint32_t *more = realloc(labels, (cap + 1) * sizeof *labels);
            rc = more ? 0 : ST_ENOMEM;
            labels = more ? more : labels;
        }
        if (rc == 0) {
            start[PC_UNKNOWN] = nlabels;
            count[PC_UNKNOWN] = 1;
            labels[nlabels++] = unknown;
        }
    }
    if (rc == 0) {
        /* st_rec_fold_chains wants the chains in id order: reorder them */
        uint32_t *sorted = malloc((nlabels ? nlabels : 1) * sizeof *sorted);
        rc = sorted ? 0 : ST_ENOMEM;
        uint32_t at = 0;
        for (uint32_t id = 0; rc == 0 && id < nids; id++) {
            uint32_t from = start[id];
            first[id] = at;
            for (uint32_t j = 0; j < count[id]; j++)
                sorted[at++] = labels[from + j];
        }
        if (rc == 0) {
            first[nids] = at;
            rc = st_rec_fold_chains(&s->rec, first, sorted, nids);
        }
        free(sorted);
    }
    if (sym)
        st_symbols_free(sym);
    free(labels);
    free(count);
    free(first);
    return rc;
}

/* Names each thread still alive as the kernel knows it. */
static void name_threads(void)
{
    uint32_t n = atomic_load(&stacks.nthreads);
    for (uint32_t i = 0; i < n; i++)
        if (stacks.threads[i]->slot >= 0)
            name_thread(stacks.threads[i]);
}

static void sampler_stop(st_collector_t *c, st_session_t *s)
{
    (void)c;
    if (!ns.on)
        return;
    ns.on = 0;
    st_stacks_stop(&stacks); /* no handler runs after this */
    st_stacks_maint_stop(&stacks);
    name_threads();
    refresh_modules();
    if (fold(s) < 0)
        s->stack_failed = 1;
    st_stacks_summarise(&stacks, &s->stacks, atomic_load(&ns.pcs.full));
    uint32_t n = atomic_load(&stacks.nthreads);
    for (uint32_t i = 0; i < n; i++)
        free(stacks.threads[i]->ctx); /* no handler runs, no thread adds itself */
    st_stacks_end(&stacks);
    st_addrtab_free(&ns.pcs);
    free((void *)ns.gens);
    ns.gens = NULL;
}

static void sampler_contribute(const st_collector_t *c, const st_session_t *s, st_model_t *m)
{
    (void)c;
    if (s->stack_sampling)
        m->stacks = &s->stacks;
}

const st_collector_t st_nsampler_collector = {
    .name = "native stack sampler",
    .start = sampler_start,
    .stop = sampler_stop,
    .contribute = sampler_contribute,
};
