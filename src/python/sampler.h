/* The Python stack sampler: `strata python --sample` (issue 11).
 *
 * Design note. Every Python thread gets a timer (sampling/timers.h) that
 * interrupts it every 1/freq seconds of its CPU time (or of wall time with
 * `--sample-clock wall`). The handler, on the interrupted thread, walks its Python
 * frames (frames.h), turns each code object pointer into a small id through a
 * fixed lock-free table (open addressing, a compare-and-swap to claim a free
 * entry; the id is the entry's index), and records the ids as one sample in the
 * thread's signal lane (st_rec_sample), weighted by the periods it stands for
 * (1 + the timer's overruns). No lock, no allocation, no Python API. Labels are
 * made after the run.
 *
 * The maintenance thread (strata's own, a C thread) wakes every 20 ms while things
 * change (and on 3.11 while sampled code objects wait to be held), every 100 ms
 * otherwise (sampling/stacks.h): it refills the recorder's signal chunks (st_rec_maintain); when the code
 * table has new entries, or the process has threads it has not seen
 * (/proc/self/task), it takes the GIL, holds a reference to each new code object
 * (so that its address cannot be reused by another code object before the run
 * ends and names it), and arms the timers of new Python threads from the
 * interpreter's thread list (their kernel ids). Threads started later are found
 * within about 20 ms, and a thread that starts and ends faster than that is not
 * sampled: the interpreter's pthread_create (redirected, base/gotpatch.h) hurries
 * the ticks (an audit hook would hear 3.12+'s thread states made, at the price of
 * every event's arguments built: spawns.h). On 3.12+ a code watcher names
 * an entry's code when the code object is destroyed before it was held (the window
 * between a sample and the next maintenance); on 3.11 that window is open, and
 * such a frame may be named by whatever code object later reuses the address, or
 * "<unknown>". An entry is held only where its address holds a whole code object
 * (st_pyframes_is_whole_code: its header and the objects it refers to), never
 * memory that now holds something else.
 *
 * After the run (stop, GIL held): timers deleted, the handlers drained, every held
 * code object named with the deterministic profile's rules (labels.h: the same
 * label, so the two profiles' trees share their nodes), left-out code (filters,
 * strata's own) mapped to nothing (its callees hang from its caller), and the
 * samples folded into the threads' path tables (st_rec_fold_samples). Frames of the
 * runner below the script are not on the chain (run_main hides them). */
#ifndef STRATA_PYTHON_SAMPLER_H
#define STRATA_PYTHON_SAMPLER_H

#include "session/collector.h"

/* The sampler as a collector (session/collector.h). With the GIL held. Its start
 * fails (the run does not happen) only on a user error (a bad signal); a frame
 * layout it cannot read turns sampling off with one line on stderr. */
extern const st_collector_t st_pysampler_collector;

/* os.fork (exits.c's hooks, GIL held): the sampler's thread ends before, so that the
 * parent forks with the program's threads only (CPython 3.12+ warns about forking
 * a process with several), and starts again after, in the parent. The timers go on
 * meanwhile; the child is not sampled (a fork keeps no timer). */
void st_pysampler_before_fork(void);
void st_pysampler_after_fork_parent(void);
/* In a forked child that gets a session of its own: the parent's sampling state
 * (its threads, the code objects it held) is dropped, without its results, so that
 * the child's session samples anew. GIL held. */
void st_pysampler_after_fork_child(void);

#endif
