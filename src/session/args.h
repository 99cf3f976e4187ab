/* The command line of `strata python` and `python -m strata`: one parser for both,
 * so that they accept the same syntax and fail with the same message (and, with
 * ST_ARGS_EXE, that of `strata sample`).
 *
 *     [options] [--] script.py [args]
 *     [options] [--] -m package.module [args]
 *
 * The flags are the settings registry's (core/settings.h, st_flag_t): the table
 * this parser searches and the option part of --help are generated from it, so a
 * flag is spelled once. Options that take several values consume the words after
 * them up to the next one starting with '-' (as argparse does). Settings are applied in precedence
 * order: defaults, the config file (-c, else STRATA_CONFIG_FILE, else
 * ~/.strata.cfg when it exists), the environment, then the flags in the order
 * given.
 *
 * The interpreter's options (-u, -O, -X OPT, -W ARG...) may come among strata's,
 * before the target, when the caller can still pass them to the interpreter
 * (ST_ARGS_INTERPRETER: the `strata` command, which starts it). */
#ifndef STRATA_SESSION_ARGS_H
#define STRATA_SESSION_ARGS_H

#include <stdio.h>

#include "base/err.h"
#include "core/settings.h"

typedef struct {
    st_settings_t settings;
    int is_module;          /* target is a module name (-m) */
    const char *target;     /* script path or module name; points into argv */
    char **target_args;     /* the words after the target; points into argv */
    int ntarget_args;
    /* With ST_ARGS_INTERPRETER: the interpreter's own options (-u, -X dev...) in
     * the order given, values included, and the other words of argv, in order
     * (what strata's runner parses again). Arrays owned by args, words by argv. */
    char **interp_opts;
    int ninterp_opts;
    char **strata_words;
    int nstrata_words;
} st_args_t;

/* Accept the options of the Python interpreter that a Python user passes and that
 * name no strata option: -u, -O, -OO, -B, -P, -q (alone or bundled, -uO), -X OPT
 * and -W ARG (or -XOPT, -WARG). Without it (python -m strata, where the interpreter
 * has already started) they are an error that says where to put them. */
#define ST_ARGS_INTERPRETER 1u

/* The command line of `strata sample`: [options] [--] program [args]. Only the
 * flags that sampling a native program uses (the others are an error that says
 * to use their variables); the program is not looked for here (PATH). */
#define ST_ARGS_EXE 2u

/* The command line of `strata run`: [options] [--] program [args], with the
 * flags of a native profile (the profile's, the filters, the timeline, stack
 * sampling). */
#define ST_ARGS_RUN 4u

/* The words of IPython's %strata and %%strata: [options] [--] [statement]. The
 * target is the first word of a Python statement (not looked for), or none (a
 * cell's options alone); -m is no option there. */
#define ST_ARGS_STATEMENT 8u

/* Parses argv[0..argc) (the words after `strata python`, or `strata sample` with
 * ST_ARGS_EXE). envp gives the environment; opts is 0, ST_ARGS_INTERPRETER or
 * ST_ARGS_EXE. Returns 0; ST_EHELP after
 * printing help to `out`; or ST_EUSAGE / ST_EINVAL / ST_EIO with msg filled (args
 * is then freed). warn receives warnings (unknown STRATA_ variables) and may be
 * NULL. */
int st_args_parse_python(st_args_t *args, int argc, char **argv, char *const *envp,
                         unsigned opts, st_warn_fn warn, FILE *out, st_msg_t *msg);
void st_args_free(st_args_t *args);

/* Prints the help of `strata python`: the usage line and one entry per flag, in
 * the registry's help_order, laid out as argparse does on an 88-column terminal. */
void st_args_print_python_help(FILE *out);

#endif
