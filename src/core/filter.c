#include "core/filter.h"

#include <string.h>

#include "core/settings.h"

int st_filter_init(st_filter_t *f, const st_settings_t *s, st_msg_t *msg)
{
    memset(f, 0, sizeof *f);
    const struct {
        st_regex_list_t *list;
        st_setting_id_t id;
    } lists[] = {
        {&f->func_include, ST_S_FUNCTION_INCLUDE}, {&f->func_exclude, ST_S_FUNCTION_EXCLUDE},
        {&f->func_restrict, ST_S_FUNCTION_RESTRICT}, {&f->mod_include, ST_S_MODULE_INCLUDE},
        {&f->mod_exclude, ST_S_MODULE_EXCLUDE}, {&f->mod_restrict, ST_S_MODULE_RESTRICT},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        size_t n;
        char *const *pats = st_settings_list(s, lists[i].id, &n);
        int rc = st_regex_list_compile(lists[i].list, pats, n, st_setting_def(lists[i].id)->env,
                                       msg);
        if (rc < 0) {
            st_filter_free(f);
            return rc;
        }
    }
    return 0;
}

void st_filter_free(st_filter_t *f)
{
    st_regex_list_free(&f->func_include);
    st_regex_list_free(&f->func_exclude);
    st_regex_list_free(&f->func_restrict);
    st_regex_list_free(&f->mod_include);
    st_regex_list_free(&f->mod_exclude);
    st_regex_list_free(&f->mod_restrict);
}

static int passes(const st_regex_list_t *incl, const st_regex_list_t *excl,
                  const st_regex_list_t *restr, const char *s)
{
    if (restr->n)
        return st_regex_list_search(restr, s);
    return !st_regex_list_search(excl, s) || st_regex_list_search(incl, s);
}

int st_filter_keeps_module(const st_filter_t *f, const char *file)
{
    return passes(&f->mod_include, &f->mod_exclude, &f->mod_restrict, file);
}

int st_filter_keeps_function(const st_filter_t *f, const char *func)
{
    return passes(&f->func_include, &f->func_exclude, &f->func_restrict, func);
}

int st_filter_keeps(const st_filter_t *f, const char *func, const char *file)
{
    return st_filter_keeps_function(f, func) && st_filter_keeps_module(f, file);
}
