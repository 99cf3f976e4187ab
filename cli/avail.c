#include "avail.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/components.h"
#include "system/hwc.h"
#include "base/fsutil.h"
#include "output/grid.h"
#include "verbs.h"

static const char *type_name(st_setting_type_t t)
{
    switch (t) {
    case ST_TYPE_BOOL: return "bool";
    case ST_TYPE_INT: return "int";
    case ST_TYPE_STRING: return "string";
    case ST_TYPE_LIST: return "list";
    case ST_TYPE_REGEX_LIST: return "regex list";
    case ST_TYPE_CHOICE: return "choice";
    case ST_TYPE_SIZE: return "size";
    case ST_TYPE_FLOAT: return "number";
    }
    return "?";
}

/* 1 if setting i is shown under `category` (NULL: all). */
static int shown(int i, const char *category)
{
    return !category || strcmp(st_setting_def((st_setting_id_t)i)->category, category) == 0;
}

void st_avail_write_table(st_strbuf_t *out, const st_settings_t *s, const char *category, int all)
{
    st_grid_t g;
    st_grid_init(&g);
    st_grid_column(&g, "ENVIRONMENT VARIABLE", 0);
    st_grid_column(&g, "VALUE", 0);
    st_grid_column(&g, "SOURCE", 0);
    if (all) {
        st_grid_column(&g, "CATEGORY", 0);
        st_grid_column(&g, "FLAG", 0);
        st_grid_column(&g, "CHOICES", 0);
        st_grid_column(&g, "DESCRIPTION", 0);
    }
    st_strbuf_t v;
    st_strbuf_init(&v);
    for (int i = 0; i < ST_NSETTINGS; i++) {
        if (!shown(i, category))
            continue;
        const st_setting_def_t *d = st_setting_def((st_setting_id_t)i);
        st_grid_row(&g);
        st_grid_cell_str(&g, 0, d->env);
        st_settings_format(s, (st_setting_id_t)i, &v);
        st_grid_cell(&g, 1, &v);
        st_grid_cell_str(&g, 2, st_source_name(s->v[i].source));
        if (all) {
            st_grid_cell_str(&g, 3, d->category);
            st_grid_cell_str(&g, 4, d->flags ? d->flags : "");
            st_grid_cell_str(&g, 5, d->choices ? d->choices : "");
            st_grid_cell_str(&g, 6, d->description);
        }
    }
    st_grid_render(out, &g, "STRATA SETTINGS");
    st_grid_free(&g);
    st_strbuf_free(&v);
}

static void json_field(st_strbuf_t *out, const char *key, const char *value, int comma)
{
    st_strbuf_json_string(out, key);
    st_strbuf_puts(out, ": ");
    if (value)
        st_strbuf_json_string(out, value);
    else
        st_strbuf_puts(out, "null");
    if (comma)
        st_strbuf_puts(out, ", ");
}

static void write_components_json(st_strbuf_t *out)
{
    st_strbuf_puts(out, "\"components\": [");
    for (int c = 0; c < ST_NCOMPONENTS; c++) {
        const st_component_info_t *info = st_component_info((st_component_t)c);
        st_strbuf_puts(out, c ? ",\n    {" : "\n    {");
        json_field(out, "name", info->name, 1);
        json_field(out, "units", info->units, 1);
        json_field(out, "title", info->title, 1);
        json_field(out, "description", info->description, 0);
        st_strbuf_putc(out, '}');
    }
    st_strbuf_puts(out, "\n  ]");
}

void st_avail_write_json(st_strbuf_t *out, const st_settings_t *s, const char *category)
{
    st_strbuf_t v, dv;
    st_strbuf_init(&v);
    st_strbuf_init(&dv);
    st_settings_t defaults;
    int have_defaults = st_settings_init(&defaults) == 0;
    st_strbuf_puts(out, "{\n  \"settings\": [");
    int first = 1;
    for (int i = 0; i < ST_NSETTINGS; i++) {
        if (!shown(i, category))
            continue;
        const st_setting_def_t *d = st_setting_def((st_setting_id_t)i);
        st_strbuf_reset(&v);
        st_settings_format(s, (st_setting_id_t)i, &v);
        st_strbuf_reset(&dv);
        if (have_defaults)
            st_settings_format(&defaults, (st_setting_id_t)i, &dv);
        st_strbuf_puts(out, first ? "\n    {" : ",\n    {");
        first = 0;
        json_field(out, "name", d->name, 1);
        json_field(out, "env", d->env, 1);
        json_field(out, "flag", d->flags, 1);
        json_field(out, "type", type_name(d->type), 1);
        json_field(out, "value", st_strbuf_cstr(&v), 1);
        json_field(out, "default", st_strbuf_cstr(&dv), 1);
        json_field(out, "source", st_source_name(s->v[i].source), 1);
        json_field(out, "category", d->category, 1);
        json_field(out, "choices", d->choices, 1);
        json_field(out, "description", d->description, 0);
        st_strbuf_putc(out, '}');
    }
    st_strbuf_puts(out, "\n  ],\n  ");
    write_components_json(out);
    st_strbuf_puts(out, "\n}\n");
    if (v.failed || dv.failed)
        out->failed = 1;
    if (have_defaults)
        st_settings_free(&defaults);
    st_strbuf_free(&v);
    st_strbuf_free(&dv);
}

void st_avail_write_components(st_strbuf_t *out)
{
    st_grid_t g;
    st_grid_init(&g);
    st_grid_column(&g, "COMPONENT", 0);
    st_grid_column(&g, "UNITS", 0);
    st_grid_column(&g, "TABLE TITLE", 0);
    st_grid_column(&g, "DESCRIPTION", 0);
    for (int c = 0; c < ST_NCOMPONENTS; c++) {
        const st_component_info_t *info = st_component_info((st_component_t)c);
        st_grid_row(&g);
        st_grid_cell_str(&g, 0, info->name);
        st_grid_cell_str(&g, 1, info->units);
        st_grid_cell_str(&g, 2, info->title);
        st_grid_cell_str(&g, 3, info->description);
    }
    st_grid_render(out, &g, "STRATA COMPONENTS");
    st_grid_free(&g);
}

void st_avail_write_config(st_strbuf_t *out, const st_settings_t *s, int all)
{
    st_strbuf_puts(out, "# strata configuration (written by `strata avail -G`).\n"
                        "# Read from STRATA_CONFIG_FILE, else ~/.strata.cfg. Precedence: built-in\n"
                        "# default < this file < environment (STRATA_*) < command line.\n");
    for (int i = 0; i < ST_NSETTINGS; i++) {
        if (i == ST_S_CONFIG_FILE)
            continue; /* a file does not name itself */
        const st_setting_def_t *d = st_setting_def((st_setting_id_t)i);
        if (all) {
            st_strbuf_printf(out, "\n# %s: %s\n# type: %s; category: %s", d->env, d->description,
                             type_name(d->type), d->category);
            if (d->choices)
                st_strbuf_printf(out, "; choices: %s", d->choices);
            if (d->flags)
                st_strbuf_printf(out, "; flag: %s", d->flags);
            st_strbuf_printf(out, "; default: %s\n", d->defval);
        }
        st_strbuf_printf(out, "%s = ", d->env);
        st_settings_format(s, (st_setting_id_t)i, out);
        st_strbuf_putc(out, '\n');
    }
}

/* Text for a Markdown table cell: '|' escaped. */
static void md_cell(st_strbuf_t *out, const char *text, int code)
{
    if (!text || !*text) {
        st_strbuf_puts(out, " |");
        return;
    }
    st_strbuf_puts(out, code ? " `" : " ");
    for (const char *p = text; *p; p++) {
        if (*p == '|')
            st_strbuf_putc(out, '\\');
        st_strbuf_putc(out, *p);
    }
    st_strbuf_puts(out, code ? "` |" : " |");
}

void st_avail_write_markdown(st_strbuf_t *out)
{
    st_strbuf_puts(
        out,
        "# Settings\n\n"
        "<!-- Generated by `strata avail --markdown` from the registry in src/core/settings.c;\n"
        "     tests/test_avail.py fails when this file is out of step. Do not edit by hand. -->\n\n"
        "Every setting can be given, lowest precedence first, as its built-in default, in a\n"
        "config file (`STRATA_CONFIG_FILE`, else `~/.strata.cfg`; `strata avail -G FILE`\n"
        "writes one), in the environment, and on the command line where it has a flag.\n"
        "Booleans accept `ON/OFF`, `true/false`, `yes/no` and `1/0` in any case; whole numbers\n"
        "accept the suffixes `k`, `M` and `G` (thousands, millions, billions); lists are\n"
        "comma- or space-separated, regex lists space-separated. Numbers are decimal (`50`,\n"
        "`0.5`, `1e3`), spaces around them are ignored, and `nan`, `inf` and hex are refused;\n"
        "every number is checked against its range. A bad value is an error naming the\n"
        "setting, the value and what is accepted. A config file holds `NAME = value` lines\n"
        "(`#` starts a comment), each at most 8191 bytes, the file at most 1 MiB. `strata\n"
        "avail` shows the current values and where each came from.\n");
    const char *cats[ST_NSETTINGS];
    int ncats = 0;
    for (int i = 0; i < ST_NSETTINGS; i++) {
        const char *c = st_setting_def((st_setting_id_t)i)->category;
        int seen = 0;
        for (int k = 0; k < ncats; k++)
            seen |= strcmp(cats[k], c) == 0;
        if (!seen)
            cats[ncats++] = c;
    }
    for (int k = 0; k < ncats; k++) {
        st_strbuf_printf(out, "\n## %s\n\n", cats[k]);
        st_strbuf_puts(out, "| variable | flag | type | default | choices | description |\n"
                            "| --- | --- | --- | --- | --- | --- |\n");
        for (int i = 0; i < ST_NSETTINGS; i++) {
            const st_setting_def_t *d = st_setting_def((st_setting_id_t)i);
            if (strcmp(d->category, cats[k]) != 0)
                continue;
            st_strbuf_putc(out, '|');
            md_cell(out, d->env, 1);
            md_cell(out, d->flags, 1);
            md_cell(out, type_name(d->type), 0);
            md_cell(out, d->defval, 1);
            md_cell(out, d->choices, 1);
            md_cell(out, d->description, 0);
            st_strbuf_putc(out, '\n');
        }
    }
}

static void print_help(FILE *out)
{
    fputs("usage: strata avail [-h] [-a] [-c CATEGORY] [--json] [--components] [-H]\n"
          "                    [-G FILE [--force]] [--markdown]\n"
          "\n"
          "  -h, --help            show this help message and exit\n"
          "  -a, --all             also show each setting's category, flag, choices and\n"
          "                        description (with -G: a comment block per setting)\n"
          "  -c CATEGORY, --category CATEGORY\n"
          "                        only the settings of CATEGORY\n"
          "  --json                print JSON for scripts\n"
          "  --components          list the profile components and their units\n"
          "  -H, --hardware        list the event counters (perf:, papi:) and whether\n"
          "                        this machine counts each\n"
          "  -G FILE, --generate FILE\n"
          "                        write a configuration file with the current values\n"
          "                        (an existing FILE only with --force; never the config\n"
          "                        file the values were read from)\n"
          "  --force               with -G: replace FILE if it exists\n"
          "  --markdown            print the registry as Markdown (docs/settings.md)\n",
          out);
}

static void warn(const char *text) { fprintf(stderr, "strata: warning: %s\n", text); }

static int fail(const char *text)
{
    fprintf(stderr, "strata: error: %s\n", text);
    return 2;
}

/* -G FILE: the config file, never over the one the values came from, nor over
 * any existing file without --force. */
static int generate_config(const char *path, const st_settings_t *s, int all, int force,
                           char *const *envp)
{
    st_msg_t msg;
    char buf[4096];
    const char *input = st_settings_config_path(NULL, envp, buf, sizeof buf);
    struct stat a, b;
    if (input && stat(input, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino) {
        st_msg_set(&msg, ST_EIO, "'%s' is the config file the values were read from: it is "
                                 "never written over (choose another file)", path);
        return fail(msg.text);
    }
    if (!force && lstat(path, &b) == 0) {
        st_msg_set(&msg, ST_EIO, "'%s' already exists (use --force to replace it)", path);
        return fail(msg.text);
    }
    st_fs_out_t fo;
    if (st_fs_out_open(&fo, path, &msg) < 0)
        return fail(msg.text);
    st_avail_write_config(&fo.buf, s, all);
    if (st_fs_out_commit(&fo, force ? ST_FS_REPLACE : ST_FS_KEEP, &msg) < 0)
        return fail(msg.text);
    return 0;
}

int st_avail_main(int argc, char **argv, char *const *envp, FILE *out)
{
    int all = 0, json = 0, components = 0, markdown = 0, force = 0, hardware = 0;
    const char *category = NULL, *generate = NULL;
    st_msg_t msg;
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i];
        if (strcmp(w, "-h") == 0 || strcmp(w, "--help") == 0) {
            print_help(out);
            return 0;
        } else if (strcmp(w, "-a") == 0 || strcmp(w, "--all") == 0) {
            all = 1;
        } else if (strcmp(w, "--json") == 0) {
            json = 1;
        } else if (strcmp(w, "--components") == 0) {
            components = 1;
        } else if (strcmp(w, "--markdown") == 0) {
            markdown = 1;
        } else if (strcmp(w, "-H") == 0 || strcmp(w, "--hardware") == 0) {
            hardware = 1;
        } else if (strcmp(w, "--force") == 0) {
            force = 1;
        } else if (strcmp(w, "-c") == 0 || strcmp(w, "--category") == 0 ||
                   strcmp(w, "-G") == 0 || strcmp(w, "--generate") == 0) {
            if (i + 1 >= argc) {
                st_msg_set(&msg, ST_EUSAGE, "option '%s' needs a value", w);
                return fail(msg.text);
            }
            int is_category = strcmp(w, "-c") == 0 || strcmp(w, "--category") == 0;
            if (is_category)
                category = argv[++i];
            else
                generate = argv[++i];
        } else {
            st_msg_set(&msg, ST_EUSAGE, "unknown option '%s' (see 'strata avail --help')", w);
            return fail(msg.text);
        }
    }
    if (category) {
        int known = 0;
        char list[256] = "";
        for (int i = 0; i < ST_NSETTINGS; i++) {
            const char *c = st_setting_def((st_setting_id_t)i)->category;
            known |= strcmp(c, category) == 0;
            if (!strstr(list, c) && strlen(list) + strlen(c) + 3 < sizeof list) {
                if (*list)
                    strcat(list, ", ");
                strcat(list, c);
            }
        }
        if (!known) {
            st_msg_set(&msg, ST_EINVAL, "unknown category '%s' (choose from %s)", category, list);
            return fail(msg.text);
        }
    }

    st_strbuf_t buf;
    st_strbuf_init(&buf);
    int status = 0;
    if (markdown) {
        st_avail_write_markdown(&buf);
    } else if (hardware) {
        st_hwc_avail(&buf);
    } else if (components && !json) {
        st_avail_write_components(&buf);
    } else {
        st_settings_t s;
        if (st_settings_init(&s) < 0)
            return fail("out of memory");
        if (st_settings_load_sources(&s, NULL, envp, warn, &msg) < 0) {
            st_settings_free(&s);
            return fail(msg.text);
        }
        if (generate) {
            status = generate_config(generate, &s, all, force, envp);
            if (status == 0)
                fprintf(out, "strata: wrote %s\n", generate);
        } else if (json) {
            st_avail_write_json(&buf, &s, components ? "" : category);
        } else {
            st_avail_write_table(&buf, &s, category, all);
        }
        st_settings_free(&s);
    }
    if (buf.failed)
        status = fail("out of memory");
    else if (buf.len)
        fwrite(buf.data, 1, buf.len, out);
    st_strbuf_free(&buf);
    if (fflush(out) != 0 && status == 0)
        status = fail("cannot write the output");
    return status;
}
