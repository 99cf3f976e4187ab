#include "model/merge.h"

#include <stdlib.h>
#include <string.h>

#include "core/components.h"

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* a + b, held at ST_COUNT_MAX (and *sat set) rather than wrapped */
static uint64_t sat_add(uint64_t a, uint64_t b, int *sat)
{
    if (a > ST_COUNT_MAX || b > ST_COUNT_MAX - a) {
        *sat = 1;
        return ST_COUNT_MAX;
    }
    return a + b;
}

/* ticks * k in ns, rounded, held at ST_COUNT_MAX */
static uint64_t scale(uint64_t ticks, double k, int *sat)
{
    if (k == 1.0) { /* ns already (a loaded profile): exact, no detour through a double */
        if (ticks > ST_COUNT_MAX)
            *sat = 1;
        return ticks > ST_COUNT_MAX ? ST_COUNT_MAX : ticks;
    }
    double ns = (double)ticks * k + 0.5;
    if (!(ns < (double)ST_COUNT_MAX)) {
        *sat = 1;
        return ST_COUNT_MAX;
    }
    return (uint64_t)ns;
}

/* Adds a timer cell src (ticks, scaled by k to ns) into dst (ns). */
static void tstat_add_scaled(st_tstat_t *dst, const st_tstat_t *src, double k, int *sat)
{
    if (k == 1.0) {
        st_tstat_merge(dst, src, sat);
        return;
    }
    double mean, var;
    st_tstat_stats(src, &mean, &var);
    st_tstat_t ns;
    st_tstat_init(&ns);
    ns.count = ns.merged = src->count;
    ns.sum = ns.merged_sum = scale(src->sum, k, sat);
    ns.self = scale(src->self, k, sat);
    if (src->count) {
        ns.min = scale(src->min, k, sat);
        ns.max = scale(src->max, k, sat);
    }
    ns.mean = mean * k;
    ns.m2 = var * k * k * (double)src->count;
    st_tstat_merge(dst, &ns, sat);
}

typedef struct {
    uint32_t *labels;   /* input label -> output label, UINT32_MAX unknown */
    uint32_t *locs;     /* input loc -> output loc */
    uint32_t metric[ST_MCOLS_MAX]; /* input metric -> output metric, ST_METRIC_NONE: not merged */
    double k[ST_MCOLS_MAX];        /* input timer units -> ns */
} remap_t;

/* dst += src, one cell of a metric of kind `kind` (timers scaled by k). */
static void cell_add(const st_mcols_t *dst, uint32_t did, uint32_t dn, const st_mcols_t *src,
                     uint32_t sid, uint32_t sn, st_metric_kind_t kind, double k, int *sat)
{
    switch (kind) {
    case ST_METRIC_TIMER:
        tstat_add_scaled(&st_mcols_timer(dst, did)[dn], &st_mcols_timer(src, sid)[sn], k, sat);
        break;
    case ST_METRIC_GAUGE: {
        st_gauge_t *a = &st_mcols_gauge(dst, did)[dn];
        const st_gauge_t *b = &st_mcols_gauge(src, sid)[sn];
        if (b->n == 0)
            break;
        if (a->n == 0 || b->min < a->min)
            a->min = b->min;
        if (a->n == 0 || b->max > a->max)
            a->max = b->max;
        a->last = b->last;
        a->n = sat_add(a->n, b->n, sat);
        break;
    }
    default: {
        uint64_t *a = &st_mcols_u64(dst, did)[dn];
        *a = sat_add(*a, st_mcols_u64(src, sid)[sn], sat);
    }
    }
}

static int cmp_threads(const void *a, const void *b, const st_model_thread_t *th)
{
    const st_model_thread_t *x = &th[*(const size_t *)a], *y = &th[*(const size_t *)b];
    if (x->has_rank != y->has_rank)
        return x->has_rank - y->has_rank;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static const st_model_thread_t *sort_base;
static int cmp_thread_idx(const void *a, const void *b) { return cmp_threads(a, b, sort_base); }

/* Puts the output threads in (rank, thread number) order. */
static int sort_threads(st_profile_t *p)
{
    size_t n = p->nthreads;
    if (n < 2)
        return 0;
    size_t *idx = malloc((n + 1) * sizeof *idx);
    st_pathtab_t *paths = malloc((n + 1) * sizeof *paths);
    st_model_thread_t *ths = malloc((n + 1) * sizeof *ths);
    char **names = malloc((n + 1) * sizeof *names);
    if (!idx || !paths || !ths || !names) {
        free(idx);
        free(paths);
        free(ths);
        free(names);
        return ST_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    sort_base = p->threads;
    qsort(idx, n, sizeof *idx, cmp_thread_idx);
    for (size_t i = 0; i < n; i++) {
        paths[i] = p->paths[idx[i]];
        ths[i] = p->threads[idx[i]];
        names[i] = p->thread_names[idx[i]];
    }
    memcpy(p->paths, paths, n * sizeof *paths);
    memcpy(p->threads, ths, n * sizeof *ths);
    memcpy(p->thread_names, names, n * sizeof *names);
    free(idx);
    free(paths);
    free(ths);
    free(names);
    st_profile_sync(p);
    return 0;
}

static int merge_thread(st_profile_t *out, const st_model_t *m, const st_model_thread_t *th,
                        remap_t *rm, int flags, uint32_t *contrib,
                        uint32_t weight, int *sat)
{
    int has_rank = th->has_rank && !(flags & ST_MERGE_SUM_RANKS);
    uint32_t rank = has_rank ? th->rank : 0;
    size_t ti;
    for (ti = 0; ti < out->nthreads; ti++) {
        const st_model_thread_t *o = &out->threads[ti];
        if (o->index == th->index && o->has_rank == has_rank && o->rank == rank)
            break;
    }
    if (ti == out->nthreads &&
        st_profile_add_thread(out, th->index, th->tid, th->name, has_rank, rank) < 0)
        return ST_ENOMEM;
    contrib[ti] += weight;
    st_pathtab_t *dst = &out->paths[ti];
    const st_pathtab_t *src = th->paths;
    dst->dropped = sat_add(dst->dropped, src->dropped, sat);
    uint32_t *map = malloc((size_t)src->nnodes * sizeof *map);
    if (!map)
        return ST_ENOMEM;
    map[0] = 0;
    int rc = 0;
    for (uint32_t i = 1; i < src->nnodes; i++) {
        const st_path_t *n = &src->nodes[i];
        uint32_t l = n->label;
        if (rm->labels[l] == UINT32_MAX) {
            /* the function first: a label is its text and its function */
            uint32_t loc = st_loctab_of(m->locs, l), oloc = ST_LOC_NONE;
            if (loc != ST_LOC_NONE) {
                if (rm->locs[loc] == UINT32_MAX) {
                    const st_loc_t *lc = st_loctab_get(m->locs, loc);
                    if (st_loctab_add_qual(&out->locs, st_loctab_str(m->locs, lc->file), lc->line,
                                           st_loctab_str(m->locs, lc->name),
                                           st_loctab_str(m->locs, lc->qual), &rm->locs[loc]) < 0) {
                        rc = ST_ENOMEM;
                        break;
                    }
                }
                oloc = rm->locs[loc];
            }
            const char *text = st_intern_str(m->labels, l);
            if (st_intern_tagged(&out->labels, text, strlen(text), oloc, &rm->labels[l]) < 0 ||
                (oloc != ST_LOC_NONE && st_loctab_set_id(&out->locs, rm->labels[l], oloc) < 0)) {
                rc = ST_ENOMEM;
                break;
            }
        }
        uint32_t parent = n->parent < i ? map[n->parent] : ST_PATH_NONE;
        uint32_t c = parent == ST_PATH_NONE ? ST_PATH_NONE
                                            : st_pathtab_child(dst, parent, rm->labels[l]);
        map[i] = c;
        if (c == ST_PATH_NONE) {
            if (dst->failed) {
                rc = ST_ENOMEM;
                break;
            }
            continue;
        }
        for (uint32_t j = 0; j < src->cols.ncols; j++)
            if (rm->metric[j] != ST_METRIC_NONE)
                cell_add(&dst->cols, rm->metric[j], c, &src->cols, j, i, src->cols.kinds[j],
                         rm->k[j], sat);
    }
    free(map);
    return rc;
}

/* The sections only a run writes: the timelines' counts add up; each sampled
 * metric, matched by name, keeps its range, with a mean weighted by the runs'
 * samples; the sampling frequency and GPU note are the first input's that has
 * them. Returns 0 or ST_ENOMEM. */
static int merge_run_sections(st_profile_t *out, const st_model_t *m, int *sat)
{
    st_model_t *om = &out->model;
    if (m->has_trace) {
        om->has_trace = 1;
        om->trace_events = sat_add(om->trace_events, m->trace_events, sat);
        om->trace_bytes = sat_add(om->trace_bytes, m->trace_bytes, sat);
        om->trace_dropped = sat_add(om->trace_dropped, m->trace_dropped, sat);
        om->trace_too_deep = sat_add(om->trace_too_deep, m->trace_too_deep, sat);
        om->trace_write_s += m->trace_write_s;
    }
    /* line timings: the same function's lines summed over the runs and ranks, as
     * line_profiler sums .lprof files */
    for (size_t i = 0; i < m->nlfuncs; i++)
        if (st_profile_add_lfunc(out, &m->lfuncs[i]) < 0)
            return ST_ENOMEM;
    out->line_time |= m->line_time;
    /* the lines holding memory: summed over the runs and ranks */
    for (size_t i = 0; i < m->nmemlines; i++)
        if (st_profile_add_memline(out, &m->memlines[i]) < 0)
            return ST_ENOMEM;
    if (m->nmemlines)
        st_profile_memlines_done(out);
    /* memory over time: the first run's (runs and ranks do not share one clock) */
    if (m->memtime && !out->has_memtime && st_profile_set_memtime(out, m->memtime) < 0)
        return ST_ENOMEM;
    /* the GPU's kernels and copies: summed over the runs and ranks */
    if (m->gpu && st_profile_add_gpu(out, m->gpu) < 0)
        return ST_ENOMEM;
    if (m->line_memory && !out->line_memory[0])
        snprintf(out->line_memory, sizeof out->line_memory, "%s", m->line_memory);
    if (m->stacks) {
        st_model_stacks_t *o = &out->stacks;
        const st_model_stacks_t *x = m->stacks;
        if (!out->has_stacks) {
            out->has_stacks = 1;
            o->freq = x->freq;
            snprintf(out->stacks_clock, sizeof out->stacks_clock, "%s", x->clock ? x->clock : "");
        }
        o->threads = sat_add(o->threads, x->threads, sat);
        o->signals = sat_add(o->signals, x->signals, sat);
        o->periods = sat_add(o->periods, x->periods, sat);
        o->promised = sat_add(o->promised, x->promised, sat);
        o->lost = sat_add(o->lost, x->lost, sat);
        o->unreadable = sat_add(o->unreadable, x->unreadable, sat);
        o->no_python = sat_add(o->no_python, x->no_python, sat);
        o->unnamed = sat_add(o->unnamed, x->unnamed, sat);
        o->left_out = sat_add(o->left_out, x->left_out, sat);
        o->delayed = sat_add(o->delayed, x->delayed, sat);
        o->self_cpu_s += x->self_cpu_s;
        for (size_t i = 0; i < x->nlines; i++)
            if (st_profile_add_line(out, x->lines[i].function, x->lines[i].file,
                                    x->lines[i].line, x->lines[i].periods) < 0)
                return ST_ENOMEM;
        if (x->rated) { /* the lowest and highest over every run's threads */
            int first = o->rated == 0;
            o->rate_min = first || x->rate_min < o->rate_min ? x->rate_min : o->rate_min;
            o->rate_max = first || x->rate_max > o->rate_max ? x->rate_max : o->rate_max;
            o->prate_min = first || x->prate_min < o->prate_min ? x->prate_min : o->prate_min;
            o->prate_max = first || x->prate_max > o->prate_max ? x->prate_max : o->prate_max;
            o->rated = sat_add(o->rated, x->rated, sat);
        }
        st_profile_sync(out);
    }
    if (m->nsampled == 0)
        return 0;
    double w0 = (double)om->nsamples, w1 = (double)m->nsamples;
    for (size_t i = 0; i < m->nsampled; i++) {
        const st_model_metric_t *x = &m->sampled[i];
        size_t j = 0;
        while (j < out->nsampled && strcmp(out->sampled[j].name, x->name) != 0)
            j++;
        if (j < out->nsampled) {
            st_model_metric_t *o = &out->sampled[j];
            if (w0 + w1 > 0)
                o->mean += (x->mean - o->mean) * w1 / (w0 + w1);
            o->min = x->min < o->min ? x->min : o->min;
            o->max = x->max > o->max ? x->max : o->max;
            continue;
        }
        st_model_metric_t *a = realloc(out->sampled, (out->nsampled + 1) * sizeof *a);
        if (!a)
            return ST_ENOMEM;
        out->sampled = a;
        char *name = strdup(x->name), *units = strdup(x->units ? x->units : "");
        if (!name || !units) {
            free(name);
            free(units);
            return ST_ENOMEM;
        }
        a[out->nsampled++] = (st_model_metric_t){name, units, x->min, x->mean, x->max};
    }
    om->nsamples = sat_add(om->nsamples, m->nsamples, sat);
    om->sampler_cpu_s += m->sampler_cpu_s;
    if (om->sampling_freq == 0)
        om->sampling_freq = m->sampling_freq;
    if (!out->gpu_note && m->gpu_note && !(out->gpu_note = strdup(m->gpu_note)))
        return ST_ENOMEM;
    st_profile_sync(out);
    return 0;
}

/* The output metric of each input metric merged: those the input reports (the wall
 * timer always: its count is the calls), found or registered by name; timers of
 * the wall and CPU clocks in ns. A metric whose name the output has with another
 * kind is not merged. */
static int map_metrics(st_profile_t *out, const st_model_t *m, remap_t *rm)
{
    for (uint32_t j = 0; j < ST_MCOLS_MAX; j++) {
        rm->metric[j] = ST_METRIC_NONE;
        rm->k[j] = 1.0;
    }
    for (uint32_t j = 0; m->metrics && j < m->metrics->n && j < ST_MCOLS_MAX; j++) {
        const st_metric_def_t *d = st_metrics_get(m->metrics, j);
        if (j != ST_TIMER_WALL && !st_model_reports(m, j))
            continue;
        int clock = d->kind == ST_METRIC_TIMER && j < ST_NTIMERS;
        int rc = st_profile_add_metric(out, d->name, clock ? "ns" : d->unit, d->desc, d->kind,
                                       &rm->metric[j]);
        if (rc == ST_ENOMEM)
            return rc;
        if (rc < 0)
            rm->metric[j] = ST_METRIC_NONE;
        if (clock)
            rm->k[j] = m->ns_per_tick[j];
    }
    return 0;
}

int st_merge_begin(st_merger_t *mg, st_profile_t *out, int flags)
{
    memset(mg, 0, sizeof *mg);
    mg->out = out;
    mg->flags = flags;
    mg->comps = ~0u;
    return st_profile_init(out) < 0 ? ST_ENOMEM : 0;
}

int st_merge_add(st_merger_t *mg, const st_model_t *m)
{
    st_profile_t *out = mg->out;
    st_model_t *om = &out->model;
    mg->comps &= m->components;
    if (mg->n == 0) {
        if (m->settings) {
            st_settings_free(&out->settings);
            out->have_settings = 0;
            if (st_settings_copy(&out->settings, m->settings) < 0)
                return ST_ENOMEM;
            out->have_settings = 1;
        }
        for (size_t c = 0; c < m->ncommand; c++) {
            char **cmd = realloc(out->command, (out->ncommand + 1) * sizeof *cmd);
            if (!cmd)
                return ST_ENOMEM;
            out->command = cmd;
            if (!(cmd[out->ncommand] = strdup(m->command[c])))
                return ST_ENOMEM;
            out->ncommand++;
        }
        out->python_version = dup_or_null(m->python_version);
        out->clock_name = dup_or_null(m->clock_name);
        out->host = dup_or_null(m->host);
        om->pid = m->pid;
        om->start_ns = m->start_ns;
        om->end_ns = m->end_ns;
    }
    mg->n++;
    if (m->start_ns && (m->start_ns < om->start_ns || !om->start_ns))
        om->start_ns = m->start_ns;
    if (m->end_ns > om->end_ns)
        om->end_ns = m->end_ns;
    om->dropped = sat_add(om->dropped, m->dropped, &mg->saturated);
    if (merge_run_sections(out, m, &mg->saturated) < 0)
        return ST_ENOMEM;
    if (m->nruns > mg->maxruns_in)
        mg->maxruns_in = m->nruns;
    remap_t rm;
    size_t nl = (size_t)st_intern_count(m->labels) + 1, nloc = (m->locs ? m->locs->nlocs : 0) + 1;
    rm.labels = malloc(nl * sizeof *rm.labels);
    rm.locs = malloc(nloc * sizeof *rm.locs);
    int rc = 0;
    if (!rm.labels || !rm.locs) {
        rc = ST_ENOMEM;
        goto done;
    }
    memset(rm.labels, 0xff, nl * sizeof *rm.labels);
    memset(rm.locs, 0xff, nloc * sizeof *rm.locs);
    rc = map_metrics(out, m, &rm);
    for (size_t t = 0; t < m->nthreads && rc == 0; t++) {
        if (out->nthreads + 1 > mg->capc) {
            size_t cap = mg->capc ? mg->capc * 2 : 16;
            uint32_t *c = realloc(mg->contrib, cap * sizeof *c);
            if (!c) {
                rc = ST_ENOMEM;
                break;
            }
            memset(c + mg->capc, 0, (cap - mg->capc) * sizeof *c);
            mg->contrib = c;
            mg->capc = cap;
        }
        rc = merge_thread(out, m, &m->threads[t], &rm, mg->flags, mg->contrib,
                          m->nruns > 1 ? m->nruns : 1, &mg->saturated);
    }
done:
    free(rm.labels);
    free(rm.locs);
    st_profile_sync(out);
    return rc;
}

int st_merge_end(st_merger_t *mg)
{
    st_profile_t *out = mg->out;
    st_model_t *om = &out->model;
    int rc = sort_threads(out);
    /* runs: the most inputs any one output thread drew from (a merged input
     * counts as the runs it holds) */
    uint32_t runs = 0;
    for (size_t t = 0; t < out->nthreads && mg->contrib; t++)
        if (mg->contrib[t] > runs)
            runs = mg->contrib[t];
    free(mg->contrib);
    mg->contrib = NULL;
    if (rc < 0)
        return rc;
    st_profile_lines_done(out); /* one row a line over the runs */
    /* runs that share no component: their counts (every profile has them); runs
     * that only sampled stacks timed nothing: none */
    unsigned comps = mg->n && (mg->comps || out->has_stacks) ? mg->comps
                                                              : 1u << ST_COMP_TRIP_COUNT;
    om->components = comps;
    om->nruns = runs > mg->maxruns_in ? runs : mg->maxruns_in;
    /* ranks kept (threads are sorted by rank now) */
    uint32_t nr = 0, last = 0;
    int have = 0;
    for (size_t t = 0; t < out->nthreads; t++) {
        if (!out->threads[t].has_rank)
            continue;
        if (!have || out->threads[t].rank != last)
            nr++;
        last = out->threads[t].rank;
        have = 1;
    }
    om->nranks = nr > 1 ? nr : 0;
    om->has_rank = nr == 1;
    om->rank = nr == 1 ? last : 0;
    st_profile_sync(out);
    return 0;
}

int st_merge(st_profile_t *out, const st_model_t *const *in, size_t n, int flags, st_msg_t *msg)
{
    st_merger_t mg;
    int rc = st_merge_begin(&mg, out, flags);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = st_merge_add(&mg, in[i]);
    if (rc == 0)
        rc = st_merge_end(&mg);
    else
        free(mg.contrib);
    if (rc < 0) {
        st_profile_free(out);
        return st_msg_set(msg, ST_ENOMEM, "out of memory merging");
    }
    return 0;
}
