#include "output/html.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/names.h"
#include "output/fgraph.h"
/* st_html_report_css and st_html_report_js, generated from output/html/ */
#include "html_report_css.inc"
#include "html_report_js.inc"

void st_html_json_string(st_strbuf_t *out, const char *s)
{
    /* st_strbuf_json_string escapes quotes, backslashes, controls and bad UTF-8;
     * then <, >, & and the two JavaScript line separators are made \u escapes. */
    st_strbuf_t tmp;
    st_strbuf_init(&tmp);
    st_strbuf_json_string(&tmp, s);
    const char *p = st_strbuf_cstr(&tmp);
    for (size_t i = 0; i < tmp.len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '<')
            st_strbuf_puts(out, "\\u003c");
        else if (c == '>')
            st_strbuf_puts(out, "\\u003e");
        else if (c == '&')
            st_strbuf_puts(out, "\\u0026");
        else if (c == 0xE2 && i + 2 < tmp.len && (unsigned char)p[i + 1] == 0x80 &&
                 ((unsigned char)p[i + 2] == 0xA8 || (unsigned char)p[i + 2] == 0xA9)) {
            st_strbuf_puts(out, (unsigned char)p[i + 2] == 0xA8 ? "\\u2028" : "\\u2029");
            i += 2;
        } else
            st_strbuf_putc(out, (char)c);
    }
    if (tmp.failed)
        out->failed = 1;
    st_strbuf_free(&tmp);
}

void st_html_text(st_strbuf_t *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': st_strbuf_puts(out, "&lt;"); break;
        case '>': st_strbuf_puts(out, "&gt;"); break;
        case '&': st_strbuf_puts(out, "&amp;"); break;
        case '"': st_strbuf_puts(out, "&quot;"); break;
        case '\'': st_strbuf_puts(out, "&#39;"); break;
        default: st_strbuf_putc(out, *s);
        }
    }
}

static void put_num(st_strbuf_t *out, double v)
{
    if (!isfinite(v))
        v = 0;
    if (v == floor(v) && fabs(v) < 9e15)
        st_strbuf_printf(out, "%.0f", v);
    else
        st_strbuf_printf(out, "%.6g", v);
}

/* The other metrics the graph can be weighed by ("weigh by"): every count, bytes or
 * samples metric the profile reports (allocations, MPI bytes, event counters,
 * stack samples), each thread's nodes as [total, self, ...] in node order. */
static int write_views(st_strbuf_t *out, const st_model_t *m, int timer)
{
    st_strbuf_puts(out, ",\"views\":[");
    int first = 1;
    for (uint32_t id = 0; m->metrics && id < m->metrics->n; id++) {
        const st_metric_def_t *d = &m->metrics->defs[id];
        if ((int)id == timer || d->kind == ST_METRIC_TIMER || d->kind == ST_METRIC_GAUGE ||
            !st_model_reports(m, id))
            continue;
        st_strbuf_puts(out, first ? "{\"name\":" : ",{\"name\":");
        first = 0;
        st_html_json_string(out, d->name);
        st_strbuf_puts(out, ",\"unit\":");
        st_html_json_string(out, d->kind == ST_METRIC_BYTES ? "bytes" : d->unit);
        st_strbuf_puts(out, ",\"threads\":[");
        for (size_t ti = 0; ti < m->nthreads; ti++) {
            double *incl, *self;
            if (st_model_values(m, &m->threads[ti], id, &incl, &self) < 0)
                return ST_ENOMEM;
            st_strbuf_puts(out, ti ? ",[" : "[");
            for (uint32_t i = 1; i < m->threads[ti].paths->nnodes; i++) {
                if (i > 1)
                    st_strbuf_putc(out, ',');
                put_num(out, incl[i]);
                st_strbuf_putc(out, ',');
                put_num(out, self[i]);
            }
            st_strbuf_putc(out, ']');
            free(incl);
            free(self);
        }
        st_strbuf_puts(out, "]}");
    }
    st_strbuf_putc(out, ']');
    return 0;
}

/* A followed tree's processes (its ranks are their pids): "processes": [[pid,
 * parent, folder or null, why it is not followed or null, command line], ...] in
 * the record's order, the run's own first (pid 0: not known). */
static void put_command(st_strbuf_t *out, st_strbuf_t *cmd, const char *const *argv, size_t n)
{
    st_strbuf_reset(cmd);
    for (size_t k = 0; k < n; k++)
        st_strbuf_printf(cmd, "%s%s", k ? " " : "", argv[k]);
    st_html_json_string(out, st_strbuf_cstr(cmd));
}

static void write_processes(st_strbuf_t *out, const st_model_t *m)
{
    st_strbuf_t cmd;
    st_strbuf_init(&cmd);
    st_strbuf_printf(out, ",\"processes\":[[%ld,0,\"\",null,", m->pid);
    put_command(out, &cmd, m->command, m->ncommand);
    st_strbuf_putc(out, ']');
    for (size_t i = 0; i < m->nchildren; i++) {
        const st_model_child_t *c = &m->children[i];
        st_strbuf_printf(out, ",[%ld,%ld,", c->pid, c->parent);
        if (c->folder)
            st_html_json_string(out, c->folder);
        else
            st_strbuf_puts(out, "null");
        st_strbuf_putc(out, ',');
        if (c->not_followed)
            st_html_json_string(out, c->not_followed);
        else
            st_strbuf_puts(out, "null");
        st_strbuf_putc(out, ',');
        put_command(out, &cmd, c->command, c->ncommand);
        st_strbuf_putc(out, ']');
    }
    if (cmd.failed)
        out->failed = 1;
    st_strbuf_free(&cmd);
    st_strbuf_putc(out, ']');
}

static int write_data(st_strbuf_t *out, const st_model_t *m, const char *title)
{
    int timer = st_model_timer(m);
    st_strbuf_puts(out, "{\"title\":");
    st_html_json_string(out, title);
    st_strbuf_printf(out, ",\"unit\":\"%s\",\"labels\":[", timer >= 0 ? "ns" : "calls");
    st_strbuf_t name;
    st_strbuf_init(&name);
    for (uint32_t l = 0; l < st_intern_count(m->labels); l++) {
        if (l)
            st_strbuf_putc(out, ',');
        st_strbuf_reset(&name);
        st_name_unique(m, l, &name);
        if (name.failed)
            out->failed = 1;
        st_html_json_string(out, st_strbuf_cstr(&name));
    }
    st_strbuf_free(&name);
    st_strbuf_puts(out, "],\"threads\":[");
    for (size_t ti = 0; ti < m->nthreads; ti++) {
        const st_model_thread_t *th = &m->threads[ti];
        const st_pathtab_t *t = th->paths;
        double *incl, *self;
        /* weighed by time, else by calls (the page knows no other unit) */
        if (st_model_values(m, th, timer >= 0 ? (uint32_t)timer : ST_METRIC_NONE, &incl,
                            &self) < 0)
            return ST_ENOMEM;
        st_strbuf_printf(out, "%s{\"index\":%u,\"name\":", ti ? "," : "", th->index);
        st_html_json_string(out, th->name ? th->name : "");
        if (th->has_rank)
            st_strbuf_printf(out, ",\"rank\":%u", th->rank);
        else
            st_strbuf_puts(out, ",\"rank\":null");
        st_strbuf_puts(out, ",\"nodes\":[");
        double k = timer >= 0 ? m->ns_per_tick[timer] : 0;
        for (uint32_t i = 1; i < t->nnodes; i++) {
            const st_path_t *n = &t->nodes[i];
            double mean = 0, var = 0;
            if (timer >= 0) {
                st_tstat_stats(st_model_tstat(th, timer, i), &mean, &var);
                mean *= k;
                var *= k * k;
            }
            /* parent (-1 at the top), label, count, total, self, mean, stddev */
            st_strbuf_printf(out, "%s%ld,%u,%llu,", i > 1 ? "," : "",
                             n->parent == 0 ? -1L : (long)n->parent - 1, n->label,
                             (unsigned long long)st_model_calls(th, i));
            put_num(out, floor(incl[i] + 0.5));
            st_strbuf_putc(out, ',');
            put_num(out, floor(self[i] + 0.5));
            st_strbuf_putc(out, ',');
            put_num(out, mean);
            st_strbuf_putc(out, ',');
            put_num(out, sqrt(var > 0 ? var : 0));
        }
        st_strbuf_puts(out, "]}");
        free(incl);
        free(self);
    }
    st_strbuf_puts(out, "]");
    if (m->ranks_are_pids)
        write_processes(out, m);
    int rc = write_views(out, m, timer);
    st_strbuf_puts(out, "}");
    return rc;
}

int st_html_write(st_strbuf_t *out, const st_model_t *m, const char *title)
{
    if (!title)
        title = "strata profile";
    st_strbuf_puts(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                        "script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n<title>");
    st_html_text(out, title);
    st_strbuf_puts(out, " - strata</title>\n<style>\n");
    st_strbuf_puts(out, st_html_report_css);
    st_strbuf_puts(out, "</style>\n</head>\n<body>\n<header><h1>");
    st_html_text(out, title);
    st_strbuf_puts(out, "</h1>");
    st_strbuf_puts(out, "<span class=\"meta\">");
    if (m->host && *m->host) {
        st_html_text(out, m->host);
        st_strbuf_puts(out, " &middot; ");
    }
    if (m->nranks)
        st_strbuf_printf(out, "%u %s &middot; ", m->nranks,
                         m->ranks_are_pids ? "processes with results" : "ranks");
    if (m->nruns > 1)
        st_strbuf_printf(out, "%u runs &middot; ", m->nruns);
    st_strbuf_puts(out, "strata " STRATA_VERSION "</span>"
                        "<label id=\"rankbox\">rank <select id=\"rank\"></select></label>"
                        "<label>thread <select id=\"thread\"></select></label>"
                        "<label id=\"weighbox\">weigh by <select id=\"weigh\"></select></label>"
                        "<label>search <input id=\"search\" type=\"search\" "
                        "placeholder=\"function name\"></label><span id=\"matches\"></span>"
                        "</header>\n<main>\n<div id=\"crumbs\"></div>\n"
                        "<div id=\"graphbox\"><canvas id=\"graph\"></canvas></div>\n"
                        "<section id=\"procbox\"><h2>Processes</h2><p class=\"note\">"
                        "The run's process tree (processes.jsonl); click a process to show "
                        "its profile alone.</p><table class=\"stats\"><thead><tr><th>process"
                        "</th><th>parent</th><th class=\"name\">results</th><th class=\"name\">"
                        "command</th></tr></thead>"
                        "<tbody id=\"procrows\"></tbody></table></section>\n"
                        "<section id=\"lbbox\"><h2 id=\"lbtitle\">Load balance across ranks</h2><p "
                        "class=\"note\">The total time of <select id=\"lbfn\"></select> in "
                        "each <span id=\"lbunit\">rank</span> (what it called included, recursion counted once); click a "
                        "function in the table to show it. <span id=\"lbnote\"></span></p>"
                        "<canvas id=\"lbchart\"></canvas></section>\n"
                        "<h2>Functions</h2><p class=\"note\">Click a column to sort. Total "
                        "counts a recursive function once. <span id=\"tablenote\"></span></p>\n"
                        "<div id=\"tablebox\"><table class=\"stats\"><thead id=\"thead\"></thead>"
                        "<tbody id=\"tbody\"></tbody></table></div>\n</main>\n"
                        "<div id=\"tip\"></div>\n"
                        "<script type=\"application/json\" id=\"strata-data\">");
    int rc = write_data(out, m, title);
    if (rc < 0)
        return rc;
    st_strbuf_puts(out, "</script>\n<script>\n");
    st_strbuf_puts(out, st_html_report_js);
    st_strbuf_puts(out, "</script>\n</body>\n</html>\n");
    return out->failed ? ST_ENOMEM : 0;
}
