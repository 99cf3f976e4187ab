#include "play.h"

#include <stdlib.h>

#include "base/err.h"

int st_play_metrics(st_metrics_t *m)
{
    const st_component_info_t *wall = st_component_info(ST_COMP_WALL_CLOCK);
    const st_component_info_t *cpu = st_component_info(ST_COMP_CPU_CLOCK);
    uint32_t id;
    int rc = st_metrics_add(m, wall->name, "ticks", wall->description, ST_METRIC_TIMER, &id);
    return rc < 0 ? rc : st_metrics_add(m, cpu->name, "ns", cpu->description, ST_METRIC_TIMER, &id);
}

void st_play_init(st_play_t *p, st_pathtab_t *t, int ntimers)
{
    p->t = t;
    p->ntimers = ntimers;
    p->stack = NULL;
    p->depth = p->cap = 0;
}

void st_play_free(st_play_t *p)
{
    free(p->stack);
    p->stack = NULL;
    p->depth = p->cap = 0;
}

int st_play_enter(st_play_t *p, uint32_t label, const uint64_t *now)
{
    if (p->depth == p->cap) {
        uint32_t cap = p->cap ? p->cap * 2 : 64;
        st_play_frame_t *s = realloc(p->stack, cap * sizeof *s);
        if (!s)
            return ST_ENOMEM;
        p->stack = s;
        p->cap = cap;
    }
    uint32_t parent = p->depth ? p->stack[p->depth - 1].node : 0;
    st_play_frame_t *f = &p->stack[p->depth++];
    f->node = st_pathtab_child(p->t, parent, label);
    for (int i = 0; i < ST_NTIMERS; i++) {
        f->t0[i] = now[i];
        f->child[i] = 0;
    }
    return p->t->failed ? ST_ENOMEM : 0;
}

int st_play_exit(st_play_t *p, const uint64_t *now)
{
    if (p->depth == 0)
        return ST_EINVAL;
    st_play_frame_t *f = &p->stack[--p->depth];
    st_play_frame_t *up = p->depth ? f - 1 : NULL;
    if (f->node == ST_PATH_NONE)
        return 0;
    for (int i = 0; i < p->ntimers; i++) {
        uint64_t el = now[i] > f->t0[i] ? now[i] - f->t0[i] : 0;
        if (el > ST_MAX_TICKS)
            el = ST_MAX_TICKS;
        st_tstat_add(&st_mcols_timer(&p->t->cols, (uint32_t)i)[f->node], el, f->child[i]);
        if (up)
            up->child[i] += el;
    }
    return 0;
}
