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
 * Ids are dense (0, 1, 2, ...) and stable for the table's life.
 *
 * Threads. Any thread may intern (the Python collector with the GIL held, a native
 * collector from any of the program's threads): adding and looking up take the
 * table's lock, which is the slow path of a collector (it caches the id of what it
 * interned). Reading an id's string, tag or shared mark takes no lock and may run
 * while other threads add: entries live in segments that never move (segment k holds
 * 64 << k entries), an entry is filled before the count that publishes it is stored
 * (release; readers load it with acquire), and an entry's string and tag never change.
 * Not for signal handlers (the lock, malloc). */
#ifndef STRATA_CORE_INTERN_H
#define STRATA_CORE_INTERN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ST_INTERN_NOTAG UINT32_MAX

#define ST_INTERN_SEGS 26 /* 64 * (2^26 - 1) ids at most */

typedef struct {
    char *string;       /* owned */
    uint32_t tag;       /* ST_INTERN_NOTAG: none */
    _Atomic uint8_t shared; /* 1 when another id has the same string */
} st_intern_entry_t;

typedef struct {
    st_intern_entry_t *segs[ST_INTERN_SEGS]; /* segment k: 64 << k entries */
    _Atomic uint32_t count; /* ids published */
    uint32_t *slots;    /* open addressing: id + 1, 0 = empty (under the lock) */
    uint32_t nslots;    /* power of two */
    pthread_mutex_t lock;
} st_intern_t;

/* The entry of an id below the count. */
static inline st_intern_entry_t *st_intern_entry(const st_intern_t *t, uint32_t id)
{
    uint64_t v = (uint64_t)id + 64;
    int k = 63 - __builtin_clzll(v) - 6;
    return &t->segs[k][v - ((uint64_t)64 << k)];
}

/* The number of ids (a snapshot while other threads add). */
static inline uint32_t st_intern_count(const st_intern_t *t)
{
    return atomic_load_explicit(&((st_intern_t *)t)->count, memory_order_acquire);
}

void st_intern_init(st_intern_t *t);
void st_intern_free(st_intern_t *t);

/* Moves src's entries into dst (whose own are freed); src is left empty. Neither
 * may be in use by another thread. */
void st_intern_move(st_intern_t *dst, st_intern_t *src);

/* The id of s (n bytes, need not be NUL-terminated), adding a copy if new.
 * Returns 0 and sets *id, or ST_ENOMEM. */
int st_intern_id(st_intern_t *t, const char *s, size_t n, uint32_t *id);

/* The id of (s, tag), adding it if new: the same string with another tag is
 * another entry (and both are then marked shared). Returns 0 or ST_ENOMEM. */
int st_intern_tagged(st_intern_t *t, const char *s, size_t n, uint32_t tag, uint32_t *id);

/* The tag of an id (ST_INTERN_NOTAG: none). */
static inline uint32_t st_intern_tag(const st_intern_t *t, uint32_t id)
{
    return id < st_intern_count(t) ? st_intern_entry(t, id)->tag : ST_INTERN_NOTAG;
}

/* 1 when another entry has the same string as id (with another tag). */
static inline int st_intern_shared(const st_intern_t *t, uint32_t id)
{
    return id < st_intern_count(t) &&
           atomic_load_explicit(&st_intern_entry(t, id)->shared, memory_order_relaxed);
}

/* The string of an id; owned by the table. */
static inline const char *st_intern_str(const st_intern_t *t, uint32_t id)
{
    return id < st_intern_count(t) ? st_intern_entry(t, id)->string : "";
}

#endif
