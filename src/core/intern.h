/* String interning: each distinct string gets a small integer id, so the call tree
 * compares and hashes labels as integers and formats them only at the end.
 *
 * An entry may carry a tag: then its identity is (string, tag), and the same
 * string with two tags gets two ids. The label table uses it to keep functions
 * apart that share a display text: a label is its text and the function it names
 * (its location in core/loctab.h: Python code as (file, first line, qualified
 * name), a C function as cProfile names it, or no location for a plain text
 * label), so two modules' `work()` are two labels, two call-tree nodes, and two
 * functions in every output. Entries whose string another entry shares are
 * marked `shared`, so that writers can tell them apart when they print names
 * (model/names.h).
 *
 * Ids are dense (0, 1, 2, ...) and stable for the table's life. Not thread-safe:
 * the Python collector calls it with the GIL held. */
#ifndef STRATA_CORE_INTERN_H
#define STRATA_CORE_INTERN_H

#include <stddef.h>
#include <stdint.h>

#define ST_INTERN_NOTAG UINT32_MAX

typedef struct {
    char **strings;     /* id -> string, owned */
    uint32_t *tags;     /* id -> tag (ST_INTERN_NOTAG: none) */
    uint8_t *shared;    /* id -> 1 when another id has the same string */
    uint32_t count;
    uint32_t cap;
    uint32_t *slots;    /* open addressing: id + 1, 0 = empty */
    uint32_t nslots;    /* power of two */
} st_intern_t;

void st_intern_init(st_intern_t *t);
void st_intern_free(st_intern_t *t);

/* The id of s (n bytes, need not be NUL-terminated), adding a copy if new.
 * Returns 0 and sets *id, or ST_ENOMEM. */
int st_intern_id(st_intern_t *t, const char *s, size_t n, uint32_t *id);

/* The id of (s, tag), adding it if new: the same string with another tag is
 * another entry (and both are then marked shared). Returns 0 or ST_ENOMEM. */
int st_intern_tagged(st_intern_t *t, const char *s, size_t n, uint32_t tag, uint32_t *id);

/* The tag of an id (ST_INTERN_NOTAG: none). */
static inline uint32_t st_intern_tag(const st_intern_t *t, uint32_t id)
{
    return id < t->count ? t->tags[id] : ST_INTERN_NOTAG;
}

/* 1 when another entry has the same string as id (with another tag). */
static inline int st_intern_shared(const st_intern_t *t, uint32_t id)
{
    return id < t->count && t->shared[id];
}

/* The string of an id; owned by the table. */
static inline const char *st_intern_str(const st_intern_t *t, uint32_t id)
{
    return id < t->count ? t->strings[id] : "";
}

#endif
