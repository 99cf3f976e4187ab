#include "results.h"

#include "base/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/number.h"
#include "model/merge.h"
#include "input/profile.h"

int st_cli_fail(const char *text)
{
    fprintf(stderr, "strata: error: %s\n", text);
    return 2;
}

/* After st_formats_write_dir failed: the files it wrote, then a `strata: error:`
 * line for each that failed (only msg's when none was written: a name refused). */
int st_cli_failed_files(st_strbuf_t *written, st_strbuf_t *errors, const st_msg_t *msg)
{
    fputs(st_strbuf_cstr(written), stderr);
    if (!errors->len)
        return st_cli_fail(msg->text);
    const char *e = st_strbuf_cstr(errors);
    while (*e) {
        size_t n = strcspn(e, "\n");
        fprintf(stderr, "strata: error: %.*s\n", (int)n, e);
        e += n + (e[n] == '\n');
    }
    return 2;
}

int st_cli_failf(st_msg_t *msg, int err, const char *fmt, const char *arg)
{
    st_msg_set(msg, err, fmt, arg);
    return st_cli_fail(msg->text);
}

/* ------------------------------------------------------------------ inputs */

static int paths_add(st_cli_paths_t *p, const char *path)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        char **q = realloc(p->paths, cap * sizeof *q);
        if (!q)
            return ST_ENOMEM;
        p->paths = q;
        p->cap = cap;
    }
    if (!(p->paths[p->n] = strdup(path)))
        return ST_ENOMEM;
    p->n++;
    return 0;
}

void st_cli_paths_free(st_cli_paths_t *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->paths[i]);
    free(p->paths);
    memset(p, 0, sizeof *p);
}

static int is_rank_file(const char *name, unsigned long *rank)
{
    if (strncmp(name, "profile-", 8) != 0 || name[8] < '0' || name[8] > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long r = strtoul(name + 8, &end, 10);
    if (errno || strcmp(end, ".json") != 0 || r > INT32_MAX)
        return 0;
    *rank = r;
    return 1;
}

typedef struct {
    unsigned long rank;
    char *path;
} ranked_t;

static int cmp_ranked(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* The profile files a RESULT argument names: a file, or a folder's profile.json,
 * else its profile-<rank>.json files in rank order. */
int st_cli_resolve(const char *arg, st_cli_paths_t *out, st_msg_t *msg)
{
    struct stat st;
    if (stat(arg, &st) != 0)
        return st_msg_set(msg, ST_EIO, "cannot read '%s': %s", arg, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        if (paths_add(out, arg) < 0)
            return st_msg_set(msg, ST_ENOMEM, "out of memory");
        return 0;
    }
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/profile.json", arg) >= (int)sizeof path)
        return st_msg_set(msg, ST_EINVAL, "path too long: '%s'", arg);
    if (stat(path, &st) == 0)
        return paths_add(out, path) < 0 ? st_msg_set(msg, ST_ENOMEM, "out of memory") : 0;
    DIR *d = opendir(arg);
    if (!d)
        return st_msg_set(msg, ST_EIO, "cannot read the folder '%s': %s", arg, strerror(errno));
    ranked_t *r = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        unsigned long rank;
        if (!is_rank_file(e->d_name, &rank))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            ranked_t *q = realloc(r, cap * sizeof *q);
            if (!q) {
                rc = st_msg_set(msg, ST_ENOMEM, "out of memory");
                break;
            }
            r = q;
        }
        if (snprintf(path, sizeof path, "%s/%s", arg, e->d_name) >= (int)sizeof path ||
            !(r[n].path = strdup(path))) {
            rc = st_msg_set(msg, ST_ENOMEM, "out of memory");
            break;
        }
        r[n++].rank = rank;
    }
    closedir(d);
    if (rc == 0 && n == 0)
        rc = st_msg_set(msg, ST_EINVAL,
                        "'%s' holds no profile.json nor profile-<rank>.json: not a results "
                        "folder",
                        arg);
    if (rc == 0) {
        qsort(r, n, sizeof *r, cmp_ranked);
        for (size_t i = 0; i < n && rc == 0; i++)
            if (paths_add(out, r[i].path) < 0)
                rc = st_msg_set(msg, ST_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        free(r[i].path);
    free(r);
    return rc;
}

/* What tells two results apart: the run (host, pid, start) and the rank. */
typedef struct {
    char *host;
    long pid;
    uint64_t start_ns, end_ns;
    int has_rank;
    uint32_t rank;
    const char *path;
} run_id_t;

/* Warns when the result at `path` is a run already merged (the same file twice,
 * or a copy of it): its calls would count twice. */
static int note_run(run_id_t **ids, size_t *n, const st_model_t *m, const char *path)
{
    run_id_t me = {NULL, m->pid, m->start_ns, m->end_ns, m->has_rank, m->rank, path};
    for (size_t i = 0; i < *n; i++) {
        const run_id_t *o = &(*ids)[i];
        if (o->pid == me.pid && o->start_ns == me.start_ns && o->has_rank == me.has_rank &&
            o->rank == me.rank && strcmp(o->host, m->host ? m->host : "") == 0 && me.start_ns) {
            char a[PATH_MAX], b[PATH_MAX], h[256];
            char rank[32] = "";
            if (me.has_rank)
                snprintf(rank, sizeof rank, ", rank %u", me.rank);
            fprintf(stderr,
                    "strata: warning: '%s' and '%s' are the same run (pid %ld on '%s'%s): its "
                    "calls are counted twice in the merge\n",
                    st_text_printable(a, sizeof a, o->path), st_text_printable(b, sizeof b, path),
                    me.pid, st_text_printable(h, sizeof h, o->host), rank);
            break;
        }
    }
    run_id_t *q = realloc(*ids, (*n + 1) * sizeof *q);
    if (!q || !(me.host = strdup(m->host ? m->host : ""))) {
        if (q)
            *ids = q;
        return ST_ENOMEM;
    }
    *ids = q;
    q[(*n)++] = me;
    return 0;
}

static int by_start(const void *a, const void *b)
{
    const run_id_t *x = a, *y = b;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* 1 when the runs are processes of one host that ran at the same time, one after
 * another overlapping (a run and its child processes), not runs one after the
 * other. Sorts ids. */
static int ran_together(run_id_t *ids, size_t n)
{
    if (n < 2)
        return 0;
    qsort(ids, n, sizeof *ids, by_start);
    uint64_t end = ids[0].end_ns;
    for (size_t i = 1; i < n; i++) {
        if (!ids[i].start_ns || ids[i].start_ns > end || strcmp(ids[i].host, ids[0].host) != 0)
            return 0;
        if (ids[i].end_ns > end)
            end = ids[i].end_ns;
    }
    return 1;
}

/* Loads and merges every file into out (a single file is loaded as it is, unless
 * `always_merge`). */
int st_cli_load_all(const st_cli_paths_t *files, st_profile_t *out, int always_merge,
                    int *together, st_msg_t *msg)
{
    if (together)
        *together = 0;
    if (files->n == 1 && !always_merge)
        return st_profile_load(out, files->paths[0], msg);
    st_merger_t mg;
    if (st_merge_begin(&mg, out, 0) < 0)
        return st_msg_set(msg, ST_ENOMEM, "out of memory merging");
    run_id_t *ids = NULL;
    size_t nids = 0;
    int rc = 0;
    for (size_t i = 0; i < files->n && rc == 0; i++) {
        st_profile_t one;
        rc = st_profile_load(&one, files->paths[i], msg);
        if (rc < 0)
            break;
        if (note_run(&ids, &nids, &one.model, files->paths[i]) < 0 ||
            st_merge_add(&mg, &one.model) < 0)
            rc = st_msg_set(msg, ST_ENOMEM, "out of memory merging");
        st_profile_free(&one);
    }
    if (together && rc == 0)
        *together = ran_together(ids, nids);
    for (size_t i = 0; i < nids; i++)
        free(ids[i].host);
    free(ids);
    if (rc == 0 && st_merge_end(&mg) < 0)
        rc = st_msg_set(msg, ST_ENOMEM, "out of memory merging");
    if (rc < 0) {
        free(mg.contrib);
        st_profile_free(out);
    }
    if (rc == 0 && mg.saturated)
        fprintf(stderr, "strata: warning: some sums or counts reached %llu, the largest a "
                        "profile holds, and stay there (saturated)\n",
                (unsigned long long)ST_COUNT_MAX);
    return rc;
}

/* The identities of the input files, which no output may replace. */
int st_cli_input_ids(const st_cli_paths_t *files, st_fs_id_t **ids)
{
    *ids = calloc(files->n + 1, sizeof **ids);
    if (!*ids)
        return ST_ENOMEM;
    for (size_t i = 0; i < files->n; i++) {
        struct stat st;
        if (stat(files->paths[i], &st) == 0) {
            (*ids)[i].dev = st.st_dev;
            (*ids)[i].ino = st.st_ino;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ options */

static int parse_double(const char *flag, const char *v, double *out, st_msg_t *msg)
{
    if (st_num_double(v, 0, 100, out) < 0)
        return st_msg_set(msg, ST_EUSAGE, "%s: '%s' is not a percentage from 0 to 100", flag, v);
    return 0;
}

/* Splits --flag=value; returns the value for a flag that takes one. */
static int take_value(int argc, char **argv, int *i, const char *eq, const char **value,
                      st_msg_t *msg)
{
    if (eq) {
        *value = eq + 1;
        return 0;
    }
    if (*i + 1 >= argc)
        return st_msg_set(msg, ST_EUSAGE, "%s needs a value", argv[*i]);
    *value = argv[++*i];
    return 0;
}

int st_cli_parse_opts(st_cli_opts_t *o, int argc, char **argv, int report, st_msg_t *msg)
{
    memset(o, 0, sizeof *o);
    st_output_opts_init(&o->ro);
    o->inputs = calloc((size_t)argc + 1, sizeof *o->inputs);
    if (!o->inputs)
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    int only_inputs = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (only_inputs || a[0] != '-' || strcmp(a, "-") == 0) {
            o->inputs[o->ninputs++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_inputs = 1;
            continue;
        }
        char flag[64];
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        snprintf(flag, sizeof flag, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        const char *v = NULL;
        int rc = 0;
        if (strcmp(flag, "-h") == 0 || strcmp(flag, "--help") == 0)
            return ST_EHELP;
        if (strcmp(flag, "--format") == 0 || strcmp(flag, "-f") == 0) {
            rc = take_value(argc, argv, &i, eq, &v, msg);
            o->formats = v;
        } else if (strcmp(flag, "--force") == 0 && !eq) {
            o->force = 1;
        } else if (strcmp(flag, "-o") == 0 || strcmp(flag, "--output") == 0) {
            rc = take_value(argc, argv, &i, eq, &v, msg);
            o->out = v;
        } else if (report && (strcmp(flag, "-n") == 0 || strcmp(flag, "--node-thres") == 0)) {
            rc = take_value(argc, argv, &i, eq, &v, msg);
            if (rc == 0)
                rc = parse_double(flag, v, &o->ro.dot.node_thres, msg);
        } else if (report && (strcmp(flag, "-e") == 0 || strcmp(flag, "--edge-thres") == 0)) {
            rc = take_value(argc, argv, &i, eq, &v, msg);
            if (rc == 0)
                rc = parse_double(flag, v, &o->ro.dot.edge_thres, msg);
        } else if (report && (strcmp(flag, "--colour-nodes-by-selftime") == 0 ||
                              strcmp(flag, "--color-nodes-by-selftime") == 0)) {
            o->ro.dot.colour_by_self = 1;
        } else if (strcmp(flag, "--precision") == 0) {
            rc = take_value(argc, argv, &i, eq, &v, msg);
            int64_t p = 6;
            if (rc == 0 && st_num_int(v, 0, 12, &p) < 0)
                rc = st_msg_set(msg, ST_EUSAGE, "--precision: '%s' is not a whole number from "
                                                "0 to 12", v);
            o->ro.precision = (int)p;
        } else {
            rc = st_msg_set(msg, ST_EUSAGE, "unknown option '%s' (see 'strata %s --help')", a,
                            report ? "report" : "merge");
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The folder a RESULT argument lives in (for default output names). */
void st_cli_result_dir(const char *arg, char *buf, size_t size)
{
    struct stat st;
    if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(buf, size, "%s", arg);
        return;
    }
    const char *slash = strrchr(arg, '/');
    if (!slash)
        snprintf(buf, size, ".");
    else
        snprintf(buf, size, "%.*s", slash == arg ? 1 : (int)(slash - arg), arg);
}
