/* The call tree of one thread, with metric accumulators on every node.
 *
 * Design note. A collector calls st_calltree_push() when a function starts and
 * st_calltree_pop() when it ends; the tree keeps a shadow stack of open calls. Each
 * open call carries a `key` (for Python, the frame object): pop() only closes the
 * top call when its key matches, so events for calls that were never pushed
 * (filtered out, started before profiling, outside a -b scope) fall through
 * without unbalancing the stack.
 *
 * A node is a call path: (parent node, label). Calls with the same label under the
 * same parent merge, so memory grows with the number of distinct paths, never with
 * the number of calls. Finding the child is the hot step: each node remembers the
 * child it last entered (`hint`), which hits for loops and recursion; otherwise an
 * open-addressing map keyed by (parent, label) answers. Nothing is allocated once
 * the paths of a program have been seen, and no lock is taken: a tree belongs to one
 * thread.
 *
 * Time arrives from the caller, in ticks of st_clock (or a test's fake clock), one
 * value per timer; the tree never reads a clock. push() returns the new frame so the
 * caller can stamp the start times last, after the bookkeeping, and pop() takes the
 * end times the caller read first. Each timer's accumulator keeps count, sum, min,
 * max, self (sum less the time of recorded children), and mean and M2 by Welford's
 * method for the variance.
 *
 * Bounds: at most `max_nodes` nodes; a call that would need a new node beyond that
 * is not recorded, nor is anything it calls, and the stack stays balanced. Every
 * call not recorded is counted in `dropped`, those made under a dropped call too,
 * so that the count is the number of calls missing from the tree. A call pushed
 * with the label ST_NODE_NONE (a collector that could not make its label) is
 * dropped the same way. An allocation failure sets the sticky `failed` flag and
 * behaves the same way. */
#ifndef STRATA_CORE_CALLTREE_H
#define STRATA_CORE_CALLTREE_H

#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "core/components.h"
#include "core/metrics.h"

#define ST_NODE_NONE UINT32_MAX /* "no node": dropped frame, end of a list */

/* One timer's statistics on one node. The variance is Welford's, updated in
 * batches: each call adds its time and its square to exact integer batch sums (no
 * division on the hot path), and every ST_BATCH calls the batch is folded into the
 * running mean and M2 by Chan's formula for combining Welford states. Within a batch
 * nothing is rounded (times below 2^57 ticks, about a year and a half, square into
 * 128 bits exactly); across batches the update is Welford's, as stable. */
typedef struct {
    uint64_t sum, min, max, self;   /* ticks */
    uint64_t merged_sum;            /* the part of sum already in mean and m2 */
    double mean, m2;                /* Welford state over the node's first `merged` calls */
    unsigned __int128 batch_sq;     /* sum of squares of the calls since */
} st_accum_t;

/* ST_BATCH, ST_COUNT_MAX and ST_MAX_TICKS: core/metrics.h, whose Welford/Chan
 * arithmetic (st_welford_batch) folds these batches. */

typedef struct {
    uint32_t label;        /* interned label id; the root's is ST_NODE_NONE */
    uint32_t parent;
    uint32_t first_child, last_child, next_sibling;
    uint32_t hint;         /* the child entered last, or ST_NODE_NONE */
    uint32_t depth;        /* 0 for the root's children */
    uint64_t count;        /* completed calls */
    uint64_t merged;       /* calls folded into each accumulator's mean and m2 */
    st_accum_t acc[ST_NTIMERS];
} st_node_t;

typedef struct {
    const void *key;       /* identity of the call (frame), matched on pop */
    uint32_t node;         /* ST_NODE_NONE when not recorded (dropped) */
    uint32_t traced;       /* 1: the call's begin is in the thread's timeline */
    uint64_t t0[ST_NTIMERS];
    uint64_t child[ST_NTIMERS];
} st_frame_t;

typedef struct {
    st_node_t *nodes;      /* nodes[0] is the root */
    uint32_t nnodes, capnodes, max_nodes;
    st_frame_t *stack;
    uint32_t depth, capstack;
    st_u64map_t children;  /* (parent << 32 | label) -> node */
    uint64_t dropped;      /* calls not recorded because of max_nodes */
    int failed;            /* sticky: an allocation failed */
} st_calltree_t;

/* Makes an empty tree holding at most max_nodes nodes (0: no limit).
 * Returns 0 or ST_ENOMEM. */
int st_calltree_init(st_calltree_t *t, uint32_t max_nodes);
void st_calltree_free(st_calltree_t *t);

/* Out-of-line halves of push(): grow the stack; find or make the child of
 * `parent` labelled `label` (ST_NODE_NONE when dropped). */
int st_calltree_grow_stack(st_calltree_t *t);
uint32_t st_calltree_child(st_calltree_t *t, uint32_t parent, uint32_t label);

/* Opens a call of `label` under the current top of the stack and returns its
 * frame, whose t0[] the caller fills in; returns NULL only when the stack itself
 * cannot grow (then nothing was pushed and failed is set). Inline: it is the hot
 * path of every collector. */
static inline st_frame_t *st_calltree_push(st_calltree_t *t, uint32_t label, const void *key)
{
    if (__builtin_expect(t->depth == t->capstack, 0) && st_calltree_grow_stack(t) < 0)
        return NULL;
    uint32_t parent = t->depth ? t->stack[t->depth - 1].node : 0;
    uint32_t node = ST_NODE_NONE;
    if (__builtin_expect(parent != ST_NODE_NONE && label != ST_NODE_NONE, 1)) {
        uint32_t hint = t->nodes[parent].hint;
        node = (hint != ST_NODE_NONE && t->nodes[hint].label == label)
                   ? hint
                   : st_calltree_child(t, parent, label);
    } else {
        t->dropped++;
    }
    st_frame_t *f = &t->stack[t->depth++];
    f->key = key;
    f->node = node;
    f->traced = 0;
    for (int i = 0; i < ST_NTIMERS; i++)
        f->child[i] = 0;
    return f;
}

/* 1 when a call pushed now could get a new node: the tree is below its node
 * limit, no allocation failed and the innermost open call was recorded. */
static inline int st_calltree_can_grow(const st_calltree_t *t)
{
    return t->nnodes < t->max_nodes && !t->failed &&
           (t->depth == 0 || t->stack[t->depth - 1].node != ST_NODE_NONE);
}

/* The thread has finished: gives back what only recording needs (the stack of open
 * calls when none is open, the (parent, label) index, spare node capacity), so a
 * finished thread keeps its nodes and little else. Recording may go on afterwards:
 * what was given back is made again when needed. */
void st_calltree_compact(st_calltree_t *t);

/* Folds the node's pending batch into each timer's mean and M2. */
void st_node_merge(st_node_t *n, int ntimers);

/* Closes the top call (which the caller has checked is its own), charging
 * now[i] - t0[i] to each of the first `ntimers` timers. */
static inline void st_calltree_close_top(st_calltree_t *t, const uint64_t *now, int ntimers)
{
    st_frame_t *f = &t->stack[--t->depth];
    st_frame_t *up = t->depth ? f - 1 : NULL;
    if (f->node == ST_NODE_NONE)
        return;
    st_node_t *n = &t->nodes[f->node];
    uint64_t count = ++n->count;
    for (int i = 0; i < ntimers; i++) {
        uint64_t el = now[i] > f->t0[i] ? now[i] - f->t0[i] : 0;
        if (el > ST_MAX_TICKS)
            el = ST_MAX_TICKS;
        st_accum_t *a = &n->acc[i];
        a->sum += el;
        a->self += el > f->child[i] ? el - f->child[i] : 0;
        if (el < a->min)
            a->min = el;
        if (el > a->max)
            a->max = el;
        a->batch_sq += (unsigned __int128)el * el;
        if (up)
            up->child[i] += el;
    }
    if (count - n->merged == ST_BATCH)
        st_node_merge(n, ntimers);
}

/* Closes the top call if its key is `key`. Returns 1 if a call was closed, 0 if
 * the top did not match (or the stack is empty). */
static inline int st_calltree_pop(st_calltree_t *t, const void *key, const uint64_t *now,
                                  int ntimers)
{
    if (t->depth == 0 || t->stack[t->depth - 1].key != key)
        return 0;
    st_calltree_close_top(t, now, ntimers);
    return 1;
}

/* Closes every open call at `now`, innermost first (for calls still running when
 * results are written). */
void st_calltree_close_all(st_calltree_t *t, const uint64_t *now, int ntimers);

/* The key of the innermost open call, or NULL. */
static inline const void *st_calltree_top_key(const st_calltree_t *t)
{
    return t->depth ? t->stack[t->depth - 1].key : NULL;
}

/* Mean (ticks) and population variance (ticks^2) of a timer of node n, pending
 * batch included; n is not changed. */
void st_accum_stats(const st_node_t *n, int timer, double *mean, double *var);

#endif
