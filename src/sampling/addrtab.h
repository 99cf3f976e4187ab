/* Addresses seen by signal handlers -> small ids, lock-free (issue 11).
 *
 * Design note. A stack sampler's handler meets addresses (a Python code object,
 * a native return address) that it must record compactly and cannot name: it
 * turns each into an id, the index of its entry in a fixed open-addressing
 * table, claiming a free entry with one compare-and-swap when the address is
 * new. Claimed entries are also listed in the order claimed (`order`, index + 1,
 * 0 while a claim has not written it yet), so that the end of the run visits
 * only those and never touches the pages of a large table that were never used
 * (the arrays are calloc'd: the kernel gives zero pages on first touch). The
 * table never grows or frees an entry while handlers run: a full neighbourhood
 * (ST_ADDRTAB_PROBES entries) gives ST_ADDRTAB_NONE, counted in `full`. A
 * front end may keep arrays of its own indexed by id (what each entry names).
 *
 * Threads: st_addrtab_id and st_addrtab_find are async-signal-safe and may run
 * in any thread at once (atomic loads, one CAS); st_addrtab_new, _clear and
 * _free only while no handler can run. */
#ifndef STRATA_SAMPLING_ADDRTAB_H
#define STRATA_SAMPLING_ADDRTAB_H

#include <stdatomic.h>
#include <stdint.h>

#define ST_ADDRTAB_PROBES 64
#define ST_ADDRTAB_NONE UINT32_MAX

typedef struct {
    _Atomic uintptr_t *keys;   /* 0: free */
    _Atomic uint32_t *order;   /* entry + 1 in the order claimed */
    _Atomic uint32_t nclaimed;
    _Atomic uint64_t full;     /* lookups that found no entry */
    uint32_t bits, size;
} st_addrtab_t;

/* A table of 1 << bits entries (address 0 is never a key). 0 or ST_ENOMEM. */
int st_addrtab_new(st_addrtab_t *t, unsigned bits);
void st_addrtab_free(st_addrtab_t *t);

static inline uint32_t st_addrtab_hash(const st_addrtab_t *t, uintptr_t key)
{
    uint64_t x = (uint64_t)key;
    x *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(x >> (64 - t->bits));
}

/* The id of `key` (not 0), claiming an entry if it has none; ST_ADDRTAB_NONE
 * when its neighbourhood is full. *claimed (may be NULL) is set to 1 when this
 * call claimed it. Async-signal-safe. */
uint32_t st_addrtab_id(st_addrtab_t *t, uintptr_t key, int *claimed);

/* The id of `key` or ST_ADDRTAB_NONE; claims nothing. Async-signal-safe. */
uint32_t st_addrtab_find(const st_addrtab_t *t, uintptr_t key);

/* Entries claimed (some of the last may not be listed in `order` yet while
 * handlers run). */
static inline uint32_t st_addrtab_count(const st_addrtab_t *t)
{
    uint32_t n = atomic_load_explicit(&((st_addrtab_t *)t)->nclaimed, memory_order_acquire);
    return n < t->size ? n : t->size;
}

/* The id of the k-th entry claimed, or ST_ADDRTAB_NONE while its claim has not
 * listed it yet. */
static inline uint32_t st_addrtab_claimed(const st_addrtab_t *t, uint32_t k)
{
    uint32_t v = atomic_load_explicit(&((st_addrtab_t *)t)->order[k], memory_order_acquire);
    return v ? v - 1 : ST_ADDRTAB_NONE;
}

static inline uintptr_t st_addrtab_key(const st_addrtab_t *t, uint32_t id)
{
    return atomic_load_explicit(&((st_addrtab_t *)t)->keys[id], memory_order_acquire);
}

/* Sets entry id's key (a front end retiring an entry: a tombstone value that no
 * lookup will ask for). Not while a handler may claim the same entry. */
static inline void st_addrtab_set_key(st_addrtab_t *t, uint32_t id, uintptr_t key)
{
    atomic_store_explicit(&t->keys[id], key, memory_order_release);
}

/* Empties the claimed entries for another run (touching only those). */
void st_addrtab_clear(st_addrtab_t *t);

#endif
