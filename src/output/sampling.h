/* process_sampling.txt: the process sampler's metrics summarised (minimum, mean,
 * maximum), in the same table style as the profile's. */
#ifndef STRATA_OUTPUT_SAMPLING_H
#define STRATA_OUTPUT_SAMPLING_H

#include "model/model.h"
#include "base/strbuf.h"

/* Appends the table of m's sampled metrics to out. */
void st_sampling_table_write(st_strbuf_t *out, const st_model_t *m);

#endif
