/* The programs a followed run starts that strata does not follow, named in the
 * tree's record (docs/usage.md "Child processes").
 *
 * Design note. A child that runs this installation's Python, with the run's
 * environment, follows itself (strata-children.pth). The others need naming by the
 * process that starts them, which alone knows their command line. CPython raises an
 * audit event before it starts a program: "subprocess.Popen" (executable, args,
 * cwd, env), "os.posix_spawn" (path, argv, env), "os.exec" (path, args, env) and
 * "os.system" (command). A C audit hook (PySys_AddAuditHook: no Python code runs,
 * so nothing of it shows in the profile) looks at those four and lets every other
 * event pass at the cost of one comparison of its name. For each start it finds the
 * program as the kernel will (PATH, the call's cwd), reads its first bytes (a
 * script's `#!` line, through `env`), and when that is not a Python interpreter
 * (python, python3, python3.14t, or this process's own executable), or it is one
 * but gets an environment without strata's variable (`env={...}`), it tells
 * `started(pid, argv, why)`, pid 0 where the start is not done yet (Popen,
 * posix_spawn, system: the pid is not known to the hook). An exec is always told,
 * with the process's own pid, and why NULL when the program is one that follows
 * (the process's Python run ends there either way). A program that cannot be found
 * is not told (the start fails). A hook cannot be taken out: it is added once per
 * process and does nothing while no callback is set. The GIL is held. */
#ifndef STRATA_PYTHON_SPAWNS_H
#define STRATA_PYTHON_SPAWNS_H

#include <stddef.h>

typedef void (*st_pyspawn_fn)(long pid, char *const *argv, size_t argc, const char *why);

/* Watches the starts of programs from now on, telling `started` of the ones not
 * followed and of every exec; NULL stops. 0, or -1 when the hook cannot be added
 * (the run goes on without). */
int st_pyspawn_watch(st_pyspawn_fn started);

#endif
