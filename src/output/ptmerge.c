#include "output/ptmerge.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/pb.h"

#define TRACE_PACKET 1     /* Trace.packet */
#define PKT_SEQ_ID 10      /* TracePacket.trusted_packet_sequence_id */
#define SEQ_RANGE 65536u
#define MAX_PACKET (64u << 20)

/* A varint from f; -1 at a clean end of file (first byte), -2 when malformed. */
static int read_varint(FILE *f, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        int c = getc(f);
        if (c == EOF)
            return shift == 0 ? -1 : -2;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return 0;
    }
    return -2;
}

/* A varint from p (at most end); its length, 0 when malformed. */
static size_t get_varint(const unsigned char *p, const unsigned char *end, uint64_t *v)
{
    *v = 0;
    for (size_t i = 0; i < 10 && p + i < end; i++) {
        *v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80))
            return i + 1;
    }
    return 0;
}

/* Rewrites one packet: its sequence id moved by `shift`, every other field as it
 * is. 0, or -1 when the packet is malformed. */
static int rewrite(st_strbuf_t *pkt, const unsigned char *p, size_t n, uint32_t shift)
{
    const unsigned char *end = p + n;
    while (p < end) {
        uint64_t key, v;
        size_t k = get_varint(p, end, &key);
        if (!k)
            return -1;
        const unsigned char *field = p;
        p += k;
        switch (key & 7) {
        case 0: {
            size_t m = get_varint(p, end, &v);
            if (!m)
                return -1;
            p += m;
            if ((key >> 3) == PKT_SEQ_ID) {
                st_pb_uint(pkt, PKT_SEQ_ID, v + shift);
                continue;
            }
            break;
        }
        case 1:
            if (end - p < 8)
                return -1;
            p += 8;
            break;
        case 2: {
            size_t m = get_varint(p, end, &v);
            if (!m || v > (uint64_t)(end - p - (ptrdiff_t)m))
                return -1;
            p += m + v;
            break;
        }
        case 5:
            if (end - p < 4)
                return -1;
            p += 4;
            break;
        default:
            return -1;
        }
        st_strbuf_add(pkt, (const char *)field, (size_t)(p - field));
    }
    return 0;
}

int st_ptmerge_write(st_strbuf_t *out, const char *const *paths, size_t n, st_msg_t *msg)
{
    if (n > ST_PTMERGE_MAX)
        return st_msg_set(msg, ST_EINVAL, "at most %d traces merge into one", ST_PTMERGE_MAX);
    unsigned char *buf = NULL;
    size_t cap = 0;
    st_strbuf_t pkt;
    st_strbuf_init(&pkt);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f) {
            rc = st_msg_set(msg, ST_EIO, "cannot read '%s': %s", paths[i], strerror(errno));
            break;
        }
        for (;;) {
            uint64_t key, len;
            int r = read_varint(f, &key);
            if (r == -1)
                break; /* the end of the file */
            if (r < 0 || key != ((TRACE_PACKET << 3) | 2) || read_varint(f, &len) < 0 ||
                len > MAX_PACKET) {
                rc = st_msg_set(msg, ST_EIO, "'%s' is not a whole Perfetto trace", paths[i]);
                break;
            }
            if (len > cap) {
                unsigned char *more = realloc(buf, len);
                if (!more) {
                    rc = st_msg_set(msg, ST_ENOMEM, "out of memory");
                    break;
                }
                buf = more;
                cap = len;
            }
            st_strbuf_reset(&pkt);
            if (fread(buf, 1, len, f) != len ||
                rewrite(&pkt, buf, len, (uint32_t)i * SEQ_RANGE) < 0) {
                rc = st_msg_set(msg, ST_EIO, "'%s' is not a whole Perfetto trace", paths[i]);
                break;
            }
            st_pb_msg(out, TRACE_PACKET, &pkt);
            if (out->failed) {
                rc = ST_EIO;
                break;
            }
        }
        fclose(f);
    }
    free(buf);
    st_strbuf_free(&pkt);
    return rc;
}
