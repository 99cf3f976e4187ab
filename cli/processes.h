/* `strata report`'s view of a run's child processes (STRATA_FOLLOW_CHILDREN): the
 * process tree of its results folder's processes.jsonl, and each function's time
 * across the children (one row a function: a pool's work over its workers, with
 * its spread); for the HTML report, the whole tree as one result. */
#ifndef STRATA_CLI_PROCESSES_H
#define STRATA_CLI_PROCESSES_H

#include "base/err.h"
#include "base/strbuf.h"
#include "model/profile.h"
#include "session/session.h"

/* Appends the view to out when `dir` is a results folder whose run recorded child
 * processes (nothing otherwise). 0, or < 0 with msg filled (a child's profile.json
 * that cannot be read). */
int st_cli_report_processes(const char *dir, st_strbuf_t *out, int precision, st_msg_t *msg);

/* A followed tree as one result (the HTML report's): every process's profile
 * merged, its threads as the rank of its pid (the run's own first), with the
 * tree's record as the model's children (ranks_are_pids). */
typedef struct {
    st_profile_t merged;
    st_tree_proc_t *procs;
    size_t nprocs;
    st_model_child_t *kids;
    int loaded;
} st_cli_tree_t;

/* 1 with t filled when `dir` is a results folder whose run recorded child
 * processes, 0 when it is not, < 0 with msg filled (a profile.json that cannot be
 * read). Free with st_cli_tree_free after 1. */
int st_cli_tree_load(const char *dir, st_cli_tree_t *t, st_msg_t *msg);
void st_cli_tree_free(st_cli_tree_t *t);

#endif
