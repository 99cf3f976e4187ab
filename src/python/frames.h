/* The Python frames of the calling thread, walked from a signal handler (issue 11).
 *
 * Design note. A sampler's handler interrupts a thread anywhere, the interpreter
 * included, so it may not take the GIL, call the Python API, lock or allocate. It
 * reads the interpreter's frame chain itself: tstate -> innermost
 * _PyInterpreterFrame (3.11/3.12: tstate->cframe->current_frame; 3.13+:
 * tstate->current_frame), then `previous` towards the caller, copying each frame's
 * code object and instruction index (code units from the start of the code's
 * bytecode; -1 for a 3.11/3.12 frame just pushed) into a fixed array. Shim frames
 * (3.12/3.13: owner FRAME_OWNED_BY_CSTACK, the entry of each C -> Python call) are
 * skipped. See /work/notes/frames.md (issue 11's research) for the layouts.
 *
 * The layouts are not guessed. This file knows the layout of each minor version it
 * is compiled for (the extension is built per minor version); st_pyframes_check,
 * run once with the GIL held before any walk, checks it against the running
 * interpreter:
 *   - the minor version, and at least 3.11.1 (gh-99729: before it a cleared frame
 *     could stay linked);
 *   - process_vm_readv on the process itself works (a seccomp filter may deny it);
 *   - 3.13+: the interpreter's own _Py_DebugOffsets (first member of _PyRuntime:
 *     cookie "xdebugpy", version, free-threaded flag, and every offset walked);
 *   - every version: a probe. A Python chain probe_a -> probe_b -> C function (a
 *     C -> Python -> C re-entry, so shim frames are on the chain) walks the thread
 *     with the same walker and compares it with the public API (PyEval_GetFrame,
 *     PyFrame_GetBack, PyFrame_GetCode, PyFrame_GetLasti): the same code objects
 *     and instruction indexes, frame for frame.
 * A version with no layout here (3.16+, free-threaded builds), or any mismatch,
 * leaves the walker off, with one line saying why; sampling is then off, never run
 * on a guess.
 *
 * Reads. On 3.11/3.12 a thread entering the eval loop publishes tstate->cframe
 * before it sets cframe->current_frame, so for a few instructions the innermost
 * frame pointer is stale stack contents (frames.md section 6), and no version
 * fences its frame stores. So the walker never dereferences a frame or code
 * pointer directly: every read of a frame's fields and of a code object's header
 * is one process_vm_readv of the process itself, which fails with EFAULT instead
 * of faulting on unmapped memory, and every value read is validated (alignment,
 * owner in range, the code's type is PyCode_Type, the instruction inside its
 * bytecode, a hop limit). A chain that fails a check gives no sample rather than a
 * wrong one. (Two system calls a frame; a cheaper range check against the thread's
 * data-stack chunks is a later step.)
 *
 * Lifetime of what is copied: the code pointers are borrowed. They are valid when
 * copied (a live frame holds a strong reference to its code); the sampler must
 * make them safe to resolve later (see the sampler's note). */
#ifndef STRATA_PYTHON_FRAMES_H
#define STRATA_PYTHON_FRAMES_H

#include <stdint.h>

/* One Python frame: its code object (borrowed, a PyCodeObject *) and the index in
 * code units of the instruction it runs (PyFrame_GetLasti / 2; -1 before its
 * first). */
typedef struct {
    const void *code;
    int32_t idx;
} st_pyframe_t;

/* Checks the running interpreter's frame layout (above) and switches the walker on
 * if it matches. Returns 0, or ST_EINVAL with *why set to a static sentence saying
 * what did not match. Once per process: later calls give the first verdict. GIL
 * held; not signal-safe. */
int st_pyframes_check(const char **why);

/* Walks the Python frames of the thread whose PyThreadState is `tstate` (the
 * calling thread's: the walk races with nothing but that thread's own frame
 * pushes, which it interrupts), innermost first, into out[0..cap). Returns the
 * number of frames copied (cap when deeper frames were cut), or a negative
 * ST_EINVAL when the walker is off or the chain failed a check (nothing to use).
 * Async-signal-safe: no lock, no allocation, no Python API; errno is kept. */
int st_pyframes_walk(const void *tstate, st_pyframe_t *out, int cap);

/* The same, with a cache of code objects known to be alive: known(code, ctx)
 * returns the code's size in code units (Py_SIZE) when the caller holds it, else 0;
 * the walker then trusts it instead of reading the code object's header (one system
 * call a frame saved). Must be async-signal-safe. */
typedef intptr_t (*st_pyframes_known_fn)(const void *code, void *ctx);
int st_pyframes_walk_known(const void *tstate, st_pyframe_t *out, int cap,
                           st_pyframes_known_fn known, void *ctx);

/* 1 when `p` points at a live code object as far as its header tells: readable,
 * of type PyCode_Type, with a reference count from 1 to 2^32 (a freed object's is
 * 0, or the allocator's free-list link, a heap address). A checked read, never a
 * fault; the memory of a dead code object reused by another code object passes.
 * Signal-safe. */
int st_pyframes_is_code(const void *p);

/* The same, and its object fields (constants, names, file, tables) are live objects
 * of their types: memory that once held a code object and now holds something else,
 * the header's count overwritten with a small number but its type left as it was,
 * fails (the header alone would pass it, and a reference taken to it would write
 * into the program's data). What passes is a code object, or the intact remains of
 * one whose first word was overwritten and whose fields' objects all still live as
 * the same types. Two system calls. Signal-safe. */
int st_pyframes_is_whole_code(const void *p);

/* The last frame of the chain that starts at `frame` (a thread's own, GIL held):
 * on 3.15 the thread state's sentinel base frame. NULL for NULL, or where strata
 * knows no layout. */
struct _PyInterpreterFrame *st_pyframes_bottom(struct _PyInterpreterFrame *frame);

#endif
