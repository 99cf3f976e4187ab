/* omptfloor: the floor of the OpenMP benchmark (bench/native_omp.py), preloaded: an
 * OMPT tool with the callbacks strata registers (implicit task, work, sync region),
 * each reading the TSC once and doing nothing else: what any OMPT tool pays to be
 * called. The OMPT types as the OpenMP 5.0 specification fixes them. */
#include <stdint.h>
#include <x86intrin.h>

typedef union {
    uint64_t value;
    void *ptr;
} ompt_data_t;
typedef void (*ompt_callback_t)(void);
typedef ompt_callback_t (*lookup_t)(const char *);
typedef int (*set_callback_t)(int, ompt_callback_t);
typedef struct {
    int (*initialize)(lookup_t, int, ompt_data_t *);
    void (*finalize)(ompt_data_t *);
    ompt_data_t data;
} result_t;

static volatile unsigned long long sink;

static void on_implicit_task(int e, ompt_data_t *p, ompt_data_t *t, unsigned n, unsigned i, int f)
{
    (void)e, (void)p, (void)t, (void)n, (void)i, (void)f;
    sink = __rdtsc();
}

static void on_work(int k, int e, ompt_data_t *p, ompt_data_t *t, uint64_t c, const void *cp)
{
    (void)k, (void)e, (void)p, (void)t, (void)c, (void)cp;
    sink = __rdtsc();
}

static void on_sync(int k, int e, ompt_data_t *p, ompt_data_t *t, const void *cp)
{
    (void)k, (void)e, (void)p, (void)t, (void)cp;
    sink = __rdtsc();
}

static int initialize(lookup_t lookup, int device, ompt_data_t *data)
{
    (void)device, (void)data;
    set_callback_t set = (set_callback_t)lookup("ompt_set_callback");
    set(7, (ompt_callback_t)on_implicit_task);
    set(20, (ompt_callback_t)on_work);
    set(23, (ompt_callback_t)on_sync);
    return 1;
}

static void finalize(ompt_data_t *data) { (void)data; }

__attribute__((visibility("default"))) result_t *ompt_start_tool(unsigned v, const char *rt)
{
    (void)v, (void)rt;
    static result_t r = {initialize, finalize, {0}};
    return &r;
}
