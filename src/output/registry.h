/* The writer registry: every output format in one table (name, file name in a
 * results folder, render function with one signature), which is what
 * `strata report --format`, `strata merge --format` and STRATA_OUTPUT_FORMATS (the
 * session's output plan at the end of a run) choose from. A new format is one
 * entry here and one writer beside it.
 *
 *   text        the timemory tables, one per component (plus, for a result of
 *               several MPI ranks, the ranks summed and the load-balance table)
 *   json        profile.json, the canonical result
 *   pstats      cProfile's .prof (pstats.Stats, SnakeViz, gprof2dot -f pstats)
 *   dot/png/svg gprof2dot's call graph (png and svg through Graphviz's dot)
 *   folded      folded stacks (flamegraph.pl, speedscope)
 *   speedscope  speedscope's JSON
 *   callgrind   KCachegrind's callgrind.out
 *   html        the self-contained HTML report
 *
 * In a results folder each format has a fixed file name; a process with an MPI
 * rank puts the rank in each name (profile-3.json, wall_clock-3.txt). Every file
 * is streamed to a temporary name beside it (memory stays bounded however large
 * the file) and renamed into place, so a file with its final name is always
 * whole. */
#ifndef STRATA_OUTPUT_REGISTRY_H
#define STRATA_OUTPUT_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/fsutil.h"
#include "model/model.h"
#include "base/strbuf.h"
#include "output/dot.h"

typedef enum {
    ST_FMT_TEXT,
    ST_FMT_JSON,
    ST_FMT_PSTATS,
    ST_FMT_DOT,
    ST_FMT_PNG,
    ST_FMT_SVG,
    ST_FMT_FOLDED,
    ST_FMT_SPEEDSCOPE,
    ST_FMT_CALLGRIND,
    ST_FMT_HTML,
    ST_FMT_LINES,   /* line timings (--lines): line_profiler's text */
    ST_FMT_LPROF,   /* line timings: line_profiler's .lprof */
    ST_FMT_MEMORY,  /* line memory (--memory): memory_profiler's text */
    ST_FMT_MPROF,   /* memory over time (--memory): mprof's .dat */
    ST_FMT_MEMPLOT, /* memory over time: the plot (SVG) */
    ST_FMT_MEMPLOT_PNG, /* the same plot as PNG (librsvg's rsvg-convert) */
    ST_NFORMATS
} st_format_t;

typedef struct {
    st_dot_opts_t dot;
    int precision;          /* decimals in the text tables */
    const char *title;      /* names the result in html and speedscope */
    int keep_existing;      /* 1: refuse to replace an existing file (no --force) */
    const st_fs_id_t *inputs; /* files never written over, even with --force */
    size_t ninputs;
} st_output_opts_t;

/* Renders m in one format into out (binary for pstats and png): 0, or a negative
 * st_err code with msg saying why (ST_ENOMEM may leave msg to the caller). */
typedef int (*st_output_render_fn)(st_strbuf_t *out, const st_model_t *m,
                                   const st_output_opts_t *o, st_msg_t *msg);

/* One entry of the registry. */
typedef struct {
    const char *name;          /* "pstats": what --format and STRATA_OUTPUT_FORMATS say */
    const char *stem, *ext;    /* its file in a results folder: stem[-rank]ext */
    st_output_render_fn render;
    const char *tool;          /* a command it runs, which must be on PATH; or NULL */
} st_output_format_t;

/* The registry's entry of format f (static; never NULL for f < ST_NFORMATS). */
const st_output_format_t *st_output_format(st_format_t f);

/* Defaults: gprof2dot's thresholds, 6 decimals. */
void st_output_opts_init(st_output_opts_t *o);

/* What names a result in html and speedscope: the module of a `-m` run, else the
 * script, as the run's command line gave them; `fallback` if it has none. */
const char *st_output_title(const st_model_t *m, const char *fallback);

/* mask with the line-profile formats (lines, lprof, memory, mprof, memplot) a
 * profile has added when it asks for text, and those it has not taken out. */
unsigned st_formats_line_profiles(const st_model_t *m, unsigned mask);

/* The format named `name`, or -1. */
int st_format_find(const char *name);
const char *st_format_name(st_format_t f);

/* Parses a comma- or space-separated list of format names into a bit mask
 * (1 << st_format_t). ST_EINVAL with a message naming the bad one. */
int st_formats_parse(const char *list, unsigned *mask, st_msg_t *msg);

/* The file name of format f in a results folder (the rank, when has_rank, goes
 * before the extension). Text is several files; this gives the first
 * component's. */
void st_format_file_name(st_format_t f, int has_rank, uint32_t rank, char *buf, size_t size);

/* The base of the file name of metric `name`'s table ("perf:cycles" ->
 * "perf_cycles"): characters other than letters, digits, '_' and '-' made '_',
 * "metric_" before a name that would be another table's or is empty. */
void st_metric_file_base(const char *name, char *out, size_t size);

/* Checks that the tools the formats in mask need can be run (the entries' `tool`:
 * png and svg need Graphviz's dot on PATH). ST_EINVAL with a message naming `what` (the setting or
 * flag that asked) when one is missing; 0 otherwise. */
int st_formats_check_tools(unsigned mask, const char *what, st_msg_t *msg);

/* Renders format f of m into out through its entry (binary for pstats and png).
 * Text is every table, one after another. png and svg run Graphviz's dot: ST_EIO with a clear
 * message when it is not installed or fails. */
int st_format_render(st_strbuf_t *out, const st_model_t *m, st_format_t f,
                     const st_output_opts_t *o, st_msg_t *msg);

/* Checks that path may be written under o: ST_EIO with a message when it is one
 * of o->inputs, or exists while o->keep_existing. */
int st_format_check_target(const char *path, const st_output_opts_t *o, st_msg_t *msg);

/* Writes every format in mask into folder dir (which exists) under its file name.
 * Text writes <component>.txt for each component (and load_balance.txt for a
 * result of several ranks). Every name is checked first (st_format_check_target):
 * a name refused writes nothing. Then every file is tried, one that fails never
 * stopping the others. If `written` is not NULL, each path written is appended to
 * it, one per line; if `errors` is not NULL, each failure's message is, one per
 * line. Returns 0, or the first failure's code with msg holding its text. */
int st_formats_write_dir(const st_model_t *m, unsigned mask, const char *dir,
                         const st_output_opts_t *o, st_strbuf_t *written, st_strbuf_t *errors,
                         st_msg_t *msg);

#endif
