#include "base/regex.h"

#include <stdlib.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

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
        return NULL;
    }
    /* machine code where PCRE2 can make it (several times faster on every code
     * object a profile judges); where it cannot (no JIT in this build, or no
     * executable memory allowed), pcre2_match interprets the pattern as before */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
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

void st_regex_list_free(st_regex_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        pcre2_code_free(l->codes[i]);
    free(l->codes);
    l->codes = NULL;
    l->n = 0;
}

int st_regex_list_compile(st_regex_list_t *l, char *const *patterns, size_t n, const char *what,
                          st_msg_t *msg)
{
    l->n = 0;
    l->codes = n ? calloc(n, sizeof *l->codes) : NULL;
    if (n && !l->codes)
        return st_msg_set(msg, ST_ENOMEM, "out of memory compiling filters");
    for (size_t i = 0; i < n; i++) {
        l->codes[i] = compile(patterns[i], what, msg);
        if (!l->codes[i]) {
            st_regex_list_free(l);
            return ST_EINVAL;
        }
        l->n++;
    }
    return 0;
}

int st_regex_list_search(const st_regex_list_t *l, const char *s)
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
