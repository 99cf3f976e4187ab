/* The settings registry: every setting strata has, in one table.
 *
 * Each setting has a name, a type, a default, a category, a description, the
 * choices it accepts where that applies, its environment variable STRATA_<NAME>
 * and its command-line flags. A value records where it came from. Precedence,
 * lowest first: default, config file, environment, command line (and, last, the
 * program itself through strata.profiler.config). Every value is parsed and checked
 * when it is set: a bad value is an error naming the setting, the value and what is
 * accepted, never a silent default.
 *
 * Not thread-safe: settings are set before profiling starts, or from Python with
 * the GIL held. */
#ifndef STRATA_CORE_SETTINGS_H
#define STRATA_CORE_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/strbuf.h"

typedef enum {
    ST_S_PROFILE,
    ST_S_COMPONENTS,
    ST_S_OUTPUT_PATH,
    ST_S_PRINT_TABLES,
    ST_S_PRECISION,
    ST_S_VERBOSE,
    ST_S_CONFIG_FILE,
    ST_S_SETUP,
    ST_S_BUILTIN,
    ST_S_FULL_FILEPATH,
    ST_S_LABEL,
    ST_S_TRACE_C,
    ST_S_INCLUDE_INTERNAL,
    ST_S_FUNCTION_INCLUDE,
    ST_S_FUNCTION_EXCLUDE,
    ST_S_FUNCTION_RESTRICT,
    ST_S_MODULE_INCLUDE,
    ST_S_MODULE_EXCLUDE,
    ST_S_MODULE_RESTRICT,
    ST_S_MAX_NODES,
    ST_S_CLOCK,
    ST_S_TRACE,
    ST_S_TRACE_FORMAT,
    ST_S_TRACE_BUFFER_SIZE,
    ST_S_TRACE_FILL_POLICY,
    ST_S_TRACE_MAX_DEPTH,
    ST_S_USE_PROCESS_SAMPLING,
    ST_S_PROCESS_SAMPLING_FREQ,
    ST_S_OUTPUT_FORMATS,
    ST_S_USE_SAMPLING,
    ST_S_SAMPLING_FREQ,
    ST_S_SAMPLING_CLOCK,
    ST_S_SAMPLING_SIGNAL,
    ST_S_SAMPLING_UNWIND,
    ST_S_SAMPLING_NATIVE,
    ST_S_PRINT_SUMMARY,
    ST_S_MPI_GATHER,
    ST_S_LINES,
    ST_S_MEMORY,
    ST_S_CPU_CLOCK_INTERVAL,
    ST_S_USE_CUPTI,
    ST_S_CUPTI_LIBRARY,
    ST_S_FOLLOW_CHILDREN,
    ST_NSETTINGS
} st_setting_id_t;

typedef enum {
    ST_TYPE_BOOL,
    ST_TYPE_INT,
    ST_TYPE_STRING,
    ST_TYPE_LIST,        /* comma- or space-separated words, from `choices` if set */
    ST_TYPE_REGEX_LIST,  /* space-separated regexes */
    ST_TYPE_CHOICE,      /* one word from `choices` */
    ST_TYPE_SIZE,        /* bytes, with an optional unit: 64MB, 512KiB, 1G */
    ST_TYPE_FLOAT,       /* a decimal number (base/number.h), from fmin to fmax */
} st_setting_type_t;

typedef enum {
    ST_SRC_DEFAULT,
    ST_SRC_FILE,
    ST_SRC_ENV,
    ST_SRC_FLAG,
    ST_SRC_API,
} st_source_t;

/* How a command-line flag takes its value. */
typedef enum {
    ST_ARG_NONE,        /* -b: sets the setting ON */
    ST_ARG_ONE,         /* -o DIR, --output DIR, --output=DIR */
    ST_ARG_OPT_BOOL,    /* --trace [BOOL]: ON, or the boolean word that follows */
    ST_ARG_MANY,        /* -E FUNC [FUNC ...]: the words up to the next one starting with '-' */
    ST_ARG_ANY,         /* --label [WORD ...]: the same, possibly none */
} st_arity_t;

/* A setting's command-line flag: the parser (session/args.c) and the option part
 * of `strata python --help` are generated from these, so a flag is spelled only in
 * the registry. */
typedef struct {
    const char *shortf;     /* "-E", or NULL */
    const char *longf;      /* "--function-exclude"; NULL: the setting has no flag */
    st_arity_t arity;
    const char *metavar;    /* "FUNC" in the help; NULL: "{choice,...}" from choices */
    const char *help;       /* its line in --help (the seed's wording) */
    int help_order;         /* its place in --help and the usage line, from 1 */
} st_flag_t;

typedef struct {
    const char *name;        /* lower case: "components" */
    const char *env;         /* "STRATA_COMPONENTS" */
    st_setting_type_t type;
    const char *defval;      /* the default, as text */
    const char *category;
    const char *description;
    const char *choices;     /* comma-separated, or NULL */
    const char *flags;       /* "--components", "-E, --function-exclude", or NULL */
    st_flag_t flag;          /* the same flag, for the parser and --help */
    int64_t min, max;        /* for ST_TYPE_INT and ST_TYPE_SIZE */
    double fmin, fmax;       /* for ST_TYPE_FLOAT (both included) */
} st_setting_def_t;

typedef struct {
    int64_t i;         /* bool, int and size */
    double f;          /* float */
    char *s;           /* string and choice; owned */
    char **list;       /* lists; owned */
    size_t nlist;
    st_source_t source;
} st_value_t;

typedef struct st_settings {
    st_value_t v[ST_NSETTINGS];
} st_settings_t;

/* The static definition of a setting. */
const st_setting_def_t *st_setting_def(st_setting_id_t id);

/* The setting whose name or variable is `name` (any case, "STRATA_" optional),
 * or -1. */
int st_setting_find(const char *name);

/* The known variable closest to an unknown name (for "did you mean"). */
const char *st_setting_closest(const char *name);

/* The name of a source ("default", "file", "environment", "flag", "program"). */
const char *st_source_name(st_source_t src);

/* Every setting at its default. Returns 0 or ST_ENOMEM. */
int st_settings_init(st_settings_t *s);
void st_settings_free(st_settings_t *s);
/* A deep copy of src into dst (dst uninitialised). */
int st_settings_copy(st_settings_t *dst, const st_settings_t *src);

/* Parses `text` for setting id and stores it (a list is replaced). Numbers go
 * through base/number.h (spaces around them ignored, nan and inf refused, the
 * range checked). On a bad value returns ST_EINVAL and msg says which setting,
 * the value and what is accepted. */
int st_settings_set(st_settings_t *s, st_setting_id_t id, const char *text, st_source_t src,
                    st_msg_t *msg);

/* Adds one item to a list setting, checked as st_settings_set checks items. */
int st_settings_append(st_settings_t *s, st_setting_id_t id, const char *item, st_source_t src,
                       st_msg_t *msg);

/* Replaces a list setting with n items, each checked. */
int st_settings_set_list(st_settings_t *s, st_setting_id_t id, char *const *items, size_t n,
                         st_source_t src, st_msg_t *msg);

/* Reads `NAME = value` lines (# comments, blank lines) from path. Unknown names are
 * warned about through warn (may be NULL). A line longer than
 * ST_SETTINGS_MAX_LINE bytes, a file larger than ST_SETTINGS_MAX_FILE bytes, a
 * NUL byte or anything but a regular file (a FIFO, /dev/zero) is an error naming
 * the file and line. */
#define ST_SETTINGS_MAX_LINE 8191
#define ST_SETTINGS_MAX_FILE ((long)1 << 20)
typedef void (*st_warn_fn)(const char *text);
int st_settings_load_file(st_settings_t *s, const char *path, st_warn_fn warn, st_msg_t *msg);

/* Applies every STRATA_<NAME> variable of envp; warns about unknown ones. */
int st_settings_load_env(st_settings_t *s, char *const *envp, st_warn_fn warn, st_msg_t *msg);

/* Loads the config file, then the environment, over what s holds: the file is
 * `config` (from a -c flag) if given, else STRATA_CONFIG_FILE, else ~/.strata.cfg
 * when it exists. */
int st_settings_load_sources(st_settings_t *s, const char *config, char *const *envp,
                             st_warn_fn warn, st_msg_t *msg);

/* The config file st_settings_load_sources reads (config, else STRATA_CONFIG_FILE,
 * else ~/.strata.cfg when it exists, written into buf), or NULL. */
const char *st_settings_config_path(const char *config, char *const *envp, char *buf,
                                    size_t size);

/* Getters. */
static inline int st_settings_bool(const st_settings_t *s, st_setting_id_t id)
{
    return s->v[id].i != 0;
}
static inline int64_t st_settings_int(const st_settings_t *s, st_setting_id_t id)
{
    return s->v[id].i;
}
static inline double st_settings_float(const st_settings_t *s, st_setting_id_t id)
{
    return s->v[id].f;
}
static inline const char *st_settings_str(const st_settings_t *s, st_setting_id_t id)
{
    return s->v[id].s ? s->v[id].s : "";
}
static inline char *const *st_settings_list(const st_settings_t *s, st_setting_id_t id, size_t *n)
{
    *n = s->v[id].nlist;
    return s->v[id].list;
}
/* 1 if the list setting contains word. */
int st_settings_has(const st_settings_t *s, st_setting_id_t id, const char *word);

/* Appends the value of a setting as text (lists joined as they are parsed back). */
void st_settings_format(const st_settings_t *s, st_setting_id_t id, st_strbuf_t *out);

#endif
