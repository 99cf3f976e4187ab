/* A map from 64-bit keys to 32-bit values: open addressing, linear probing, grown
 * at half full. For the report side (node ids in a file, caller -> callee edges),
 * not the hot path. Key UINT64_MAX is reserved. Not thread-safe. */
#ifndef STRATA_BASE_U64MAP_H
#define STRATA_BASE_U64MAP_H

#include <stdint.h>

typedef struct {
    uint64_t *keys;   /* key + 1, 0 = empty */
    uint32_t *vals;
    uint32_t slots, count;
} st_u64map_t;

/* Zero-initialised is an empty map. */
void st_u64map_free(st_u64map_t *m);

/* Inserts key -> val unless the key is there: returns 0 (inserted), 1 (present:
 * *old is its value, if old is not NULL) or ST_ENOMEM. */
int st_u64map_put(st_u64map_t *m, uint64_t key, uint32_t val, uint32_t *old);

/* The value of key, or UINT32_MAX. */
uint32_t st_u64map_get(const st_u64map_t *m, uint64_t key);

/* Maps keyed by text: the key of text s (FNV-1a, from `seed`; never the reserved
 * key), and the key to try next when the one found belongs to another text. */
uint64_t st_u64map_text_key(const char *s, uint64_t seed);
static inline uint64_t st_u64map_next_key(uint64_t k)
{
    k = k * 31 + 1;
    return k == UINT64_MAX ? 0 : k;
}

#endif
