/* Display forms of labels: which name each kind of output shows for a call-tree
 * node's label.
 *
 * Design note. A label is a text and the function it names (core/intern.h,
 * core/loctab.h). Two functions may share a text (two modules' `work()`); they are
 * two labels and two nodes all the same. Each writer picks a display form here,
 * so that no writer builds names of its own:
 *   st_name_text:   the text alone (the text tables, the timeline): short, as the
 *                   seed's tables show it, not always unique;
 *   st_name_unique: the text, followed by " [file:line]" (a C function: " [name]")
 *                   when another label shares the text, so that formats that key
 *                   frames by name (folded, speedscope, HTML, the timeline's
 *                   Perfetto and Chrome slices) keep functions apart.
 * Function-level names (pstats, callgrind, dot) are in output/fgraph.h. */
#ifndef STRATA_MODEL_NAMES_H
#define STRATA_MODEL_NAMES_H

#include <stdint.h>

#include "model/model.h"
#include "base/strbuf.h"

/* The label's text; owned by the model. */
static inline const char *st_name_text(const st_model_t *m, uint32_t label)
{
    return st_intern_str(m->labels, label);
}

/* Appends the label's unique name to out (see above). */
void st_name_unique(const st_model_t *m, uint32_t label, st_strbuf_t *out);

/* The same from the tables themselves (for writers that have no model: the
 * timeline); locs may be NULL. */
void st_name_unique_in(const st_intern_t *labels, const st_loctab_t *locs, uint32_t label,
                       st_strbuf_t *out);

#endif
