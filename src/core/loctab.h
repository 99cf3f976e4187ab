/* Where each label's code lives: (file, first line, function name), the key that
 * pstats, callgrind and the call graph group by.
 *
 * Design note. A tree node is keyed by its display label, which may carry
 * decorations (`fib(n=5)[example.py:3]`) and is what the tables show. The tools
 * people already use key a function by its location instead: cProfile's
 * (co_filename, co_firstlineno, co_name), and ('~', 0, '<built-in method sorted>')
 * for a C function. The collector records one location per label when it interns
 * the label (once per code object, never on the hot path); many labels can share
 * one location (every `fib(n=...)` is the function fib), and a label has at most
 * one (the first recorded wins: two functions with the same qualified name in
 * different files share a label, and so a node, unless `--label file` tells them
 * apart).
 *
 * Locations are deduplicated: ids are dense (0, 1, ...) in the order first seen.
 * Not thread-safe (the collector holds the GIL). */
#ifndef STRATA_CORE_LOCTAB_H
#define STRATA_CORE_LOCTAB_H

#include <stddef.h>
#include <stdint.h>

#include "core/intern.h"

#define ST_LOC_NONE UINT32_MAX

typedef struct {
    uint32_t file;   /* id in the table's strings ("~" for C functions) */
    uint32_t name;   /* id in the table's strings */
    int32_t line;    /* first line, 0 for C functions */
} st_loc_t;

typedef struct {
    st_intern_t strings;    /* files and names */
    st_loc_t *locs;
    uint32_t nlocs, caplocs;
    uint32_t *slots;        /* open addressing over locs: id + 1, 0 = empty */
    uint32_t nslots;
    uint32_t *by_label;     /* label id -> location id or ST_LOC_NONE */
    uint32_t nby_label;
} st_loctab_t;

void st_loctab_init(st_loctab_t *t);
void st_loctab_free(st_loctab_t *t);

/* The id of location (file, line, name), added if new. Returns 0 or ST_ENOMEM. */
int st_loctab_add(st_loctab_t *t, const char *file, int32_t line, const char *name,
                  uint32_t *id);

/* Records that `label` is the code at (file, line, name), unless the label has a
 * location already. Returns 0 or ST_ENOMEM. */
int st_loctab_set(st_loctab_t *t, uint32_t label, const char *file, int32_t line,
                  const char *name);

/* Records that `label` is location `loc` (an id of this table). */
int st_loctab_set_id(st_loctab_t *t, uint32_t label, uint32_t loc);

/* The location id of a label, or ST_LOC_NONE. t may be NULL. */
static inline uint32_t st_loctab_of(const st_loctab_t *t, uint32_t label)
{
    return t && label < t->nby_label ? t->by_label[label] : ST_LOC_NONE;
}

static inline const st_loc_t *st_loctab_get(const st_loctab_t *t, uint32_t loc)
{
    return &t->locs[loc];
}

static inline const char *st_loctab_str(const st_loctab_t *t, uint32_t id)
{
    return st_intern_str(&t->strings, id);
}

#endif
