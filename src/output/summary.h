/* What the terminal gets when the tables are too long for it: the functions with the
 * most own time, as a short table, and where the full tables are.
 *
 * The tables go to the terminal whole while they are small (the seed's tables, byte
 * for byte); a test suite's tables run to tens of megabytes, which nobody reads on a
 * terminal and which cost more to print than to profile. Past ST_SUMMARY_TABLE_BYTES
 * the session prints this summary instead: functions (not call paths: every thread
 * and every path of a function summed, as pstats sums them), the top ones by own
 * time (by calls when no timer was measured). */
#ifndef STRATA_OUTPUT_SUMMARY_H
#define STRATA_OUTPUT_SUMMARY_H

#include <stddef.h>

#include "base/strbuf.h"
#include "model/model.h"

/* Tables up to this size are printed whole. */
#define ST_SUMMARY_TABLE_BYTES (256 * 1024)
/* Functions the summary lists. */
#define ST_SUMMARY_TOP 20

/* Appends the summary table of the `top` functions with the most own time to out.
 * Returns 0 or ST_ENOMEM. */
int st_summary_write(st_strbuf_t *out, const st_model_t *m, size_t top, int precision);

#endif
