/* Native stacks from a signal handler: the interrupted thread's return addresses,
 * innermost first, from the handler's ucontext. x86-64 only; elsewhere
 * st_unwind_thread_init says "not supported on this architecture" and st_unwind
 * gives no frame.
 *
 * Design note.
 *
 * Two methods, chosen by the caller per call:
 *
 * ST_UNWIND_FP, frame pointers. pcs[0] is the interrupted PC, then the rbp chain:
 * [rbp] is the caller's rbp, [rbp+8] the return address. Every read is bounded
 * so that a corrupt or absent chain (code built without frame pointers keeps
 * anything in rbp) never faults: reads stay inside [interrupted rsp, stack top)
 * of the thread's own stack, whose bounds st_unwind_thread_init records once, on
 * the thread, outside any handler (pthread_getattr_np). Memory between rsp and
 * the stack's top is always mapped, so a read there cannot fault. rbp must be
 * 8-aligned, leave room for its two words, and grow strictly from hop to hop;
 * at most ST_UNWIND_MAX_HOPS hops. An interrupted rsp outside the recorded
 * bounds (a stack of its own: a coroutine, sigaltstack) gives the PC alone.
 * Code without frame pointers: the walk stops at the first check that fails and
 * returns what it found, which may skip frames (rbp then points at the nearest
 * frame-pointer frame further out) but never reads outside the stack.
 * The reads are not instrumented by AddressSanitizer (no_sanitize): the saved
 * rbp and return address slots are never poisoned, but a chain that runs
 * through a frame that ASan moved to its heap "fake stack" would leave the
 * bounds and stop there instead.
 *
 * ST_UNWIND_LIBUNWIND, libunwind (libunwind.so.8 of Debian's libunwind8, loaded
 * with dlopen by st_unwind_libunwind_load, so strata builds and runs without it;
 * the headers of libunwind-dev are needed at build time, else the method is
 * compiled out and the load says so; not libunwind.so.1, LLVM's unwinder). It
 * reads .eh_frame, so it unwinds code built without frame pointers. Findings on
 * its signal safety (libunwind 1.6.2 as Debian builds it, local unwinding,
 * x86-64; read in its source and measured by tests/c/test_unwind.c):
 *   - unw_init_local2(UNW_INIT_SIGNAL_FRAME) takes the handler's ucontext as is
 *     (unw_context_t is ucontext_t on x86-64) and does not subtract 1 from the
 *     first IP; unw_step and unw_get_reg are documented signal-safe for the
 *     local address space.
 *   - The caching policy stays UNW_CACHE_GLOBAL (the default): the shared cache
 *     is taken under a mutex with all signals blocked (sigprocmask), so a thread
 *     holding it can never be interrupted by our handler (no self-deadlock) and
 *     other threads wait only for a lookup. UNW_CACHE_PER_THREAD must NOT be
 *     set: Debian builds libunwind without --enable-per-thread-cache (its TLS is
 *     16 bytes), yet unw_set_caching_policy accepts the policy, and the cache
 *     lookup then uses the shared cache without its lock: a race between
 *     threads. The price of the global policy: two sigprocmask calls per frame,
 *     about 1 us per frame (docs/engine.md).
 *   - The first unwind of a process runs libunwind's one-time init (a lock, a
 *     pipe, a mincore probe): st_unwind_libunwind_load does one. libunwind's
 *     thread-local data (the last validated pages) is reached through
 *     __tls_get_addr, which may allocate on a thread's first access: the first
 *     unwind on each thread is done by st_unwind_thread_init, and st_unwind
 *     uses frame pointers on a thread that has not had it (libunwind_warm).
 *     A thread the sampler never runs on (a Python thread armed from the
 *     sampler's own thread) cannot have it: it is walked by frame pointers,
 *     unless libunwind came with the program (LD_PRELOAD, as `strata python
 *     --native` starts the interpreter): then its thread-local data is in the
 *     static TLS every thread is made with, and no first unwind is needed.
 *   - An IP that misses the cache makes libunwind look its unwind table up with
 *     dl_iterate_phdr (signals blocked around it), which takes glibc's loader
 *     lock, a recursive lock: a thread interrupted while the loader itself
 *     changes the list of objects (inside dlopen or dlclose) could read it half
 *     changed. The caller marks such windows with `in_loader` (e.g. the preload
 *     library around dlopen/dlclose); st_unwind then uses frame pointers.
 *     Its memory pool takes a lock the same way (signals blocked) and grows
 *     with mmap, which is async-signal-safe.
 *   - Memory reads are validated (mincore, then a pipe write) when libunwind is
 *     built with conservative checks, as Debian's is: a garbage context or a
 *     smashed stack gives a wrong or short walk, not a fault (tested with
 *     random contexts); a build without those checks would fault there.
 *   - After a dlclose, unw_flush_cache must run (outside handlers) before the
 *     address range can be reused: st_unwind_libunwind_flush.
 * So with the global policy, warm-up per thread and in_loader, it is safe in a
 * signal handler, though not lock-free: use frame pointers where the code has
 * them, libunwind where it does not.
 *
 * Limits of frame pointers: GCC gives a leaf function that needs no stack no
 * frame at all, even with -fno-omit-frame-pointer; sampled inside such a leaf,
 * the walk goes on from the caller's frame, so the caller of the leaf is
 * missing from that stack (libunwind gets it). Likewise a sample in a
 * function's prologue or epilogue misses one frame.
 * Only the first frame is the exact PC; every other frame is its return address
 * minus 1 (the call site), for both methods, so that symbolisation finds the
 * line of the call and not the next one.
 *
 * Cost, measured by tests/c/test_unwind.c on ~10 frames: see docs/engine.md. */
#ifndef STRATA_SAMPLING_UNWIND_H
#define STRATA_SAMPLING_UNWIND_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "base/err.h"

/* Methods of st_unwind. */
enum {
    ST_UNWIND_FP = 1,          /* frame pointers */
    ST_UNWIND_LIBUNWIND = 2,   /* libunwind, after st_unwind_libunwind_load */
};

/* At most this many rbp hops per unwind. */
#define ST_UNWIND_MAX_HOPS 512

/* What the handler needs about one thread, owned by the caller (one per thread,
 * e.g. in its recorder state) and filled on that thread by
 * st_unwind_thread_init. Zero-initialised: no bounds, every unwind gives the PC
 * alone. */
typedef struct {
    uintptr_t stack_lo, stack_hi;     /* the thread's stack, [lo, hi) */
    int libunwind_warm;               /* the thread's first libunwind unwind done */
    volatile sig_atomic_t in_loader;  /* set by the caller around dlopen/dlclose:
                                         libunwind is not used then */
} st_unwind_thread_t;

/* Records the calling thread's stack bounds into t and, when libunwind is
 * loaded, does the thread's first unwind (its cache). Call on the thread itself,
 * outside any handler, before its first sample. ST_EINVAL with msg set when the
 * bounds cannot be found or the architecture is not x86-64. Thread-safe. */
int st_unwind_thread_init(st_unwind_thread_t *t, st_msg_t *msg);

/* The same for another thread `th` (running or not), from any thread: its stack
 * bounds only; libunwind counts as warm on it when libunwind's thread-local data
 * is static (st_unwind_libunwind_static_tls), else the thread is walked by frame
 * pointers. Outside handlers. */
int st_unwind_thread_init_of(st_unwind_thread_t *t, pthread_t th, st_msg_t *msg);

/* 1 when libunwind was loaded with the program (LD_PRELOAD names it): its
 * thread-local data is then in every thread's static TLS, made with the thread,
 * and no thread needs a first unwind of its own before a handler may use it. */
int st_unwind_libunwind_static_tls(void);

/* Loads libunwind (dlopen) and does a first unwind. Call once per process, outside handlers, before st_unwind_thread_init
 * of the threads that will use it. 0, or ST_EINVAL with msg saying why it is
 * absent (not built in, library missing, a symbol missing). Idempotent; not
 * thread-safe against itself. */
int st_unwind_libunwind_load(st_msg_t *msg);

/* 1 when st_unwind_libunwind_load succeeded. */
int st_unwind_libunwind_loaded(void);

/* Forgets libunwind's cached unwind info (after a dlclose). Outside handlers. */
void st_unwind_libunwind_flush(void);

/* The interrupted thread's stack: up to cap PCs into pcs, innermost first, from
 * the ucontext of a signal handler running on that thread (the third argument
 * of an SA_SIGINFO handler). pcs[0] is the interrupted PC; the others are call
 * sites (return address - 1). Returns the number of frames (0 when uc is NULL),
 * or ST_EINVAL for an unknown method or ST_UNWIND_LIBUNWIND not loaded.
 * Async-signal-safe, errno kept: ST_UNWIND_FP takes no lock and allocates
 * nothing; ST_UNWIND_LIBUNWIND takes libunwind's locks with all signals blocked
 * (see the note), and falls back to frame pointers while t->in_loader is set or
 * before the thread's warm-up. */
int st_unwind(const void *uc, const st_unwind_thread_t *t, int method, uintptr_t *pcs,
              int cap);

#endif
