#include "output/mpisum.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/u64map.h"
#include "model/names.h"
#include "output/grid.h"
#include "output/loadbal.h"

/* 1 when `label` names an MPI call. */
static int is_mpi(const st_model_t *m, uint32_t label)
{
    return label != ST_PATH_NONE && strncmp(st_intern_str(m->labels, label), "MPI_", 4) == 0;
}

int st_mpisum_applies(const st_model_t *m)
{
    if (st_model_count_ranks(m) < 2)
        return 0;
    for (size_t i = 0; i < m->nthreads; i++) {
        const st_pathtab_t *t = m->threads[i].paths;
        for (uint32_t n = 1; n < t->nnodes; n++)
            if (is_mpi(m, t->nodes[n].label))
                return 1;
    }
    return 0;
}

typedef struct {
    uint32_t call, caller;   /* labels; caller ST_PATH_NONE: at the top */
    uint64_t calls;
    double bytes, time;      /* summed over the ranks */
    double *per_rank;        /* time a rank (nr entries) */
    double min_bytes, max_bytes; /* bytes a rank, among the ranks that called it */
} site_t;

typedef struct {
    site_t *sites;
    uint32_t n, cap;
    st_u64map_t index;       /* (call, caller) -> site */
    uint32_t nr;
    double *rank_bytes;      /* scratch: bytes a rank of each site */
} sites_t;

static site_t *site_of(sites_t *s, uint32_t call, uint32_t caller)
{
    uint64_t key = ((uint64_t)call << 32) | caller;
    uint32_t at = st_u64map_get(&s->index, key);
    if (at != UINT32_MAX)
        return &s->sites[at];
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : 64;
        site_t *more = realloc(s->sites, cap * sizeof *more);
        if (!more)
            return NULL;
        s->sites = more;
        s->cap = cap;
    }
    site_t *x = &s->sites[s->n];
    memset(x, 0, sizeof *x);
    x->call = call;
    x->caller = caller;
    x->min_bytes = INFINITY;
    if (!(x->per_rank = calloc(s->nr, sizeof *x->per_rank)) ||
        st_u64map_put(&s->index, key, s->n, NULL) < 0) {
        free(x->per_rank);
        return NULL;
    }
    return &s->sites[s->n++];
}

static int by_time(const void *a, const void *b)
{
    const site_t *x = a, *y = b;
    return x->time > y->time ? -1 : x->time < y->time;
}

static int by_bytes(const void *a, const void *b)
{
    const site_t *x = a, *y = b;
    return x->bytes > y->bytes ? -1 : x->bytes < y->bytes;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The rank index of rank `rank` among the sorted ranks. */
static uint32_t rank_index(const uint32_t *ranks, uint32_t nr, uint32_t rank)
{
    uint32_t lo = 0, hi = nr;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (ranks[mid] < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Adds one thread's outermost MPI calls to the sites (and its rank's MPI time). */
static int add_thread(sites_t *s, const st_model_t *m, const st_model_thread_t *th, uint32_t ri,
                      int timer, uint32_t bytes_metric, double *mpi_time, double *app_time)
{
    const st_pathtab_t *t = th->paths;
    double *tin = NULL, *tself = NULL, *bin = NULL, *bself = NULL;
    if (timer >= 0 && st_model_values(m, th, (uint32_t)timer, &tin, &tself) < 0)
        return ST_ENOMEM;
    if (bytes_metric != ST_METRIC_NONE && bytes_metric < t->cols.ncols &&
        st_model_values(m, th, bytes_metric, &bin, &bself) < 0) {
        free(tin);
        free(tself);
        return ST_ENOMEM;
    }
    /* inside[n]: node n is an MPI call or under one */
    uint8_t *inside = calloc(t->nnodes, 1);
    int rc = inside ? 0 : ST_ENOMEM;
    for (uint32_t n = 1; n < t->nnodes && rc == 0; n++) {
        const st_path_t *node = &t->nodes[n];
        uint32_t p = node->parent;
        if (p == 0 && app_time && tin)
            *app_time += tin[n];
        if (p != 0 && inside[p]) {
            inside[n] = 1;
            continue;
        }
        if (!is_mpi(m, node->label))
            continue;
        inside[n] = 1;
        site_t *x = site_of(s, node->label, p ? t->nodes[p].label : ST_PATH_NONE);
        if (!x) {
            rc = ST_ENOMEM;
            break;
        }
        double time = tin ? tin[n] * 1e-9 : 0.0;
        x->calls += st_model_calls(th, n);
        x->time += time;
        x->per_rank[ri] += time;
        *mpi_time += time;
        if (bin) {
            x->bytes += bin[n];
            s->rank_bytes[(size_t)(x - s->sites)] += bin[n];
        }
    }
    free(inside);
    free(tin);
    free(tself);
    free(bin);
    free(bself);
    return rc;
}

static void put_name(st_strbuf_t *b, const st_model_t *m, uint32_t label)
{
    st_strbuf_puts(b, label == ST_PATH_NONE ? "(top)" : st_name_text(m, label));
}

/* A site's row and its first cells: the call, its caller, the calls. */
static void site_row(st_grid_t *g, st_strbuf_t *b, const st_model_t *m, const site_t *x)
{
    st_grid_row(g);
    put_name(b, m, x->call);
    st_grid_cell(g, 0, b);
    put_name(b, m, x->caller);
    st_grid_cell(g, 1, b);
    st_strbuf_printf(b, "%llu", (unsigned long long)x->calls);
    st_grid_cell(g, 2, b);
}

int st_mpisum_write(st_strbuf_t *out, const st_model_t *m, int precision)
{
    uint32_t nr;
    int err;
    uint32_t *ranks = st_loadbal_ranks(m, &nr, out, "MPI summary", &err);
    if (!ranks)
        return err;
    int timer = st_model_timer(m);
    uint32_t bytes_metric = m->metrics ? st_metrics_find(m->metrics, "mpi_bytes") : ST_METRIC_NONE;
    sites_t s = {.nr = nr};
    double *mpi = calloc(nr, sizeof *mpi), *app = calloc(nr, sizeof *app);
    /* the threads rank by rank, each rank's in their order (its first the main one) */
    uint64_t *order = malloc((m->nthreads + 1) * sizeof *order);
    size_t nt = 0;
    int rc = mpi && app && order ? 0 : ST_ENOMEM;
    for (size_t i = 0; i < m->nthreads && rc == 0; i++)
        if (m->threads[i].has_rank)
            order[nt++] = ((uint64_t)m->threads[i].rank << 32) | i;
    if (rc == 0)
        qsort(order, nt, sizeof *order, cmp_u64);
    for (size_t k = 0; k < nt && rc == 0; k++) {
        const st_model_thread_t *th = &m->threads[order[k] & UINT32_MAX];
        uint32_t ri = rank_index(ranks, nr, th->rank);
        int rank_first = k == 0 || (order[k - 1] >> 32) != th->rank;
        int rank_last = k + 1 == nt || (order[k + 1] >> 32) != th->rank;
        /* bytes of each site in this rank: room for the sites there may be now */
        size_t room = (size_t)s.n + th->paths->nnodes + 1;
        double *rb = realloc(s.rank_bytes, room * sizeof *rb);
        if (!rb) {
            rc = ST_ENOMEM;
            break;
        }
        if (rank_first)
            memset(rb, 0, room * sizeof *rb);
        else
            memset(rb + s.n, 0, (room - s.n) * sizeof *rb);
        s.rank_bytes = rb;
        rc = add_thread(&s, m, th, ri, timer, bytes_metric, &mpi[ri],
                        rank_first ? &app[ri] : NULL);
        for (uint32_t j = 0; j < s.n && rc == 0 && rank_last; j++) {
            if (rb[j] > 0 && rb[j] < s.sites[j].min_bytes)
                s.sites[j].min_bytes = rb[j];
            if (rb[j] > s.sites[j].max_bytes)
                s.sites[j].max_bytes = rb[j];
        }
    }
    if (rc < 0)
        goto done;

    /* per rank */
    st_grid_t g;
    st_grid_init(&g);
    static const char *rheads[] = {"RANK", "APP TIME", "MPI TIME", "MPI %"};
    for (int i = 0; i < 4; i++)
        st_grid_column(&g, rheads[i], 1);
    st_strbuf_t b;
    st_strbuf_init(&b);
    double app_all = 0, mpi_all = 0;
    for (uint32_t ri = 0; ri <= nr; ri++) {
        double a = ri < nr ? app[ri] * 1e-9 : app_all, t = ri < nr ? mpi[ri] : mpi_all;
        st_grid_row(&g);
        if (ri < nr)
            st_strbuf_printf(&b, "%u", ranks[ri]);
        else
            st_strbuf_puts(&b, "*");
        st_grid_cell(&g, 0, &b);
        st_strbuf_printf(&b, "%.*f", precision, a);
        st_grid_cell(&g, 1, &b);
        st_strbuf_printf(&b, "%.*f", precision, t);
        st_grid_cell(&g, 2, &b);
        st_strbuf_printf(&b, "%.1f", a > 0 ? 100.0 * t / a : 0.0);
        st_grid_cell(&g, 3, &b);
        if (ri < nr) {
            app_all += a;
            mpi_all += t;
        }
    }
    st_grid_render(out, &g, "MPI TIME PER RANK (SECONDS)");
    st_grid_free(&g);

    /* the sites by time */
    qsort(s.sites, s.n, sizeof *s.sites, by_time);
    st_strbuf_putc(out, '\n');
    st_grid_init(&g);
    static const char *theads[] = {"CALL", "CALLER", "CALLS", "TIME", "APP %", "MPI %",
                                   "MEAN A RANK", "COV", "BYTES"};
    for (int i = 0; i < 9; i++)
        st_grid_column(&g, theads[i], i > 1);
    for (uint32_t k = 0; k < s.n && k < ST_MPISUM_TOP; k++) {
        const site_t *x = &s.sites[k];
        double mean = x->time / nr, var = 0;
        for (uint32_t ri = 0; ri < nr; ri++)
            var += (x->per_rank[ri] - mean) * (x->per_rank[ri] - mean);
        var /= nr;
        site_row(&g, &b, m, x);
        st_strbuf_printf(&b, "%.*f", precision, x->time);
        st_grid_cell(&g, 3, &b);
        st_strbuf_printf(&b, "%.1f", app_all > 0 ? 100.0 * x->time / app_all : 0.0);
        st_grid_cell(&g, 4, &b);
        st_strbuf_printf(&b, "%.1f", mpi_all > 0 ? 100.0 * x->time / mpi_all : 0.0);
        st_grid_cell(&g, 5, &b);
        st_strbuf_printf(&b, "%.*f", precision, mean);
        st_grid_cell(&g, 6, &b);
        st_strbuf_printf(&b, "%.2f", mean > 0 ? sqrt(var) / mean : 0.0);
        st_grid_cell(&g, 7, &b);
        st_strbuf_printf(&b, "%.0f", x->bytes);
        st_grid_cell(&g, 8, &b);
    }
    st_grid_render(out, &g, "MPI CALL SITES BY TIME (ALL RANKS)");
    st_grid_free(&g);

    /* the sites by bytes */
    qsort(s.sites, s.n, sizeof *s.sites, by_bytes);
    st_strbuf_putc(out, '\n');
    st_grid_init(&g);
    static const char *bheads[] = {"CALL", "CALLER", "CALLS", "BYTES", "BYTES A CALL",
                                   "MIN A RANK", "MAX A RANK"};
    for (int i = 0; i < 7; i++)
        st_grid_column(&g, bheads[i], i > 1);
    for (uint32_t k = 0; k < s.n && k < ST_MPISUM_TOP && s.sites[k].bytes > 0; k++) {
        const site_t *x = &s.sites[k];
        site_row(&g, &b, m, x);
        double vals[4] = {x->bytes, x->calls ? x->bytes / (double)x->calls : 0, x->min_bytes,
                          x->max_bytes};
        for (int i = 0; i < 4; i++) {
            st_strbuf_printf(&b, "%.0f", vals[i]);
            st_grid_cell(&g, 3 + i, &b);
        }
    }
    st_grid_render(out, &g, "MPI CALL SITES BY BYTES (ALL RANKS)");
    st_grid_free(&g);
    if (b.failed)
        rc = ST_ENOMEM;
    st_strbuf_free(&b);
done:
    for (uint32_t k = 0; k < s.n; k++)
        free(s.sites[k].per_rank);
    free(s.sites);
    st_u64map_free(&s.index);
    free(s.rank_bytes);
    free(mpi);
    free(app);
    free(order);
    free(ranks);
    if (rc == 0 && out->failed)
        rc = ST_ENOMEM;
    return rc;
}
