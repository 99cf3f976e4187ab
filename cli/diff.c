/* `strata diff`: two results, or two sets of runs, compared per function (see
 * verbs.h and output/diff.h). */
#include "verbs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "base/number.h"
#include "model/profile.h"
#include "output/diff.h"
#include "output/diffgraph.h"
#include "results.h"

static void diff_usage(FILE *out)
{
    fputs("usage: strata diff [--fail-on PCT] [--min-share PCT] [--by-rank] [--by-thread]\n"
          "                   [--format text|json|html] [-o FILE] [--top N] A B\n"
          "       strata diff [options] A... -- B...\n"
          "\n"
          "Compares function by function the runs A (before) with the runs B (after):\n"
          "self and inclusive time and calls, most grown first. Each RESULT is a run\n"
          "(a profile.json, or a results folder: an MPI job's ranks make one run); with\n"
          "several runs a side, the noise of each change comes from their spread.\n"
          "\n"
          "  --fail-on PCT    exit 1 when a function got slower by more than PCT % beyond\n"
          "                   the noise (default: say so, exit 0; PCT 10 marks them)\n"
          "  --min-share PCT  only functions taking PCT % of the time or more (1)\n"
          "  --by-rank        each MPI rank's functions apart (\"[rank 3] solve\")\n"
          "  --by-thread      each thread's functions apart, threads matched by name\n"
          "  --format F       text (default), json, or html (a differential flame graph\n"
          "                   of B's call paths coloured by the change, and the table)\n"
          "  -o FILE          write there, not to standard output\n"
          "  --top N          rows of the text table (30; 0: all)\n",
          out);
}

typedef struct {
    double pct, min_share;
    int fail, json, html, by_rank, by_thread;
    long top;
    const char *out;
    char **sides[2];
    int n[2];
} diff_opts_t;

static int parse(diff_opts_t *o, int argc, char **argv, st_msg_t *msg)
{
    memset(o, 0, sizeof *o);
    o->pct = 10;
    o->min_share = 1;
    o->top = 30;
    char **words = calloc((size_t)argc + 1, sizeof *words);
    if (!words)
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    o->sides[0] = words;
    int split = 0, nwords = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return ST_EHELP;
        if (strcmp(a, "--") == 0) {
            if (split++)
                return st_msg_set(msg, ST_EUSAGE, "diff takes one '--' (A... -- B...)");
            o->n[0] = nwords;
            o->sides[1] = words + nwords;
        } else if (!split && (strcmp(a, "--fail-on") == 0 || strcmp(a, "--min-share") == 0)) {
            if (!v || st_num_double(v, 0, 1e9, &x) < 0)
                return st_msg_set(msg, ST_EUSAGE, "%s needs a percentage (a number, 0 or more)",
                                  a);
            if (strcmp(a, "--fail-on") == 0) {
                o->pct = x;
                o->fail = 1;
            } else {
                o->min_share = x;
            }
            i++;
        } else if (!split && strcmp(a, "--by-rank") == 0) {
            o->by_rank = 1;
        } else if (!split && strcmp(a, "--by-thread") == 0) {
            o->by_thread = 1;
        } else if (!split && strcmp(a, "--format") == 0) {
            if (!v || (strcmp(v, "text") != 0 && strcmp(v, "json") != 0 &&
                       strcmp(v, "html") != 0))
                return st_msg_set(msg, ST_EUSAGE, "--format takes text, json or html");
            o->json = strcmp(v, "json") == 0;
            o->html = strcmp(v, "html") == 0;
            i++;
        } else if (!split && strcmp(a, "-o") == 0) {
            if (!v)
                return st_msg_set(msg, ST_EUSAGE, "-o needs a file");
            o->out = v;
            i++;
        } else if (!split && strcmp(a, "--top") == 0) {
            int64_t t;
            if (!v || st_num_int(v, 0, 1000000000, &t) < 0)
                return st_msg_set(msg, ST_EUSAGE, "--top needs a number of rows");
            o->top = (long)t;
            i++;
        } else if (!split && a[0] == '-' && a[1]) {
            return st_msg_set(msg, ST_EUSAGE, "unknown option '%s' (see 'strata diff --help')",
                              a);
        } else {
            words[nwords++] = argv[i];
        }
    }
    if (split) {
        o->n[1] = nwords - o->n[0];
    } else if (nwords == 2) {
        o->n[0] = o->n[1] = 1;
        o->sides[1] = words + 1;
    } else {
        return st_msg_set(msg, ST_EUSAGE, "diff compares two results (A B) or two sets of runs "
                                          "(A... -- B...)");
    }
    if (!o->n[0] || !o->n[1])
        return st_msg_set(msg, ST_EUSAGE, "diff needs runs on both sides of '--'");
    return 0;
}

/* One RESULT as one run of a side (and of the call paths' tree, when given). */
static int add_run(st_diff_t *d, st_dtree_t *tree, int side, const char *arg, st_msg_t *msg)
{
    st_cli_paths_t files = {0};
    st_profile_t p;
    int rc = st_cli_resolve(arg, &files, msg);
    if (rc == 0)
        rc = st_cli_load_all(&files, &p, 0, NULL, msg);
    st_cli_paths_free(&files);
    if (rc < 0)
        return rc;
    rc = st_diff_add_run(d, side, &p.model);
    if (rc == 0 && tree)
        rc = st_dtree_add_run(tree, side, &p.model);
    st_profile_free(&p);
    return rc < 0 ? st_msg_set(msg, rc, "out of memory") : 0;
}

int st_diff_main(int argc, char **argv)
{
    diff_opts_t o;
    st_msg_t msg;
    int rc = parse(&o, argc, argv, &msg);
    if (rc == ST_EHELP) {
        free(o.sides[0]);
        diff_usage(stdout);
        return 0;
    }
    st_diff_t d;
    st_diff_init(&d, o.pct, o.min_share);
    d.by_rank = o.by_rank;
    d.by_thread = o.by_thread;
    st_dtree_t tree = {0};
    if (rc == 0 && o.html && st_dtree_init(&tree) < 0)
        rc = st_msg_set(&msg, ST_ENOMEM, "out of memory");
    for (int s = 0; s < 2 && rc == 0; s++)
        for (int i = 0; i < o.n[s] && rc == 0; i++)
            rc = add_run(&d, o.html ? &tree : NULL, s, o.sides[s][i], &msg);
    free(o.sides[0]);
    st_diff_row_t *rows = NULL;
    long n = rc == 0 ? st_diff_rows(&d, &rows) : 0;
    if (rc == 0 && n < 0)
        rc = st_msg_set(&msg, ST_ENOMEM, "out of memory");
    if (rc < 0) {
        st_diff_free(&d);
        st_dtree_free(&tree);
        return st_cli_fail(msg.text);
    }
    st_strbuf_t out;
    st_strbuf_init(&out);
    if (o.json) {
        st_diff_json_write(&out, &d, rows, (size_t)n);
    } else if (o.html) {
        st_strbuf_t table;
        st_strbuf_init(&table);
        st_diff_table_write(&table, &d, rows, (size_t)n, (size_t)o.top);
        char title[96];
        snprintf(title, sizeof title, "strata diff: A (%u run%s) to B (%u run%s)", d.runs[0],
                 d.runs[0] == 1 ? "" : "s", d.runs[1], d.runs[1] == 1 ? "" : "s");
        st_dtree_html_write(&out, &tree, title, table.failed ? "" : st_strbuf_cstr(&table));
        out.failed |= table.failed;
        st_strbuf_free(&table);
    } else {
        st_diff_table_write(&out, &d, rows, (size_t)n, (size_t)o.top);
    }
    st_dtree_free(&tree);
    size_t regressions = 0;
    for (long i = 0; i < n; i++)
        regressions += rows[i].regression != 0;
    free(rows);
    st_diff_free(&d);
    int status = 0;
    if (out.failed) {
        status = st_cli_fail("out of memory");
    } else if (o.out) {
        st_fs_out_t fo;
        if (st_fs_out_open(&fo, o.out, &msg) < 0) {
            status = st_cli_fail(msg.text);
        } else {
            st_strbuf_add(&fo.buf, out.data, out.len);
            if (st_fs_out_commit(&fo, ST_FS_REPLACE, &msg) < 0)
                status = st_cli_fail(msg.text);
        }
    } else {
        fwrite(out.data, 1, out.len, stdout);
        if (fflush(stdout) != 0)
            status = 2;
    }
    st_strbuf_free(&out);
    return status ? status : o.fail && regressions ? 1 : 0;
}
