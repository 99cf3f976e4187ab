#include "model/walk.h"

void st_walk_begin(st_walk_t *w, const st_pathtab_t *t, uint32_t top)
{
    w->t = t;
    w->top = top;
    w->node = top;
    w->leave = 0;
    w->started = 0;
    w->skip = 0;
}

int st_walk_next(st_walk_t *w)
{
    const st_path_t *nodes = w->t->nodes;
    if (!w->started) {
        w->started = 1;
        w->node = nodes[w->top].first_child;
        w->leave = 0;
        return w->node != ST_PATH_NONE;
    }
    if (w->node == ST_PATH_NONE)
        return 0;
    if (!w->leave) {
        uint32_t c = nodes[w->node].first_child;
        if (c == ST_PATH_NONE || w->skip)
            w->leave = 1;
        else
            w->node = c;
        w->skip = 0;
        return 1;
    }
    uint32_t s = nodes[w->node].next_sibling;
    if (s != ST_PATH_NONE) {
        w->node = s;
        w->leave = 0;
        return 1;
    }
    uint32_t p = nodes[w->node].parent;
    if (p == w->top || p == ST_PATH_NONE) {
        w->node = ST_PATH_NONE;
        return 0;
    }
    w->node = p;
    return 1;
}

int st_walk_pre(st_walk_t *w)
{
    while (st_walk_next(w))
        if (!w->leave)
            return 1;
    return 0;
}
