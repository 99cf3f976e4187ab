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

#include "input/profile.h"
#include "model/merge.h"
#include "base/u64map.h"
#include "output/grid.h"
#include "output/loadbal.h"
#include "session/session.h"

/* Each process's depth under the run's (a parent not in the record is the run):
 * by a pid -> index map, each walk up as long as the process's depth. */
static int *depths_of(const st_tree_proc_t *v, size_t n)
{
    int *d = calloc(n ? n : 1, sizeof *d);
    st_u64map_t index = {0};
    for (size_t i = 0; d && i < n; i++)
        if (v[i].folder && st_u64map_put(&index, (uint64_t)v[i].pid, (uint32_t)i, NULL) < 0) {
            free(d);
            d = NULL;
        }
    for (size_t i = 0; d && i < n; i++) {
        uint32_t j = st_u64map_get(&index, (uint64_t)v[i].parent);
        /* (a parent of its own: an interpreter that a process became by exec) */
        for (size_t hops = 0; j != UINT32_MAX && j != i && hops < n; hops++) {
            d[i]++;
            j = st_u64map_get(&index, (uint64_t)v[j].parent);
        }
    }
    st_u64map_free(&index);
    return d;
}

/* The profiles of the tree's processes that have results merged into *out, each
 * process's threads as the rank of its pid: the run's own (<dir>/profile.json)
 * first when with_top, then the children's. *merged: how many children. */
static int merge_tree(const char *dir, int with_top, const st_tree_proc_t *v, size_t n,
                      st_profile_t *out, size_t *merged, st_msg_t *msg)
{
    st_merger_t mg;
    if (st_merge_begin(&mg, out, 0) < 0)
        return st_msg_set(msg, ST_ENOMEM, "out of memory merging");
    int rc = 0;
    *merged = 0;
    for (size_t i = with_top ? 0 : 1; i <= n && rc == 0; i++) {
        char path[PATH_MAX];
        struct stat st;
        if (i == 0)
            snprintf(path, sizeof path, "%s/profile.json", dir);
        else if (v[i - 1].folder)
            snprintf(path, sizeof path, "%s/%s/profile.json", dir, v[i - 1].folder);
        else
            continue; /* not followed */
        if (stat(path, &st) != 0)
            continue; /* still running, or ended without writing: listed as such */
        st_profile_t one;
        if (st_profile_load(&one, path, msg) < 0) {
            rc = ST_EINVAL;
            break;
        }
        for (size_t t = 0; t < one.nthreads; t++) {
            one.threads[t].has_rank = 1;
            one.threads[t].rank = (uint32_t)(i ? v[i - 1].pid : one.model.pid);
        }
        if (st_merge_add(&mg, &one.model) < 0)
            rc = st_msg_set(msg, ST_ENOMEM, "out of memory merging");
        else
            *merged += i > 0;
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

int st_cli_tree_load(const char *dir, st_cli_tree_t *t, st_msg_t *msg)
{
    memset(t, 0, sizeof *t);
    if (st_tree_read(dir, &t->procs, &t->nprocs) < 0 || t->nprocs == 0) {
        st_cli_tree_free(t);
        return 0;
    }
    if (!(t->kids = calloc(t->nprocs, sizeof *t->kids))) {
        st_cli_tree_free(t);
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    }
    size_t merged;
    int rc = merge_tree(dir, 1, t->procs, t->nprocs, &t->merged, &merged, msg);
    if (rc < 0) {
        free(t->kids);
        st_tree_free(t->procs, t->nprocs);
        memset(t, 0, sizeof *t);
        return rc;
    }
    for (size_t i = 0; i < t->nprocs; i++) {
        const st_tree_proc_t *r = &t->procs[i];
        t->kids[i] = (st_model_child_t){r->pid, r->parent, r->folder, r->not_followed,
                                        (const char *const *)r->command, r->ncommand};
    }
    t->merged.model.children = t->kids;
    t->merged.model.nchildren = t->nprocs;
    t->merged.model.ranks_are_pids = 1;
    t->loaded = 1;
    return 1;
}

void st_cli_tree_free(st_cli_tree_t *t)
{
    if (t->loaded)
        st_profile_free(&t->merged);
    free(t->kids);
    st_tree_free(t->procs, t->nprocs);
    memset(t, 0, sizeof *t);
}

/* Where process i's results are: its folder, or why there are none. */
static void results_cell(const char *dir, const st_tree_proc_t *v, size_t n, size_t i,
                         st_strbuf_t *b)
{
    if (!v[i].folder) {
        st_strbuf_printf(b, "not followed: %s", v[i].not_followed);
        return;
    }
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/profile.json", dir, v[i].folder);
    int written = stat(path, &st) == 0, became = 0; /* a later line: it ran a program (exec) */
    for (size_t j = i + 1; j < n && !became; j++)
        became = v[j].pid == v[i].pid;
    st_strbuf_printf(b, "%s/%s", v[i].folder,
                     written  ? (became ? " (then it ran another program)" : "")
                     : became ? " (none: it ran another program)"
                              : " (no results yet)");
}

static const st_loadbal_unit_t by_process = {"processes", "PROCESSES", "CHILD PROCESSES", 1, 30};

/* The most processes the tree lists (processes.jsonl has them all). */
#define TREE_ROWS 200

int st_cli_report_processes(const char *dir, st_strbuf_t *out, int precision, st_msg_t *msg)
{
    st_tree_proc_t *v;
    size_t n;
    if (st_tree_read(dir, &v, &n) < 0 || n == 0) {
        st_tree_free(v, n);
        return 0; /* no children recorded: nothing to add */
    }
    int *depth = depths_of(v, n);
    if (!depth) {
        st_tree_free(v, n);
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    }
    st_grid_t grid;
    st_grid_init(&grid);
    st_grid_column(&grid, "PROCESS", 0);
    st_grid_column(&grid, "PARENT", 1);
    st_grid_column(&grid, "RESULTS", 0);
    st_grid_column(&grid, "COMMAND", 0);
    st_strbuf_t b, cmd;
    st_strbuf_init(&b);
    st_strbuf_init(&cmd);
    for (size_t i = 0; i < n && i < TREE_ROWS; i++) {
        st_grid_row(&grid);
        st_strbuf_printf(&b, "%*s%s", 2 * depth[i], "", depth[i] ? "|_" : "");
        st_strbuf_printf(&b, v[i].pid ? "%ld" : "-", v[i].pid);
        st_grid_cell(&grid, 0, &b);
        st_strbuf_printf(&b, "%ld", v[i].parent);
        st_grid_cell(&grid, 1, &b);
        results_cell(dir, v, n, i, &b);
        st_grid_cell(&grid, 2, &b);
        /* a long command (a fork server's) is cut: processes.jsonl has it whole */
        st_strbuf_reset(&cmd);
        for (size_t k = 0; k < v[i].ncommand; k++)
            st_strbuf_printf(&cmd, "%s%s", k ? " " : "", v[i].command[k] ? v[i].command[k] : "");
        const char *c = st_strbuf_cstr(&cmd);
        st_strbuf_printf(&b, "%.*s%s", cmd.len > 100 ? 97 : (int)cmd.len, c,
                         cmd.len > 100 ? "..." : "");
        st_grid_cell(&grid, 3, &b);
    }
    st_strbuf_free(&b);
    st_strbuf_free(&cmd);
    st_strbuf_putc(out, '\n');
    st_grid_render(out, &grid, "CHILD PROCESSES (processes.jsonl)");
    st_grid_free(&grid);
    free(depth);
    if (n > TREE_ROWS)
        st_strbuf_printf(out, "... and %zu more processes (processes.jsonl lists them all)\n",
                         n - TREE_ROWS);

    st_profile_t merged;
    size_t nmerged = 0;
    int rc = merge_tree(dir, 0, v, n, &merged, &nmerged, msg);
    st_tree_free(v, n);
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
