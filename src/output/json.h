/* profile.json, the canonical result: metadata, settings, and every thread's call
 * tree as a flat list of nodes (parent index, not nesting, so that a tree 5,000
 * calls deep loads in any JSON reader). Documented in docs/formats.md. */
#ifndef STRATA_OUTPUT_JSON_H
#define STRATA_OUTPUT_JSON_H

#include "model/model.h"
#include "base/strbuf.h"
#include "model/version.h"

/* Appends the whole document to out. */
void st_json_write(st_strbuf_t *out, const st_model_t *m);

#endif
