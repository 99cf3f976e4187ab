/* `strata python [options] [--] script.py [args]`.
 *
 * It checks its command line with the same parser the extension uses
 * (so a mistake is reported before any interpreter starts), then replaces itself
 * with the interpreter running strata's runner on the same words, less the
 * interpreter's own options (-u, -O, -X OPT...), which go to the interpreter: what
 * `python -m strata` runs, started with -c rather than -m to spare the import of
 * runpy, a few milliseconds of every run. The interpreter is PYTHON_EXECUTABLE,
 * else the python3 beside this executable (a virtual environment's bin/), else the
 * interpreter strata was built for, else python3 from PATH. */
#include "verbs.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session/args.h"

extern char **environ;

#ifndef STRATA_BUILD_PYTHON
#define STRATA_BUILD_PYTHON ""
#endif

static int die(const char *text)
{
    fprintf(stderr, "strata: error: %s\n", text);
    return 2;
}

/* The interpreter to run, written into buf. */
static const char *find_python(char *buf, size_t size)
{
    const char *env = getenv("PYTHON_EXECUTABLE");
    if (env && *env)
        return env;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        const char *dir = dirname(self);
        const char *names[] = {"python3", "python"};
        for (int i = 0; i < 2; i++) {
            if (snprintf(buf, size, "%s/%s", dir, names[i]) < (int)size &&
                access(buf, X_OK) == 0)
                return buf;
        }
    }
    if (*STRATA_BUILD_PYTHON && access(STRATA_BUILD_PYTHON, X_OK) == 0)
        return STRATA_BUILD_PYTHON;
    return "python3";
}

/* What the interpreter runs (-c): strata's runner, imported with the current
 * directory off the path (`python -c` puts it first, unless -P or PYTHONSAFEPATH,
 * and a strata.py or strata/ there must not stand in for strata); the runner puts
 * the target's own first entry there, as plain python would. An interpreter
 * without strata is a usage error. */
static const char runner_code[] =
    "import sys\n"
    "if not sys.flags.safe_path:\n"
    "    del sys.path[0]\n"
    "try:\n"
    "    from strata._runner import main\n"
    "except ImportError as e:\n"
    "    sys.stderr.write(f'strata: error: the Python interpreter {sys.executable} cannot '\n"
    "                     f'import strata ({e}); set PYTHON_EXECUTABLE to one it is "
    "installed in\\n')\n"
    "    sys.exit(2)\n"
    "sys.exit(main(sys.argv[1:]))\n";

int st_python_main(int argc, char **argv)
{
    st_args_t args;
    st_msg_t msg;
    int rc = st_args_parse_python(&args, argc, argv, environ, ST_ARGS_INTERPRETER, NULL, stdout,
                                  &msg);
    if (rc == ST_EHELP)
        return 0;
    if (rc < 0)
        return die(msg.text);

    char buf[PATH_MAX];
    const char *python = find_python(buf, sizeof buf);
    /* python [interpreter options] -c CODE [the other words] */
    char **cmd = calloc((size_t)argc + 4, sizeof *cmd);
    if (!cmd) {
        st_args_free(&args);
        return die("out of memory");
    }
    int n = 0;
    cmd[n++] = (char *)python;
    for (int i = 0; i < args.ninterp_opts; i++)
        cmd[n++] = args.interp_opts[i];
    cmd[n++] = "-c";
    cmd[n++] = (char *)runner_code;
    for (int i = 0; i < args.nstrata_words; i++)
        cmd[n++] = args.strata_words[i];
    st_args_free(&args);
    execvp(python, cmd);
    fprintf(stderr, "strata: error: cannot run the Python interpreter '%s': %s (set "
                    "PYTHON_EXECUTABLE)\n",
            python, strerror(errno));
    free(cmd);
    return 2;
}
