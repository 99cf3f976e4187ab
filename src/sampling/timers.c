#define _GNU_SOURCE /* SIGEV_THREAD_ID, gettid */
#include "sampling/timers.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The value a timer of ours carries: a tag in the high half, the slot below. */
#define TAG 0x5354u /* "ST" */
#define VALUE(slot) ((void *)(((uintptr_t)TAG << 32) | (uintptr_t)(slot)))

/* The one installed sampler, and the handlers running now (so that uninstall can
 * wait for them to leave before the caller frees what their callbacks use). */
static st_sigsampler_t *_Atomic active;
static _Atomic int inflight;
/* The signal our handler owns, set once: stays caught for stale signals. */
static int owned_signo;
static struct sigaction owned_old;

pid_t st_sigsampler_gettid(void) { return (pid_t)syscall(SYS_gettid); }

clockid_t st_sigsampler_clockid(pid_t tid, st_sigclock_t clock)
{
    /* ~tid << 3 | CPUCLOCK_PERTHREAD_MASK (4) | CPUCLOCK_SCHED (2) */
    return clock == ST_SIGCLOCK_CPU ? (clockid_t)((~(unsigned)tid << 3) | 6) : CLOCK_MONOTONIC;
}

/* A signal on our number that no timer of ours sent: what would have happened
 * without strata (the previous handler, or the default action, which for a
 * real-time signal ends the process). */
static void forward(int sig, siginfo_t *si, void *uc)
{
    if (owned_old.sa_flags & SA_SIGINFO) {
        if (owned_old.sa_sigaction)
            owned_old.sa_sigaction(sig, si, uc);
        return;
    }
    if (owned_old.sa_handler == SIG_IGN)
        return;
    if (owned_old.sa_handler != SIG_DFL) {
        owned_old.sa_handler(sig);
        return;
    }
    sigaction(sig, &owned_old, NULL);
    syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig); /* delivered on return */
}

static int start_timer(st_sigsampler_t *s, uint32_t slot, st_msg_t *msg);

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    atomic_fetch_add(&inflight, 1);
    st_sigsampler_t *s = atomic_load(&active);
    uintptr_t v = (uintptr_t)si->si_value.sival_ptr;
    if (si->si_code == SI_TIMER && (v >> 32) == TAG) {
        uint32_t slot = (uint32_t)v;
        void *ctx = s && slot < ST_SIGTIMER_SLOTS
                        ? atomic_load_explicit(&s->slots[slot].ctx, memory_order_acquire)
                        : NULL;
        if (ctx) {
            int over = si->si_overrun > 0 ? si->si_overrun : 0;
            s->fn(ctx, uc, 1u + (uint32_t)over);
            atomic_fetch_add_explicit(&s->signals, 1, memory_order_relaxed);
        }
        /* else a timer deleted since it fired: nothing to do */
    } else {
        if (s)
            atomic_fetch_add_explicit(&s->foreign, 1, memory_order_relaxed);
        forward(sig, si, uc);
    }
    atomic_fetch_sub(&inflight, 1);
    errno = saved;
}

/* 1 if `sig` has the default action and no handler: free for us. */
static int is_free(int sig)
{
    struct sigaction sa;
    if (sigaction(sig, NULL, &sa) < 0)
        return 0;
    return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}

/* The highest free real-time signal other than `not`, or 0: programs that use
 * real-time signals mostly count up from SIGRTMIN, so strata counts down. */
static int free_signal(int not)
{
    for (int sig = SIGRTMAX; sig >= SIGRTMIN + 4; sig--)
        if (sig != not && is_free(sig))
            return sig;
    return 0;
}

/* Installs our handler on `signo`, which becomes the signal we own. */
static int take_signal(int signo, st_msg_t *msg)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(signo, &sa, &owned_old) < 0)
        return st_msg_set(msg, ST_EIO, "cannot handle signal %d: %s", signo, strerror(errno));
    owned_signo = signo;
    return 0;
}

int st_sigsampler_install(st_sigsampler_t *s, int signo, st_sigclock_t clock, uint64_t period_ns,
                          st_sigsample_fn fn, st_msg_t *msg)
{
    if (atomic_load(&active))
        return st_msg_set(msg, ST_EINVAL, "a stack sampler is already running in this process");
    /* the slots are free: never used, or disarmed by uninstall (not cleared here:
     * 128 KB of page faults at each start) */
    s->nslots = 0;
    atomic_store(&s->signals, 0);
    atomic_store(&s->foreign, 0);
    s->installed = 0;
    if (owned_signo) {
        /* installed before in this process (a run after a run): ours still */
        if (signo && signo != owned_signo)
            return st_msg_set(msg, ST_EINVAL,
                              "the sampling signal cannot change within a process (it is %d)",
                              owned_signo);
        signo = owned_signo;
    } else if (signo) {
        if (signo < SIGRTMIN || signo > SIGRTMAX)
            return st_msg_set(msg, ST_EINVAL,
                              "sampling signal %d is not a real-time signal (%d to %d)", signo,
                              SIGRTMIN, SIGRTMAX);
        if (!is_free(signo))
            return st_msg_set(msg, ST_EINVAL,
                              "sampling signal %d already has a handler in this program", signo);
    } else if (!(signo = free_signal(0))) {
        return st_msg_set(msg, ST_EINVAL, "no free real-time signal for sampling");
    }
    if (!owned_signo && take_signal(signo, msg) < 0)
        return ST_EIO;
    s->signo = signo;
    s->clock = clock;
    s->period_ns = period_ns ? period_ns : 1;
    s->fn = fn;
    s->old = owned_old;
    s->installed = 1;
    atomic_store(&active, s);
    return 0;
}

int st_sigsampler_arm(st_sigsampler_t *s, pid_t tid, void *ctx, st_msg_t *msg)
{
    uint32_t slot = 0;
    while (slot < ST_SIGTIMER_SLOTS && atomic_load(&s->slots[slot].ctx))
        slot++;
    if (slot == ST_SIGTIMER_SLOTS)
        return st_msg_set(msg, ST_ENOMEM, "more than %d threads to sample", ST_SIGTIMER_SLOTS);
    st_sigtimer_t *t = &s->slots[slot];
    t->tid = tid;
    /* published before the timer can fire */
    atomic_store_explicit(&t->ctx, ctx, memory_order_release);
    int rc = start_timer(s, slot, msg);
    if (rc < 0) {
        atomic_store(&t->ctx, NULL);
        return rc;
    }
    if (slot + 1 > s->nslots)
        s->nslots = slot + 1;
    return (int)slot;
}

/* Creates and starts slot's timer (its tid set). */
static int start_timer(st_sigsampler_t *s, uint32_t slot, st_msg_t *msg)
{
    st_sigtimer_t *t = &s->slots[slot];
    pid_t tid = t->tid;
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = s->signo;
    ev.sigev_value.sival_ptr = VALUE(slot);
    ev._sigev_un._tid = tid;
    if (timer_create(st_sigsampler_clockid(tid, s->clock), &ev, &t->timer) < 0)
        return st_msg_set(msg, ST_EIO, "cannot make a sampling timer for thread %d: %s",
                          (int)tid, strerror(errno));
    struct itimerspec it;
    it.it_interval.tv_sec = (time_t)(s->period_ns / 1000000000u);
    it.it_interval.tv_nsec = (long)(s->period_ns % 1000000000u);
    it.it_value = it.it_interval;
    if (timer_settime(t->timer, 0, &it, NULL) < 0) {
        int e = errno;
        timer_delete(t->timer);
        return st_msg_set(msg, ST_EIO, "cannot start the sampling timer of thread %d: %s",
                          (int)tid, strerror(e));
    }
    t->armed = 1;
    return 0;
}

int st_sigsampler_check(st_sigsampler_t *s, st_msg_t *msg)
{
    struct sigaction cur;
    if (!s->installed || sigaction(s->signo, NULL, &cur) < 0 ||
        ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_signal))
        return 0;
    /* the program put a handler of its own on our signal: it keeps it, and the
     * timers move to another free signal */
    int old = s->signo, signo = free_signal(old);
    if (!signo || take_signal(signo, msg) < 0) {
        if (!signo)
            st_msg_set(msg, ST_EIO, "no free real-time signal left for sampling");
        for (uint32_t i = 0; i < s->nslots; i++)
            st_sigsampler_disarm(s, (int)i);
        return ST_EIO;
    }
    s->signo = signo;
    for (uint32_t i = 0; i < s->nslots; i++) {
        st_sigtimer_t *t = &s->slots[i];
        if (!t->armed)
            continue;
        timer_delete(t->timer);
        t->armed = 0;
        if (start_timer(s, i, msg) < 0)
            atomic_store(&t->ctx, NULL);
    }
    st_msg_set(msg, 0, "the program handles signal %d: stack sampling moved to signal %d", old,
               signo);
    return 1;
}

void st_sigsampler_disarm(st_sigsampler_t *s, int slot)
{
    if (slot < 0 || (uint32_t)slot >= ST_SIGTIMER_SLOTS)
        return;
    st_sigtimer_t *t = &s->slots[slot];
    if (t->armed)
        timer_delete(t->timer);
    t->armed = 0;
    atomic_store(&t->ctx, NULL);
}

void st_sigsampler_uninstall(st_sigsampler_t *s)
{
    if (!s->installed)
        return;
    for (uint32_t i = 0; i < s->nslots; i++)
        st_sigsampler_disarm(s, (int)i);
    atomic_store(&active, NULL);
    /* a handler that saw the sampler finishes before the caller frees its states */
    while (atomic_load(&inflight))
        sched_yield();
    s->installed = 0;
}
