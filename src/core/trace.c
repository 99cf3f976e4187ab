#include "core/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"

void st_trace_shared_init(st_trace_shared_t *sh, uint64_t budget, int policy, uint32_t max_depth,
                          const char *spill_dir)
{
    atomic_store(&sh->bytes_left, (int64_t)(budget > INT64_MAX ? INT64_MAX : budget));
    sh->policy = policy;
    sh->max_depth = max_depth;
    sh->spill_dir = spill_dir;
    sh->pid = (long)getpid();
}

int st_trace_init(st_trace_t *t, st_trace_shared_t *sh, uint32_t index)
{
    memset(t, 0, sizeof *t);
    t->shared = sh;
    t->index = index;
    t->spill_fd = -1;
    t->capreserve = sh->max_depth + 1;
    t->reserve = malloc(t->capreserve * sizeof *t->reserve);
    return t->reserve ? 0 : ST_ENOMEM;
}

void st_trace_free(st_trace_t *t)
{
    st_tchunk_t *c = t->head;
    while (c) {
        st_tchunk_t *next = c->next;
        free(c);
        c = next;
    }
    free(t->reserve);
    if (t->spill_fd >= 0)
        close(t->spill_fd);
    memset(t, 0, sizeof *t);
    t->spill_fd = -1;
}

/* Writes the whole tail chunk to the spill file (made on first use, then unlinked
 * so that nothing is left behind whatever happens). */
static int spill(st_trace_t *t)
{
    /* A forked child shares the spill file's offset with its parent: never write. */
    if ((long)getpid() != t->shared->pid)
        return -1;
    if (t->spill_fd < 0) {
        char path[PATH_MAX];
        if (!t->shared->spill_dir ||
            snprintf(path, sizeof path, "%s/.trace-spill-%u-XXXXXX", t->shared->spill_dir,
                     t->index) >= (int)sizeof path) {
            t->spill_errno = ENAMETOOLONG;
            return -1;
        }
        t->spill_fd = mkstemp(path);
        if (t->spill_fd < 0) {
            t->spill_errno = errno;
            return -1;
        }
        unlink(path);
    }
    const char *p = (const char *)t->tail->ev;
    size_t left = sizeof t->tail->ev;
    while (left) {
        ssize_t n = write(t->spill_fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            t->spill_errno = n < 0 ? errno : EIO;
            return -1;
        }
        p += n;
        left -= (size_t)n;
    }
    t->spilled += ST_TRACE_CHUNK_EVENTS;
    t->cur = t->tail->ev;
    return 0;
}

int st_trace_grow(st_trace_t *t)
{
    if (t->full)
        return -1;
    if (t->tail && t->shared->policy == ST_TRACE_FLUSH && !t->failed) {
        if (spill(t) == 0)
            return 0;
        t->failed = 1;
        t->full = 1;
        return -1;
    }
    int64_t size = (int64_t)sizeof(st_tchunk_t);
    if (atomic_fetch_sub(&t->shared->bytes_left, size) < size) {
        atomic_fetch_add(&t->shared->bytes_left, size);
        t->full = 1;
        return -1;
    }
    st_tchunk_t *c = malloc(sizeof *c);
    if (!c) {
        atomic_fetch_add(&t->shared->bytes_left, size);
        t->full = 1;
        return -1;
    }
    c->next = NULL;
    if (t->tail)
        t->tail->next = c;
    else
        t->head = c;
    t->tail = c;
    t->cur = c->ev;
    t->end = c->ev + ST_TRACE_CHUNK_EVENTS;
    return 0;
}

uint64_t st_trace_count(const st_trace_t *t)
{
    uint64_t n = t->spilled + t->nreserve;
    for (const st_tchunk_t *c = t->head; c; c = c->next)
        n += c == t->tail ? (uint64_t)(t->cur - c->ev) : ST_TRACE_CHUNK_EVENTS;
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
        case 0:
            if (r->spill_i < r->spill_n)
                return &r->spill_buf[r->spill_i++];
            if (r->spill_pos >= t->spilled * sizeof(st_tevent_t) || t->spill_fd < 0) {
                r->stage = 1;
                break;
            }
            {
                ssize_t n = pread(t->spill_fd, r->spill_buf, sizeof r->spill_buf,
                                  (off_t)r->spill_pos);
                if (n <= 0 || n % (ssize_t)sizeof(st_tevent_t)) {
                    r->error = 1;
                    r->stage = 1;
                    break;
                }
                r->spill_pos += (uint64_t)n;
                r->spill_n = (size_t)n / sizeof(st_tevent_t);
                r->spill_i = 0;
            }
            break;
        case 1: {
            if (!r->chunk) {
                r->stage = 2;
                r->i = 0;
                break;
            }
            size_t n = r->chunk == t->tail ? (size_t)(t->cur - r->chunk->ev) : ST_TRACE_CHUNK_EVENTS;
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
