#include "output/folded.h"

#include <math.h>
#include <stdlib.h>

#include "base/err.h"
#include "model/names.h"
#include "model/walk.h"
#include "output/fgraph.h"

static void put_frame(st_strbuf_t *out, const char *s)
{
    for (; *s; s++) {
        char c = *s;
        st_strbuf_putc(out, c == ';' ? ':' : (unsigned char)c < 0x20 || c == 0x7F ? ' ' : c);
    }
}

void st_thread_title(st_strbuf_t *out, const st_model_thread_t *th)
{
    if (th->has_rank)
        st_strbuf_printf(out, "rank %u ", th->rank);
    st_strbuf_printf(out, "thread %u", th->index);
    if (th->name && *th->name)
        st_strbuf_printf(out, " (%s)", th->name);
}

static void put_line(st_strbuf_t *out, const st_strbuf_t *path, double v)
{
    v = floor(v + 0.5);
    if (v <= 0)
        return;
    st_strbuf_add(out, path->data, path->len);
    st_strbuf_printf(out, " %.0f\n", v);
}

int st_folded_write(st_strbuf_t *out, const st_model_t *m)
{
    int rc = 0;
    st_strbuf_t path, title, name;
    st_strbuf_init(&path);
    st_strbuf_init(&title);
    st_strbuf_init(&name);
    for (size_t ti = 0; ti < m->nthreads && rc == 0; ti++) {
        const st_pathtab_t *t = m->threads[ti].paths;
        double *incl, *self;
        if (st_tree_values(m, &m->threads[ti], &incl, &self) < 0)
            return ST_ENOMEM;
        /* prefix length of each node's path in `path`, to cut back on the way up */
        size_t *mark = malloc((size_t)t->nnodes * sizeof *mark);
        if (!mark) {
            free(incl);
            free(self);
            rc = ST_ENOMEM;
            break;
        }
        /* the bottom frame names the thread (and rank) */
        st_strbuf_reset(&path);
        st_strbuf_reset(&title);
        st_thread_title(&title, &m->threads[ti]);
        put_frame(&path, st_strbuf_cstr(&title));
        st_walk_t w;
        st_walk_begin(&w, t, 0);
        while (st_walk_next(&w)) {
            uint32_t n = w.node;
            const st_path_t *nd = &t->nodes[n];
            if (w.leave) {
                path.len = mark[n];
                continue;
            }
            mark[n] = path.len;
            st_strbuf_putc(&path, ';');
            st_strbuf_reset(&name);
            st_name_unique(m, nd->label, &name);
            put_frame(&path, st_strbuf_cstr(&name));
            put_line(out, &path, self[n]);
            if (nd->first_child != ST_PATH_NONE && nd->depth + 1 >= ST_FOLDED_MAX_DEPTH) {
                /* deeper calls: summed into one line, so that the output stays
                 * linear in the nodes however deep the recursion */
                size_t at = path.len;
                st_strbuf_puts(&path, ";[deeper calls]");
                put_line(out, &path, incl[n] - self[n]);
                path.len = at;
                st_walk_skip(&w);
            }
        }
        free(mark);
        free(incl);
        free(self);
    }
    if (path.failed || title.failed || name.failed)
        out->failed = 1;
    st_strbuf_free(&path);
    st_strbuf_free(&title);
    st_strbuf_free(&name);
    return rc < 0 ? rc : out->failed ? ST_ENOMEM : 0;
}
