/* The function graph: a profile's call trees folded into functions and the calls
 * between them, as pstats, callgrind and the dot call graph see a program.
 *
 * Design note. A function is a location (file, line, name) when the label has
 * one (core/loctab.h), else the label itself. Nodes of every thread (or of one
 * MPI rank) fold into their function; a node under a parent adds to the edge
 * (parent's function -> its function). Recursion is counted as cProfile counts
 * it: `nc` is every call, `cc` the primitive ones (the function was not already
 * running higher up the same path), and the cumulative time `ct` adds only the
 * outermost call's time, so a recursive function's ct is not counted twice. The
 * same holds per edge for the pair (caller, callee). One iterative depth-first
 * walk does it, keeping how many times each function and edge is open on the
 * current path; no recursion, however deep the tree.
 *
 * Times are in nanoseconds of the model's primary timer (wall_clock if measured,
 * else cpu_clock); a profile that only counted calls has no times (timer -1) and
 * the writers weigh by calls instead (st_tree_values). A graph can also be built
 * over another metric (st_fgraph_build_metric): tt and ct are then its own and
 * inclusive values (a second timer, allocated bytes, samples), counted as times
 * are, recursion once. */
#ifndef STRATA_OUTPUT_FGRAPH_H
#define STRATA_OUTPUT_FGRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "base/u64map.h"

typedef struct {
    uint32_t loc;       /* location id, or ST_LOC_NONE (then `label` names it) */
    uint32_t label;     /* the first label seen for it */
    uint64_t nc, cc;    /* calls, primitive calls */
    double tt, ct;      /* self time, cumulative time (ns) */
} st_fnode_t;

typedef struct {
    uint32_t caller, callee;  /* function indices */
    uint64_t nc, cc;
    double tt, ct;
} st_fedge_t;

typedef struct {
    st_fnode_t *fns;
    uint32_t nfns, capfns;
    st_fedge_t *edges;
    uint32_t nedges, capedges;
    uint32_t *fn_of_key;      /* key (loc, or nlocs + label) -> function, or NONE */
    size_t nkeys;
    uint32_t *qual_uses;      /* loctab string id -> functions with that qualified name */
    uint8_t *long_name;       /* per function: 1 when even module.qualname:line is not
                               * unique (st_fgraph_name then gives the file's path) */
    st_u64map_t emap;         /* (caller << 32 | callee) -> edge */
    int timer;                /* the model's primary timer (st_model_timer), -1: none */
    uint32_t metric;          /* what tt and ct measure; ST_METRIC_NONE: nothing
                               * (counts only: tt and ct are 0) */
    double total_tt;          /* sum of every function's tt */
    double max_ct;            /* largest ct */
} st_fgraph_t;

/* Folds the threads of m (only those of MPI rank `rank` when rank >= 0) into g
 * (uninitialised). Returns 0 or ST_ENOMEM. */
int st_fgraph_build(st_fgraph_t *g, const st_model_t *m, long rank);

/* The same over metric `metric` (a timer, count, bytes or samples metric of the
 * model; ST_METRIC_NONE: none). Returns 0, ST_ENOMEM or ST_EINVAL (a gauge). */
int st_fgraph_build_metric(st_fgraph_t *g, const st_model_t *m, long rank, uint32_t metric);
void st_fgraph_free(st_fgraph_t *g);

/* The function of a node's label (an index into g->fns), or UINT32_MAX. */
uint32_t st_fgraph_fn_of(const st_fgraph_t *g, const st_model_t *m, uint32_t label);

/* A function's name for people, appended to out. `qualified` 0 (callgrind): the
 * location's qualified name ("Class.method"), unique among the graph's functions:
 * when another function has the same one, it is prefixed with its module (the
 * file's base name without extension, or its folder's for __init__.py) and
 * followed by its first line: "re.compile:289" (and when that is not unique either,
 * "compile [/usr/lib/python3.11/re/__init__.py:289]"); a C function's cProfile name.
 * `qualified` 1 (dot): "example:3:fib", as gprof2dot names pstats functions (with
 * the file's path where the callgrind name needs it too).
 * A function without a location is named by its label's text. */
void st_fgraph_name(const st_fgraph_t *g, const st_model_t *m, uint32_t fn, int qualified,
                    st_strbuf_t *out);

/* Per-node values of one thread for the flame-graph writers (st_model_values of
 * st_model_weight): inclusive and self weight, in ns of the primary timer, else in
 * stack samples when the profile has them, else in calls (inclusive = the node's
 * calls plus its descendants'). Arrays of one double per node of th->paths, owned
 * by the caller (free). Returns 0 or ST_ENOMEM. */
int st_tree_values(const st_model_t *m, const st_model_thread_t *th, double **incl,
                   double **self);

#endif
