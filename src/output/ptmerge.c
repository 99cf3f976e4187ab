#include "output/ptmerge.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/pb.h"

#define TRACE_PACKET 1     /* Trace.packet */
#define PKT_SEQ_ID 10      /* TracePacket.trusted_packet_sequence_id */
#define PKT_CLOCK_SNAPSHOT 6
#define PKT_TIMESTAMP_CLOCK 58
#define CLOCK_REALTIME 1
#define CLOCK_MONOTONIC 3
#define CLOCK_BOOTTIME 6
#define CLOCK_RANKS 128    /* the first global clock id a tool may define */
#define SAME_HOST_NS 1000000 /* boot times closer than this: one host */
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

/* How a file's clocks become the merged trace's. */
typedef struct {
    uint32_t seq_shift;    /* added to every sequence id */
    int known;             /* its first clock snapshot was read */
    int move;              /* on another host than the first file's */
    uint32_t mono;         /* then: the clock id its CLOCK_MONOTONIC becomes */
    int64_t boot_shift;    /* and what is added to its CLOCK_BOOTTIME readings */
} clocks_t;

/* A ClockSnapshot's REALTIME less BOOTTIME readings; 0 when it has not both. */
static int snapshot_offset(const unsigned char *p, const unsigned char *end, int64_t *off)
{
    uint64_t real = 0, boot = 0, key, v;
    int have = 0;
    while (p < end) {
        size_t k = get_varint(p, end, &key);
        if (!k)
            return 0;
        p += k;
        if ((key & 7) == 0) {
            size_t m = get_varint(p, end, &v);
            if (!m)
                return 0;
            p += m;
            continue;
        }
        if ((key & 7) != 2 || !(k = get_varint(p, end, &v)) || v > (uint64_t)(end - p - (ptrdiff_t)k))
            return 0;
        const unsigned char *c = p + k, *cend = c + v;
        p = cend;
        if ((key >> 3) != 1)
            continue;
        uint64_t id = 0, ts = 0;
        while (c < cend) { /* Clock{clock_id = 1, timestamp = 2, ...} */
            uint64_t ck, cv;
            size_t a = get_varint(c, cend, &ck), b;
            if (!a || (ck & 7) != 0 || !(b = get_varint(c + a, cend, &cv)))
                break;
            c += a + b;
            if ((ck >> 3) == 1)
                id = cv;
            else if ((ck >> 3) == 2)
                ts = cv;
        }
        if (id == CLOCK_REALTIME)
            real = ts, have |= 1;
        else if (id == CLOCK_BOOTTIME)
            boot = ts, have |= 2;
    }
    if (have != 3)
        return 0;
    *off = (int64_t)(real - boot);
    return 1;
}

/* A ClockSnapshot of a moved file: its MONOTONIC under the file's own clock id, its
 * BOOTTIME readings moved onto the first file's host; other clocks as they are. */
static int move_snapshot(st_strbuf_t *out, const unsigned char *p, const unsigned char *end,
                         const clocks_t *ck)
{
    st_strbuf_t clock;
    st_strbuf_init(&clock);
    int rc = 0;
    while (p < end && rc == 0) {
        uint64_t key, v;
        size_t k = get_varint(p, end, &key);
        const unsigned char *field = p;
        if (!k) {
            rc = -1;
            break;
        }
        p += k;
        if ((key & 7) == 0) {
            size_t m = get_varint(p, end, &v);
            if (!m) {
                rc = -1;
                break;
            }
            p += m;
            st_strbuf_add(out, (const char *)field, (size_t)(p - field));
            continue;
        }
        if ((key & 7) != 2 || !(k = get_varint(p, end, &v)) ||
            v > (uint64_t)(end - p - (ptrdiff_t)k)) {
            rc = -1;
            break;
        }
        const unsigned char *c = p + k, *cend = c + v;
        p = cend;
        if ((key >> 3) != 1) {
            st_strbuf_add(out, (const char *)field, (size_t)(p - field));
            continue;
        }
        /* one Clock: read its id first, then write it again field by field */
        uint64_t id = 0, ck_key, cv;
        for (const unsigned char *q = c; q < cend;) {
            size_t a = get_varint(q, cend, &ck_key), b = 0;
            if (!a || (ck_key & 7) != 0 || !(b = get_varint(q + a, cend, &cv)))
                break;
            if ((ck_key >> 3) == 1)
                id = cv;
            q += a + b;
        }
        st_strbuf_reset(&clock);
        while (c < cend) {
            size_t a = get_varint(c, cend, &ck_key), b;
            if (!a || (ck_key & 7) != 0 || !(b = get_varint(c + a, cend, &cv))) {
                rc = -1;
                break;
            }
            uint32_t f = (uint32_t)(ck_key >> 3);
            if (f == 1 && id == CLOCK_MONOTONIC)
                cv = ck->mono;
            else if (f == 2 && id == CLOCK_BOOTTIME)
                cv = (uint64_t)((int64_t)cv + ck->boot_shift);
            st_pb_uint(&clock, f, cv);
            c += a + b;
        }
        st_pb_msg(out, 1, &clock);
    }
    st_strbuf_free(&clock);
    return rc;
}

/* Rewrites one packet: its sequence id moved, and for a file of another host its
 * clocks (output/ptmerge.h); every other field as it is. 0, or -1 when the packet
 * is malformed. */
static int rewrite(st_strbuf_t *pkt, const unsigned char *p, size_t n, clocks_t *ck,
                   int64_t *first_offset, int first_file, st_strbuf_t *scratch)
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
                st_pb_uint(pkt, PKT_SEQ_ID, v + ck->seq_shift);
                continue;
            }
            if ((key >> 3) == PKT_TIMESTAMP_CLOCK && ck->move && v == CLOCK_MONOTONIC) {
                st_pb_uint(pkt, PKT_TIMESTAMP_CLOCK, ck->mono);
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
            if ((key >> 3) != PKT_CLOCK_SNAPSHOT)
                break;
            /* the file's first snapshot says which host it is of */
            int64_t off;
            if (!ck->known) {
                ck->known = 1;
                if (first_file) {
                    if (!snapshot_offset(p - v, p, first_offset))
                        *first_offset = INT64_MIN; /* not known: no file is moved */
                } else if (*first_offset != INT64_MIN && snapshot_offset(p - v, p, &off)) {
                    int64_t d = off - *first_offset;
                    ck->move = d > SAME_HOST_NS || d < -SAME_HOST_NS;
                    ck->boot_shift = d;
                }
            }
            if (!ck->move)
                break;
            st_strbuf_reset(scratch);
            if (move_snapshot(scratch, p - v, p, ck) < 0)
                return -1;
            st_pb_msg(pkt, PKT_CLOCK_SNAPSHOT, scratch);
            continue;
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
    st_strbuf_t pkt, scratch;
    st_strbuf_init(&pkt);
    st_strbuf_init(&scratch);
    int rc = 0;
    int64_t first_offset = 0; /* the first file's REALTIME less BOOTTIME */
    for (size_t i = 0; i < n && rc == 0; i++) {
        clocks_t ck = {.seq_shift = (uint32_t)i * SEQ_RANGE, .mono = CLOCK_RANKS + (uint32_t)i};
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
                rewrite(&pkt, buf, len, &ck, &first_offset, i == 0, &scratch) < 0) {
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
    st_strbuf_free(&scratch);
    return rc;
}
