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

#include <dlfcn.h>
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

const char *st_cli_find_python(char *buf, size_t size)
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

/* Appends `lib` to LD_PRELOAD (unless it is there already). 0, or -1 when out of
 * memory. */
static int append_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    if (old && strstr(old, lib))
        return 0;
    size_t n = (old ? strlen(old) : 0) + strlen(lib) + 2;
    char *v = malloc(n);
    if (!v)
        return -1;
    snprintf(v, n, "%s%s%s", old && *old ? old : "", old && *old ? " " : "", lib);
    int rc = setenv("LD_PRELOAD", v, 1);
    free(v);
    return rc;
}

/* Appends libunwind to LD_PRELOAD when it is installed (and not there yet).
 * 0, or -1 when out of memory. */
static int preload_libunwind(void)
{
    void *h = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
    if (!h)
        return 0; /* not installed: the extension walks by frame pointers, and says so */
    dlclose(h);
    return append_preload("libunwind.so.8");
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

    /* --native: libunwind comes with the interpreter, so that its thread-local
     * data is in every thread's static TLS and every Python thread can be walked
     * by it (sampling/unwind.h) */
    const st_settings_t *set = &args.settings;
    if (st_settings_bool(set, ST_S_USE_SAMPLING) && st_settings_bool(set, ST_S_SAMPLING_NATIVE) &&
        strcmp(st_settings_str(set, ST_S_SAMPLING_UNWIND), "fp") != 0 && preload_libunwind() < 0) {
        st_args_free(&args);
        return die("out of memory");
    }
    /* under an MPI launcher: the MPI wrappers, so that mpi4py's calls are nodes under
     * the Python functions that make them (native/mpi.h) */
    char mpilib[PATH_MAX];
    if (st_cli_mpi_wrappers(NULL, mpilib, sizeof mpilib) && append_preload(mpilib) < 0) {
        st_args_free(&args);
        return die("out of memory");
    }
    char buf[PATH_MAX];
    const char *python = st_cli_find_python(buf, sizeof buf);
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
    /* a strata python run by a followed child is a run of its own (strata._child) */
    unsetenv("_STRATA_CHILD_OF");
    execvp(python, cmd);
    fprintf(stderr, "strata: error: cannot run the Python interpreter '%s': %s (set "
                    "PYTHON_EXECUTABLE)\n",
            python, strerror(errno));
    free(cmd);
    return 2;
}
