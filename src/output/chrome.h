/* trace.json: the timeline as Chrome trace events (the JSON that chrome://tracing,
 * Perfetto and speedscope open): B/E events per call, M events naming the process
 * and threads, C events for the sampled counters. Timestamps in microseconds. */
#ifndef STRATA_OUTPUT_CHROME_H
#define STRATA_OUTPUT_CHROME_H

#include <stdio.h>

#include "base/err.h"
#include "output/timeline.h"

/* Writes the whole trace to f. Returns 0, or ST_EIO with msg filled. */
int st_chrome_write(FILE *f, const st_timeline_t *m, st_msg_t *msg);

#endif
