/* Combining results: several runs of a program (the seed's concat.py, which adds
 * pstats files together) and the ranks of an MPI job.
 *
 * Threads are matched by (rank, thread number): the main thread of two runs of
 * the same rank is one thread of the result, and its call trees are summed path by
 * path (calls, sums, self times; min and max kept; means and variances combined
 * by Chan's formula, so the result is what one long run would have recorded).
 * Threads of different ranks stay apart, so a merge of MPI ranks keeps every
 * rank's values (the load-balance table and the HTML rank selector read them).
 * With ST_MERGE_SUM_RANKS ranks are summed too: one tree per thread number, the
 * whole job at a glance (the text tables of a merged job).
 *
 * Labels and locations are matched by their text, so results from different
 * processes merge. Times are converted to nanoseconds. Inputs whose components
 * differ merge over the timers they all have. Every other metric an input reports
 * is matched by name (registered in the output when new): counts, bytes and
 * samples add up, gauges combine their readings (last: the later input's); a name
 * the output has with another kind is not merged. The sections only a run writes
 * are combined too: the timeline's counts add up, and each process-sampling
 * summary keeps its range, with a mean weighted by the runs' samples.
 *
 * Counts and time sums never wrap: a sum that would pass ST_COUNT_MAX (2^63 - 1,
 * the largest integer profile.json holds) stays there, and the merger's
 * `saturated` flag tells the caller to say so. */
#ifndef STRATA_MODEL_MERGE_H
#define STRATA_MODEL_MERGE_H

#include "base/err.h"
#include "model/model.h"
#include "model/profile.h"

#define ST_MERGE_SUM_RANKS 1

/* Incremental merging, one input at a time (so that a thousand rank files need
 * not all be in memory at once):
 *     st_merger_t mg; st_merge_begin(&mg, &out, flags);
 *     st_merge_add(&mg, model) ... ; st_merge_end(&mg);
 * out (uninitialised before begin) then holds the result; free it with
 * st_profile_free. The metadata is the first input's, with the earliest start and
 * latest end, the dropped calls added, the number of runs summed
 * (metadata.merged_runs) and of ranks kept (metadata.ranks). Each call returns 0
 * or ST_ENOMEM (after which only st_profile_free(out) is valid). */
typedef struct {
    st_profile_t *out;
    int flags;
    size_t n;
    unsigned comps;         /* components every input has */
    uint32_t *contrib;      /* per output thread: inputs summed into it */
    size_t capc;
    uint32_t maxruns_in;
    int saturated;          /* 1: some count or sum was held at ST_COUNT_MAX */
} st_merger_t;

int st_merge_begin(st_merger_t *mg, st_profile_t *out, int flags);
int st_merge_add(st_merger_t *mg, const st_model_t *m);
int st_merge_end(st_merger_t *mg);

/* All at once: merges n models into out (uninitialised). */
int st_merge(st_profile_t *out, const st_model_t *const *in, size_t n, int flags, st_msg_t *msg);

#endif
