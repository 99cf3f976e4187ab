/* The HTML report: one self-contained file (its script, style and data inline; no
 * network, no server) that opens from a copied folder in any browser. An icicle
 * (flame) graph of the call tree with zoom, search and hover details, a sortable
 * table of functions (self, total, count, mean, stddev), and thread and MPI rank
 * selectors. The script and style are src/output/html/report.{js,css}, built in.
 *
 * Labels can carry user data (--label args shows argument values), so every
 * string is written into the embedded JSON with <, >, &, U+2028 and U+2029
 * escaped as \u sequences (nothing can close the <script> element or open a tag),
 * and the script puts labels on the page only through textContent and the canvas,
 * never as markup. */
#ifndef STRATA_OUTPUT_HTML_H
#define STRATA_OUTPUT_HTML_H

#include "model/model.h"
#include "base/strbuf.h"

/* Appends the page to out; `title` names the result. Returns 0 or ST_ENOMEM. */
int st_html_write(st_strbuf_t *out, const st_model_t *m, const char *title);

/* Appends s as a JSON string that is also safe inside an HTML <script> element. */
void st_html_json_string(st_strbuf_t *out, const char *s);

/* Appends s escaped as the text of an HTML element or attribute value (< > & " '). */
void st_html_text(st_strbuf_t *out, const char *s);

#endif
