#include "core/calltree.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

static void node_init(st_node_t *n, uint32_t label, uint32_t parent, uint32_t depth)
{
    memset(n, 0, sizeof *n);
    n->label = label;
    n->parent = parent;
    n->depth = depth;
    n->first_child = n->last_child = n->next_sibling = n->hint = ST_NODE_NONE;
    for (int i = 0; i < ST_NTIMERS; i++)
        n->acc[i].min = UINT64_MAX;
}

int st_calltree_init(st_calltree_t *t, uint32_t max_nodes)
{
    memset(t, 0, sizeof *t);
    t->max_nodes = max_nodes ? max_nodes : UINT32_MAX - 1;
    t->capnodes = 32;
    t->nodes = malloc(t->capnodes * sizeof *t->nodes);
    t->capstack = 32;
    t->stack = malloc(t->capstack * sizeof *t->stack);
    if (!t->nodes || !t->stack) {
        st_calltree_free(t);
        return ST_ENOMEM;
    }
    node_init(&t->nodes[0], ST_NODE_NONE, ST_NODE_NONE, UINT32_MAX);
    t->nnodes = 1;
    return 0;
}

void st_calltree_free(st_calltree_t *t)
{
    free(t->nodes);
    free(t->stack);
    st_u64map_free(&t->children);
    memset(t, 0, sizeof *t);
}

/* The child of `parent` labelled `label`, made if new; ST_NODE_NONE when the node
 * limit is reached or memory runs out. */
static uint32_t child_of(st_calltree_t *t, uint32_t parent, uint32_t label)
{
    if (t->children.count == 0 && t->nnodes > 1) {
        /* the index was given back (st_calltree_compact): made again */
        for (uint32_t i = 1; i < t->nnodes; i++)
            if (st_u64map_put(&t->children, ((uint64_t)t->nodes[i].parent << 32) | t->nodes[i].label,
                              i, NULL) < 0) {
                st_u64map_free(&t->children);
                t->failed = 1;
                return ST_NODE_NONE;
            }
    }
    uint64_t key = ((uint64_t)parent << 32) | label;
    uint32_t found = st_u64map_get(&t->children, key);
    if (found != UINT32_MAX)
        return found;
    if (t->nnodes >= t->max_nodes || t->failed)
        return ST_NODE_NONE;
    if (t->nnodes == t->capnodes) {
        uint32_t cap = t->capnodes * 2;
        st_node_t *nodes = realloc(t->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) {
            t->failed = 1;
            return ST_NODE_NONE;
        }
        t->nodes = nodes;
        t->capnodes = cap;
    }
    uint32_t c = t->nnodes;
    if (st_u64map_put(&t->children, key, c, NULL) < 0) {
        t->failed = 1;
        return ST_NODE_NONE;
    }
    t->nnodes++;
    st_node_t *p = &t->nodes[parent];
    node_init(&t->nodes[c], label, parent, p->depth + 1);
    if (p->last_child == ST_NODE_NONE)
        p->first_child = c;
    else
        t->nodes[p->last_child].next_sibling = c;
    p->last_child = c;
    return c;
}

int st_calltree_grow_stack(st_calltree_t *t)
{
    uint32_t cap = t->capstack ? t->capstack * 2 : 32;
    st_frame_t *s = realloc(t->stack, (size_t)cap * sizeof *s);
    if (!s) {
        t->failed = 1;
        return ST_ENOMEM;
    }
    t->stack = s;
    t->capstack = cap;
    return 0;
}

uint32_t st_calltree_child(st_calltree_t *t, uint32_t parent, uint32_t label)
{
    uint32_t node = child_of(t, parent, label);
    if (node != ST_NODE_NONE)
        t->nodes[parent].hint = node;
    else
        t->dropped++;
    return node;
}

void st_calltree_compact(st_calltree_t *t)
{
    if (t->depth == 0) {
        free(t->stack);
        t->stack = NULL;
        t->capstack = 0;
    }
    st_u64map_free(&t->children);
    memset(&t->children, 0, sizeof t->children);
    if (t->capnodes > t->nnodes) {
        st_node_t *n = realloc(t->nodes, (size_t)t->nnodes * sizeof *n);
        if (n) {
            t->nodes = n;
            t->capnodes = t->nnodes;
        }
    }
}

void st_calltree_close_all(st_calltree_t *t, const uint64_t *now, int ntimers)
{
    while (t->depth)
        st_calltree_close_top(t, now, ntimers);
}

/* The batch arithmetic is metrics.c's (st_welford_batch), the one implementation. */
void st_node_merge(st_node_t *n, int ntimers)
{
    uint64_t bn = n->count - n->merged;
    for (int i = 0; i < ntimers; i++) {
        st_accum_t *a = &n->acc[i];
        st_welford_batch(n->merged, a->mean, a->m2, bn, a->sum - a->merged_sum, a->batch_sq,
                         &a->mean, &a->m2);
        a->merged_sum = a->sum;
        a->batch_sq = 0;
    }
    n->merged = n->count;
}

void st_accum_stats(const st_node_t *n, int timer, double *mean, double *var)
{
    const st_accum_t *a = &n->acc[timer];
    double m2;
    st_welford_batch(n->merged, a->mean, a->m2, n->count - n->merged, a->sum - a->merged_sum,
                     a->batch_sq, mean, &m2);
    *var = n->count ? m2 / (double)n->count : 0.0;
}
