#include "core/pathtab.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

static void path_init(st_path_t *n, uint32_t label, uint32_t parent, uint32_t depth)
{
    n->label = label;
    n->parent = parent;
    n->depth = depth;
    n->first_child = n->last_child = n->next_sibling = n->hint = n->hint_label = ST_PATH_NONE;
}

int st_pathtab_init(st_pathtab_t *t, const st_metrics_t *m, uint32_t max_nodes)
{
    memset(t, 0, sizeof *t);
    t->max_nodes = max_nodes ? max_nodes : UINT32_MAX - 1;
    t->capnodes = 64;
    t->nodes = malloc(t->capnodes * sizeof *t->nodes);
    if (!t->nodes || st_mcols_init(&t->cols, m, t->capnodes) < 0) {
        free(t->nodes);
        memset(t, 0, sizeof *t);
        return ST_ENOMEM;
    }
    path_init(&t->nodes[0], ST_PATH_NONE, ST_PATH_NONE, UINT32_MAX);
    t->nnodes = 1;
    return 0;
}

void st_pathtab_free(st_pathtab_t *t)
{
    free(t->nodes);
    st_u64map_free(&t->children);
    st_mcols_free(&t->cols);
    memset(t, 0, sizeof *t);
}

/* A new node under parent, put in the (parent, label) index when `index`. */
static uint32_t make(st_pathtab_t *t, uint32_t parent, uint32_t label, int index)
{
    if (t->nnodes >= t->max_nodes || t->failed)
        return ST_PATH_NONE;
    if (t->nnodes == t->capnodes) {
        uint32_t cap = t->capnodes ? t->capnodes * 2 : 64;
        st_path_t *nodes = realloc(t->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes)
            goto fail;
        t->nodes = nodes;
        t->capnodes = cap;
    }
    if (st_mcols_reserve(&t->cols, t->nnodes + 1) < 0 ||
        (index &&
         st_u64map_put(&t->children, ((uint64_t)parent << 32) | label, t->nnodes, NULL) < 0))
        goto fail;
    uint32_t c = t->nnodes++;
    st_path_t *p = &t->nodes[parent];
    path_init(&t->nodes[c], label, parent, p->depth + 1);
    if (p->last_child == ST_PATH_NONE)
        p->first_child = c;
    else
        t->nodes[p->last_child].next_sibling = c;
    p->last_child = c;
    return c;
fail:
    t->failed = 1;
    return ST_PATH_NONE;
}

uint32_t st_pathtab_append(st_pathtab_t *t, uint32_t parent, uint32_t label)
{
    return parent < t->nnodes ? make(t, parent, label, 0) : ST_PATH_NONE;
}

void st_pathtab_compact(st_pathtab_t *t)
{
    st_u64map_free(&t->children);
    if (t->capnodes > t->nnodes) {
        st_path_t *n = realloc(t->nodes, (size_t)t->nnodes * sizeof *n);
        if (n) {
            t->nodes = n;
            t->capnodes = t->nnodes;
        }
    }
    st_mcols_shrink(&t->cols, t->nnodes);
}

int st_pathtab_reindex(st_pathtab_t *t)
{
    st_u64map_free(&t->children);
    /* the labels may have changed (a reader's, made final): the hints, which keep
     * their child's label, go with the index */
    for (uint32_t i = 0; i < t->nnodes; i++)
        t->nodes[i].hint = t->nodes[i].hint_label = ST_PATH_NONE;
    for (uint32_t i = 1; i < t->nnodes; i++) {
        uint64_t key = ((uint64_t)t->nodes[i].parent << 32) | t->nodes[i].label;
        if (st_u64map_put(&t->children, key, i, NULL) < 0) {
            st_u64map_free(&t->children);
            t->failed = 1;
            return ST_ENOMEM;
        }
    }
    return 0;
}

uint32_t st_pathtab_find(st_pathtab_t *t, uint32_t parent, uint32_t label)
{
    if (__builtin_expect(t->children.count == 0 && t->nnodes > 1, 0) && st_pathtab_reindex(t) < 0) {
        t->dropped++;
        return ST_PATH_NONE;
    }
    uint64_t key = ((uint64_t)parent << 32) | label;
    uint32_t node = st_u64map_get(&t->children, key);
    if (node == UINT32_MAX)
        node = make(t, parent, label, 1);
    if (node != ST_PATH_NONE) {
        t->nodes[parent].hint = node;
        t->nodes[parent].hint_label = label;
    } else
        t->dropped++;
    return node;
}
