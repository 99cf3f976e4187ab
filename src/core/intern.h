/* String interning: each distinct string gets a small integer id, so the call tree
 * compares and hashes labels as integers and formats them only at the end.
 *
 * Ids are dense (0, 1, 2, ...) and stable for the table's life. Not thread-safe:
 * the Python collector calls it with the GIL held. */
#ifndef STRATA_CORE_INTERN_H
#define STRATA_CORE_INTERN_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char **strings;     /* id -> string, owned */
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

/* The string of an id; owned by the table. */
static inline const char *st_intern_str(const st_intern_t *t, uint32_t id)
{
    return id < t->count ? t->strings[id] : "";
}

#endif
