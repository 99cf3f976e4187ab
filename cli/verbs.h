/* The verbs of the `strata` command, one file each; cli/strata.c dispatches.
 *
 *     strata python [options] [--] script.py [args]      python.c
 *     strata sample [options] [--] program [args]        sample.c
 *     strata run    [options] [--] program [args]        sample.c
 *     strata avail  [options]                             avail.c (avail.h)
 *     strata report [options] RESULT                      report.c
 *     strata merge  [options] -o OUT RESULT...            merge.c
 *
 * Each takes the words after the verb and returns the exit status: 0, or 2 after
 * one line `strata: error: ...` on standard error (a mistake: unknown flag or
 * format, a missing, truncated, corrupt or newer-format file, a folder with no
 * profile); no output file is left half written. */
#ifndef STRATA_CLI_VERBS_H
#define STRATA_CLI_VERBS_H

#include <stdio.h>

/* Checks the command line, then replaces the process with the interpreter running
 * strata's runner (returns only on a mistake or when exec fails). */
int st_python_main(int argc, char **argv);

/* Checks the command line, makes the results folder, then replaces the process
 * with the program under strata's preload library (returns only on a mistake).
 * A program that is the Python interpreter `strata python` runs is sampled as
 * `strata python --sample --native` would (Python frames in place of the
 * interpreter's). */
int st_sample_main(int argc, char **argv);

/* The same for `strata run [options] [--] program [args]`: the program's
 * functions built with -finstrument-functions and its <strata.h> regions, timed
 * as strata python times Python calls. */
int st_run_main(int argc, char **argv);

/* `strata diff A B` (or A... -- B...): the runs compared per function
 * (output/diff.h); exit 1 with --fail-on when a function got slower. */
int st_diff_main(int argc, char **argv);

/* The MPI wrapper library (native/mpi.h) when `program` runs with MPI (the
 * launcher's variables, else the libraries the program needs; program NULL: the
 * variables alone), found beside strata's preload library: its path in buf, or
 * NULL (no MPI, or strata built without MPI headers). Sets _STRATA_EXE to
 * strata's own path for STRATA_MPI_GATHER's merge. */
const char *st_cli_mpi_wrappers(const char *program, char *buf, size_t size);

/* The Python interpreter `strata python` runs, written into buf when found there:
 * PYTHON_EXECUTABLE, else the python3 beside this executable (a virtual
 * environment's bin/), else the interpreter strata was built for, else
 * "python3" (from PATH). */
const char *st_cli_find_python(char *buf, size_t size);

/* Renders a result in another format:
 *     strata report [--format F[,F...]] [-o OUT] [-n PCT] [-e PCT]
 *                   [--colour-nodes-by-selftime] [--precision N] RESULT */
int st_report_main(int argc, char **argv);

/* Combines runs or MPI ranks:
 *     strata merge [--format F[,F...]] -o OUT RESULT... */
int st_merge_main(int argc, char **argv);

/* Lists settings and components (envp: the environment); prints to out. */
int st_avail_main(int argc, char **argv, char *const *envp, FILE *out);

#endif
