#include "session/args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "output/registry.h"

/* One flag of the parsed command line, applied after the file and environment. */
typedef struct {
    st_setting_id_t id;
    enum { ACT_SET, ACT_APPEND, ACT_CLEAR } op;
    const char *value;
} action_t;

/* The help is laid out as argparse lays it out on an 88-column terminal: lines of
 * at most HELP_WIDTH columns, each flag's text from column HELP_COLUMN. */
#define HELP_WIDTH 86
#define HELP_COLUMN 24
#define USAGE_PREFIX "usage: strata python "

/* One way to write flag `name` with its value: "-E FUNC [FUNC ...]", "--trace [BOOL]". */
static void flag_form(st_strbuf_t *b, const char *name, const st_setting_def_t *d)
{
    const st_flag_t *f = &d->flag;
    char choices[128];
    const char *mv = f->metavar;
    if (!mv) {
        snprintf(choices, sizeof choices, "{%s}", d->choices ? d->choices : "");
        mv = choices;
    }
    st_strbuf_puts(b, name);
    switch (f->arity) {
    case ST_ARG_NONE:
        break;
    case ST_ARG_ONE:
        st_strbuf_printf(b, " %s", mv);
        break;
    case ST_ARG_OPT_BOOL:
        st_strbuf_printf(b, " [%s]", mv);
        break;
    case ST_ARG_MANY:
        st_strbuf_printf(b, " %s [%s ...]", mv, mv);
        break;
    case ST_ARG_ANY:
        st_strbuf_printf(b, " [%s ...]", mv);
        break;
    }
}

/* The flags `strata sample` takes: what a native program's sampling uses. */
static const st_setting_id_t exe_flags[] = {
    ST_S_VERBOSE, ST_S_CONFIG_FILE, ST_S_OUTPUT_PATH, ST_S_TRACE, ST_S_SAMPLING_FREQ,
    ST_S_SAMPLING_CLOCK,
};

/* The flags `strata run` takes: the profile's, the filters, the timeline, stack
 * sampling and GPU activities (not the Python interpreter's own: -b, -s, -F, --label,
 * --trace-c). */
static const st_setting_id_t run_flags[] = {
    ST_S_VERBOSE, ST_S_CONFIG_FILE, ST_S_OUTPUT_PATH, ST_S_COMPONENTS,
    ST_S_FUNCTION_INCLUDE, ST_S_FUNCTION_EXCLUDE, ST_S_FUNCTION_RESTRICT,
    ST_S_MODULE_INCLUDE, ST_S_MODULE_EXCLUDE, ST_S_MODULE_RESTRICT, ST_S_TRACE,
    ST_S_TRACE_FORMAT, ST_S_USE_SAMPLING, ST_S_SAMPLING_FREQ, ST_S_SAMPLING_CLOCK,
    ST_S_USE_CUPTI,
};

/* 1 when the command line of `opts` takes setting id's flag. */
static int takes_flag(unsigned opts, int id)
{
    if (!(opts & (ST_ARGS_EXE | ST_ARGS_RUN)))
        return 1;
    const st_setting_id_t *list = opts & ST_ARGS_RUN ? run_flags : exe_flags;
    size_t n = opts & ST_ARGS_RUN ? sizeof run_flags / sizeof run_flags[0]
                                  : sizeof exe_flags / sizeof exe_flags[0];
    for (size_t i = 0; i < n; i++)
        if ((int)list[i] == id)
            return 1;
    return 0;
}

/* The settings with a flag that `opts`'s command line takes, in the order of
 * --help; returns how many. */
static size_t flags_in_help_order(const st_setting_def_t **out, unsigned opts)
{
    size_t n = 0;
    for (int order = 1; order <= ST_NSETTINGS; order++)
        for (int i = 0; i < ST_NSETTINGS; i++) {
            const st_setting_def_t *d = st_setting_def((st_setting_id_t)i);
            if (d->flag.longf && d->flag.help_order == order && takes_flag(opts, i))
                out[n++] = d;
        }
    return n;
}

/* Appends one word (n bytes), after a space, or at the start of a new line that
 * begins at column `indent` when it would pass HELP_WIDTH; *col is the column
 * reached, *first whether the line has no word yet. */
static void put_word(st_strbuf_t *b, const char *word, size_t n, size_t *col, size_t indent,
                     int *first)
{
    if (!*first && *col + 1 + n > HELP_WIDTH) {
        st_strbuf_putc(b, '\n');
        st_strbuf_fill(b, ' ', indent);
        *col = indent;
        *first = 1;
    }
    if (!*first) {
        st_strbuf_putc(b, ' ');
        (*col)++;
    }
    st_strbuf_add(b, word, n);
    *col += n;
    *first = 0;
}

/* Appends the words of text, wrapped (put_word), from column *col. */
static void wrap_words(st_strbuf_t *b, const char *text, size_t *col, size_t indent)
{
    int first = 1;
    for (const char *p = text; *p;) {
        p += strspn(p, " ");
        size_t n = strcspn(p, " ");
        if (n)
            put_word(b, p, n, col, indent, &first);
        p += n;
    }
}

/* The help of `strata python` (opts 0) or `strata sample` (ST_ARGS_EXE). */
static void print_help(FILE *out, unsigned opts)
{
    const int exe = (opts & (ST_ARGS_EXE | ST_ARGS_RUN)) != 0;
    const char *prefix = opts & ST_ARGS_RUN ? "usage: strata run "
                         : exe              ? "usage: strata sample "
                                            : USAGE_PREFIX;
    const st_setting_def_t *defs[ST_NSETTINGS];
    size_t n = flags_in_help_order(defs, opts);
    st_strbuf_t b, item;
    st_strbuf_init(&b);
    st_strbuf_init(&item);
    /* the usage line: [-h], then each flag in its first form, wrapped under the
     * first; the target on a line of its own */
    const size_t indent = strlen(prefix);
    size_t col = indent;
    int first = 1;
    st_strbuf_puts(&b, prefix);
    put_word(&b, "[-h]", 4, &col, indent, &first);
    for (size_t i = 0; i < n; i++) {
        const st_flag_t *f = &defs[i]->flag;
        st_strbuf_reset(&item);
        st_strbuf_putc(&item, '[');
        flag_form(&item, f->shortf ? f->shortf : f->longf, defs[i]);
        st_strbuf_putc(&item, ']');
        put_word(&b, item.data, item.len, &col, indent, &first);
    }
    st_strbuf_putc(&b, '\n');
    st_strbuf_fill(&b, ' ', indent);
    st_strbuf_puts(&b, exe ? "[--] program [args ...]\n" : "[--] (script.py | -m module) [args ...]\n");
    st_strbuf_puts(&b, "\noptional arguments:\n"
                       "  -h, --help            show this help message and exit\n");
    /* each flag: its forms, then its help from HELP_COLUMN */
    for (size_t i = 0; i < n; i++) {
        const st_flag_t *f = &defs[i]->flag;
        st_strbuf_reset(&item);
        if (f->shortf) {
            flag_form(&item, f->shortf, defs[i]);
            st_strbuf_puts(&item, ", ");
        }
        flag_form(&item, f->longf, defs[i]);
        if (item.len + 4 <= HELP_COLUMN) {
            st_strbuf_printf(&b, "  %-*s", HELP_COLUMN - 2, st_strbuf_cstr(&item));
        } else {
            st_strbuf_printf(&b, "  %s\n", st_strbuf_cstr(&item));
            st_strbuf_fill(&b, ' ', HELP_COLUMN);
        }
        col = HELP_COLUMN;
        wrap_words(&b, f->help, &col, HELP_COLUMN);
        st_strbuf_putc(&b, '\n');
    }
    if (opts & ST_ARGS_RUN)
        st_strbuf_puts(&b,
            "\n"
            "Profiles a native program through a preloaded library: every function of code\n"
            "built with -finstrument-functions, and the regions of <strata.h>\n"
            "(strata_push/strata_pop); other settings through their STRATA_* variables.\n");
    else if (exe)
        st_strbuf_puts(&b,
            "\n"
            "Samples the call stacks of every thread of any program (C, C++, Fortran, an\n"
            "interpreter) through a preloaded library; other settings through their STRATA_*\n"
            "variables (strata avail -c sampling).\n");
    else
        st_strbuf_puts(&b,
        "\n"
        "interpreter options (strata python only; python -m strata takes them before -m):\n"
        "  -u, -O, -OO, -B, -P, -q, -X OPT, -W ARG\n"
        "                        Passed to the Python interpreter, with python's meaning;\n"
        "                        for its others use their PYTHON* environment variables\n"
        "\n"
        "usage: python3 -m strata <STRATA_ARGS> -- <SCRIPT> <SCRIPT_ARGS>\n");
    fwrite(b.data, 1, b.len, out);
    st_strbuf_free(&item);
    st_strbuf_free(&b);
}

void st_args_print_python_help(FILE *out)
{
    print_help(out, 0);
}

/* The setting whose flag `word` names (-E, --function-exclude; --output=DIR, then
 * *inline_value points at DIR), or -1. */
static int find_flag(const char *word, const char **inline_value, unsigned opts)
{
    *inline_value = NULL;
    for (int i = 0; i < ST_NSETTINGS; i++) {
        const st_flag_t *f = &st_setting_def((st_setting_id_t)i)->flag;
        if (!f->longf || !takes_flag(opts, i))
            continue;
        if ((f->shortf && strcmp(word, f->shortf) == 0) || strcmp(word, f->longf) == 0)
            return i;
        size_t n = strlen(f->longf);
        if (strncmp(word, f->longf, n) == 0 && word[n] == '=') {
            *inline_value = word + n + 1;
            return i;
        }
    }
    return -1;
}

static int is_bool_word(const char *w)
{
    static const char *words[] = {"on", "off", "true", "false", "yes", "no", "1", "0"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcasecmp(w, words[i]) == 0)
            return 1;
    return 0;
}

static int push_action(action_t **acts, size_t *n, int id, int op, const char *value)
{
    action_t *a = realloc(*acts, (*n + 1) * sizeof *a);
    if (!a)
        return ST_ENOMEM;
    *acts = a;
    a[*n].id = (st_setting_id_t)id;
    a[*n].op = op;
    a[*n].value = value;
    (*n)++;
    return 0;
}

/* Whether w is one of the interpreter's options that strata python passes on
 * (ST_ARGS_INTERPRETER): 0 no, 1 one word, 2 it takes the next word as its value.
 * None of them names a strata option. */
static int interp_option(const char *w)
{
    if (w[0] != '-' || w[1] == '\0' || w[1] == '-')
        return 0;
    if (w[1] == 'X' || w[1] == 'W')
        return w[2] ? 1 : 2;
    for (const char *p = w + 1; *p; p++)
        if (!strchr("uOBPq", *p))
            return 0;
    return 1;
}

/* Splits argv into actions and the target; the interpreter's options are marked in
 * interp[] (one byte a word). */
static int scan(st_args_t *args, int argc, char **argv, unsigned opts, char *interp,
                action_t **acts, size_t *nacts, const char **config, FILE *out, st_msg_t *msg)
{
    int i = 0;
    while (i < argc) {
        const char *w = argv[i];
        int io = opts & (ST_ARGS_EXE | ST_ARGS_RUN) ? 0 : interp_option(w);
        if (io) {
            if (!(opts & ST_ARGS_INTERPRETER))
                return st_msg_set(msg, ST_EUSAGE,
                                  "'%s' is an option of the Python interpreter: give it to "
                                  "python before -m strata (python %s -m strata ...), or use "
                                  "'strata python %s ...'",
                                  w, w, w);
            if (io == 2 && i + 1 >= argc)
                return st_msg_set(msg, ST_EUSAGE, "option '%s' needs a value", w);
            for (int k = 0; k < io; k++)
                interp[i + k] = 1;
            i += io;
            continue;
        }
        if (strcmp(w, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(w, "-m") == 0 && !(opts & (ST_ARGS_EXE | ST_ARGS_RUN | ST_ARGS_STATEMENT)))
            break;
        if (strcmp(w, "-h") == 0 || strcmp(w, "--help") == 0) {
            print_help(out, opts);
            return ST_EHELP;
        }
        if (w[0] != '-' || w[1] == '\0')
            break;
        const char *inl;
        int id = find_flag(w, &inl, opts);
        if (id < 0 && (opts & (ST_ARGS_EXE | ST_ARGS_RUN)))
            return st_msg_set(msg, ST_EUSAGE,
                              "unknown option '%s' (see 'strata %s --help'; other settings "
                              "through their STRATA_* variables)",
                              w, opts & ST_ARGS_RUN ? "run" : "sample");
        if (id < 0)
            return st_msg_set(msg, ST_EUSAGE,
                              "unknown option '%s' (see 'strata python --help'; of python's own "
                              "options it takes -u -O -OO -B -P -q -X -W, the others through "
                              "their PYTHON* environment variables)",
                              w);
        const st_setting_def_t *d = st_setting_def((st_setting_id_t)id);
        i++;
        int rc = 0;
        switch (d->flag.arity) {
        case ST_ARG_NONE:
            rc = push_action(acts, nacts, id, ACT_SET, "ON");
            break;
        case ST_ARG_ONE:
            if (!inl) {
                if (i >= argc)
                    return st_msg_set(msg, ST_EUSAGE, "option '%s' needs a value", w);
                inl = argv[i++];
            }
            if (id == ST_S_CONFIG_FILE)
                *config = inl;
            rc = push_action(acts, nacts, id, ACT_SET, inl);
            break;
        case ST_ARG_OPT_BOOL:
            if (!inl && i < argc && is_bool_word(argv[i]))
                inl = argv[i++];
            rc = push_action(acts, nacts, id, ACT_SET, inl ? inl : "ON");
            break;
        case ST_ARG_MANY:
        case ST_ARG_ANY: {
            int got = 0;
            /* the words replace a plain list (--label args line), but add to a regex
             * list's (-E adds to the excluded names) */
            if (d->type == ST_TYPE_LIST)
                rc = push_action(acts, nacts, id, ACT_CLEAR, NULL);
            if (inl) {
                rc = rc ? rc : push_action(acts, nacts, id, ACT_APPEND, inl);
                got++;
            }
            while (rc == 0 && !inl && i < argc && argv[i][0] != '-') {
                rc = push_action(acts, nacts, id, ACT_APPEND, argv[i++]);
                got++;
            }
            if (rc == 0 && d->flag.arity == ST_ARG_MANY && got == 0)
                return st_msg_set(msg, ST_EUSAGE, "option '%s' needs at least one value", w);
            break;
        }
        }
        if (rc < 0)
            return st_msg_set(msg, ST_ENOMEM, "out of memory");
    }
    if (i < argc && strcmp(argv[i], "-m") == 0 &&
        !(opts & (ST_ARGS_EXE | ST_ARGS_RUN | ST_ARGS_STATEMENT))) {
        if (i + 1 >= argc)
            return st_msg_set(msg, ST_EUSAGE, "option '-m' needs a module name");
        args->is_module = 1;
        i++;
    }
    if (i >= argc)
        return 0; /* no target: reported after the settings are checked */
    args->target = argv[i];
    args->target_args = argv + i + 1;
    args->ntarget_args = argc - i - 1;
    return 0;
}

/* Applies one flag; a list flag given as "a,b" (components, label) is split. */
static int apply(st_settings_t *s, const action_t *a, st_msg_t *msg)
{
    const st_setting_def_t *d = st_setting_def(a->id);
    if (a->op == ACT_CLEAR)
        return st_settings_set_list(s, a->id, NULL, 0, ST_SRC_FLAG, msg);
    if (a->op == ACT_SET)
        return st_settings_set(s, a->id, a->value, ST_SRC_FLAG, msg);
    if (d->type == ST_TYPE_REGEX_LIST)
        return st_settings_append(s, a->id, a->value, ST_SRC_FLAG, msg);
    char item[256];
    for (const char *p = a->value; *p;) {
        size_t n = strcspn(p, ",");
        if (n >= sizeof item)
            return st_msg_set(msg, ST_EINVAL, "%s: value too long", d->env);
        memcpy(item, p, n);
        item[n] = '\0';
        if (n) {
            int rc = st_settings_append(s, a->id, item, ST_SRC_FLAG, msg);
            if (rc < 0)
                return rc;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* Splits argv into the interpreter's options and the other words. */
static int split_words(st_args_t *args, int argc, char **argv, const char *interp)
{
    args->interp_opts = calloc((size_t)argc + 1, sizeof *args->interp_opts);
    args->strata_words = calloc((size_t)argc + 1, sizeof *args->strata_words);
    if (!args->interp_opts || !args->strata_words)
        return ST_ENOMEM;
    for (int i = 0; i < argc; i++) {
        if (interp[i])
            args->interp_opts[args->ninterp_opts++] = argv[i];
        else
            args->strata_words[args->nstrata_words++] = argv[i];
    }
    return 0;
}

/* Settings that act only together with another, and formats that need a tool: a
 * mistake found here is found before anything runs. */
static int check_together(const st_settings_t *s, st_warn_fn warn, st_msg_t *msg)
{
    if (s->v[ST_S_SAMPLING_NATIVE].source == ST_SRC_FLAG && st_settings_bool(s, ST_S_SAMPLING_NATIVE) &&
        !st_settings_bool(s, ST_S_USE_SAMPLING))
        return st_msg_set(msg, ST_EUSAGE, "--native adds C frames to the stack samples, but no "
                                          "stack is sampled: add --sample");
    const st_value_t *tf = &s->v[ST_S_TRACE_FORMAT];
    if (!st_settings_bool(s, ST_S_TRACE) && tf->source != ST_SRC_DEFAULT) {
        st_strbuf_t v;
        st_strbuf_init(&v);
        st_settings_format(s, ST_S_TRACE_FORMAT, &v);
        char text[512];
        if (tf->source == ST_SRC_FLAG) {
            int rc = st_msg_set(msg, ST_EUSAGE,
                                "--trace-format %s chooses the timeline's formats, but no "
                                "timeline is recorded: add --trace (or STRATA_TRACE=ON)",
                                st_strbuf_cstr(&v));
            st_strbuf_free(&v);
            return rc;
        }
        /* A config file written by `strata avail -G` holds every setting: the default
         * value there says nothing. */
        if (strcmp(st_strbuf_cstr(&v), st_setting_def(ST_S_TRACE_FORMAT)->defval) != 0) {
            snprintf(text, sizeof text,
                     "STRATA_TRACE_FORMAT=%s (from the %s) has no effect: no timeline is "
                     "recorded without STRATA_TRACE=ON (or --trace)",
                     st_strbuf_cstr(&v), tf->source == ST_SRC_FILE ? "config file" : "environment");
            if (warn)
                warn(text);
        }
        st_strbuf_free(&v);
    }
    size_t n;
    char *const *list = st_settings_list(s, ST_S_OUTPUT_FORMATS, &n);
    unsigned mask = 0;
    for (size_t i = 0; i < n; i++) {
        int f = st_format_find(list[i]);
        if (f >= 0)
            mask |= 1u << f;
    }
    return st_formats_check_tools(mask, "STRATA_OUTPUT_FORMATS", msg);
}

int st_args_parse_python(st_args_t *args, int argc, char **argv, char *const *envp,
                         unsigned opts, st_warn_fn warn, FILE *out, st_msg_t *msg)
{
    memset(args, 0, sizeof *args);
    action_t *acts = NULL;
    size_t nacts = 0;
    const char *config = NULL;
    char *interp = calloc((size_t)argc + 1, 1);
    int rc = interp ? st_settings_init(&args->settings) : ST_ENOMEM;
    if (rc < 0) {
        free(interp);
        st_msg_set(msg, rc, "out of memory");
        return rc;
    }
    rc = scan(args, argc, argv, opts, interp, &acts, &nacts, &config, out, msg);
    if (rc == 0 && split_words(args, argc, argv, interp) < 0)
        rc = st_msg_set(msg, ST_ENOMEM, "out of memory");
    if (rc < 0)
        goto fail;

    rc = st_settings_load_sources(&args->settings, config, envp, warn, msg);
    if (rc < 0)
        goto fail;
    for (size_t i = 0; i < nacts; i++) {
        rc = apply(&args->settings, &acts[i], msg);
        if (rc < 0)
            goto fail;
    }

    rc = check_together(&args->settings, warn, msg);
    if (rc < 0)
        goto fail;

    if (!args->target && (opts & (ST_ARGS_EXE | ST_ARGS_RUN))) {
        rc = st_msg_set(msg, ST_EUSAGE, "no program to %s (usage: strata %s [options] -- "
                                        "program [args])",
                        opts & ST_ARGS_RUN ? "profile" : "sample",
                        opts & ST_ARGS_RUN ? "run" : "sample");
        goto fail;
    }
    if (!args->target && !(opts & ST_ARGS_STATEMENT)) {
        rc = st_msg_set(msg, ST_EUSAGE,
                        "no script to profile (usage: strata python [options] -- script.py "
                        "[args]; options such as -E take every word after them, so put -- "
                        "before the script)");
        goto fail;
    }
    if (!args->is_module && !(opts & (ST_ARGS_EXE | ST_ARGS_RUN | ST_ARGS_STATEMENT))) {
        struct stat st;
        if (stat(args->target, &st) != 0) {
            rc = st_msg_set(msg, ST_EINVAL, "cannot open script '%s': %s", args->target,
                            strerror(errno));
            goto fail;
        }
        if (S_ISDIR(st.st_mode) || access(args->target, R_OK) != 0) {
            rc = st_msg_set(msg, ST_EINVAL, "cannot read script '%s'", args->target);
            goto fail;
        }
    }
    const char *setup = st_settings_str(&args->settings, ST_S_SETUP);
    if (*setup) {
        struct stat st;
        if (stat(setup, &st) != 0 || access(setup, R_OK) != 0) {
            rc = st_msg_set(msg, ST_EINVAL, "cannot read setup file '%s': %s", setup,
                            strerror(errno));
            goto fail;
        }
        if (S_ISDIR(st.st_mode)) {
            rc = st_msg_set(msg, ST_EINVAL, "cannot read setup file '%s': it is a directory",
                            setup);
            goto fail;
        }
    }
    free(acts);
    free(interp);
    return 0;
fail:
    free(acts);
    free(interp);
    st_args_free(args);
    return rc;
}

void st_args_free(st_args_t *args)
{
    st_settings_free(&args->settings);
    free(args->interp_opts);
    free(args->strata_words);
    args->interp_opts = args->strata_words = NULL;
    args->ninterp_opts = args->nstrata_words = 0;
}
