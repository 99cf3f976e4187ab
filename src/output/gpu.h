/* The GPU tables (CUPTI's activities, model.h's st_model_gpu_t): kernels by name
 * and copies by direction, as text. Read the model only. */
#ifndef STRATA_OUTPUT_GPU_H
#define STRATA_OUTPUT_GPU_H

#include "base/strbuf.h"
#include "model/model.h"

/* gpu_kernels.txt: a row per kernel name, most total time first: count, total (ms),
 * mean, min, max and standard deviation (us). Nothing when m->gpu is NULL. */
void st_gpu_kernels_write(st_strbuf_t *out, const st_model_t *m);

/* gpu_memcpy.txt: a row per copy direction (and sets): count, bytes (MiB), time (ms)
 * and bandwidth (GB/s, bytes over the copies' own time). Nothing when m->gpu is NULL. */
void st_gpu_copies_write(st_strbuf_t *out, const st_model_t *m);

/* profile.json's "gpu" member (a line of its own, ending with ",\n"); nothing when
 * m->gpu is NULL. */
void st_gpu_json_write(st_strbuf_t *out, const st_model_t *m);

#endif
