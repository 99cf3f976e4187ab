/* A call graph in Graphviz's dot language, drawn in gprof2dot's visual language
 * (the picture HPC users know from `gprof2dot -f pstats out.prof | dot -Tpng`).
 *
 * Each node is a function (output/fgraph.h) labelled with its name
 * (module:line:name for Python functions, as gprof2dot names pstats functions),
 * its total time as a percentage of the run, its own time in brackets and its
 * calls ("12×"); each edge with its share of the total and its calls. Colours run
 * from dark blue to red through gprof2dot's temperature map, by total time, or by
 * self time (rescaled so the hottest function is red) with colour_by_self; edge
 * widths grow with their share. Nodes under node_thres percent of the total, and
 * edges under edge_thres percent, are left out (gprof2dot's -n and -e, 0.5 and
 * 0.1 by default). Percentages are gprof2dot's: of the larger of the summed self
 * times and the largest cumulative time. Every label is escaped for dot. */
#ifndef STRATA_OUTPUT_DOT_H
#define STRATA_OUTPUT_DOT_H

#include "model/model.h"
#include "base/strbuf.h"

typedef struct {
    double node_thres;   /* percent */
    double edge_thres;   /* percent */
    int colour_by_self;
} st_dot_opts_t;

#define ST_DOT_OPTS_DEFAULT {0.5, 0.1, 0}

/* Appends the graph to out. Returns 0 or ST_ENOMEM. */
int st_dot_write(st_strbuf_t *out, const st_model_t *m, const st_dot_opts_t *o);

/* gprof2dot's temperature colour of weight w (0..1) as "#rrggbb" (8 bytes). */
void st_dot_colour(double w, char out[8]);

#endif
