#include "output/chrome.h"

#include <math.h>

#include "base/strbuf.h"
#include "model/names.h"

static int flush(FILE *f, st_strbuf_t *b, int force)
{
    if (b->len < (1u << 20) && !force)
        return 0;
    int bad = b->failed || (b->len && fwrite(b->data, 1, b->len, f) != b->len);
    st_strbuf_reset(b);
    return bad ? -1 : 0;
}

/* Microseconds since the first event, with nanosecond digits. */
static void put_ts(st_strbuf_t *b, uint64_t ns, uint64_t t0)
{
    uint64_t d = ns > t0 ? ns - t0 : 0;
    st_strbuf_printf(b, "%llu.%03llu", (unsigned long long)(d / 1000),
                     (unsigned long long)(d % 1000));
}

int st_chrome_write(FILE *f, const st_timeline_t *m, st_msg_t *msg)
{
    st_strbuf_t b, text;
    st_strbuf_init(&b);
    st_strbuf_init(&text);
    int bad = 0;
    uint64_t t0 = m->base_mono_ns;
    st_strbuf_printf(&b, "{\"displayTimeUnit\": \"ns\", \"otherData\": {");
    for (size_t i = 0; i < m->nattrs; i++) {
        if (i)
            st_strbuf_puts(&b, ", ");
        st_strbuf_json_string(&b, m->attr_keys[i]);
        st_strbuf_puts(&b, ": ");
        st_strbuf_json_string(&b, m->attr_values[i]);
    }
    st_strbuf_printf(&b, "},\n\"traceEvents\": [\n{\"ph\": \"M\", \"name\": \"process_name\", "
                         "\"pid\": %ld, \"tid\": 0, \"args\": {\"name\": ",
                     m->pid);
    st_strbuf_json_string(&b, m->process_name ? m->process_name : "python");
    st_strbuf_puts(&b, "}}");
    for (size_t i = 0; i < m->nthreads; i++) {
        const st_timeline_thread_t *th = &m->threads[i];
        st_strbuf_printf(&b, ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %ld, "
                             "\"tid\": %llu, \"args\": {\"name\": ",
                         m->pid, (unsigned long long)th->tid);
        st_strbuf_json_string(&b, th->name ? th->name : "");
        st_strbuf_puts(&b, "}}");
        st_ev_reader_t r;
        st_ev_reader_init(&r, th->events, 0);
        const st_ev_t *e;
        while ((e = st_ev_next(&r)) != NULL) {
            if (e->kind != ST_EV_BEGIN && e->kind != ST_EV_END && e->kind != ST_EV_INSTANT)
                continue; /* the slices are the timeline's calls; instants its marks */
            st_strbuf_printf(&b, ",\n{\"ph\": \"%c\", %s\"pid\": %ld, \"tid\": %llu, \"ts\": ",
                             e->kind == ST_EV_BEGIN ? 'B' : e->kind == ST_EV_END ? 'E' : 'i',
                             e->kind == ST_EV_INSTANT ? "\"s\": \"t\", " : "", m->pid,
                             (unsigned long long)th->tid);
            put_ts(&b, st_timeline_ns(m, e->ticks), t0);
            if (e->kind != ST_EV_END) {
                st_strbuf_puts(&b, ", \"name\": ");
                if (st_intern_shared(m->labels, e->a)) {
                    st_strbuf_reset(&text);
                    st_name_unique_in(m->labels, m->locs, e->a, &text);
                    st_strbuf_json_string(&b, st_strbuf_cstr(&text));
                } else {
                    st_strbuf_json_string(&b, st_intern_str(m->labels, e->a));
                }
            }
            st_strbuf_putc(&b, '}');
            bad |= flush(f, &b, 0);
        }
        bad |= r.error;
    }
    for (size_t k = 0; k < m->ncounters; k++) {
        const st_timeline_counter_t *c = &m->counters[k];
        for (size_t i = 0; i < c->n; i++) {
            st_strbuf_printf(&b, ",\n{\"ph\": \"C\", \"pid\": %ld, \"tid\": 0, \"ts\": ", m->pid);
            put_ts(&b, c->ns[i], t0);
            st_strbuf_puts(&b, ", \"name\": ");
            st_strbuf_json_string(&b, c->name);
            st_strbuf_puts(&b, ", \"args\": {\"value\": ");
            st_strbuf_g17(&b, isfinite(c->values[i]) ? c->values[i] : 0.0);
            st_strbuf_puts(&b, "}}");
            bad |= flush(f, &b, 0);
        }
    }
    st_strbuf_puts(&b, "\n]}\n");
    bad |= flush(f, &b, 1);
    st_strbuf_free(&b);
    st_strbuf_free(&text);
    return bad ? st_msg_set(msg, ST_EIO, "cannot write the Chrome trace") : 0;
}
