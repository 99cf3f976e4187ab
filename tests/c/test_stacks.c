/* Unit tests of a stack sampler's engine (src/sampling/stacks.h) and its address
 * table (src/sampling/addrtab.h): four threads spin while their timers fire at
 * 1 kHz; the walk, run in the handler, claims ids for a few fake addresses from
 * all threads at once; every sample lands in its own thread's lane; the fold
 * names the ids; the summary counts what happened; a thread dropped gets no
 * more samples; pause and resume (exec) stop and restart the timers; the table
 * gives one id per address whatever the races; the maintenance thread keeps its
 * pace (long ticks when quiet, short ones after work or a hurry). Also built with ThreadSanitizer
 * (make test-tsan) and ASan/UBSan (make test-asan). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampling/addrtab.h"
#include "sampling/stacks.h"

#include "check.h"

#define NTHREADS 4
#define DEPTH 120 /* frames a sample: 32 words, 32 samples a signal chunk */

static st_stacks_t stacks = ST_STACKS_INIT;
static st_addrtab_t table;

typedef struct {
    int index;
    _Atomic int ready, stop;
    st_sthread_t *t;
    pthread_t th;
} worker_t;

/* The walk: a fake stack of DEPTH "addresses", the innermost the thread's own,
 * the others shared, so the threads claim shared and own entries at once. */
static int walk(st_sthread_t *t, void *uc, uint32_t *ids, int cap)
{
    (void)uc;
    worker_t *w = t->ctx;
    int n = cap < DEPTH ? cap : DEPTH;
    for (int i = 0; i < n; i++) {
        uintptr_t addr = i == 0 ? 0x1000 + 16u * (uintptr_t)w->index : 0x2000 + 16u * (uintptr_t)i;
        ids[i] = st_addrtab_id(&table, addr, NULL);
    }
    return n;
}

static void *work(void *arg)
{
    worker_t *w = arg;
    w->t = st_stacks_add(&stacks, (uint64_t)st_sigsampler_gettid(), w);
    atomic_store(&w->ready, 1);
    volatile uint64_t x = 0;
    while (!atomic_load(&w->stop))
        x++;
    (void)x;
    return NULL;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void spin_for(double secs)
{
    double t0 = cpu_s();
    while (cpu_s() - t0 < secs)
        ;
}

/* A recorder for samples: `budget` bytes, 8 signal chunks kept ready. */
static void init_recorder(st_recorder_t *rec, uint64_t budget)
{
    st_rec_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = budget;
    cfg.sig_chunks = 8;
    CHECK(st_rec_init(rec, &cfg) == 0);
}

static void test_sampler(void)
{
    st_recorder_t rec;
    init_recorder(&rec, 16u << 20);
    CHECK(st_addrtab_new(&table, 10) == 0);
    st_msg_t msg;
    CHECK(st_stacks_start(&stacks, &rec, rec.m_samples, 0, ST_SIGCLOCK_CPU, 1000.0, walk, &msg) ==
          0);
    CHECK(st_stacks_maint_start(&stacks, NULL, NULL) == 0);
    worker_t w[NTHREADS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < NTHREADS; i++) {
        w[i].index = i;
        CHECK(pthread_create(&w[i].th, NULL, work, &w[i]) == 0);
        while (!atomic_load(&w[i].ready))
            ;
    }
    spin_for(0.8); /* the workers share 2 cores with this thread */
    /* thread 0 is dropped: no sample after this */
    st_stacks_drop(&stacks, w[0].t);
    uint64_t dropped_at = atomic_load(&w[0].t->signals);
    /* pause (an exec): no thread gets a signal; resume: they do again */
    st_stacks_pause(&stacks);
    uint64_t paused_at = atomic_load(&w[1].t->signals);
    spin_for(0.2);
    CHECK(atomic_load(&w[1].t->signals) <= paused_at + 1); /* one may be in flight */
    st_stacks_resume(&stacks);
    spin_for(0.3);
    CHECK(atomic_load(&w[1].t->signals) > paused_at + 5);
    CHECK(atomic_load(&w[0].t->signals) <= dropped_at + 1);
    st_stacks_stop(&stacks);
    st_stacks_maint_stop(&stacks);
    for (int i = 0; i < NTHREADS; i++) {
        atomic_store(&w[i].stop, 1);
        pthread_join(w[i].th, NULL);
    }
    /* one id per address */
    CHECK(st_addrtab_count(&table) == NTHREADS + DEPTH - 1);
    uint32_t shared = st_addrtab_find(&table, 0x2010);
    CHECK(shared != ST_ADDRTAB_NONE && st_addrtab_key(&table, shared) == 0x2010);
    /* the maintenance thread added most samples up as they came (no timeline) */
    uint32_t trees = 0;
    for (uint32_t i = 0; i < stacks.ntrees; i++)
        trees += stacks.trees[i].n > 1;
    CHECK(trees >= NTHREADS - 1); /* the dropped thread may have filled none */
    /* fold: id -> label (the address / 16), the trees and what is left in the lanes */
    static uint32_t first[(1u << 10) + 1], chain[1u << 10];
    for (uint32_t i = 0; i < (1u << 10); i++) {
        first[i] = i;
        chain[i] = (uint32_t)(st_addrtab_key(&table, i) / 16);
    }
    first[1u << 10] = 1u << 10;
    CHECK(st_stacks_fold(&stacks, first, chain, 1u << 10) == 0);
    st_model_stacks_t st;
    st_stacks_summarise(&stacks, &st, atomic_load(&table.full));
    CHECK(st.threads == NTHREADS && st.signals > 100 && st.periods >= st.signals);
    CHECK(st.unreadable == 0 && st.no_python == 0 && st.unnamed == 0);
    /* every sample is in its thread's paths, DEPTH deep */
    uint64_t total = 0;
    for (uint32_t i = 0; i < rec.nthreads; i++) {
        const st_pathtab_t *pt = &rec.threads[i]->paths;
        const uint64_t *col = st_mcols_u64(&pt->cols, rec.m_samples);
        for (uint32_t n = 0; n < pt->nnodes; n++)
            total += col[n];
    }
    CHECK(total + st.lost == st.periods - st.delayed);
    CHECK(st.rated >= 1 && st.prate_max <= 1100.0);
    st_stacks_end(&stacks);
    st_addrtab_free(&table);
    st_rec_free(&rec);
    printf("stacks: %llu samples, %llu periods, %llu lost, rate %.0f-%.0f periods/s\n",
           (unsigned long long)st.signals, (unsigned long long)st.periods,
           (unsigned long long)st.lost, st.prate_min, st.prate_max);
}

/* Threads that arm themselves and drop themselves when they end
 * (st_stacks_add_own, st_stacks_drop_own): two end while sampling runs; the last
 * ends after sampling stopped, its state was freed and sampling started again,
 * and must not touch the old state (the ASan and TSan builds run this). The
 * summary's promised periods cover the periods taken. */
static void sleep_s(double secs);

typedef struct {
    worker_t w;              /* the walk's ctx */
    uint32_t epoch;
    int late;
    _Atomic int go;          /* the late one: end now */
} own_worker_t;

static void *own_work(void *arg)
{
    own_worker_t *o = arg;
    o->w.t = st_stacks_add_own(&stacks, (uint64_t)st_sigsampler_gettid(), &o->w, &o->epoch);
    atomic_store(&o->w.ready, 1);
    if (!o->late) {
        struct timespec t0, now;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        do
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
        while ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9 < 0.2);
    }
    while (o->late && !atomic_load(&o->go))
        sleep_s(0.01);
    st_stacks_drop_own(&stacks, o->w.t, o->epoch);
    return NULL;
}

static void test_own_threads(void)
{
    st_recorder_t rec;
    init_recorder(&rec, 16u << 20);
    CHECK(st_addrtab_new(&table, 10) == 0);
    st_msg_t msg;
    CHECK(st_stacks_start(&stacks, &rec, rec.m_samples, 0, ST_SIGCLOCK_CPU, 1000.0, walk, &msg) ==
          0);
    own_worker_t o[3];
    memset(o, 0, sizeof o);
    o[2].late = 1;
    for (int i = 0; i < 3; i++) {
        o[i].w.index = i;
        CHECK(pthread_create(&o[i].w.th, NULL, own_work, &o[i]) == 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(o[i].w.th, NULL);
    for (int i = 0; i < 2; i++)
        CHECK(o[i].w.t && o[i].w.t->slot == -1); /* dropped by itself */
    while (!atomic_load(&o[2].w.ready))
        sleep_s(0.001);
    CHECK(o[2].w.t && o[2].w.t->slot >= 0);
    st_stacks_stop(&stacks);
    st_model_stacks_t st;
    st_stacks_summarise(&stacks, &st, 0);
    /* 0.2 s of CPU each at 1 kHz: the kernel's tick lets a few go */
    CHECK(st.promised >= 350 && st.promised <= 450 && st.periods <= st.promised + 4);
    CHECK(st.periods >= st.promised / 2);
    st_stacks_end(&stacks); /* the late thread's state is freed */
    st_rec_free(&rec);
    init_recorder(&rec, 1u << 20);
    CHECK(st_stacks_start(&stacks, &rec, rec.m_samples, 0, ST_SIGCLOCK_CPU, 1000.0, walk, &msg) ==
          0);
    atomic_store(&o[2].go, 1); /* ends in the next epoch: touches nothing */
    pthread_join(o[2].w.th, NULL);
    st_stacks_stop(&stacks);
    st_stacks_end(&stacks);
    st_addrtab_free(&table);
    st_rec_free(&rec);
    printf("own threads: %llu periods of %llu promised\n", (unsigned long long)st.periods,
           (unsigned long long)st.promised);
}

/* Claims from several threads at once: one id per key, none lost. */
static st_addrtab_t race;

static void *claim(void *arg)
{
    uintptr_t base = (uintptr_t)arg;
    for (uintptr_t k = 1; k <= 2000; k++) {
        uint32_t id = st_addrtab_id(&race, k * 8, NULL);
        if (id == ST_ADDRTAB_NONE || st_addrtab_key(&race, id) != k * 8)
            return (void *)1;
        (void)base;
    }
    return NULL;
}

static void test_addrtab_race(void)
{
    CHECK(st_addrtab_new(&race, 14) == 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&th[i], NULL, claim, (void *)(uintptr_t)i) == 0);
    for (int i = 0; i < 4; i++) {
        void *rc;
        pthread_join(th[i], &rc);
        CHECK(rc == NULL);
    }
    CHECK(st_addrtab_count(&race) == 2000);
    /* the claim order lists every entry once */
    uint8_t *seen = calloc(race.size, 1);
    for (uint32_t k = 0; k < 2000; k++) {
        uint32_t id = st_addrtab_claimed(&race, k);
        CHECK(id != ST_ADDRTAB_NONE && !seen[id]);
        if (id != ST_ADDRTAB_NONE)
            seen[id] = 1;
    }
    free(seen);
    st_addrtab_clear(&race);
    CHECK(st_addrtab_count(&race) == 0 && st_addrtab_find(&race, 8) == ST_ADDRTAB_NONE);
    st_addrtab_free(&race);
}

/* The maintenance thread's pace: every 100 ms while nothing changes, every 20 ms
 * after a tick that found work and for the ticks a hurry asks for (sent from two
 * threads at once here, for ThreadSanitizer). Load only makes ticks fewer, so the
 * bounds are one-sided: at most so many long ticks, at least so many short ones. */
static _Atomic int ticks, tick_busy;

static int count_tick(st_stacks_t *s, int phase, void *arg)
{
    (void)s;
    (void)arg;
    if (phase == ST_STACKS_TICK)
        atomic_fetch_add(&ticks, 1);
    return atomic_load(&tick_busy);
}

static void sleep_s(double secs)
{
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void *hurry(void *arg)
{
    st_stacks_maint_hurry(arg);
    return NULL;
}

static void test_maint_pace(void)
{
    st_recorder_t rec;
    init_recorder(&rec, 1u << 20);
    st_msg_t msg;
    CHECK(st_stacks_start(&stacks, &rec, rec.m_samples, 0, ST_SIGCLOCK_CPU, 10.0, walk, &msg) ==
          0);
    CHECK(st_stacks_maint_start(&stacks, count_tick, NULL) == 0);
    sleep_s(0.65); /* the first tick soon, then long ones: 7 at most (20 ms ones: 32) */
    int quiet = atomic_load(&ticks);
    CHECK(quiet >= 1 && quiet <= 8);
    pthread_t h[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&h[i], NULL, hurry, &stacks) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(h[i], NULL);
    sleep_s(0.3); /* ST_STACKS_HURRY_TICKS short ticks, then long ones: 7 (long only: 3) */
    int hurried = atomic_load(&ticks) - quiet;
    CHECK(hurried >= ST_STACKS_HURRY_TICKS);
    atomic_store(&tick_busy, 1); /* the front end finds work at every tick */
    sleep_s(0.15);
    int before = atomic_load(&ticks);
    sleep_s(0.3); /* 15 short ticks (long only: 3) */
    CHECK(atomic_load(&ticks) - before >= 8);
    st_stacks_stop(&stacks);
    st_stacks_maint_stop(&stacks);
    st_stacks_end(&stacks);
    st_rec_free(&rec);
}

int main(void)
{
    test_addrtab_race();
    test_sampler();
    test_own_threads();
    test_maint_pace();
    return st_check_report();
}
