/* The native stack sampler of `strata sample -- exe` (issue 11), run by the
 * preload library (preload.c) inside the profiled program.
 *
 * Design note. Every thread of the program gets a timer (sampling/stacks.h): the
 * main thread when the session starts (the library's constructor), every other
 * one as it starts, on the thread itself, from the library's pthread_create
 * wrapper (st_nsampler_thread_start: its stack bounds for the frame-pointer
 * walk, libunwind's per-thread warm-up, its timer), until it ends
 * (st_nsampler_thread_end, from a thread-local destructor). The handler unwinds
 * the interrupted thread (sampling/unwind.h: libunwind where it is loaded and
 * warm, else frame pointers; STRATA_SAMPLING_UNWIND) and turns each address into
 * an id through a lock-free table (sampling/addrtab.h), remembering the module
 * generation it was first seen in, so that a library unloaded since, or another
 * loaded at its addresses, still names it right. The module map is refreshed
 * after every dlopen and dlclose (st_nsampler_loader_leave), outside handlers;
 * while a thread is inside the loader its samples use frame pointers.
 *
 * After the run each address is symbolised once (sampling/symbols.h: libdw's
 * function, file and inlined frames, else the ELF symbol table, else
 * module+offset) into a chain of labels, outermost first, which the samples are
 * folded along (st_rec_fold_chains). Frames of strata's own library (the thread
 * trampoline) are left out.
 *
 * exec: the timers are deleted and the thread's pending signal drained before the
 * program's execve (a real-time signal left pending would kill the new image
 * before anything handles it), and armed again if execve fails. fork: the child
 * has no timer (POSIX timers are not inherited) and is not sampled. */
#ifndef STRATA_NATIVE_SAMPLER_H
#define STRATA_NATIVE_SAMPLER_H

#include <signal.h>

#include "session/collector.h"

/* The sampler as a collector: samples every thread the program has or starts. */
extern const st_collector_t st_nsampler_collector;

/* On a thread the program just started, before its start routine. */
void st_nsampler_thread_start(void);

/* Around the dynamic loader (dlopen, dlclose) on the calling thread: while
 * inside, its samples use frame pointers; after, the module map is refreshed
 * (and libunwind's cache flushed after a dlclose). */
void st_nsampler_loader_enter(void);
void st_nsampler_loader_leave(int unloaded);

/* Around a call that waits (nanosleep, poll, select, recv...), wrapped by the
 * preload library: with the wall clock, the signal is held back on the calling
 * thread while it waits, so that the wait is not cut short (EINTR: nanosleep,
 * poll and select are never restarted after a handler, SA_RESTART or not), and
 * the periods that passed are taken as one sample when the wait ends, where it
 * waited. wait_begin returns 1 when it held the signal back (then call wait_end
 * with the same set), 0 otherwise (the CPU clock: a waiting thread gets no
 * signal). */
int st_nsampler_wait_begin(sigset_t *old);
void st_nsampler_wait_end(const sigset_t *old);

/* Around an exec of the process: every timer is deleted and the calling
 * thread's pending signal drained before; when the exec failed, the timers
 * are armed again. */
void st_nsampler_before_exec(void);
void st_nsampler_exec_failed(void);

#endif
