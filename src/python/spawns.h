/* The programs a followed run starts that strata does not follow, named in the
 * tree's record (docs/usage.md "Child processes"), and the exec that ends a run.
 *
 * Design note. A child that runs this installation's Python, with the run's
 * environment, follows itself (strata-children.pth). The others need naming by
 * whoever knows their command line. CPython raises an audit event before it starts
 * a program, but any audit hook makes CPython build the arguments of every event it
 * raises (marshal.loads copies each .pyc it loads): about 1 % of an import-heavy
 * run (docs/performance.md). So strata watches the C library instead: the calls to
 * execv, execve, execvp, execvpe, fexecve, posix_spawn, posix_spawnp and system
 * that the interpreter and the shared objects loaded with it make are redirected
 * to wrappers here by rewriting their offset tables (base/gotpatch.h; the C
 * library, the dynamic linker, the sanitizers' runtimes and strata are left
 * alone). `_posixsubprocess`, which subprocess starts programs with, is loaded
 * first where it is a shared object of its own, so that its calls are redirected
 * too; objects loaded later are not (a C extension that starts programs itself).
 *
 * Each start finds the program as the kernel will (PATH, the current folder), reads
 * its first bytes (a script's `#!` line, through `env`), and judges it: followed
 * when it is a Python interpreter (python, python3, python3.14t, or this process's
 * own executable) and its environment carries strata's variable, else not followed,
 * and why. Where it is told:
 *   - an exec by the watched process itself (os.execv and the like, GIL held):
 *     `started(own pid, argv, why)`, why NULL when the program follows; the run's
 *     Python part ends there either way (the results are written first);
 *   - an exec by a child of it, between fork (or vfork) and exec (subprocess's
 *     children, a fork that execs): the child writes the program's line into
 *     the tree's record itself, `child(pid, parent, argv, why)`, with its own pid;
 *     this must not allocate nor lock (a child of vfork shares the parent's memory),
 *     and nothing here does: the judging uses system calls and buffers on the stack;
 *   - posix_spawn (os.posix_spawn, and subprocess where it can use it):
 *     `started(its pid, ...)` once the program started;
 *   - system (os.system): `started(0, {"/bin/sh", "-c", command}, "not Python")`
 *     before the shell starts; a Python program it runs is followed by itself.
 * A program that cannot be found is not told (the start fails). Calls from threads
 * other than the watched process's Python threads are told all the same, except an
 * exec without the GIL (C code's), which is not told at all: telling it would write
 * the run's results, which needs the interpreter. */
#ifndef STRATA_PYTHON_SPAWNS_H
#define STRATA_PYTHON_SPAWNS_H

#include <stddef.h>

typedef void (*st_pyspawn_fn)(long pid, char *const *argv, size_t argc, const char *why);
typedef void (*st_pyspawn_child_fn)(long pid, long parent, char *const *argv, size_t argc,
                                    const char *why);

/* Loads what starts programs (`_posixsubprocess`) before a session starts, so that
 * its loading is not profiled. GIL held. */
void st_pyspawn_prepare(void);

/* Watches the starts of programs from now on in this process (its pid: the
 * watched one), telling `started` and `child` as above; NULL stops. 0, or -1 when
 * the calls cannot be redirected (the run goes on without). GIL held. */
int st_pyspawn_watch(st_pyspawn_fn started, st_pyspawn_child_fn child);

#endif
