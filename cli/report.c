/* `strata report`: renders a result in another format (see verbs.h). */
#include "verbs.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fsutil.h"
#include "model/profile.h"
#include "output/registry.h"
#include "processes.h"
#include "results.h"

static void report_usage(FILE *out)
{
    fputs("usage: strata report [--format F] [-o OUT] [--force] [-n PCT] [-e PCT]\n"
          "                     [--colour-nodes-by-selftime] [--precision N] RESULT\n"
          "\n"
          "Renders RESULT (a profile.json, or a results folder) in another format.\n"
          "\n"
          "  --format F   text (default), json, pstats, dot, png, svg, folded, speedscope,\n"
          "               callgrind, html; several (F,F) write each into -o's folder\n"
          "  -o OUT       the file to write ('-': standard output); default: standard\n"
          "               output for text, else the format's file in RESULT's folder\n"
          "  --force      replace files that exist (never RESULT's own files)\n"
          "  -n PCT       call graph: leave out functions under PCT % of the total (0.5)\n"
          "  -e PCT       call graph: leave out calls under PCT % of the total (0.1)\n"
          "  --colour-nodes-by-selftime   colour the call graph by self time\n"
          "  --precision N                decimals in the text tables (6)\n",
          out);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int st_report_main(int argc, char **argv)
{
    st_cli_opts_t o;
    st_msg_t msg;
    int rc = st_cli_parse_opts(&o, argc, argv, 1, &msg);
    if (rc == ST_EHELP) {
        free(o.inputs);
        report_usage(stdout);
        return 0;
    }
    if (rc == 0 && o.ninputs != 1)
        rc = st_msg_set(&msg, ST_EUSAGE, o.ninputs ? "report takes one RESULT (merge several "
                                                     "with 'strata merge')"
                                                   : "report needs a RESULT (a profile.json "
                                                     "or a results folder)");
    unsigned mask = 1u << ST_FMT_TEXT;
    if (rc == 0 && o.formats)
        rc = st_formats_parse(o.formats, &mask, &msg);
    if (rc < 0) {
        free(o.inputs);
        return st_cli_fail(msg.text);
    }
    const char *arg = o.inputs[0];
    st_cli_paths_t files = {0};
    st_profile_t p;
    st_fs_id_t *ids = NULL;
    rc = st_cli_resolve(arg, &files, &msg);
    if (rc == 0 && st_cli_input_ids(&files, &ids) < 0)
        rc = st_msg_set(&msg, ST_ENOMEM, "out of memory");
    if (rc == 0)
        rc = st_cli_load_all(&files, &p, 0, NULL, &msg);
    o.ro.inputs = ids;
    o.ro.ninputs = files.n;
    o.ro.keep_existing = !o.force;
    st_cli_paths_free(&files);
    if (rc < 0) {
        free(ids);
        free(o.inputs);
        return st_cli_fail(msg.text);
    }
    o.ro.title = st_output_title(&p.model, "strata profile");
    int several = (mask & (mask - 1)) != 0;
    int status = 0;
    /* the HTML report of a run that followed its children: the whole tree */
    st_cli_tree_t tree = {0};
    unsigned html = 1u << ST_FMT_HTML;
    if ((mask & html) && is_dir(arg) && st_cli_tree_load(arg, &tree, &msg) < 0) {
        st_profile_free(&p);
        free(ids);
        free(o.inputs);
        return st_cli_fail(msg.text);
    }
    const st_model_t *html_model = tree.loaded ? &tree.merged.model : &p.model;
    if (several || (!o.out && !(mask & (1u << ST_FMT_TEXT)))) {
        /* files into a folder: -o, else the result's own */
        char dir[PATH_MAX];
        if (o.out)
            snprintf(dir, sizeof dir, "%s", o.out);
        else
            st_cli_result_dir(arg, dir, sizeof dir);
        st_strbuf_t written, errors;
        st_strbuf_init(&written);
        st_strbuf_init(&errors);
        if (o.out && st_fs_make_dirs(dir) != 0)
            status = st_cli_failf(&msg, ST_EIO, "cannot create the folder '%s'", dir);
        else if ((mask & ~html) && st_formats_write_dir(&p.model, mask & ~html, dir, &o.ro,
                                                        &written, &errors, &msg) < 0)
            status = st_cli_failed_files(&written, &errors, &msg);
        else if ((mask & html) && st_formats_write_dir(html_model, html, dir, &o.ro, &written,
                                                       &errors, &msg) < 0)
            status = st_cli_failed_files(&written, &errors, &msg);
        else
            fprintf(stderr, "%s", st_strbuf_cstr(&written));
        st_strbuf_free(&written);
        st_strbuf_free(&errors);
    } else {
        int f = 0;
        while (!(mask & (1u << f)))
            f++;
        if (!o.out || strcmp(o.out, "-") == 0) {
            /* streamed to standard output */
            st_strbuf_t buf;
            st_strbuf_init(&buf);
            st_strbuf_stream(&buf, stdout);
            rc = st_format_render(&buf, f == ST_FMT_HTML ? html_model : &p.model,
                                  (st_format_t)f, &o.ro, &msg);
            if (rc == 0 && f == ST_FMT_TEXT && is_dir(arg)) /* its run's child processes */
                rc = st_cli_report_processes(arg, &buf, o.ro.precision, &msg);
            if (rc < 0 && !buf.sink_errno)
                status = st_cli_fail(msg.text);
            else if (st_strbuf_flush(&buf) < 0)
                status = st_cli_fail("cannot write to standard output");
            st_strbuf_free(&buf);
        } else {
            st_fs_out_t fo;
            if (st_format_check_target(o.out, &o.ro, &msg) < 0 ||
                st_fs_out_open(&fo, o.out, &msg) < 0) {
                status = st_cli_fail(msg.text);
            } else {
                rc = st_format_render(&fo.buf, f == ST_FMT_HTML ? html_model : &p.model,
                                      (st_format_t)f, &o.ro, &msg);
                if (rc == 0 && f == ST_FMT_TEXT && is_dir(arg))
                    rc = st_cli_report_processes(arg, &fo.buf, o.ro.precision, &msg);
                if (rc < 0 && !fo.buf.sink_errno) {
                    st_fs_out_abort(&fo);
                    status = st_cli_fail(msg.text);
                } else if (st_fs_out_commit(&fo, o.force ? ST_FS_REPLACE : ST_FS_KEEP, &msg) < 0) {
                    status = st_cli_fail(msg.text);
                }
            }
        }
    }
    st_cli_tree_free(&tree);
    st_profile_free(&p);
    free(ids);
    free(o.inputs);
    return status;
}
