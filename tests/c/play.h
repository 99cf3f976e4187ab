/* For C tests: records calls into a path table by hand, as a collector would (a
 * stack of open calls; each exit adds its time to every timer column and to its
 * caller's children time), so that tests build models from a few enter/exit
 * steps with made-up clocks. */
#ifndef STRATA_TESTS_PLAY_H
#define STRATA_TESTS_PLAY_H

#include <stdint.h>

#include "core/components.h"
#include "core/metrics.h"
#include "core/pathtab.h"

typedef struct {
    uint32_t node;                  /* ST_PATH_NONE: not recorded */
    uint64_t t0[ST_NTIMERS], child[ST_NTIMERS];
} st_play_frame_t;

typedef struct {
    st_pathtab_t *t;
    int ntimers;                    /* the first ntimers metrics are timers */
    st_play_frame_t *stack;
    uint32_t depth, cap;
} st_play_t;

/* Adds the model's timers to m: wall_clock (metric 0), cpu_clock (metric 1).
 * Returns 0 or an st_err code. */
int st_play_metrics(st_metrics_t *m);

void st_play_init(st_play_t *p, st_pathtab_t *t, int ntimers);
void st_play_free(st_play_t *p);

/* Opens a call of `label` at now[timer]. Returns 0 or ST_ENOMEM. */
int st_play_enter(st_play_t *p, uint32_t label, const uint64_t *now);

/* Closes the innermost call at now[timer]. Returns 0, or ST_EINVAL when none is
 * open. */
int st_play_exit(st_play_t *p, const uint64_t *now);

#endif
