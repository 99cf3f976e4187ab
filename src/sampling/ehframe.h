/* The bounds of a loaded function, from its object's unwind tables
 * (.eh_frame_hdr's binary search table and the FDE it points at), which stripped
 * objects keep: the whole function, also where no symbol names it.
 *
 * What it is for: a compiler may split a function (GCC's hot/cold partitioning, or
 * a clone made by link-time optimisation), and then the symbol's size covers only
 * the part it names. CPython 3.14 as Debian builds it is such a case: the exported
 * _PyEval_EvalFrameDefault is a 1.2 KB entry that jumps into the 84 KB eval loop,
 * an unnamed part with an FDE of its own. Not for signal handlers (it walks the
 * loader's list). */
#ifndef STRATA_SAMPLING_EHFRAME_H
#define STRATA_SAMPLING_EHFRAME_H

#include <stddef.h>
#include <stdint.h>

#include "sampling/modules.h"

/* The function (FDE) whose code holds addr, as [lo, hi). 0, or -1 when no loaded
 * object's table has it (or its encoding is one this reader does not know). */
int st_ehframe_function(uintptr_t addr, st_range_t *out);

/* The parts of the function that starts at fn and is size bytes long which lie
 * elsewhere: the functions (FDEs) that its own code jumps into twice or more
 * (x86-64 `jmp`/`jcc` with a 32-bit displacement). A part is entered from many
 * branches; a tail call to another function is mostly one jump, and the code is
 * scanned as bytes, not decoded: a displacement read out of another instruction
 * lands anywhere, rarely twice in one function. At most cap ranges into out;
 * returns how many (0 on other architectures). */
int st_ehframe_parts(uintptr_t fn, size_t size, st_range_t *out, int cap);

#endif
