/* `strata report`'s view of a run's child processes (STRATA_FOLLOW_CHILDREN): the
 * process tree of its results folder's processes.jsonl, and each function's time
 * across the children (one row a function: a pool's work over its workers, with
 * its spread). */
#ifndef STRATA_CLI_PROCESSES_H
#define STRATA_CLI_PROCESSES_H

#include "base/err.h"
#include "base/strbuf.h"

/* Appends the view to out when `dir` is a results folder whose run recorded child
 * processes (nothing otherwise). 0, or < 0 with msg filled (a child's profile.json
 * that cannot be read). */
int st_cli_report_processes(const char *dir, st_strbuf_t *out, int precision, st_msg_t *msg);

#endif
