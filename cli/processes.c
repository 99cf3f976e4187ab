/* `strata report` on a results folder whose run followed child processes
 * (processes.jsonl, written by the profiled processes: python/_strata.c): the
 * process tree, and each function's time over the children, one row a function with
 * its spread over the processes (the MPI ranks' load-balance table, across
 * processes: a pool's `work` as one row). */
#include "processes.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "input/jsonpull.h"
#include "input/profile.h"
#include "model/merge.h"
#include "output/grid.h"
#include "output/loadbal.h"

/* One line of processes.jsonl. */
typedef struct {
    long pid, parent;
    char *folder;
    char *command;   /* the words joined by spaces */
    int depth;       /* under the run's process: 0 for its own children */
} proc_t;

typedef struct {
    proc_t *v;
    size_t n, cap;
} procs_t;

static void procs_free(procs_t *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].folder);
        free(p->v[i].command);
    }
    free(p->v);
}

/* Parses one line into *out: 0, or -1 when it is not a record strata writes. */
static int parse_line(const char *line, size_t len, proc_t *out)
{
    st_jp_t jp;
    st_jp_init(&jp, line, len);
    st_strbuf_t key, val, cmd;
    st_strbuf_init(&key);
    st_strbuf_init(&val);
    st_strbuf_init(&cmd);
    memset(out, 0, sizeof *out);
    int64_t v;
    int rc = st_jp_obj_begin(&jp), more;
    while (rc == 0 && (more = st_jp_obj_next(&jp, &key)) == 1) {
        const char *k = st_strbuf_cstr(&key);
        if (strcmp(k, "pid") == 0 || strcmp(k, "parent") == 0) {
            rc = st_jp_int(&jp, 0, INT64_MAX, &v);
            *(strcmp(k, "pid") == 0 ? &out->pid : &out->parent) = (long)v;
        } else if (strcmp(k, "folder") == 0) {
            rc = st_jp_string(&jp, &val);
            if (rc == 0 && !(out->folder = strdup(st_strbuf_cstr(&val))))
                rc = -1;
        } else if (strcmp(k, "command") == 0) {
            rc = st_jp_arr_begin(&jp);
            while (rc == 0 && (more = st_jp_arr_next(&jp)) == 1) {
                rc = st_jp_string(&jp, &val);
                st_strbuf_printf(&cmd, "%s%s", cmd.len ? " " : "", st_strbuf_cstr(&val));
            }
            if (more < 0)
                rc = -1;
        } else {
            rc = st_jp_skip(&jp);
        }
    }
    if (rc == 0 && more < 0)
        rc = -1;
    if (rc == 0 && (!out->pid || !out->folder || strchr(out->folder, '/') || cmd.failed))
        rc = -1;
    if (rc == 0 && !(out->command = strdup(st_strbuf_cstr(&cmd))))
        rc = -1;
    if (rc < 0) {
        free(out->folder);
        out->folder = NULL;
    }
    st_strbuf_free(&key);
    st_strbuf_free(&val);
    st_strbuf_free(&cmd);
    return rc;
}

/* The folder's processes.jsonl (lines that are not strata's are skipped). */
static int read_procs(const char *dir, procs_t *p)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/processes.jsonl", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
        proc_t one;
        if (parse_line(line, (size_t)len, &one) < 0)
            continue;
        if (p->n == p->cap) {
            size_t ncap = p->cap ? p->cap * 2 : 16;
            proc_t *nv = realloc(p->v, ncap * sizeof *nv);
            if (!nv) {
                free(one.folder);
                free(one.command);
                rc = -1;
                break;
            }
            p->v = nv;
            p->cap = ncap;
        }
        p->v[p->n++] = one;
    }
    free(line);
    fclose(f);
    return rc;
}

/* Depth of each process under the run's (a parent not in the record is the run). */
static void set_depths(procs_t *p)
{
    for (size_t i = 0; i < p->n; i++) {
        int d = 0;
        long parent = p->v[i].parent;
        for (size_t hops = 0; hops < p->n; hops++) {
            size_t j = 0;
            while (j < p->n && p->v[j].pid != parent)
                j++;
            if (j == p->n)
                break;
            d++;
            parent = p->v[j].parent;
        }
        p->v[i].depth = d;
    }
}

/* The children's profiles merged, each process's threads as the rank of its pid. */
static int merge_children(const char *dir, const procs_t *p, st_profile_t *out, size_t *merged,
                          st_msg_t *msg)
{
    st_merger_t mg;
    if (st_merge_begin(&mg, out, 0) < 0)
        return st_msg_set(msg, ST_ENOMEM, "out of memory merging");
    int rc = 0;
    *merged = 0;
    for (size_t i = 0; i < p->n && rc == 0; i++) {
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s/profile.json", dir, p->v[i].folder);
        if (stat(path, &st) != 0)
            continue; /* still running, or ended without writing: listed as such */
        st_profile_t one;
        if (st_profile_load(&one, path, msg) < 0) {
            rc = ST_EINVAL;
            break;
        }
        for (size_t t = 0; t < one.nthreads; t++) {
            one.threads[t].has_rank = 1;
            one.threads[t].rank = (uint32_t)p->v[i].pid;
        }
        if (st_merge_add(&mg, &one.model) < 0)
            rc = st_msg_set(msg, ST_ENOMEM, "out of memory merging");
        else
            (*merged)++;
        st_profile_free(&one);
    }
    if (rc == 0 && st_merge_end(&mg) < 0)
        rc = st_msg_set(msg, ST_ENOMEM, "out of memory merging");
    if (rc < 0) {
        free(mg.contrib);
        st_profile_free(out);
    }
    return rc;
}

static const st_loadbal_unit_t by_process = {"processes", "PROCESSES", "CHILD PROCESSES", 1, 30};

int st_cli_report_processes(const char *dir, st_strbuf_t *out, int precision, st_msg_t *msg)
{
    procs_t p = {0};
    if (read_procs(dir, &p) < 0 || p.n == 0) {
        procs_free(&p);
        return 0; /* no children recorded: nothing to add */
    }
    set_depths(&p);
    st_grid_t grid;
    st_grid_init(&grid);
    st_grid_column(&grid, "PROCESS", 0);
    st_grid_column(&grid, "PARENT", 1);
    st_grid_column(&grid, "RESULTS", 0);
    st_grid_column(&grid, "COMMAND", 0);
    st_strbuf_t b;
    st_strbuf_init(&b);
    for (size_t i = 0; i < p.n; i++) {
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s/profile.json", dir, p.v[i].folder);
        int written = stat(path, &st) == 0;
        st_grid_row(&grid);
        st_strbuf_printf(&b, "%*s%s%ld", 2 * p.v[i].depth, "", p.v[i].depth ? "|_" : "",
                         p.v[i].pid);
        st_grid_cell(&grid, 0, &b);
        st_strbuf_printf(&b, "%ld", p.v[i].parent);
        st_grid_cell(&grid, 1, &b);
        st_strbuf_printf(&b, "%s/%s", p.v[i].folder, written ? "" : " (no results yet)");
        st_grid_cell(&grid, 2, &b);
        /* a long command (a fork server's) is cut: processes.jsonl has it whole */
        size_t n = strlen(p.v[i].command);
        st_strbuf_printf(&b, "%.*s%s", n > 100 ? 97 : (int)n, p.v[i].command,
                         n > 100 ? "..." : "");
        st_grid_cell(&grid, 3, &b);
    }
    st_strbuf_free(&b);
    st_strbuf_putc(out, '\n');
    st_grid_render(out, &grid, "CHILD PROCESSES (processes.jsonl)");
    st_grid_free(&grid);

    st_profile_t merged;
    size_t nmerged = 0;
    int rc = merge_children(dir, &p, &merged, &nmerged, msg);
    procs_free(&p);
    if (rc < 0)
        return rc;
    if (nmerged) {
        st_strbuf_putc(out, '\n');
        rc = st_loadbal_write_as(out, &merged.model, precision, &by_process);
        st_strbuf_printf(out, "(over the %zu child processes with results; strata merge %s/"
                              "process-* writes their sum)\n",
                         nmerged, dir);
    }
    st_profile_free(&merged);
    return rc < 0 ? st_msg_set(msg, rc, "out of memory") : 0;
}
