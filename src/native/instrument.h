/* `strata run -- program`: the call tree of a program built with
 * -finstrument-functions, and the regions of the public API (include/strata.h)
 * (issue 13).
 *
 * Design note. The compiler calls __cyg_profile_func_enter(fn, site) and
 * __cyg_profile_func_exit(fn, site) around every function of the instrumented
 * code; the preload library defines both. Each function address gets an id from
 * a lock-free address table (sampling/addrtab.h) and, the first time it is
 * seen, a label: its name and source file from libdw (or the ELF symbol table
 * and the library; sampling/symbols.h), tagged with that location as the stack
 * sampler tags the functions it names (one label for both), and the filters' verdict (-I/-E/-R on the name, -MI/-ME/-MR on
 * the file or, without one, the library), decided once per address under a
 * lock. From then on an enter is a table lookup and the recorder's enter
 * (st_rec_enter), an exit its exit; a function the filters leave out is not
 * entered, and its exit is skipped the same way, so the tree stays balanced.
 * Regions (strata_push/strata_pop) are entered the same way with a text label,
 * cached by the name's address and checked against its text. The tables stay
 * until the process ends: a hook may still run on another thread after stop. */
#ifndef STRATA_NATIVE_INSTRUMENT_H
#define STRATA_NATIVE_INSTRUMENT_H

#include <stdint.h>

#include "session/collector.h"

/* The collector of instrumented calls and API regions: it times calls (its
 * session's deterministic profile), names threads at their end. */
extern const st_collector_t st_ninstr_collector;

/* Time a thread waits on a lock, as a call of its own under the function that
 * waits: "pthread_mutex_lock (contended)" (the preload library's wrapper tries
 * the lock first and measures only when it is held by another thread) or
 * "pthread_cond_wait" (and its timed form). wait_begin returns 1 when it
 * entered the call (then call wait_end after the wait), 0 when strata does not
 * measure now (not running, or inside one of its own waits). measuring says
 * whether a wait would be measured (a wrapper's fast path). */
enum { ST_NINSTR_MUTEX, ST_NINSTR_COND };
int st_ninstr_wait_begin(int what);
void st_ninstr_wait_end(void);
int st_ninstr_measuring(void);

/* A call of its own named by `text` on the calling thread, closed by
 * st_ninstr_exit_key with the same key (a runtime's kernels and regions:
 * kokkos.c); returns 0 when strata records nothing now. */
int st_ninstr_enter_text(const char *text, const void *key);
void st_ninstr_exit_key(const void *key);

/* `bytes` allocated at `addr` from the site named `site`, charged to the calling
 * thread's innermost call (alloc_bytes, allocs); and its free. */
void st_ninstr_alloc(const char *site, const void *addr, uint64_t bytes);
void st_ninstr_free(const void *addr);

/* 1 once anything was entered (a function, a region, a runtime's kernel). */
int st_ninstr_entered(void);

/* How many marks (strata_mark) and counter values (strata_counter) the program
 * gave: shown on the timeline (trace mode) only. */
void st_ninstr_api_events(uint64_t *marks, uint64_t *counts);

/* The metric that MPI calls' bytes go to (registered by the preload library when
 * the MPI wrappers are loaded: mpi.h). */
void st_ninstr_mpi_metric(uint32_t metric);

/* On a thread the program just started (the preload library's trampoline). */
void st_ninstr_thread_start(void);

#endif
