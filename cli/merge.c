/* `strata merge`: combines runs or MPI ranks into a results folder (see verbs.h). */
#include "verbs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "model/profile.h"
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
    /* one input is merged too, so that it comes out as a merge would */
    if (rc == 0)
        rc = st_cli_load_all(&files, &p, 1, &msg);
    size_t nfiles = files.n;
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
    }
    st_strbuf_free(&written);
    st_strbuf_free(&errors);
    st_profile_free(&p);
    free(ids);
    free(o.inputs);
    return status;
}
