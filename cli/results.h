/* What `strata report` and `strata merge` share: the RESULT arguments (a
 * profile.json or profile-<rank>.json file, or a results folder: its profile.json,
 * else every profile-<rank>.json in it, an MPI job's ranks, merged), loading and
 * merging them, their common options, and the `strata: error:` lines they print.
 * Everything here runs in the `strata` command only, never in a profiled process. */
#ifndef STRATA_CLI_RESULTS_H
#define STRATA_CLI_RESULTS_H

#include <stddef.h>

#include "base/err.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "model/profile.h"
#include "output/registry.h"

/* Profile files, in order; paths owned. */
typedef struct {
    char **paths;
    size_t n, cap;
} st_cli_paths_t;

/* The options of report (and, less the call graph's, merge). */
typedef struct {
    const char *formats;    /* --format, or NULL */
    const char *out;        /* -o, or NULL */
    int force;
    st_output_opts_t ro;
    char **inputs;          /* the RESULT words (array owned, words in argv) */
    int ninputs;
} st_cli_opts_t;

/* Prints `strata: error: text` and returns 2, the exit status of a mistake. */
int st_cli_fail(const char *text);
/* st_msg_set(msg, err, fmt, arg), then st_cli_fail. */
int st_cli_failf(st_msg_t *msg, int err, const char *fmt, const char *arg);
/* After st_formats_write_dir failed: the files it wrote, then a `strata: error:`
 * line for each that failed (only msg's when none was written: a name refused).
 * Returns 2. */
int st_cli_failed_files(st_strbuf_t *written, st_strbuf_t *errors, const st_msg_t *msg);

/* Appends the profile files a RESULT argument names to out. */
int st_cli_resolve(const char *arg, st_cli_paths_t *out, st_msg_t *msg);
void st_cli_paths_free(st_cli_paths_t *p);

/* Loads and merges every file into out (a single file is loaded as it is, unless
 * `always_merge`); warns when one run is given twice or a sum saturated.
 * *together (may be NULL): 1 when the files are processes of one host that ran at
 * the same time (a run and its child processes), whose timelines belong together. */
int st_cli_load_all(const st_cli_paths_t *files, st_profile_t *out, int always_merge,
                    int *together, st_msg_t *msg);

/* The identities of the input files, which no output may replace (*ids owned by
 * the caller). */
int st_cli_input_ids(const st_cli_paths_t *files, st_fs_id_t **ids);

/* Parses the words after the verb (`report` 1: report's options too). ST_EHELP for
 * -h; o->inputs must be freed whatever it returns. */
int st_cli_parse_opts(st_cli_opts_t *o, int argc, char **argv, int report, st_msg_t *msg);

/* The folder a RESULT argument lives in (for default output names). */
void st_cli_result_dir(const char *arg, char *buf, size_t size);

#endif
