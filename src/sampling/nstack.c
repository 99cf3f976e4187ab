/* Native stacks in a sampler (nstack.h). */
#define _GNU_SOURCE
#include "sampling/nstack.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/events.h"
#include "sampling/symbols.h"

#define PC_UNKNOWN (ST_NSTACK_IDS - 1) /* the id of an address that found no entry */

int st_nstack_start(st_nstack_t *ns, const char *unwind, char *why_fp, size_t size,
                    st_msg_t *msg)
{
    if (why_fp && size)
        *why_fp = '\0';
    ns->method = ST_UNWIND_FP;
    if (strcmp(unwind, "fp") != 0) {
        st_msg_t why;
        if (st_unwind_libunwind_load(&why) == 0)
            ns->method = ST_UNWIND_LIBUNWIND;
        else if (strcmp(unwind, "libunwind") == 0)
            return st_msg_set(msg, ST_EINVAL, "STRATA_SAMPLING_UNWIND=libunwind: %s", why.text);
        else if (why_fp && size)
            snprintf(why_fp, size, "%s", why.text);
    }
    if (st_addrtab_new(&ns->pcs, ST_NSTACK_BITS) < 0 ||
        !(ns->gens = calloc((size_t)1 << ST_NSTACK_BITS, sizeof *ns->gens))) {
        st_addrtab_free(&ns->pcs);
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    }
    st_nstack_refresh(ns, 0);
    return 0;
}

int st_nstack_refresh(st_nstack_t *ns, int unloaded)
{
    pthread_mutex_lock(&ns->lock);
    int full = st_modules_refresh(&ns->mods) == ST_ERANGE;
    atomic_store_explicit(&ns->gen, ns->mods.gen, memory_order_release);
    pthread_mutex_unlock(&ns->lock);
    if (unloaded && ns->method == ST_UNWIND_LIBUNWIND)
        st_unwind_libunwind_flush();
    return full;
}

/* Whether pc lies in one of the ranges. */
static int in_ranges(uintptr_t pc, const st_range_t *r, int n)
{
    for (int k = 0; k < n; k++)
        if (pc >= r[k].lo && pc < r[k].hi)
            return 1;
    return 0;
}

int st_nstack_walk(st_nstack_t *ns, const void *uc, const st_unwind_thread_t *t, int skip,
                   const st_range_t *stops, int nstops, uint32_t base, uint32_t *ids, int cap,
                   int *stopped)
{
    /* on the interrupted thread's stack: no more than a sample holds (and the
     * frames skipped) */
    uintptr_t pcs[ST_EV_MAX_FRAMES + 2];
    int want = cap + skip;
    if (want > (int)(sizeof pcs / sizeof pcs[0]))
        want = (int)(sizeof pcs / sizeof pcs[0]);
    int got = st_unwind(uc, t, ns->method, pcs, want);
    if (got < 0)
        return got;
    uint32_t gen = atomic_load_explicit(&ns->gen, memory_order_acquire);
    int n = 0;
    if (stopped)
        *stopped = 0;
    for (int i = skip < got ? skip : got; i < got && n < cap; i++) {
        if (in_ranges(pcs[i], stops, nstops)) {
            if (stopped)
                *stopped = 1;
            break;
        }
        int claimed = 0;
        uint32_t id = pcs[i] ? st_addrtab_id(&ns->pcs, pcs[i], &claimed) : ST_ADDRTAB_NONE;
        if (claimed)
            atomic_store_explicit(&ns->gens[id], gen, memory_order_relaxed);
        ids[n++] = base + (id == ST_ADDRTAB_NONE ? PC_UNKNOWN : id);
    }
    return n;
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
static int frame_label(st_intern_t *names, st_loctab_t *locs, const st_symframe_t *f,
                       uint32_t *label)
{
    const char *file = f->file ? f->file : f->module ? f->module : "~";
    uint32_t loc;
    if (st_loctab_add(locs, file, 0, f->function, &loc) < 0 ||
        st_intern_tagged(names, f->function, strlen(f->function), loc, label) < 0 ||
        st_loctab_set_id(locs, *label, loc) < 0)
        return ST_ENOMEM;
    return 0;
}

/* Appends one label to the growing array *a (*n of *cap). */
static int push(uint32_t **a, uint32_t *n, uint32_t *cap, uint32_t label)
{
    if (*n == *cap) {
        uint32_t *more = realloc(*a, (size_t)(*cap *= 2) * sizeof *more);
        if (!more)
            return ST_ENOMEM;
        *a = more;
    }
    (*a)[(*n)++] = label;
    return 0;
}

int st_nstack_chains(st_nstack_t *ns, st_intern_t *names, st_loctab_t *locs, uint32_t **first_out,
                     uint32_t **chain_out, uint32_t *nchain)
{
    /* the chains in claim order first (start[id], count[id]), then in id order */
    uint32_t *start = calloc(ST_NSTACK_IDS, sizeof *start);
    uint32_t *count = calloc(ST_NSTACK_IDS, sizeof *count);
    uint32_t cap = 4096, n = 0;
    uint32_t *labels = malloc(cap * sizeof *labels);
    st_symbols_t *sym = st_symbols_new(&ns->mods, 0);
    int rc = start && count && labels && sym ? 0 : ST_ENOMEM;
    const char *own = own_object();
    uint32_t claimed = st_addrtab_count(&ns->pcs);
    for (uint32_t k = 0; rc == 0 && k < claimed; k++) {
        uint32_t id = st_addrtab_claimed(&ns->pcs, k);
        if (id == ST_ADDRTAB_NONE)
            continue;
        uintptr_t pc = st_addrtab_key(&ns->pcs, id);
        const st_symframe_t *fr;
        int nf = st_symbols_resolve(sym, pc, atomic_load(&ns->gens[id]), &fr);
        if (nf < 0) {
            rc = nf;
            break;
        }
        if (own && fr[0].module && strcmp(fr[0].module, own) == 0 &&
            !(pc >= ns->keep_lo && pc < ns->keep_hi))
            continue; /* strata's own frames: left out */
        start[id] = n;
        count[id] = (uint32_t)nf;
        for (int j = nf - 1; j >= 0 && rc == 0; j--) {
            uint32_t label;
            rc = frame_label(names, locs, &fr[j], &label);
            if (rc == 0)
                rc = push(&labels, &n, &cap, label);
        }
    }
    uint32_t unknown;
    if (rc == 0 && (rc = st_intern_id(names, "<unknown>", 9, &unknown)) == 0) {
        start[PC_UNKNOWN] = n;
        count[PC_UNKNOWN] = 1;
        rc = push(&labels, &n, &cap, unknown);
    }
    uint32_t *first = rc == 0 ? malloc(((size_t)ST_NSTACK_IDS + 1) * sizeof *first) : NULL;
    uint32_t *chain = rc == 0 ? malloc((n ? n : 1) * sizeof *chain) : NULL;
    if (rc == 0 && (!first || !chain))
        rc = ST_ENOMEM;
    if (rc == 0) {
        uint32_t at = 0;
        for (uint32_t id = 0; id < ST_NSTACK_IDS; id++) {
            first[id] = at;
            for (uint32_t j = 0; j < count[id]; j++)
                chain[at++] = labels[start[id] + j];
        }
        first[ST_NSTACK_IDS] = at;
        *first_out = first;
        *chain_out = chain;
        *nchain = at;
    } else {
        free(first);
        free(chain);
    }
    if (sym)
        st_symbols_free(sym);
    free(labels);
    free(count);
    free(start);
    return rc;
}

void st_nstack_end(st_nstack_t *ns)
{
    st_addrtab_free(&ns->pcs);
    free((void *)ns->gens);
    ns->gens = NULL;
    pthread_mutex_lock(&ns->lock);
    st_modules_free(&ns->mods);
    atomic_store(&ns->gen, 0);
    pthread_mutex_unlock(&ns->lock);
}
