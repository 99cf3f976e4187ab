/* A thread's timeline: every recorded call's begin and end, with its tick time.
 *
 * Design note. The hot path appends a 16-byte event (ticks, label, kind) to the
 * current chunk of the thread's buffer: a compare and three stores, no lock, no
 * clock of its own (the collector passes the tick it already read for the call
 * tree). Chunks hold ST_TRACE_CHUNK_EVENTS events (fewer, down to
 * ST_TRACE_MIN_CHUNK_EVENTS, when the budget runs low, so that many threads can each
 * hold one); taking a new one is the slow path, and the only place the threads meet:
 * they draw chunks from one shared byte budget (an atomic counter),
 * STRATA_TRACE_BUFFER_SIZE.
 *
 * When the budget is spent, the fill policy decides:
 *   discard: no new call is recorded (each is counted in `dropped`), but the ends of
 *            calls already begun are: they go to a small reserve sized for the
 *            deepest nesting recorded, so no slice is left open by a drop;
 *   flush:   every full chunk is written to the spill file (one for all threads, in
 *            the results folder, each thread writing at offsets it reserves
 *            atomically and remembering where its events went) and reused, so memory
 *            stays at one chunk per thread and nothing is lost; the file is read back
 *            when the trace is written.
 *
 * A thread that has finished gives its memory back (st_trace_finish): under flush its
 * events go to the spill file and its chunks return to the budget; under discard its
 * last chunk shrinks to the events it holds and the rest returns to the budget. So
 * short-lived threads do not each keep a chunk: a program may run any number of them
 * and lose nothing under flush; what a finished thread keeps is its events (on disk
 * under flush) and a few bytes of bookkeeping.
 * Calls nested deeper than `max_depth` are not recorded either (`too_deep`): the
 * Perfetto UI drops slices deeper than 512.
 *
 * Writers read the events back in order with st_trace_next(). A trace belongs to
 * one thread; nothing here is thread-safe except the shared budget. */
#ifndef STRATA_CORE_TRACE_H
#define STRATA_CORE_TRACE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ST_TRACE_CHUNK_EVENTS 4096
#define ST_TRACE_MIN_CHUNK_EVENTS 64

enum { ST_TEV_BEGIN = 1, ST_TEV_END = 2 };

typedef struct {
    uint64_t ticks;
    uint32_t label;  /* interned label (begins) */
    uint32_t kind;   /* ST_TEV_BEGIN / ST_TEV_END */
} st_tevent_t;

typedef struct st_tchunk {
    struct st_tchunk *next;
    uint32_t cap;                 /* events it can hold */
    uint32_t n;                   /* events it holds, once another chunk follows it */
    uint64_t mapped;              /* 1: its own mapping (munmap), 0: malloc'd */
    st_tevent_t ev[];
} st_tchunk_t;

/* The budget a chunk of `events` events takes. */
#define ST_TRACE_CHUNK_BYTES(events) (sizeof(st_tchunk_t) + (size_t)(events) * sizeof(st_tevent_t))

/* Where a run of a thread's events went in the spill file. */
typedef struct {
    uint64_t offset;              /* bytes */
    uint64_t n;                   /* events */
} st_trace_extent_t;

enum { ST_TRACE_DISCARD = 0, ST_TRACE_FLUSH = 1 };

/* What all threads' timelines share. */
typedef struct {
    _Atomic int64_t bytes_left;   /* budget for chunks not yet taken */
    int policy;                   /* ST_TRACE_DISCARD or ST_TRACE_FLUSH */
    uint32_t max_depth;
    const char *spill_dir;        /* flush: where the spill file goes; not owned */
    long pid;                     /* the process that may spill (not a forked child) */
    _Atomic int spill_fd;         /* the spill file, -1 until first needed */
    _Atomic uint64_t spill_end;   /* bytes reserved in it so far */
} st_trace_shared_t;

typedef struct {
    st_tevent_t *cur, *end;       /* the append window in the tail chunk */
    st_tchunk_t *head, *tail;
    st_trace_shared_t *shared;
    st_tevent_t *reserve;         /* ends recorded after the budget ran out */
    uint32_t nreserve, capreserve;
    uint32_t depth;               /* recorded begins not yet ended */
    int full;                     /* discard: the budget is spent */
    st_trace_extent_t *extents;   /* flush: where its spilled events are, in order */
    uint32_t nextents, capextents;
    uint64_t spilled;             /* events in the spill file */
    uint64_t dropped;             /* calls not recorded: buffer full */
    uint64_t too_deep;            /* calls not recorded: deeper than max_depth */
    int failed;                   /* a spill write failed (then like discard) */
    int spill_errno;              /* why it failed (errno; 0 in a forked child) */
    uint32_t index;               /* the thread's number, for the spill file name */
} st_trace_t;

/* Sets up the shared part: budget in bytes, policy, deepest recorded nesting. */
void st_trace_shared_init(st_trace_shared_t *sh, uint64_t budget, int policy, uint32_t max_depth,
                          const char *spill_dir);
/* Closes the spill file (after every trace of it has been read or freed). */
void st_trace_shared_free(st_trace_shared_t *sh);

/* An empty timeline for thread `index`. Returns 0 or ST_ENOMEM. */
int st_trace_init(st_trace_t *t, st_trace_shared_t *sh, uint32_t index);
void st_trace_free(st_trace_t *t);

/* Slow path of begin/end: a new chunk (or spill); -1 when nothing can be had. */
int st_trace_grow(st_trace_t *t);

/* The thread has finished: its memory goes back (see above). Recording may go on
 * afterwards (it takes a chunk again). Not signal-safe; only the thread's owner, or
 * the code that ends the thread, may call it. */
void st_trace_finish(st_trace_t *t);

/* Records the begin of a call of `label` at `ticks`; returns 1 if recorded (its end
 * must then be recorded with st_trace_end), 0 if not (dropped or too deep). */
static inline int st_trace_begin(st_trace_t *t, uint32_t label, uint64_t ticks)
{
    if (t->depth >= t->shared->max_depth) {
        t->too_deep++;
        return 0;
    }
    if (__builtin_expect(t->cur == t->end, 0) && st_trace_grow(t) < 0) {
        t->dropped++;
        return 0;
    }
    st_tevent_t *e = t->cur++;
    e->ticks = ticks;
    e->label = label;
    e->kind = ST_TEV_BEGIN;
    t->depth++;
    return 1;
}

/* Records the end of the innermost recorded call. Never fails: after the budget is
 * spent, ends go to the reserve. */
static inline void st_trace_end(st_trace_t *t, uint64_t ticks)
{
    st_tevent_t *e;
    if (__builtin_expect(t->cur == t->end, 0) && st_trace_grow(t) < 0)
        e = &t->reserve[t->nreserve++]; /* a begin was recorded: the reserve exists */
    else
        e = t->cur++;
    e->ticks = ticks;
    e->label = 0;
    e->kind = ST_TEV_END;
    t->depth--;
}

/* Reading back, in order: spill file, chunks, reserve. */
typedef struct {
    const st_trace_t *t;
    int stage;                    /* 0 spill file, 1 chunks, 2 reserve, 3 done */
    uint32_t extent;              /* the extent being read */
    uint64_t spill_pos;           /* events read of it */
    st_tevent_t spill_buf[256];
    size_t spill_n, spill_i;
    const st_tchunk_t *chunk;
    size_t i;
    int error;                    /* the spill file could not be read */
} st_trace_reader_t;

void st_trace_reader_init(st_trace_reader_t *r, const st_trace_t *t);
/* The next event, or NULL at the end (check r->error then). */
const st_tevent_t *st_trace_next(st_trace_reader_t *r);

/* Events recorded so far (in memory and spilled). */
uint64_t st_trace_count(const st_trace_t *t);

#endif
