/* trace.pftrace: the timeline in Perfetto's native protobuf format, written by
 * strata itself (no Perfetto SDK). See perfetto.c for the layout. */
#ifndef STRATA_OUTPUT_PERFETTO_H
#define STRATA_OUTPUT_PERFETTO_H

#include <stdint.h>
#include <stdio.h>

#include "base/err.h"
#include "output/timeline.h"

typedef struct {
    uint64_t bytes;           /* size of what was written */
    uint64_t slice_events;    /* begins and ends */
    uint64_t counter_events;  /* counter samples */
    uint64_t stack_samples;   /* StackSample packets */
} st_perfetto_stats_t;

/* Writes the whole trace to f. Returns 0, or ST_EIO with msg filled when writing
 * (or reading back a spilled timeline) failed. stats may be NULL. */
int st_perfetto_write(FILE *f, const st_timeline_t *m, st_perfetto_stats_t *stats, st_msg_t *msg);

#endif
