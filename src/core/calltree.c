#include "core/calltree.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

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
    t->capnodes = 256;
    t->nodes = malloc(t->capnodes * sizeof *t->nodes);
    t->capstack = 128;
    t->stack = malloc(t->capstack * sizeof *t->stack);
    t->map_slots = 512;
    t->map_keys = calloc(t->map_slots, sizeof *t->map_keys);
    t->map_vals = malloc(t->map_slots * sizeof *t->map_vals);
    if (!t->nodes || !t->stack || !t->map_keys || !t->map_vals) {
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
    free(t->map_keys);
    free(t->map_vals);
    memset(t, 0, sizeof *t);
}

static inline uint64_t map_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdu;
    k ^= k >> 33;
    return k;
}

static int map_grow(st_calltree_t *t)
{
    uint32_t slots = t->map_slots * 2;
    uint64_t *keys = calloc(slots, sizeof *keys);
    uint32_t *vals = malloc(slots * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return ST_ENOMEM;
    }
    for (uint32_t i = 0; i < t->map_slots; i++) {
        if (!t->map_keys[i])
            continue;
        uint32_t j = (uint32_t)map_hash(t->map_keys[i]) & (slots - 1);
        while (keys[j])
            j = (j + 1) & (slots - 1);
        keys[j] = t->map_keys[i];
        vals[j] = t->map_vals[i];
    }
    free(t->map_keys);
    free(t->map_vals);
    t->map_keys = keys;
    t->map_vals = vals;
    t->map_slots = slots;
    return 0;
}

/* The child of `parent` labelled `label`, made if new; ST_NODE_NONE when the node
 * limit is reached or memory runs out. */
static uint32_t child_of(st_calltree_t *t, uint32_t parent, uint32_t label)
{
    uint64_t key = (((uint64_t)parent << 32) | label) + 1;
    uint32_t i = (uint32_t)map_hash(key) & (t->map_slots - 1);
    while (t->map_keys[i]) {
        if (t->map_keys[i] == key)
            return t->map_vals[i];
        i = (i + 1) & (t->map_slots - 1);
    }
    if (t->nnodes >= t->max_nodes || t->failed)
        return ST_NODE_NONE;
    if ((uint64_t)(t->map_count + 1) * 2 > t->map_slots) {
        if (map_grow(t) < 0) {
            t->failed = 1;
            return ST_NODE_NONE;
        }
        i = (uint32_t)map_hash(key) & (t->map_slots - 1);
        while (t->map_keys[i])
            i = (i + 1) & (t->map_slots - 1);
    }
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
    uint32_t c = t->nnodes++;
    st_node_t *p = &t->nodes[parent];
    node_init(&t->nodes[c], label, parent, p->depth + 1);
    if (p->last_child == ST_NODE_NONE)
        p->first_child = c;
    else
        t->nodes[p->last_child].next_sibling = c;
    p->last_child = c;
    t->map_keys[i] = key;
    t->map_vals[i] = c;
    t->map_count++;
    return c;
}

st_frame_t *st_calltree_push(st_calltree_t *t, uint32_t label, const void *key)
{
    if (t->depth == t->capstack) {
        uint32_t cap = t->capstack * 2;
        st_frame_t *s = realloc(t->stack, (size_t)cap * sizeof *s);
        if (!s) {
            t->failed = 1;
            return NULL;
        }
        t->stack = s;
        t->capstack = cap;
    }
    uint32_t parent = t->depth ? t->stack[t->depth - 1].node : 0;
    uint32_t node = ST_NODE_NONE;
    if (parent != ST_NODE_NONE) {
        uint32_t hint = t->nodes[parent].hint;
        if (hint != ST_NODE_NONE && t->nodes[hint].label == label) {
            node = hint;
        } else {
            node = child_of(t, parent, label);
            if (node != ST_NODE_NONE)
                t->nodes[parent].hint = node;
        }
        if (node == ST_NODE_NONE)
            t->dropped++;
    }
    st_frame_t *f = &t->stack[t->depth++];
    f->key = key;
    f->node = node;
    memset(f->child, 0, sizeof f->child);
    return f;
}

static void close_top(st_calltree_t *t, const uint64_t *now, int ntimers)
{
    st_frame_t *f = &t->stack[--t->depth];
    st_frame_t *up = t->depth ? &t->stack[t->depth - 1] : NULL;
    if (f->node == ST_NODE_NONE)
        return;
    st_node_t *n = &t->nodes[f->node];
    uint64_t count = ++n->count;
    for (int i = 0; i < ntimers; i++) {
        uint64_t el = now[i] > f->t0[i] ? now[i] - f->t0[i] : 0;
        st_accum_t *a = &n->acc[i];
        a->sum += el;
        a->self += el > f->child[i] ? el - f->child[i] : 0;
        if (el < a->min)
            a->min = el;
        if (el > a->max)
            a->max = el;
        double d = (double)el - a->mean;
        a->mean += d / (double)count;
        a->m2 += d * ((double)el - a->mean);
        if (up)
            up->child[i] += el;
    }
}

int st_calltree_pop(st_calltree_t *t, const void *key, const uint64_t *now, int ntimers)
{
    if (t->depth == 0 || t->stack[t->depth - 1].key != key)
        return 0;
    close_top(t, now, ntimers);
    return 1;
}

void st_calltree_close_all(st_calltree_t *t, const uint64_t *now, int ntimers)
{
    while (t->depth)
        close_top(t, now, ntimers);
}

double st_accum_var(const st_accum_t *a, uint64_t count)
{
    return count ? a->m2 / (double)count : 0.0;
}
