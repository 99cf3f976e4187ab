#include "model/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int st_profile_init(st_profile_t *p)
{
    memset(p, 0, sizeof *p);
    st_intern_init(&p->labels);
    st_loctab_init(&p->locs);
    st_metrics_init(&p->metrics);
    const st_component_info_t *wall = st_component_info(ST_COMP_WALL_CLOCK);
    const st_component_info_t *cpu = st_component_info(ST_COMP_CPU_CLOCK);
    uint32_t id;
    if (st_metrics_add(&p->metrics, wall->name, "ns", wall->description, ST_METRIC_TIMER,
                       &id) < 0 ||
        st_metrics_add(&p->metrics, cpu->name, "ns", cpu->description, ST_METRIC_TIMER, &id) < 0 ||
        st_settings_init(&p->settings) < 0) {
        st_metrics_free(&p->metrics);
        return ST_ENOMEM;
    }
    p->have_settings = 1;
    st_profile_sync(p);
    return 0;
}

static void free_line(st_model_line_t *row)
{
    free((char *)row->function);
    free((char *)row->file);
}

void st_profile_lfunc_free(st_model_lfunc_t *f)
{
    free((char *)f->function);
    free((char *)f->file);
    free((void *)f->rows);
    for (size_t i = 0; i < f->nsource; i++)
        free((char *)f->source[i]);
    free((void *)f->source);
}

static void free_memtime(st_model_memtime_t *mt)
{
    free((void *)mt->t);
    free((void *)mt->rss);
    free((void *)mt->heap);
    for (size_t i = 0; i < mt->ncalls; i++)
        free((char *)mt->calls[i].function);
    free((void *)mt->calls);
    memset(mt, 0, sizeof *mt);
}

void st_profile_free(st_profile_t *p)
{
    for (size_t i = 0; i < p->nthreads; i++) {
        st_pathtab_free(&p->paths[i]);
        free(p->thread_names[i]);
    }
    free(p->paths);
    st_metrics_free(&p->metrics);
    free(p->threads);
    free(p->thread_names);
    for (size_t i = 0; i < p->ncommand; i++)
        free(p->command[i]);
    free(p->command);
    for (size_t i = 0; i < p->nsampled; i++) {
        free((char *)p->sampled[i].name);
        free((char *)p->sampled[i].units);
    }
    free(p->sampled);
    for (size_t i = 0; i < p->gpu.nkernels; i++)
        free((char *)p->kernels[i].name);
    free(p->kernels);
    for (size_t i = 0; i < p->gpu.ncopies; i++)
        free((char *)p->copies[i].direction);
    free(p->copies);
    free((char *)p->gpu.library);
    for (size_t i = 0; i < p->nlines; i++)
        free_line(&p->lines[i]);
    free(p->lines);
    for (size_t i = 0; i < p->nlfuncs; i++)
        st_profile_lfunc_free(&p->lfuncs[i]);
    free(p->lfuncs);
    free_memtime(&p->memtime);
    for (size_t i = 0; i < p->nmemlines; i++) {
        free((char *)p->memlines[i].function);
        free((char *)p->memlines[i].file);
    }
    free(p->memlines);
    st_u64map_free(&p->lfunc_index);
    st_u64map_free(&p->memline_index);
    st_u64map_free(&p->kernel_index);
    free(p->gpu_note);
    free(p->python_version);
    free(p->clock_name);
    free(p->host);
    st_intern_free(&p->labels);
    st_loctab_free(&p->locs);
    if (p->have_settings)
        st_settings_free(&p->settings);
    memset(p, 0, sizeof *p);
}

int st_profile_add_metric(st_profile_t *p, const char *name, const char *unit, const char *desc,
                          st_metric_kind_t kind, uint32_t *id)
{
    int rc = st_metrics_add(&p->metrics, name, unit, desc, kind, id);
    if (rc == 0) { /* a metric found takes the unit and description given */
        st_metric_def_t *d = &p->metrics.defs[*id];
        if (unit)
            snprintf(d->unit, sizeof d->unit, "%s", unit);
        if (desc)
            snprintf(d->desc, sizeof d->desc, "%s", desc);
    }
    for (size_t i = 0; i < p->nthreads && rc == 0; i++)
        rc = st_mcols_sync(&p->paths[i].cols, &p->metrics);
    return rc;
}

void st_profile_sync(st_profile_t *p)
{
    st_model_t *m = &p->model;
    for (size_t i = 0; i < p->nthreads; i++) {
        p->threads[i].paths = &p->paths[i];
        p->threads[i].name = p->thread_names[i];
    }
    m->labels = &p->labels;
    m->threads = p->threads;
    m->nthreads = p->nthreads;
    m->metrics = &p->metrics;
    m->ns_per_tick[0] = m->ns_per_tick[1] = 1.0;
    m->settings = &p->settings;
    m->command = (const char *const *)p->command;
    m->ncommand = p->ncommand;
    m->python_version = p->python_version;
    m->clock_name = p->clock_name;
    m->host = p->host;
    m->locs = p->locs.nlocs ? &p->locs : NULL;
    m->sampled = p->sampled;
    m->nsampled = p->nsampled;
    m->gpu_note = p->gpu_note;
    p->gpu.kernels = p->kernels;
    p->gpu.copies = p->copies;
    m->gpu = p->has_gpu ? &p->gpu : NULL;
    p->stacks.clock = p->stacks_clock;
    p->stacks.note = NULL;
    p->stacks.lines = p->lines;
    p->stacks.nlines = p->nlines;
    m->stacks = p->has_stacks ? &p->stacks : NULL;
    m->lfuncs = p->lfuncs;
    m->nlfuncs = p->nlfuncs;
    m->line_time = p->line_time;
    m->line_memory = p->line_memory[0] ? p->line_memory : NULL;
    m->memtime = p->has_memtime ? &p->memtime : NULL;
    m->memlines = p->memlines;
    m->nmemlines = p->nmemlines;
}

long st_profile_add_thread(st_profile_t *p, uint32_t index, uint64_t tid, const char *name,
                           int has_rank, uint32_t rank)
{
    if (p->nthreads == p->capthreads) {
        size_t cap = p->capthreads ? p->capthreads * 2 : 4;
        st_pathtab_t *t = realloc(p->paths, cap * sizeof *t);
        if (!t)
            return -1;
        p->paths = t;
        st_model_thread_t *th = realloc(p->threads, cap * sizeof *th);
        if (!th)
            return -1;
        p->threads = th;
        char **n = realloc(p->thread_names, cap * sizeof *n);
        if (!n)
            return -1;
        p->thread_names = n;
        p->capthreads = cap;
    }
    size_t i = p->nthreads;
    char *copy = strdup(name ? name : "");
    if (!copy)
        return -1;
    if (st_pathtab_init(&p->paths[i], &p->metrics, 0) < 0) {
        free(copy);
        return -1;
    }
    p->thread_names[i] = copy;
    memset(&p->threads[i], 0, sizeof p->threads[i]);
    p->threads[i].index = index;
    p->threads[i].tid = tid;
    p->threads[i].has_rank = has_rank;
    p->threads[i].rank = rank;
    p->nthreads++;
    st_profile_sync(p);
    return (long)i;
}

int st_profile_add_line(st_profile_t *p, const char *function, const char *file, uint32_t line,
                        uint64_t periods)
{
    if (p->nlines == p->caplines) {
        size_t cap = p->caplines ? 2 * p->caplines : 64;
        st_model_line_t *l = realloc(p->lines, cap * sizeof *l);
        if (!l)
            return ST_ENOMEM;
        p->lines = l;
        p->caplines = cap;
    }
    char *f = strdup(function), *w = strdup(file);
    if (!f || !w) {
        free(f);
        free(w);
        return ST_ENOMEM;
    }
    p->lines[p->nlines++] = (st_model_line_t){f, w, line, periods};
    return 0;
}

void st_profile_lines_done(st_profile_t *p)
{
    p->nlines = st_model_lines_coalesce(p->lines, p->nlines, free_line);
    st_profile_sync(p);
}

/* Copies f's source lines into dst (dst->source NULL on entry). */
static int copy_source(st_model_lfunc_t *dst, const st_model_lfunc_t *f)
{
    if (!f->source)
        return 0;
    char **src = calloc(f->nsource ? f->nsource : 1, sizeof *src);
    if (!src)
        return ST_ENOMEM;
    dst->source = (const char *const *)src;
    for (size_t i = 0; i < f->nsource; i++) {
        if (!(src[i] = strdup(f->source[i])))
            return ST_ENOMEM; /* the caller frees what was copied */
        dst->nsource = i + 1;
    }
    dst->nsource = f->nsource;
    return 0;
}

/* Sums rows b (ascending lines) into a's, which stay ascending. */
static int sum_rows(st_model_lfunc_t *a, const st_model_lrow_t *b, size_t nb)
{
    st_model_lrow_t *out = malloc((a->nrows + nb ? a->nrows + nb : 1) * sizeof *out);
    if (!out)
        return ST_ENOMEM;
    size_t i = 0, j = 0, n = 0;
    while (i < a->nrows || j < nb) {
        if (j == nb || (i < a->nrows && a->rows[i].line < b[j].line)) {
            out[n++] = a->rows[i++];
        } else if (i == a->nrows || b[j].line < a->rows[i].line) {
            out[n++] = b[j++];
        } else {
            out[n] = a->rows[i++];
            out[n].hits += b[j].hits;
            out[n].ns += b[j].ns;
            out[n].occ += b[j].occ;
            out[n].inc += b[j].inc;
            if (b[j].mem > out[n].mem)
                out[n].mem = b[j].mem;
            n++, j++;
        }
    }
    free((void *)a->rows);
    a->rows = out;
    a->nrows = n;
    return 0;
}

/* Finding a function's or a line's entry among many (merges of many runs) in time
 * linear in them: an index from the hash of (file, function, line) to the entry's
 * place, made again from the entries when it does not count them all (it was
 * emptied when they moved, or an entry failed). */
typedef struct {
    const char *file, *function;
    uint32_t line;
} place_t;
typedef place_t (*place_of_t)(const st_profile_t *p, size_t i);

static place_t lfunc_place(const st_profile_t *p, size_t i)
{
    return (place_t){p->lfuncs[i].file, p->lfuncs[i].function, p->lfuncs[i].first_line};
}

static place_t memline_place(const st_profile_t *p, size_t i)
{
    return (place_t){p->memlines[i].file, p->memlines[i].function, p->memlines[i].line};
}

static uint64_t place_key(place_t w)
{
    uint64_t k = st_u64map_text_key(w.function, st_u64map_text_key(w.file, w.line));
    return k == UINT64_MAX ? 0 : k;
}

/* The place of `want` among the n entries place_of reads, or UINT32_MAX with *key
 * the index's free key for it; ST_ENOMEM when the index cannot be made. */
static int64_t find_place(const st_profile_t *p, st_u64map_t *index, size_t n,
                          place_of_t place_of, place_t want, uint64_t *key)
{
    if (index->count != n) {
        st_u64map_free(index);
        *index = (st_u64map_t){0};
        for (size_t i = 0; i < n; i++) {
            uint64_t k = place_key(place_of(p, i));
            while (st_u64map_get(index, k) != UINT32_MAX)
                k = st_u64map_next_key(k);
            if (st_u64map_put(index, k, (uint32_t)i, NULL) < 0)
                return ST_ENOMEM;
        }
    }
    uint64_t k = place_key(want);
    for (;;) {
        uint32_t at = st_u64map_get(index, k);
        if (at == UINT32_MAX)
            break;
        place_t a = place_of(p, at);
        if (a.line == want.line && strcmp(a.file, want.file) == 0 &&
            strcmp(a.function, want.function) == 0)
            return at;
        k = st_u64map_next_key(k);
    }
    *key = k;
    return UINT32_MAX;
}

int st_profile_add_lfunc(st_profile_t *p, const st_model_lfunc_t *f)
{
    uint64_t key;
    int64_t at = find_place(p, &p->lfunc_index, p->nlfuncs, lfunc_place,
                            (place_t){f->file, f->function, f->first_line}, &key);
    if (at < 0)
        return ST_ENOMEM;
    if (at != UINT32_MAX) {
        st_model_lfunc_t *a = &p->lfuncs[at];
        if (sum_rows(a, f->rows, f->nrows) < 0)
            return ST_ENOMEM;
        if (!a->source && copy_source(a, f) < 0)
            return ST_ENOMEM;
        return 0;
    }
    if (st_u64map_put(&p->lfunc_index, key, (uint32_t)p->nlfuncs, NULL) < 0)
        return ST_ENOMEM;
    if (p->nlfuncs == p->caplfuncs) {
        size_t cap = p->caplfuncs ? 2 * p->caplfuncs : 8;
        st_model_lfunc_t *v = realloc(p->lfuncs, cap * sizeof *v);
        if (!v)
            return ST_ENOMEM;
        p->lfuncs = v;
        p->caplfuncs = cap;
    }
    st_model_lfunc_t *a = &p->lfuncs[p->nlfuncs];
    *a = (st_model_lfunc_t){.first_line = f->first_line};
    a->function = strdup(f->function);
    a->file = strdup(f->file);
    int rc = a->function && a->file ? sum_rows(a, f->rows, f->nrows) : ST_ENOMEM;
    if (rc == 0)
        rc = copy_source(a, f);
    if (rc < 0) {
        st_profile_lfunc_free(a);
        return rc; /* the index counts the entry not made: it is made again */
    }
    p->nlfuncs++;
    st_profile_sync(p);
    return 0;
}

static void *dup_array(const void *src, size_t n, size_t size)
{
    void *d = malloc(n ? n * size : 1);
    if (d && n)
        memcpy(d, src, n * size);
    return d;
}

int st_profile_set_memtime(st_profile_t *p, const st_model_memtime_t *mt)
{
    st_model_memtime_t c = {.interval_s = mt->interval_s, .n = mt->n,
                            .calls_dropped = mt->calls_dropped};
    c.t = dup_array(mt->t, mt->n, sizeof *mt->t);
    c.rss = dup_array(mt->rss, mt->n, sizeof *mt->rss);
    c.heap = mt->heap ? dup_array(mt->heap, mt->n, sizeof *mt->heap) : NULL;
    st_model_memcall_t *calls = calloc(mt->ncalls ? mt->ncalls : 1, sizeof *calls);
    c.calls = calls;
    int ok = c.t && c.rss && (!mt->heap || c.heap) && calls;
    for (size_t i = 0; ok && i < mt->ncalls; i++) {
        calls[i] = mt->calls[i];
        ok = (calls[i].function = strdup(mt->calls[i].function)) != NULL;
        c.ncalls = ok ? i + 1 : i;
    }
    if (!ok) {
        free_memtime(&c);
        return ST_ENOMEM;
    }
    free_memtime(&p->memtime);
    p->memtime = c;
    p->has_memtime = 1;
    st_profile_sync(p);
    return 0;
}

int st_profile_add_memline(st_profile_t *p, const st_model_memline_t *l)
{
    uint64_t key;
    int64_t at = find_place(p, &p->memline_index, p->nmemlines, memline_place,
                            (place_t){l->file, l->function, l->line}, &key);
    if (at < 0)
        return ST_ENOMEM;
    if (at != UINT32_MAX) {
        p->memlines[at].peak += l->peak;
        p->memlines[at].at_exit += l->at_exit;
        return 0;
    }
    if (p->nmemlines == p->capmemlines) {
        size_t cap = p->capmemlines ? 2 * p->capmemlines : 32;
        st_model_memline_t *v = realloc(p->memlines, cap * sizeof *v);
        if (!v)
            return ST_ENOMEM;
        p->memlines = v;
        p->capmemlines = cap;
    }
    char *f = strdup(l->function), *w = strdup(l->file);
    if (!f || !w || st_u64map_put(&p->memline_index, key, (uint32_t)p->nmemlines, NULL) < 0) {
        free(f);
        free(w);
        return ST_ENOMEM;
    }
    p->memlines[p->nmemlines++] = (st_model_memline_t){f, w, l->line, l->peak, l->at_exit};
    st_profile_sync(p);
    return 0;
}

static place_t kernel_place(const st_profile_t *p, size_t i)
{
    return (place_t){"", p->kernels[i].name, 0};
}

/* The kernels' order: most total time first, then by name. */
static int by_total(const void *a, const void *b)
{
    const st_model_kernel_t *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns < y->total_ns ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* Kernel k's launches added to *a's: the pooled mean and (population) standard
 * deviation of both sets of launches. */
static void kernel_add(st_model_kernel_t *a, const st_model_kernel_t *k)
{
    if (!k->count)
        return;
    if (!a->count) {
        const char *name = a->name;
        *a = *k;
        a->name = name;
        return;
    }
    double na = (double)a->count, nk = (double)k->count, n = na + nk;
    double d = k->mean_ns - a->mean_ns;
    double m2 = a->stddev_ns * a->stddev_ns * na + k->stddev_ns * k->stddev_ns * nk +
                d * d * na * nk / n;
    a->mean_ns += d * nk / n;
    a->stddev_ns = sqrt(m2 / n);
    a->count += k->count;
    a->total_ns += k->total_ns;
    a->min_ns = k->min_ns < a->min_ns ? k->min_ns : a->min_ns;
    a->max_ns = k->max_ns > a->max_ns ? k->max_ns : a->max_ns;
}

static int add_kernels(st_profile_t *p, const st_model_gpu_t *g)
{
    for (size_t i = 0; i < g->nkernels; i++) {
        const st_model_kernel_t *k = &g->kernels[i];
        uint64_t key;
        int64_t at = find_place(p, &p->kernel_index, p->gpu.nkernels, kernel_place,
                                (place_t){"", k->name, 0}, &key);
        if (at < 0)
            return ST_ENOMEM;
        if (at != UINT32_MAX) {
            kernel_add(&p->kernels[at], k);
            continue;
        }
        st_model_kernel_t *v = realloc(p->kernels, (p->gpu.nkernels + 1) * sizeof *v);
        if (!v)
            return ST_ENOMEM;
        p->kernels = v;
        char *name = strdup(k->name);
        if (!name || st_u64map_put(&p->kernel_index, key, (uint32_t)p->gpu.nkernels, NULL) < 0) {
            free(name);
            return ST_ENOMEM;
        }
        v[p->gpu.nkernels] = *k;
        v[p->gpu.nkernels++].name = name;
    }
    return 0;
}

static int add_copies(st_profile_t *p, const st_model_gpu_t *g)
{
    for (size_t i = 0; i < g->ncopies; i++) {
        const st_model_copy_t *c = &g->copies[i];
        size_t j = 0;
        while (j < p->gpu.ncopies && strcmp(p->copies[j].direction, c->direction) != 0)
            j++;
        if (j == p->gpu.ncopies) {
            st_model_copy_t *v = realloc(p->copies, (j + 1) * sizeof *v);
            if (!v)
                return ST_ENOMEM;
            p->copies = v;
            char *direction = strdup(c->direction);
            if (!direction)
                return ST_ENOMEM;
            v[j] = (st_model_copy_t){direction, 0, 0, 0};
            p->gpu.ncopies++;
        }
        p->copies[j].count += c->count;
        p->copies[j].bytes += c->bytes;
        p->copies[j].total_ns += c->total_ns;
    }
    return 0;
}

int st_profile_add_gpu(st_profile_t *p, const st_model_gpu_t *g)
{
    if (add_kernels(p, g) < 0 || add_copies(p, g) < 0)
        return ST_ENOMEM;
    if (!p->gpu.library && g->library && !(p->gpu.library = strdup(g->library)))
        return ST_ENOMEM;
    p->gpu.launches += g->launches;
    p->gpu.attributed += g->attributed;
    p->gpu.dropped += g->dropped;
    if (g->clock_error_ns > p->gpu.clock_error_ns)
        p->gpu.clock_error_ns = g->clock_error_ns;
    p->has_gpu = 1;
    if (p->gpu.nkernels)
        qsort(p->kernels, p->gpu.nkernels, sizeof *p->kernels, by_total);
    st_u64map_free(&p->kernel_index); /* the kernels moved */
    p->kernel_index = (st_u64map_t){0};
    st_profile_sync(p);
    return 0;
}

static int by_peak(const void *a, const void *b)
{
    const st_model_memline_t *x = a, *y = b;
    if (x->peak != y->peak)
        return x->peak < y->peak ? 1 : -1;
    if (x->at_exit != y->at_exit)
        return x->at_exit < y->at_exit ? 1 : -1;
    int c = strcmp(x->file, y->file);
    return c ? c : x->line < y->line ? -1 : x->line > y->line;
}

void st_profile_memlines_done(st_profile_t *p)
{
    if (p->nmemlines)
        qsort(p->memlines, p->nmemlines, sizeof *p->memlines, by_peak);
    st_u64map_free(&p->memline_index); /* the lines moved */
    p->memline_index = (st_u64map_t){0};
    st_profile_sync(p);
}
