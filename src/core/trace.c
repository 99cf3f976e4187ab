#include "core/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>

#include "base/err.h"

void st_trace_shared_init(st_trace_shared_t *sh, uint64_t budget, int policy, uint32_t max_depth,
                          const char *spill_dir)
{
    atomic_store(&sh->bytes_left, (int64_t)(budget > INT64_MAX ? INT64_MAX : budget));
    sh->policy = policy;
    sh->max_depth = max_depth;
    sh->spill_dir = spill_dir;
    sh->pid = (long)getpid();
    atomic_store(&sh->spill_fd, -1);
    atomic_store(&sh->spill_end, 0);
}

void st_trace_shared_free(st_trace_shared_t *sh)
{
    int fd = atomic_exchange(&sh->spill_fd, -1);
    if (fd >= 0 && (long)getpid() == sh->pid)
        close(fd);
}

int st_trace_init(st_trace_t *t, st_trace_shared_t *sh, uint32_t index)
{
    memset(t, 0, sizeof *t);
    t->shared = sh;
    t->index = index;
    t->capreserve = sh->max_depth + 1;
    t->reserve = malloc(t->capreserve * sizeof *t->reserve);
    return t->reserve ? 0 : ST_ENOMEM;
}

static void give_back(st_trace_t *t, size_t bytes)
{
    atomic_fetch_add(&t->shared->bytes_left, (int64_t)bytes);
}

/* Chunks are mappings of their own, so that a finished thread's chunk goes back to
 * the system at once (freed heap memory would stay in the thread's malloc arena). */
static st_tchunk_t *chunk_new(uint32_t events)
{
    size_t size = ST_TRACE_CHUNK_BYTES(events);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    st_tchunk_t *c = p;
    c->next = NULL;
    c->cap = events;
    c->n = 0;
    c->mapped = 1;
    return c;
}

static void chunk_free(st_tchunk_t *c)
{
    if (c->mapped)
        munmap(c, ST_TRACE_CHUNK_BYTES(c->cap));
    else
        free(c);
}

static void free_chunks(st_trace_t *t)
{
    st_tchunk_t *c = t->head;
    while (c) {
        st_tchunk_t *next = c->next;
        chunk_free(c);
        c = next;
    }
    t->head = t->tail = NULL;
    t->cur = t->end = NULL;
}

void st_trace_free(st_trace_t *t)
{
    free_chunks(t);
    free(t->reserve);
    free(t->extents);
    memset(t, 0, sizeof *t);
}

/* The spill file, made on first use and unlinked at once, so that nothing is left
 * behind whatever happens; -1 if it cannot be made, with the reason in *err. */
static int spill_fd(st_trace_shared_t *sh, int *err)
{
    int fd = atomic_load(&sh->spill_fd);
    if (fd >= 0)
        return fd;
    char path[PATH_MAX];
    if (!sh->spill_dir ||
        snprintf(path, sizeof path, "%s/.trace-spill-XXXXXX", sh->spill_dir) >= (int)sizeof path) {
        *err = ENAMETOOLONG;
        return -1;
    }
    int made = mkstemp(path);
    if (made < 0) {
        *err = errno;
        return -1;
    }
    unlink(path);
    int expected = -1;
    if (!atomic_compare_exchange_strong(&sh->spill_fd, &expected, made)) {
        close(made); /* another thread made it first */
        return expected;
    }
    return made;
}

/* Writes the tail chunk's events to the spill file, at an offset of its own, and
 * empties the chunk. */
static int spill(st_trace_t *t)
{
    /* A forked child shares the spill file's offset with its parent: never write. */
    if ((long)getpid() != t->shared->pid)
        return -1;
    uint64_t n = (uint64_t)(t->cur - t->tail->ev);
    if (n == 0)
        return 0;
    int fd = spill_fd(t->shared, &t->spill_errno);
    if (fd < 0)
        return -1;
    if (t->nextents == t->capextents) {
        uint32_t cap = t->capextents ? t->capextents * 2 : 4;
        st_trace_extent_t *x = realloc(t->extents, cap * sizeof *x);
        if (!x) {
            t->spill_errno = ENOMEM;
            return -1;
        }
        t->extents = x;
        t->capextents = cap;
    }
    size_t bytes = (size_t)n * sizeof(st_tevent_t);
    uint64_t off = atomic_fetch_add(&t->shared->spill_end, bytes);
    const char *p = (const char *)t->tail->ev;
    size_t done = 0;
    while (done < bytes) {
        ssize_t w = pwrite(fd, p + done, bytes - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            t->spill_errno = w < 0 ? errno : EIO;
            return -1;
        }
        done += (size_t)w;
    }
    st_trace_extent_t *last = t->nextents ? &t->extents[t->nextents - 1] : NULL;
    if (last && last->offset + last->n * sizeof(st_tevent_t) == off)
        last->n += n;
    else
        t->extents[t->nextents++] = (st_trace_extent_t){off, n};
    t->spilled += n;
    t->cur = t->tail->ev;
    return 0;
}

int st_trace_grow(st_trace_t *t)
{
    if (t->full)
        return -1;
    if (!t->reserve) {
        /* given back when the thread finished; it records again */
        t->capreserve = t->shared->max_depth + 1;
        t->reserve = malloc(t->capreserve * sizeof *t->reserve);
        if (!t->reserve) {
            t->full = 1;
            return -1;
        }
    }
    if (t->tail && t->shared->policy == ST_TRACE_FLUSH && !t->failed && t->tail->cap) {
        if (spill(t) == 0)
            return 0;
        t->failed = 1;
        t->full = 1;
        return -1;
    }
    /* a whole chunk, or a smaller one when the budget runs low */
    uint32_t events = ST_TRACE_CHUNK_EVENTS;
    int64_t size;
    for (;;) {
        size = (int64_t)ST_TRACE_CHUNK_BYTES(events);
        if (atomic_fetch_sub(&t->shared->bytes_left, size) >= size)
            break;
        atomic_fetch_add(&t->shared->bytes_left, size);
        if (events == ST_TRACE_MIN_CHUNK_EVENTS) {
            t->full = 1;
            return -1;
        }
        events /= 2;
    }
    st_tchunk_t *c = chunk_new(events);
    if (!c) {
        atomic_fetch_add(&t->shared->bytes_left, size);
        t->full = 1;
        return -1;
    }
    if (t->tail) {
        t->tail->n = (uint32_t)(t->cur - t->tail->ev);
        t->tail->next = c;
    } else {
        t->head = c;
    }
    t->tail = c;
    t->cur = c->ev;
    t->end = c->ev + events;
    return 0;
}

void st_trace_finish(st_trace_t *t)
{
    if (t->tail && t->shared->policy == ST_TRACE_FLUSH && !t->failed) {
        if (spill(t) == 0) {
            size_t bytes = 0;
            for (const st_tchunk_t *c = t->head; c; c = c->next)
                bytes += ST_TRACE_CHUNK_BYTES(c->cap);
            /* under flush only the tail holds events, and it is now empty */
            if (t->head == t->tail) {
                free_chunks(t);
                give_back(t, bytes);
            }
        } else {
            t->failed = 1;
            t->full = 1;
        }
    }
    if (t->tail && t->end > t->cur) {
        /* the tail shrinks to what it holds; the rest goes back to the budget */
        uint32_t used = (uint32_t)(t->cur - t->tail->ev);
        uint32_t cap = t->tail->cap;
        st_tchunk_t *prev = NULL;
        for (st_tchunk_t *c = t->head; c && c != t->tail; c = c->next)
            prev = c;
        st_tchunk_t *c = malloc(ST_TRACE_CHUNK_BYTES(used));
        if (c) {
            memcpy(c, t->tail, ST_TRACE_CHUNK_BYTES(used));
            c->mapped = 0;
            chunk_free(t->tail);
            if (prev)
                prev->next = c;
            else
                t->head = c;
            t->tail = c;
            c->cap = used;
            t->cur = t->end = c->ev + used;
            give_back(t, (size_t)(cap - used) * sizeof(st_tevent_t));
        }
    }
    if (t->depth == 0 && t->nreserve == 0 && t->reserve) {
        free(t->reserve);
        t->reserve = NULL;
        t->capreserve = 0;
    }
}

uint64_t st_trace_count(const st_trace_t *t)
{
    uint64_t n = t->spilled + t->nreserve;
    for (const st_tchunk_t *c = t->head; c; c = c->next)
        n += c == t->tail ? (uint64_t)(t->cur - c->ev) : c->n;
    return n;
}

void st_trace_reader_init(st_trace_reader_t *r, const st_trace_t *t)
{
    memset(r, 0, sizeof *r);
    r->t = t;
    r->chunk = t->head;
}

const st_tevent_t *st_trace_next(st_trace_reader_t *r)
{
    const st_trace_t *t = r->t;
    for (;;) {
        switch (r->stage) {
        case 0: {
            if (r->spill_i < r->spill_n)
                return &r->spill_buf[r->spill_i++];
            while (r->extent < t->nextents && r->spill_pos >= t->extents[r->extent].n) {
                r->extent++;
                r->spill_pos = 0;
            }
            int fd = atomic_load(&t->shared->spill_fd);
            if (r->extent >= t->nextents || fd < 0) {
                if (r->extent < t->nextents)
                    r->error = 1;
                r->stage = 1;
                break;
            }
            const st_trace_extent_t *x = &t->extents[r->extent];
            uint64_t want = x->n - r->spill_pos;
            size_t max = sizeof r->spill_buf / sizeof r->spill_buf[0];
            if (want > max)
                want = max;
            ssize_t n = pread(fd, r->spill_buf, (size_t)want * sizeof(st_tevent_t),
                              (off_t)(x->offset + r->spill_pos * sizeof(st_tevent_t)));
            if (n <= 0 || n % (ssize_t)sizeof(st_tevent_t)) {
                r->error = 1;
                r->stage = 1;
                break;
            }
            r->spill_n = (size_t)n / sizeof(st_tevent_t);
            r->spill_i = 0;
            r->spill_pos += r->spill_n;
            break;
        }
        case 1: {
            if (!r->chunk) {
                r->stage = 2;
                r->i = 0;
                break;
            }
            size_t n = r->chunk == t->tail ? (size_t)(t->cur - r->chunk->ev) : r->chunk->n;
            if (r->i < n)
                return &r->chunk->ev[r->i++];
            r->chunk = r->chunk->next;
            r->i = 0;
            break;
        }
        case 2:
            if (r->i < t->nreserve)
                return &t->reserve[r->i++];
            r->stage = 3;
            break;
        default:
            return NULL;
        }
    }
}
