#include "core/filter.h"

#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/settings.h"

static pcre2_code *compile(const char *pattern, const char *what, st_msg_t *msg)
{
    int code;
    PCRE2_SIZE offset;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF,
                                   &code, &offset, NULL);
    if (!re) {
        PCRE2_UCHAR text[256];
        pcre2_get_error_message(code, text, sizeof text);
        st_msg_set(msg, ST_EINVAL, "bad regex '%s' for %s: %s at position %zu", pattern, what,
                   (const char *)text, (size_t)offset);
    }
    return re;
}

int st_regex_check(const char *pattern, const char *what, st_msg_t *msg)
{
    pcre2_code *re = compile(pattern, what, msg);
    if (!re)
        return ST_EINVAL;
    pcre2_code_free(re);
    return 0;
}

static void list_free(st_regex_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        pcre2_code_free(l->codes[i]);
    free(l->codes);
    l->codes = NULL;
    l->n = 0;
}

static int list_compile(st_regex_list_t *l, const st_settings_t *s, st_setting_id_t id,
                        st_msg_t *msg)
{
    size_t n;
    char *const *pats = st_settings_list(s, id, &n);
    l->n = 0;
    l->codes = n ? calloc(n, sizeof *l->codes) : NULL;
    if (n && !l->codes)
        return st_msg_set(msg, ST_ENOMEM, "out of memory compiling filters");
    for (size_t i = 0; i < n; i++) {
        l->codes[i] = compile(pats[i], st_setting_def(id)->env, msg);
        if (!l->codes[i]) {
            list_free(l);
            return ST_EINVAL;
        }
        l->n++;
    }
    return 0;
}

static int list_search(const st_regex_list_t *l, const char *s)
{
    if (l->n == 0)
        return 0;
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md)
        return 0;
    int hit = 0;
    for (size_t i = 0; i < l->n && !hit; i++)
        hit = pcre2_match(l->codes[i], (PCRE2_SPTR)s, PCRE2_ZERO_TERMINATED, 0, 0, md, NULL) >= 0;
    pcre2_match_data_free(md);
    return hit;
}

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
        int rc = list_compile(lists[i].list, s, lists[i].id, msg);
        if (rc < 0) {
            st_filter_free(f);
            return rc;
        }
    }
    return 0;
}

void st_filter_free(st_filter_t *f)
{
    list_free(&f->func_include);
    list_free(&f->func_exclude);
    list_free(&f->func_restrict);
    list_free(&f->mod_include);
    list_free(&f->mod_exclude);
    list_free(&f->mod_restrict);
}

static int passes(const st_regex_list_t *incl, const st_regex_list_t *excl,
                  const st_regex_list_t *restr, const char *s)
{
    if (restr->n)
        return list_search(restr, s);
    return !list_search(excl, s) || list_search(incl, s);
}

int st_filter_keeps_module(const st_filter_t *f, const char *file)
{
    return passes(&f->mod_include, &f->mod_exclude, &f->mod_restrict, file);
}

int st_filter_keeps(const st_filter_t *f, const char *func, const char *file)
{
    return passes(&f->func_include, &f->func_exclude, &f->func_restrict, func) &&
           st_filter_keeps_module(f, file);
}
