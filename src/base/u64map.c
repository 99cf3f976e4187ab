#include "base/u64map.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

static uint32_t hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdu;
    k ^= k >> 33;
    return (uint32_t)k;
}

void st_u64map_free(st_u64map_t *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static int grow(st_u64map_t *m)
{
    uint32_t slots = m->slots ? m->slots * 2 : 1024;
    uint64_t *keys = calloc(slots, sizeof *keys);
    uint32_t *vals = malloc(slots * sizeof *vals);
    if (!keys || !vals || slots < m->slots) {
        free(keys);
        free(vals);
        return ST_ENOMEM;
    }
    for (uint32_t i = 0; i < m->slots; i++) {
        if (!m->keys[i])
            continue;
        uint32_t j = hash(m->keys[i]) & (slots - 1);
        while (keys[j])
            j = (j + 1) & (slots - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->slots = slots;
    return 0;
}

int st_u64map_put(st_u64map_t *m, uint64_t key, uint32_t val, uint32_t *old)
{
    if ((uint64_t)(m->count + 1) * 2 > m->slots && grow(m) < 0)
        return ST_ENOMEM;
    uint64_t k = key + 1;
    uint32_t j = hash(k) & (m->slots - 1);
    while (m->keys[j]) {
        if (m->keys[j] == k) {
            if (old)
                *old = m->vals[j];
            return 1;
        }
        j = (j + 1) & (m->slots - 1);
    }
    m->keys[j] = k;
    m->vals[j] = val;
    m->count++;
    return 0;
}

uint32_t st_u64map_get(const st_u64map_t *m, uint64_t key)
{
    if (!m->slots)
        return UINT32_MAX;
    uint64_t k = key + 1;
    uint32_t j = hash(k) & (m->slots - 1);
    while (m->keys[j]) {
        if (m->keys[j] == k)
            return m->vals[j];
        j = (j + 1) & (m->slots - 1);
    }
    return UINT32_MAX;
}

uint64_t st_u64map_text_key(const char *s, uint64_t seed)
{
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h == UINT64_MAX ? 0 : h;
}
