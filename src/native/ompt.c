/* OpenMP through OMPT (issue 14): the preloaded library exports ompt_start_tool,
 * which an OpenMP runtime with the tools interface (LLVM's libomp; GCC's libgomp
 * has none) calls when it starts. Under `strata run` it registers callbacks that
 * make, on every thread of a team, its share of a parallel region ("omp parallel",
 * the implicit task), each worksharing loop it runs ("omp loop") and each barrier
 * it waits in ("omp barrier": the time spent waiting) calls of their own, keyed
 * per thread, so that they nest under the code that ran them. The OMPT types are declared here, as the OpenMP 5.0 specification
 * fixes them (omp-tools.h is not needed to build). */
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "native/instrument.h"
#include "native/ompt.h"

#define EXPORT __attribute__((visibility("default")))

typedef union {
    uint64_t value;
    void *ptr;
} ompt_data_t;

typedef void (*ompt_interface_fn_t)(void);
typedef ompt_interface_fn_t (*ompt_function_lookup_t)(const char *name);
typedef void (*ompt_callback_t)(void);
typedef int (*ompt_set_callback_t)(int event, ompt_callback_t callback);
typedef int (*ompt_initialize_t)(ompt_function_lookup_t lookup, int device, ompt_data_t *tool);
typedef void (*ompt_finalize_t)(ompt_data_t *tool);

typedef struct {
    ompt_initialize_t initialize;
    ompt_finalize_t finalize;
    ompt_data_t tool_data;
} ompt_start_tool_result_t;

/* The events and values used (OpenMP 5.0, section 4.4). */
enum {
    EV_IMPLICIT_TASK = 7,
    EV_WORK = 20,
    EV_SYNC_REGION = 23,
    SCOPE_BEGIN = 1,
    SCOPE_END = 2,
    TASK_INITIAL = 1, /* ompt_task_initial: a thread's initial task, no region */
    WORK_LOOP = 1,
    SET_NEVER = 1,
};

/* The keys of a thread's open OpenMP calls: its own addresses, not the runtime's
 * task data, which libomp does not keep from begin to end on a worker (its
 * closing barrier and implicit task end under the data of the task it waits in).
 * Nested regions on one thread reuse the keys: their ends come innermost first. */
static __thread char keys[3] __attribute__((tls_model("initial-exec")));
#define KEY_TASK (&keys[0])
#define KEY_LOOP (&keys[1])
#define KEY_BARRIER (&keys[2])

/* A thread's share of a parallel region. */
static void on_implicit_task(int endpoint, ompt_data_t *parallel, ompt_data_t *task,
                             unsigned int n, unsigned int index, int flags)
{
    (void)parallel;
    (void)task;
    (void)n;
    (void)index;
    if (flags & TASK_INITIAL)
        return;
    if (endpoint == SCOPE_BEGIN) {
        st_ninstr_enter_text("omp parallel", KEY_TASK);
    } else if (endpoint == SCOPE_END) {
        /* a barrier or a loop still open on top ends with the task */
        st_ninstr_exit_key(KEY_BARRIER);
        st_ninstr_exit_key(KEY_LOOP);
        st_ninstr_exit_key(KEY_TASK);
    }
}

/* A worksharing construct: loops only (sections, single... are not shown). */
static void on_work(int kind, int endpoint, ompt_data_t *parallel, ompt_data_t *task,
                    uint64_t count, const void *codeptr)
{
    (void)parallel;
    (void)task;
    (void)count;
    (void)codeptr;
    if (kind != WORK_LOOP)
        return;
    if (endpoint == SCOPE_BEGIN)
        st_ninstr_enter_text("omp loop", KEY_LOOP);
    else if (endpoint == SCOPE_END)
        st_ninstr_exit_key(KEY_LOOP);
}

/* A barrier (or taskwait, taskgroup...: every synchronisation region). */
static void on_sync_region(int kind, int endpoint, ompt_data_t *parallel, ompt_data_t *task,
                           const void *codeptr)
{
    (void)kind;
    (void)parallel;
    (void)task;
    (void)codeptr;
    if (endpoint == SCOPE_BEGIN)
        st_ninstr_enter_text("omp barrier", KEY_BARRIER);
    else if (endpoint == SCOPE_END)
        st_ninstr_exit_key(KEY_BARRIER);
}

static int active;

int st_nompt_active(void)
{
    return active;
}

static int initialize(ompt_function_lookup_t lookup, int device, ompt_data_t *tool)
{
    (void)device;
    (void)tool;
    ompt_set_callback_t set = (ompt_set_callback_t)lookup("ompt_set_callback");
    if (!set)
        return 0;
    int ok = set(EV_IMPLICIT_TASK, (ompt_callback_t)on_implicit_task) > SET_NEVER;
    set(EV_WORK, (ompt_callback_t)on_work);
    set(EV_SYNC_REGION, (ompt_callback_t)on_sync_region);
    active = ok;
    return ok;
}

static void finalize(ompt_data_t *tool)
{
    (void)tool;
}

EXPORT ompt_start_tool_result_t *ompt_start_tool(unsigned int version, const char *runtime)
{
    (void)version;
    (void)runtime;
    static ompt_start_tool_result_t result = {initialize, finalize, {0}};
    return st_ninstr_measuring() ? &result : NULL;
}

static int find_gomp(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    return info->dlpi_name && strstr(info->dlpi_name, "libgomp.so") != NULL;
}

void st_nompt_note(FILE *notes)
{
    if (notes && !active && dl_iterate_phdr(find_gomp, NULL))
        fprintf(notes, "[strata] this program's OpenMP runtime is GCC's libgomp, which has no "
                       "tools interface (OMPT): its parallel regions, loops and barriers are not "
                       "shown (its threads and functions are); built with clang -fopenmp (LLVM's "
                       "libomp) they are\n");
}
