/* Reading profile.json back: a result file becomes the same st_model_t the
 * writers read at the end of a run, so that `strata report` and `strata merge`
 * render and combine results with the same writers.
 *
 * A loaded profile owns everything its model points to. Times come back in
 * nanoseconds (ns_per_tick is 1): each node's sum, self, min and max exactly (up
 * to 2^53 ns), its mean and variance as stored (the Welford state is rebuilt from
 * them, so merging loaded profiles combines variances exactly as Chan's formula
 * does in memory).
 *
 * The reader is strict and bounded (see input/jsonpull.h): a truncated, corrupt
 * or inconsistent file is an error with one line saying what and where, never a
 * crash; a format_version newer than ST_PROFILE_FORMAT_VERSION (model/version.h)
 * is refused. Fields it does not know are skipped, so files from a newer strata
 * with only added fields still load. The profile it fills is model/profile.h's. */
#ifndef STRATA_INPUT_PROFILE_H
#define STRATA_INPUT_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "model/profile.h"

/* Most nodes one thread of a file may hold. */
#define ST_PROFILE_MAX_NODES 100000000u
/* Largest profile.json read (bytes). */
#define ST_PROFILE_MAX_BYTES ((size_t)16 << 30)

/* Parses a profile.json held in buf (len bytes, buf[len] must be 0) into p
 * (uninitialised). `name` names the input in messages. Returns 0, or ST_EINVAL
 * (bad content), ST_ENOMEM; msg says what and where. */
int st_profile_parse(st_profile_t *p, const char *buf, size_t len, const char *name,
                     st_msg_t *msg);

/* Reads the file at path into p (uninitialised). Besides st_profile_parse's
 * errors, ST_EIO when it cannot be read. A file named profile-<N>.json whose
 * metadata has no rank is taken as rank N. */
int st_profile_load(st_profile_t *p, const char *path, st_msg_t *msg);

#endif
