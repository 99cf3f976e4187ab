/* `strata diff`: two sides (a run each, or several runs of each) compared function by
 * function (issue 15).
 *
 * Design note. Each run given is folded into its functions (output/fgraph.h: every
 * thread and rank summed, recursion counted once, as pstats does), named as
 * gprof2dot names them ("module:line:function"), which is stable from one run of a
 * program to the next. A side keeps, per function, the sums of its inclusive time
 * and calls over its runs (their means are shown), and each run's self time (a
 * function missing from a run counts 0 there): a side's self time is the median
 * of its runs, and its spread their median absolute deviation, so that one
 * disturbed run (another process took the CPU) neither moves the centre nor
 * hides a change. The noise of a difference is two standard errors of the
 * difference of the medians (about 95 %: the percentage is the guard against
 * false alarms, the noise against changes a noisy side can make) (each 1.253 * 1.4826 * MAD / sqrt(n), as for a normal
 * sample; none with one run a side: then only PCT speaks). A function is a regression when it takes at least `min_share` percent
 * of side A's self time (or of B's, for a new one), its self time grew by more
 * than `pct` percent, and the growth is larger than the noise. Calls are compared
 * exactly: a changed count is said, whatever the times. Memory: one entry a
 * distinct function over all runs. */
#ifndef STRATA_OUTPUT_DIFF_H
#define STRATA_OUTPUT_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "base/u64map.h"
#include "model/model.h"

typedef struct {
    char *name;
    double sum[2][2]; /* per side: inclusive ns, calls (self: the runs', below) */
} st_diff_fn_t;

typedef struct {
    st_diff_fn_t *fns;
    uint32_t nfns, capfns;
    double **self[2];    /* per side, per run: each function's self ns (as many as
                          * there were functions after that run) */
    uint32_t *nself[2];
    st_u64map_t index;   /* hash of the name -> function */
    uint32_t runs[2];
    double self_all[2];  /* every function's self time over the side's runs */
    int timed;           /* every run had a timer */
    int by_rank;         /* functions kept apart per MPI rank ("[rank 3] f") */
    int by_thread;       /* functions kept apart per thread, by its name
                          * ("[MainThread] f"; threads of one name together) */
    double pct, min_share;
} st_diff_t;

/* One function's comparison (st_diff_rows): self times are the medians of the
 * runs, inclusive times and calls their means. */
typedef struct {
    const char *name;
    double self[2], total[2], calls[2];
    double noise;        /* ns: two standard errors of the self times' difference */
    double change;       /* percent change of the self time (B over A); +inf: new */
    double share;        /* percent of A's self time (B's for a new function) */
    int regression;      /* grew past pct and the noise, at min_share or more */
} st_diff_row_t;

/* An empty comparison: a regression grows by more than `pct` percent and takes at
 * least `min_share` percent of the time. */
void st_diff_init(st_diff_t *d, double pct, double min_share);
void st_diff_free(st_diff_t *d);

/* Adds one run to side 0 (A, before) or 1 (B, after); with d->by_rank set, each of
 * its MPI ranks' functions apart (a run without ranks as it is), with d->by_thread
 * each thread's. Returns 0 or ST_ENOMEM. */
int st_diff_add_run(st_diff_t *d, int side, const st_model_t *m);

/* The rows, most grown self time first (the largest shrink last); *rows owned by
 * the caller (free), names owned by d. Returns the number of rows, or ST_ENOMEM. */
long st_diff_rows(const st_diff_t *d, st_diff_row_t **rows);

/* The table of the rows (at most `top` rows, 0: all, then how many more) and a
 * line saying how many regressions there are. */
void st_diff_table_write(st_strbuf_t *out, const st_diff_t *d, const st_diff_row_t *rows,
                         size_t n, size_t top);

/* The same as JSON: {"runs": [na, nb], "pct": P, "min_share": S, "regressions": R,
 * "functions": [{"name", "self": [a, b], "total": [a, b], "calls": [a, b], "noise",
 * "change", "share", "regression"}...]} (times in seconds). */
void st_diff_json_write(st_strbuf_t *out, const st_diff_t *d, const st_diff_row_t *rows,
                        size_t n);

#endif
