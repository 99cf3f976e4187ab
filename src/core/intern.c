#include "core/intern.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

void st_intern_init(st_intern_t *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
}

/* Frees the entries and the index; the lock stays. */
static void clear(st_intern_t *t)
{
    uint32_t n = st_intern_count(t);
    for (uint32_t i = 0; i < n; i++)
        free(st_intern_entry(t, i)->string);
    for (int k = 0; k < ST_INTERN_SEGS; k++)
        free(t->segs[k]);
    free(t->slots);
    memset(t->segs, 0, sizeof t->segs);
    atomic_store_explicit(&t->count, 0, memory_order_relaxed);
    t->slots = NULL;
    t->nslots = 0;
}

void st_intern_free(st_intern_t *t)
{
    clear(t);
    pthread_mutex_destroy(&t->lock);
    memset(t, 0, sizeof *t);
}

void st_intern_move(st_intern_t *dst, st_intern_t *src)
{
    clear(dst);
    memcpy(dst->segs, src->segs, sizeof dst->segs);
    atomic_store_explicit(&dst->count, st_intern_count(src), memory_order_relaxed);
    dst->slots = src->slots;
    dst->nslots = src->nslots;
    memset(src->segs, 0, sizeof src->segs);
    atomic_store_explicit(&src->count, 0, memory_order_relaxed);
    src->slots = NULL;
    src->nslots = 0;
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
    uint32_t n = st_intern_count(t);
    for (uint32_t id = 0; id < n; id++) {
        const char *s = st_intern_entry(t, id)->string;
        uint32_t i = (uint32_t)hash_bytes(s, strlen(s)) & (nslots - 1);
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

/* st_intern_tagged with the lock held. */
static int add(st_intern_t *t, const char *s, size_t n, uint32_t tag, uint32_t *id)
{
    if (t->nslots == 0 && rehash(t, 64) < 0)
        return ST_ENOMEM;
    uint32_t count = st_intern_count(t);
    uint64_t h = hash_bytes(s, n);
    uint32_t i = (uint32_t)h & (t->nslots - 1);
    uint32_t same_text = UINT32_MAX; /* an entry with this string and another tag */
    while (t->slots[i]) {
        uint32_t c = t->slots[i] - 1;
        const st_intern_entry_t *cand = st_intern_entry(t, c);
        if (strncmp(cand->string, s, n) == 0 && cand->string[n] == '\0') {
            if (cand->tag == tag) {
                *id = c;
                return 0;
            }
            same_text = c;
        }
        i = (i + 1) & (t->nslots - 1);
    }
    if ((uint64_t)(count + 1) * 2 > t->nslots) {
        if (t->nslots >= (1u << 31) || rehash(t, t->nslots * 2) < 0)
            return ST_ENOMEM;
        i = (uint32_t)h & (t->nslots - 1);
        while (t->slots[i])
            i = (i + 1) & (t->nslots - 1);
    }
    uint64_t v = (uint64_t)count + 64;
    int k = 63 - __builtin_clzll(v) - 6;
    if (k >= ST_INTERN_SEGS)
        return ST_ENOMEM;
    if (!t->segs[k] && !(t->segs[k] = calloc((size_t)64 << k, sizeof *t->segs[k])))
        return ST_ENOMEM;
    char *copy = malloc(n + 1);
    if (!copy)
        return ST_ENOMEM;
    memcpy(copy, s, n);
    copy[n] = '\0';
    st_intern_entry_t *e = st_intern_entry(t, count);
    e->string = copy;
    e->tag = tag;
    atomic_store_explicit(&e->shared, same_text != UINT32_MAX, memory_order_relaxed);
    if (same_text != UINT32_MAX)
        atomic_store_explicit(&st_intern_entry(t, same_text)->shared, 1, memory_order_relaxed);
    t->slots[i] = count + 1;
    atomic_store_explicit(&t->count, count + 1, memory_order_release);
    *id = count;
    return 0;
}

int st_intern_tagged(st_intern_t *t, const char *s, size_t n, uint32_t tag, uint32_t *id)
{
    pthread_mutex_lock(&t->lock);
    int rc = add(t, s, n, tag, id);
    pthread_mutex_unlock(&t->lock);
    return rc;
}
