/* golden_writers OUTDIR: renders the fixture model (fixture_model.h) in every
 * format into OUTDIR, through the calls the session and `strata report` make:
 *
 *   OUTDIR/trace-3.pftrace, trace-3.json the timeline writers (as the session of rank
 *                                        3 names them), first, so profile.json has
 *                                        their stats
 *   OUTDIR/process_sampling-3.txt        the sampling table (as the session names it)
 *   OUTDIR/gpu_kernels-3.txt, gpu_memcpy-3.txt  the GPU tables (likewise)
 *   OUTDIR/<every format of output/registry.h but the images>, under the names of a
 *                                        results folder of rank 3 (profile-3.json,
 *                                        wall_clock-3.txt, profile-3.prof, ...)
 *   OUTDIR/merged/                       `strata merge` of rank 3 with a rank 5 that
 *                                        took twice as long: text (the ranks summed,
 *                                        load_balance.txt) and json
 *
 * tests/test_writer_goldens.py compares these with tests/golden/writers/. Exits 0,
 * or 1 with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "model/merge.h"
#include "model/profile.h"
#include "output/gpu.h"
#include "output/chrome.h"
#include "output/perfetto.h"
#include "output/registry.h"
#include "output/sampling.h"

#include "fixture_model.h"

static int fail(const char *what)
{
    fprintf(stderr, "golden_writers: %s\n", what);
    return 1;
}

/* Opens dir/name for st_fs_out (0, or ST_EIO with msg). */
static int open_in(st_fs_out_t *fo, const char *dir, const char *name, st_msg_t *msg)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return st_msg_set(msg, ST_EIO, "path too long in '%s'", dir);
    return st_fs_out_open(fo, path, msg);
}

/* The timeline files, as the session of rank 3 writes them (session/trace_out.c). */
static int write_timeline(st_fixture_t *f, const char *dir, st_msg_t *msg)
{
    st_fs_out_t fo;
    st_perfetto_stats_t ps;
    int rc = open_in(&fo, dir, "trace-3.pftrace", msg);
    if (rc == 0) {
        rc = st_perfetto_write(fo.f, &f->timeline, &ps, msg);
        if (rc < 0)
            st_fs_out_abort(&fo);
        else
            rc = st_fs_out_commit(&fo, ST_FS_REPLACE, msg);
    }
    if (rc == 0)
        rc = open_in(&fo, dir, "trace-3.json", msg);
    if (rc == 0) {
        rc = st_chrome_write(fo.f, &f->timeline, msg);
        if (rc < 0)
            st_fs_out_abort(&fo);
        else
            rc = st_fs_out_commit(&fo, ST_FS_REPLACE, msg);
    }
    if (rc == 0)
        st_fixture_set_trace_stats(f, ps.slice_events, ps.bytes);
    return rc;
}

static int write_sampling(const st_fixture_t *f, const char *dir, st_msg_t *msg)
{
    st_fs_out_t fo;
    int rc = open_in(&fo, dir, "process_sampling-3.txt", msg);
    if (rc < 0)
        return rc;
    st_sampling_table_write(&fo.buf, &f->model);
    return st_fs_out_commit(&fo, ST_FS_REPLACE, msg);
}

/* The GPU tables (as the session names them). */
static int write_gpu(const st_fixture_t *f, const char *dir, st_msg_t *msg)
{
    static const char *const names[2] = {"gpu_kernels-3.txt", "gpu_memcpy-3.txt"};
    for (int k = 0; k < 2; k++) {
        st_fs_out_t fo;
        int rc = open_in(&fo, dir, names[k], msg);
        if (rc < 0)
            return rc;
        if (k == 0)
            st_gpu_kernels_write(&fo.buf, &f->model);
        else
            st_gpu_copies_write(&fo.buf, &f->model);
        if ((rc = st_fs_out_commit(&fo, ST_FS_REPLACE, msg)) < 0)
            return rc;
    }
    return 0;
}

/* Every format `strata report` makes but the images (Graphviz's and librsvg's output
 * differs from one version to the next; callgraph.dot and memplot.svg are their
 * input). */
static unsigned report_formats(void)
{
    unsigned mask = 0;
    for (int f = 0; f < ST_NFORMATS; f++)
        if (f != ST_FMT_PNG && f != ST_FMT_SVG && f != ST_FMT_MEMPLOT_PNG)
            mask |= 1u << f;
    return mask;
}

/* `strata merge` of rank 3 with rank 5, which took twice as long everywhere. */
static int write_merged(const st_fixture_t *rank3, const char *dir, st_msg_t *msg)
{
    st_fixture_t rank5;
    if (st_fixture_build(&rank5, 5, 2) < 0)
        return st_msg_set(msg, ST_ENOMEM, "cannot build the fixture of rank 5");
    const st_model_t *in[2] = {&rank3->model, &rank5.model};
    st_profile_t merged;
    int rc = st_merge(&merged, in, 2, 0, msg);
    if (rc == 0) {
        char sub[PATH_MAX];
        snprintf(sub, sizeof sub, "%s/merged", dir);
        st_output_opts_t o;
        st_output_opts_init(&o);
        o.title = st_output_title(&merged.model, "strata profile");
        if (st_fs_make_dirs(sub) != 0)
            rc = st_msg_set(msg, ST_EIO, "cannot create '%s'", sub);
        else
            rc = st_formats_write_dir(&merged.model, (1u << ST_FMT_TEXT) | (1u << ST_FMT_JSON),
                                      sub, &o, NULL, NULL, msg);
        st_profile_free(&merged);
    }
    st_fixture_free(&rank5);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return fail("usage: golden_writers OUTDIR");
    const char *dir = argv[1];
    if (st_fs_make_dirs(dir) != 0)
        return fail("cannot create the output folder");
    st_fixture_t f;
    if (st_fixture_build(&f, 3, 1) < 0)
        return fail("cannot build the fixture");
    st_msg_t msg = {0};
    int rc = write_timeline(&f, dir, &msg);
    if (rc == 0)
        rc = write_sampling(&f, dir, &msg);
    if (rc == 0)
        rc = write_gpu(&f, dir, &msg);
    if (rc == 0) {
        st_output_opts_t o;
        st_output_opts_init(&o);
        o.title = st_output_title(&f.model, "strata profile");
        rc = st_formats_write_dir(&f.model, report_formats(), dir, &o, NULL, NULL, &msg);
    }
    if (rc == 0)
        rc = write_merged(&f, dir, &msg);
    st_fixture_free(&f);
    return rc == 0 ? 0 : fail(msg.text);
}
