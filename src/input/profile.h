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
 * crash; a format_version newer than ST_PROFILE_FORMAT_VERSION is refused. Fields
 * it does not know are skipped, so files from a newer strata with only added
 * fields still load. */
#ifndef STRATA_INPUT_PROFILE_H
#define STRATA_INPUT_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/calltree.h"
#include "base/err.h"
#include "core/intern.h"
#include "core/loctab.h"
#include "model/model.h"
#include "core/settings.h"

/* Most nodes one thread of a file may hold. */
#define ST_PROFILE_MAX_NODES 100000000u
/* Largest profile.json read (bytes). */
#define ST_PROFILE_MAX_BYTES ((size_t)16 << 30)

typedef struct {
    st_intern_t labels;
    st_loctab_t locs;
    st_settings_t settings;
    st_calltree_t *trees;
    st_model_thread_t *threads;
    char **thread_names;
    size_t nthreads, capthreads;
    char **command;
    size_t ncommand;
    char *python_version, *clock_name, *host;
    int have_settings;
    st_model_t model;       /* points into this profile */
} st_profile_t;

/* An empty profile (no threads), ready to be filled by a merge. */
int st_profile_init(st_profile_t *p);
void st_profile_free(st_profile_t *p);

/* Parses a profile.json held in buf (len bytes, buf[len] must be 0) into p
 * (uninitialised). `name` names the input in messages. Returns 0, or ST_EINVAL
 * (bad content), ST_ENOMEM; msg says what and where. */
int st_profile_parse(st_profile_t *p, const char *buf, size_t len, const char *name,
                     st_msg_t *msg);

/* Reads the file at path into p (uninitialised). Besides st_profile_parse's
 * errors, ST_EIO when it cannot be read. A file named profile-<N>.json whose
 * metadata has no rank is taken as rank N. */
int st_profile_load(st_profile_t *p, const char *path, st_msg_t *msg);

/* Adds an empty thread (tree with only a root) and returns its index, or -1. The
 * name is copied. */
long st_profile_add_thread(st_profile_t *p, uint32_t index, uint64_t tid, const char *name,
                           int has_rank, uint32_t rank);

/* Points p->model at the profile's current contents (after adding threads). */
void st_profile_sync(st_profile_t *p);

#endif
