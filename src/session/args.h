/* The command line of `strata python` and `python -m strata`: one parser for both,
 * so that they accept the same syntax and fail with the same message.
 *
 *     [options] [--] script.py [args]
 *     [options] [--] -m package.module [args]
 *
 * Options that take several values consume the words after them up to the next
 * one starting with '-' (as argparse does). Settings are applied in precedence
 * order: defaults, the config file (-c, else STRATA_CONFIG_FILE, else
 * ~/.strata.cfg when it exists), the environment, then the flags in the order
 * given. */
#ifndef STRATA_SESSION_ARGS_H
#define STRATA_SESSION_ARGS_H

#include <stdio.h>

#include "core/err.h"
#include "core/settings.h"

typedef struct {
    st_settings_t settings;
    int is_module;          /* target is a module name (-m) */
    const char *target;     /* script path or module name; points into argv */
    char **target_args;     /* the words after the target; points into argv */
    int ntarget_args;
} st_args_t;

/* Parses argv[0..argc) (the words after `strata python`). envp gives the
 * environment. Returns 0; ST_EHELP after printing help to `out`; or ST_EUSAGE /
 * ST_EINVAL / ST_EIO with msg filled (args is then freed). warn receives warnings
 * (unknown STRATA_ variables) and may be NULL. */
int st_args_parse_python(st_args_t *args, int argc, char **argv, char *const *envp,
                         st_warn_fn warn, FILE *out, st_msg_t *msg);
void st_args_free(st_args_t *args);

/* Prints the help of `strata python`. */
void st_args_print_python_help(FILE *out);

#endif
