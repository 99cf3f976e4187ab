#include "output/json.h"

#include <math.h>
#include <string.h>

#include "base/number.h"
#include "core/components.h"
#include "output/gpu.h"

/* A double JSON can hold: nan and inf are 0. */
static double json_number(double x) { return isfinite(x) ? x : 0.0; }

static void put_number(st_strbuf_t *out, double x) { st_strbuf_g17(out, json_number(x)); }

/* A time in whole ns, from ticks: an exact integer (no detour through a double when
 * ticks are ns already), held at ST_COUNT_MAX, which the reader takes. */
static uint64_t ns_of(uint64_t ticks, double k)
{
    uint64_t ns = ticks;
    if (k != 1.0) {
        double d = nearbyint((double)ticks * k);
        ns = d >= 0 && d < (double)ST_COUNT_MAX ? (uint64_t)d : d > 0 ? ST_COUNT_MAX : 0;
    }
    return ns > ST_COUNT_MAX ? ST_COUNT_MAX : ns;
}

/* Encoding in place, for what every node writes: a literal (its length known when
 * compiled), a whole number, a double as "%.17g". Each returns where the next
 * byte goes; the caller has the room (st_strbuf_room). */
#define PUT_LIT(p, lit) (memcpy((p), (lit), sizeof(lit) - 1), (p) + sizeof(lit) - 1)
static char *put_u64_at(char *p, uint64_t v) { return p + st_num_u64(p, v); }
static char *put_g17_at(char *p, double v) { return p + st_text_g17(p, json_number(v)); }

static void write_metadata(st_strbuf_t *out, const st_model_t *m)
{
    st_strbuf_puts(out, "  \"metadata\": {\n    \"command\": ");
    st_strbuf_json_strings(out, m->command, m->ncommand);
    st_strbuf_puts(out, ",\n    \"python_version\": ");
    st_strbuf_json_string(out, m->python_version ? m->python_version : "");
    st_strbuf_printf(out, ",\n    \"pid\": %ld,\n    \"host\": ", m->pid);
    st_strbuf_json_string(out, m->host ? m->host : "");
    st_strbuf_printf(out,
                     ",\n    \"start_time_ns\": %llu,\n    \"end_time_ns\": %llu,"
                     "\n    \"clock\": ",
                     (unsigned long long)m->start_ns, (unsigned long long)m->end_ns);
    st_strbuf_json_string(out, m->clock_name ? m->clock_name : "");
    st_strbuf_printf(out, ",\n    \"dropped_calls\": %llu,\n    \"strata_version\": ",
                     (unsigned long long)m->dropped);
    st_strbuf_json_string(out, STRATA_VERSION);
    if (m->has_rank)
        st_strbuf_printf(out, ",\n    \"rank\": %u", m->rank);
    if (m->nranks)
        st_strbuf_printf(out, ",\n    \"ranks\": %u", m->nranks);
    if (m->nruns > 1)
        st_strbuf_printf(out, ",\n    \"merged_runs\": %u", m->nruns);
    if (m->nchildren) {
        st_strbuf_puts(out, ",\n    \"children\": [");
        for (size_t i = 0; i < m->nchildren; i++) {
            const st_model_child_t *c = &m->children[i];
            st_strbuf_printf(out, "%s\n      {\"pid\": ", i ? "," : "");
            if (c->pid)
                st_strbuf_printf(out, "%ld", c->pid);
            else
                st_strbuf_puts(out, "null");
            st_strbuf_puts(out, c->folder ? ", \"folder\": " : ", \"not_followed\": ");
            st_strbuf_json_string(out, c->folder ? c->folder : c->not_followed);
            st_strbuf_puts(out, ", \"command\": ");
            st_strbuf_json_strings(out, c->command, c->ncommand);
            st_strbuf_putc(out, '}');
        }
        st_strbuf_puts(out, "\n    ]");
    }
    st_strbuf_puts(out, "\n  },\n");
}

/* Where each function's code lives: nodes refer to these by index. */
static void write_functions(st_strbuf_t *out, const st_model_t *m)
{
    if (!m->locs || m->locs->nlocs == 0)
        return;
    st_strbuf_puts(out, "  \"functions\": [");
    for (uint32_t i = 0; i < m->locs->nlocs; i++) {
        const st_loc_t *l = st_loctab_get(m->locs, i);
        st_strbuf_puts(out, i ? ",\n    {\"file\": " : "\n    {\"file\": ");
        st_strbuf_json_string(out, st_loctab_str(m->locs, l->file));
        st_strbuf_printf(out, ", \"line\": %d, \"name\": ", (int)l->line);
        st_strbuf_json_string(out, st_loctab_str(m->locs, l->name));
        if (l->qual != l->name) {
            st_strbuf_puts(out, ", \"qualname\": ");
            st_strbuf_json_string(out, st_loctab_str(m->locs, l->qual));
        }
        st_strbuf_putc(out, '}');
    }
    st_strbuf_puts(out, "\n  ],\n");
}

static void write_settings(st_strbuf_t *out, const st_model_t *m)
{
    st_strbuf_puts(out, "  \"settings\": {");
    st_strbuf_t v;
    st_strbuf_init(&v);
    for (int i = 0; i < ST_NSETTINGS; i++) {
        const st_setting_def_t *d = st_setting_def((st_setting_id_t)i);
        st_strbuf_puts(out, i ? ",\n    " : "\n    ");
        st_strbuf_json_string(out, d->name);
        st_strbuf_puts(out, ": {\"value\": ");
        st_strbuf_reset(&v);
        st_settings_format(m->settings, (st_setting_id_t)i, &v);
        st_strbuf_json_string(out, st_strbuf_cstr(&v));
        st_strbuf_puts(out, ", \"source\": ");
        st_strbuf_json_string(out, st_source_name(m->settings->v[i].source));
        st_strbuf_putc(out, '}');
    }
    if (v.failed)
        out->failed = 1;
    st_strbuf_free(&v);
    st_strbuf_puts(out, "\n  },\n");
}

static void write_components(st_strbuf_t *out, const st_model_t *m)
{
    st_strbuf_puts(out, "  \"components\": [");
    int first = 1;
    for (int c = 0; c < ST_NCOMPONENTS; c++) {
        if (!(m->components & (1u << c)))
            continue;
        const st_component_info_t *info = st_component_info((st_component_t)c);
        st_strbuf_puts(out, first ? "\n    {\"name\": " : ",\n    {\"name\": ");
        first = 0;
        st_strbuf_json_string(out, info->name);
        st_strbuf_puts(out, ", \"title\": ");
        st_strbuf_json_string(out, info->title);
        st_strbuf_puts(out, ", \"units\": ");
        st_strbuf_json_string(out, info->timer < 0 ? "calls" : "ns");
        st_strbuf_putc(out, '}');
    }
    st_strbuf_puts(out, "\n  ],\n");
}

/* The ns per unit of a metric's timer cells: the model's tick conversion for the
 * wall and CPU timers, 1 for any other timer (kept in its own unit). */
static double timer_scale(const st_model_t *m, uint32_t id)
{
    return id < ST_NTIMERS ? m->ns_per_tick[id] : 1.0;
}

/* The metrics the nodes carry (st_model_reports, one bit each): the registry's,
 * less the timers not chosen and the metrics nothing was recorded in. */
static uint32_t reported(const st_model_t *m)
{
    uint32_t mask = 0;
    for (uint32_t id = 0; m->metrics && id < m->metrics->n && id < ST_MCOLS_MAX; id++)
        if (st_model_reports(m, id))
            mask |= 1u << id;
    return mask;
}

static void write_metrics(st_strbuf_t *out, const st_model_t *m, uint32_t mask)
{
    st_strbuf_puts(out, "  \"metrics\": [");
    int first = 1;
    for (uint32_t id = 0; m->metrics && id < m->metrics->n && id < ST_MCOLS_MAX; id++) {
        if (!((mask >> id) & 1u))
            continue;
        const st_metric_def_t *d = st_metrics_get(m->metrics, id);
        st_strbuf_puts(out, first ? "\n    {\"name\": " : ",\n    {\"name\": ");
        first = 0;
        st_strbuf_json_string(out, d->name);
        st_strbuf_puts(out, ", \"unit\": ");
        st_strbuf_json_string(out, d->kind == ST_METRIC_TIMER && id < ST_NTIMERS ? "ns" : d->unit);
        st_strbuf_puts(out, ", \"kind\": ");
        st_strbuf_json_string(out, st_metric_kind_name(d->kind));
        st_strbuf_puts(out, ", \"description\": ");
        st_strbuf_json_string(out, d->desc);
        st_strbuf_putc(out, '}');
    }
    st_strbuf_puts(out, first ? "],\n" : "\n  ],\n");
}

/* One timer cell: {"sum", "self", "min", "max", "mean", "var"}, in ns. */
static void put_timer(st_strbuf_t *out, const st_tstat_t *a, uint64_t calls, double k)
{
    double mean, var;
    st_tstat_stats(a, &mean, &var);
    char *p0 = st_strbuf_room(out, 4 * 20 + 2 * 32 + 64), *p = p0;
    if (!p)
        return;
    p = put_u64_at(PUT_LIT(p, "{\"sum\": "), ns_of(a->sum, k));
    p = put_u64_at(PUT_LIT(p, ", \"self\": "), ns_of(a->self, k));
    p = put_u64_at(PUT_LIT(p, ", \"min\": "), ns_of(calls ? a->min : 0, k));
    p = put_u64_at(PUT_LIT(p, ", \"max\": "), ns_of(a->max, k));
    p = put_g17_at(PUT_LIT(p, ", \"mean\": "), mean * k);
    p = put_g17_at(PUT_LIT(p, ", \"var\": "), var * k * k);
    *p++ = '}';
    st_strbuf_commit(out, (size_t)(p - p0));
}

/* A node's cell of metric `id`, after its name; empty cells of the other kinds are
 * left out. Returns 1 when something was written. */
static int put_cell(st_strbuf_t *out, const st_model_t *m, const st_model_thread_t *th,
                    uint32_t id, uint32_t node, uint64_t calls, int first)
{
    const st_mcols_t *c = &th->paths->cols;
    const st_metric_def_t *d = st_metrics_get(m->metrics, id);
    if (id >= c->ncols || c->kinds[id] != d->kind)
        return 0;
    uint64_t v = 0;
    const st_gauge_t *g = NULL;
    if (d->kind == ST_METRIC_GAUGE) {
        g = &st_mcols_gauge(c, id)[node];
        if (g->n == 0)
            return 0;
    } else if (d->kind != ST_METRIC_TIMER) {
        v = st_mcols_u64(c, id)[node];
        if (v == 0)
            return 0;
    }
    st_strbuf_puts(out, first ? "" : ", ");
    st_strbuf_json_string(out, d->name);
    st_strbuf_puts(out, ": ");
    if (d->kind == ST_METRIC_TIMER) {
        put_timer(out, &st_mcols_timer(c, id)[node], calls, timer_scale(m, id));
    } else if (g) {
        st_strbuf_puts(out, "{\"n\": ");
        st_strbuf_u64(out, g->n > ST_COUNT_MAX ? ST_COUNT_MAX : g->n);
        st_strbuf_puts(out, ", \"last\": ");
        put_number(out, g->last);
        st_strbuf_puts(out, ", \"min\": ");
        put_number(out, g->min);
        st_strbuf_puts(out, ", \"max\": ");
        put_number(out, g->max);
        st_strbuf_putc(out, '}');
    } else {
        st_strbuf_u64(out, v > ST_COUNT_MAX ? ST_COUNT_MAX : v);
    }
    return 1;
}

static void write_node(st_strbuf_t *out, const st_model_t *m, const st_model_thread_t *th,
                       uint32_t id, uint32_t mask)
{
    const st_path_t *n = &th->paths->nodes[id];
    uint64_t calls = st_model_calls(th, id);
    char *p0 = st_strbuf_room(out, 3 * 20 + 64), *p = p0;
    if (!p)
        return;
    p = put_u64_at(PUT_LIT(p, "        {\"id\": "), id);
    p = PUT_LIT(p, ", \"parent\": ");
    p = n->parent == 0 ? PUT_LIT(p, "-1") : put_u64_at(p, n->parent);
    p = put_u64_at(PUT_LIT(p, ", \"depth\": "), n->depth);
    p = PUT_LIT(p, ", \"label\": ");
    st_strbuf_commit(out, (size_t)(p - p0));
    st_strbuf_json_string(out, st_intern_str(m->labels, n->label));
    uint32_t loc = st_loctab_of(m->locs, n->label);
    if (!(p0 = p = st_strbuf_room(out, 2 * 20 + 64)))
        return;
    if (loc != ST_LOC_NONE)
        p = put_u64_at(PUT_LIT(p, ", \"function\": "), loc);
    p = put_u64_at(PUT_LIT(p, ", \"count\": "), calls > ST_COUNT_MAX ? ST_COUNT_MAX : calls);
    p = PUT_LIT(p, ", \"metrics\": {");
    st_strbuf_commit(out, (size_t)(p - p0));
    int first = 1;
    for (uint32_t k = 0; m->metrics && k < m->metrics->n && k < ST_MCOLS_MAX; k++)
        if (((mask >> k) & 1u) && put_cell(out, m, th, k, id, calls, first))
            first = 0;
    st_strbuf_puts(out, "}}");
}

/* What the timeline holds and lost, when the run traced. */
static void write_trace(st_strbuf_t *out, const st_model_t *m)
{
    if (!m->has_trace)
        return;
    st_strbuf_printf(out,
                     "  \"trace\": {\"events\": %llu, \"bytes\": %llu, \"dropped_calls\": %llu, "
                     "\"too_deep_calls\": %llu, \"write_seconds\": %.6f},\n",
                     (unsigned long long)m->trace_events, (unsigned long long)m->trace_bytes,
                     (unsigned long long)m->trace_dropped, (unsigned long long)m->trace_too_deep,
                     json_number(m->trace_write_s));
}

/* The process sampler's metrics, summarised, when it ran. */
static void write_sampling(st_strbuf_t *out, const st_model_t *m)
{
    if (!m->nsampled)
        return;
    st_strbuf_printf(out,
                     "  \"process_sampling\": {\"frequency\": %.17g, \"samples\": %llu, "
                     "\"sampler_cpu_s\": %.17g, \"gpu_note\": ",
                     json_number(m->sampling_freq), (unsigned long long)m->nsamples,
                     json_number(m->sampler_cpu_s));
    if (m->gpu_note)
        st_strbuf_json_string(out, m->gpu_note);
    else
        st_strbuf_puts(out, "null");
    st_strbuf_puts(out, ", \"metrics\": [");
    for (size_t k = 0; k < m->nsampled; k++) {
        const st_model_metric_t *x = &m->sampled[k];
        st_strbuf_puts(out, k ? ",\n    {\"name\": " : "\n    {\"name\": ");
        st_strbuf_json_string(out, x->name);
        st_strbuf_puts(out, ", \"units\": ");
        st_strbuf_json_string(out, x->units);
        st_strbuf_printf(out, ", \"min\": %.17g, \"mean\": %.17g, \"max\": %.17g}",
                         json_number(x->min), json_number(x->mean), json_number(x->max));
    }
    st_strbuf_puts(out, "\n  ]},\n");
}

/* What the stack sampler did, when one ran. */
static void write_stacks(st_strbuf_t *out, const st_model_t *m)
{
    const st_model_stacks_t *st = m->stacks;
    if (!st)
        return;
    st_strbuf_printf(out, "  \"stack_sampling\": {\"frequency\": %.17g, \"clock\": ",
                     json_number(st->freq));
    st_strbuf_json_string(out, st->clock ? st->clock : "");
    st_strbuf_printf(out,
                     ", \"threads\": %llu, \"samples\": %llu, \"periods\": %llu, "
                     "\"promised_periods\": %llu, "
                     "\"lost\": %llu, \"unreadable\": %llu, \"no_python\": %llu, "
                     "\"unnamed_frames\": %llu, \"left_out\": %llu, \"delayed\": %llu, "
                     "\"sampler_cpu_s\": %.17g",
                     (unsigned long long)st->threads, (unsigned long long)st->signals,
                     (unsigned long long)st->periods, (unsigned long long)st->promised,
                     (unsigned long long)st->lost,
                     (unsigned long long)st->unreadable, (unsigned long long)st->no_python,
                     (unsigned long long)st->unnamed, (unsigned long long)st->left_out,
                     (unsigned long long)st->delayed, json_number(st->self_cpu_s));
    /* the effective rate per thread: the rated threads' lowest and highest */
    st_strbuf_printf(out,
                     ", \"threads_rated\": %llu, \"rate_min\": %.17g, \"rate_max\": %.17g, "
                     "\"period_rate_min\": %.17g, \"period_rate_max\": %.17g",
                     (unsigned long long)st->rated, json_number(st->rate_min),
                     json_number(st->rate_max), json_number(st->prate_min),
                     json_number(st->prate_max));
    /* the lines the innermost Python frames ran, most periods first */
    if (st->nlines) {
        st_strbuf_puts(out, ", \"lines\": [");
        for (size_t i = 0; i < st->nlines; i++) {
            const st_model_line_t *l = &st->lines[i];
            st_strbuf_puts(out, i ? ",\n    {\"function\": " : "\n    {\"function\": ");
            st_strbuf_json_string(out, l->function);
            st_strbuf_puts(out, ", \"file\": ");
            st_strbuf_json_string(out, l->file);
            st_strbuf_printf(out, ", \"line\": %u, \"periods\": %llu}", l->line,
                             (unsigned long long)l->periods);
        }
        st_strbuf_puts(out, "\n  ]");
    }
    st_strbuf_puts(out, "},\n");
}

/* The line profiles (--lines, --memory): what was measured, then per function its
 * lines [line, hits, ns] (with memory: [line, hits, ns, occurrences, increment,
 * memory], bytes) and the source of its block (null when its file was not found). */
static void write_line_timings(st_strbuf_t *out, const st_model_t *m)
{
    if (!m->nlfuncs)
        return;
    st_strbuf_printf(out, "  \"line_time\": %s,\n  \"line_memory\": ",
                     m->line_time ? "true" : "false");
    if (m->line_memory)
        st_strbuf_json_string(out, m->line_memory);
    else
        st_strbuf_puts(out, "null");
    st_strbuf_puts(out, ",\n  \"line_timings\": [");
    for (size_t i = 0; i < m->nlfuncs; i++) {
        const st_model_lfunc_t *f = &m->lfuncs[i];
        st_strbuf_puts(out, i ? ",\n    {\"function\": " : "\n    {\"function\": ");
        st_strbuf_json_string(out, f->function);
        st_strbuf_puts(out, ", \"file\": ");
        st_strbuf_json_string(out, f->file);
        st_strbuf_printf(out, ", \"first_line\": %u, \"lines\": [", f->first_line);
        for (size_t j = 0; j < f->nrows; j++) {
            const st_model_lrow_t *r = &f->rows[j];
            st_strbuf_printf(out, "%s[%u, %llu, %llu", j ? ", " : "", r->line,
                             (unsigned long long)r->hits, (unsigned long long)r->ns);
            if (m->line_memory)
                st_strbuf_printf(out, ", %llu, %lld, %lld", (unsigned long long)r->occ,
                                 (long long)r->inc, (long long)r->mem);
            st_strbuf_putc(out, ']');
        }
        st_strbuf_puts(out, "], \"source\": ");
        if (!f->source) {
            st_strbuf_puts(out, "null}");
            continue;
        }
        st_strbuf_json_strings(out, f->source, f->nsource);
        st_strbuf_putc(out, '}');
    }
    st_strbuf_puts(out, "\n  ],\n");
}

/* Memory over time (--memory): the samples (seconds since the start, resident and
 * heap bytes) and the calls of chosen functions. */
static void write_memtime(st_strbuf_t *out, const st_model_t *m)
{
    const st_model_memtime_t *mt = m->memtime;
    if (!mt)
        return;
    st_strbuf_printf(out, "  \"memory_over_time\": {\"interval_s\": %.17g, \"t\": [",
                     json_number(mt->interval_s));
    for (size_t i = 0; i < mt->n; i++) {
        if (i)
            st_strbuf_puts(out, ", ");
        put_number(out, mt->t[i]);
    }
    st_strbuf_puts(out, "],\n    \"resident\": [");
    for (size_t i = 0; i < mt->n; i++)
        st_strbuf_printf(out, "%s%lld", i ? ", " : "", (long long)mt->rss[i]);
    st_strbuf_puts(out, "],\n    \"heap\": ");
    if (mt->heap) {
        st_strbuf_putc(out, '[');
        for (size_t i = 0; i < mt->n; i++)
            st_strbuf_printf(out, "%s%lld", i ? ", " : "", (long long)mt->heap[i]);
        st_strbuf_putc(out, ']');
    } else {
        st_strbuf_puts(out, "null");
    }
    st_strbuf_puts(out, ",\n    \"calls\": [");
    for (size_t i = 0; i < mt->ncalls; i++) {
        const st_model_memcall_t *c = &mt->calls[i];
        st_strbuf_puts(out, i ? ", [" : "[");
        st_strbuf_json_string(out, c->function);
        st_strbuf_printf(out, ", %.17g, %lld, %.17g, %lld, %u]", json_number(c->t0),
                         (long long)c->m0, json_number(c->t1), (long long)c->m1, c->level);
    }
    st_strbuf_printf(out, "], \"calls_dropped\": %llu},\n",
                     (unsigned long long)mt->calls_dropped);
}

/* The lines holding sampled memory at the peak and at the end. */
static void write_memlines(st_strbuf_t *out, const st_model_t *m)
{
    if (!m->nmemlines)
        return;
    st_strbuf_puts(out, "  \"memory_lines\": [");
    for (size_t i = 0; i < m->nmemlines; i++) {
        const st_model_memline_t *l = &m->memlines[i];
        st_strbuf_puts(out, i ? ",\n    {\"function\": " : "\n    {\"function\": ");
        st_strbuf_json_string(out, l->function);
        st_strbuf_puts(out, ", \"file\": ");
        st_strbuf_json_string(out, l->file);
        st_strbuf_printf(out, ", \"line\": %u, \"peak\": %llu, \"exit\": %llu}", l->line,
                         (unsigned long long)l->peak, (unsigned long long)l->at_exit);
    }
    st_strbuf_puts(out, "\n  ],\n");
}

void st_json_write(st_strbuf_t *out, const st_model_t *m)
{
    st_strbuf_printf(out, "{\n  \"format_version\": %d,\n", ST_PROFILE_FORMAT_VERSION);
    write_metadata(out, m);
    write_settings(out, m);
    write_components(out, m);
    uint32_t mask = reported(m);
    write_metrics(out, m, mask);
    write_trace(out, m);
    write_sampling(out, m);
    st_gpu_json_write(out, m);
    write_stacks(out, m);
    write_line_timings(out, m);
    write_memtime(out, m);
    write_memlines(out, m);
    write_functions(out, m);
    st_strbuf_puts(out, "  \"threads\": [");
    for (size_t i = 0; i < m->nthreads; i++) {
        const st_model_thread_t *th = &m->threads[i];
        st_strbuf_printf(out, "%s\n    {\"index\": %u, \"tid\": %llu, \"name\": ", i ? "," : "",
                         th->index, (unsigned long long)th->tid);
        st_strbuf_json_string(out, th->name ? th->name : "");
        if (th->has_rank)
            st_strbuf_printf(out, ", \"rank\": %u", th->rank);
        st_strbuf_printf(out, ", \"dropped_calls\": %llu, \"nodes\": [",
                         (unsigned long long)th->paths->dropped);
        /* Nodes in id order: a parent always comes before its children. */
        for (uint32_t id = 1; id < th->paths->nnodes; id++) {
            st_strbuf_puts(out, id > 1 ? ",\n" : "\n");
            write_node(out, m, th, id, mask);
        }
        st_strbuf_puts(out, th->paths->nnodes > 1 ? "\n      ]}" : "]}");
    }
    st_strbuf_puts(out, "\n  ]\n}\n");
}
