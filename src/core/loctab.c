#include "core/loctab.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

void st_loctab_init(st_loctab_t *t)
{
    memset(t, 0, sizeof *t);
    st_intern_init(&t->strings);
}

void st_loctab_free(st_loctab_t *t)
{
    st_intern_free(&t->strings);
    free(t->locs);
    free(t->slots);
    free(t->by_label);
    memset(t, 0, sizeof *t);
}

static uint32_t loc_hash(const st_loc_t *l)
{
    uint64_t k = ((uint64_t)l->file << 32) ^ l->name ^ ((uint64_t)(uint32_t)l->line << 17) ^
                 ((uint64_t)l->qual << 41);
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdu;
    k ^= k >> 33;
    return (uint32_t)k;
}

static int rehash(st_loctab_t *t, uint32_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return ST_ENOMEM;
    for (uint32_t id = 0; id < t->nlocs; id++) {
        uint32_t i = loc_hash(&t->locs[id]) & (nslots - 1);
        while (slots[i])
            i = (i + 1) & (nslots - 1);
        slots[i] = id + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
}

int st_loctab_add(st_loctab_t *t, const char *file, int32_t line, const char *name, uint32_t *id)
{
    return st_loctab_add_qual(t, file, line, name, NULL, id);
}

int st_loctab_add_qual(st_loctab_t *t, const char *file, int32_t line, const char *name,
                       const char *qual, uint32_t *id)
{
    st_loc_t l = {0, 0, 0, line};
    if (st_intern_id(&t->strings, file, strlen(file), &l.file) < 0 ||
        st_intern_id(&t->strings, name, strlen(name), &l.name) < 0)
        return ST_ENOMEM;
    l.qual = l.name;
    if (qual && st_intern_id(&t->strings, qual, strlen(qual), &l.qual) < 0)
        return ST_ENOMEM;
    if (t->nslots == 0 && rehash(t, 64) < 0)
        return ST_ENOMEM;
    uint32_t i = loc_hash(&l) & (t->nslots - 1);
    while (t->slots[i]) {
        const st_loc_t *c = &t->locs[t->slots[i] - 1];
        if (c->file == l.file && c->name == l.name && c->line == l.line && c->qual == l.qual) {
            *id = t->slots[i] - 1;
            return 0;
        }
        i = (i + 1) & (t->nslots - 1);
    }
    if ((uint64_t)(t->nlocs + 1) * 2 > t->nslots) {
        if (rehash(t, t->nslots * 2) < 0)
            return ST_ENOMEM;
        i = loc_hash(&l) & (t->nslots - 1);
        while (t->slots[i])
            i = (i + 1) & (t->nslots - 1);
    }
    if (t->nlocs == t->caplocs) {
        uint32_t cap = t->caplocs ? t->caplocs * 2 : 64;
        st_loc_t *p = realloc(t->locs, cap * sizeof *p);
        if (!p)
            return ST_ENOMEM;
        t->locs = p;
        t->caplocs = cap;
    }
    t->locs[t->nlocs] = l;
    t->slots[i] = t->nlocs + 1;
    *id = t->nlocs++;
    return 0;
}

int st_loctab_set_id(st_loctab_t *t, uint32_t label, uint32_t loc)
{
    if (label == UINT32_MAX)
        return 0;
    if (label >= t->nby_label) {
        if (label >= (1u << 30))
            return ST_ENOMEM;
        uint32_t n = t->nby_label ? t->nby_label : 64;
        while (n <= label)
            n *= 2;
        uint32_t *p = realloc(t->by_label, (size_t)n * sizeof *p);
        if (!p)
            return ST_ENOMEM;
        for (uint32_t i = t->nby_label; i < n; i++)
            p[i] = ST_LOC_NONE;
        t->by_label = p;
        t->nby_label = n;
    }
    if (t->by_label[label] == ST_LOC_NONE)
        t->by_label[label] = loc;
    return 0;
}

int st_loctab_set(st_loctab_t *t, uint32_t label, const char *file, int32_t line,
                  const char *name)
{
    if (st_loctab_of(t, label) != ST_LOC_NONE)
        return 0;
    uint32_t loc;
    int rc = st_loctab_add(t, file, line, name, &loc);
    return rc < 0 ? rc : st_loctab_set_id(t, label, loc);
}
