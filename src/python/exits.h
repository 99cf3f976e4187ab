/* How a profiled run ends, whatever ends it: strata's own terminal, SIGTERM and
 * os._exit.
 *
 * Design note. The results are written at the end of the run, by the runner's
 * atexit handler in the common case. Three endings would otherwise lose them or put
 * them in the wrong place:
 *
 *   Terminal. A program may close its standard error and open a file that gets fd 2;
 *     strata's tables must not land in that file. At the start strata duplicates
 *     fd 2 (close-on-exec, above the low numbers) and remembers which file it is;
 *     at the end it writes there if that is still the same file, else to fd 2 if
 *     that still is, else nowhere. (The copy keeps the file open: a reader of a pipe
 *     that was the program's stderr sees its end when the process ends, not when
 *     the program closes fd 2.)
 *   SIGTERM (Slurm's time limit, mpirun's cleanup). Where the program leaves SIGTERM
 *     at its default action, strata catches it: the handler only posts a semaphore
 *     (async-signal-safe); a watcher thread, which blocks every signal, takes the
 *     GIL, writes what was recorded, puts SIGTERM back to its default action and
 *     raises it, so the process still dies by SIGTERM (status -15 / 143). Between
 *     the signal and the GIL handover the program runs on briefly (about one switch
 *     interval, 5 ms, while it runs Python code). If the GIL does not come within
 *     10 s (a program stuck in C code that holds it), a watchdog ends the process
 *     by SIGTERM without writing. The program's standard streams are not flushed,
 *     as without strata. A program that sets its own SIGTERM handler (signal.signal) replaces
 *     strata's and keeps its own behaviour. In a forked child the handler acts as
 *     the default action does. The watcher steps aside while the program forks, so
 *     that CPython 3.12+ does not warn about a multi-threaded fork that the program
 *     alone would not make; on 3.13+, where CPython counts the threads after the
 *     after-fork hooks, a program with no other thread gets it back at the main
 *     thread's next bytecode (a SIGTERM in between waits for it).
 *   os._exit skips atexit. While the program runs, os._exit is a wrapper of the
 *     same name and arguments that writes the results (without flushing the
 *     program's streams, as os._exit does not) and then calls the real one; a
 *     forked child's os._exit writes nothing. The original is put back once the
 *     results are written.
 *
 * What cannot be caught (SIGKILL, a crash, a fatal signal other than SIGTERM, the C
 * _exit called by native code) leaves the results folder with only its
 * incomplete.txt note (session.h), which says so.
 *
 * Everything here is called with the GIL held, except the signal handler and the
 * watcher thread's wait. */
#ifndef STRATA_PYTHON_EXITS_H
#define STRATA_PYTHON_EXITS_H

#include <stdio.h>

/* Duplicates fd 2 as strata's terminal. Call when the session begins. */
void st_pyexit_keep_terminal(void);

/* Where the tables and notes go at the end: the terminal kept at the start while it
 * is still the same file, else stderr while fd 2 is still that file, else NULL. */
FILE *st_pyexit_terminal(void);

/* Catches SIGTERM (when at its default action) and wraps os._exit. Call when
 * profiling starts. Returns the number of threads it started (the watcher: 0 or 1),
 * which the process sampler leaves out of the program's; a failure leaves the run
 * as it would be without. */
int st_pyexit_install(void);

/* The results are about to be written (with the GIL held): the SIGTERM watchdog
 * then waits for them rather than ending the process. */
void st_pyexit_writing(void);

/* After the results are written: the os._exit wrapper and the SIGTERM handler go,
 * and a SIGTERM that came while they were being written now ends the process. */
void st_pyexit_finished(void);

/* A new session begins after one that finished: the last one's watcher ends, so
 * that st_pyexit_install catches SIGTERM anew. */
void st_pyexit_new_session(void);

/* In a forked child: SIGTERM back to its default action (the child writes
 * nothing). */
void st_pyexit_after_fork_child(void);

/* Defined in _strata.c: stops profiling and writes the results; flush_streams says
 * whether the program's sys.stdout and sys.stderr are flushed first (not on
 * SIGTERM or os._exit). */
void st_py_finalize(int flush_streams);

#endif
