/* Unit test of the GPU collector (session/gpu.h) against the stand-in libcupti
 * (tests/data/gpu/fake_cupti.c, built beside this test as FAKE_CUPTI): three threads
 * launch kernels inside calls of their own while the stand-in hands full buffers
 * back on the launching threads, as CUPTI does on its own; at the end every
 * kernel's GPU time is on the call that launched it, in the right thread. Run under
 * ThreadSanitizer by `make test-tsan`: the launch ring and the collector's lock are
 * what it checks. Prints "N passed, N failed"; exits non-zero on any failure. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/settings.h"
#include "session/session.h"

#include "check.h"

#define THREADS 3
#define LAUNCHES 4000

typedef void (*launch_fn)(const char *, const char *, uint32_t, uint64_t);
typedef void (*flush_fn)(void);

static st_session_t session;
static launch_fn launch;
static flush_fn fake_flush;
static uint32_t label[THREADS + 1];

typedef struct {
    int id;
    uint64_t want;           /* the GPU ns it launched */
    st_rec_thread_t *th;
    uint32_t node;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    w->th = st_rec_self(&session.rec);
    st_rec_enter(w->th, label[w->id], NULL);
    w->node = w->th->stack[w->th->depth - 1].node;
    for (int i = 0; i < LAUNCHES; i++) {
        uint64_t ns = 1000u * (uint64_t)(w->id + 1) + (uint64_t)(i % 7);
        launch("cudaLaunchKernel", w->id ? "worker_kernel" : "main_kernel", (uint32_t)w->id, ns);
        w->want += ns;
        if (i % 500 == 499)
            fake_flush();
    }
    st_rec_exit(w->th);
    return NULL;
}

int main(void)
{
    char dir[] = "/tmp/strata-test-gpu-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    void *fake = dlopen(FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
    CHECK(fake != NULL);
    if (!fake)
        return st_check_report();
    launch = (launch_fn)dlsym(fake, "fake_launch");
    fake_flush = (flush_fn)dlsym(fake, "fake_flush");
    CHECK(launch && fake_flush);
    if (!launch || !fake_flush)
        return st_check_report();
    st_settings_t set;
    st_msg_t msg;
    char *argv[] = {"app"};
    CHECK(st_settings_init(&set) == 0);
    CHECK(st_settings_set(&set, ST_S_OUTPUT_PATH, dir, ST_SRC_API, &msg) == 0);
    CHECK(st_settings_set(&set, ST_S_OUTPUT_FORMATS, "json", ST_SRC_API, &msg) == 0);
    CHECK(st_settings_set(&set, ST_S_TRACE, "ON", ST_SRC_API, &msg) == 0);
    CHECK(st_settings_set(&set, ST_S_USE_CUPTI, "ON", ST_SRC_API, &msg) == 0);
    CHECK(st_settings_set(&set, ST_S_CUPTI_LIBRARY, FAKE_CUPTI, ST_SRC_API, &msg) == 0);
    CHECK(st_session_begin(&session, &set, "app", 1, argv, &msg) == 0);
    st_settings_free(&set);
    for (int i = 0; i <= THREADS; i++) {
        char name[32];
        snprintf(name, sizeof name, "launcher%d", i);
        st_intern_id(&session.labels, name, strlen(name), &label[i]);
    }
    CHECK(st_session_start(&session, &msg) == 0);
    worker_t w[THREADS + 1];
    pthread_t t[THREADS + 1];
    memset(w, 0, sizeof w);
    for (int i = 1; i <= THREADS; i++) {
        w[i].id = i;
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    work(&w[0]); /* the main thread too */
    for (int i = 1; i <= THREADS; i++)
        pthread_join(t[i], NULL);
    st_session_stop(&session);
    CHECK(st_session_finish(&session, NULL, NULL, NULL, &msg) == 0);
    CHECK(session.gpu_metric != ST_METRIC_NONE);
    for (int i = 0; i <= THREADS; i++) {
        const uint64_t *gpu = st_mcols_u64(&w[i].th->paths.cols, session.gpu_metric);
        CHECK(gpu[w[i].node] == w[i].want);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/profile.json", dir);
    FILE *f = fopen(path, "r");
    char text[1 << 16] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    CHECK(strstr(text, "\"activities\": 16000, \"attributed\": 16000, \"dropped\": 0") != NULL);
    CHECK(strstr(text, "{\"name\": \"worker_kernel\", \"count\": 12000,") != NULL);
    st_session_free(&session);
    unlink(path);
    rmdir(dir);
    return st_check_report();
}
