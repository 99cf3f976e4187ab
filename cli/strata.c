/* The `strata` command: one verb per file (verbs.h); this file dispatches.
 *
 *     strata python|sample|run|avail|report|merge|diff [options] ...
 *     strata --help | --version */
#include <stdio.h>
#include <string.h>

#include "verbs.h"

extern char **environ;

static int usage(FILE *out)
{
    fputs("usage: strata <command> [options]\n"
          "\n"
          "commands:\n"
          "  python [options] [--] script.py [args]   profile a Python script\n"
          "  python [options] [--] -m module [args]   profile a Python module\n"
          "  sample [options] [--] program [args]     sample the call stacks of any program\n"
          "  run [options] [--] program [args]        profile a native program (its\n"
          "                                           -finstrument-functions, <strata.h>)\n"
          "  avail [--all] [-c CATEGORY] [--json]     list settings and their values\n"
          "  avail --components                       list the profile components\n"
          "  avail -G FILE [--all]                    write a configuration file\n"
          "  report [--format F] [-o OUT] RESULT      render a result in another format\n"
          "  merge -o OUT RESULT...                   combine runs or MPI ranks\n"
          "  diff A B | diff A... -- B...             compare runs function by function\n"
          "\n"
          "  strata python --help    options of the python command\n"
          "  strata sample --help    options of the sample command\n"
          "  strata run --help       options of the run command\n"
          "  strata --version        print the version\n",
          out);
    return out == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr);
    const char *verb = argv[1];
    if (strcmp(verb, "-h") == 0 || strcmp(verb, "--help") == 0)
        return usage(stdout);
    if (strcmp(verb, "--version") == 0) {
        printf("strata %s\n", STRATA_VERSION);
        return 0;
    }
    if (strcmp(verb, "python") == 0)
        return st_python_main(argc - 2, argv + 2);
    if (strcmp(verb, "sample") == 0)
        return st_sample_main(argc - 2, argv + 2);
    if (strcmp(verb, "run") == 0)
        return st_run_main(argc - 2, argv + 2);
    if (strcmp(verb, "avail") == 0)
        return st_avail_main(argc - 2, argv + 2, environ, stdout);
    if (strcmp(verb, "report") == 0)
        return st_report_main(argc - 2, argv + 2);
    if (strcmp(verb, "merge") == 0)
        return st_merge_main(argc - 2, argv + 2);
    if (strcmp(verb, "diff") == 0)
        return st_diff_main(argc - 2, argv + 2);
    fprintf(stderr, "strata: error: unknown command '%s' (see 'strata --help')\n", verb);
    return 2;
}
