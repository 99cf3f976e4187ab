/* A stand-in libcupti.so for strata's GPU tests (tests/test_gpu.py): the CUPTI entry
 * points strata uses, and fake_launch / fake_copy / fake_set / fake_flush, which a
 * test program calls where a CUDA program would call cudaLaunchKernel,
 * cudaMemcpyAsync or cudaMemsetAsync. Each one calls the subscriber's callback at
 * the API's enter and exit (with a fresh correlation id), then writes the activity
 * record, with that id, into the buffer strata's buffer-requested callback lent; a
 * full buffer (or a flush) goes back through buffer-completed.
 *
 * Built with CUDA's own headers when the test finds them (-DREAL_HEADERS): the
 * records are then CUpti_ActivityKernel10, Memcpy6 and Memset4 exactly as CUDA 13
 * lays them out, which checks strata's own declaration of their leading fields.
 *
 * The clock is CLOCK_MONOTONIC's ns plus FAKE_CUPTI_CLOCK_OFFSET (default 10^15):
 * another clock than strata's, as a GPU's is. FAKE_CUPTI_FAIL=subscribe makes
 * cuptiSubscribe fail as it does when Nsight holds CUPTI; =enable makes
 * cuptiActivityEnable fail the same way. FAKE_CUPTI_HOLD=1 keeps every full buffer
 * until the forced flush at the end (a CUPTI slow to hand them back), so that the
 * lender runs out of them. FAKE_CUPTI_NESTED=1 has each runtime launch (cuda...)
 * make a driver launch inside it (cuLaunchKernel, its own correlation id, which the
 * record then carries), as the CUDA runtime does. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef REAL_HEADERS
/* the header's prototypes under other names: the stand-in's own are looser */
#define cuptiGetResultString header_cuptiGetResultString
#define cuptiSubscribe header_cuptiSubscribe
#define cuptiEnableDomain header_cuptiEnableDomain
#define cuptiUnsubscribe header_cuptiUnsubscribe
#define cuptiActivityRegisterCallbacks header_cuptiActivityRegisterCallbacks
#define cuptiActivityEnable header_cuptiActivityEnable
#define cuptiActivityDisable header_cuptiActivityDisable
#define cuptiGetTimestamp header_cuptiGetTimestamp
#define cuptiActivityGetNextRecord header_cuptiActivityGetNextRecord
#define cuptiActivityGetNumDroppedRecords header_cuptiActivityGetNumDroppedRecords
#define cuptiActivityFlushAll header_cuptiActivityFlushAll
#define cuptiGetCallbackName header_cuptiGetCallbackName
#include <cupti.h>
#undef cuptiGetResultString
#undef cuptiSubscribe
#undef cuptiEnableDomain
#undef cuptiUnsubscribe
#undef cuptiActivityRegisterCallbacks
#undef cuptiActivityEnable
#undef cuptiActivityDisable
#undef cuptiGetTimestamp
#undef cuptiActivityGetNextRecord
#undef cuptiActivityGetNumDroppedRecords
#undef cuptiActivityFlushAll
#undef cuptiGetCallbackName
typedef CUpti_ActivityKernel10 kernel_t;
typedef CUpti_ActivityAPI api_t;
typedef CUpti_ActivityMemcpy6 copy_t;
typedef CUpti_ActivityMemset4 set_t;
typedef CUpti_CallbackData cbdata_t;
#define K_NAME(k) ((k)->name)
#else
#define PACKED __attribute__((packed)) __attribute__((aligned(8)))
typedef struct PACKED {
    uint32_t kind;
    uint8_t cache, shm;
    uint16_t regs;
    uint32_t pgc_req, pgc_exe;
    uint64_t start, end, completed;
    uint32_t deviceId, contextId, streamId;
    int32_t grid[3], block[3], ss, ds;
    uint32_t lpt, lt, correlationId;
    int64_t gridId;
    const char *name;
    uint8_t rest[96];
} kernel_t;
typedef struct PACKED {
    uint32_t kind;
    uint8_t copyKind, srcKind, dstKind, flags;
    uint64_t bytes, start, end;
    uint32_t deviceId, contextId, streamId, correlationId;
    uint8_t rest[48];
} copy_t;
typedef struct PACKED {
    uint32_t kind, value;
    uint64_t bytes, start, end;
    uint32_t deviceId, contextId, streamId, correlationId;
    uint8_t rest[40];
} set_t;
typedef struct PACKED {
    uint32_t kind, cbid;
    uint64_t start, end;
    uint32_t processId, threadId, correlationId, returnValue;
} api_t;
typedef struct {
    int callbackSite;
    const char *functionName;
    const void *functionParams;
    void *functionReturnValue;
    const char *symbolName;
    void *context;
    uint32_t contextUid;
    uint64_t *correlationData;
    uint32_t correlationId;
} cbdata_t;
#endif

typedef void (*cb_fn)(void *, int, uint32_t, const void *);
typedef void (*req_fn)(uint8_t **, size_t *, size_t *);
typedef void (*done_fn)(void *, uint32_t, uint8_t *, size_t, size_t);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cb_fn callback;
static void *userdata;
static int domains;        /* bit 1 driver, bit 2 runtime */
static req_fn requested;
static done_fn completed;
static uint64_t kinds;     /* bit per activity kind enabled */
static uint8_t *buf;
static size_t bufsize, used;
static uint32_t next_corr = 1;
static size_t dropped;
static uint64_t busy[64];
static struct held { uint8_t *b; size_t size, used; } held[64];
static int nheld;  /* each stream runs one thing at a time, as a GPU's does */

/* When work launched at `t` on `stream` starts (lock held). */
static uint64_t start_at(uint32_t stream, uint64_t t, uint64_t ns)
{
    uint64_t s = t + 1000; /* a microsecond from launch to start */
    if (s < busy[stream % 64])
        s = busy[stream % 64];
    busy[stream % 64] = s + ns;
    return s;
}

static int fail(const char *what)
{
    const char *f = getenv("FAKE_CUPTI_FAIL");
    return f && strcmp(f, what) == 0;
}

static uint64_t now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const char *off = getenv("FAKE_CUPTI_CLOCK_OFFSET");
    uint64_t o = off ? strtoull(off, NULL, 10) : 1000000000000000ull;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + o;
}

int cuptiGetResultString(int rc, const char **s)
{
    *s = rc == 39 ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" : "CUPTI_ERROR_UNKNOWN";
    return 0;
}
int cuptiSubscribe(void **h, cb_fn fn, void *ud)
{
    if (fail("subscribe"))
        return 39;
    callback = fn;
    userdata = ud;
    *h = (void *)&callback;
    return 0;
}
int cuptiEnableDomain(uint32_t on, void *h, int domain)
{
    (void)h;
    domains = on ? domains | 1 << domain : domains & ~(1 << domain);
    return 0;
}
int cuptiUnsubscribe(void *h)
{
    (void)h;
    callback = NULL;
    return 0;
}
int cuptiActivityRegisterCallbacks(req_fn r, done_fn d)
{
    requested = r;
    completed = d;
    return 0;
}
int cuptiActivityEnable(int kind)
{
    if (fail("enable"))
        return 39;
    kinds |= 1ull << kind;
    return 0;
}
int cuptiActivityDisable(int kind)
{
    kinds &= ~(1ull << kind);
    return 0;
}
int cuptiGetTimestamp(uint64_t *t)
{
    *t = now();
    return 0;
}
static size_t record_size(const uint8_t *rec)
{
    uint32_t kind;
    memcpy(&kind, rec, 4);
    return kind == 10               ? sizeof(kernel_t)
           : kind == 1              ? sizeof(copy_t)
           : kind == 4 || kind == 5 ? sizeof(api_t)
                                    : sizeof(set_t);
}
int cuptiActivityGetNextRecord(uint8_t *b, size_t valid, void **rec)
{
    size_t at = *rec ? (size_t)((uint8_t *)*rec - b) + record_size(*rec) : 0;
    if (at >= valid) {
        *rec = NULL;
        return 12; /* CUPTI_ERROR_MAX_LIMIT_REACHED */
    }
    *rec = b + at;
    return 0;
}
int cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *n)
{
    (void)ctx;
    (void)stream;
    pthread_mutex_lock(&lock);
    *n = dropped;
    dropped = 0;
    pthread_mutex_unlock(&lock);
    return 0;
}
/* Hands the buffer back (lock held; the callback runs without it, as CUPTI's). */
static void complete_locked(int forced)
{
    uint8_t *b = buf;
    size_t n = used, size = bufsize;
    buf = NULL;
    used = bufsize = 0;
    const char *hold = getenv("FAKE_CUPTI_HOLD");
    if (b && !forced && hold && *hold == '1' && nheld < 64) {
        held[nheld++] = (struct held){b, size, n};
        return;
    }
    if (b && completed) {
        pthread_mutex_unlock(&lock);
        completed(NULL, 0, b, size, n);
        pthread_mutex_lock(&lock);
    }
}
int cuptiActivityFlushAll(uint32_t flag)
{
    pthread_mutex_lock(&lock);
    while (flag && nheld > 0) { /* forced: the held ones too */
        struct held h = held[--nheld];
        pthread_mutex_unlock(&lock);
        completed(NULL, 0, h.b, h.size, h.used);
        pthread_mutex_lock(&lock);
    }
    complete_locked(flag != 0);
    pthread_mutex_unlock(&lock);
    return 0;
}
/* Room for a record of `size` bytes; NULL: dropped. Lock held. */
static void *room(size_t size)
{
    if (buf && used + size > bufsize)
        complete_locked(0);
    if (!buf && requested) {
        size_t max = 0;
        requested(&buf, &bufsize, &max);
        used = 0;
        if (!buf || bufsize < size)
            buf = NULL;
    }
    if (!buf) {
        dropped++;
        return NULL;
    }
    void *r = buf + used;
    memset(r, 0, size);
    used += size;
    return r;
}
static const char *keep(const char *name);

static const char *kept[64]; /* names kept; a name's index is its callback id */
static int nkept;

/* The callback id's name, as CUPTI's table gives it (the ids here: kept's). */
int cuptiGetCallbackName(int domain, uint32_t cbid, const char **name)
{
    (void)domain;
    pthread_mutex_lock(&lock);
    *name = (int)cbid < nkept ? kept[cbid] : NULL;
    pthread_mutex_unlock(&lock);
    return *name ? 0 : 1;
}

/* The API call's record (runtime: kind 5, driver: 4), when that kind is on; lock
 * held. */
static void api_record(const char *fn, uint64_t t0, uint64_t t1, uint32_t corr)
{
    int kind = fn[2] == 'd' ? 5 : 4;
    api_t *r = kinds & 1ull << kind ? room(sizeof *r) : NULL;
    if (!r)
        return;
    r->kind = (uint32_t)kind;
    for (int i = 0; i < nkept; i++)
        if (kept[i] == fn)
            r->cbid = (uint32_t)i;
    r->start = t0;
    r->end = t1;
    r->threadId = (uint32_t)syscall(SYS_gettid);
    r->correlationId = corr;
}

static uint32_t api(const char *fn, int site, uint32_t corr)
{
    static __thread uint64_t entered[4];
    static __thread int depth;
    cbdata_t d;
    memset(&d, 0, sizeof d);
    d.callbackSite = site;
    pthread_mutex_lock(&lock);
    d.functionName = keep(fn); /* a global constant, as CUPTI's names are */
    pthread_mutex_unlock(&lock);
    d.correlationId = corr;
    int domain = fn[2] == 'd' ? 2 : 1; /* cuda...: runtime, cu...: driver */
    if (site == 0 && depth < 4)
        entered[depth++] = now();
    if (callback && (domains & 1 << domain))
        callback(userdata, domain, 211, &d);
    if (site == 1 && depth > 0) {
        uint64_t t0 = entered[--depth];
        pthread_mutex_lock(&lock);
        api_record(d.functionName, t0, now(), corr);
        pthread_mutex_unlock(&lock);
    }
    return corr;
}

/* The kernel's name, kept for the records' lifetime (as CUPTI keeps its own);
 * lock held. */
static const char *keep(const char *name)
{
    for (int i = 0; i < nkept; i++)
        if (strcmp(kept[i], name) == 0)
            return kept[i];
    const char *copy = strdup(name);
    if (copy && nkept < 64)
        kept[nkept++] = copy;
    return copy;
}

static uint32_t new_corr(void)
{
    pthread_mutex_lock(&lock);
    uint32_t corr = next_corr++;
    pthread_mutex_unlock(&lock);
    return corr;
}

/* The test programs' entry points. */
void fake_launch(const char *fn, const char *kernel, uint32_t stream, uint64_t ns)
{
    uint32_t outer = new_corr(), corr = outer;
    api(fn, 0, outer);
    const char *nested = getenv("FAKE_CUPTI_NESTED");
    int inner = nested && *nested == '1' && fn[2] == 'd';
    if (inner) {
        corr = new_corr();
        api("cuLaunchKernel", 0, corr);
    }
    uint64_t t = now();
    pthread_mutex_lock(&lock);
    kernel_t *k = kinds & 1ull << 10 ? room(sizeof *k) : NULL;
    if (k) {
        k->kind = 10;
        k->start = start_at(stream, t, ns);
        k->end = k->start + ns;
        k->deviceId = 0;
        k->streamId = stream;
        k->correlationId = corr;
        k->name = keep(kernel);
    }
    pthread_mutex_unlock(&lock);
    if (inner)
        api("cuLaunchKernel", 1, corr);
    api(fn, 1, outer);
}
void fake_copy(const char *fn, int copy_kind, uint64_t bytes, uint32_t stream, uint64_t ns)
{
    uint32_t corr = new_corr();
    api(fn, 0, corr);
    uint64_t t = now();
    pthread_mutex_lock(&lock);
    copy_t *c = kinds & 1ull << 1 ? room(sizeof *c) : NULL;
    if (c) {
        c->kind = 1;
        c->copyKind = (uint8_t)copy_kind;
        c->bytes = bytes;
        c->start = start_at(stream, t, ns);
        c->end = c->start + ns;
        c->streamId = stream;
        c->correlationId = corr;
    }
    pthread_mutex_unlock(&lock);
    api(fn, 1, corr);
}
void fake_set(const char *fn, uint64_t bytes, uint32_t stream, uint64_t ns)
{
    uint32_t corr = new_corr();
    api(fn, 0, corr);
    uint64_t t = now();
    pthread_mutex_lock(&lock);
    set_t *s = kinds & 1ull << 2 ? room(sizeof *s) : NULL;
    if (s) {
        s->kind = 2;
        s->bytes = bytes;
        s->start = start_at(stream, t, ns);
        s->end = s->start + ns;
        s->streamId = stream;
        s->correlationId = corr;
    }
    pthread_mutex_unlock(&lock);
    api(fn, 1, corr);
}
/* What CUPTI does now and then: hands back the buffer being filled. */
void fake_flush(void)
{
    cuptiActivityFlushAll(0);
}
