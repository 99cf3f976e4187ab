/* The GPU collector: CUPTI's kernels, copies and sets (gpu/cupti.h), tied to the
 * code that launched them.
 *
 * Design note. At each launch (the enter of cudaLaunchKernel, cudaMemcpyAsync,
 * cuLaunchKernel ...), in the launching thread, the collector notes under the
 * call's correlation id which call-tree node of that thread is open (the Python
 * function, the C region or function), in a ring of ST_GPU_RING slots: a store,
 * no lock, no allocation; with a timeline, a flow starts there too. A runtime
 * launch makes driver calls with ids of their own (the record may carry either):
 * those made inside it are noted with the runtime call's flow, and start none. When CUPTI
 * hands over the activity records (its own thread, or the end's flush), each one
 * is added up under the collector's lock: per kernel name (count, total, min, max,
 * Welford's mean and variance), per copy direction (count, bytes, time), and its
 * GPU time per (thread, node) that launched it; with a timeline, the slice is kept
 * (ST_GPU_MAX_SLICES at most, then counted). A record whose launch left the ring
 * (more than ST_GPU_RING launches pending) or was never seen is not attributed.
 *
 * At the end (stop), after CUPTI's last flush: each slice goes on the timeline as a
 * complete event on its device's and stream's track, in CUPTI's clock, converted by
 * the track's clock domain; the conversion is the line through two readings of both
 * clocks, one at the start and one at the end (st_cupti_timestamp between two reads
 * of strata's clock: the error is half the span of those reads plus the drift from
 * a line between them). In flush (recording has stopped), the GPU times go into the
 * gpu_time metric of the launching nodes. contribute gives the model its kernel and
 * copy tables.
 *
 * When CUPTI cannot start (no libcupti, no driver, another subscriber such as
 * Nsight), one `strata: warning:` line says why and the run goes on without GPU
 * data. */
#ifndef STRATA_SESSION_GPU_H
#define STRATA_SESSION_GPU_H

#define ST_GPU_RING (1u << 16)
#define ST_GPU_MAX_SLICES (1u << 20)
#define ST_GPU_MAX_KERNELS 4096   /* kernel names kept; more go to "<other kernels>" */

/* st_gpu_add and st_gpu_free, which the session calls, are declared in
 * session/session.h (this file's code includes the session's header, not the
 * other way round). */

#endif
