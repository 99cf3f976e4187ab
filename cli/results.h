/* `strata report` and `strata merge`: render a result in another format, and
 * combine runs or MPI ranks.
 *
 *     strata report [--format F[,F...]] [-o OUT] [-n PCT] [-e PCT]
 *                   [--colour-nodes-by-selftime] [--precision N] RESULT
 *     strata merge  [--format F[,F...]] -o OUT RESULT...
 *
 * A RESULT is a profile.json (or profile-<rank>.json) file, or a results folder:
 * its profile.json, else every profile-<rank>.json in it (an MPI job's ranks,
 * merged). A mistake (unknown flag or format, a missing, truncated, corrupt or
 * newer-format file, a folder with no profile) prints one line
 * `strata: error: ...` and exits with status 2; no output file is left half
 * written. */
#ifndef STRATA_REPORT_REPORT_CMD_H
#define STRATA_REPORT_REPORT_CMD_H

#include <stdio.h>

/* argv are the words after the verb. Return the exit status. */
int st_report_main(int argc, char **argv);
int st_merge_main(int argc, char **argv);

#endif
