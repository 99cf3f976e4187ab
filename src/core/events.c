#include "core/events.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>

#include "base/err.h"

int st_ev_shared_init(st_ev_shared_t *sh, uint64_t budget, int policy, uint32_t max_depth,
                      const char *spill_dir, uint32_t spare)
{
    memset(sh, 0, sizeof *sh);
    sh->spare = spare < ST_EV_RING ? spare : ST_EV_RING;
    atomic_store(&sh->bytes_left, (int64_t)(budget > INT64_MAX ? INT64_MAX : budget));
    sh->policy = policy;
    sh->max_depth = max_depth;
    sh->spill_dir = spill_dir;
    sh->pid = (long)getpid();
    atomic_store(&sh->spill_fd, -1);
    atomic_store(&sh->spill_end, 0);
    for (int i = 0; i < ST_EV_RING; i++)
        atomic_store(&sh->ring[i], NULL);
    atomic_store(&sh->taken, 0);
    atomic_store(&sh->filled, 0);
    return pthread_mutex_init(&sh->lock, NULL) == 0 ? 0 : ST_ENOMEM;
}

static void give_back(st_ev_shared_t *sh, size_t bytes)
{
    atomic_fetch_add(&sh->bytes_left, (int64_t)bytes);
}

/* Chunks are mappings of their own, so that a finished thread's chunk goes back to
 * the system at once (freed heap memory would stay in the thread's malloc arena).
 * They are populated when made: one system call instead of a page fault for every
 * page on the hot path (or in a signal handler), and the chunk is filled anyway. */
static st_evchunk_t *chunk_new(uint32_t words, uint32_t sig)
{
    void *p = mmap(NULL, ST_EV_CHUNK_BYTES(words), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    st_evchunk_t *c = p;
    atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
    c->cap = words;
    c->n = 0;
    c->mapped = 1;
    c->sig = sig;
    return c;
}

static void chunk_free(st_evchunk_t *c)
{
    if (c->mapped)
        munmap(c, ST_EV_CHUNK_BYTES(c->cap));
    else
        free(c);
}

/* Takes `bytes` from the budget; 0, or -1 when it is spent. */
static int take_budget(st_ev_shared_t *sh, int64_t bytes)
{
    if (atomic_fetch_sub(&sh->bytes_left, bytes) >= bytes)
        return 0;
    atomic_fetch_add(&sh->bytes_left, bytes);
    return -1;
}

/* Puts chunk c into the ring if it has room (caller holds the lock). */
static int ring_put(st_ev_shared_t *sh, st_evchunk_t *c)
{
    uint32_t filled = atomic_load_explicit(&sh->filled, memory_order_relaxed);
    uint32_t taken = atomic_load_explicit(&sh->taken, memory_order_acquire);
    if (filled - taken >= ST_EV_RING)
        return -1;
    atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
    c->n = 0;
    atomic_store_explicit(&sh->ring[filled % ST_EV_RING], c, memory_order_relaxed);
    atomic_store_explicit(&sh->filled, filled + 1, memory_order_release);
    return 0;
}

/* Takes a chunk from the ring, or NULL: lock-free, async-signal-safe. */
static st_evchunk_t *ring_take(st_ev_shared_t *sh)
{
    uint32_t taken = atomic_load_explicit(&sh->taken, memory_order_relaxed);
    for (;;) {
        uint32_t filled = atomic_load_explicit(&sh->filled, memory_order_acquire);
        if (taken == filled)
            return NULL;
        st_evchunk_t *c = atomic_load_explicit(&sh->ring[taken % ST_EV_RING], memory_order_relaxed);
        if (atomic_compare_exchange_weak_explicit(&sh->taken, &taken, taken + 1,
                                                  memory_order_acq_rel, memory_order_relaxed))
            return c;
    }
}

void st_ev_refill(st_ev_shared_t *sh)
{
    pthread_mutex_lock(&sh->lock);
    for (;;) {
        uint32_t filled = atomic_load(&sh->filled), taken = atomic_load(&sh->taken);
        if (filled - taken >= sh->spare)
            break;
        int64_t size = (int64_t)ST_EV_CHUNK_BYTES(ST_EV_SIG_CHUNK_WORDS);
        if (take_budget(sh, size) < 0)
            break;
        st_evchunk_t *c = chunk_new(ST_EV_SIG_CHUNK_WORDS, 1);
        if (!c) {
            give_back(sh, (size_t)size);
            break;
        }
        ring_put(sh, c);
    }
    pthread_mutex_unlock(&sh->lock);
}

void st_ev_reserve(st_ev_shared_t *sh, uint32_t spare)
{
    pthread_mutex_lock(&sh->lock);
    if (spare > ST_EV_RING)
        spare = ST_EV_RING;
    if (spare > sh->spare)
        sh->spare = spare;
    pthread_mutex_unlock(&sh->lock);
    st_ev_refill(sh);
}

uint32_t st_ev_sig_spare(st_ev_shared_t *sh)
{
    pthread_mutex_lock(&sh->lock);
    uint32_t spare = sh->spare;
    pthread_mutex_unlock(&sh->lock);
    return spare;
}

void st_ev_shared_free(st_ev_shared_t *sh)
{
    int fd = atomic_exchange(&sh->spill_fd, -1);
    if (fd >= 0 && (long)getpid() == sh->pid)
        close(fd);
    st_evchunk_t *c;
    while ((c = ring_take(sh)))
        chunk_free(c);
    pthread_mutex_destroy(&sh->lock);
}

static void lane_free_chunks(st_evlane_t *l)
{
    st_evchunk_t *c = atomic_load(&l->head);
    while (c) {
        st_evchunk_t *next = atomic_load(&c->next);
        chunk_free(c);
        c = next;
    }
    atomic_store(&l->head, NULL);
    l->tail = NULL;
    l->cur = l->end = NULL;
}

static void lane_use(st_evlane_t *l, st_evchunk_t *c)
{
    if (l->tail) {
        l->tail->n = (uint32_t)(l->cur - l->tail->w);
        atomic_store_explicit(&l->tail->next, c, memory_order_release);
    } else {
        atomic_store_explicit(&l->head, c, memory_order_release);
    }
    l->tail = c;
    l->cur = c->w;
    l->end = c->w + c->cap;
}

void st_evbuf_init(st_evbuf_t *b, st_ev_shared_t *sh)
{
    memset(b, 0, sizeof *b);
    b->shared = sh;
    atomic_store(&b->lost, 0);
    atomic_store(&b->sig_written, 0);
    /* the reserve is made with the first chunk (st_evbuf_grow): a thread that
     * records no event (no timeline) costs nothing for it */
    st_ev_refill(sh);
}

void st_evbuf_free(st_evbuf_t *b)
{
    lane_free_chunks(&b->main);
    lane_free_chunks(&b->sig);
    free(b->main.extents);
    free(b->sig.extents);
    free(b->reserve);
    memset(b, 0, sizeof *b);
}

/* The spill file, made on first use and unlinked at once, so that nothing is left
 * behind whatever happens; -1 (errno set) if it cannot be made. */
static int spill_fd(st_ev_shared_t *sh)
{
    int fd = atomic_load(&sh->spill_fd);
    if (fd >= 0)
        return fd;
    char path[PATH_MAX];
    if (!sh->spill_dir ||
        snprintf(path, sizeof path, "%s/.events-spill-XXXXXX", sh->spill_dir) >= (int)sizeof path) {
        errno = sh->spill_dir ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    int made = mkstemp(path);
    if (made < 0)
        return -1;
    unlink(path);
    int expected = -1;
    if (!atomic_compare_exchange_strong(&sh->spill_fd, &expected, made)) {
        close(made); /* another thread made it first */
        return expected;
    }
    return made;
}

/* Writes words [0, n) of chunk c to the spill file at an offset of its own and
 * notes the extent in lane l. 0, or -1 with l->spill_errno set. */
static int spill_words(st_ev_shared_t *sh, st_evlane_t *l, const st_evchunk_t *c, uint64_t n)
{
    /* A forked child shares the spill file with its parent: never write. */
    if ((long)getpid() != sh->pid) {
        l->spill_errno = 0;
        return -1;
    }
    if (n == 0)
        return 0;
    int fd = spill_fd(sh);
    if (fd < 0) {
        l->spill_errno = errno;
        return -1;
    }
    if (l->nextents == l->capextents) {
        uint32_t cap = l->capextents ? l->capextents * 2 : 4;
        st_ev_extent_t *x = realloc(l->extents, cap * sizeof *x);
        if (!x) {
            l->spill_errno = ENOMEM;
            return -1;
        }
        l->extents = x;
        l->capextents = cap;
    }
    size_t bytes = (size_t)n * sizeof(st_ev_t);
    uint64_t off = atomic_fetch_add(&sh->spill_end, bytes);
    const char *p = (const char *)c->w;
    size_t done = 0;
    while (done < bytes) {
        ssize_t w = pwrite(fd, p + done, bytes - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            l->spill_errno = w < 0 ? errno : EIO;
            return -1;
        }
        done += (size_t)w;
    }
    st_ev_extent_t *last = l->nextents ? &l->extents[l->nextents - 1] : NULL;
    if (last && last->offset + last->n * sizeof(st_ev_t) == off)
        last->n += n;
    else
        l->extents[l->nextents++] = (st_ev_extent_t){off, n};
    l->spilled += n;
    return 0;
}

int st_evbuf_grow(st_evbuf_t *b, uint32_t words)
{
    st_evlane_t *l = &b->main;
    st_ev_shared_t *sh = b->shared;
    if (l->full || words > ST_EV_CHUNK_WORDS)
        return -1;
    if (!b->reserve) {
        /* made with the first chunk, or again after the thread finished */
        b->capreserve = sh->max_depth + 1;
        b->reserve = malloc(b->capreserve * sizeof *b->reserve);
        if (!b->reserve) {
            l->full = 1;
            return -1;
        }
    }
    if (l->tail && sh->policy == ST_EV_FLUSH && !l->failed && l->tail->cap >= words) {
        if (spill_words(sh, l, l->tail, (uint64_t)(l->cur - l->tail->w)) == 0) {
            l->cur = l->tail->w;
            return 0;
        }
        l->failed = 1;
        l->full = 1;
        return -1;
    }
    /* a whole chunk, or a smaller one when the budget runs low */
    uint32_t cap = ST_EV_CHUNK_WORDS;
    int64_t size;
    for (;;) {
        size = (int64_t)ST_EV_CHUNK_BYTES(cap);
        if (take_budget(sh, size) == 0)
            break;
        if (cap / 2 < ST_EV_MIN_CHUNK_WORDS || cap / 2 < words) {
            l->full = 1;
            return -1;
        }
        cap /= 2;
    }
    st_evchunk_t *c = chunk_new(cap, 0);
    if (!c) {
        give_back(sh, (size_t)size);
        l->full = 1;
        return -1;
    }
    lane_use(l, c);
    return 0;
}

void st_evbuf_finish(st_evbuf_t *b)
{
    st_evlane_t *l = &b->main;
    st_ev_shared_t *sh = b->shared;
    if (l->tail && sh->policy == ST_EV_FLUSH && !l->failed) {
        if (spill_words(sh, l, l->tail, (uint64_t)(l->cur - l->tail->w)) == 0) {
            l->cur = l->tail->w;
            /* under flush only the tail holds events, and it is now empty */
            if (atomic_load(&l->head) == l->tail) {
                give_back(sh, ST_EV_CHUNK_BYTES(l->tail->cap));
                lane_free_chunks(l);
            }
        } else {
            l->failed = 1;
            l->full = 1;
        }
    }
    if (l->tail && l->end > l->cur) {
        /* the tail shrinks to what it holds; the rest goes back to the budget */
        uint32_t used = (uint32_t)(l->cur - l->tail->w);
        uint32_t cap = l->tail->cap;
        st_evchunk_t *prev = NULL;
        for (st_evchunk_t *c = atomic_load(&l->head); c && c != l->tail; c = atomic_load(&c->next))
            prev = c;
        st_evchunk_t *c = malloc(ST_EV_CHUNK_BYTES(used));
        if (c) {
            memcpy(c->w, l->tail->w, (size_t)used * sizeof(st_ev_t));
            atomic_store(&c->next, NULL);
            c->mapped = 0;
            c->sig = 0;
            c->cap = c->n = used;
            chunk_free(l->tail);
            if (prev)
                atomic_store(&prev->next, c);
            else
                atomic_store(&l->head, c);
            l->tail = c;
            l->cur = l->end = c->w + used;
            give_back(sh, (size_t)(cap - used) * sizeof(st_ev_t));
        }
    }
    if (b->depth == 0 && b->nreserve == 0 && b->reserve) {
        free(b->reserve);
        b->reserve = NULL;
        b->capreserve = 0;
    }
    st_ev_drain(b);
    /* under flush the signal lane's last chunk goes too (no handler runs on a
     * finished thread): spilled, and back to the ring */
    st_evlane_t *s = &b->sig;
    if (sh->policy == ST_EV_FLUSH && s->tail && !s->failed && atomic_load(&s->head) == s->tail) {
        pthread_mutex_lock(&sh->lock);
        if (spill_words(sh, s, s->tail, (uint64_t)(s->cur - s->tail->w)) == 0) {
            if (ring_put(sh, s->tail) < 0) {
                give_back(sh, ST_EV_CHUNK_BYTES(s->tail->cap));
                chunk_free(s->tail);
            }
            atomic_store(&s->head, NULL);
            s->tail = NULL;
            s->cur = s->end = NULL;
        } else {
            s->failed = 1;
        }
        pthread_mutex_unlock(&sh->lock);
    }
}

void st_ev_drain(st_evbuf_t *b)
{
    st_ev_shared_t *sh = b->shared;
    st_evlane_t *l = &b->sig;
    if (sh->policy != ST_EV_FLUSH)
        return;
    pthread_mutex_lock(&sh->lock);
    st_evchunk_t *c;
    while ((c = atomic_load_explicit(&l->head, memory_order_acquire)) && !l->failed) {
        st_evchunk_t *next = atomic_load_explicit(&c->next, memory_order_acquire);
        if (!next)
            break; /* the chunk handlers write now */
        if (spill_words(sh, l, c, c->n) < 0) {
            l->failed = 1;
            break;
        }
        atomic_store_explicit(&l->head, next, memory_order_relaxed);
        if (ring_put(sh, c) < 0) {
            give_back(sh, ST_EV_CHUNK_BYTES(c->cap));
            chunk_free(c);
        }
    }
    pthread_mutex_unlock(&sh->lock);
}

void st_ev_consume(st_evbuf_t *b, st_ev_consume_fn fn, void *arg)
{
    st_ev_shared_t *sh = b->shared;
    st_evlane_t *l = &b->sig;
    pthread_mutex_lock(&sh->lock);
    st_evchunk_t *c;
    while (!l->spilled && !l->failed && (c = atomic_load_explicit(&l->head, memory_order_acquire))) {
        st_evchunk_t *next = atomic_load_explicit(&c->next, memory_order_acquire);
        if (!next)
            break; /* the chunk handlers write now */
        fn(arg, c->w, c->n);
        atomic_store_explicit(&l->head, next, memory_order_relaxed);
        if (ring_put(sh, c) < 0) {
            give_back(sh, ST_EV_CHUNK_BYTES(c->cap));
            chunk_free(c);
        }
    }
    pthread_mutex_unlock(&sh->lock);
}

st_ev_t *st_evbuf_sig_reserve(st_evbuf_t *b, uint32_t nextra)
{
    if (b->sig_busy) {
        atomic_fetch_add_explicit(&b->lost, 1, memory_order_relaxed);
        return NULL;
    }
    b->sig_busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    st_evlane_t *l = &b->sig;
    uint32_t words = 1 + nextra;
    if ((size_t)(l->end - l->cur) < words) {
        st_evchunk_t *c = words <= ST_EV_SIG_CHUNK_WORDS && !l->failed ? ring_take(b->shared)
                                                                       : NULL;
        if (!c) {
            atomic_fetch_add_explicit(&b->lost, 1, memory_order_relaxed);
            atomic_signal_fence(memory_order_seq_cst);
            b->sig_busy = 0;
            return NULL;
        }
        lane_use(l, c);
    }
    st_ev_t *e = l->cur;
    e->nextra = (uint16_t)nextra;
    return e;
}

void st_evbuf_sig_commit(st_evbuf_t *b, st_ev_t *e)
{
    st_evlane_t *l = &b->sig;
    l->cur = e + 1 + e->nextra;
    atomic_fetch_add_explicit(&b->sig_written, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    b->sig_busy = 0;
}

uint64_t st_evbuf_words(const st_evbuf_t *b, int lane)
{
    const st_evlane_t *l = lane ? &b->sig : &b->main;
    uint64_t n = l->spilled + (lane ? 0 : b->nreserve);
    for (const st_evchunk_t *c = atomic_load(&l->head); c; c = atomic_load(&c->next))
        n += c == l->tail ? (uint64_t)(l->cur - c->w) : c->n;
    return n;
}

void st_ev_reader_init(st_ev_reader_t *r, const st_evbuf_t *b, int lane)
{
    memset(r, 0, sizeof *r);
    r->b = b;
    r->lane = lane ? &b->sig : &b->main;
    r->chunk = atomic_load(&r->lane->head);
}

/* Stage 0: the next event from the spill extents, whole in the buffer. */
static const st_ev_t *next_spilled(st_ev_reader_t *r)
{
    const st_evlane_t *l = r->lane;
    size_t max = sizeof r->buf / sizeof r->buf[0];
    for (;;) {
        if (r->buf_i < r->buf_n) {
            const st_ev_t *e = &r->buf[r->buf_i];
            if (r->buf_i + 1 + e->nextra <= r->buf_n) {
                r->buf_i += 1 + e->nextra;
                return e;
            }
        }
        /* keep the partial event, read more of the extent */
        size_t keep = r->buf_n - r->buf_i;
        memmove(r->buf, r->buf + r->buf_i, keep * sizeof(st_ev_t));
        r->buf_n = keep;
        r->buf_i = 0;
        while (r->extent < l->nextents && r->spill_pos >= l->extents[r->extent].n) {
            r->extent++;
            r->spill_pos = 0;
        }
        int fd = atomic_load(&r->b->shared->spill_fd);
        if (r->extent >= l->nextents || fd < 0 || keep == max) {
            if (r->extent < l->nextents || keep)
                r->error = 1;
            return NULL;
        }
        const st_ev_extent_t *x = &l->extents[r->extent];
        uint64_t want = x->n - r->spill_pos;
        if (want > max - keep)
            want = max - keep;
        ssize_t n = pread(fd, r->buf + keep, (size_t)want * sizeof(st_ev_t),
                          (off_t)(x->offset + r->spill_pos * sizeof(st_ev_t)));
        if (n <= 0 || n % (ssize_t)sizeof(st_ev_t)) {
            r->error = 1;
            return NULL;
        }
        r->buf_n += (size_t)n / sizeof(st_ev_t);
        r->spill_pos += (size_t)n / sizeof(st_ev_t);
    }
}

const st_ev_t *st_ev_next_slow(st_ev_reader_t *r)
{
    const st_evlane_t *l = r->lane;
    for (;;) {
        switch (r->stage) {
        case 0: {
            const st_ev_t *e = next_spilled(r);
            if (e)
                return e;
            r->stage = 1;
            break;
        }
        case 1: {
            if (!r->chunk) {
                r->stage = 2;
                r->i = 0;
                break;
            }
            size_t n = r->chunk == l->tail ? (size_t)(l->cur - r->chunk->w) : r->chunk->n;
            if (r->i < n) {
                const st_ev_t *e = &r->chunk->w[r->i];
                r->i += 1 + e->nextra;
                return e;
            }
            r->chunk = atomic_load(&((st_evchunk_t *)r->chunk)->next);
            r->i = 0;
            break;
        }
        case 2:
            if (l == &r->b->main && r->i < r->b->nreserve)
                return &r->b->reserve[r->i++];
            r->stage = 3;
            break;
        default:
            return NULL;
        }
    }
}
