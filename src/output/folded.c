#include "output/folded.h"

#include <math.h>
#include <stdlib.h>

#include "core/err.h"
#include "core/names.h"
#include "output/fgraph.h"

static void put_frame(st_strbuf_t *out, const char *s)
{
    for (; *s; s++) {
        char c = *s;
        st_strbuf_putc(out, c == ';' ? ':' : (unsigned char)c < 0x20 ? ' ' : c);
    }
}

int st_folded_write(st_strbuf_t *out, const st_model_t *m)
{
    int rc = 0;
    st_strbuf_t path, name;
    st_strbuf_init(&path);
    st_strbuf_init(&name);
    for (size_t ti = 0; ti < m->nthreads && rc == 0; ti++) {
        const st_calltree_t *t = m->threads[ti].tree;
        double *incl, *self;
        if (st_tree_values(m, t, &incl, &self) < 0)
            return ST_ENOMEM;
        /* prefix length of each node's path in `path`, to cut back on the way up */
        size_t *mark = malloc((size_t)t->nnodes * sizeof *mark);
        if (!mark) {
            free(incl);
            free(self);
            rc = ST_ENOMEM;
            break;
        }
        st_strbuf_reset(&path);
        uint32_t n = t->nodes[0].first_child;
        while (n != ST_NODE_NONE) {
            const st_node_t *nd = &t->nodes[n];
            mark[n] = path.len;
            if (nd->depth > 0)
                st_strbuf_putc(&path, ';');
            st_strbuf_reset(&name);
            st_name_unique(m, nd->label, &name);
            put_frame(&path, st_strbuf_cstr(&name));
            double v = floor(self[n] + 0.5);
            if (v > 0) {
                st_strbuf_add(out, path.data, path.len);
                st_strbuf_printf(out, " %.0f\n", v);
            }
            if (nd->first_child != ST_NODE_NONE) {
                n = nd->first_child;
                continue;
            }
            for (;;) {
                path.len = mark[n];
                if (t->nodes[n].next_sibling != ST_NODE_NONE) {
                    n = t->nodes[n].next_sibling;
                    break;
                }
                n = t->nodes[n].parent;
                if (n == 0) {
                    n = ST_NODE_NONE;
                    break;
                }
            }
        }
        free(mark);
        free(incl);
        free(self);
    }
    if (path.failed || name.failed)
        out->failed = 1;
    st_strbuf_free(&path);
    st_strbuf_free(&name);
    return rc < 0 ? rc : out->failed ? ST_ENOMEM : 0;
}
