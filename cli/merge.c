/* `strata merge`: combines runs or MPI ranks into a results folder (see verbs.h). */
#include "verbs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "model/profile.h"
#include "output/ptmerge.h"
#include "output/registry.h"
#include "results.h"

static void merge_usage(FILE *out)
{
    fputs("usage: strata merge [--format F[,F...]] [--force] -o OUT RESULT...\n"
          "\n"
          "Combines runs (summed) and MPI ranks (kept apart, with a load-balance table)\n"
          "into the results folder OUT. RESULT is a profile.json, a profile-<rank>.json or\n"
          "a results folder. --format chooses what OUT holds (default text,json); files\n"
          "already in OUT are kept unless --force (an input is never written over).\n",
          out);
}

/* The ranks' traces as one, OUT/trace.pftrace (output/ptmerge.h). 0, or 2 after
 * its error line. */
static int merge_traces(char **traces, size_t n, const char *outdir, int keep)
{
    char path[PATH_MAX], shown[PATH_MAX];
    st_msg_t msg;
    if (snprintf(path, sizeof path, "%s/trace.pftrace", outdir) >= (int)sizeof path)
        return st_cli_fail("the output folder's name is too long");
    st_fs_out_t fo;
    if (st_fs_out_open(&fo, path, &msg) < 0)
        return st_cli_fail(msg.text);
    if (st_ptmerge_write(&fo.buf, (const char *const *)traces, n, &msg) < 0) {
        if (!fo.buf.sink_errno) {
            st_fs_out_abort(&fo);
            return st_cli_fail(msg.text);
        }
    }
    if (st_fs_out_commit(&fo, keep ? ST_FS_KEEP : ST_FS_REPLACE, &msg) < 0)
        return st_cli_fail(msg.text);
    fprintf(stderr, "[strata] merged %zu trace%s into %s\n", n, n == 1 ? "" : "s",
            st_text_printable(shown, sizeof shown, path));
    return 0;
}

int st_merge_main(int argc, char **argv)
{
    st_cli_opts_t o;
    st_msg_t msg;
    int rc = st_cli_parse_opts(&o, argc, argv, 0, &msg);
    if (rc == ST_EHELP) {
        free(o.inputs);
        merge_usage(stdout);
        return 0;
    }
    if (rc == 0 && o.ninputs == 0)
        rc = st_msg_set(&msg, ST_EUSAGE, "merge needs one RESULT or more");
    if (rc == 0 && !o.out)
        rc = st_msg_set(&msg, ST_EUSAGE, "merge needs -o OUT, the folder to write the merged "
                                         "result into");
    unsigned mask = (1u << ST_FMT_TEXT) | (1u << ST_FMT_JSON);
    if (rc == 0 && o.formats)
        rc = st_formats_parse(o.formats, &mask, &msg);
    if (rc < 0) {
        free(o.inputs);
        return st_cli_fail(msg.text);
    }
    st_cli_paths_t files = {0};
    for (int i = 0; i < o.ninputs && rc == 0; i++)
        rc = st_cli_resolve(o.inputs[i], &files, &msg);
    st_fs_id_t *ids = NULL;
    if (rc == 0 && st_cli_input_ids(&files, &ids) < 0)
        rc = st_msg_set(&msg, ST_ENOMEM, "out of memory");
    st_profile_t p;
    int together = 0;
    /* one input is merged too, so that it comes out as a merge would */
    if (rc == 0)
        rc = st_cli_load_all(&files, &p, 1, &together, &msg);
    size_t nfiles = files.n;
    /* the ranks' timelines: trace-<rank>.pftrace (trace.pftrace) beside each profile */
    char **traces = calloc(files.n + 1, sizeof *traces);
    size_t ntraces = 0;
    for (size_t i = 0; rc == 0 && traces && i < files.n; i++) {
        const char *path = files.paths[i], *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        size_t dir = (size_t)(base - path), blen = strlen(base);
        if (strncmp(base, "profile", 7) != 0 || blen < 12 ||
            strcmp(base + blen - 5, ".json") != 0)
            continue;
        char t[PATH_MAX];
        int k = snprintf(t, sizeof t, "%.*strace%.*s.pftrace", (int)dir, path, (int)(blen - 12),
                         base + 7);
        if (k > 0 && k < (int)sizeof t && access(t, R_OK) == 0 && (traces[ntraces] = strdup(t)))
            ntraces++;
    }
    st_cli_paths_free(&files);
    if (rc < 0) {
        free(ids);
        free(o.inputs);
        return st_cli_fail(msg.text);
    }
    o.ro.inputs = ids;
    o.ro.ninputs = nfiles;
    o.ro.keep_existing = !o.force;
    int status = 0;
    o.ro.title = st_output_title(&p.model, "strata profile");
    st_strbuf_t written, errors;
    st_strbuf_init(&written);
    st_strbuf_init(&errors);
    if (st_fs_make_dirs(o.out) != 0) {
        st_msg_set(&msg, ST_EIO, "cannot create the folder '%s': %s", o.out, strerror(errno));
        status = st_cli_fail(msg.text);
    } else if (st_formats_write_dir(&p.model, mask, o.out, &o.ro, &written, &errors, &msg) < 0) {
        status = st_cli_failed_files(&written, &errors, &msg);
    } else {
        fprintf(stderr, "[strata] merged %zu profile%s", nfiles, nfiles == 1 ? "" : "s");
        if (p.model.nranks)
            fprintf(stderr, " of %u MPI ranks", p.model.nranks);
        if (p.model.nruns > 1)
            fprintf(stderr, " (%u runs summed)", p.model.nruns);
        char shown[PATH_MAX];
        fprintf(stderr, " into %s\n", st_text_printable(shown, sizeof shown, o.out));
        /* one timeline of an MPI job's ranks, or of a run's processes */
        if ((p.model.nranks || together) && ntraces > 0)
            status = merge_traces(traces, ntraces, o.out, !o.force);
    }
    for (size_t i = 0; traces && i < ntraces; i++)
        free(traces[i]);
    free(traces);
    st_strbuf_free(&written);
    st_strbuf_free(&errors);
    st_profile_free(&p);
    free(ids);
    free(o.inputs);
    return status;
}
