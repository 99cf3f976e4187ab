#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "system/sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

enum {
    M_RSS, M_VIRTUAL, M_MINFLT, M_MAJFLT, M_VCSW, M_IVCSW, M_USER, M_SYSTEM, M_UTIL,
    M_READ, M_WRITE, M_NET_RX, M_NET_TX, M_THREADS, M_FIXED
};

#define MAX_CPU_TRACKS 64

static void add_metric(st_sampler_t *s, const char *name, const char *units)
{
    if (s->nmetrics == ST_SAMPLER_MAX_METRICS)
        return;
    st_metric_t *m = &s->metrics[s->nmetrics++];
    snprintf(m->name, sizeof m->name, "%s", name);
    m->units = units;
    m->values = NULL;
}

/* Bytes of the sampler's own reads, kept out of the process's I/O figures. */
static uint64_t own_read_bytes;

/* Reads a small file into buf (NUL-terminated); returns its length or -1. */
static ssize_t read_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t total = 0, n;
    while ((size_t)total < size - 1 && (n = read(fd, buf + total, size - 1 - (size_t)total)) > 0)
        total += n;
    close(fd);
    buf[total] = '\0';
    own_read_bytes += (uint64_t)total;
    return total;
}

static void define_metrics(st_sampler_t *s)
{
    static const struct {
        const char *name, *units;
    } fixed[M_FIXED] = {
        [M_RSS] = {"memory.resident", "bytes"},
        [M_VIRTUAL] = {"memory.virtual", "bytes"},
        [M_MINFLT] = {"page_faults.minor", "count"},
        [M_MAJFLT] = {"page_faults.major", "count"},
        [M_VCSW] = {"context_switches.voluntary", "count"},
        [M_IVCSW] = {"context_switches.involuntary", "count"},
        [M_USER] = {"cpu_time.user", "s"},
        [M_SYSTEM] = {"cpu_time.system", "s"},
        [M_UTIL] = {"cpu.utilization", "%"},
        [M_READ] = {"io.read", "bytes"},
        [M_WRITE] = {"io.written", "bytes"},
        [M_NET_RX] = {"network.received", "bytes"},
        [M_NET_TX] = {"network.sent", "bytes"},
        [M_THREADS] = {"threads", "count"},
    };
    for (int i = 0; i < M_FIXED; i++)
        add_metric(s, fixed[i].name, fixed[i].units);
    long ncpus = sysconf(_SC_NPROCESSORS_CONF);
    s->ncpus = ncpus < 1 ? 1 : ncpus > MAX_CPU_TRACKS ? MAX_CPU_TRACKS : (int)ncpus;
    char name[48];
    for (int c = 0; c < s->ncpus; c++) {
        snprintf(name, sizeof name, "cpu%d.frequency", c);
        add_metric(s, name, "MHz");
    }
    st_nvml_open(&s->nvml);
    s->ngpus = s->nvml.ngpus;
    snprintf(s->gpu_note, sizeof s->gpu_note, "%s", s->nvml.note);
    for (int g = 0; g < s->ngpus; g++) {
        for (int k = 0; k < ST_NVML_NMETRICS; k++) {
            snprintf(name, sizeof name, "gpu%d.%s", g, st_nvml_metrics[k].name);
            add_metric(s, name, st_nvml_metrics[k].units);
        }
    }
}

static void read_cpu_freqs(const st_sampler_t *s, double *out)
{
    char path[96], buf[8192];
    int from_sysfs = 1;
    for (int c = 0; c < s->ncpus; c++) {
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq", c);
        if (read_file(path, buf, sizeof buf) <= 0) {
            from_sysfs = 0;
            break;
        }
        out[c] = strtod(buf, NULL) / 1000.0; /* kHz */
    }
    if (from_sysfs)
        return;
    /* Without cpufreq (virtual machines): /proc/cpuinfo's "cpu MHz", in CPU order. */
    for (int c = 0; c < s->ncpus; c++)
        out[c] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    int c = 0;
    while (c < s->ncpus && fgets(buf, sizeof buf, f)) {
        own_read_bytes += strlen(buf);
        if (strncmp(buf, "cpu MHz", 7) == 0) {
            char *colon = strchr(buf, ':');
            if (colon)
                out[c++] = strtod(colon + 1, NULL);
        }
    }
    fclose(f);
}

static void read_net(double *rx, double *tx)
{
    char buf[16384];
    *rx = *tx = 0;
    if (read_file("/proc/self/net/dev", buf, sizeof buf) <= 0)
        return;
    char *line = strchr(buf, '\n');
    line = line ? strchr(line + 1, '\n') : NULL; /* two header lines */
    while (line && *++line) {
        char *colon = strchr(line, ':');
        if (!colon)
            break;
        unsigned long long v[9];
        if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) == 9) {
            *rx += (double)v[0];
            *tx += (double)v[8];
        }
        line = strchr(line, '\n');
    }
}

static void read_io(double *rd, double *wr)
{
    char buf[1024];
    *rd = *wr = 0;
    uint64_t before = own_read_bytes;
    if (read_file("/proc/self/io", buf, sizeof buf) <= 0)
        return;
    char *p = strstr(buf, "rchar:");
    char *q = strstr(buf, "wchar:");
    if (p)
        *rd = strtod(p + 6, NULL) - (double)before; /* less the sampler's own reads */
    if (q)
        *wr = strtod(q + 6, NULL);
}

/* Reads every metric into vals (in metric order). */
static void sample_now(st_sampler_t *s, double *vals, uint64_t now)
{
    char buf[4096];
    long page = sysconf(_SC_PAGESIZE);
    unsigned long long size = 0, resident = 0;
    if (read_file("/proc/self/statm", buf, sizeof buf) > 0)
        sscanf(buf, "%llu %llu", &size, &resident);
    vals[M_RSS] = (double)resident * (double)page;
    vals[M_VIRTUAL] = (double)size * (double)page;

    struct rusage all, me;
    getrusage(RUSAGE_SELF, &all);
    getrusage(RUSAGE_THREAD, &me);
    vals[M_MINFLT] = (double)(all.ru_minflt - me.ru_minflt);
    vals[M_MAJFLT] = (double)(all.ru_majflt - me.ru_majflt);
    vals[M_VCSW] = (double)(all.ru_nvcsw - me.ru_nvcsw);
    vals[M_IVCSW] = (double)(all.ru_nivcsw - me.ru_nivcsw);
#define TV(t) ((double)(t).tv_sec + (double)(t).tv_usec * 1e-6)
    vals[M_USER] = TV(all.ru_utime) - TV(me.ru_utime);
    vals[M_SYSTEM] = TV(all.ru_stime) - TV(me.ru_stime);
    for (int k = M_USER; k <= M_SYSTEM; k++)
        if (vals[k] < 0) /* the two readings are microseconds apart */
            vals[k] = 0;
#undef TV
    double cpu_s = vals[M_USER] + vals[M_SYSTEM], now_s = (double)now * 1e-9;
    vals[M_UTIL] = now_s > s->last_ns_s && s->last_ns_s > 0
                       ? 100.0 * (cpu_s - s->last_cpu_s) / (now_s - s->last_ns_s)
                       : 0.0;
    if (vals[M_UTIL] < 0)
        vals[M_UTIL] = 0;
    s->last_cpu_s = cpu_s;
    s->last_ns_s = now_s;

    read_io(&vals[M_READ], &vals[M_WRITE]);
    read_net(&vals[M_NET_RX], &vals[M_NET_TX]);
    vals[M_NET_RX] -= s->net_base[0]; /* the run's bytes, not the namespace's since boot */
    vals[M_NET_TX] -= s->net_base[1];
    for (int k = M_NET_RX; k <= M_NET_TX; k++)
        if (vals[k] < 0) /* an interface went away */
            vals[k] = 0;

    vals[M_THREADS] = 0;
    if (read_file("/proc/self/stat", buf, sizeof buf) > 0) {
        char *p = strrchr(buf, ')');
        long threads = 0;
        /* after ") ": state(3) ... num_threads is field 20 */
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                               "%*d %ld", &threads) == 1)
            /* not the sampler, nor strata's other threads */
            vals[M_THREADS] = (double)(threads > 1 + s->other_threads
                                           ? threads - 1 - s->other_threads
                                           : 0);
    }

    read_cpu_freqs(s, vals + M_FIXED);
    double *g = vals + M_FIXED + s->ncpus;
    for (int i = 0; i < s->ngpus; i++, g += ST_NVML_NMETRICS)
        st_nvml_read(&s->nvml, i, g);
}

/* Drops every other sample (bounded memory) and doubles the interval. */
static void decimate(st_sampler_t *s)
{
    size_t j = 0;
    for (size_t i = 0; i < s->n; i += 2, j++) {
        s->ns[j] = s->ns[i];
        for (int k = 0; k < s->nmetrics; k++)
            s->metrics[k].values[j] = s->metrics[k].values[i];
    }
    s->n = j;
    s->interval_ns *= 2;
}

static int record(st_sampler_t *s)
{
    if (s->n == s->cap) {
        if (s->cap >= ST_SAMPLER_MAX_SAMPLES) {
            decimate(s);
        } else {
            size_t cap = s->cap ? s->cap * 2 : 256;
            if (cap > ST_SAMPLER_MAX_SAMPLES)
                cap = ST_SAMPLER_MAX_SAMPLES;
            uint64_t *ns = realloc(s->ns, cap * sizeof *ns);
            if (!ns)
                return -1;
            s->ns = ns;
            for (int k = 0; k < s->nmetrics; k++) {
                double *v = realloc(s->metrics[k].values, cap * sizeof *v);
                if (!v)
                    return -1;
                s->metrics[k].values = v;
            }
            s->cap = cap;
        }
    }
    double vals[ST_SAMPLER_MAX_METRICS];
    uint64_t now = st_clock_monotonic_ns();
    sample_now(s, vals, now);
    s->ns[s->n] = now;
    for (int k = 0; k < s->nmetrics; k++)
        s->metrics[k].values[s->n] = vals[k];
    s->n++;
    return 0;
}

static void *run(void *arg)
{
    st_sampler_t *s = arg;
    s->tid = (int)syscall(SYS_gettid);
    pthread_mutex_lock(&s->lock);
    uint64_t next = st_clock_monotonic_ns();
    for (;;) {
        if (record(s) < 0) {
            s->failed = 1;
            break;
        }
        if (s->stop)
            break;
        next += s->interval_ns;
        struct timespec until = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
        while (!s->stop) {
            int rc = pthread_cond_timedwait(&s->cond, &s->lock, &until);
            if (rc == ETIMEDOUT)
                break;
        }
        if (s->stop) {
            record(s); /* the last sample, at the end */
            break;
        }
    }
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    s->self_cpu_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int st_sampler_start(st_sampler_t *s, double freq, int other_threads, st_msg_t *msg)
{
    memset(s, 0, sizeof *s);
    s->freq = freq;
    s->other_threads = other_threads;
    s->interval_ns = (uint64_t)(1e9 / freq);
    if (s->interval_ns < 100000)
        s->interval_ns = 100000;
    define_metrics(s);
    read_net(&s->net_base[0], &s->net_base[1]);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&s->lock, NULL);
    s->started_ns = st_clock_monotonic_ns();
    /* The sampler must not receive the program's signals. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, run, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return st_msg_set(msg, ST_EINVAL, "cannot start the process sampler: %s", strerror(rc));
    s->running = 1;
    return 0;
}

void st_sampler_stop(st_sampler_t *s)
{
    if (!s->running)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    s->running = 0;
    s->stopped_ns = st_clock_monotonic_ns();
}

void st_sampler_free(st_sampler_t *s)
{
    st_sampler_stop(s);
    free(s->ns);
    for (int k = 0; k < s->nmetrics; k++)
        free(s->metrics[k].values);
    st_nvml_close(&s->nvml);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    memset(s, 0, sizeof *s);
}

void st_sampler_summary(const st_sampler_t *s, int k, double *min, double *mean, double *max)
{
    *min = *mean = *max = 0;
    if (s->n == 0)
        return;
    const double *v = s->metrics[k].values;
    double lo = v[0], hi = v[0], sum = 0;
    for (size_t i = 0; i < s->n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
        sum += v[i];
    }
    *min = lo;
    *mean = sum / (double)s->n;
    *max = hi;
}
