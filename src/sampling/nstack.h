/* Native stacks in a sampler (issue 11): addresses from the handler's unwind to
 * ids, and after the run to labels (functions, with the ones inlined there).
 * Shared by `strata sample` (native/sampler.c) and `strata python --sample
 * --native` (python/sampler.c).
 *
 * Design note. In the handler, st_nstack_walk unwinds the interrupted thread
 * (unwind.h: libunwind where loaded and warm on the thread, else frame pointers)
 * and turns each address into an id of a lock-free table (addrtab.h), noting the
 * module generation current when an address is first seen; the ids are offset by
 * the caller's `base`, so that a front end can mix them with ids of its own
 * (Python code objects) in one sample. The map of loaded objects is taken again
 * with st_nstack_refresh after every dlopen and dlclose, outside handlers, and its
 * generation published for them. After the run, st_nstack_chains symbolises every
 * address once (symbols.h) into labels of the session's label table, each tagged
 * with its location (source file, else the module, line 0: a function, not a
 * call site), outermost first: the chains st_rec_fold_chains folds. Frames of
 * strata's own object are left out, but for a range the caller keeps (the preload
 * library's wrappers of waiting calls). */
#ifndef STRATA_SAMPLING_NSTACK_H
#define STRATA_SAMPLING_NSTACK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/err.h"
#include "core/intern.h"
#include "core/loctab.h"
#include "sampling/addrtab.h"
#include "sampling/modules.h"
#include "sampling/unwind.h"

#define ST_NSTACK_BITS 18                 /* 256 Ki distinct addresses */
#define ST_NSTACK_IDS ((1u << ST_NSTACK_BITS) + 1) /* ids, the last for "<unknown>" */

typedef struct {
    st_addrtab_t pcs;
    _Atomic uint32_t *gens;    /* per id: the module generation first seen in */
    st_modules_t mods;         /* under `lock` */
    _Atomic uint32_t gen;      /* mods.gen, published for handlers */
    pthread_mutex_t lock;
    int method;                /* ST_UNWIND_FP or ST_UNWIND_LIBUNWIND */
    uintptr_t keep_lo, keep_hi; /* strata's own frames kept in this range */
} st_nstack_t;

/* Zero-initialised storage with its lock initialised. */
#define ST_NSTACK_INIT {.lock = PTHREAD_MUTEX_INITIALIZER}

/* Sets up the tables and the unwinder `unwind` asks for ("auto": libunwind where
 * it loads, else frame pointers; "fp"; "libunwind": an error without it), and
 * takes the first module map. 0, ST_ENOMEM, or ST_EINVAL with msg saying why;
 * `why_fp` (may be NULL, size bytes) gets why "auto" fell back to frame pointers
 * ("" when it did not). */
int st_nstack_start(st_nstack_t *ns, const char *unwind, char *why_fp, size_t size,
                    st_msg_t *msg);

/* Takes a new map of the loaded objects (after dlopen, dlclose), and flushes
 * libunwind's cache after an unload. Not in a handler; takes the lock. 1 when the
 * map is full (later libraries are not named), else 0. */
int st_nstack_refresh(st_nstack_t *ns, int unloaded);

/* In the handler: the interrupted thread's native frames, innermost first, as
 * ids (base + id) into ids[0..cap). The walk ends before the first frame inside
 * one of the nstops ranges `stops` (the interpreter's eval loop, and its parts
 * that lie elsewhere) and *stopped is set to 1 when it did (may be NULL). `skip` leading frames are
 * dropped (a frame the caller knows is not the program's). Returns the number
 * of ids, or a negative code (no unwinder). Async-signal-safe. */
int st_nstack_walk(st_nstack_t *ns, const void *uc, const st_unwind_thread_t *t, int skip,
                   const st_range_t *stops, int nstops, uint32_t base, uint32_t *ids, int cap,
                   int *stopped);

/* After the run (no handler runs): every address seen as a chain of labels,
 * outermost first, in `labels` (interned in `names`, located in `locs`); the
 * chain of id i (without base) is chain[first[i] .. first[i + 1]), empty for
 * strata's own frames; first has ST_NSTACK_IDS + 1 entries. The caller frees
 * *first and *chain. 0 or ST_ENOMEM. */
int st_nstack_chains(st_nstack_t *ns, st_intern_t *names, st_loctab_t *locs, uint32_t **first,
                     uint32_t **chain, uint32_t *nchain);

/* Frames whose ids were not found room for (the table's neighbourhood full). */
static inline uint64_t st_nstack_unnamed(st_nstack_t *ns)
{
    return atomic_load(&ns->pcs.full);
}

/* Frees the tables (the module map too); ns can start again. */
void st_nstack_end(st_nstack_t *ns);

#endif
