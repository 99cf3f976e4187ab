/* `strata avail`: what settings and components there are, what each is set to and
 * where that came from, as a table, JSON, Markdown (docs/settings.md) or a config
 * file that loads back unchanged (-G).
 *
 *     strata avail [--all] [-c CATEGORY] [--json]      settings
 *     strata avail --components [--json]               profile components
 *     strata avail -G FILE [--all]                     write a config file
 *     strata avail --markdown                          the registry, for the docs
 *
 * The writers take settings and a buffer, so tests can call them alone; the verb
 * itself, st_avail_main, is declared in verbs.h. */
#ifndef STRATA_CLI_AVAIL_H
#define STRATA_CLI_AVAIL_H

#include <stdio.h>

#include "base/err.h"
#include "core/settings.h"
#include "base/strbuf.h"

/* A table of the settings (name, value, source; with `all` also category, flag,
 * choices and description), only those of `category` when it is not NULL. */
void st_avail_write_table(st_strbuf_t *out, const st_settings_t *s, const char *category, int all);

/* The same as JSON: {"settings": [...], "components": [...]}. */
void st_avail_write_json(st_strbuf_t *out, const st_settings_t *s, const char *category);

/* The components with their units and descriptions. */
void st_avail_write_components(st_strbuf_t *out);

/* A config file of `STRATA_NAME = value` lines for the current values (with `all`, a
 * comment block before each), which st_settings_load_file reads back to the same
 * values. */
void st_avail_write_config(st_strbuf_t *out, const st_settings_t *s, int all);

/* The registry (defaults, not current values) as Markdown: docs/settings.md. */
void st_avail_write_markdown(st_strbuf_t *out);

#endif
