/* What memory.c's counting offers strata's other allocator hooks (memnative.c: C
 * libraries' mallocs; memseries.c), so that every byte is counted once.
 *
 * A hook that passes a call to an allocator which may come back through another of
 * strata's hooks raises st_pymem_nested around it: those inner calls are then passed
 * down uncounted. */
#ifndef STRATA_PYTHON_MEMHOOKS_H
#define STRATA_PYTHON_MEMHOOKS_H

#include <stddef.h>
#include <stdint.h>

extern __thread int st_pymem_nested __attribute__((tls_model("initial-exec")));

/* p of n bytes was allocated by the calling thread: attributed to its call path and
 * offered to the allocation sampler. Any thread; no lock unless sampled. */
void st_pymem_alloc_seen(void *p, size_t n);
/* p is being freed (the sampler forgets it). Any thread. */
void st_pymem_free_seen(void *p);
/* The heap counter moves by n bytes. Any thread; one atomic add. */
void st_pymem_heap_add(int64_t n);

/* 1 while Python's allocator hooks are strata's (st_pymem_start to st_pymem_stop). */
int st_pymem_hooked(void);
/* The heap counter now (heap and sample modes); any thread, one load. */
int64_t st_pymem_heap(void);
/* The mode st_pymem_start settled on: ST_PYMEM_OFF when nothing can be measured
 * (no /proc/self/statm). */
int st_pymem_mode(void);
/* In a forked child: the series thread is gone (memseries.c). */
void st_pymem_series_after_fork(void);

/* C libraries' mallocs (memnative.c): counted from st_pymem_native_start (with the
 * GIL) to st_pymem_native_stop; st_pymem_native_poll redirects the objects loaded
 * since the last look (any thread); in a forked child, st_pymem_native_after_fork
 * stops the counting (the wrappers pass calls down). */
void st_pymem_native_start(void);
void st_pymem_native_stop(void);
void st_pymem_native_poll(void);
void st_pymem_native_after_fork(void);

#endif
