/* Memory over time (--memory): mprof's .dat file and a plot like `mprof plot`.
 *
 * mprofile.dat is what `mprof run` writes and `mprof plot` reads (memory_profiler's
 * mprof.read_mprofile_file): a CMDLINE line, a MEM line per sample (resident MiB,
 * seconds since the epoch) and a FUNC line per call of a chosen function (its name,
 * memory and time at its start and end, its nesting level among chosen calls).
 * memplot.svg draws the same: resident memory (and strata's heap, when it was
 * measured) against time since the start, each chosen call a band under the curve's
 * axis labelled with its function, as mprof plot brackets them. Both stream: time and
 * memory linear in the samples and calls. */
#ifndef STRATA_OUTPUT_MEMTIME_H
#define STRATA_OUTPUT_MEMTIME_H

#include "base/strbuf.h"
#include "model/model.h"

/* Appends m's memory over time as mprof's .dat (nothing when m has none). */
void st_mprof_write(st_strbuf_t *out, const st_model_t *m);

/* Appends the plot (an SVG document; one saying there is nothing to plot when m has
 * no memory over time); `title` names the result (NULL: "memory"). */
void st_memplot_write(st_strbuf_t *out, const st_model_t *m, const char *title);

#endif
