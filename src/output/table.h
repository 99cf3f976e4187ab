/* Text tables in timemory's style (the seed's trip_count tables, byte for byte):
 * one table per component, every thread's call tree in depth-first order, labels
 * prefixed with the thread number (|0>>>) and indented with |_ under their parent.
 * Column widths follow timemory: at least 8, wide enough for the header and every
 * value; headers are centred as timemory centres them.
 *
 * Indentation stops growing at ST_TABLE_MAX_INDENT levels (the DEPTH column still
 * says how deep a row is): every row is padded to the widest label, so a recursion
 * 10,000 deep would otherwise make each table hundreds of megabytes. */

#define ST_TABLE_MAX_INDENT 100
#ifndef STRATA_OUTPUT_TABLE_H
#define STRATA_OUTPUT_TABLE_H

#include "core/components.h"
#include "model/model.h"
#include "base/strbuf.h"

/* Appends the table of component c to out, ending with a newline. Times are in
 * seconds with `precision` decimals. */
void st_table_write(st_strbuf_t *out, const st_model_t *m, st_component_t c, int precision);

#endif
