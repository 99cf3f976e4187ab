/* Unit tests of the core: interning, settings,
 * filters, the command-line parser, the table and JSON writers, and redirecting calls
 * through a global offset table. Every figure is
 * exact because time is injected. Prints "N passed, N failed" and exits non-zero
 * on any failure. */
#define _GNU_SOURCE /* dl_phdr_info */
#include <dlfcn.h>
#include <link.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/components.h"
#include "core/filter.h"
#include "base/fsutil.h"
#include "base/gotpatch.h"
#include "base/number.h"
#include "core/intern.h"
#include "model/model.h"
#include "model/walk.h"
#include "core/settings.h"
#include "base/strbuf.h"
#include "output/json.h"
#include "output/table.h"
#include "session/args.h"

#include "check.h"
#include "play.h"

static void test_intern(void)
{
    st_intern_t t;
    st_intern_init(&t);
    uint32_t a, b, c;
    CHECK(st_intern_id(&t, "fib", 3, &a) == 0);
    CHECK(st_intern_id(&t, "fibonacci", 3, &b) == 0); /* only the first 3 bytes */
    CHECK(a == b);
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "f%d", i);
        CHECK(st_intern_id(&t, name, strlen(name), &c) == 0 && c == (uint32_t)i + 1);
    }
    CHECK(st_intern_id(&t, "f500", 4, &c) == 0 && c == 501);
    CHECK_STR(st_intern_str(&t, 501), "f500");
    /* tagged: the same text with two tags is two entries, both marked shared */
    uint32_t w1, w2, w3;
    CHECK(st_intern_tagged(&t, "work", 4, 7, &w1) == 0);
    CHECK(!st_intern_shared(&t, w1));
    CHECK(st_intern_tagged(&t, "work", 4, 9, &w2) == 0 && w2 != w1);
    CHECK(st_intern_tagged(&t, "work", 4, 7, &w3) == 0 && w3 == w1);
    CHECK(st_intern_shared(&t, w1) && st_intern_shared(&t, w2));
    CHECK(st_intern_tag(&t, w1) == 7 && st_intern_tag(&t, w2) == 9);
    CHECK(!st_intern_shared(&t, a) && st_intern_tag(&t, a) == ST_INTERN_NOTAG);
    st_intern_free(&t);
}

static void test_settings(void)
{
    st_settings_t s;
    st_msg_t msg;
    CHECK(st_settings_init(&s) == 0);
    CHECK(st_settings_bool(&s, ST_S_PROFILE) == 1);
    CHECK(st_settings_has(&s, ST_S_COMPONENTS, "wall_clock"));
    size_t n;
    char *const *ex = st_settings_list(&s, ST_S_MODULE_EXCLUDE, &n);
    CHECK(n == 2 && strcmp(ex[1], "^<.*>$") == 0);
    const char *yes[] = {"ON", "on", "True", "YES", "1"};
    for (int i = 0; i < 5; i++)
        CHECK(st_settings_set(&s, ST_S_TRACE_C, yes[i], ST_SRC_ENV, &msg) == 0 &&
              st_settings_bool(&s, ST_S_TRACE_C));
    CHECK(st_settings_set(&s, ST_S_TRACE_C, "maybe", ST_SRC_ENV, &msg) == ST_EINVAL);
    CHECK(strstr(msg.text, "STRATA_TRACE_C") && strstr(msg.text, "maybe"));
    CHECK(st_settings_set(&s, ST_S_COMPONENTS, "trip_count, cpu_clock", ST_SRC_ENV, &msg) == 0);
    CHECK(st_settings_has(&s, ST_S_COMPONENTS, "cpu_clock") &&
          !st_settings_has(&s, ST_S_COMPONENTS, "wall_clock"));
    CHECK(st_settings_set(&s, ST_S_COMPONENTS, "trip_count,bogus", ST_SRC_ENV, &msg) == ST_EINVAL);
    CHECK(strstr(msg.text, "bogus") && strstr(msg.text, "wall_clock"));
    CHECK(st_settings_has(&s, ST_S_COMPONENTS, "cpu_clock")); /* unchanged */
    CHECK(st_settings_set(&s, ST_S_PRECISION, "13", ST_SRC_ENV, &msg) == ST_EINVAL);
    CHECK(st_settings_set(&s, ST_S_PRECISION, "3x", ST_SRC_ENV, &msg) == ST_EINVAL);
    CHECK(st_settings_set(&s, ST_S_MAX_NODES, "2M", ST_SRC_ENV, &msg) == 0 &&
          st_settings_int(&s, ST_S_MAX_NODES) == 2000000);
    CHECK(st_settings_set(&s, ST_S_MAX_NODES, "500k", ST_SRC_ENV, &msg) == 0 &&
          st_settings_int(&s, ST_S_MAX_NODES) == 500000);
    CHECK(st_settings_set(&s, ST_S_MAX_NODES, "k", ST_SRC_ENV, &msg) == ST_EINVAL);
    CHECK(st_settings_set(&s, ST_S_MAX_NODES, "9999999999G", ST_SRC_ENV, &msg) == ST_EINVAL);
    CHECK(st_settings_set(&s, ST_S_MAX_NODES, "2MB", ST_SRC_ENV, &msg) == ST_EINVAL);
    CHECK(st_settings_set(&s, ST_S_FUNCTION_EXCLUDE, "^a{1,2}$ (", ST_SRC_ENV, &msg) == ST_EINVAL);
    CHECK(strstr(msg.text, "bad regex '('") != NULL);
    CHECK(st_setting_find("strata_trace_c") == ST_S_TRACE_C);
    CHECK(st_setting_find("TRACE_C") == ST_S_TRACE_C);
    CHECK(st_setting_find("nope") == -1);
    CHECK_STR(st_setting_closest("STRATA_COMPONENT"), "STRATA_COMPONENTS");
    for (int i = 0; i < ST_NSETTINGS; i++) {
        const st_setting_def_t *d = st_setting_def((st_setting_id_t)i);
        CHECK(d->description && *d->description && d->category && *d->category);
    }

    /* Config file and environment. */
    char path[] = "/tmp/strata-test-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char *text = "# comment\n\nSTRATA_COMPONENTS = trip_count\nprecision=3\nSTRATA_NOPE = 1\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    CHECK(st_settings_load_file(&s, path, NULL, &msg) == 0);
    CHECK(st_settings_int(&s, ST_S_PRECISION) == 3 && s.v[ST_S_PRECISION].source == ST_SRC_FILE);
    char *envp[] = {"HOME=/nonexistent", "STRATA_PRECISION=4", NULL};
    CHECK(st_settings_load_env(&s, envp, NULL, &msg) == 0);
    CHECK(st_settings_int(&s, ST_S_PRECISION) == 4 && s.v[ST_S_PRECISION].source == ST_SRC_ENV);
    st_settings_free(&s);

    /* Precedence through the parser: default < file < env < flag. */
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "STRATA_CONFIG_FILE=%s", path);
    char *env2[] = {"HOME=/nonexistent", cfg, "STRATA_PRECISION=5", NULL};
    char *argv[] = {"--components", "wall_clock", "--", "/dev/null", "x", NULL};
    st_args_t args;
    CHECK(st_args_parse_python(&args, 5, argv, env2, 0, NULL, stdout, &msg) == 0);
    CHECK(st_settings_int(&args.settings, ST_S_PRECISION) == 5); /* env over file */
    CHECK(st_settings_has(&args.settings, ST_S_COMPONENTS, "wall_clock") &&
          !st_settings_has(&args.settings, ST_S_COMPONENTS, "trip_count")); /* flag over file */
    CHECK(strcmp(args.target, "/dev/null") == 0 && args.ntarget_args == 1);
    st_args_free(&args);
    unlink(path);
}

static void test_args(void)
{
    char *envp[] = {"HOME=/nonexistent", NULL};
    st_args_t a;
    st_msg_t msg;
    char *argv1[] = {"-b", "-E", "^fib$", "x.*", "--label", "args", "line", "-F",
                     "--trace-c", "off", "-v", "2", "--", "/dev/null", "-v", NULL};
    CHECK(st_args_parse_python(&a, 15, argv1, envp, 0, NULL, stdout, &msg) == 0);
    CHECK(st_settings_bool(&a.settings, ST_S_BUILTIN));
    size_t n;
    char *const *ex = st_settings_list(&a.settings, ST_S_FUNCTION_EXCLUDE, &n);
    CHECK(n == 3 && strcmp(ex[0], "^<.*>$") == 0 && strcmp(ex[2], "x.*") == 0);
    CHECK(st_settings_has(&a.settings, ST_S_LABEL, "args") &&
          st_settings_has(&a.settings, ST_S_LABEL, "line") &&
          !st_settings_has(&a.settings, ST_S_LABEL, "file"));
    CHECK(st_settings_bool(&a.settings, ST_S_FULL_FILEPATH));
    CHECK(!st_settings_bool(&a.settings, ST_S_TRACE_C));
    CHECK(st_settings_int(&a.settings, ST_S_VERBOSE) == 2);
    CHECK(a.ntarget_args == 1 && strcmp(a.target_args[0], "-v") == 0);
    st_args_free(&a);

    char *argv2[] = {"-m", "pkg.mod", "--x", NULL};
    CHECK(st_args_parse_python(&a, 3, argv2, envp, 0, NULL, stdout, &msg) == 0);
    CHECK(a.is_module && strcmp(a.target, "pkg.mod") == 0 && a.ntarget_args == 1);
    st_args_free(&a);

    struct {
        int argc;
        char *argv[4];
        const char *want;
    } bad[] = {
        {2, {"--bogus", "/dev/null"}, "unknown option '--bogus'"},
        {3, {"-E", "(", "/dev/null"}, "bad regex '('"},
        {1, {"/nonexistent/script.py"}, "cannot open script"},
        {3, {"--components", "bogus", "/dev/null"}, "unknown value 'bogus'"},
        {3, {"--label", "nope", "/dev/null"}, "unknown value 'nope'"},
        {1, {"-E"}, "needs at least one value"},
        {1, {"-v"}, "needs a value"},
        {0, {NULL}, "no script to profile"},
        {2, {"-v", "9"}, "whole number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = st_args_parse_python(&a, bad[i].argc, bad[i].argv, envp, 0, NULL, stdout, &msg);
        CHECK(rc < 0 && rc != ST_EHELP);
        if (rc < 0 && !strstr(msg.text, bad[i].want)) {
            failed++;
            fprintf(stderr, "case %zu: message '%s' lacks '%s'\n", i, msg.text, bad[i].want);
        }
    }
    /* The interpreter's options: split off for `strata python`, refused otherwise. */
    char *argv4[] = {"-u", "-E", "x", "-X", "dev", "-Werror", "-OO", "--", "/dev/null", "-u",
                     NULL};
    CHECK(st_args_parse_python(&a, 10, argv4, envp, ST_ARGS_INTERPRETER, NULL, stdout, &msg) == 0);
    CHECK(a.ninterp_opts == 5 && strcmp(a.interp_opts[0], "-u") == 0 &&
          strcmp(a.interp_opts[2], "dev") == 0 && strcmp(a.interp_opts[4], "-OO") == 0);
    CHECK(a.nstrata_words == 5 && strcmp(a.strata_words[0], "-E") == 0 &&
          strcmp(a.strata_words[2], "--") == 0 && strcmp(a.strata_words[4], "-u") == 0);
    CHECK(strcmp(a.target, "/dev/null") == 0 && a.ntarget_args == 1);
    st_args_free(&a);
    CHECK(st_args_parse_python(&a, 10, argv4, envp, 0, NULL, stdout, &msg) == ST_EUSAGE);
    CHECK(strstr(msg.text, "python -u -m strata") != NULL);
    char *argv5[] = {"-X", NULL};
    CHECK(st_args_parse_python(&a, 1, argv5, envp, ST_ARGS_INTERPRETER, NULL, stdout, &msg) ==
          ST_EUSAGE);

    char *envbad[] = {"STRATA_PROFILE=maybe", NULL};
    char *argv3[] = {"/dev/null", NULL};
    CHECK(st_args_parse_python(&a, 1, argv3, envbad, 0, NULL, stdout, &msg) == ST_EINVAL);
    CHECK(strstr(msg.text, "STRATA_PROFILE") != NULL);
}

/* The flags are the registry's: each one parses through the generated table (in
 * both its forms), sets its own setting, and has one place in --help. */
static void test_flags_from_registry(void)
{
    char *envp[] = {"HOME=/nonexistent", NULL};
    char *help = NULL;
    size_t helplen = 0;
    FILE *hf = open_memstream(&help, &helplen);
    st_args_print_python_help(hf);
    fclose(hf);
    int orders[ST_NSETTINGS + 1] = {0};
    int nflags = 0;
    for (int i = 0; i < ST_NSETTINGS; i++) {
        const st_setting_def_t *d = st_setting_def((st_setting_id_t)i);
        const st_flag_t *f = &d->flag;
        if (!f->longf) {
            CHECK(d->flags == NULL);
            continue;
        }
        nflags++;
        CHECK(f->help && *f->help && f->help_order >= 1 && f->help_order <= ST_NSETTINGS);
        if (f->help_order >= 1 && f->help_order <= ST_NSETTINGS)
            orders[f->help_order]++;
        char text[64];
        snprintf(text, sizeof text, "%s%s%s", f->shortf ? f->shortf : "", f->shortf ? ", " : "",
                 f->longf);
        CHECK(d->flags && strcmp(d->flags, text) == 0);
        CHECK(strstr(help, f->longf) != NULL);
        if (i == ST_S_CONFIG_FILE || i == ST_S_SETUP)
            continue; /* their value must name a readable file */
        const char *value = f->arity == ST_ARG_NONE        ? NULL
                            : f->arity == ST_ARG_OPT_BOOL  ? "on"
                            : d->type == ST_TYPE_REGEX_LIST ? "x"
                            : d->choices                    ? "wall_clock"
                                                            : "2";
        if (i == ST_S_LABEL)
            value = "line";
        else if (i == ST_S_TRACE_FORMAT)
            value = "chrome";
        else if (i == ST_S_SAMPLING_CLOCK)
            value = "wall";
        else if (i == ST_S_OUTPUT_PATH)
            value = "/tmp/strata-test-out";
        for (int form = 0; form < 2; form++) {
            const char *name = form == 0 && f->shortf ? f->shortf : f->longf;
            char joined[128];
            char *argv[6];
            int argc = 0;
            if (i == ST_S_TRACE_FORMAT)
                argv[argc++] = "--trace"; /* it needs a timeline */
            if (i == ST_S_SAMPLING_NATIVE)
                argv[argc++] = "--sample"; /* it needs stack sampling */
            if (value && form == 1) { /* --flag=value */
                snprintf(joined, sizeof joined, "%s=%s", f->longf, value);
                argv[argc++] = joined;
            } else {
                argv[argc++] = (char *)name;
                if (value)
                    argv[argc++] = (char *)value;
            }
            argv[argc++] = "--";
            argv[argc++] = "/dev/null";
            argv[argc] = NULL;
            st_args_t a;
            st_msg_t msg;
            int rc = st_args_parse_python(&a, argc, argv, envp, 0, NULL, stdout, &msg);
            CHECK(rc == 0);
            if (rc == 0) {
                CHECK(a.settings.v[i].source == ST_SRC_FLAG);
                st_args_free(&a);
            } else {
                fprintf(stderr, "flag %s: %s\n", argv[0], msg.text);
            }
        }
    }
    CHECK(nflags > 0);
    for (int k = 1; k <= nflags; k++)
        CHECK(orders[k] == 1);
    free(help);
}

static void test_filter(void)
{
    st_settings_t s;
    st_msg_t msg;
    st_filter_t f;
    st_settings_init(&s);
    CHECK(st_filter_init(&f, &s, &msg) == 0);
    CHECK(st_filter_keeps(&f, "fib", "/x/example.py"));
    CHECK(!st_filter_keeps(&f, "<module>", "/x/example.py"));
    CHECK(!st_filter_keeps(&f, "run", "/usr/lib/python3.11/threading.py"));
    CHECK(!st_filter_keeps(&f, "f", "<frozen runpy>"));
    st_filter_free(&f);
    st_settings_append(&s, ST_S_FUNCTION_INCLUDE, "^<module>$", ST_SRC_FLAG, &msg);
    st_settings_append(&s, ST_S_FUNCTION_RESTRICT, "^(fib|<module>)$", ST_SRC_FLAG, &msg);
    CHECK(st_filter_init(&f, &s, &msg) == 0);
    CHECK(st_filter_keeps(&f, "fib", "a.py") && st_filter_keeps(&f, "<module>", "a.py"));
    CHECK(!st_filter_keeps(&f, "run", "a.py"));
    st_filter_free(&f);
    st_settings_free(&s);
}

/* The seed's second table, from a hand-made tree. */
/* The walk: every node entered, then left after its subtree; skip passes over a
 * subtree; a walk of a subtree stays inside it. */
static void test_walk(void)
{
    st_metrics_t reg;
    st_metrics_init(&reg);
    CHECK(st_play_metrics(&reg) == 0);
    st_pathtab_t t;
    CHECK(st_pathtab_init(&t, &reg, 0) == 0);
    /* 1 a (2 b (3 c), 4 d), 5 e */
    uint32_t a = st_pathtab_child(&t, 0, 10), b = st_pathtab_child(&t, a, 11);
    uint32_t c = st_pathtab_child(&t, b, 12), d = st_pathtab_child(&t, a, 13);
    uint32_t e = st_pathtab_child(&t, 0, 14);
    CHECK(a == 1 && b == 2 && c == 3 && d == 4 && e == 5);
    char got[64];
    size_t n = 0;
    st_walk_t w;
    st_walk_begin(&w, &t, 0);
    while (st_walk_next(&w) && n + 2 < sizeof got) {
        got[n++] = w.leave ? ')' : '(';
        got[n++] = (char)('0' + w.node);
    }
    got[n] = '\0';
    CHECK_STR(got, "(1(2(3)3)2(4)4)1(5)5");
    n = 0;
    st_walk_begin(&w, &t, 0);
    while (st_walk_pre(&w)) {
        got[n++] = (char)('0' + w.node);
        if (w.node == 2)
            st_walk_skip(&w);
    }
    got[n] = '\0';
    CHECK_STR(got, "1245");
    n = 0;
    st_walk_begin(&w, &t, a);
    while (st_walk_next(&w))
        got[n++] = (char)('0' + w.node);
    got[n] = '\0';
    CHECK_STR(got, "233244");
    st_walk_begin(&w, &t, c); /* a leaf: nothing under it */
    CHECK(!st_walk_next(&w));
    st_pathtab_free(&t);
    st_pathtab_init(&t, &reg, 0); /* the root alone */
    st_walk_begin(&w, &t, 0);
    CHECK(!st_walk_next(&w) && !st_walk_next(&w));
    st_pathtab_free(&t);
    st_metrics_free(&reg);
}

/* One call of `label` at the top of t, from t0 to t1 (cpu: half the wall ticks). */
static void play_call(st_pathtab_t *t, uint32_t label, uint64_t t0, uint64_t t1)
{
    st_play_t p;
    st_play_init(&p, t, 2);
    uint64_t start[2] = {t0, t0 / 2}, end[2] = {t1, t1 / 2};
    CHECK(st_play_enter(&p, label, start) == 0 && st_play_exit(&p, end) == 0);
    st_play_free(&p);
}

/* Checks that every column of a streamed table is exactly as wide as its widest
 * cell (or its header, or 8): the first pass measures widths without making the
 * rows' text, and must find what the rows then hold. Every row is as long as the
 * header row, with a '|' at each column's end. Labels hold no '|' and no trailing
 * space, so a cell's text is the segment without its padding. */
static void check_widths(const char *table)
{
    const char *lines[4096];
    size_t lens[4096], n = 0;
    for (const char *p = table; *p && n < 4096; n++) {
        const char *e = strchr(p, '\n');
        if (!e)
            break;
        lines[n] = p;
        lens[n] = (size_t)(e - p);
        p = e + 1;
    }
    CHECK(n >= 6);
    if (n < 6)
        return;
    /* the header row (line 3): the columns' widths */
    size_t width[16], ncols = 0, head_len[16];
    const char *h = lines[3];
    for (size_t at = 0; at + 1 < lens[3] && ncols < 16; ncols++) {
        const char *e = memchr(h + at + 1, '|', lens[3] - at - 1);
        CHECK(e != NULL);
        if (!e)
            return;
        width[ncols] = (size_t)(e - (h + at + 1));
        size_t a = at + 1, b = (size_t)(e - h);
        while (a < b && h[a] == ' ')
            a++;
        while (b > a && h[b - 1] == ' ')
            b--;
        head_len[ncols] = b - a;
        at = (size_t)(e - h);
    }
    size_t widest[16] = {0};
    for (size_t r = 5; r + 1 < n; r++) {
        const char *row = lines[r];
        CHECK(lens[r] == lens[3]);
        if (lens[r] != lens[3])
            return;
        size_t at = 0;
        for (size_t c = 0; c < ncols; c++) {
            CHECK(row[at] == '|');
            size_t a = at + 1, b = at + 1 + width[c];
            while (a < b && row[a] == ' ')
                a++;
            while (b > a && row[b - 1] == ' ')
                b--;
            /* the label cell starts "|0>>> ": its text is the whole segment's */
            size_t len = c == 0 ? b - (at + 2) : b - a;
            if (b > a && len > widest[c])
                widest[c] = len;
            at += 1 + width[c];
        }
        CHECK(row[at] == '|');
    }
    for (size_t c = 0; c < ncols; c++) {
        size_t want = widest[c] + 2;
        if (head_len[c] + 2 > want)
            want = head_len[c] + 2;
        if (want < 8)
            want = 8;
        CHECK(width[c] == want);
        if (width[c] != want)
            fprintf(stderr, "  column %zu: width %zu, widest cell %zu\n", c, width[c], widest[c]);
    }
}

/* Tables of random trees: labels that need escaping, UTF-8, long ones cut, times
 * from one tick to 10^15 at several tick lengths, a recursion past the depth cap. */
static void test_table_widths(void)
{
    static const char *names[] = {"f", "a_rather_long_function_name_of_a_module.method", "caf\xc3\xa9",
                                  "bell\x07rings", "tab\tand\x1b[31mred", "x"};
    st_intern_t labels;
    st_intern_init(&labels);
    uint32_t ids[8];
    for (int i = 0; i < 6; i++)
        st_intern_id(&labels, names[i], strlen(names[i]), &ids[i]);
    char longname[300];
    memset(longname, 'L', sizeof longname);
    st_intern_id(&labels, longname, sizeof longname, &ids[6]);
    st_metrics_t reg;
    st_metrics_init(&reg);
    CHECK(st_play_metrics(&reg) == 0);
    st_settings_t s;
    st_settings_init(&s);
    uint64_t seed = 12345;
    for (int round = 0; round < 12; round++) {
        st_pathtab_t t;
        st_pathtab_init(&t, &reg, 0);
        st_play_t p;
        st_play_init(&p, &t, 2);
        uint64_t now = 0;
        int depth = 0, deep = round % 4 == 3;
        for (int step = 0; step < 3000; step++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t rnd = (uint32_t)(seed >> 33);
            /* a tick count of 1 to 10^15: a random power of ten times a digit */
            uint64_t dt = 1;
            for (uint32_t k = rnd % 16; k > 0; k--)
                dt *= 10;
            dt *= 1 + (rnd >> 8) % 9;
            now += dt;
            uint64_t at[2] = {now, now / 3};
            int enter = deep ? step < 600 : depth == 0 || (depth < 40 && (rnd >> 4) % 2);
            if (enter) {
                CHECK(st_play_enter(&p, ids[(rnd >> 12) % 7], at) == 0);
                depth++;
            } else if (depth > 0) {
                CHECK(st_play_exit(&p, at) == 0);
                depth--;
            }
        }
        for (; depth > 0; depth--) {
            uint64_t at[2] = {now + 1, now / 3 + 1};
            CHECK(st_play_exit(&p, at) == 0);
        }
        st_play_free(&p);
        static const double ticks[] = {1.0, 0.37, 1000.0};
        st_model_thread_t th = {.paths = &t, .index = (uint32_t)round, .tid = 1, .name = "T"};
        st_model_t m = {.labels = &labels, .threads = &th, .nthreads = 1, .metrics = &reg,
                        .settings = &s,
                        .ns_per_tick = {ticks[round % 3], ticks[(round + 1) % 3]},
                        .components = 7};
        static const st_component_t comps[] = {ST_COMP_WALL_CLOCK, ST_COMP_CPU_CLOCK,
                                               ST_COMP_TRIP_COUNT};
        for (int c = 0; c < 3; c++) {
            st_strbuf_t b;
            st_strbuf_init(&b);
            st_table_write(&b, &m, comps[c], round % 2 ? 3 : 6);
            check_widths(st_strbuf_cstr(&b));
            if (deep)
                CHECK(strstr(st_strbuf_cstr(&b), "deeper nodes (folded)") != NULL);
            st_strbuf_free(&b);
        }
        st_pathtab_free(&t);
    }
    st_settings_free(&s);
    st_metrics_free(&reg);
    st_intern_free(&labels);
}

static void test_table(void)
{
    st_intern_t labels;
    st_intern_init(&labels);
    uint32_t id;
    st_intern_id(&labels, "inefficient", 11, &id);
    st_metrics_t reg;
    st_metrics_init(&reg);
    CHECK(st_play_metrics(&reg) == 0);
    st_pathtab_t t;
    st_pathtab_init(&t, &reg, 0);
    play_call(&t, id, 0, 2000000000u);
    st_model_thread_t th = {.paths = &t, .index = 0, .tid = 1, .name = "MainThread"};
    st_settings_t s;
    st_settings_init(&s);
    st_model_t m = {.labels = &labels, .threads = &th, .nthreads = 1, .metrics = &reg,
                    .settings = &s,
                    .ns_per_tick = {1.0, 1.0}, .components = 7};
    st_strbuf_t b;
    st_strbuf_init(&b);
    st_table_write(&b, &m, ST_COMP_TRIP_COUNT, 6);
    CHECK_STR(st_strbuf_cstr(&b),
              "|-----------------------------------------------------------|\n"
              "|                COUNTS NUMBER OF INVOCATIONS               |\n"
              "|-----------------------------------------------------------|\n"
              "|      LABEL        | COUNT  | DEPTH  |   METRIC   |  SUM   |\n"
              "|-------------------|--------|--------|------------|--------|\n"
              "| |0>>> inefficient |      1 |      0 | trip_count |      1 |\n"
              "|-----------------------------------------------------------|\n");
    st_strbuf_reset(&b);
    st_table_write(&b, &m, ST_COMP_WALL_CLOCK, 6);
    CHECK(strstr(st_strbuf_cstr(&b),
                 "|      LABEL        | COUNT  | DEPTH  |   METRIC   | UNITS  |   SUM    |   "
                 "MEAN   |   MIN    |   MAX    |   VAR    | STDDEV   | % SELF |\n") != NULL);
    CHECK(strstr(st_strbuf_cstr(&b),
                 "| |0>>> inefficient |      1 |      0 | wall_clock | sec    | 2.000000 | "
                 "2.000000 | 2.000000 | 2.000000 | 0.000000 | 0.000000 |  100.0 |\n") != NULL);
    /* A recursion 5,000 deep: rows stop at ST_TABLE_MAX_DEPTH, the 4,743 calls below
     * are one folded row; indentation stops at ST_TABLE_MAX_INDENT levels, and DEPTH
     * still tells the truth. */
    {
        st_pathtab_t deep;
        st_pathtab_init(&deep, &reg, 0);
        st_play_t p;
        st_play_init(&p, &deep, 2);
        for (int i = 0; i < 5000; i++) {
            uint64_t now[2] = {(uint64_t)i, (uint64_t)i / 2};
            CHECK(st_play_enter(&p, id, now) == 0);
        }
        for (int i = 4999; i >= 0; i--) {
            uint64_t now[2] = {10000, 5000};
            CHECK(st_play_exit(&p, now) == 0);
        }
        st_play_free(&p);
        st_model_thread_t dth = {.paths = &deep, .index = 0, .tid = 1, .name = "MainThread"};
        st_model_t dm = m;
        dm.threads = &dth;
        st_strbuf_t db;
        st_strbuf_init(&db);
        st_table_write(&db, &dm, ST_COMP_TRIP_COUNT, 6);
        const char *text = st_strbuf_cstr(&db);
        CHECK(db.len < (ST_TABLE_MAX_DEPTH + 10) * (2 * ST_TABLE_MAX_INDENT + 128));
        CHECK(strstr(text, "|    256 |") != NULL && strstr(text, "|    258 |") == NULL);
        CHECK(strstr(text, "|_... 4743 calls in 4743 deeper nodes (folded) |   4743 |    257 | "
                           "trip_count |   4743 |") != NULL);
        st_strbuf_free(&db);
        st_pathtab_free(&deep);
    }
    /* A label of 300 control characters is escaped (\x01, 4 bytes each) and then cut
     * at ST_TABLE_MAX_LABEL bytes of the escaped text, not of the raw one. */
    {
        char raw[301];
        memset(raw, 1, 300);
        raw[300] = '\0';
        st_intern_t cl;
        st_intern_init(&cl);
        uint32_t cid;
        st_intern_id(&cl, raw, 300, &cid);
        st_pathtab_t ct;
        st_pathtab_init(&ct, &reg, 0);
        play_call(&ct, cid, 0, 1);
        st_model_thread_t cth = {.paths = &ct, .index = 0, .tid = 1, .name = "MainThread"};
        st_model_t cm = m;
        cm.labels = &cl;
        cm.threads = &cth;
        st_strbuf_t cb;
        st_strbuf_init(&cb);
        st_table_write(&cb, &cm, ST_COMP_TRIP_COUNT, 6);
        const char *row = strstr(st_strbuf_cstr(&cb), "| |0>>> \\x01");
        CHECK(row != NULL);
        if (row) {
            const char *label = row + strlen("| |0>>> ");
            const char *end = strstr(label, "... |");
            CHECK(end != NULL && (size_t)(end + 3 - label) <= ST_TABLE_MAX_LABEL);
            CHECK(end != NULL && (size_t)(end + 3 - label) > ST_TABLE_MAX_LABEL - 8);
        }
        CHECK(strchr(st_strbuf_cstr(&cb), 1) == NULL);
        st_strbuf_free(&cb);
        st_pathtab_free(&ct);
        st_intern_free(&cl);
    }
    /* Labels are data: JSON escapes them. */
    st_intern_id(&labels, "bad\"label\n\x01", 12, &id);
    play_call(&t, id, 0, 1);
    st_strbuf_reset(&b);
    st_json_write(&b, &m);
    CHECK(strstr(st_strbuf_cstr(&b), "\"label\": \"bad\\\"label\\n\\u0001\"") != NULL);
    CHECK(strstr(st_strbuf_cstr(&b), "\"format_version\": 2") != NULL);
    st_strbuf_free(&b);
    st_settings_free(&s);
    st_pathtab_free(&t);
    st_metrics_free(&reg);
    st_intern_free(&labels);
}

/* Timelines: discard keeps ends, flush keeps everything, the reader gives order. */
static void test_numbers(void)
{
    double d = -1;
    int64_t i = -1;
    CHECK(st_num_double("5", 0, 10, &d) == 0 && d == 5);
    CHECK(st_num_double(" 5", 0, 10, &d) == 0 && d == 5);
    CHECK(st_num_double("5 ", 0, 10, &d) == 0 && d == 5);
    CHECK(st_num_double(".5", 0, 10, &d) == 0 && d == 0.5);
    CHECK(st_num_double("2.", 0, 10, &d) == 0 && d == 2);
    CHECK(st_num_double("1e1", 0, 10, &d) == 0 && d == 10);
    const char *bad[] = {"", " ", "nan", "NAN", "inf", "-inf", "infinity", "0x10", "0x1p3",
                         "1e", "e5", ".", "+", "5 5", "5x", "1e999", "--5"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        CHECK(st_num_double(bad[k], -1e300, 1e300, &d) < 0);
    CHECK(st_num_double("1e-12", 0.001, 10000, &d) < 0);   /* range: below */
    CHECK(st_num_double("10000.5", 0.001, 10000, &d) < 0); /* range: above */
    CHECK(st_num_int("9223372036854775807", INT64_MIN, INT64_MAX, &i) == 0 && i == INT64_MAX);
    CHECK(st_num_int("-9223372036854775808", INT64_MIN, INT64_MAX, &i) == 0 && i == INT64_MIN);
    CHECK(st_num_int("9223372036854775808", INT64_MIN, INT64_MAX, &i) < 0); /* no wrap */
    CHECK(st_num_int("9223372036854776G", INT64_MIN, INT64_MAX, &i) < 0);
    CHECK(st_num_int(" 250k ", 0, INT64_MAX, &i) == 0 && i == 250000);
    CHECK(st_num_int("2M", 0, INT64_MAX, &i) == 0 && i == 2000000);
    CHECK(st_num_int("1.0", 0, 10, &i) < 0 && st_num_int("1e3", 0, 10000, &i) < 0);
    CHECK(st_num_int("13", 0, 12, &i) < 0 && st_num_int("nan", 0, 12, &i) < 0);
}

/* "%.17g" without printf: what printf writes, or 0 (use printf). Doubles of every
 * bit pattern in the range it answers for and beyond it, whole numbers, and sums
 * of a few powers of two (whose decimals end in 5: the ties printf rounds to even);
 * each compared byte for byte with printf's. */
static void test_number_g17(void)
{
    char mine[40], libc[64];
    static const double cases[] = {0.0, 1e-6, 1e30, 1e17, 1e16, 99999999999999999.0,
                                   9.999999999999999e16, 0.1, 0.5, 1.0, 123456789.0,
                                   1e-5, 1e-4, 9.9999e-5, 0.3, 2.0 / 3.0, 1e22, 1e23};
    int ncases = (int)(sizeof cases / sizeof cases[0]);
    int mismatch = 0, fell_back = 0, total = 0;
    uint64_t x = 2463534242ull;
    for (int k = 0; k < 3000000 + 2 * ncases; k++) {
        double v;
        if (k < 2 * ncases) {
            v = k % 2 ? -cases[k / 2] : cases[k / 2];
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift */
            int kind = (int)(x % 3);
            uint64_t y = x * 2685821657736338717ull;
            if (kind == 0) { /* any bits, exponents from 2^-30 to 2^110 */
                uint64_t bits = (y & 0x800fffffffffffffull) | ((uint64_t)(993 + (x >> 8) % 141) << 52);
                memcpy(&v, &bits, sizeof v);
            } else if (kind == 1) { /* whole numbers and halves */
                v = (double)(y >> (x >> 58)) / (double)(1 + (x >> 63));
            } else { /* a few bits, far apart: exact decimals of 17 to 25 digits */
                v = ldexp((double)((y >> 40) | 1), (int)((x >> 20) % 70) - 60) +
                    ldexp(1.0, (int)((x >> 30) % 60) - 20);
            }
        }
        size_t n = st_num_g17(mine, v);
        int inside = fabs(v) > 1e-6 && fabs(v) < 1e30;
        total += inside;
        if (n == 0) {
            fell_back += inside;
            continue;
        }
        snprintf(libc, sizeof libc, "%.17g", v);
        if (n != strlen(libc) || memcmp(mine, libc, n) != 0) {
            if (mismatch++ < 5)
                fprintf(stderr, "st_num_g17(%a): %.*s, printf: %s\n", v, (int)n, mine, libc);
        }
    }
    CHECK(mismatch == 0);
    CHECK(total > 1000000 && fell_back == 0);
    CHECK(st_num_g17(mine, -0.0) == 0 && st_num_g17(mine, NAN) == 0);
    CHECK(st_num_g17(mine, INFINITY) == 0 && st_num_g17(mine, 1e-6) == 0);
    CHECK(st_num_g17(mine, 1e31) == 0);
}

/* Fixed-point and whole-number text without printf: what printf writes, or 0 (use
 * printf). Ties of
 * the decimal text (0.0005 to 3 places: the double is a little above) and values a
 * rounding makes longer (9.9996) included; a million values of every size. */
static void test_number_text(void)
{
    char mine[32], libc[64];
    static const double cases[] = {0.0, 0.0005, 0.0015, 0.5, 1.5, 2.5, 9.9996, 0.1,
                                   123.456, 1e-9, 1099.5, 999999.9999999, 4.35, 1e10};
    int mismatch = 0, fell_back = 0, total = 0;
    uint64_t x = 88172645463325252ull;
    for (int k = 0; k < 1000000 + 14 * 10; k++) {
        double v;
        int p;
        if (k < 14 * 10) {
            v = cases[k / 10];
            p = k % 10;
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift */
            v = (double)(x >> 11) / (double)(1ull << 53) * pow(10.0, (double)(x % 16) - 8.0);
            p = (int)((x >> 5) % 10);
        }
        size_t n = st_num_fixed(mine, v, p);
        int small = v * pow(10.0, p) < 1e11; /* where it is meant to answer */
        total += small;
        if (n == 0) {
            fell_back += small;
            continue;
        }
        snprintf(libc, sizeof libc, "%.*f", p, v);
        if (n != strlen(libc) || memcmp(mine, libc, n) != 0) {
            if (mismatch++ < 5)
                fprintf(stderr, "st_num_fixed(%.17g, %d): %.*s, printf: %s\n", v, p, (int)n,
                        mine, libc);
        }
    }
    CHECK(mismatch == 0);
    CHECK(total > 100000 && fell_back < total / 100); /* printf stays the exception */
    CHECK(st_num_fixed(mine, -1.0, 3) == 0 && st_num_fixed(mine, -0.0, 3) == 0);
    CHECK(st_num_fixed(mine, NAN, 3) == 0 && st_num_fixed(mine, INFINITY, 3) == 0);
    CHECK(st_num_fixed(mine, 1.0, 10) == 0 && st_num_fixed(mine, 1e13, 3) == 0);
    st_strbuf_t b;
    st_strbuf_init(&b);
    st_strbuf_u64(&b, 0);
    st_strbuf_putc(&b, ' ');
    st_strbuf_u64(&b, UINT64_MAX);
    CHECK(strcmp(st_strbuf_cstr(&b), "0 18446744073709551615") == 0);
    st_strbuf_free(&b);
    /* whole numbers: each side of every power of ten, and a million of every size */
    int u64_mismatch = 0;
    uint64_t p10 = 1;
    for (int k = 0; k < 1000000 + 20 * 3; k++) {
        uint64_t v;
        if (k < 20 * 3) {
            v = p10 - 1 + (uint64_t)(k % 3);
            if (k % 3 == 2)
                p10 = p10 > UINT64_MAX / 10 ? UINT64_MAX : p10 * 10;
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            v = x >> (x % 64);
        }
        size_t n = st_num_u64(mine, v);
        snprintf(libc, sizeof libc, "%llu", (unsigned long long)v);
        if (n != strlen(libc) || memcmp(mine, libc, n) != 0)
            u64_mismatch++;
    }
    CHECK(u64_mismatch == 0);
}

/* The run an escaper copies as it is, eight bytes at a time: the first byte that is
 * not printable ASCII (or, for JSON, is a quote or a backslash) ends it, wherever it
 * falls in a word; strings of every length made of bytes on each side of the edges. */
static void test_text_plain_run(void)
{
    static const unsigned char bytes[] = {'a', ' ', '~', 0x1f, 0x7f, 0x80, 0xff, '"', '\\', 0x00};
    uint64_t x = 2463534242ull;
    int wrong = 0;
    char s[40];
    for (int k = 0; k < 200000; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t n = (size_t)(x % 40);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* mostly plain, so that runs reach every length */
            s[i] = (char)(x % 16 < 13 ? bytes[x % 3] : bytes[(x >> 8) % sizeof bytes]);
        }
        for (int json = 0; json <= 1; json++) {
            size_t want = 0;
            while (want < n) {
                unsigned char c = (unsigned char)s[want];
                if (c < 0x20 || c >= 0x7F || (json && (c == '"' || c == '\\')))
                    break;
                want++;
            }
            wrong += st_text_plain_run(s, n, json) != want;
        }
    }
    CHECK(wrong == 0);
}

/* Escaping for terminals, and buffers that stream into a file. */
static void test_strbuf_escape_and_stream(void)
{
    st_strbuf_t b;
    st_strbuf_init(&b);
    st_strbuf_printable(&b, "a\x1b]0;t\x07\n\t\r\x7f\xc2\x9b\xc3\xa9\xff!");
    CHECK_STR(st_strbuf_cstr(&b), "a\\e]0;t\\x07\\n\\t\\r\\x7f\\u009b\xc3\xa9\\xff!");
    st_strbuf_free(&b);
    char small[8];
    CHECK_STR(st_text_printable(small, sizeof small, "abc\x01" "defgh"), "abc\\x01");
    st_msg_t msg;
    st_msg_set(&msg, ST_EINVAL, "bad '%s'", "x\ny\x1b");
    CHECK_STR(msg.text, "bad 'x\\ny\\e'");

    /* streaming: never more than a chunk in memory, everything in the file */
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f)
        return;
    st_strbuf_init(&b);
    st_strbuf_stream(&b, f);
    size_t total = 0, most = 0;
    for (int k = 0; k < 100000; k++) {
        st_strbuf_printf(&b, "line %d of many\n", k);
        total += (size_t)snprintf(NULL, 0, "line %d of many\n", k);
        if (b.cap > most)
            most = b.cap;
    }
    CHECK(st_strbuf_flush(&b) == 0);
    CHECK(most <= 2 * ST_STRBUF_CHUNK);
    CHECK((size_t)ftell(f) == total);
    st_strbuf_free(&b);
    fclose(f);
}

/* st_fs_out: KEEP never replaces, REPLACE does, and nothing is left behind. */
static void test_fs_out(void)
{
    char dir[] = "/tmp/strata-fsout-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    st_msg_t msg;
    st_fs_out_t o;
    CHECK(st_fs_out_open(&o, path, &msg) == 0);
    st_strbuf_puts(&o.buf, "first");
    CHECK(st_fs_out_commit(&o, ST_FS_KEEP, &msg) == 0);
    CHECK(st_fs_out_open(&o, path, &msg) == 0);
    st_strbuf_puts(&o.buf, "second");
    CHECK(st_fs_out_commit(&o, ST_FS_KEEP, &msg) == ST_EIO);
    CHECK(strstr(msg.text, "already exists") != NULL);
    char got[32] = "";
    FILE *f = fopen(path, "r");
    CHECK(f && fgets(got, sizeof got, f));
    if (f)
        fclose(f);
    CHECK_STR(got, "first");
    CHECK(st_fs_out_open(&o, path, &msg) == 0);
    st_strbuf_puts(&o.buf, "third");
    CHECK(st_fs_out_commit(&o, ST_FS_REPLACE, &msg) == 0);
    f = fopen(path, "r");
    CHECK(f && fgets(got, sizeof got, f));
    if (f)
        fclose(f);
    CHECK_STR(got, "third");
    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(st_fs_open_regular(fifo, NULL, NULL, &msg) == NULL); /* at once, no wait */
    CHECK(strstr(msg.text, "not a regular file") != NULL);
    unlink(fifo);
    unlink(path);
    CHECK(rmdir(dir) == 0); /* no temporary file left behind */
}

static int fake_calls;
static pid_t fake_getppid(void)
{
    fake_calls++;
    return 4242;
}

static int only_this_program(const struct dl_phdr_info *obj, void *arg)
{
    return st_got_holds(obj, arg);
}

/* The test program's own calls to getppid go where its GOT says, and back. */
static void test_got(void)
{
    void *real = dlsym(RTLD_DEFAULT, "getppid");
    pid_t parent = getppid();
    CHECK(real && parent != 4242);
    st_got_redirect_t to = {"getppid", NULL, (void *)fake_getppid};
    CHECK(st_got_redirect(&to, 1, only_this_program, (void *)test_got) >= 1);
    CHECK(getppid() == 4242 && fake_calls == 1);
    CHECK(st_got_redirect(&to, 1, only_this_program, (void *)test_got) == 0); /* done */
    st_got_redirect_t other = {"getppid", (void *)real, (void *)fake_getppid};
    CHECK(st_got_redirect(&other, 1, NULL, NULL) == 0); /* no slot holds real now */
    st_got_redirect_t back = {"getppid", (void *)fake_getppid, real};
    CHECK(st_got_redirect(&back, 1, NULL, NULL) >= 1);
    CHECK(getppid() == parent && fake_calls == 1);
    unsigned long long loads = st_got_loads();
    void *lib = dlopen("libz.so.1", RTLD_NOW);
    CHECK(!lib || st_got_loads() > loads);
    if (lib)
        dlclose(lib);
}

int main(void)
{
    test_intern();
    test_settings();
    test_args();
    test_flags_from_registry();
    test_filter();
    test_walk();
    test_table();
    test_table_widths();
    test_numbers();
    test_number_text();
    test_number_g17();
    test_text_plain_run();
    test_strbuf_escape_and_stream();
    test_fs_out();
    test_got();
    return st_check_report();
}
