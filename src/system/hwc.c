#define _GNU_SOURCE
#include "system/hwc.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef STRATA_HAVE_PAPI
#include <papi.h>
#endif

/* ------------------------------------------------------------------------- */
/* perf's event names (those of perf-list(1))                                */

#define HWC(type, cfg) PERF_TYPE_##type, PERF_COUNT_##cfg
#define CACHE(c, op, res)                                                                  \
    PERF_TYPE_HW_CACHE,                                                                    \
        (PERF_COUNT_HW_CACHE_##c | (PERF_COUNT_HW_CACHE_OP_##op << 8) |                     \
         (PERF_COUNT_HW_CACHE_RESULT_##res << 16))

static const struct perf_name {
    const char *name, *alias, *unit, *desc;
    uint32_t type;
    uint64_t config;
} perf_names[] = {
    {"cycles", "cpu-cycles", "events", "CPU cycles", HWC(HARDWARE, HW_CPU_CYCLES)},
    {"instructions", NULL, "events", "instructions retired", HWC(HARDWARE, HW_INSTRUCTIONS)},
    {"cache-references", NULL, "events", "last-level cache accesses",
     HWC(HARDWARE, HW_CACHE_REFERENCES)},
    {"cache-misses", NULL, "events", "last-level cache misses", HWC(HARDWARE, HW_CACHE_MISSES)},
    {"branch-instructions", "branches", "events", "branches retired",
     HWC(HARDWARE, HW_BRANCH_INSTRUCTIONS)},
    {"branch-misses", NULL, "events", "branches mispredicted", HWC(HARDWARE, HW_BRANCH_MISSES)},
    {"bus-cycles", NULL, "events", "bus cycles", HWC(HARDWARE, HW_BUS_CYCLES)},
    {"stalled-cycles-frontend", NULL, "events", "cycles stalled issuing",
     HWC(HARDWARE, HW_STALLED_CYCLES_FRONTEND)},
    {"stalled-cycles-backend", NULL, "events", "cycles stalled retiring",
     HWC(HARDWARE, HW_STALLED_CYCLES_BACKEND)},
    {"ref-cycles", NULL, "events", "reference cycles (unscaled by frequency)",
     HWC(HARDWARE, HW_REF_CPU_CYCLES)},
    {"L1-dcache-loads", NULL, "events", "L1 data cache loads", CACHE(L1D, READ, ACCESS)},
    {"L1-dcache-load-misses", NULL, "events", "L1 data cache load misses",
     CACHE(L1D, READ, MISS)},
    {"L1-icache-load-misses", NULL, "events", "L1 instruction cache misses",
     CACHE(L1I, READ, MISS)},
    {"LLC-loads", NULL, "events", "last-level cache loads", CACHE(LL, READ, ACCESS)},
    {"LLC-load-misses", NULL, "events", "last-level cache load misses", CACHE(LL, READ, MISS)},
    {"dTLB-load-misses", NULL, "events", "data TLB load misses", CACHE(DTLB, READ, MISS)},
    {"iTLB-load-misses", NULL, "events", "instruction TLB misses", CACHE(ITLB, READ, MISS)},
    {"task-clock", NULL, "ns", "CPU time of the thread", HWC(SOFTWARE, SW_TASK_CLOCK)},
    {"cpu-clock", NULL, "ns", "CPU time (per-CPU timer)", HWC(SOFTWARE, SW_CPU_CLOCK)},
    {"page-faults", "faults", "events", "page faults", HWC(SOFTWARE, SW_PAGE_FAULTS)},
    {"minor-faults", NULL, "events", "page faults served without I/O",
     HWC(SOFTWARE, SW_PAGE_FAULTS_MIN)},
    {"major-faults", NULL, "events", "page faults that read from disk",
     HWC(SOFTWARE, SW_PAGE_FAULTS_MAJ)},
    {"context-switches", "cs", "events", "context switches", HWC(SOFTWARE, SW_CONTEXT_SWITCHES)},
    {"cpu-migrations", "migrations", "events", "moves to another CPU",
     HWC(SOFTWARE, SW_CPU_MIGRATIONS)},
    {"alignment-faults", NULL, "events", "alignment faults", HWC(SOFTWARE, SW_ALIGNMENT_FAULTS)},
    {"emulation-faults", NULL, "events", "instructions emulated",
     HWC(SOFTWARE, SW_EMULATION_FAULTS)},
};
#define NPERF (sizeof perf_names / sizeof perf_names[0])

static const struct perf_name *perf_find(const char *name)
{
    for (size_t i = 0; i < NPERF; i++)
        if (strcmp(perf_names[i].name, name) == 0 ||
            (perf_names[i].alias && strcmp(perf_names[i].alias, name) == 0))
            return &perf_names[i];
    return NULL;
}

/* Set in a forked child: its descriptors count the parent's threads. */
static volatile int forked;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void on_fork_child(void)
{
    forked = 1;
}
static void atfork_init(void)
{
    pthread_atfork(NULL, NULL, on_fork_child);
}

static int perf_open(uint32_t type, uint64_t config, int group, int leader)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = type;
    a.config = config;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.read_format = group ? PERF_FORMAT_GROUP : 0;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, leader, PERF_FLAG_FD_CLOEXEC);
}

/* 1 when hardware event `e` failed to open (errno err) for want of a PMU. */
static int no_pmu(const struct perf_name *e, int err)
{
    return (err == ENOENT || err == EOPNOTSUPP || err == ENODEV) && e->type != PERF_TYPE_SOFTWARE;
}

/* Why perf event `e` does not open here (errno of its open). */
static const char *perf_why(const struct perf_name *e, int err)
{
    if (no_pmu(e, err))
        return "this machine has no hardware PMU for it (a virtual machine?); software "
               "events such as task-clock and page-faults still count";
    if (err == EACCES || err == EPERM)
        return "not allowed: see /proc/sys/kernel/perf_event_paranoid (2 or less lets a "
               "user count their own process)";
    if (err == ENOSYS)
        return "this kernel has no perf_event_open";
    return strerror(err);
}

/* ------------------------------------------------------------------------- */
/* PAPI, loaded when asked for                                               */

#ifdef STRATA_HAVE_PAPI
static struct {
    int (*library_init)(int);
    int (*thread_init)(unsigned long (*)(void));
    int (*create_eventset)(int *);
    int (*add_named_event)(int, const char *);
    int (*start)(int);
    int (*stop)(int, long long *);
    int (*read)(int, long long *);
    int (*cleanup_eventset)(int);
    int (*destroy_eventset)(int *);
    int (*enum_event)(int *, int);
    int (*get_event_info)(int, PAPI_event_info_t *);
    int (*unregister_thread)(void);
    char *(*strerror)(int);
    const char *error;        /* why PAPI cannot be used, or NULL */
} papi;
static pthread_once_t papi_once = PTHREAD_ONCE_INIT;

#define PAPI_VERSION_STR "7.0"

static unsigned long papi_thread_id(void)
{
    return (unsigned long)pthread_self();
}

static void papi_load(void)
{
    void *h = dlopen("libpapi.so.7.0", RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        h = dlopen("libpapi.so", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        papi.error = "PAPI is not installed (apt-get install libpapi7.0)";
        return;
    }
#define SYM(f)                                                                             \
    if (!(*(void **)&papi.f = dlsym(h, "PAPI_" #f))) {                                     \
        papi.error = "libpapi lacks PAPI_" #f;                                             \
        return;                                                                            \
    }
    SYM(library_init) SYM(thread_init) SYM(create_eventset) SYM(add_named_event) SYM(start)
    SYM(stop) SYM(read) SYM(cleanup_eventset) SYM(destroy_eventset) SYM(enum_event)
    SYM(get_event_info) SYM(unregister_thread) SYM(strerror)
#undef SYM
    if (papi.library_init(PAPI_VER_CURRENT) != PAPI_VER_CURRENT) {
        papi.error = "the PAPI installed is not the version strata was built with (" PAPI_VERSION_STR ")";
        return;
    }
    if (papi.thread_init(papi_thread_id) != PAPI_OK)
        papi.error = "PAPI_thread_init failed";
}

static const char *papi_ready(void)
{
    pthread_once(&papi_once, papi_load);
    return papi.error;
}

/* An event set of the calling thread counting names[0..n), started; -1 and *why
 * (*bad: the index of the event refused, or -1). */
static int papi_open(const char *const *names, uint32_t n, const char **why, int *bad)
{
    *bad = -1;
    int es = PAPI_NULL, rc;
    if ((rc = papi.create_eventset(&es)) != PAPI_OK) {
        *why = papi.strerror(rc);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++)
        if ((rc = papi.add_named_event(es, names[i])) != PAPI_OK) {
            *bad = (int)i;
            goto fail;
        }
    if ((rc = papi.start(es)) == PAPI_OK)
        return es;
fail:
    *why = rc == PAPI_ENOEVNT ? "no such event on this machine" : papi.strerror(rc);
    papi.cleanup_eventset(es);
    papi.destroy_eventset(&es);
    return -1;
}

static void papi_close(int es)
{
    long long v[ST_REC_MAX_COUNTERS];
    papi.stop(es, v);
    papi.cleanup_eventset(es);
    papi.destroy_eventset(&es);
}
#else
static const char *papi_ready(void)
{
    return "strata was built without PAPI's headers (apt-get install libpapi-dev, then "
           "build again)";
}
#endif

/* ------------------------------------------------------------------------- */
/* A thread's counters                                                       */

typedef struct {
    pid_t tid;
    int nperf, fds[ST_REC_MAX_COUNTERS]; /* the hardware events' group first (nhw) */
    int nhw;
    int papi_es;              /* -1: none */
    uint32_t npapi;
    uint8_t slot_perf[ST_REC_MAX_COUNTERS], slot_papi[ST_REC_MAX_COUNTERS];
} handle_t;

static void handle_close(void *arg)
{
    handle_t *t = arg;
    for (int i = t->nperf - 1; i >= 0; i--)
        close(t->fds[i]);
#ifdef STRATA_HAVE_PAPI
    /* an event set belongs to its thread: another one (the end of the run, for a
     * thread that has exited) leaves it to PAPI */
    if (t->papi_es >= 0 && t->tid == (pid_t)syscall(SYS_gettid)) {
        papi_close(t->papi_es);
        papi.unregister_thread();
    }
#endif
    free(t);
}

/* Opens h's counters on the calling thread; NULL and *why (*bad: the event) if
 * one does not open. */
static handle_t *handle_open(const st_hwc_t *h, const char **why, const char **bad)
{
    handle_t *t = calloc(1, sizeof *t);
    if (!t) {
        *why = "out of memory";
        *bad = NULL;
        return NULL;
    }
    t->tid = (pid_t)syscall(SYS_gettid);
    t->papi_es = -1;
    const char *papi_names[ST_REC_MAX_COUNTERS];
    int nhw = 0;
    for (uint32_t i = 0; i < h->n; i++)
        nhw += !h->ev[i].papi && h->ev[i].type != PERF_TYPE_SOFTWARE;
    for (uint32_t i = 0; i < h->n; i++)
        if (h->ev[i].papi) {
            t->slot_papi[t->npapi] = (uint8_t)i;
            papi_names[t->npapi++] = h->ev[i].name;
        }
    /* the hardware events in one group (one PMU: read together, scheduled together),
     * then each software event alone: a group read does not update a sibling of
     * another PMU (task-clock beside page-faults would read stale) */
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < h->n; i++) {
            const st_hwc_event_t *e = &h->ev[i];
            if (e->papi || (e->type == PERF_TYPE_SOFTWARE) != pass)
                continue;
            int grouped = !pass && nhw > 1;
            int fd = perf_open(e->type, e->config, grouped, grouped && t->nperf ? t->fds[0] : -1);
            if (fd < 0) {
                *why = perf_why(perf_find(e->name), errno);
                *bad = e->metric;
                handle_close(t);
                return NULL;
            }
            t->slot_perf[t->nperf] = (uint8_t)i;
            t->fds[t->nperf++] = fd;
        }
    t->nhw = nhw;
    if (t->npapi) {
#ifdef STRATA_HAVE_PAPI
        int badi = -1;
        *bad = NULL;
        if ((*why = papi_ready()) == NULL)
            t->papi_es = papi_open(papi_names, t->npapi, why, &badi);
        if (t->papi_es < 0) {
            if (badi >= 0)
                *bad = h->ev[t->slot_papi[badi]].metric;
            handle_close(t);
            return NULL;
        }
#else
        *why = papi_ready();
        *bad = NULL;
        handle_close(t);
        return NULL;
#endif
    }
    return t;
}

static void *counters_open(void *ctx)
{
    const char *why, *bad;
    return forked ? NULL : handle_open(ctx, &why, &bad);
}

static int counters_read(void *arg, uint64_t *vals)
{
    handle_t *t = arg;
    if (forked)
        return -1;
    int i = 0;
    if (t->nhw > 1) {
        uint64_t buf[1 + ST_REC_MAX_COUNTERS];
        ssize_t want = (ssize_t)((size_t)(1 + t->nhw) * sizeof buf[0]);
        if (read(t->fds[0], buf, sizeof buf) != want || buf[0] != (uint64_t)t->nhw)
            return -1;
        for (; i < t->nhw; i++)
            vals[t->slot_perf[i]] = buf[1 + i];
    }
    for (; i < t->nperf; i++) {
        uint64_t v;
        if (read(t->fds[i], &v, sizeof v) != (ssize_t)sizeof v)
            return -1;
        vals[t->slot_perf[i]] = v;
    }
#ifdef STRATA_HAVE_PAPI
    if (t->papi_es >= 0) {
        long long v[ST_REC_MAX_COUNTERS];
        if (papi.read(t->papi_es, v) != PAPI_OK)
            return -1;
        for (uint32_t k = 0; k < t->npapi; k++)
            vals[t->slot_papi[k]] = v[k] < 0 ? 0 : (uint64_t)v[k];
    }
#endif
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The interface                                                             */

int st_hwc_parse(const st_settings_t *set, st_hwc_t *h, st_msg_t *msg)
{
    memset(h, 0, sizeof *h);
    size_t n;
    char *const *items = st_settings_list(set, ST_S_COMPONENTS, &n);
    for (size_t i = 0; i < n; i++) {
        int is_papi = strncmp(items[i], "papi:", 5) == 0;
        if (!is_papi && strncmp(items[i], "perf:", 5) != 0)
            continue;
        if (h->n == ST_REC_MAX_COUNTERS)
            return st_msg_set(msg, ST_EINVAL, "STRATA_COMPONENTS: at most %d counters a run",
                              ST_REC_MAX_COUNTERS);
        const char *name = items[i] + 5;
        st_hwc_event_t *e = &h->ev[h->n];
        const struct perf_name *p = is_papi ? NULL : perf_find(name);
        if (!is_papi && !p)
            return st_msg_set(msg, ST_EINVAL,
                              "STRATA_COMPONENTS: unknown perf event '%s' (strata avail -H "
                              "lists the events and what this machine counts)",
                              name);
        if (strlen(name) >= sizeof e->name)
            return st_msg_set(msg, ST_EINVAL, "STRATA_COMPONENTS: '%s' is too long", items[i]);
        int dup = 0;
        for (uint32_t j = 0; j < h->n; j++)
            dup |= h->ev[j].papi == is_papi && strcmp(h->ev[j].name, p ? p->name : name) == 0;
        if (dup)
            continue;
        e->papi = is_papi;
        snprintf(e->name, sizeof e->name, "%s", p ? p->name : name);
        snprintf(e->metric, sizeof e->metric, "%s", items[i]);
        if (p) /* an alias spelt out */
            snprintf(e->metric, sizeof e->metric, "perf:%s", p->name);
        e->unit = p ? p->unit : "events";
        if (p)
            snprintf(e->desc, sizeof e->desc, "%s (perf:%s)", p->desc, p->name);
        else
            snprintf(e->desc, sizeof e->desc, "PAPI event %.80s", name);
        if (p) {
            e->type = p->type;
            e->config = p->config;
        }
        h->n++;
    }
    return 0;
}

int st_hwc_check(st_hwc_t *h, st_msg_t *msg)
{
    if (!h->n)
        return 0;
    const char *why, *bad;
    handle_t *t = handle_open(h, &why, &bad);
    if (!t)
        return st_msg_set(msg, ST_EINVAL, "STRATA_COMPONENTS: %s: %s", bad ? bad : "papi", why);
    uint64_t v[ST_REC_MAX_COUNTERS];
    int rc = counters_read(t, v);
    handle_close(t);
    if (rc < 0)
        return st_msg_set(msg, ST_EINVAL, "STRATA_COMPONENTS: the counters open but do not read");
    return 0;
}

void st_hwc_counters(st_hwc_t *h)
{
    pthread_once(&atfork_once, atfork_init);
    h->rc.n = h->n;
    h->rc.open = counters_open;
    h->rc.read = counters_read;
    h->rc.close = handle_close;
    h->rc.ctx = h;
}

void st_hwc_avail(st_strbuf_t *out)
{
    st_strbuf_puts(out, "perf events (--components perf:EVENT,...):\n");
    int any = 0;
    for (size_t i = 0; i < NPERF; i++) {
        const struct perf_name *p = &perf_names[i];
        int fd = perf_open(p->type, p->config, 0, -1);
        int err = errno;
        if (fd >= 0) {
            close(fd);
            any |= p->type != PERF_TYPE_SOFTWARE;
        }
        char name[64];
        snprintf(name, sizeof name, "%s%s%s", p->name, p->alias ? "|" : "", p->alias ? p->alias : "");
        st_strbuf_printf(out, "  %-28s %-4s %s%s%s%s\n", name, fd >= 0 ? "yes" : "no", p->desc,
                         fd >= 0 ? "" : " (", fd >= 0 ? "" : no_pmu(p, err) ? "no PMU" : perf_why(p, err),
                         fd >= 0 ? "" : ")");
    }
    if (!any)
        st_strbuf_puts(out, "  This machine has no hardware performance counters (no PMU: a "
                            "virtual machine?);\n  the software events above still count.\n");
    st_strbuf_puts(out, "\nPAPI events (--components papi:EVENT,...):\n");
    const char *why = papi_ready();
    if (why) {
        st_strbuf_printf(out, "  none: %s\n", why);
        return;
    }
#ifdef STRATA_HAVE_PAPI
    int code = PAPI_PRESET_MASK, shown = 0;
    if (papi.enum_event(&code, PAPI_ENUM_FIRST) == PAPI_OK) {
        do {
            PAPI_event_info_t info;
            if (papi.get_event_info(code, &info) != PAPI_OK || !info.count)
                continue;
            const char *names[1] = {info.symbol};
            int bad;
            int es = papi_open(names, 1, &why, &bad);
            if (es < 0)
                continue;
            papi_close(es);
            st_strbuf_printf(out, "  %-28s %s\n", info.symbol, info.long_descr);
            shown++;
        } while (papi.enum_event(&code, PAPI_PRESET_ENUM_AVAIL) == PAPI_OK);
    }
    if (!shown)
        st_strbuf_puts(out, "  no PAPI preset counts here (no hardware PMU)\n");
    /* native events: PAPI names perf's software events too */
    static const char *const natives[] = {"perf::PAGE-FAULTS", "perf::TASK-CLOCK",
                                          "perf::CONTEXT-SWITCHES"};
    int nnative = 0;
    for (size_t i = 0; i < sizeof natives / sizeof natives[0]; i++) {
        int bad, es = papi_open(&natives[i], 1, &why, &bad);
        if (es < 0)
            continue;
        papi_close(es);
        st_strbuf_printf(out, "  %-28s a native event (papi_native_avail lists them all)\n",
                         natives[i]);
        nnative++;
    }
    if (!nnative)
        st_strbuf_puts(out, "  PAPI counts none of perf's software events here (perf::PAGE-FAULTS)\n");
#endif
}
