/* `strata diff --format html`: a differential flame graph (issue 15).
 *
 * Design note. Every run of both sides adds its call paths (every thread's, under
 * one root, frames named as in the folded format) to one tree of paths, keeping
 * per side the sum of each path's self and inclusive weight (nanoseconds of the
 * primary timer, else samples, else calls: st_tree_values). The page draws side
 * B's flame graph (a frame's width: its mean inclusive time in B's runs), each
 * frame coloured by the relative change of its own time from A's mean to B's:
 * red grew, blue shrank (full colour at 50 %), white unchanged, grey for frames
 * with almost no own time (under a thousandth of the total: their change is
 * noise); a frame's tooltip gives both sides and the change. Paths that B no longer has are not
 * drawn (the table below the graph, st_diff_table_write's, lists every function).
 * Frames narrower than a tenth of a pixel, and rows past 256, are left out.
 * Memory: one node a distinct path over all runs. */
#ifndef STRATA_OUTPUT_DIFFGRAPH_H
#define STRATA_OUTPUT_DIFFGRAPH_H

#include <stdint.h>

#include "base/strbuf.h"
#include "base/u64map.h"
#include "model/model.h"

typedef struct {
    char *name;
    uint32_t parent, first_child, next_sibling, last_child;
    double self[2], incl[2]; /* sums over each side's runs */
} st_dnode_t;

typedef struct {
    st_dnode_t *nodes;       /* nodes[0]: the root */
    uint32_t nnodes, capnodes;
    st_u64map_t index;       /* (parent, name) hash -> node */
    uint32_t runs[2];
} st_dtree_t;

/* An empty tree (the root only). 0 or ST_ENOMEM. */
int st_dtree_init(st_dtree_t *t);
void st_dtree_free(st_dtree_t *t);

/* Adds one run's call paths to side 0 (A) or 1 (B). 0 or ST_ENOMEM. */
int st_dtree_add_run(st_dtree_t *t, int side, const st_model_t *m);

/* The HTML page: `title`, the differential flame graph, then `table` (text,
 * escaped into a <pre>). */
void st_dtree_html_write(st_strbuf_t *out, const st_dtree_t *t, const char *title,
                         const char *table);

#endif
