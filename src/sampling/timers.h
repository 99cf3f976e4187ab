/* Per-thread sampling timers and the signal they raise (issue 11).
 *
 * Design note. A stack sampler interrupts each thread it follows every `period`
 * of that thread's CPU time (ST_SIGCLOCK_CPU: busy threads only, what the CPU does)
 * or of wall time (ST_SIGCLOCK_WALL: waiting threads too). One POSIX timer per
 * thread (timer_create with SIGEV_THREAD_ID), so the signal is delivered to the
 * thread it samples, never to whichever thread the kernel picks; any thread may
 * arm the timer of any other, by kernel thread id, so the sampler can follow
 * threads it never runs on. A CPU timer runs on the thread's own CPU clock,
 * made from its id as glibc's pthread_getcpuclockid makes it from a pthread_t.
 *
 * The signal. A real-time signal that no one handles (SIG_DFL, not ignored) is
 * picked at install time, from SIGRTMAX down (programs that use real-time signals
 * mostly count up from SIGRTMIN; glibc and some runtimes use the first ones),
 * unless one is asked for; so a program's own SIGPROF or SIGALRM handlers and
 * timers are untouched. A program that later installs a handler on that very
 * signal keeps it: st_sigsampler_check, called periodically, moves the timers to
 * another free signal. The handler is installed with SA_RESTART (and runs
 * on the thread's own stack, not an alternate one a program set up for its crash
 * handler); it saves errno, and checks that the signal is one of ours: si_code
 * SI_TIMER and the value this module set (a tag and the timer's slot). Anything
 * else arriving on that signal (a program that later picked the same number and
 * sends it) goes to the handler that was there before, or, if there was none, is
 * counted and dropped (counting is all the default action would not do: it would
 * kill the process).
 *
 * Overruns. A CPU-clock timer is checked at the kernel's tick, so it cannot fire
 * more often than the tick rate (often 250 Hz) however short its period; the
 * expirations it missed are reported by the kernel (si_overrun) and passed to the
 * callback, which may weigh the sample by them, so that the samples of a thread
 * account for all of its CPU time at the rate asked for.
 *
 * Slots. Timers live in a fixed array of ST_SIGTIMER_SLOTS slots owned by the
 * sampler (one process has at most one). Each holds the thread's id, its timer
 * and a pointer the callback gets (the thread's collector state), published with
 * a release store before the timer is armed. A slot is given back only after its
 * timer is deleted (timer_delete waits for no handler, so the callback's pointer
 * must stay valid until the sampler is uninstalled: the caller keeps the states
 * until then).
 *
 * Protocol: install, then arm/disarm from any thread (not from a handler; the
 * caller serialises them), then uninstall once every timer is disarmed. The
 * callback runs in a signal handler on the sampled thread: it must be
 * async-signal-safe. */
#ifndef STRATA_SAMPLING_TIMERS_H
#define STRATA_SAMPLING_TIMERS_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "base/err.h"

#define ST_SIGTIMER_SLOTS 4096

typedef enum {
    ST_SIGCLOCK_CPU = 0,
    ST_SIGCLOCK_WALL = 1,
} st_sigclock_t;

/* Called in the handler on the sampled thread: the slot's `ctx`, the handler's
 * ucontext, and the number of periods this sample stands for (1 + the timer's
 * overruns). */
typedef void (*st_sigsample_fn)(void *ctx, void *ucontext, uint32_t periods);

typedef struct {
    _Atomic(void *) ctx;      /* NULL: free */
    pid_t tid;
    timer_t timer;
    int armed;
} st_sigtimer_t;

typedef struct {
    int signo;
    st_sigclock_t clock;
    uint64_t period_ns;
    st_sigsample_fn fn;
    struct sigaction old;     /* the handler before ours */
    st_sigtimer_t slots[ST_SIGTIMER_SLOTS];
    uint32_t nslots;          /* slots ever used (a high-water mark) */
    _Atomic uint64_t signals; /* our signals handled */
    _Atomic uint64_t foreign; /* other signals on our number: forwarded or dropped */
    int installed;
} st_sigsampler_t;

/* `s` must be zeroed the first time (static storage is) and is reused as
 * uninstall leaves it. Installs the handler on `signo` (0: the highest free real-time signal) for timers on `clock` every `period_ns`. Returns 0, ST_EINVAL
 * (another sampler is installed, signo is not a free real-time signal, none is
 * free) or ST_EIO, with msg saying why. */
int st_sigsampler_install(st_sigsampler_t *s, int signo, st_sigclock_t clock, uint64_t period_ns,
                          st_sigsample_fn fn, st_msg_t *msg);

/* Arms a timer that samples thread `tid` with `ctx` (not NULL). Returns the slot
 * (>= 0) or ST_ENOMEM (no free slot) / ST_EIO (the thread is gone, or the kernel
 * refused), with msg saying why. */
int st_sigsampler_arm(st_sigsampler_t *s, pid_t tid, void *ctx, st_msg_t *msg);

/* Checks that our handler still owns the signal. If the program has put its own
 * there since (sigaction), the program keeps it and every timer moves to another
 * free real-time signal: returns 1 with msg saying so. 0: nothing changed;
 * ST_EIO: no signal is left (every timer is disarmed; msg says why). Signals
 * already sent on the old number reach the program's handler (as many as fire
 * between its sigaction and this check). Not from a handler. */
int st_sigsampler_check(st_sigsampler_t *s, st_msg_t *msg);

/* Deletes slot's timer and frees the slot. A signal already sent may still run
 * the callback with the slot's old ctx (see the note): keep it valid. */
void st_sigsampler_disarm(st_sigsampler_t *s, int slot);

/* Disarms every timer and puts back the previous handler; signals of ours still
 * pending are then delivered to no callback (they are counted as foreign and,
 * with no previous handler, dropped): the handler stays installed as a catcher
 * for those, in a harmless form, until the process ends. */
void st_sigsampler_uninstall(st_sigsampler_t *s);

/* The clock a timer of `clock` runs on for thread `tid`: the thread's own CPU
 * clock (the kernel's encoding of a per-thread scheduler clock, as glibc's
 * pthread_getcpuclockid makes it from a pthread_t), or CLOCK_MONOTONIC. Reading
 * a thread's CPU clock fails once the thread has ended. */
clockid_t st_sigsampler_clockid(pid_t tid, st_sigclock_t clock);

/* The calling thread's kernel id (gettid). */
pid_t st_sigsampler_gettid(void);

#endif
