/* Typed events on tracks, in preallocated chunks with reserve/commit.
 *
 * Design note. An event is one 16-byte header word (ticks, a 32-bit argument, kind,
 * number of extra words) followed by `nextra` 16-byte payload words. Begin and end,
 * the common case, have no payload: 16 bytes, as the timeline had before. The kinds:
 *
 *   kind             a          ticks              payload
 *   ST_EV_BEGIN      label      host ticks         -
 *   ST_EV_END        0          host ticks         -
 *   ST_EV_INSTANT    label      host ticks         -
 *   ST_EV_COMPLETE   track      t0, track's clock  {t1, label, flow id (0: none)}
 *   ST_EV_COUNTER    track      host ticks         {value (double)}
 *   ST_EV_SAMPLE     metric     host ticks         {weight, n}, then n label ids,
 *                                                  innermost first, 4 to a word
 *   ST_EV_ALLOC      site label host ticks         {address, bytes}
 *   ST_EV_FREE       0          host ticks         {address}
 *   ST_EV_FLOW       label      host ticks         {flow id} (label: what starts it,
 *                                                  ST_PATH_NONE: unnamed)
 *
 * Begin, end, instant, sample, alloc, free and flow lie on the track of the thread
 * that wrote them; complete and counter name a track of the recorder (a GPU stream,
 * a counter: recorder.h), whose clock domain converts their times.
 *
 * Each thread has an event buffer with two lanes, each a list of chunks:
 *   the main lane, written by the thread in its own context (begin/end/... on the
 *     hot path: a compare and three stores, no lock, no clock of its own);
 *   the signal lane, written by signal handlers interrupting the thread (samples):
 *     its chunks come from a ring of chunks that the shared part preallocates
 *     outside signal context (st_ev_refill), taken with one compare-and-swap; a
 *     writer of the lane that finds it busy (a handler that interrupted another
 *     writer of the lane) or finds no chunk counts the event in `lost`. So the
 *     handler takes no lock and calls no malloc, and every event is either
 *     recorded or counted.
 * All chunks are drawn from one shared byte budget (an atomic counter): the only
 * place threads meet on the main lane's slow path.
 *
 * When the budget is spent, the fill policy decides, as for the timeline before:
 *   discard: no new event is recorded (counted in `dropped`), but ends of begins
 *            already recorded are: they go to a reserve sized for the deepest
 *            nesting recorded, so no slice is left open by a drop;
 *   flush:   the main lane's full chunk is written to the spill file (one for all
 *            threads, in the results folder, each writer reserving its offset
 *            atomically and remembering where its events went: extents) and reused;
 *            the signal lane's full chunks are written by st_ev_drain, outside signal
 *            context (a sampler thread, the end of the run), and go back to the ring.
 *   A spill that fails records errno (`spill_errno`) and the lane behaves as under
 *   discard from then on (`failed`).
 * Begins nested deeper than `max_depth` are not recorded (`too_deep`).
 *
 * A thread that has finished gives its memory back (st_evbuf_finish): under flush its
 * events go to the spill file and its chunks return to the budget; under discard its
 * last chunk shrinks to the events it holds and the rest returns to the budget.
 *
 * Safety. st_evbuf_sig_* may be called from a signal handler running on the
 * buffer's thread (async-signal-safe: atomics, no lock, no allocation). Everything
 * else on a buffer is for its owner thread, in thread context. st_ev_refill and
 * st_ev_drain take the shared lock and may run in any thread. Readers run after
 * recording has stopped. */
#ifndef STRATA_CORE_EVENTS_H
#define STRATA_CORE_EVENTS_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ST_EV_CHUNK_WORDS 4096      /* main lane: 64 KiB */
#define ST_EV_MIN_CHUNK_WORDS 64    /* when the budget runs low */
#define ST_EV_SIG_CHUNK_WORDS 1024  /* signal lane: 16 KiB */
#define ST_EV_RING 256              /* preallocated signal chunks, at most */
#define ST_EV_MAX_FRAMES 256        /* frames a sample event holds */

enum {
    ST_EV_BEGIN = 1,
    ST_EV_END = 2,
    ST_EV_INSTANT = 3,
    ST_EV_COMPLETE = 4,
    ST_EV_COUNTER = 5,
    ST_EV_SAMPLE = 6,
    ST_EV_ALLOC = 7,
    ST_EV_FREE = 8,
    ST_EV_FLOW = 9,
};

/* One 16-byte word: an event's header. */
typedef struct {
    uint64_t ticks;
    uint32_t a;          /* label, track or metric (table above) */
    uint16_t kind;       /* ST_EV_* */
    uint16_t nextra;     /* payload words that follow */
} st_ev_t;

/* Payload words, as the kinds above lay them out. */
typedef struct {
    uint64_t t1;
    uint32_t label, flow;  /* flow: the flow it ends (st_rec_flow), 0: none */
} st_ev_complete_t;
typedef struct {
    uint64_t u0, u1;     /* address and bytes, flow id, or weight and frame count */
} st_ev_pair_t;

/* Payload words of a sample of n frames. */
#define ST_EV_SAMPLE_EXTRA(n) (1u + ((uint32_t)(n) + 3u) / 4u)

typedef struct st_evchunk {
    _Atomic(struct st_evchunk *) next;
    uint32_t cap;        /* words it can hold */
    uint32_t n;          /* words it holds, once closed (another chunk follows) */
    uint32_t mapped;     /* 1: its own mapping (munmap), 0: malloc'd */
    uint32_t sig;        /* 1: a signal-lane chunk (from the ring) */
    uint64_t pad;
    st_ev_t w[];
} st_evchunk_t;

#define ST_EV_CHUNK_BYTES(words) (sizeof(st_evchunk_t) + (size_t)(words) * sizeof(st_ev_t))

enum { ST_EV_DISCARD = 0, ST_EV_FLUSH = 1 };

/* What all threads' buffers share. */
typedef struct {
    _Atomic int64_t bytes_left;   /* budget for chunks not yet taken */
    int policy;                   /* ST_EV_DISCARD or ST_EV_FLUSH */
    uint32_t max_depth;
    const char *spill_dir;        /* flush: where the spill file goes; not owned */
    long pid;                     /* the process that may spill (not a forked child) */
    _Atomic int spill_fd;         /* the spill file, -1 until first needed */
    _Atomic uint64_t spill_end;   /* bytes reserved in it so far */
    _Atomic(st_evchunk_t *) ring[ST_EV_RING]; /* signal chunks ready to take */
    _Atomic uint32_t taken, filled;           /* ring positions (wrap freely) */
    uint32_t spare;               /* chunks st_ev_refill keeps in the ring */
    pthread_mutex_t lock;         /* refill, drain */
} st_ev_shared_t;

/* Where a run of a lane's words went in the spill file. */
typedef struct {
    uint64_t offset;              /* bytes */
    uint64_t n;                   /* words */
} st_ev_extent_t;

typedef struct {
    st_ev_t *cur, *end;           /* the append window in the tail chunk */
    _Atomic(st_evchunk_t *) head; /* set by the lane's writer when it was empty */
    st_evchunk_t *tail;
    st_ev_extent_t *extents;      /* flush: where its spilled words are, in order */
    uint32_t nextents, capextents;
    uint64_t spilled;             /* words in the spill file */
    int full;                     /* no chunk can be had (budget spent, or failed) */
    int failed;                   /* a spill failed: then as discard */
    int spill_errno;              /* why (0 in a forked child) */
} st_evlane_t;

/* One thread's events. */
typedef struct {
    st_evlane_t main;
    st_evlane_t sig;
    st_ev_shared_t *shared;
    st_ev_t *reserve;             /* ends recorded after the budget ran out */
    uint32_t nreserve, capreserve;
    uint32_t depth;               /* recorded begins not yet ended */
    uint64_t dropped;             /* events not recorded: budget spent */
    uint64_t too_deep;            /* begins not recorded: deeper than max_depth */
    volatile sig_atomic_t sig_busy; /* a signal-lane writer is inside */
    _Atomic uint64_t lost;        /* signal-lane events not recorded */
    _Atomic uint64_t sig_written; /* signal-lane events recorded */
} st_evbuf_t;

/* Sets up the shared part: budget in bytes, policy, deepest recorded nesting,
 * where flush spills (not owned), and how many signal chunks to keep ready (at most
 * ST_EV_RING; 0: none, so a run without signal samples spends nothing on them).
 * Returns 0 or ST_ENOMEM. */
int st_ev_shared_init(st_ev_shared_t *sh, uint64_t budget, int policy, uint32_t max_depth,
                      const char *spill_dir, uint32_t spare);
/* Closes the spill file and frees the ring (after every buffer is freed). */
void st_ev_shared_free(st_ev_shared_t *sh);

/* Fills the ring of signal chunks from the budget. Any thread, not signal-safe. */
void st_ev_refill(st_ev_shared_t *sh);
/* Keeps at least `spare` chunks in the ring from now on (ST_EV_RING at most; never
 * fewer than asked for at init) and fills it. Any thread, not signal-safe. */
void st_ev_reserve(st_ev_shared_t *sh, uint32_t spare);
/* Signal chunks taken from the ring so far (a count that wraps). Any thread. */
static inline uint32_t st_ev_sig_taken(st_ev_shared_t *sh)
{
    return atomic_load_explicit(&sh->taken, memory_order_relaxed);
}
/* How many signal chunks the ring keeps ready now. Any thread, not a handler. */
uint32_t st_ev_sig_spare(st_ev_shared_t *sh);

/* An empty buffer: nothing is allocated until its first event (the main lane's
 * first chunk comes with the reserve; the signal lane takes its first chunk from the
 * ring, which is refilled now). Thread context. */
void st_evbuf_init(st_evbuf_t *b, st_ev_shared_t *sh);
void st_evbuf_free(st_evbuf_t *b);

/* The thread has finished: its memory goes back (see above). Recording may go on
 * afterwards (it takes a chunk again). Owner thread, or after the thread ended. */
void st_evbuf_finish(st_evbuf_t *b);

/* Flush policy: writes the signal lane's full chunks to the spill file and returns
 * them to the ring. Any thread (the shared lock orders it with other drains), while
 * handlers may be writing the lane. Does nothing under discard. */
void st_ev_drain(st_evbuf_t *b);

/* Hands the signal lane's full chunks to `fn` (its words, in order) and returns
 * them to the ring: a sampler that adds its samples up while the run goes on, so
 * that a long run keeps its memory to the samples since the last call. Under any
 * policy; a spilled lane is left to st_ev_drain. Any thread (the shared lock
 * orders it with drains), while handlers may be writing the lane; fn runs under
 * that lock and must not record. */
typedef void (*st_ev_consume_fn)(void *arg, const st_ev_t *words, uint32_t n);
void st_ev_consume(st_evbuf_t *b, st_ev_consume_fn fn, void *arg);

/* Slow path of the main lane: a chunk with room for `words` more words (a new one,
 * or the old one spilled); -1 when none can be had. */
int st_evbuf_grow(st_evbuf_t *b, uint32_t words);

/* Reserves `1 + nextra` words on the main lane for an event, or NULL (counted in
 * dropped). The caller fills the header and payload; the event is committed. */
static inline st_ev_t *st_evbuf_reserve(st_evbuf_t *b, uint32_t nextra)
{
    if (__builtin_expect((size_t)(b->main.end - b->main.cur) < 1 + (size_t)nextra, 0) &&
        st_evbuf_grow(b, 1 + nextra) < 0) {
        b->dropped++;
        return NULL;
    }
    st_ev_t *e = b->main.cur;
    b->main.cur = e + 1 + nextra;
    e->nextra = (uint16_t)nextra;
    return e;
}

/* Records the begin of a call of `label` at `ticks`; returns 1 if recorded (its end
 * must then be recorded with st_evbuf_end), 0 if not (dropped or too deep). */
static inline int st_evbuf_begin(st_evbuf_t *b, uint32_t label, uint64_t ticks)
{
    if (b->depth >= b->shared->max_depth) {
        b->too_deep++;
        return 0;
    }
    if (__builtin_expect(b->main.cur == b->main.end, 0) && st_evbuf_grow(b, 1) < 0) {
        b->dropped++;
        return 0;
    }
    st_ev_t *e = b->main.cur++;
    e->ticks = ticks;
    e->a = label;
    e->kind = ST_EV_BEGIN;
    e->nextra = 0;
    b->depth++;
    return 1;
}

/* Records the end of the innermost recorded begin. Never fails: after the budget is
 * spent, ends go to the reserve. */
static inline void st_evbuf_end(st_evbuf_t *b, uint64_t ticks)
{
    st_ev_t *e;
    if (__builtin_expect(b->main.cur == b->main.end, 0) && st_evbuf_grow(b, 1) < 0)
        e = &b->reserve[b->nreserve++]; /* a begin was recorded: the reserve exists */
    else
        e = b->main.cur++;
    e->ticks = ticks;
    e->a = 0;
    e->kind = ST_EV_END;
    e->nextra = 0;
    b->depth--;
}

/* Signal lane: reserves 1 + nextra words, or NULL (counted in lost; then do not
 * commit). Async-signal-safe, on the buffer's own thread. Pair with commit. */
st_ev_t *st_evbuf_sig_reserve(st_evbuf_t *b, uint32_t nextra);
/* Publishes the event reserved last. Async-signal-safe. */
void st_evbuf_sig_commit(st_evbuf_t *b, st_ev_t *e);

/* Reading back one lane, in order: spill extents, chunks, then (main lane) the
 * reserve. After recording has stopped. */
typedef struct {
    const st_evbuf_t *b;
    const st_evlane_t *lane;
    int stage;                    /* 0 spill file, 1 chunks, 2 reserve, 3 done */
    uint32_t extent;              /* the extent being read */
    uint64_t spill_pos;           /* words read of it */
    st_ev_t buf[512];
    size_t buf_n, buf_i;
    const st_evchunk_t *chunk;
    size_t i;
    int error;                    /* the spill file could not be read */
} st_ev_reader_t;

/* lane: 0 main, 1 signal. */
void st_ev_reader_init(st_ev_reader_t *r, const st_evbuf_t *b, int lane);
/* Slow half of st_ev_next: the spill file, a chunk's end, the reserve. */
const st_ev_t *st_ev_next_slow(st_ev_reader_t *r);

/* The next event (its payload words follow it), or NULL at the end (check
 * r->error then). Inline: the next event of the chunk being read is the common case
 * (a writer's loop over millions of events). */
static inline const st_ev_t *st_ev_next(st_ev_reader_t *r)
{
    const st_evchunk_t *c = r->chunk;
    if (__builtin_expect(r->stage == 1 && c != NULL, 1)) {
        size_t n = c == r->lane->tail ? (size_t)(r->lane->cur - c->w) : c->n;
        if (__builtin_expect(r->i < n, 1)) {
            const st_ev_t *e = &c->w[r->i];
            r->i += 1 + e->nextra;
            return e;
        }
    }
    return st_ev_next_slow(r);
}

/* Events' words recorded so far on a lane (in memory and spilled). */
uint64_t st_evbuf_words(const st_evbuf_t *b, int lane);

#endif
