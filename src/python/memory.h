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
 * back to rss, and strata says so. C libraries that call malloc themselves (numpy's
 * array data) are not in heap: rss sees them. */
#ifndef STRATA_PYTHON_MEMORY_H
#define STRATA_PYTHON_MEMORY_H

#include <stdint.h>
#include <stdio.h>

enum { ST_PYMEM_OFF, ST_PYMEM_HEAP, ST_PYMEM_RSS };

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

#endif
