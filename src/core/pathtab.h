/* A path table: the call paths of one thread, interned as (parent, label) -> node.
 *
 * Design note. This is the shape of a profile and nothing else; what is measured on
 * a path lives in metric columns (metrics.h) indexed by the node id. Node 0 is the
 * root. Finding a child is the hot step of every enter: each node remembers the
 * child it last gave (`hint`), which hits for loops and recursion; otherwise an
 * open-addressing map keyed by (parent << 32 | label) answers (out of line).
 * Nothing is allocated once the paths of a program have been seen.
 *
 * Bounds: at most `max_nodes` nodes; a path that would need a node beyond that is
 * ST_PATH_NONE and counted in `dropped`, and so is every path asked for under a
 * dropped one, or with the label ST_PATH_NONE (a collector that could not make its
 * label): `dropped` is the number of calls missing from the table. An allocation
 * failure sets the sticky `failed` flag and behaves the same way. The table keeps its columns (`cols`) as
 * long as the nodes: a new node gets empty cells in every column.
 *
 * A table belongs to one thread; nothing here is thread-safe or signal-safe. */
#ifndef STRATA_CORE_PATHTAB_H
#define STRATA_CORE_PATHTAB_H

#include <stdint.h>

#include "base/u64map.h"
#include "core/metrics.h"

#define ST_PATH_NONE UINT32_MAX

typedef struct {
    uint32_t label;        /* label id; the root's is ST_PATH_NONE */
    uint32_t parent;
    uint32_t first_child, last_child, next_sibling;
    uint32_t hint;         /* the child found last, or ST_PATH_NONE */
    uint32_t hint_label;   /* its label (ST_PATH_NONE with no hint): the hot check reads
                            * the parent only, and a node is 32 bytes */
    uint32_t depth;        /* 0 for the root's children */
} st_path_t;

typedef struct {
    st_path_t *nodes;      /* nodes[0] is the root */
    uint32_t nnodes, capnodes, max_nodes;
    st_u64map_t children;  /* (parent << 32 | label) -> node */
    st_mcols_t cols;       /* one column per metric, cells for every node */
    uint64_t dropped;      /* paths not made: max_nodes */
    int failed;            /* sticky: an allocation failed */
} st_pathtab_t;

/* An empty table (the root only) with columns for every metric of `m`, holding at
 * most max_nodes nodes (0: no limit). Returns 0 or ST_ENOMEM. */
int st_pathtab_init(st_pathtab_t *t, const st_metrics_t *m, uint32_t max_nodes);
void st_pathtab_free(st_pathtab_t *t);

/* The thread has finished: gives back what only recording needs (the (parent,
 * label) index, spare node and column capacity), so that a finished thread keeps
 * its paths and values and little else. Recording may go on afterwards: what was
 * given back is made again when needed. */
void st_pathtab_compact(st_pathtab_t *t);

/* Slow half of st_pathtab_child: the map lookup, or a new node. */
uint32_t st_pathtab_find(st_pathtab_t *t, uint32_t parent, uint32_t label);

/* For a reader that rebuilds a table node by node (ids kept): a new last child of
 * `parent` labelled `label`, whatever its siblings, left out of the (parent,
 * label) index; st_pathtab_reindex makes the index once the labels are final.
 * Returns the node, or ST_PATH_NONE (no such parent, the node limit, or memory:
 * failed set). Not counted in `dropped`. */
uint32_t st_pathtab_append(st_pathtab_t *t, uint32_t parent, uint32_t label);

/* Makes the (parent, label) index again from the nodes (the first of two siblings
 * with one label is the one found), and drops the lookup hints, which keep labels
 * that may have changed. Returns 0 or ST_ENOMEM (failed set). */
int st_pathtab_reindex(st_pathtab_t *t);

/* The child of `parent` labelled `label`, made if new; ST_PATH_NONE (counted) when
 * parent or label is ST_PATH_NONE, or when the node limit is reached or memory runs
 * out. Inline: the hint check (the child found last, then the sibling after it) is
 * the hot path. */
static inline uint32_t st_pathtab_child(st_pathtab_t *t, uint32_t parent, uint32_t label)
{
    if (__builtin_expect(parent == ST_PATH_NONE || label == ST_PATH_NONE, 0)) {
        t->dropped++;
        return ST_PATH_NONE;
    }
    st_path_t *p = &t->nodes[parent];
    if (__builtin_expect(p->hint_label == label, 1)) /* label is not ST_PATH_NONE */
        return p->hint;
    if (p->hint != ST_PATH_NONE) {
        /* a loop that calls a few functions in turn (a send, then a receive):
         * the sibling after the last one found, or the first after the last */
        uint32_t next = t->nodes[p->hint].next_sibling;
        if (next == ST_PATH_NONE)
            next = p->first_child;
        if (t->nodes[next].label == label) {
            p->hint = next;
            p->hint_label = label;
            return next;
        }
    }
    return st_pathtab_find(t, parent, label);
}

#endif
