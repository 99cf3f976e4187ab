#include "model/names.h"

#include <string.h>

void st_name_unique_in(const st_intern_t *labels, const st_loctab_t *locs, uint32_t label,
                       st_strbuf_t *out)
{
    st_strbuf_puts(out, st_intern_str(labels, label));
    if (!st_intern_shared(labels, label))
        return;
    uint32_t loc = st_loctab_of(locs, label);
    if (loc == ST_LOC_NONE)
        return;
    const st_loc_t *l = st_loctab_get(locs, loc);
    const char *file = st_loctab_str(locs, l->file);
    if (strcmp(file, "~") == 0)
        st_strbuf_printf(out, " [%s]", st_loctab_str(locs, l->name));
    else
        st_strbuf_printf(out, " [%s:%d]", file, (int)l->line);
}

void st_name_unique(const st_model_t *m, uint32_t label, st_strbuf_t *out)
{
    st_name_unique_in(m->labels, m->locs, label, out);
}
