/*
 * asmain.h: run_main(code, globals) for the floors' runners (bench/runners/_as_main.py):
 * runs a script's code as `python script.py` runs it, with its frames where they lie
 * under plain python.
 *
 * The interpreter keeps the frames of running calls in a chain of 16 KiB chunks per
 * thread.  A runner's own frames below the script's move every frame of the script
 * by a few hundred bytes, and where a program's calls go up and down across the end
 * of a chunk the interpreter maps and unmaps a chunk each time (the bench's pytest
 * suite crossed it 140 times a run more than under plain python).  That is the
 * runner's doing, not the floor's, and strata's runner does not pay it (run_main in
 * src/python/_strata.c): here the thread starts an empty chain for the script, as a
 * new thread does, and the runner's chain is put back after it.  The interpreter
 * never frees a chain's first chunk; run_main does, with the arena allocator the
 * interpreter took it from.
 */
#ifndef BENCH_FLOOR_ASMAIN_H
#define BENCH_FLOOR_ASMAIN_H

static PyObject *
floor_run_main(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *code, *globals;
    if (!PyArg_ParseTuple(args, "O!O!", &PyCode_Type, &code, &PyDict_Type, &globals))
        return NULL;
    PyThreadState *t = PyThreadState_Get();
    _PyStackChunk *chunk = t->datastack_chunk;
    PyObject **top = t->datastack_top, **limit = t->datastack_limit;
    t->datastack_chunk = NULL;
    t->datastack_top = NULL;
    t->datastack_limit = NULL;
    PyObject *r = PyEval_EvalCode(code, globals, globals);
    PyObjectArenaAllocator arena;
    PyObject_GetArenaAllocator(&arena);
    for (_PyStackChunk *c = t->datastack_chunk, *prev; c; c = prev) {
        prev = c->previous;
        arena.free(arena.ctx, c, c->size);
    }
    t->datastack_chunk = chunk;
    t->datastack_top = top;
    t->datastack_limit = limit;
    return r;
}

#define FLOOR_RUN_MAIN_DEF                                                               \
    {"run_main", floor_run_main, METH_VARARGS,                                           \
     "run_main(code, globals): run a script's code, its frames where plain python puts them."}

#endif
