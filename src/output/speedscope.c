#include "output/speedscope.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/names.h"
#include "model/walk.h"
#include "output/fgraph.h"
#include "output/folded.h"

static void put_event(st_strbuf_t *out, int *first, char type, uint32_t frame, double at)
{
    st_strbuf_printf(out, "%s{\"type\":\"%c\",\"frame\":%u,\"at\":%.0f}", *first ? "" : ",", type,
                     frame, at);
    *first = 0;
}

int st_speedscope_write(st_strbuf_t *out, const st_model_t *m, const char *name)
{
    int timer = st_model_timer(m);
    /* frames: one per label used, in order of first use */
    uint32_t nlabels = st_intern_count(m->labels);
    uint32_t *frame_of = malloc(((size_t)nlabels + 1) * sizeof *frame_of);
    uint32_t *labels = malloc(((size_t)nlabels + 1) * sizeof *labels);
    if (!frame_of || !labels) {
        free(frame_of);
        free(labels);
        return ST_ENOMEM;
    }
    memset(frame_of, 0xff, ((size_t)nlabels + 1) * sizeof *frame_of);
    uint32_t nframes = 0;
    for (size_t ti = 0; ti < m->nthreads; ti++) {
        const st_pathtab_t *t = m->threads[ti].paths;
        for (uint32_t i = 1; i < t->nnodes; i++) {
            uint32_t l = t->nodes[i].label;
            if (l < nlabels && frame_of[l] == UINT32_MAX) {
                frame_of[l] = nframes;
                labels[nframes++] = l;
            }
        }
    }
    st_strbuf_puts(out, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
                        "\"exporter\":\"strata " STRATA_VERSION "\",\"name\":");
    st_strbuf_json_string(out, name ? name : "strata profile");
    st_strbuf_puts(out, ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
    st_strbuf_t fname;
    st_strbuf_init(&fname);
    for (uint32_t f = 0; f < nframes; f++) {
        st_strbuf_puts(out, f ? ",{\"name\":" : "{\"name\":");
        st_strbuf_reset(&fname);
        st_name_unique(m, labels[f], &fname);
        if (fname.failed)
            out->failed = 1;
        st_strbuf_json_string(out, st_strbuf_cstr(&fname));
        uint32_t loc = st_loctab_of(m->locs, labels[f]);
        if (loc != ST_LOC_NONE) {
            const st_loc_t *l = st_loctab_get(m->locs, loc);
            const char *file = st_loctab_str(m->locs, l->file);
            if (strcmp(file, "~") != 0) {
                st_strbuf_puts(out, ",\"file\":");
                st_strbuf_json_string(out, file);
                st_strbuf_printf(out, ",\"line\":%d", (int)l->line);
            }
        }
        st_strbuf_putc(out, '}');
    }
    st_strbuf_free(&fname);
    /* then one frame per thread: the root of its profile */
    st_strbuf_t title;
    st_strbuf_init(&title);
    for (size_t ti = 0; ti < m->nthreads; ti++) {
        st_strbuf_reset(&title);
        st_thread_title(&title, &m->threads[ti]);
        st_strbuf_puts(out, nframes + ti ? ",{\"name\":" : "{\"name\":");
        st_strbuf_json_string(out, st_strbuf_cstr(&title));
        st_strbuf_putc(out, '}');
    }
    st_strbuf_puts(out, "]},\"profiles\":[");
    int rc = 0;
    for (size_t ti = 0; ti < m->nthreads && rc == 0; ti++) {
        const st_model_thread_t *th = &m->threads[ti];
        const st_pathtab_t *t = th->paths;
        double *incl, *self;
        if (st_tree_values(m, th, &incl, &self) < 0) {
            rc = ST_ENOMEM;
            break;
        }
        double *start = malloc((size_t)t->nnodes * sizeof *start);
        double *next = malloc((size_t)t->nnodes * sizeof *next);
        if (!start || !next) {
            free(start);
            free(next);
            free(incl);
            free(self);
            rc = ST_ENOMEM;
            break;
        }
        double end_all = 0;
        for (uint32_t c = t->nodes[0].first_child; c != ST_PATH_NONE; c = t->nodes[c].next_sibling)
            end_all += incl[c];
        st_strbuf_puts(out, ti ? ",{\"type\":\"evented\",\"name\":" : "{\"type\":\"evented\",\"name\":");
        st_strbuf_reset(&title);
        st_thread_title(&title, th);
        st_strbuf_json_string(out, st_strbuf_cstr(&title));
        /* the events stream out as they come; the extent follows them */
        st_strbuf_puts(out, ",\"events\":[");
        uint32_t root = nframes + (uint32_t)ti;
        int first = 1;
        double at = 0;
        put_event(out, &first, 'O', root, 0);
        st_walk_t w;
        st_walk_begin(&w, t, 0);
        while (st_walk_next(&w)) {
            uint32_t n = w.node;
            if (!w.leave) {
                start[n] = at;
                next[n] = at;
                put_event(out, &first, 'O', frame_of[t->nodes[n].label], at);
                continue;
            }
            /* close n: at its start plus its time, after its last child */
            double end = start[n] + incl[n];
            if (end < next[n])
                end = next[n];
            put_event(out, &first, 'C', frame_of[t->nodes[n].label], end);
            uint32_t p = t->nodes[n].parent;
            if (p != 0)
                next[p] = end;
            at = end;
        }
        if (at > end_all)
            end_all = at;
        put_event(out, &first, 'C', root, end_all);
        st_strbuf_printf(out, "],\"unit\":\"%s\",\"startValue\":0,\"endValue\":%.0f}",
                         timer >= 0 ? "nanoseconds" : "none", end_all);
        free(start);
        free(next);
        free(incl);
        free(self);
    }
    st_strbuf_puts(out, "]}\n");
    if (title.failed)
        out->failed = 1;
    st_strbuf_free(&title);
    free(frame_of);
    free(labels);
    return rc < 0 ? rc : out->failed ? ST_ENOMEM : 0;
}
