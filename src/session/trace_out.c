/* The session's timeline files: trace.pftrace (Perfetto) and trace.json (Chrome). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Runs a writer into dir/name through a temporary file renamed into place. */
static int write_through(const char *dir, const char *name, writer_fn fn, const st_timeline_t *m,
                         void *stats, st_msg_t *msg)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path ||
        snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name) >= (int)sizeof tmp)
        return st_msg_set(msg, ST_EIO, "results path too long in '%s'", dir);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(errno));
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

int st_session_write_timeline(st_session_t *s, double ns_per_tick, uint64_t stats[4], st_msg_t *msg)
{
    st_timeline_thread_t *threads = calloc(s->nthreads ? s->nthreads : 1, sizeof *threads);
    st_timeline_counter_t *counters =
        calloc(s->sampling && s->sampler.nmetrics ? (size_t)s->sampler.nmetrics : 1, sizeof *counters);
    if (!threads || !counters) {
        free(threads);
        free(counters);
        return st_msg_set(msg, ST_ENOMEM, "out of memory writing the trace");
    }
    memset(stats, 0, 4 * sizeof *stats);
    for (size_t i = 0; i < s->nthreads; i++) {
        const st_thread_t *t = s->threads[i];
        threads[i].trace = &t->trace;
        threads[i].index = t->index;
        threads[i].tid = t->tid;
        threads[i].name = t->name;
        stats[1] += t->trace.dropped;
        stats[2] += t->trace.too_deep;
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
    snprintf(policy, sizeof policy, "%s", s->trace_shared.policy == ST_TRACE_FLUSH ? "flush" : "discard");
    const char *keys[] = {"strata.version", "strata.dropped_calls", "strata.too_deep_calls",
                          "strata.fill_policy", "strata.command"};
    st_strbuf_t command;
    st_strbuf_init(&command);
    for (size_t i = 0; i < s->ncommand; i++) {
        if (i)
            st_strbuf_putc(&command, ' ');
        st_strbuf_puts(&command, s->command[i]);
    }
    const char *values[] = {STRATA_VERSION, dropped, too_deep, policy, st_strbuf_cstr(&command)};
    const char *process = *s->target ? s->target : "python";
    st_timeline_t m = {
        .labels = &s->labels,
        .locs = &s->locs,
        .threads = threads,
        .nthreads = s->nthreads,
        .counters = counters,
        .ncounters = ncounters,
        .pid = (long)getpid(),
        .process_name = process,
        .ns_per_tick = ns_per_tick,
        .attr_keys = keys,
        .attr_values = values,
        .nattrs = sizeof keys / sizeof keys[0],
    };
    st_clock_base(&m.base_ticks, &m.base_mono_ns, &m.base_boot_ns);
    st_perfetto_stats_t ps = {0, 0, 0};
    int rc = 0;
    if (st_settings_has(&s->settings, ST_S_TRACE_FORMAT, "perfetto"))
        rc = write_through(s->outdir, "trace.pftrace", perfetto, &m, &ps, msg);
    if (rc == 0 && st_settings_has(&s->settings, ST_S_TRACE_FORMAT, "chrome"))
        rc = write_through(s->outdir, "trace.json", chrome, &m, NULL, msg);
    stats[0] = ps.slice_events;
    stats[3] = ps.bytes;
    if (!st_settings_has(&s->settings, ST_S_TRACE_FORMAT, "perfetto"))
        for (size_t i = 0; i < s->nthreads; i++)
            stats[0] += st_trace_count(&s->threads[i]->trace);
    free(threads);
    free(counters);
    st_strbuf_free(&command);
    return rc;
}

void st_session_print_trace_summary(FILE *f, const st_session_t *s, const uint64_t stats[4])
{
    if (st_settings_has(&s->settings, ST_S_TRACE_FORMAT, "perfetto") && stats[0])
        fprintf(f, "[strata] trace: %llu events in trace.pftrace, %llu bytes (%.1f bytes an event)\n",
                (unsigned long long)stats[0], (unsigned long long)stats[3],
                (double)stats[3] / (double)stats[0]);
    /* Under flush a call is lost only when its spill could not be made: advising
     * flush then would name the policy in use. */
    if (stats[1] && s->trace_shared.policy == ST_TRACE_FLUSH)
        fprintf(f, "[strata] trace: %llu calls were not recorded: the buffer could not be "
                   "flushed to the results folder (STRATA_TRACE_FILL_POLICY=flush)\n",
                (unsigned long long)stats[1]);
    else if (stats[1])
        fprintf(f, "[strata] trace: %llu calls were not recorded: the buffer was full "
                   "(STRATA_TRACE_BUFFER_SIZE; STRATA_TRACE_FILL_POLICY=flush keeps them)\n",
                (unsigned long long)stats[1]);
    if (stats[2])
        fprintf(f, "[strata] trace: %llu calls nested deeper than %u were not recorded "
                   "(STRATA_TRACE_MAX_DEPTH)\n",
                (unsigned long long)stats[2], s->trace_shared.max_depth);
}
