/* libFuzzer target: the profile.json reader, then every writer on what it read
 * (so that whatever the reader accepts, the writers can render). Built by
 * `make fuzz` (clang -fsanitize=fuzzer,address,undefined); the seed corpus is
 * tests/fuzz/corpus/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/merge.h"
#include "input/profile.h"
#include "output/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    st_profile_t p;
    st_msg_t msg;
    if (st_profile_parse(&p, buf, size, "fuzz", &msg) == 0) {
        st_output_opts_t o;
        st_output_opts_init(&o);
        static const st_format_t fmts[] = {ST_FMT_TEXT, ST_FMT_JSON, ST_FMT_PSTATS,
                                           ST_FMT_DOT, ST_FMT_FOLDED, ST_FMT_SPEEDSCOPE,
                                           ST_FMT_CALLGRIND, ST_FMT_HTML};
        for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
            st_strbuf_t out;
            st_strbuf_init(&out);
            st_format_render(&out, &p.model, fmts[i], &o, &msg);
            st_strbuf_free(&out);
        }
        const st_model_t *two[2] = {&p.model, &p.model};
        st_profile_t m;
        if (st_merge(&m, two, 2, 0, &msg) == 0)
            st_profile_free(&m);
        st_profile_free(&p);
    }
    free(buf);
    return 0;
}
