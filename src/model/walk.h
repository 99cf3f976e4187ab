/* The one walk over a path table: depth-first, children in the order they were
 * first called, without recursion (tables can be thousands of levels deep).
 *
 * Each node of the subtree under `top` (top itself excluded) is visited twice: on
 * the way in (leave 0), then, after everything under it, on the way out (leave
 * 1). Writers that only need each node once take st_walk_pre; writers that keep
 * state along the current path (a path string, open brackets, functions active on
 * the stack) undo it on the way out. st_walk_skip on the way in passes over the
 * node's subtree (a depth cap): the next step leaves the node.
 *
 *     st_walk_t w;
 *     st_walk_begin(&w, th->paths, 0);
 *     while (st_walk_next(&w))
 *         if (!w.leave) ... w.node, th->paths->nodes[w.node].depth / .parent ...
 *
 * A node's depth and parent are the table's (st_path_t); the root is node 0. */
#ifndef STRATA_MODEL_WALK_H
#define STRATA_MODEL_WALK_H

#include <stdint.h>

#include "core/pathtab.h"

typedef struct {
    const st_pathtab_t *t;
    uint32_t top;          /* the walk covers top's subtree */
    uint32_t node;         /* the node of the current step */
    int leave;             /* 0: entering node; 1: leaving it */
    int started, skip;
} st_walk_t;

/* A walk of the subtree under `top` (0: the whole table). */
void st_walk_begin(st_walk_t *w, const st_pathtab_t *t, uint32_t top);

/* The next step: 1 with w->node and w->leave set, 0 when the walk is over. */
int st_walk_next(st_walk_t *w);

/* The next node on the way in (pre-order): 1 with w->node set, 0 when over. */
int st_walk_pre(st_walk_t *w);

/* On the way into w->node: do not go under it (the next step leaves it). */
static inline void st_walk_skip(st_walk_t *w) { w->skip = 1; }

#endif
