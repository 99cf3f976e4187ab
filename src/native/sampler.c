/* The native stack sampler (see sampler.h). */
#define _GNU_SOURCE
#include "native/sampler.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampling/nstack.h"
#include "sampling/stacks.h"
#include "session/session.h"

/* One thread's own state: what its unwinding needs. */
typedef struct {
    st_unwind_thread_t uw;
    st_sthread_t *t;
    volatile sig_atomic_t waking; /* wait_end lets the held signal in */
} nthread_t;

static st_stacks_t stacks = ST_STACKS_INIT;
static st_nstack_t nstack = ST_NSTACK_INIT;

/* The preload library's wrappers of waiting calls (section strata_waits): their
 * frames are kept, named as the calls they wrap, where strata's others go. */
extern const char __start_strata_waits[] __attribute__((weak));
extern const char __stop_strata_waits[] __attribute__((weak));

static struct {
    int on;
    pthread_key_t key;             /* its destructor drops an ending thread */
    int key_made;
} ns;

static __thread nthread_t *self __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------------------------- */
/* The handler                                                               */

static int walk(st_sthread_t *t, void *ucontext, uint32_t *ids, int cap)
{
    nthread_t *n = t->ctx;
    /* the signal a wait held back comes in inside wait_end's sigmask call: that
     * libc frame is not where the thread waited (wait_end's own frame is left out
     * with strata's others; the wrapper, named as the call it wraps, stays) */
    return st_nstack_walk(&nstack, ucontext, &n->uw, n->waking ? 1 : 0, NULL, 0, 0, ids, cap, NULL);
}

/* ------------------------------------------------------------------------- */
/* Threads                                                                   */

/* A thread ends (its thread-local destructor): named, its timer gone. */
static void thread_end(void *arg)
{
    nthread_t *n = arg;
    if (ns.on && n->t) {
        if (n->t->th)
            st_rec_thread_name_kernel(n->t->th);
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

void st_nsampler_loader_leave(int unloaded)
{
    if (self && self->uw.in_loader > 0)
        self->uw.in_loader--;
    if (ns.on && st_nstack_refresh(&nstack, unloaded))
        st_stacks_note(&stacks, "more than %d libraries were loaded: addresses in the later "
                                "ones are not named", ST_MODULES_MAX);
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
    char why_fp[sizeof(st_msg_t)];
    int rc = st_nstack_start(&nstack, st_settings_str(set, ST_S_SAMPLING_UNWIND), why_fp,
                             sizeof why_fp, msg);
    if (rc < 0)
        return rc;
    nstack.keep_lo = (uintptr_t)__start_strata_waits;
    nstack.keep_hi = (uintptr_t)__stop_strata_waits;
    rc = st_stacks_start(&stacks, &s->rec, s->rec.m_samples,
                         (int)st_settings_int(set, ST_S_SAMPLING_SIGNAL), clock, freq, walk, msg);
    if (rc < 0) {
        st_nstack_end(&nstack);
        return rc;
    }
    if (*why_fp)
        st_stacks_note(&stacks, "native stacks are walked by frame pointers: %s", why_fp);
    if (!ns.key_made)
        ns.key_made = pthread_key_create(&ns.key, thread_end) == 0;
    ns.on = 1;
    add_self();
    if (st_stacks_maint_start(&stacks, NULL, NULL) < 0) {
        ns.on = 0;
        st_stacks_stop(&stacks);
        st_stacks_end(&stacks);
        st_nstack_end(&nstack);
        return st_msg_set(msg, ST_EIO, "cannot start the stack sampler's thread");
    }
    s->stack_sampling = 1;
    return 0;
}

/* Every address as its chain of labels, folded into the threads' paths. */
static int fold(st_session_t *s)
{
    uint32_t *first, *chain, nchain;
    int rc = st_nstack_chains(&nstack, &s->labels, &s->locs, &first, &chain, &nchain);
    if (rc < 0)
        return rc;
    rc = st_stacks_fold(&stacks, first, chain, ST_NSTACK_IDS);
    /* kept for the timeline's samples */
    s->stack_first = first;
    s->stack_chain = chain;
    s->stack_nids = ST_NSTACK_IDS;
    return rc;
}

/* Names each thread still alive as the kernel knows it. */
static void name_threads(void)
{
    uint32_t n = atomic_load(&stacks.nthreads);
    for (uint32_t i = 0; i < n; i++)
        if (stacks.threads[i]->slot >= 0 && stacks.threads[i]->th)
            st_rec_thread_name_kernel(stacks.threads[i]->th);
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
    st_nstack_refresh(&nstack, 0);
    if (fold(s) < 0)
        s->stack_failed = 1;
    st_stacks_summarise(&stacks, &s->stacks, st_nstack_unnamed(&nstack));
    uint32_t n = atomic_load(&stacks.nthreads);
    for (uint32_t i = 0; i < n; i++)
        free(stacks.threads[i]->ctx); /* no handler runs, no thread adds itself */
    st_stacks_end(&stacks);
    st_nstack_end(&nstack);
}

const st_collector_t st_nsampler_collector = {
    .name = "native stack sampler",
    .start = sampler_start,
    .stop = sampler_stop,
    .contribute = st_session_stacks_contribute,
};
