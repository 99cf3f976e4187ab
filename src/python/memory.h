/* Memory for line profiles (--memory): what a line's "Mem usage" reads.
 *
 * Design note. Two measures, read once per line event of a chosen function:
 *
 *   heap  the bytes Python holds from the system allocator, counted by strata's
 *         allocator hooks: PYMEM_DOMAIN_RAW (every malloc Python makes, the large
 *         objects pymalloc passes on included) by malloc_usable_size, and pymalloc's
 *         arenas (PyObject_SetArenaAllocator) by their size, added to what malloc
 *         held when the hooks went in (mallinfo2). An atomic counter: the raw
 *         domain is called without the GIL too. A read is one load.
 *   rss   the process's resident memory, memory_profiler's meaning: /proc/self/statm
 *         read through a file descriptor opened at the start (one pread a line).
 *
 * Where the raw domain is not malloc (PYTHONMALLOC=debug, -X dev: debug hooks put
 * headers around blocks) malloc_usable_size would misread its blocks: heap falls
 * back to rss, and strata says so. C libraries' mallocs (numpy's array data among
 * them) are counted through their global offset tables (memnative.c); each block
 * once (memhooks.h).
 *
 * The hooks are the program's allocator's from the start to the end of profiling; a
 * program that puts its own above them (tracemalloc) keeps them at the end. */
#ifndef STRATA_PYTHON_MEMORY_H
#define STRATA_PYTHON_MEMORY_H

#include <stdint.h>
#include <stdio.h>

enum { ST_PYMEM_OFF, ST_PYMEM_HEAP, ST_PYMEM_RSS, ST_PYMEM_SAMPLE };

/* 1 for the modes whose allocator hooks count the heap (heap, sample). */
static inline int st_pymem_counts_heap(int mode)
{
    return mode == ST_PYMEM_HEAP || mode == ST_PYMEM_SAMPLE;
}

struct st_recorder;
/* Allocation sites (heap mode): before st_pymem_start, the recorder and the two
 * metrics (bytes, allocations) to which each allocation a recorded thread makes is
 * added, on its innermost recorded call: pymalloc's domains (object and mem) by the
 * size asked for, the raw domain's own callers too (not pymalloc passing large
 * objects on: counted once). Frees are not attributed. */
void st_pymem_sites(struct st_recorder *rec, uint32_t bytes, uint32_t count);

/* What the memory held at its peak and at the end, from sampled allocations: one
 * allocation in 512 KiB on average (each byte with the same chance), each standing
 * for its bytes over that chance, kept while it lives. st_pymem_sample switches it on
 * (before st_pymem_start; estimate_sites: the sites' bytes and counts come from the
 * samples too, the cheap mode, in which small objects are seen as pymalloc's arenas;
 * walk_stacks: no call-tree profile runs, and each
 * sample keeps its Python stack, a call path of its thread after the run: stack
 * mode); st_pymem_holdings, when profiling stops, adds the live
 * samples' bytes at the peak and at the end to each call path's `peak` and `at_exit`
 * metric cells and says what they add up to. */
typedef struct {
    uint64_t peak_bytes, exit_bytes, samples, lost;
} st_pymem_holdings_t;
void st_pymem_sample(int estimate_sites, int walk_stacks);
void st_pymem_holdings(uint32_t peak, uint32_t at_exit, st_pymem_holdings_t *out);

/* The lines (the innermost Python frame of each sample: read at the sample without
 * the API, when the thread holds the GIL) holding the samples at the peak and at the
 * end, summed, the most at the peak first, at most 1,000; made once, with the GIL
 * held, after st_pymem_holdings. */
struct st_model_memline;
size_t st_pymem_lines(struct st_model_memline **out);

/* Starts measuring (mode: ST_PYMEM_HEAP or ST_PYMEM_RSS; with the GIL held).
 * Returns the mode in force (heap may become rss), or ST_PYMEM_OFF when nothing can
 * be measured (no /proc). */
int st_pymem_start(int mode);
/* Takes the hooks off where they are on top (blocks keep their allocator: the hooks
 * add no header). */
void st_pymem_stop(void);
/* Bytes now, in the mode started. */
int64_t st_pymem_now(void);
/* "heap" or "rss" (the mode in force), or NULL. */
const char *st_pymem_name(void);
/* Says on err why heap became rss, if it did. */
void st_pymem_report(FILE *err);

/* The resident size now (bytes; 0 without /proc), whatever the mode. */
int64_t st_pymem_rss(void);
/* The monotonic clock (ns) the samples are timed with. */
uint64_t st_pymem_clock_ns(void);

/* Memory over time: a thread of strata's (all signals blocked) reads the resident
 * size, and the heap in heap mode, every interval (ns), from st_pymem_start's
 * start; at most ST_PYMEM_SERIES_MAX samples are kept (beyond, every other one goes
 * and the interval doubles). series_stop takes a last sample and joins it. 0, or -1
 * when the thread cannot start (then there is no series). */
#define ST_PYMEM_SERIES_MAX 100000
int st_pymem_series_start(uint64_t interval_ns);
void st_pymem_series_stop(void);
/* The samples: times (ns, st_pymem_clock_ns) and values (heap NULL in rss mode);
 * returns how many, with the interval at the end. */
size_t st_pymem_series(const uint64_t **t, const int64_t **rss, const int64_t **heap,
                       uint64_t *interval_ns);
/* The monotonic and real-time clocks (ns) when the series began, which place its
 * times (and the calls') on the run's clock. */
void st_pymem_series_base(uint64_t *mono0, uint64_t *real0);

#endif
