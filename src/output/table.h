/* Text tables in timemory's style (the seed's trip_count tables, byte for byte):
 * one table per component (and per count, bytes or samples metric), every thread's
 * call tree in depth-first order, labels prefixed with the thread number (|0>>>)
 * and indented with |_ under their parent.
 * Column widths follow timemory: at least 8, wide enough for the header and every
 * value; headers are centred as timemory centres them.
 *
 * Indentation stops growing at ST_TABLE_MAX_INDENT levels (the DEPTH column still
 * says how deep a row is): every row is padded to the widest label, so a recursion
 * 10,000 deep would otherwise make each table hundreds of megabytes. In a table of
 * more than ST_TABLE_BIG_ROWS rows it stops at ST_TABLE_BIG_INDENT levels: there one
 * deep path would otherwise pad thousands of short rows. Rows stop at
 * depth ST_TABLE_MAX_DEPTH: what a node that deep calls is folded into one row
 * below it, `... N calls in M deeper nodes (folded)`, with the calls (COUNT, and SUM
 * in trip_count) and the time (SUM) of everything under the node, so a table has at
 * most one row per node and few rows for a deep recursion, however deep. A label
 * longer than ST_TABLE_MAX_LABEL bytes once escaped is cut there (at a character's
 * start) and ends with "...": every row is padded to the widest, so one long label
 * would otherwise widen every row.
 *
 * Written as a stream (the grid's two passes: widths first, then each row as it is
 * made): a table of any size costs one row of memory, not the table's text. */

#define ST_TABLE_MAX_INDENT 100
#define ST_TABLE_BIG_ROWS 1000
#define ST_TABLE_BIG_INDENT 16
#define ST_TABLE_MAX_DEPTH 256
#define ST_TABLE_MAX_LABEL 256
#ifndef STRATA_OUTPUT_TABLE_H
#define STRATA_OUTPUT_TABLE_H

#include "core/components.h"
#include "model/model.h"
#include "base/strbuf.h"

/* Appends the table of component c to out, ending with a newline. Times are in
 * seconds with `precision` decimals. */
void st_table_write(st_strbuf_t *out, const st_model_t *m, st_component_t c, int precision);

/* Appends the table of a count, bytes or samples metric of m's registry, laid out
 * as the others: LABEL, COUNT (calls), DEPTH, METRIC, UNITS, then the node's own
 * value (SELF), with everything under it (TOTAL) and SELF as a percentage of TOTAL;
 * the title is the metric's description in capitals. Returns 0, ST_ENOMEM, or
 * ST_EINVAL (no such metric, or another kind). */
int st_table_write_metric(st_strbuf_t *out, const st_model_t *m, uint32_t metric);

#endif
