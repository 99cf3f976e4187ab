/* Where each label's code lives: (file, first line, function name, qualified
 * name), the key that pstats, callgrind and the call graph group by.
 *
 * Design note. A label (core/intern.h) is a display text and the function it
 * names, its location here: Python code is (co_filename, co_firstlineno, co_name,
 * co_qualname); a C function is cProfile's ('~', 0, '<built-in method sorted>').
 * The collector adds the location first and interns the label tagged with it
 * (once per code object, never on the hot path), so two functions that share a
 * display text (two modules' `work()`, `re.compile` and `re._compiler.compile`)
 * are two labels and two call-tree nodes. Many labels can share one location
 * (every `fib(n=...)` of --label args is the function fib); a label has exactly
 * one, or none (a plain text label).
 *
 * `name` is what pstats keys by (cProfile's co_name); `qual` the qualified name
 * (co_qualname, "Class.method"), which tells methods of one file apart for people
 * (callgrind). A location made without one has qual == name.
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
    uint32_t qual;   /* id in the table's strings: the qualified name */
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

/* The id of location (file, line, name), added if new (its qualified name is
 * `name`). Returns 0 or ST_ENOMEM. */
int st_loctab_add(st_loctab_t *t, const char *file, int32_t line, const char *name,
                  uint32_t *id);

/* The same with a qualified name (NULL: name). */
int st_loctab_add_qual(st_loctab_t *t, const char *file, int32_t line, const char *name,
                       const char *qual, uint32_t *id);

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
