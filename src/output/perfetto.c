/* trace.pftrace: Perfetto's protobuf trace format, written directly.
 *
 * Layout. Sequence 1 carries a clock snapshot (CLOCK_MONOTONIC and BOOTTIME read
 * together), the metadata (trace_attributes) and every track descriptor: one
 * process track, one thread track per thread (pid, tid, name), one counter track
 * per sampled metric. Each thread's events then go on a sequence of their own
 * (2, 3, ...): its first packet clears the incremental state, sets the defaults
 * (timestamps on clock 64, events on the thread's track) and defines clock 64 as
 * incremental nanoseconds, so each later packet carries only the delta since the
 * previous one; names are interned in the first packet that uses them
 * (interned_data.event_names, iid = label + 1) and every packet that relies on
 * that state says so (SEQ_NEEDS_INCREMENTAL_STATE). The counters go on the last
 * sequence the same way. A begin costs about 15 bytes, an end about 12.
 *
 * Stack samples go on their thread's sequence too, in time order with its slices:
 * one StackSample packet each (task_context: pid and tid; callstack_iid; its
 * weight, the periods it stands for in nanoseconds of the sampling clock, the
 * primary counter that the sequence's StackSampleDefaults names "cpu-time" or
 * "wall-time"). Callstacks are interned on the sequence: a function name and a
 * frame per label (iid = label + 1; rel_pc the label, in one mapping named
 * "strata"), a callstack per distinct call path (its node in a trie of the
 * thread's sampled paths, bottom frame first). The Chrome JSON format has no
 * samples.
 *
 * GPU streams (CUPTI's kernels and copies) have a track each under the process,
 * named "GPU <device> stream <id>"; their slices go on one sequence of their own
 * after the counters', begins and ends in time order, each begin naming its slice
 * (TrackEvent.name) and ending the flow (terminating_flow_ids) that the launching
 * thread's flow event started: an instant on the thread's track, named after the
 * API call, with flow_ids.
 *
 * Field numbers are those of perfetto_trace.proto (protos/perfetto/trace). */
#include "output/perfetto.h"

#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "model/names.h"
#include "output/pb.h"

/* TracePacket */
#define PKT_CLOCK_SNAPSHOT 6
#define PKT_TIMESTAMP 8
#define PKT_SEQ_ID 10
#define PKT_TRACK_EVENT 11
#define PKT_INTERNED 12
#define PKT_SEQ_FLAGS 13
#define PKT_DEFAULTS 59
#define PKT_TIMESTAMP_CLOCK 58
#define PKT_TRACK_DESCRIPTOR 60
#define PKT_FIRST_ON_SEQ 87
#define PKT_ATTRIBUTES 126
#define SEQ_CLEARED 1
#define SEQ_NEEDS 2
/* TrackEvent */
#define TE_TYPE 9
#define TE_NAME_IID 10
#define TE_TRACK_UUID 11
#define TE_DOUBLE_COUNTER 44
#define TE_FLOW_IDS 47
#define TE_TERMINATING_FLOW_IDS 48
#define TE_BEGIN 1
#define TE_END 2
#define TE_INSTANT 3
#define TE_COUNTER 4
/* StackSample (TracePacket field 135) and what it interns */
#define PKT_STACK_SAMPLE 135
#define DEFAULTS_STACK_SAMPLE 100
#define ID_FUNCTION_NAMES 5
#define ID_FRAMES 6
#define ID_CALLSTACKS 7
#define ID_MAPPING_PATHS 17
#define ID_MAPPINGS 19
#define UNIT_NANOSECONDS 1
/* clocks */
#define CLOCK_REALTIME_ID 1
#define CLOCK_MONOTONIC_ID 3
#define CLOCK_BOOTTIME_ID 6
#define CLOCK_SEQ_INCREMENTAL 64

typedef struct {
    FILE *f;
    st_strbuf_t out;   /* pending bytes of the file */
    st_strbuf_t pkt;   /* the packet being built */
    st_strbuf_t a, b, c; /* nested messages */
    st_strbuf_t text;    /* a slice's name */
    uint64_t written;
    int error;
} writer_t;

/* A varint into p (at most 10 bytes); returns its length. */
static size_t put_varint(char *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (char)v;
    return n;
}

static void flush_out(writer_t *w, int force)
{
    if (w->out.len < (1u << 20) && !force)
        return;
    if (w->out.failed)
        w->error = 1;
    if (w->out.len && fwrite(w->out.data, 1, w->out.len, w->f) != w->out.len)
        w->error = 1;
    w->written += w->out.len;
    st_strbuf_reset(&w->out);
}

/* Appends the packet built in w->pkt to the trace (Trace.packet = 1). */
static void emit(writer_t *w)
{
    st_pb_msg(&w->out, 1, &w->pkt);
    st_strbuf_reset(&w->pkt);
    flush_out(w, 0);
}

static uint64_t process_uuid(const st_timeline_t *m) { return 0x5354520000000000ull | (uint64_t)m->pid << 8; }
static uint64_t thread_uuid(const st_timeline_t *m, size_t i) { return process_uuid(m) + 0x10000 + i; }
static uint64_t counter_uuid(const st_timeline_t *m, size_t k) { return process_uuid(m) + 0x20000 + k; }
static uint64_t gpu_uuid(const st_timeline_t *m, size_t k) { return process_uuid(m) + 0x30000 + k; }

/* A fixed64 field (flow ids). */
static void pb_fixed64(st_strbuf_t *b, uint32_t field, uint64_t v)
{
    st_pb_varint(b, ((uint64_t)field << 3) | 1);
    char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (char)(v >> (8 * i));
    st_strbuf_add(b, le, 8);
}

static void write_clock_snapshot(writer_t *w, const st_timeline_t *m)
{
    st_strbuf_t *snap = &w->a, *clock = &w->b;
    st_strbuf_reset(snap);
    st_strbuf_reset(clock);
    st_pb_uint(clock, 1, CLOCK_MONOTONIC_ID);
    st_pb_uint(clock, 2, m->base_mono_ns);
    st_pb_msg(snap, 1, clock);
    st_strbuf_reset(clock);
    st_pb_uint(clock, 1, CLOCK_BOOTTIME_ID);
    st_pb_uint(clock, 2, m->base_boot_ns);
    st_pb_msg(snap, 1, clock);
    if (m->base_real_ns) {
        st_strbuf_reset(clock);
        st_pb_uint(clock, 1, CLOCK_REALTIME_ID);
        st_pb_uint(clock, 2, m->base_real_ns);
        st_pb_msg(snap, 1, clock);
    }
    st_pb_uint(snap, 2, CLOCK_BOOTTIME_ID); /* primary_trace_clock */
    st_pb_uint(&w->pkt, PKT_SEQ_ID, 1);
    st_pb_msg(&w->pkt, PKT_CLOCK_SNAPSHOT, snap);
    emit(w);
}

static void write_attributes(writer_t *w, const st_timeline_t *m)
{
    if (!m->nattrs)
        return;
    st_strbuf_t *attrs = &w->a, *attr = &w->b;
    st_strbuf_reset(attrs);
    for (size_t i = 0; i < m->nattrs; i++) {
        st_strbuf_reset(attr);
        st_pb_str(attr, 1, m->attr_keys[i]);
        st_pb_str(attr, 3, m->attr_values[i]);
        st_pb_msg(attrs, 1, attr);
    }
    st_pb_uint(&w->pkt, PKT_SEQ_ID, 1);
    st_pb_msg(&w->pkt, PKT_ATTRIBUTES, attrs);
    emit(w);
}

/* A track descriptor packet on sequence 1, stamped with CLOCK_MONOTONIC. */
static void emit_descriptor(writer_t *w, const st_timeline_t *m, const st_strbuf_t *desc)
{
    st_pb_uint(&w->pkt, PKT_TIMESTAMP, m->base_mono_ns);
    st_pb_uint(&w->pkt, PKT_TIMESTAMP_CLOCK, CLOCK_MONOTONIC_ID);
    st_pb_uint(&w->pkt, PKT_SEQ_ID, 1);
    st_pb_msg(&w->pkt, PKT_TRACK_DESCRIPTOR, desc);
    emit(w);
}

static void write_descriptors(writer_t *w, const st_timeline_t *m)
{
    st_strbuf_t *desc = &w->a, *inner = &w->b;
    st_strbuf_reset(desc);
    st_strbuf_reset(inner);
    st_pb_int(inner, 1, m->pid);
    st_pb_str(inner, 6, m->process_name ? m->process_name : "python");
    st_pb_uint(desc, 1, process_uuid(m));
    st_pb_msg(desc, 3, inner);
    emit_descriptor(w, m, desc);

    for (size_t i = 0; i < m->nthreads; i++) {
        const st_timeline_thread_t *th = &m->threads[i];
        st_strbuf_reset(desc);
        st_strbuf_reset(inner);
        st_pb_int(inner, 1, m->pid);
        st_pb_int(inner, 2, (int64_t)th->tid);
        st_pb_str(inner, 5, th->name && *th->name ? th->name : "thread");
        st_pb_uint(desc, 1, thread_uuid(m, i));
        st_pb_uint(desc, 5, process_uuid(m));
        st_pb_msg(desc, 4, inner);
        emit_descriptor(w, m, desc);
    }
    for (size_t k = 0; k < m->ncounters; k++) {
        const st_timeline_counter_t *c = &m->counters[k];
        st_strbuf_reset(desc);
        st_strbuf_reset(inner);
        if (strcmp(c->units, "bytes") == 0)
            st_pb_uint(inner, 3, 3); /* UNIT_SIZE_BYTES */
        else if (strcmp(c->units, "count") == 0)
            st_pb_uint(inner, 3, 2); /* UNIT_COUNT */
        else
            st_pb_str(inner, 6, c->units); /* unit_name */
        st_pb_uint(desc, 1, counter_uuid(m, k));
        st_pb_uint(desc, 5, process_uuid(m));
        st_pb_str(desc, 2, c->name);
        st_pb_msg(desc, 8, inner);
        emit_descriptor(w, m, desc);
    }
    for (size_t k = 0; k < m->ngpu_tracks; k++) {
        st_strbuf_reset(desc);
        st_pb_uint(desc, 1, gpu_uuid(m, k));
        st_pb_uint(desc, 5, process_uuid(m));
        st_pb_str(desc, 2, m->gpu_tracks[k]);
        emit_descriptor(w, m, desc);
    }
}

/* The first packet of a sequence: clears the state, sets the defaults and makes
 * clock 64 count nanoseconds from `t0` incrementally. */
static void start_sequence(writer_t *w, uint32_t seq, uint64_t track, uint64_t t0,
                           const char *sample_clock)
{
    st_strbuf_t *x = &w->a, *y = &w->b, *z = &w->c;
    st_pb_uint(&w->pkt, PKT_SEQ_ID, seq);
    st_pb_uint(&w->pkt, PKT_SEQ_FLAGS, SEQ_CLEARED);
    st_pb_uint(&w->pkt, PKT_FIRST_ON_SEQ, 1);
    st_strbuf_reset(x);
    st_strbuf_reset(y);
    st_pb_uint(x, PKT_TIMESTAMP_CLOCK, CLOCK_SEQ_INCREMENTAL);
    if (track) {
        st_pb_uint(y, 11, track); /* TrackEventDefaults.track_uuid */
        st_pb_msg(x, 11, y);      /* TracePacketDefaults.track_event_defaults */
    }
    if (sample_clock) {
        /* StackSampleDefaults{source, primary_descriptor{name, unit}} */
        st_strbuf_reset(y);
        st_strbuf_reset(z);
        st_pb_str(z, 2, strcmp(sample_clock, "wall") == 0 ? "wall-time" : "cpu-time");
        st_pb_uint(z, 3, UNIT_NANOSECONDS);
        st_pb_str(y, 1, "strata");
        st_pb_msg(y, 2, z);
        st_pb_msg(x, DEFAULTS_STACK_SAMPLE, y);
    }
    st_pb_msg(&w->pkt, PKT_DEFAULTS, x);
    st_strbuf_reset(x);
    st_strbuf_reset(y);
    st_strbuf_reset(z);
    st_pb_uint(y, 1, CLOCK_MONOTONIC_ID);
    st_pb_uint(y, 2, t0);
    st_pb_msg(x, 1, y);
    st_pb_uint(z, 1, CLOCK_SEQ_INCREMENTAL);
    st_pb_uint(z, 2, t0);
    st_pb_uint(z, 3, 1); /* is_incremental */
    st_pb_msg(x, 1, z);
    st_pb_msg(&w->pkt, PKT_CLOCK_SNAPSHOT, x);
    emit(w);
}

/* A thread's sampled call paths as a trie (node 0: the root), and what its
 * sequence has interned. */
typedef struct {
    st_ev_reader_t r;        /* the signal lane */
    const st_ev_t *next;     /* its next sample, NULL at the end */
    st_u64map_t children;    /* parent << 32 | label -> node */
    uint32_t *parent, *label;
    uint8_t *emitted;        /* the node's callstack is interned */
    uint32_t n, cap;
    uint32_t *path;          /* scratch: one path, root first */
    uint8_t *named;          /* per label: its function name and frame interned */
    uint32_t nlabels;
    int mapped;              /* the one mapping every frame names is interned */
    int error;
} samples_t;

/* The next stack sample of the lane (other signal-lane events skipped). */
static void next_sample(samples_t *sm, const st_timeline_t *m)
{
    while ((sm->next = st_ev_next(&sm->r)) != NULL)
        if (sm->next->kind == ST_EV_SAMPLE && sm->next->a == m->sample_metric)
            return;
}

/* Room for one more node; 0 or -1 (out of memory). */
static int sample_grow(samples_t *sm)
{
    if (sm->n < sm->cap)
        return 0;
    uint32_t cap = sm->cap ? sm->cap * 2 : 256;
    uint32_t *p = realloc(sm->parent, cap * sizeof *p);
    if (p)
        sm->parent = p;
    uint32_t *l = realloc(sm->label, cap * sizeof *l);
    if (l)
        sm->label = l;
    uint8_t *e = realloc(sm->emitted, cap);
    if (e)
        sm->emitted = e;
    uint32_t *path = realloc(sm->path, cap * sizeof *path);
    if (path)
        sm->path = path;
    if (!p || !l || !e || !path)
        return -1;
    sm->cap = cap;
    return 0;
}

/* The child of `node` for `label`, made if new; 0 when out of memory. */
static uint32_t sample_child(samples_t *sm, uint32_t node, uint32_t label)
{
    uint64_t key = (uint64_t)node << 32 | label;
    uint32_t got = st_u64map_get(&sm->children, key);
    if (got != UINT32_MAX)
        return got;
    if (sample_grow(sm) < 0)
        return 0;
    uint32_t id = sm->n++;
    if (st_u64map_put(&sm->children, key, id, NULL) < 0)
        return 0;
    sm->parent[id] = node;
    sm->label[id] = label;
    sm->emitted[id] = 0;
    return id;
}

/* One StackSample packet (with what it needs interned first), or nothing for a
 * sample with no frame that has a label. Returns 1 when a packet was written. */
static int write_sample(writer_t *w, const st_timeline_t *m, samples_t *sm, long pid,
                        uint64_t tid, uint32_t seq, uint64_t *prev)
{
    const st_ev_t *e = sm->next;
    const st_ev_pair_t *p = (const st_ev_pair_t *)(e + 1);
    const uint32_t *frames = (const uint32_t *)(p + 1);
    st_strbuf_t *interned = &w->b, *one = &w->c, *text = &w->text;
    st_strbuf_reset(interned);
    if (!sm->mapped) {
        /* one mapping, "strata", for every frame (an importer may want one; the
         * frames are functions, not addresses: rel_pc is the label) */
        sm->mapped = 1;
        st_strbuf_reset(one);
        st_pb_uint(one, 1, 1);
        st_pb_str(one, 2, "strata");
        st_pb_msg(interned, ID_MAPPING_PATHS, one);
        st_strbuf_reset(one);
        st_pb_uint(one, 1, 1);
        st_pb_uint(one, 7, 1); /* path_string_ids */
        st_pb_msg(interned, ID_MAPPINGS, one);
    }
    uint32_t node = 0;
    for (uint64_t k = p->u1; k > 0 && !sm->error; k--) {
        uint32_t f = frames[k - 1];
        if (f >= m->sample_nids)
            continue;
        for (uint32_t j = m->sample_first[f]; j < m->sample_first[f + 1]; j++) {
            uint32_t label = m->sample_chain[j];
            if (label >= sm->nlabels)
                continue;
            if (!sm->named[label]) {
                sm->named[label] = 1;
                st_strbuf_reset(one);
                st_strbuf_reset(text);
                st_name_unique_in(m->labels, m->locs, label, text);
                st_pb_uint(one, 1, (uint64_t)label + 1);
                st_pb_str(one, 2, st_strbuf_cstr(text));
                st_pb_msg(interned, ID_FUNCTION_NAMES, one);
                st_strbuf_reset(one);
                st_pb_uint(one, 1, (uint64_t)label + 1);
                st_pb_uint(one, 2, (uint64_t)label + 1); /* function_name_id */
                st_pb_uint(one, 3, 1);                   /* mapping_id */
                st_pb_uint(one, 4, label);               /* rel_pc */
                st_pb_msg(interned, ID_FRAMES, one);
            }
            uint32_t child = sample_child(sm, node, label);
            if (!child)
                sm->error = 1;
            node = child;
        }
    }
    if (!node || sm->error)
        return 0;
    if (!sm->emitted[node]) {
        sm->emitted[node] = 1;
        uint32_t depth = 0;
        for (uint32_t at = node; at; at = sm->parent[at])
            sm->path[depth++] = sm->label[at];
        st_strbuf_reset(one);
        st_pb_uint(one, 1, node);
        while (depth > 0) /* bottom frame first */
            st_pb_uint(one, 2, (uint64_t)sm->path[--depth] + 1);
        st_pb_msg(interned, ID_CALLSTACKS, one);
    }
    uint64_t ns = st_timeline_ns(m, e->ticks);
    if (ns < *prev)
        ns = *prev;
    st_pb_uint(&w->pkt, PKT_TIMESTAMP, ns - *prev);
    *prev = ns;
    st_pb_uint(&w->pkt, PKT_SEQ_ID, seq);
    st_pb_uint(&w->pkt, PKT_SEQ_FLAGS, SEQ_NEEDS);
    if (interned->len)
        st_pb_msg(&w->pkt, PKT_INTERNED, interned);
    st_strbuf_t *ss = &w->a, *ctx = one;
    st_strbuf_reset(ss);
    st_strbuf_reset(ctx);
    st_pb_uint(ctx, 2, (uint64_t)pid);
    st_pb_uint(ctx, 3, tid);
    st_pb_msg(ss, 1, ctx);  /* task_context */
    st_pb_uint(ss, 6, node); /* callstack_iid */
    st_pb_uint(ss, 11, p->u0 * m->sample_period_ns); /* primary_weight */
    st_pb_msg(&w->pkt, PKT_STACK_SAMPLE, ss);
    emit(w);
    return 1;
}

static void samples_free(samples_t *sm)
{
    st_u64map_free(&sm->children);
    free(sm->parent);
    free(sm->label);
    free(sm->emitted);
    free(sm->path);
    free(sm->named);
}

/* An event packet encoded in place, the common case of a sequence's events, straight
 * into the output: Trace.packet{TracePacket{timestamp (the delta), sequence id,
 * flags (needs incremental state), track_event{type, ...}}}. inplace_begin writes up
 * to the track event's type, or returns 0 when memory failed (out.failed then says
 * so: the event is left out); the caller appends the event's other fields at e->p
 * (INPLACE_EXTRA bytes at most); inplace_emit sets both lengths (the packet is
 * under 128 bytes: one byte each) and adds the packet to the output. */
#define INPLACE_EXTRA 64

/* What follows a packet's timestamp on a sequence, always the same: the sequence
 * id, the flags, the track event's tag (b holds 16 bytes, n of them used). */
typedef struct {
    char b[16];
    size_t n;
} seqfix_t;

static void seqfix_init(seqfix_t *f, uint32_t seq)
{
    char *p = f->b;
    memset(f->b, 0, sizeof f->b);
    *p++ = (char)(PKT_SEQ_ID << 3);
    p += put_varint(p, seq); /* 5 bytes at most */
    *p++ = (char)(PKT_SEQ_FLAGS << 3);
    *p++ = SEQ_NEEDS;
    *p++ = (char)((PKT_TRACK_EVENT << 3) | 2);
    f->n = (size_t)(p - f->b);
}

typedef struct {
    char *start, *p, *len;
} inplace_t;

static inline int inplace_begin(writer_t *w, inplace_t *e, uint64_t dt, const seqfix_t *f,
                                int type)
{
    /* 2 (packet tag and length) + 11 (timestamp) + 16 + 1 (length) + 2 (type) */
    char *p = st_strbuf_room(&w->out, 32 + INPLACE_EXTRA);
    if (!p)
        return 0;
    e->start = p;
    p += 2;
    *p++ = (char)(PKT_TIMESTAMP << 3);
    p += put_varint(p, dt);
    memcpy(p, f->b, sizeof f->b);
    p += f->n;
    e->len = p++;
    *p++ = (char)(TE_TYPE << 3);
    *p++ = (char)type;
    e->p = p;
    return 1;
}

static inline void inplace_emit(writer_t *w, inplace_t *e)
{
    *e->len = (char)(e->p - e->len - 1);
    e->start[0] = 0x0A; /* Trace.packet */
    e->start[1] = (char)(e->p - e->start - 2);
    st_strbuf_commit(&w->out, (size_t)(e->p - e->start));
    flush_out(w, 0);
}

/* Interns label's name in the packet being built (InternedData.event_names, iid
 * label + 1), the first time a sequence uses it: `interned` marks those done. */
static void intern_name(writer_t *w, const st_timeline_t *m, uint32_t label, uint8_t *interned)
{
    if (interned[label])
        return;
    interned[label] = 1;
    st_strbuf_t *names = &w->b, *name = &w->c, *text = &w->text;
    st_strbuf_reset(names);
    st_strbuf_reset(name);
    st_pb_uint(name, 1, (uint64_t)label + 1);
    st_strbuf_reset(text);
    st_name_unique_in(m->labels, m->locs, label, text);
    st_pb_str(name, 2, st_strbuf_cstr(text));
    st_pb_msg(names, 2, name);
    st_pb_msg(&w->pkt, PKT_INTERNED, names);
}

static int write_thread(writer_t *w, const st_timeline_t *m, size_t i, uint64_t *events,
                        uint64_t *nsamples)
{
    const st_timeline_thread_t *th = &m->threads[i];
    uint32_t seq = 2 + (uint32_t)i;
    uint8_t *interned = calloc(st_intern_count(m->labels) ? st_intern_count(m->labels) : 1, 1);
    if (!interned)
        return -1;
    uint64_t prev = m->base_mono_ns;
    start_sequence(w, seq, thread_uuid(m, i), prev, m->sample_first ? m->sample_clock : NULL);
    samples_t sm;
    memset(&sm, 0, sizeof sm);
    if (m->sample_first) {
        sm.nlabels = st_intern_count(m->labels);
        sm.named = calloc(sm.nlabels ? sm.nlabels : 1, 1);
        if (!sm.named || sample_grow(&sm) < 0) {
            samples_free(&sm);
            free(interned);
            return -1;
        }
        sm.n = 1; /* node 0: the root */
        sm.parent[0] = sm.label[0] = 0;
        st_ev_reader_init(&sm.r, th->events, 1);
        next_sample(&sm, m);
    }
    st_ev_reader_t r;
    st_ev_reader_init(&r, th->events, 0);
    const st_ev_t *e;
    st_strbuf_t *te = &w->a;
    seqfix_t fix; /* each event packet's fixed bytes */
    seqfix_init(&fix, seq);
    while ((e = st_ev_next(&r)) != NULL) {
        if (e->kind != ST_EV_BEGIN && e->kind != ST_EV_END && e->kind != ST_EV_INSTANT &&
            e->kind != ST_EV_FLOW)
            continue; /* the slices are the timeline's calls; instants its marks; flows
                       * the launches of GPU work */
        int flow = e->kind == ST_EV_FLOW;
        if (flow && e->a >= st_intern_count(m->labels))
            continue; /* an unnamed flow point: no event to hang it on */
        int named = e->kind != ST_EV_END;
        int type = e->kind == ST_EV_BEGIN ? TE_BEGIN : e->kind == ST_EV_END ? TE_END : TE_INSTANT;
        for (; sm.next && sm.next->ticks <= e->ticks && !sm.error; next_sample(&sm, m))
            *nsamples += (uint64_t)write_sample(w, m, &sm, m->pid, th->tid, seq, &prev);
        uint64_t ns = st_timeline_ns(m, e->ticks);
        if (ns < prev)
            ns = prev; /* clock calibration never runs time backwards */
        if (!flow && (!named || e->a >= st_intern_count(m->labels) || interned[e->a])) {
            /* The common case, encoded in place: track_event{type[, name_iid]} */
            inplace_t ev;
            if (!inplace_begin(w, &ev, ns - prev, &fix, type))
                continue; /* out of memory: out.failed says so */
            if (named) {
                *ev.p++ = (char)(TE_NAME_IID << 3);
                ev.p += put_varint(ev.p, (uint64_t)e->a + 1);
            }
            inplace_emit(w, &ev);
            prev = ns;
            (*events)++;
            continue;
        }
        st_strbuf_reset(te);
        st_pb_uint(&w->pkt, PKT_TIMESTAMP, ns - prev);
        prev = ns;
        st_pb_uint(&w->pkt, PKT_SEQ_ID, seq);
        st_pb_uint(&w->pkt, PKT_SEQ_FLAGS, SEQ_NEEDS);
        if (named) {
            st_pb_uint(te, TE_TYPE, (uint64_t)type);
            st_pb_uint(te, TE_NAME_IID, (uint64_t)e->a + 1);
            if (e->a < st_intern_count(m->labels))
                intern_name(w, m, e->a, interned);
        } else {
            st_pb_uint(te, TE_TYPE, TE_END);
        }
        if (flow)
            pb_fixed64(te, TE_FLOW_IDS, ((const st_ev_pair_t *)(e + 1))->u0);
        st_pb_msg(&w->pkt, PKT_TRACK_EVENT, te);
        emit(w);
        (*events)++;
    }
    for (; sm.next && !sm.error; next_sample(&sm, m))
        *nsamples += (uint64_t)write_sample(w, m, &sm, m->pid, th->tid, seq, &prev);
    int failed = r.error || sm.r.error || sm.error;
    samples_free(&sm);
    free(interned);
    return failed ? -1 : 0;
}

static void write_counters(writer_t *w, const st_timeline_t *m, uint64_t *events)
{
    if (!m->ncounters)
        return;
    uint32_t seq = 2 + (uint32_t)m->nthreads;
    uint64_t prev = m->base_mono_ns;
    start_sequence(w, seq, 0, prev, NULL);
    /* Samples of all counters in time order (each counter's are sorted). */
    size_t *next = calloc(m->ncounters, sizeof *next);
    if (!next) {
        w->error = 1;
        return;
    }
    st_strbuf_t *te = &w->a;
    for (;;) {
        size_t best = m->ncounters;
        for (size_t k = 0; k < m->ncounters; k++)
            if (next[k] < m->counters[k].n &&
                (best == m->ncounters ||
                 m->counters[k].ns[next[k]] < m->counters[best].ns[next[best]]))
                best = k;
        if (best == m->ncounters)
            break;
        const st_timeline_counter_t *c = &m->counters[best];
        uint64_t ns = c->ns[next[best]];
        if (ns < prev)
            ns = prev;
        st_strbuf_reset(te);
        st_pb_uint(te, TE_TYPE, TE_COUNTER);
        st_pb_uint(te, TE_TRACK_UUID, counter_uuid(m, best));
        st_pb_double(te, TE_DOUBLE_COUNTER, c->values[next[best]]);
        st_pb_uint(&w->pkt, PKT_TIMESTAMP, ns - prev);
        prev = ns;
        st_pb_uint(&w->pkt, PKT_SEQ_ID, seq);
        st_pb_uint(&w->pkt, PKT_SEQ_FLAGS, SEQ_NEEDS);
        st_pb_msg(&w->pkt, PKT_TRACK_EVENT, te);
        emit(w);
        next[best]++;
        (*events)++;
    }
    free(next);
}

/* An edge of a GPU slice: its begin (end 0) or end, for sorting by time. */
typedef struct {
    uint64_t ns;
    uint32_t slice;
    uint32_t end;
} edge_t;

static int by_time(const void *a, const void *b)
{
    const edge_t *x = a, *y = b;
    if (x->ns != y->ns)
        return x->ns < y->ns ? -1 : 1;
    if (x->slice == y->slice) /* a slice of no length: its begin, then its end */
        return x->end < y->end ? -1 : x->end > y->end;
    if (x->end != y->end)
        return x->end ? -1 : 1; /* an end before another's begin at the same time */
    /* begins in the slices' order (by start, the holder first), ends the other way
     * round (the inner one ends first) */
    int order = x->slice < y->slice ? -1 : x->slice > y->slice;
    return x->end ? -order : order;
}

/* The GPU streams' slices on a sequence of their own. */
static void write_gpu(writer_t *w, const st_timeline_t *m, uint64_t *events)
{
    if (!m->ngpu_slices)
        return;
    edge_t *edge = malloc(2 * m->ngpu_slices * sizeof *edge);
    if (!edge) {
        w->error = 1;
        return;
    }
    for (size_t i = 0; i < m->ngpu_slices; i++) {
        edge[2 * i] = (edge_t){m->gpu_slices[i].t0, (uint32_t)i, 0};
        edge[2 * i + 1] = (edge_t){m->gpu_slices[i].t1, (uint32_t)i, 1};
    }
    qsort(edge, 2 * m->ngpu_slices, sizeof *edge, by_time);
    uint32_t seq = 3 + (uint32_t)m->nthreads;
    uint64_t prev = edge[0].ns < m->base_mono_ns ? edge[0].ns : m->base_mono_ns;
    start_sequence(w, seq, 0, prev, NULL);
    st_strbuf_t *te = &w->a;
    /* names interned on the sequence, as a thread's are: a kernel's once */
    size_t nlabels = st_intern_count(m->labels);
    uint8_t *interned = calloc(nlabels ? nlabels : 1, 1);
    if (!interned) {
        free(edge);
        w->error = 1;
        return;
    }
    seqfix_t fix;
    seqfix_init(&fix, seq);
    for (size_t i = 0; i < 2 * m->ngpu_slices; i++) {
        const st_timeline_slice_t *sl = &m->gpu_slices[edge[i].slice];
        int begin = !edge[i].end;
        if (!begin || (sl->label < nlabels && interned[sl->label])) {
            /* The common case, encoded in place: track_event{type, track_uuid[,
             * name_iid][, terminating flow]} */
            inplace_t ev;
            if (!inplace_begin(w, &ev, edge[i].ns - prev, &fix, begin ? TE_BEGIN : TE_END))
                continue; /* out of memory: out.failed says so */
            *ev.p++ = (char)(TE_TRACK_UUID << 3);
            ev.p += put_varint(ev.p, gpu_uuid(m, sl->track));
            if (begin) {
                *ev.p++ = (char)(TE_NAME_IID << 3);
                ev.p += put_varint(ev.p, (uint64_t)sl->label + 1);
                if (sl->flow) {
                    ev.p += put_varint(ev.p, TE_TERMINATING_FLOW_IDS << 3 | 1); /* fixed64 */
                    uint64_t flow = sl->flow; /* little-endian */
                    memcpy(ev.p, &flow, sizeof flow);
                    ev.p += sizeof flow;
                }
            }
            inplace_emit(w, &ev);
            prev = edge[i].ns;
            (*events)++;
            continue;
        }
        st_strbuf_reset(te);
        st_pb_uint(te, TE_TYPE, edge[i].end ? TE_END : TE_BEGIN);
        st_pb_uint(te, TE_TRACK_UUID, gpu_uuid(m, sl->track));
        if (!edge[i].end) {
            if (sl->label < nlabels) {
                st_pb_uint(te, TE_NAME_IID, (uint64_t)sl->label + 1);
                intern_name(w, m, sl->label, interned);
            }
            if (sl->flow)
                pb_fixed64(te, TE_TERMINATING_FLOW_IDS, sl->flow);
        }
        st_pb_uint(&w->pkt, PKT_TIMESTAMP, edge[i].ns - prev);
        prev = edge[i].ns;
        st_pb_uint(&w->pkt, PKT_SEQ_ID, seq);
        st_pb_uint(&w->pkt, PKT_SEQ_FLAGS, SEQ_NEEDS);
        st_pb_msg(&w->pkt, PKT_TRACK_EVENT, te);
        emit(w);
        (*events)++;
    }
    free(interned);
    free(edge);
}

int st_perfetto_write(FILE *f, const st_timeline_t *m, st_perfetto_stats_t *stats, st_msg_t *msg)
{
    writer_t w;
    memset(&w, 0, sizeof w);
    w.f = f;
    st_strbuf_init(&w.out);
    st_strbuf_init(&w.pkt);
    st_strbuf_init(&w.a);
    st_strbuf_init(&w.b);
    st_strbuf_init(&w.c);
    st_strbuf_init(&w.text);
    uint64_t slices = 0, samples = 0, stack_samples = 0;
    int rc = 0;
    write_clock_snapshot(&w, m);
    write_attributes(&w, m);
    write_descriptors(&w, m);
    for (size_t i = 0; i < m->nthreads && rc == 0; i++)
        if (write_thread(&w, m, i, &slices, &stack_samples) < 0)
            rc = st_msg_set(msg, ST_EIO, "cannot read back the timeline of thread %zu", i);
    write_counters(&w, m, &samples);
    write_gpu(&w, m, &slices);
    flush_out(&w, 1);
    if (rc == 0 && (w.error || w.pkt.failed || w.a.failed || w.b.failed || w.c.failed))
        rc = st_msg_set(msg, ST_EIO, "cannot write the trace");
    if (stats) {
        stats->bytes = w.written;
        stats->slice_events = slices;
        stats->counter_events = samples;
        stats->stack_samples = stack_samples;
    }
    st_strbuf_free(&w.out);
    st_strbuf_free(&w.pkt);
    st_strbuf_free(&w.a);
    st_strbuf_free(&w.text);
    st_strbuf_free(&w.b);
    st_strbuf_free(&w.c);
    return rc;
}
