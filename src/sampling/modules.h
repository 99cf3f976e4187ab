/* The loaded objects of the process (executable, shared libraries), snapshotted
 * with dl_iterate_phdr, so that sampled addresses can be symbolised after the
 * run, also in libraries unloaded since.
 *
 * Design note: generations. Every st_modules_refresh is one generation (1, 2,
 * ...; m->gen is the latest). An entry is one mapping of one file: the same path
 * at the same load bias seen by consecutive refreshes stays one entry, whose
 * [first_gen, last_gen] grows; a library no longer listed keeps its entry
 * (loaded = 0) with its last generation, and a library loaded again, or another
 * one at the same addresses, gets a new entry. Entries are never removed, so
 * indices stay valid. Refresh after each dlopen and dlclose (outside handlers);
 * a sampler that stores the generation current when each sample was taken
 * (its handler reads a copy of m->gen that the sampler publishes atomically
 * after each refresh: the map itself is not for handlers) lets
 * st_modules_find pick the right entry when ranges were reused:
 *   - with gen != 0: the entry whose range holds pc and that was listed in
 *     generation gen (first_gen <= gen <= last_gen);
 *   - with gen == 0 (unknown) or no such entry: the newest entry holding pc.
 * A sample taken between a dlopen and the refresh after it has the previous
 * generation, and falls back to the newest holder. Bounded: at most
 * ST_MODULES_MAX entries over the whole run. Not thread-safe; never in a
 * signal handler. */
#ifndef STRATA_SAMPLING_MODULES_H
#define STRATA_SAMPLING_MODULES_H

#include <stdint.h>

#include "base/err.h"

#define ST_MODULES_MAX 4096
#define ST_MODULE_MAX_RANGES 4
#define ST_MODULE_BUILD_ID_MAX 32

/* One executable segment, absolute addresses [lo, hi). */
typedef struct {
    uintptr_t lo, hi;
} st_range_t;

/* One loaded object, as a refresh saw it. */
typedef struct {
    char *path;            /* the file ("/proc/self/exe" resolved for the executable);
                              a name without a file ("linux-vdso.so.1") as given */
    uintptr_t bias;        /* load bias: file virtual address = address - bias */
    int nranges;
    st_range_t ranges[ST_MODULE_MAX_RANGES];
    unsigned char build_id[ST_MODULE_BUILD_ID_MAX];
    int build_id_len;      /* 0: none */
    uint32_t first_gen, last_gen;
    int loaded;            /* listed by the latest refresh */
} st_module_t;

typedef struct {
    st_module_t *mods;     /* count entries, in the order first seen */
    int count, alloc;
    uint32_t gen;          /* the latest refresh's generation; 0 before the first */
} st_modules_t;

/* Zero-initialised is an empty map; st_modules_free empties it. */
void st_modules_free(st_modules_t *m);

/* Takes a new snapshot (one generation more). 0, ST_ENOMEM, or ST_ERANGE past
 * ST_MODULES_MAX entries (the map then holds what fitted). */
int st_modules_refresh(st_modules_t *m);

/* The index of the entry holding pc in generation gen (0: any; see the note),
 * or -1. */
int st_modules_find(const st_modules_t *m, uintptr_t pc, uint32_t gen);

#endif
