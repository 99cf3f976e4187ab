/* speedscope's own JSON file format (https://www.speedscope.app/file-format-schema.json):
 * one "evented" profile per thread (per rank and thread for merged MPI ranks), whose
 * open/close events lay each call path out on a time line as long as its time,
 * children one after another in the order they were first called. That is the
 * call tree drawn to scale (speedscope's left-heavy and sandwich views are exact;
 * the time order within a parent is the order of first calls, not of every call).
 * Frames are shared: one per label, with file and line where known. Each profile
 * has one root, a frame naming its thread ("thread 0 (MainThread)", "rank 3 thread
 * 0 (MainThread)"), over everything the thread ran, as cProfile's files have one
 * root. Units are nanoseconds, or "none" (calls) for a profile that only counted
 * calls. The events are written as the walk makes them (a streaming buffer never
 * holds the document). */
#ifndef STRATA_OUTPUT_SPEEDSCOPE_H
#define STRATA_OUTPUT_SPEEDSCOPE_H

#include "model/model.h"
#include "base/strbuf.h"

/* Appends the document to out; `name` titles it. Returns 0 or ST_ENOMEM. */
int st_speedscope_write(st_strbuf_t *out, const st_model_t *m, const char *name);

#endif
