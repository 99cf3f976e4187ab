/* What the writers read: the finished profile of a run, independent of any
 * collector. The session builds it from its threads once recording has stopped;
 * tests build it from hand-made trees. Nothing here is owned by the model. */
#ifndef STRATA_CORE_MODEL_H
#define STRATA_CORE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/calltree.h"
#include "core/intern.h"
#include "core/settings.h"

typedef struct {
    const st_calltree_t *tree;
    uint32_t index;         /* |N>>> in the tables */
    uint64_t tid;           /* the kernel's thread id */
    const char *name;       /* e.g. "MainThread" */
} st_model_thread_t;

typedef struct {
    const st_intern_t *labels;
    const st_model_thread_t *threads;
    size_t nthreads;
    double ns_per_tick[ST_NTIMERS]; /* converts each timer's ticks to ns */
    const st_settings_t *settings;
    unsigned components;    /* bit (1 << st_component_t) for each component chosen */
    /* metadata for profile.json */
    const char *const *command;
    size_t ncommand;
    const char *python_version;
    const char *clock_name;
    long pid;
    const char *host;
    uint64_t start_ns, end_ns;  /* CLOCK_REALTIME */
    uint64_t dropped;           /* calls not recorded (node limit, memory) */
} st_model_t;

#endif
