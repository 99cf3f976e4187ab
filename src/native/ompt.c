/* OpenMP through OMPT (issue 14): the preloaded library exports ompt_start_tool,
 * which an OpenMP runtime with the tools interface (LLVM's libomp; GCC's libgomp
 * has none) calls when it starts. Under `strata run` it registers callbacks that
 * make, on every thread of a team, its share of a parallel region ("omp parallel",
 * the implicit task), each worksharing loop it runs ("omp loop"), each barrier it
 * waits in ("omp barrier": the time spent waiting; "omp taskwait", "omp
 * taskgroup" and "omp reduction" for the other synchronisations) and each explicit
 * task it runs ("omp task") calls of their own, so that they nest under the code
 * that ran them. A task runs where a thread picked it up: at a barrier, a taskwait,
 * or where it was made (an undeferred one); a task that waits for its children
 * (taskwait) has the children it runs meanwhile under its "omp taskwait", since a
 * tied task resumes on the thread it was suspended on, where it is below them. The
 * OMPT types are declared here, as the OpenMP 5.0 specification fixes them
 * (omp-tools.h is not needed to build). */
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
    EV_TASK_CREATE = 5,
    EV_TASK_SCHEDULE = 6,
    EV_IMPLICIT_TASK = 7,
    EV_WORK = 20,
    EV_SYNC_REGION = 23,
    SCOPE_BEGIN = 1,
    SCOPE_END = 2,
    TASK_INITIAL = 1, /* ompt_task_initial: a thread's initial task, no region */
    TASK_EXPLICIT = 4,
    TASK_COMPLETE = 1, /* ompt_task_status_t: the prior task has ended */
    TASK_CANCEL = 3,
    TASK_DETACH = 4,
    SYNC_TASKWAIT = 5,
    SYNC_TASKGROUP = 6,
    SYNC_REDUCTION = 7,
    WORK_LOOP = 1,
    SET_NEVER = 1,
};

/* An explicit task's ompt_data_t: made, then running (its address is the key of
 * its call). The runtime hands the task's data from the thread that made it to the
 * one that runs it. */
#define TASK_MADE 0x53744d61646521ull
#define TASK_RUNS 0x537452756e7321ull

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

/* A barrier, a taskwait, a taskgroup's end or a reduction. */
static void on_sync_region(int kind, int endpoint, ompt_data_t *parallel, ompt_data_t *task,
                           const void *codeptr)
{
    (void)parallel;
    (void)task;
    (void)codeptr;
    if (endpoint == SCOPE_BEGIN)
        st_ninstr_enter_text(kind == SYNC_TASKWAIT    ? "omp taskwait"
                             : kind == SYNC_TASKGROUP ? "omp taskgroup"
                             : kind == SYNC_REDUCTION ? "omp reduction"
                                                      : "omp barrier",
                             KEY_BARRIER);
    else if (endpoint == SCOPE_END)
        st_ninstr_exit_key(KEY_BARRIER);
}

/* An explicit task is made (on the thread that encounters it). */
static void on_task_create(ompt_data_t *parent, const void *parent_frame, ompt_data_t *task,
                           int flags, int has_dependences, const void *codeptr)
{
    (void)parent;
    (void)parent_frame;
    (void)has_dependences;
    (void)codeptr;
    if (task && (flags & TASK_EXPLICIT))
        task->value = TASK_MADE;
}

/* A thread leaves `prior` for `next`: an explicit task that ended closes, one that
 * starts opens; one suspended stays open below what the thread runs meanwhile. */
static void on_task_schedule(ompt_data_t *prior, int status, ompt_data_t *next)
{
    if (prior && prior->value == TASK_RUNS &&
        (status == TASK_COMPLETE || status == TASK_CANCEL || status == TASK_DETACH))
        st_ninstr_exit_key(prior);
    if (next && next->value == TASK_MADE) {
        next->value = TASK_RUNS;
        st_ninstr_enter_text("omp task", next);
    }
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
    set(EV_TASK_CREATE, (ompt_callback_t)on_task_create);
    set(EV_TASK_SCHEDULE, (ompt_callback_t)on_task_schedule);
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
