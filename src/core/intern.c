#include "core/intern.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

void st_intern_init(st_intern_t *t) { memset(t, 0, sizeof *t); }

void st_intern_free(st_intern_t *t)
{
    for (uint32_t i = 0; i < t->count; i++)
        free(t->strings[i]);
    free(t->strings);
    free(t->tags);
    free(t->shared);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

static int rehash(st_intern_t *t, uint32_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return ST_ENOMEM;
    for (uint32_t id = 0; id < t->count; id++) {
        uint64_t h = hash_bytes(t->strings[id], strlen(t->strings[id]));
        uint32_t i = (uint32_t)h & (nslots - 1);
        while (slots[i])
            i = (i + 1) & (nslots - 1);
        slots[i] = id + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
}

int st_intern_id(st_intern_t *t, const char *s, size_t n, uint32_t *id)
{
    return st_intern_tagged(t, s, n, ST_INTERN_NOTAG, id);
}

int st_intern_tagged(st_intern_t *t, const char *s, size_t n, uint32_t tag, uint32_t *id)
{
    if (t->nslots == 0 && rehash(t, 64) < 0)
        return ST_ENOMEM;
    uint64_t h = hash_bytes(s, n);
    uint32_t i = (uint32_t)h & (t->nslots - 1);
    uint32_t same_text = UINT32_MAX; /* an entry with this string and another tag */
    while (t->slots[i]) {
        uint32_t c = t->slots[i] - 1;
        const char *cand = t->strings[c];
        if (strncmp(cand, s, n) == 0 && cand[n] == '\0') {
            if (t->tags[c] == tag) {
                *id = c;
                return 0;
            }
            same_text = c;
        }
        i = (i + 1) & (t->nslots - 1);
    }
    if ((uint64_t)(t->count + 1) * 2 > t->nslots) {
        if (rehash(t, t->nslots * 2) < 0)
            return ST_ENOMEM;
        i = (uint32_t)h & (t->nslots - 1);
        while (t->slots[i])
            i = (i + 1) & (t->nslots - 1);
    }
    if (t->count == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 64;
        char **p = realloc(t->strings, cap * sizeof *p);
        if (!p)
            return ST_ENOMEM;
        t->strings = p;
        uint32_t *tags = realloc(t->tags, cap * sizeof *tags);
        if (!tags)
            return ST_ENOMEM;
        t->tags = tags;
        uint8_t *shared = realloc(t->shared, cap);
        if (!shared)
            return ST_ENOMEM;
        t->shared = shared;
        t->cap = cap;
    }
    char *copy = malloc(n + 1);
    if (!copy)
        return ST_ENOMEM;
    memcpy(copy, s, n);
    copy[n] = '\0';
    t->strings[t->count] = copy;
    t->tags[t->count] = tag;
    t->shared[t->count] = same_text != UINT32_MAX;
    if (same_text != UINT32_MAX)
        t->shared[same_text] = 1;
    t->slots[i] = t->count + 1;
    *id = t->count++;
    return 0;
}
