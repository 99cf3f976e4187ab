/* Metrics: a registry of what is measured, and columns of values over a path table.
 *
 * Design note. The shape of a profile (call paths, pathtab.h) is kept apart from
 * what is measured on it (memray's frame tree). A metric is a registry entry (name,
 * unit, description, kind); its values live in a column, one dense array per metric
 * indexed by node id and grown with the node count. A new metric is one more
 * registry entry, not a field in every node, writer and reader.
 *
 * Kinds and what one column cell holds:
 *   ST_METRIC_TIMER    st_tstat_t: count, sum, min, max, self (sum less recorded
 *                      children), and mean and M2 for the variance (Welford, batched);
 *   ST_METRIC_COUNT    uint64_t events (calls, allocations);
 *   ST_METRIC_BYTES    uint64_t bytes;
 *   ST_METRIC_GAUGE    st_gauge_t: last, min and max of a sampled level;
 *   ST_METRIC_SAMPLES  uint64_t sample weight (stack samples landing on the node).
 *
 * The variance. Each timed call adds its time and its square to exact integer batch
 * sums (no division on the hot path); every ST_BATCH calls the batch is folded into
 * the running mean and M2 by Chan et al.'s formula for combining Welford states.
 * Within a batch nothing is rounded (times below 2^57 ticks square into 128 bits
 * exactly); across batches the update is Welford's, as stable. The same formula
 * combines two finished states (st_welford_merge: merging runs or ranks). This file
 * is the one implementation of that arithmetic.
 *
 * Nothing here is thread-safe: a column set belongs to one thread's path table, a
 * registry is filled before recording starts (or under the owner's lock). */
#ifndef STRATA_CORE_METRICS_H
#define STRATA_CORE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define ST_BATCH 64
/* The largest count or time sum a profile holds: profile.json writes integers
 * exactly up to it and its reader takes them back; merging saturates there. */
#define ST_COUNT_MAX ((uint64_t)INT64_MAX)
#define ST_MAX_TICKS (((uint64_t)1 << 57) - 1)

typedef enum {
    ST_METRIC_TIMER = 0,
    ST_METRIC_COUNT = 1,
    ST_METRIC_BYTES = 2,
    ST_METRIC_GAUGE = 3,
    ST_METRIC_SAMPLES = 4,
} st_metric_kind_t;

#define ST_METRIC_NONE UINT32_MAX

/* ------------------------------------------------------------------------- */
/* Welford / Chan: the one implementation                                    */

/* Combines a Welford state (n, mean, m2) with a batch of bn values summing to bsum
 * whose squares sum to bsq exactly (bn <= ST_BATCH, values <= ST_MAX_TICKS). */
void st_welford_batch(uint64_t n, double mean, double m2, uint64_t bn, uint64_t bsum,
                      unsigned __int128 bsq, double *out_mean, double *out_m2);

/* Combines two finished Welford states (na, mean_a, m2_a) += (nb, mean_b, m2_b);
 * Chan et al.'s parallel formula. Results in *mean_a and *m2_a. */
void st_welford_merge(uint64_t na, double *mean_a, double *m2_a, uint64_t nb, double mean_b,
                      double m2_b);

/* ------------------------------------------------------------------------- */
/* Timer statistics                                                          */

/* One timer's statistics on one node. */
typedef struct {
    uint64_t count;                 /* completed calls */
    uint64_t merged;                /* calls folded into mean and m2 */
    uint64_t sum, min, max, self;   /* ticks */
    uint64_t merged_sum;            /* the part of sum already in mean and m2 */
    double mean, m2;                /* Welford state over the first `merged` calls */
    unsigned __int128 batch_sq;     /* sum of squares of the calls since */
} st_tstat_t;

/* An empty statistic (min at its largest). */
void st_tstat_init(st_tstat_t *s);

/* Folds the pending batch into mean and M2 (out of line: once per ST_BATCH calls). */
void st_tstat_fold(st_tstat_t *s);

/* Adds one call of `el` ticks, `child` of which were spent in recorded calls under
 * it. Inline: the hot path of every exit. */
static inline void st_tstat_add(st_tstat_t *s, uint64_t el, uint64_t child)
{
    if (el > ST_MAX_TICKS)
        el = ST_MAX_TICKS;
    uint64_t count = ++s->count;
    s->sum += el;
    s->self += el > child ? el - child : 0;
    if (el < s->min)
        s->min = el;
    if (el > s->max)
        s->max = el;
    s->batch_sq += (unsigned __int128)el * el;
    if (count - s->merged == ST_BATCH)
        st_tstat_fold(s);
}

/* Mean (ticks) and population variance (ticks^2), pending batch included; s is not
 * changed. */
void st_tstat_stats(const st_tstat_t *s, double *mean, double *var);

/* dst += src (both any state): counts and sums saturate at ST_COUNT_MAX (*sat set),
 * min/max combine, mean and M2 by Chan's formula. dst ends fully folded. */
void st_tstat_merge(st_tstat_t *dst, const st_tstat_t *src, int *sat);

/* ------------------------------------------------------------------------- */
/* Gauges                                                                    */

typedef struct {
    uint64_t n;                     /* readings */
    double last, min, max;
} st_gauge_t;

static inline void st_gauge_set(st_gauge_t *g, double v)
{
    if (g->n == 0 || v < g->min)
        g->min = v;
    if (g->n == 0 || v > g->max)
        g->max = v;
    g->last = v;
    g->n++;
}

/* ------------------------------------------------------------------------- */
/* The registry                                                              */

typedef struct {
    char name[48];                  /* e.g. "wall_clock" */
    char unit[16];                  /* e.g. "ticks", "ns", "bytes", "calls" */
    char desc[112];
    st_metric_kind_t kind;
} st_metric_def_t;

typedef struct {
    st_metric_def_t *defs;          /* owned; id = index */
    uint32_t n, cap;
} st_metrics_t;

/* Zero-initialised is an empty registry too. */
void st_metrics_init(st_metrics_t *m);
void st_metrics_free(st_metrics_t *m);

/* Adds a metric (or finds it: the same name and kind give the same id). Returns 0
 * and sets *id, ST_ENOMEM, or ST_EINVAL (a name too long or empty, the name
 * registered with another kind, or ST_MCOLS_MAX metrics already). Names are copied. */
int st_metrics_add(st_metrics_t *m, const char *name, const char *unit, const char *desc,
                   st_metric_kind_t kind, uint32_t *id);

/* The id of the metric named `name`, or ST_METRIC_NONE. */
uint32_t st_metrics_find(const st_metrics_t *m, const char *name);

static inline const st_metric_def_t *st_metrics_get(const st_metrics_t *m, uint32_t id)
{
    return id < m->n ? &m->defs[id] : NULL;
}

/* Bytes of one column cell of a kind. */
size_t st_metric_cell_size(st_metric_kind_t kind);

/* A kind's name in files ("timer", "count", "bytes", "gauge", "samples"), and the
 * kind of a name (-1: none). */
const char *st_metric_kind_name(st_metric_kind_t kind);
int st_metric_kind_find(const char *name);

/* ------------------------------------------------------------------------- */
/* Columns                                                                   */

/* The most metrics a registry holds (columns sit in a fixed array, so that reaching
 * a cell on the hot path is one load from the owner and one index). */
#define ST_MCOLS_MAX 32

/* One column per registered metric (at the time of st_mcols_init), each with `cap`
 * cells; cells below `cap` are initialised (empty). */
typedef struct {
    void *cols[ST_MCOLS_MAX];       /* cols[id]: cap cells of kind kinds[id] */
    st_metric_kind_t kinds[ST_MCOLS_MAX];
    uint32_t ncols;
    uint32_t cap;                   /* cells per column */
} st_mcols_t;

/* Columns for every metric of the registry, `cap` cells each (at least 1).
 * Returns 0 or ST_ENOMEM (nothing to free then). */
int st_mcols_init(st_mcols_t *c, const st_metrics_t *m, uint32_t cap);
void st_mcols_free(st_mcols_t *c);

/* Adds columns (c->cap empty cells each) for the metrics registered in m since the
 * columns were made, so that a registry may grow after its tables (a reader, a
 * merge). Returns 0 or ST_ENOMEM (the columns made so far are kept). */
int st_mcols_sync(st_mcols_t *c, const st_metrics_t *m);

/* Makes every column hold at least `n` cells (doubling). Returns 0 or ST_ENOMEM
 * (the columns are unchanged then). Not on the hot path: called when a node is made. */
int st_mcols_reserve(st_mcols_t *c, uint32_t n);

/* Gives back the cells from `n` on (at least 1 is kept): a finished thread keeps its
 * values and little else. A failed shrink leaves a column as it was. */
void st_mcols_shrink(st_mcols_t *c, uint32_t n);

/* Typed cell access; the caller knows the metric's kind. */
static inline st_tstat_t *st_mcols_timer(const st_mcols_t *c, uint32_t metric)
{
    return (st_tstat_t *)c->cols[metric];
}
static inline uint64_t *st_mcols_u64(const st_mcols_t *c, uint32_t metric)
{
    return (uint64_t *)c->cols[metric];
}
static inline st_gauge_t *st_mcols_gauge(const st_mcols_t *c, uint32_t metric)
{
    return (st_gauge_t *)c->cols[metric];
}

#endif
