/* Protocol Buffers wire encoding, just what the Perfetto writer needs: varints,
 * fixed 64-bit doubles and length-delimited fields, appended to an st_strbuf_t.
 * A nested message is built in its own buffer and appended with st_pb_msg(). */
#ifndef STRATA_OUTPUT_PB_H
#define STRATA_OUTPUT_PB_H

#include <stdint.h>
#include <string.h>

#include "base/strbuf.h"

static inline void st_pb_varint(st_strbuf_t *b, uint64_t v)
{
    char tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (char)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (char)v;
    st_strbuf_add(b, tmp, n);
}

static inline void st_pb_uint(st_strbuf_t *b, uint32_t field, uint64_t v)
{
    st_pb_varint(b, (uint64_t)field << 3);
    st_pb_varint(b, v);
}

static inline void st_pb_int(st_strbuf_t *b, uint32_t field, int64_t v)
{
    st_pb_uint(b, field, (uint64_t)v); /* int32/int64: two's complement varint */
}

static inline void st_pb_double(st_strbuf_t *b, uint32_t field, double v)
{
    st_pb_varint(b, ((uint64_t)field << 3) | 1);
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (char)(bits >> (8 * i));
    st_strbuf_add(b, le, 8);
}

static inline void st_pb_bytes(st_strbuf_t *b, uint32_t field, const void *data, size_t n)
{
    st_pb_varint(b, ((uint64_t)field << 3) | 2);
    st_pb_varint(b, n);
    st_strbuf_add(b, (const char *)data, n);
}

static inline void st_pb_str(st_strbuf_t *b, uint32_t field, const char *s)
{
    st_pb_bytes(b, field, s, strlen(s));
}

/* Appends `inner` as field `field` of b. */
static inline void st_pb_msg(st_strbuf_t *b, uint32_t field, const st_strbuf_t *inner)
{
    if (inner->failed)
        b->failed = 1;
    st_pb_bytes(b, field, inner->data ? inner->data : "", inner->len);
}

#endif
