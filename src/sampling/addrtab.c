/* Addresses -> ids for signal handlers (addrtab.h). */
#include "sampling/addrtab.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

int st_addrtab_new(st_addrtab_t *t, unsigned bits)
{
    memset(t, 0, sizeof *t);
    t->bits = bits;
    t->size = 1u << bits;
    t->keys = calloc(t->size, sizeof *t->keys);
    t->order = calloc(t->size, sizeof *t->order);
    if (!t->keys || !t->order) {
        st_addrtab_free(t);
        return ST_ENOMEM;
    }
    return 0;
}

void st_addrtab_free(st_addrtab_t *t)
{
    free((void *)t->keys);
    free((void *)t->order);
    memset(t, 0, sizeof *t);
}

uint32_t st_addrtab_id(st_addrtab_t *t, uintptr_t key, int *claimed)
{
    uint32_t mask = t->size - 1, h = st_addrtab_hash(t, key);
    for (int probe = 0; probe < ST_ADDRTAB_PROBES; probe++, h = (h + 1) & mask) {
        uintptr_t k = atomic_load_explicit(&t->keys[h], memory_order_acquire);
        if (k == key)
            return h;
        if (k == 0) {
            if (atomic_compare_exchange_strong(&t->keys[h], &k, key)) {
                uint32_t at = atomic_fetch_add(&t->nclaimed, 1);
                atomic_store_explicit(&t->order[at], h + 1, memory_order_release);
                if (claimed)
                    *claimed = 1;
                return h;
            }
            if (k == key)
                return h;
        }
    }
    atomic_fetch_add_explicit(&t->full, 1, memory_order_relaxed);
    return ST_ADDRTAB_NONE;
}

uint32_t st_addrtab_find(const st_addrtab_t *t, uintptr_t key)
{
    uint32_t mask = t->size - 1, h = st_addrtab_hash(t, key);
    for (int probe = 0; probe < ST_ADDRTAB_PROBES; probe++, h = (h + 1) & mask) {
        uintptr_t k = atomic_load_explicit(&((st_addrtab_t *)t)->keys[h], memory_order_acquire);
        if (k == key)
            return h;
        if (k == 0)
            return ST_ADDRTAB_NONE;
    }
    return ST_ADDRTAB_NONE;
}

void st_addrtab_clear(st_addrtab_t *t)
{
    uint32_t n = st_addrtab_count(t);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t id = st_addrtab_claimed(t, k);
        if (id != ST_ADDRTAB_NONE)
            atomic_store(&t->keys[id], 0);
        atomic_store(&t->order[k], 0);
    }
    atomic_store(&t->nclaimed, 0);
    atomic_store(&t->full, 0);
}
