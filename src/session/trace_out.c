/* The session's timeline: its collector, and its files trace.pftrace (Perfetto) and
 * trace.json (Chrome), written from the recorder's events. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "output/chrome.h"
#include "output/perfetto.h"
#include "session/session.h"

typedef int (*writer_fn)(FILE *f, const st_timeline_t *m, void *stats, st_msg_t *msg);

static int perfetto(FILE *f, const st_timeline_t *m, void *stats, st_msg_t *msg)
{
    return st_perfetto_write(f, m, stats, msg);
}

static int chrome(FILE *f, const st_timeline_t *m, void *stats, st_msg_t *msg)
{
    (void)stats;
    return st_chrome_write(f, m, msg);
}

/* Runs a writer into dir/name through a temporary file renamed into place. The
 * temporary file is made by mkstemp (O_CREAT | O_EXCL, a random name), so nothing
 * planted in the results folder (a symbolic link) is ever followed. */
static int write_through(const char *dir, const char *name, writer_fn fn, const st_timeline_t *m,
                         void *stats, st_msg_t *msg)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path ||
        snprintf(tmp, sizeof tmp, "%s/.%s.tmpXXXXXX", dir, name) >= (int)sizeof tmp)
        return st_msg_set(msg, ST_EIO, "results path too long in '%s'", dir);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(errno));
    /* mkstemp makes the file 0600: give it the usual permissions */
    mode_t um = umask(0);
    umask(um);
    FILE *f = fchmod(fd, 0666 & ~um) == 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(e));
    }
    int rc = fn(f, m, stats, msg);
    int err = errno;
    if (fclose(f) != 0 && rc == 0) {
        err = errno;
        rc = st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(err));
    }
    if (rc == 0 && rename(tmp, path) != 0)
        rc = st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(errno));
    if (rc < 0) {
        unlink(tmp);
        if (strstr(msg->text, path) == NULL) {
            char inner[sizeof msg->text];
            snprintf(inner, sizeof inner, "%s", msg->text);
            st_msg_set(msg, rc, "cannot write '%s': %s", path, inner);
        }
    }
    return rc;
}

/* The first spill failure of any thread (flush policy): its errno, or 0; the calls
 * not recorded by threads whose spill failed go to *lost. */
static int spill_failure(const st_session_t *s, uint64_t *lost)
{
    int err = 0;
    *lost = 0;
    for (uint32_t i = 0; i < s->rec.nthreads; i++) {
        const st_evbuf_t *b = &s->rec.threads[i]->ev;
        if (b->main.failed && b->main.spill_errno) {
            err = err ? err : b->main.spill_errno;
            *lost += b->dropped;
        }
    }
    return err;
}

typedef struct {
    uint64_t ns;
    double v;
} reading_t;

static int by_time(const void *a, const void *b)
{
    const reading_t *x = a, *y = b;
    return x->ns < y->ns ? -1 : x->ns > y->ns;
}

/* The recorder's counter tracks (a program's strata_counter) as timeline counters
 * after the n already in `out`: every thread's readings of each, in time order.
 * A track whose readings cannot be gathered (out of memory) is left out. */
static void counter_tracks(const st_session_t *s, const st_timeline_t *m,
                           st_timeline_counter_t *out, size_t *n)
{
    uint32_t nt = s->rec.ntracks, counters = 0;
    for (uint32_t k = 0; k < nt; k++)
        counters += s->rec.tracks[k].kind == ST_TRACK_COUNTER;
    if (!counters)
        return;
    /* every thread's events read once, each reading to its track's list */
    typedef struct {
        reading_t *rd;
        size_t n, cap;
        int failed;
    } list_t;
    list_t *lists = calloc(nt, sizeof *lists);
    st_ev_reader_t *r = malloc(sizeof *r);
    for (uint32_t i = 0; lists && r && i < s->rec.nthreads; i++) {
        st_ev_reader_init(r, &s->rec.threads[i]->ev, 0);
        const st_ev_t *e;
        while ((e = st_ev_next(r)) != NULL) {
            if (e->kind != ST_EV_COUNTER || e->a >= nt ||
                s->rec.tracks[e->a].kind != ST_TRACK_COUNTER || lists[e->a].failed)
                continue;
            list_t *l = &lists[e->a];
            if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 64;
                reading_t *more = realloc(l->rd, cap * sizeof *more);
                if (!more) {
                    l->failed = 1;
                    continue;
                }
                l->rd = more;
                l->cap = cap;
            }
            const st_ev_pair_t *p = (const st_ev_pair_t *)(e + 1);
            l->rd[l->n].ns = st_timeline_ns(m, e->ticks);
            memcpy(&l->rd[l->n].v, &p->u0, sizeof l->rd[l->n].v);
            l->n++;
        }
    }
    for (uint32_t k = 0; lists && r && k < nt; k++) {
        list_t *l = &lists[k];
        uint64_t *ns = l->failed || !l->n ? NULL : malloc(l->n * sizeof *ns);
        double *vals = ns ? malloc(l->n * sizeof *vals) : NULL;
        if (vals) {
            qsort(l->rd, l->n, sizeof *l->rd, by_time);
            for (size_t j = 0; j < l->n; j++) {
                ns[j] = l->rd[j].ns;
                vals[j] = l->rd[j].v;
            }
            out[(*n)++] = (st_timeline_counter_t){.name = s->rec.tracks[k].name, .units = "",
                                                  .n = l->n, .ns = ns, .values = vals};
        } else {
            free(ns);
        }
    }
    for (uint32_t k = 0; lists && k < nt; k++)
        free(lists[k].rd);
    free(lists);
    free(r);
}

/* By start; at one start, by track, the longer first (it holds the other). */
static int by_start(const void *a, const void *b)
{
    const st_timeline_slice_t *x = a, *y = b;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    if (x->track != y->track)
        return x->track < y->track ? -1 : 1;
    return x->t1 > y->t1 ? -1 : x->t1 < y->t1;
}

static int is_gpu(st_track_kind_t k)
{
    return k == ST_TRACK_GPU_STREAM || k == ST_TRACK_GPU_API;
}

/* The recorder's GPU-stream tracks and the complete events on them (every thread's
 * main lane), converted to CLOCK_MONOTONIC ns and sorted by start: their arrays
 * are malloc'd into *names and *slices (left NULL when there are none, or out of
 * memory: the trace then has no GPU tracks). */
static void gpu_slices(const st_session_t *s, const st_timeline_t *m, const char ***names,
                       size_t *ntracks, st_timeline_slice_t **slices, size_t *nslices)
{
    *names = NULL;
    *slices = NULL;
    *ntracks = *nslices = 0;
    uint32_t nt = s->rec.ntracks, ngpu = 0;
    for (uint32_t k = 0; k < nt; k++)
        ngpu += is_gpu(s->rec.tracks[k].kind);
    if (!ngpu)
        return;
    uint32_t *index = malloc(nt * sizeof *index);
    const char **tn = malloc(ngpu * sizeof *tn);
    uint8_t *nests = malloc(ngpu); /* per GPU track: its slices nest (API calls) */
    size_t n = 0, cap = 0;
    st_timeline_slice_t *sl = NULL;
    if (!index || !tn || !nests)
        goto fail;
    ngpu = 0;
    for (uint32_t k = 0; k < nt; k++) {
        index[k] = UINT32_MAX;
        if (is_gpu(s->rec.tracks[k].kind)) {
            tn[ngpu] = s->rec.tracks[k].name;
            nests[ngpu] = s->rec.tracks[k].kind == ST_TRACK_GPU_API;
            index[k] = ngpu++;
        }
    }
    for (uint32_t i = 0; i < s->rec.nthreads; i++) {
        st_ev_reader_t r;
        st_ev_reader_init(&r, &s->rec.threads[i]->ev, 0);
        const st_ev_t *e;
        while ((e = st_ev_next(&r)) != NULL) {
            if (e->kind != ST_EV_COMPLETE || e->a >= nt || index[e->a] == UINT32_MAX)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 1024;
                st_timeline_slice_t *p = realloc(sl, cap * sizeof *p);
                if (!p)
                    goto fail;
                sl = p;
            }
            const st_ev_complete_t *c = (const st_ev_complete_t *)(e + 1);
            const st_rec_track_t *tr = &s->rec.tracks[e->a];
            sl[n++] = (st_timeline_slice_t){.t0 = st_timeline_ns(m, st_rec_track_host(tr, e->ticks)),
                                            .t1 = st_timeline_ns(m, st_rec_track_host(tr, c->t1)),
                                            .track = index[e->a], .label = c->label,
                                            .flow = c->flow};
            if (sl[n - 1].t1 < sl[n - 1].t0)
                sl[n - 1].t1 = sl[n - 1].t0;
        }
    }
    qsort(sl, n, sizeof *sl, by_start);
    /* A stream runs one thing at a time; should two overlap on a track (a clock's
     * jitter), the later starts where the earlier ended, so that slices nest. A
     * thread's API calls nest as they are (a runtime call's driver calls inside). */
    uint64_t *until = calloc(ngpu, sizeof *until);
    if (!until)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        if (nests[sl[i].track])
            continue;
        if (sl[i].t0 < until[sl[i].track])
            sl[i].t0 = until[sl[i].track];
        if (sl[i].t1 < sl[i].t0)
            sl[i].t1 = sl[i].t0;
        until[sl[i].track] = sl[i].t1;
    }
    free(until);
    free(index);
    free(nests);
    *names = tn;
    *ntracks = ngpu;
    *slices = sl;
    *nslices = n;
    return;
fail:
    free(index);
    free(tn);
    free(nests);
    free(sl);
}

int st_session_write_timeline(st_session_t *s, double ns_per_tick, uint64_t stats[4], st_msg_t *msg)
{
    size_t nthreads = s->rec.nthreads;
    st_timeline_thread_t *threads = calloc(nthreads ? nthreads : 1, sizeof *threads);
    size_t ncap = (s->sampling ? (size_t)s->sampler.nmetrics : 0) + s->rec.ntracks + 1;
    st_timeline_counter_t *counters = calloc(ncap, sizeof *counters);
    if (!threads || !counters) {
        free(threads);
        free(counters);
        return st_msg_set(msg, ST_ENOMEM, "out of memory writing the trace");
    }
    memset(stats, 0, 4 * sizeof *stats);
    for (size_t i = 0; i < nthreads; i++) {
        const st_rec_thread_t *t = s->rec.threads[i];
        threads[i].events = &t->ev;
        threads[i].index = t->index;
        threads[i].tid = t->tid;
        threads[i].name = t->name;
        stats[1] += t->ev.dropped;
        stats[2] += t->ev.too_deep;
    }
    size_t ncounters = 0;
    if (s->sampling) {
        for (int k = 0; k < s->sampler.nmetrics; k++) {
            counters[ncounters].name = s->sampler.metrics[k].name;
            counters[ncounters].units = s->sampler.metrics[k].units;
            counters[ncounters].n = s->sampler.n;
            counters[ncounters].ns = s->sampler.ns;
            counters[ncounters].values = s->sampler.metrics[k].values;
            ncounters++;
        }
    }
    char dropped[32], too_deep[32], policy[16];
    snprintf(dropped, sizeof dropped, "%llu", (unsigned long long)stats[1]);
    snprintf(too_deep, sizeof too_deep, "%llu", (unsigned long long)stats[2]);
    snprintf(policy, sizeof policy, "%s", s->rec.ev.policy == ST_EV_FLUSH ? "flush" : "discard");
    /* A trace whose spill failed says so in itself: it is not whole. */
    uint64_t lost;
    int spill_err = spill_failure(s, &lost);
    char spill_note[256];
    snprintf(spill_note, sizeof spill_note,
             "writing the spill file failed (%s): %llu calls after that were not recorded",
             spill_err ? strerror(spill_err) : "", (unsigned long long)lost);
    const char *keys[] = {"strata.version", "strata.dropped_calls", "strata.too_deep_calls",
                          "strata.fill_policy", "strata.command", "strata.incomplete"};
    st_strbuf_t command;
    st_strbuf_init(&command);
    for (size_t i = 0; i < s->ncommand; i++) {
        if (i)
            st_strbuf_putc(&command, ' ');
        st_strbuf_puts(&command, s->command[i]);
    }
    const char *values[] = {STRATA_VERSION, dropped, too_deep, policy, st_strbuf_cstr(&command),
                            spill_note};
    const char *process = *s->target ? s->target : "python";
    st_timeline_t m = {
        .labels = &s->labels,
        .locs = &s->locs,
        .threads = threads,
        .nthreads = nthreads,
        .counters = counters,
        .ncounters = ncounters,
        .pid = (long)getpid(),
        .process_name = process,
        .ns_per_tick = ns_per_tick,
        .sample_first = s->stack_first,
        .sample_chain = s->stack_chain,
        .sample_nids = s->stack_nids,
        .sample_metric = s->rec.m_samples,
        /* one sampling period, as the sampler's summary gives its rate */
        .sample_period_ns = s->stacks.freq > 0 ? (uint64_t)llround(1e9 / s->stacks.freq) : 0,
        .sample_clock = s->stacks.clock,
        .attr_keys = keys,
        .attr_values = values,
        .nattrs = sizeof keys / sizeof keys[0] - (spill_err ? 0 : 1),
    };
    st_clock_base(&m.base_ticks, &m.base_mono_ns, &m.base_boot_ns);
    /* the wall clock at the same moment: CLOCK_REALTIME less CLOCK_BOOTTIME is the
     * same now as then, but for a step of the wall clock meanwhile */
    struct timespec real, boot;
    if (clock_gettime(CLOCK_REALTIME, &real) == 0 && clock_gettime(CLOCK_BOOTTIME, &boot) == 0)
        m.base_real_ns = m.base_boot_ns + (uint64_t)((int64_t)real.tv_sec - boot.tv_sec) * 1000000000u +
                         (uint64_t)((int64_t)real.tv_nsec - boot.tv_nsec);
    counter_tracks(s, &m, counters, &m.ncounters);
    const char **gpu_names;
    st_timeline_slice_t *gpu;
    gpu_slices(s, &m, &gpu_names, &m.ngpu_tracks, &gpu, &m.ngpu_slices);
    m.gpu_tracks = gpu_names;
    m.gpu_slices = gpu;
    st_perfetto_stats_t ps = {0, 0, 0, 0};
    int rc = 0;
    char name[64];
    if (st_settings_has(&s->settings, ST_S_TRACE_FORMAT, "perfetto")) {
        st_session_file_name(s, "trace", ".pftrace", name, sizeof name);
        rc = write_through(s->outdir, name, perfetto, &m, &ps, msg);
    }
    if (st_settings_has(&s->settings, ST_S_TRACE_FORMAT, "chrome")) {
        st_msg_t second;
        st_session_file_name(s, "trace", ".json", name, sizeof name);
        int rc2 = write_through(s->outdir, name, chrome, &m, NULL, &second);
        if (rc2 < 0 && rc == 0) {
            rc = rc2;
            *msg = second;
        }
    }
    stats[0] = ps.slice_events + ps.stack_samples;
    stats[3] = ps.bytes;
    if (!st_settings_has(&s->settings, ST_S_TRACE_FORMAT, "perfetto"))
        for (size_t i = 0; i < nthreads; i++)
            stats[0] += st_evbuf_words(&s->rec.threads[i]->ev, 0);
    free(threads);
    free(gpu_names);
    free(gpu);
    for (size_t k = ncounters; k < m.ncounters; k++) {
        free((void *)counters[k].ns);
        free((void *)counters[k].values);
    }
    free(counters);
    st_strbuf_free(&command);
    return rc;
}

/* The timeline as a collector: its events are the recorder's, so it has nothing to
 * start or stop; it writes its files when results are written and contributes what
 * that gave. */
static int timeline_flush(st_collector_t *c, st_session_t *s, st_msg_t *msg)
{
    (void)c;
    uint64_t t0 = st_clock_monotonic_ns();
    int rc = st_session_write_timeline(s, s->ns_per_tick[ST_TIMER_WALL], s->trace_stats, msg);
    s->trace_write_s = (double)(st_clock_monotonic_ns() - t0) * 1e-9;
    return rc;
}

static void timeline_contribute(const st_collector_t *c, const st_session_t *s, st_model_t *m)
{
    (void)c;
    m->has_trace = 1;
    m->trace_write_s = s->trace_write_s;
    m->trace_events = s->trace_stats[0];
    m->trace_dropped = s->trace_stats[1];
    m->trace_too_deep = s->trace_stats[2];
    m->trace_bytes = s->trace_stats[3];
}

const st_collector_t st_session_timeline_collector = {
    .name = "timeline",
    .flush = timeline_flush,
    .contribute = timeline_contribute,
};

void st_session_print_trace_summary(FILE *info, FILE *notes, const st_session_t *s,
                                    const uint64_t stats[4])
{
    char name[64];
    st_session_file_name(s, "trace", ".pftrace", name, sizeof name);
    if (info && st_settings_has(&s->settings, ST_S_TRACE_FORMAT, "perfetto") && stats[0])
        fprintf(info, "[strata] trace: %llu events in %s, %llu bytes (%.1f bytes an event)\n",
                (unsigned long long)stats[0], name, (unsigned long long)stats[3],
                (double)stats[3] / (double)stats[0]);
    if (!notes)
        return;
    uint64_t lost;
    int spill_err = spill_failure(s, &lost);
    if (spill_err)
        fprintf(notes, "strata: error: trace: writing the spill file in %s failed: %s; the %llu "
                       "calls after that were not recorded and the trace is incomplete\n",
                s->outdir_shown, strerror(spill_err), (unsigned long long)lost);
    /* Under flush a call is lost only when its spill could not be made (a forked
     * child never spills): advising flush then would name the policy in use. */
    if (stats[1] > lost && s->rec.ev.policy == ST_EV_FLUSH)
        fprintf(notes, "[strata] trace: %llu calls were not recorded: the buffer could not be "
                       "flushed to the results folder (STRATA_TRACE_FILL_POLICY=flush)\n",
                (unsigned long long)(stats[1] - lost));
    else if (stats[1] > lost)
        fprintf(notes, "[strata] trace: %llu calls were not recorded: the buffer was full "
                       "(STRATA_TRACE_BUFFER_SIZE; STRATA_TRACE_FILL_POLICY=flush keeps them)\n",
                (unsigned long long)(stats[1] - lost));
    if (stats[2])
        fprintf(notes, "[strata] trace: %llu calls nested deeper than %u were not recorded "
                       "(STRATA_TRACE_MAX_DEPTH)\n",
                (unsigned long long)stats[2], s->rec.ev.max_depth);
}
