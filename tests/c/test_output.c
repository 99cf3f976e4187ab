/* Unit tests of the report writers and the profile.json reader, on hand-made
 * trees with exact (fake) times: pstats, dot, folded, speedscope, callgrind,
 * html, the load-balance table, the strict JSON reader, reading back what the
 * JSON writer wrote, and merging. Prints "N passed, N failed"; exits non-zero on
 * any failure. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/components.h"
#include "core/intern.h"
#include "core/loctab.h"
#include "model/model.h"
#include "core/settings.h"
#include "base/strbuf.h"
#include "input/jsonpull.h"
#include "model/merge.h"
#include "input/profile.h"
#include "output/callgrind.h"
#include "output/dot.h"
#include "output/fgraph.h"
#include "output/folded.h"
#include "output/grid.h"
#include "output/html.h"
#include "output/json.h"
#include "output/loadbal.h"
#include "output/pstats.h"
#include "output/speedscope.h"
#include "output/table.h"
#include "output/registry.h"

#include "check.h"
#include "play.h"

#define CONTAINS(buf, text) CHECK(strstr(st_strbuf_cstr(buf), (text)) != NULL)
#define CONTAINS_TEXT(s, text) CHECK(strstr((s), (text)) != NULL)
#define LACKS(buf, text) CHECK(strstr(st_strbuf_cstr(buf), (text)) == NULL)

static void call(st_play_t *p, uint32_t label, uint64_t t0)
{
    uint64_t now[2] = {t0, t0};
    CHECK(st_play_enter(p, label, now) == 0);
}

static void ret(st_play_t *p, uint64_t t1)
{
    uint64_t now[2] = {t1, t1};
    CHECK(st_play_exit(p, now) == 0);
}

/* A hand-made profile:
 *   main (0..1000): fib (100..700) -> fib (200..600) -> fib (300..400);
 *                   <built-in method sorted> (800..900); "<\/script>&" (900..950)
 * labels: 0 main, 1 fib, 2 sorted, 3 the hostile one. */
typedef struct {
    st_intern_t labels;
    st_loctab_t locs;
    st_settings_t settings;
    st_metrics_t reg;
    st_pathtab_t tree;
    st_model_thread_t th;
    st_model_t m;
} fixture_t;

static void fixture(fixture_t *f)
{
    memset(f, 0, sizeof *f);
    st_intern_init(&f->labels);
    st_loctab_init(&f->locs);
    st_settings_init(&f->settings);
    const char *names[] = {"main", "fib", "<built-in method sorted>", "</script><b>\"x\"&amp;"};
    uint32_t id;
    for (int i = 0; i < 4; i++)
        st_intern_id(&f->labels, names[i], strlen(names[i]), &id);
    st_loctab_set(&f->locs, 0, "/src/app.py", 1, "main");
    st_loctab_set(&f->locs, 1, "/src/app.py", 10, "fib");
    st_loctab_set(&f->locs, 2, "~", 0, "<built-in method sorted>");
    st_metrics_init(&f->reg);
    CHECK(st_play_metrics(&f->reg) == 0);
    CHECK(st_pathtab_init(&f->tree, &f->reg, 0) == 0);
    st_play_t p;
    st_play_init(&p, &f->tree, 2);
    call(&p, 0, 0);
    call(&p, 1, 100);
    call(&p, 1, 200);
    call(&p, 1, 300);
    ret(&p, 400);
    ret(&p, 600);
    ret(&p, 700);
    call(&p, 2, 800);
    ret(&p, 900);
    call(&p, 3, 900);
    ret(&p, 950);
    ret(&p, 1000);
    st_play_free(&p);
    f->th = (st_model_thread_t){.paths = &f->tree, .index = 0, .tid = 7, .name = "MainThread"};
    f->m = (st_model_t){.labels = &f->labels, .threads = &f->th, .nthreads = 1,
                        .metrics = &f->reg, .settings = &f->settings,
                        .ns_per_tick = {1.0, 1.0},
                        .components = (1u << ST_COMP_TRIP_COUNT) | (1u << ST_COMP_WALL_CLOCK),
                        .locs = &f->locs, .pid = 42, .host = "node1", .clock_name = "tsc"};
}

static void fixture_free(fixture_t *f)
{
    st_pathtab_free(&f->tree);
    st_metrics_free(&f->reg);
    st_intern_free(&f->labels);
    st_loctab_free(&f->locs);
    st_settings_free(&f->settings);
}

static void test_fgraph(void)
{
    fixture_t f;
    fixture(&f);
    st_fgraph_t g;
    CHECK(st_fgraph_build(&g, &f.m, -1) == 0);
    CHECK(g.nfns == 4);
    uint32_t fib = st_fgraph_fn_of(&g, &f.m, 1);
    CHECK(fib != UINT32_MAX);
    /* fib: 3 calls, 1 primitive; self 100+300+100 = 500... by path: outer 600-400=200? */
    CHECK(g.fns[fib].nc == 3 && g.fns[fib].cc == 1);
    CHECK(g.fns[fib].ct == 600.0);                   /* outermost only */
    CHECK(g.fns[fib].tt == 200.0 + 300.0 + 100.0);   /* every call's own time */
    uint32_t main_ = st_fgraph_fn_of(&g, &f.m, 0);
    CHECK(g.fns[main_].ct == 1000.0 && g.fns[main_].tt == 1000.0 - 600 - 100 - 50);
    CHECK(g.nedges == 4); /* main->fib, fib->fib, main->sorted, main->hostile */
    for (uint32_t e = 0; e < g.nedges; e++) {
        if (g.edges[e].caller == fib && g.edges[e].callee == fib) {
            CHECK(g.edges[e].nc == 2 && g.edges[e].cc == 1 && g.edges[e].ct == 400.0);
        }
    }
    CHECK(g.total_tt == 1000.0 && g.max_ct == 1000.0);
    st_strbuf_t b;
    st_strbuf_init(&b);
    st_fgraph_name(&g, &f.m, fib, 1, &b);
    CHECK(strcmp(st_strbuf_cstr(&b), "app:10:fib") == 0);
    st_strbuf_free(&b);
    st_fgraph_free(&g);
    fixture_free(&f);
}

static void test_pstats(void)
{
    fixture_t f;
    fixture(&f);
    st_strbuf_t b;
    st_strbuf_init(&b);
    CHECK(st_pstats_write(&b, &f.m) == 0);
    CHECK(b.len > 40 && b.data[0] == '{' && b.data[b.len - 1] == '0');
    /* the key of fib: (u"/src/app.py", i10, u"fib") as a small tuple */
    const char key[] = ")\x03u\x0b\x00\x00\x00/src/app.pyi\x0a\x00\x00\x00u\x03\x00\x00\x00" "fib";
    CHECK(memmem(b.data, b.len, key, sizeof key - 1) != NULL);
    const char builtin[] = "u\x01\x00\x00\x00~i\x00\x00\x00\x00u\x18\x00\x00\x00<built-in method sorted>";
    CHECK(memmem(b.data, b.len, builtin, sizeof builtin - 1) != NULL);
    st_strbuf_free(&b);
    fixture_free(&f);
}

static void test_dot(void)
{
    char c[8];
    st_dot_colour(1.0, c);
    CHECK(strcmp(c, "#ff0000") == 0);
    st_dot_colour(0.0, c);
    CHECK(strcmp(c, "#0d0d73") == 0);
    fixture_t f;
    fixture(&f);
    st_strbuf_t b;
    st_strbuf_init(&b);
    st_dot_opts_t o = ST_DOT_OPTS_DEFAULT;
    CHECK(st_dot_write(&b, &f.m, &o) == 0);
    CONTAINS(&b, "digraph {");
    CONTAINS(&b, "label=\"app:1:main\\n100.00%\\n(25.00%)\\n1\xC3\x97\"");
    CONTAINS(&b, "label=\"app:10:fib\\n60.00%\\n(60.00%)\\n3\xC3\x97\"");
    CONTAINS(&b, "color=\"#ff0000\"");
    /* the hostile label is escaped for dot */
    CONTAINS(&b, "</script><b>\\\"x\\\"&amp;");
    /* edges: main -> fib 60% once, fib -> fib 40% once (primitive) */
    CONTAINS(&b, "label=\"60.00%\\n1\xC3\x97\"");
    CONTAINS(&b, "label=\"40.00%\\n1\xC3\x97\"");
    /* -n 10 leaves out sorted (10%) and the 5% one; -e 50 leaves fib->fib out */
    st_strbuf_reset(&b);
    o.node_thres = 10.01;
    o.edge_thres = 50;
    CHECK(st_dot_write(&b, &f.m, &o) == 0);
    LACKS(&b, "sorted");
    LACKS(&b, "script");
    LACKS(&b, "40.00%\\n");
    /* by self time: fib has the most self time, so it is red */
    st_strbuf_reset(&b);
    o = (st_dot_opts_t)ST_DOT_OPTS_DEFAULT;
    o.colour_by_self = 1;
    CHECK(st_dot_write(&b, &f.m, &o) == 0);
    const char *fibnode = strstr(st_strbuf_cstr(&b), "app:10:fib");
    const char *line = fibnode;
    while (line > b.data && line[-1] != '\n')
        line--;
    CHECK(strncmp(strstr(line, "color="), "color=\"#ff0000\"", 15) == 0);
    st_strbuf_free(&b);
    fixture_free(&f);
}

static void test_folded_speedscope_callgrind(void)
{
    fixture_t f;
    fixture(&f);
    st_strbuf_t b;
    st_strbuf_init(&b);
    CHECK(st_folded_write(&b, &f.m) == 0);
    CONTAINS(&b, "main 250\n");
    CONTAINS(&b, "main;fib 200\n");
    CONTAINS(&b, "main;fib;fib 300\n");
    CONTAINS(&b, "main;fib;fib;fib 100\n");
    CONTAINS(&b, "main;<built-in method sorted> 100\n");
    st_strbuf_reset(&b);
    CHECK(st_speedscope_write(&b, &f.m, "t") == 0);
    CONTAINS(&b, "\"type\":\"evented\"");
    CONTAINS(&b, "\"endValue\":1000");
    CONTAINS(&b, "{\"type\":\"C\",\"frame\":0,\"at\":1000}");
    CONTAINS(&b, "{\"name\":\"fib\",\"file\":\"/src/app.py\",\"line\":10}");
    st_strbuf_reset(&b);
    CHECK(st_callgrind_write(&b, &f.m) == 0);
    CONTAINS(&b, "# callgrind format\n");
    CONTAINS(&b, "events: wall_clock\n");
    CONTAINS(&b, "summary: 1000\n");
    CONTAINS(&b, "fl=(");
    CONTAINS(&b, ") /src/app.py\n");
    CONTAINS(&b, ") fib\n");
    CONTAINS(&b, "calls=1 10\n1 600\n"); /* main (line 1) calls fib once, 600 ns under it */
    st_strbuf_free(&b);
    fixture_free(&f);
}

static void test_html(void)
{
    fixture_t f;
    fixture(&f);
    st_strbuf_t b;
    st_strbuf_init(&b);
    CHECK(st_html_write(&b, &f.m, "a</title><script>") == 0);
    CONTAINS(&b, "<!DOCTYPE html>");
    /* labels are \u-escaped inside the data; nothing closes the script early */
    CONTAINS(&b, "\\u003c/script\\u003e\\u003cb\\u003e\\\"x\\\"\\u0026amp;");
    LACKS(&b, "</script><b>");
    CONTAINS(&b, "a&lt;/title&gt;&lt;script&gt; - strata</title>");
    /* exactly two scripts, each closed once */
    const char *p = st_strbuf_cstr(&b);
    int closes = 0;
    while ((p = strstr(p, "</script>")))
        closes++, p++;
    CHECK(closes == 2);
    LACKS(&b, "http://");
    st_strbuf_reset(&b);
    st_html_json_string(&b, "\xE2\x80\xA8<x>");
    CHECK(strcmp(st_strbuf_cstr(&b), "\"\\u2028\\u003cx\\u003e\"") == 0);
    st_strbuf_free(&b);
    fixture_free(&f);
}

static void test_jsonpull(void)
{
    struct {
        const char *text;
        int ok;
    } cases[] = {
        {"{\"a\": [1, 2.5e3, -0, true, false, null, \"x\\u00e9\\ud83d\\ude00\"]}", 1},
        {"{\"a\": [1, 2,]}", 0},
        {"{\"a\": 01}", 0},
        {"{\"a\": 1", 0},
        {"{\"a\": \"x", 0},
        {"{\"a\": \"\x01\"}", 0},
        {"{\"a\": \"\xff\"}", 0},
        {"{\"a\": NaN}", 0},
        {"{\"a\": 1} x", 0},
        {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]"
         "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_jp_t jp;
        st_jp_init(&jp, cases[i].text, strlen(cases[i].text));
        int rc = st_jp_skip(&jp);
        if (rc == 0)
            rc = st_jp_finish(&jp);
        CHECK((rc == 0) == cases[i].ok);
        if ((rc == 0) != cases[i].ok)
            fprintf(stderr, "  case %zu: %s\n", i, jp.err);
    }
    const char *s = "\"a\\u0000b\\ud800\"";
    st_jp_t jp;
    st_jp_init(&jp, s, strlen(s));
    st_strbuf_t out;
    st_strbuf_init(&out);
    CHECK(st_jp_string(&jp, &out) == 0);
    CHECK(strcmp(st_strbuf_cstr(&out), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD") == 0);
    st_strbuf_free(&out);
    const char *num = "18446744073709551615";
    st_jp_init(&jp, num, strlen(num));
    uint64_t u;
    CHECK(st_jp_uint(&jp, UINT64_MAX, &u) == 0 && u == UINT64_MAX);
    st_jp_init(&jp, num, strlen(num));
    CHECK(st_jp_uint(&jp, 100, &u) < 0 && strstr(jp.err, "above 100"));
}

static char *json_of(const st_model_t *m)
{
    st_strbuf_t b;
    st_strbuf_init(&b);
    st_json_write(&b, m);
    char *s = strdup(st_strbuf_cstr(&b));
    st_strbuf_free(&b);
    return s;
}

static void test_roundtrip(void)
{
    fixture_t f;
    fixture(&f);
    char *first = json_of(&f.m);
    st_profile_t p;
    st_msg_t msg;
    CHECK(st_profile_parse(&p, first, strlen(first), "x", &msg) == 0);
    char *second = json_of(&p.model);
    CHECK(strcmp(first, second) == 0);
    if (strcmp(first, second) != 0)
        fprintf(stderr, "--- first\n%s\n--- second\n%s\n", first, second);
    /* the writers read the loaded model as they read the live one */
    st_strbuf_t a, b;
    st_strbuf_init(&a);
    st_strbuf_init(&b);
    st_pstats_write(&a, &f.m);
    st_pstats_write(&b, &p.model);
    CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    st_strbuf_free(&a);
    st_strbuf_free(&b);
    st_profile_free(&p);

    /* bad inputs: one clear message each */
    struct {
        const char *text, *want;
    } bad[] = {
        {"{\"format_version\": 3, \"threads\": []}", "newer than this strata reads"},
        {"{\"format_version\": 0, \"threads\": []}", "bad format_version"},
        {"{\"threads\": []}", "no format_version"},
        {"{\"format_version\": 1}", "no threads"},
        {"[1]", "expected a JSON object"},
        {"{\"format_version\": 1, \"threads\": [{\"nodes\": [{\"id\": 1, \"parent\": 5, "
         "\"label\": \"x\"}]}]}", "parent 5 is not a node listed before it"},
        {"{\"format_version\": 1, \"threads\": [{\"nodes\": [{\"id\": 1, \"parent\": -1, "
         "\"label\": \"x\", \"function\": 3}]}]}", "refers to a function"},
        {"{\"format_version\": 1, \"threads\": [{\"nodes\": [{\"id\": 1, \"parent\": -1, "
         "\"label\": \"x\"}, {\"id\": 1, \"parent\": -1, \"label\": \"y\"}]}]}", "two nodes with id 1"},
        {"{\"format_version\": 1, \"threads\": [{\"nodes\": [{\"id\": 1, \"parent\": -1, "
         "\"label\": \"x\", \"count\": -1}]}]}", "whole number"},
        {"{\"format_version\": 2, \"metrics\": [{\"name\": \"m\", \"kind\": \"weight\"}], "
         "\"threads\": []}", "unknown kind \"weight\""},
        {"{\"format_version\": 2, \"metrics\": [{\"name\": \"wall_clock\", \"kind\": \"bytes\"}], "
         "\"threads\": []}", "registered with another kind"},
        {"{\"format_version\": 2, \"threads\": [{\"nodes\": [{\"id\": 1, \"parent\": -1, "
         "\"label\": \"x\", \"metrics\": {\"rss\": 1}}]}]}", "metric \"rss\" is not in"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = st_profile_parse(&p, bad[i].text, strlen(bad[i].text), "f.json", &msg);
        CHECK(rc == ST_EINVAL && strstr(msg.text, bad[i].want));
        if (rc == 0)
            st_profile_free(&p);
        else if (!strstr(msg.text, bad[i].want))
            fprintf(stderr, "  bad %zu: %s\n", i, msg.text);
    }
    /* truncated anywhere: an error, never a crash */
    size_t n = strlen(first);
    for (size_t cut = 0; cut + 1 < n; cut += 7) {
        char *t = strndup(first, cut);
        int rc = st_profile_parse(&p, t, cut, "t", &msg);
        CHECK(rc == ST_EINVAL);
        if (rc == 0)
            st_profile_free(&p);
        free(t);
    }
    free(first);
    free(second);
    fixture_free(&f);
}

/* format_version 2: every metric of the registry, by kind, written, read back and
 * written again the same; merged by kind. */
static void test_metrics_v2(void)
{
    st_metrics_t reg;
    st_metrics_init(&reg);
    CHECK(st_play_metrics(&reg) == 0);
    uint32_t bytes, allocs, samples, rss;
    CHECK(st_metrics_add(&reg, "alloc_bytes", "bytes", "bytes allocated", ST_METRIC_BYTES,
                         &bytes) == 0);
    CHECK(st_metrics_add(&reg, "allocs", "calls", "allocations", ST_METRIC_COUNT, &allocs) == 0);
    CHECK(st_metrics_add(&reg, "samples", "samples", "stack samples", ST_METRIC_SAMPLES,
                         &samples) == 0);
    CHECK(st_metrics_add(&reg, "rss", "bytes", "resident memory", ST_METRIC_GAUGE, &rss) == 0);
    uint32_t frees; /* registered, nothing recorded: left out everywhere */
    CHECK(st_metrics_add(&reg, "frees", "calls", "frees", ST_METRIC_COUNT, &frees) == 0);
    st_pathtab_t t;
    CHECK(st_pathtab_init(&t, &reg, 0) == 0);
    st_play_t pl;
    st_play_init(&pl, &t, 2);
    uint64_t at[][2] = {{0, 0}, {100, 40}, {300, 90}, {1000, 400}};
    CHECK(st_play_enter(&pl, 0, at[0]) == 0 && st_play_enter(&pl, 1, at[1]) == 0);
    CHECK(st_play_exit(&pl, at[2]) == 0 && st_play_exit(&pl, at[3]) == 0);
    st_play_free(&pl);
    st_mcols_u64(&t.cols, bytes)[1] = 4096;
    st_mcols_u64(&t.cols, allocs)[1] = 3;
    st_mcols_u64(&t.cols, samples)[2] = 7;
    st_gauge_set(&st_mcols_gauge(&t.cols, rss)[2], 10.5);
    st_gauge_set(&st_mcols_gauge(&t.cols, rss)[2], 30);
    st_gauge_set(&st_mcols_gauge(&t.cols, rss)[2], 20);
    st_intern_t labels;
    st_intern_init(&labels);
    uint32_t id;
    st_intern_id(&labels, "main", 4, &id);
    st_intern_id(&labels, "work", 4, &id);
    st_settings_t settings;
    st_settings_init(&settings);
    st_model_thread_t th = {.paths = &t, .index = 0, .tid = 7, .name = "MainThread"};
    st_model_t m = {.labels = &labels, .threads = &th, .nthreads = 1, .metrics = &reg,
                    .settings = &settings, .ns_per_tick = {2.0, 1.0},
                    .components = (1u << ST_COMP_TRIP_COUNT) | (1u << ST_COMP_WALL_CLOCK) |
                                  (1u << ST_COMP_CPU_CLOCK)};
    char *first = json_of(&m);
    CONTAINS_TEXT(first, "\"format_version\": 2,");
    CHECK(strstr(first, "frees") == NULL && !st_model_reports(&m, frees));
    CONTAINS_TEXT(first, "{\"name\": \"alloc_bytes\", \"unit\": \"bytes\", \"kind\": \"bytes\", "
                         "\"description\": \"bytes allocated\"}");
    CONTAINS_TEXT(first, "{\"name\": \"rss\", \"unit\": \"bytes\", \"kind\": \"gauge\"");
    /* wall ticks in ns (2 ns a tick); empty cells left out */
    CONTAINS_TEXT(first, "\"label\": \"main\", \"count\": 1, \"metrics\": {\"wall_clock\": "
                         "{\"sum\": 2000, \"self\": 1600, ");
    CONTAINS_TEXT(first, "\"alloc_bytes\": 4096, \"allocs\": 3}}");
    CONTAINS_TEXT(first, "\"samples\": 7, \"rss\": {\"n\": 3, \"last\": 20, \"min\": 10.5, "
                         "\"max\": 30}}}");
    st_profile_t p;
    st_msg_t msg;
    CHECK(st_profile_parse(&p, first, strlen(first), "v2", &msg) == 0);
    uint32_t pb = st_metrics_find(&p.metrics, "alloc_bytes");
    uint32_t pr = st_metrics_find(&p.metrics, "rss");
    CHECK(pb != ST_METRIC_NONE && p.metrics.defs[pb].kind == ST_METRIC_BYTES);
    CHECK(pr != ST_METRIC_NONE && p.metrics.defs[pr].kind == ST_METRIC_GAUGE);
    CHECK(p.nthreads == 1 && st_mcols_u64(&p.paths[0].cols, pb)[1] == 4096);
    char *second = json_of(&p.model);
    CHECK_STR(second, first);
    /* merged twice: sums double, gauges keep their range */
    const st_model_t *two[2] = {&p.model, &m};
    st_profile_t mg;
    CHECK(st_merge(&mg, two, 2, 0, &msg) == 0);
    uint32_t mb = st_metrics_find(&mg.metrics, "alloc_bytes");
    uint32_t mr = st_metrics_find(&mg.metrics, "rss");
    CHECK(mb != ST_METRIC_NONE && st_mcols_u64(&mg.paths[0].cols, mb)[1] == 8192);
    const st_gauge_t *g = mr != ST_METRIC_NONE ? &st_mcols_gauge(&mg.paths[0].cols, mr)[2] : NULL;
    CHECK(g && g->n == 6 && g->min == 10.5 && g->max == 30 && g->last == 20);
    CHECK(st_model_tstat(&mg.threads[0], ST_TIMER_WALL, 1)->sum == 4000);
    st_profile_free(&mg);
    /* callgrind: an event per count, bytes or samples metric beside the timers */
    st_strbuf_t b;
    st_strbuf_init(&b);
    CHECK(st_callgrind_write(&b, &m) == 0);
    CONTAINS(&b, "event: alloc_bytes : bytes allocated (bytes)\n");
    CONTAINS(&b, "events: wall_clock cpu_clock alloc_bytes allocs samples\n"
                 "summary: 2000 400 4096 3 7\n");
    LACKS(&b, "rss");
    /* a profile that counted calls and took stack samples weighs its flame graph by
     * samples; the function graph keeps its counts */
    st_model_t sampled = m;
    sampled.components = 1u << ST_COMP_TRIP_COUNT;
    CHECK(st_model_weight(&sampled) == samples && st_model_weight(&m) == ST_TIMER_WALL);
    st_strbuf_reset(&b);
    CHECK(st_folded_write(&b, &sampled) == 0);
    CHECK_STR(st_strbuf_cstr(&b), "thread 0 (MainThread);main;work 7\n");
    st_strbuf_reset(&b);
    CHECK(st_callgrind_write(&b, &sampled) == 0);
    CONTAINS(&b, "events: Calls alloc_bytes allocs samples\nsummary: 2 4096 3 7\n");
    /* a table per count, bytes or samples metric: the node's own value and with
     * everything under it; a samples table gives both as percentages of all the
     * samples (py-spy's %Own, %Total), and COUNT where calls were timed too */
    st_strbuf_reset(&b);
    CHECK(st_table_write_metric(&b, &m, samples) == 0);
    CHECK_STR(st_strbuf_cstr(&b),
              "|---------------------------------------------------------------------|\n"
              "|                            STACK SAMPLES                            |\n"
              "|---------------------------------------------------------------------|\n"
              "|    LABEL     | COUNT  | DEPTH  | SELF   | TOTAL  | % SELF | % TOTAL |\n"
              "|--------------|--------|--------|--------|--------|--------|---------|\n"
              "| |0>>> main   |      1 |      0 |      0 |      7 |    0.0 |   100.0 |\n"
              "| |0>>> |_work |      1 |      1 |      7 |      7 |  100.0 |   100.0 |\n"
              "|---------------------------------------------------------------------|\n");
    st_strbuf_reset(&b);
    CHECK(st_table_write_metric(&b, &sampled, samples) == 0); /* no timer: no COUNT */
    CONTAINS(&b, "|    LABEL     | DEPTH  | SELF   | TOTAL  | % SELF | % TOTAL |\n");
    CONTAINS(&b, "| |0>>> |_work |      1 |      7 |      7 |  100.0 |   100.0 |\n");
    st_strbuf_reset(&b);
    CHECK(st_table_write_metric(&b, &m, allocs) == 0); /* a count: as before */
    CONTAINS(&b, "| COUNT  | DEPTH  | METRIC | UNITS  | SELF   | TOTAL  | % SELF |\n");
    st_strbuf_reset(&b);
    CHECK(st_table_write_metric(&b, &m, rss) == ST_EINVAL);
    CHECK(st_table_write_metric(&b, &m, ST_TIMER_WALL) == ST_EINVAL);
    st_output_opts_t ro;
    st_output_opts_init(&ro);
    CHECK(st_format_render(&b, &m, ST_FMT_TEXT, &ro, &msg) == 0);
    LACKS(&b, "FREES");
    CONTAINS(&b, "STACK SAMPLES");
    /* below the depth cap, one row: the calls, and the samples, under it */
    st_pathtab_t deep;
    CHECK(st_pathtab_init(&deep, &reg, 0) == 0);
    st_play_init(&pl, &deep, 2);
    uint64_t zero[2] = {0, 0};
    for (int i = 0; i < ST_TABLE_MAX_DEPTH + 10; i++)
        CHECK(st_play_enter(&pl, 1, zero) == 0);
    for (int i = 0; i < ST_TABLE_MAX_DEPTH + 10; i++)
        CHECK(st_play_exit(&pl, zero) == 0);
    st_play_free(&pl);
    st_mcols_u64(&deep.cols, samples)[deep.nnodes - 1] = 5;
    st_model_thread_t dth = th;
    dth.paths = &deep;
    st_model_t dm = m;
    dm.threads = &dth;
    st_strbuf_reset(&b);
    CHECK(st_table_write_metric(&b, &dm, samples) == 0);
    CONTAINS(&b, "|_... 9 calls in 9 deeper nodes (folded) |      9 |    257 |      5 |      5 |"
                 "  100.0 |   100.0 |\n");
    LACKS(&b, "|    258 |");
    st_pathtab_free(&deep);
    st_strbuf_free(&b);
    st_profile_free(&p);
    free(first);
    free(second);
    st_settings_free(&settings);
    st_intern_free(&labels);
    st_pathtab_free(&t);
    st_metrics_free(&reg);
}

static void test_merge(void)
{
    fixture_t f;
    fixture(&f);
    /* two runs: everything doubles, means stay, min/max kept */
    const st_model_t *two[2] = {&f.m, &f.m};
    st_profile_t p;
    st_msg_t msg;
    CHECK(st_merge(&p, two, 2, 0, &msg) == 0);
    CHECK(p.nthreads == 1 && p.model.nruns == 2 && p.model.nranks == 0);
    const st_pathtab_t *t = &p.paths[0];
    CHECK(t->nnodes == f.tree.nnodes);
    const st_tstat_t *main_ = st_model_tstat(&p.threads[0], ST_TIMER_WALL, 1);
    CHECK(main_->count == 2 && main_->sum == 2000 && main_->min == 1000);
    double mean, var;
    st_tstat_stats(main_, &mean, &var);
    CHECK(fabs(mean - 1000) < 1e-9 && fabs(var) < 1e-9);
    st_fgraph_t g;
    CHECK(st_fgraph_build(&g, &p.model, -1) == 0);
    CHECK(g.fns[st_fgraph_fn_of(&g, &p.model, st_intern_str(&p.labels, 1)[0] ? 1 : 1)].nc > 0);
    st_fgraph_free(&g);
    st_profile_free(&p);

    /* ranks: kept apart; rank 2 never ran fib */
    fixture_t r2;
    fixture(&r2);
    for (uint32_t i = 2; i <= 4; i++) { /* pretend fib never ran there */
        st_tstat_t *fib = &st_mcols_timer(&r2.tree.cols, ST_TIMER_WALL)[i];
        fib->count = fib->merged = 0;
    }
    f.th.has_rank = 1;
    f.th.rank = 0;
    r2.th.has_rank = 1;
    r2.th.rank = 2;
    fixture_t r1;
    fixture(&r1);
    r1.th.has_rank = 1;
    r1.th.rank = 1;
    const st_model_t *ranks[3] = {&r2.m, &f.m, &r1.m};
    CHECK(st_merge(&p, ranks, 3, 0, &msg) == 0);
    CHECK(p.nthreads == 3 && p.model.nranks == 3 && p.model.nruns == 1);
    CHECK(p.threads[0].rank == 0 && p.threads[1].rank == 1 && p.threads[2].rank == 2);
    st_strbuf_t b;
    st_strbuf_init(&b);
    CHECK(st_loadbal_write(&b, &p.model, 6) == 0);
    if (getenv("SHOW"))
        fputs(st_strbuf_cstr(&b), stderr);
    CONTAINS(&b, "3 of 3 ranks did any work\n");
    CONTAINS(&b, "LOAD BALANCE ACROSS MPI RANKS");
    CONTAINS(&b, "| fib [app.py:10] ");
    /* fib: ranks 0 and 1 took 600 ns, rank 2 none: min 0, max 0.0000006, mean 0.0000004 */
    CONTAINS(&b, "|      2 | 0.000000 | 0.000001 | 0.000000 | 0.000000 |        33.3 | 2 ");
    /* the text format of a rank result sums the ranks and adds the table */
    st_strbuf_reset(&b);
    st_output_opts_t ro;
    st_output_opts_init(&ro);
    CHECK(st_format_render(&b, &p.model, ST_FMT_TEXT, &ro, &msg) == 0);
    CONTAINS(&b, "| |0>>> main ");
    CONTAINS(&b, "LOAD BALANCE");
    st_strbuf_free(&b);
    /* a merged result round-trips through profile.json with its ranks */
    char *js = json_of(&p.model);
    st_profile_t back;
    CHECK(st_profile_parse(&back, js, strlen(js), "m", &msg) == 0);
    CHECK(back.model.nranks == 3 && back.nthreads == 3 && back.threads[2].has_rank &&
          back.threads[2].rank == 2);
    st_profile_free(&back);
    free(js);
    st_profile_free(&p);
    fixture_free(&r1);
    fixture_free(&r2);
    fixture_free(&f);
}

/* Found by the fuzzer: a profile with no threads, merged and rendered. */
static void test_empty(void)
{
    const char *text = "{\"format_version\": 1, \"threads\": []}";
    st_profile_t p, m;
    st_msg_t msg;
    CHECK(st_profile_parse(&p, text, strlen(text), "e", &msg) == 0);
    const st_model_t *two[2] = {&p.model, &p.model};
    CHECK(st_merge(&m, two, 2, 0, &msg) == 0 && m.nthreads == 0);
    st_output_opts_t o;
    st_output_opts_init(&o);
    for (int f = 0; f < ST_NFORMATS; f++) {
        if (f == ST_FMT_PNG || f == ST_FMT_SVG)
            continue;
        st_strbuf_t b;
        st_strbuf_init(&b);
        CHECK(st_format_render(&b, &m.model, (st_format_t)f, &o, &msg) == 0);
        st_strbuf_free(&b);
    }
    st_profile_free(&m);
    st_profile_free(&p);
}

/* Line timings of one function from two runs: the lines summed where both ran, the
 * others kept, in line order; the source kept from the first run that had one. */
static void test_lfunc_merge(void)
{
    st_profile_t p;
    CHECK(st_profile_init(&p) == 0);
    const st_model_lrow_t a[] = {{1, 2, 10, 2, 100, 900}, {5, 1, 7, 0, 0, 0}};
    const st_model_lrow_t b[] = {{3, 4, 1, 0, 0, 0}, {5, 2, 3, 2, -50, 700}, {7, 1, 1, 1, 5, 5}};
    const char *src[] = {"def f():", "    pass"};
    st_model_lfunc_t fa = {"f", "x.py", 1, a, 2, NULL, 0};
    st_model_lfunc_t fb = {"f", "x.py", 1, b, 3, src, 2};
    st_model_lfunc_t other = {"f", "x.py", 9, b, 1, NULL, 0}; /* another first line */
    CHECK(st_profile_add_lfunc(&p, &fa) == 0 && st_profile_add_lfunc(&p, &fb) == 0 &&
          st_profile_add_lfunc(&p, &other) == 0);
    CHECK(p.model.nlfuncs == 2);
    const st_model_lfunc_t *f = &p.model.lfuncs[0];
    CHECK(f->nrows == 4 && f->rows[0].line == 1 && f->rows[1].line == 3 && f->rows[2].line == 5 &&
          f->rows[2].hits == 3 && f->rows[2].ns == 10 && f->rows[3].line == 7);
    /* memory: occurrences and increments add up, the highest memory is kept */
    CHECK(f->rows[0].occ == 2 && f->rows[0].mem == 900 && f->rows[2].occ == 2 &&
          f->rows[2].inc == -50 && f->rows[2].mem == 700);
    CHECK(f->nsource == 2 && strcmp(f->source[1], "    pass") == 0);
    st_profile_free(&p);
}

static void test_formats(void)
{
    unsigned mask;
    st_msg_t msg;
    CHECK(st_formats_parse("text,pstats html", &mask, &msg) == 0 &&
          mask == ((1u << ST_FMT_TEXT) | (1u << ST_FMT_PSTATS) | (1u << ST_FMT_HTML)));
    CHECK(st_formats_parse("pstat", &mask, &msg) == ST_EINVAL && strstr(msg.text, "'pstat'"));
    char name[64];
    st_format_file_name(ST_FMT_JSON, 1, 3, name, sizeof name);
    CHECK(strcmp(name, "profile-3.json") == 0);
    st_format_file_name(ST_FMT_PSTATS, 0, 0, name, sizeof name);
    CHECK(strcmp(name, "profile.prof") == 0);
    st_format_file_name(ST_FMT_TEXT, 0, 0, name, sizeof name);
    CHECK(strcmp(name, "wall_clock.txt") == 0);
    /* The registry is the one list of formats: every entry renders, and the
     * settings registry (which the core holds, below the writers) offers exactly its
     * names, in its order, for STRATA_OUTPUT_FORMATS. */
    char names[256] = "";
    for (int f = 0; f < ST_NFORMATS; f++) {
        const st_output_format_t *e = st_output_format((st_format_t)f);
        CHECK(e->name && e->stem && e->ext && e->render);
        CHECK(st_format_find(e->name) == f);
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", f ? "," : "",
                 e->name);
    }
    CHECK(strcmp(names, st_setting_def(ST_S_OUTPUT_FORMATS)->choices) == 0);
    CHECK(st_formats_parse("bogus", &mask, &msg) == ST_EINVAL &&
          strstr(msg.text, "(choose from text, json, pstats, dot, png, svg, folded, speedscope, "
                           "callgrind, html, lines, lprof, memory, mprof, memplot, memplot-png)"));
}

/* The rows of grid_rows() under a title, in one of the grid's modes. */
static void grid_rows(st_grid_t *g)
{
    static const char *cells[][3] = {
        {"main", "1", "0.5"},
        {"a label \x1b]0;title\x07 with\nescapes", "12345678901", ""},
        {"caf\xc3\xa9 \xff", "", "3.25"},
        {"x", "2", "100.000000000"},
    };
    for (size_t r = 0; r < sizeof cells / sizeof cells[0]; r++) {
        st_grid_row(g);
        for (int c = 0; c < 3; c++)
            if (cells[r][c][0])
                st_grid_cell_str(g, c, cells[r][c]);
    }
}

static void grid_columns(st_grid_t *g)
{
    st_grid_init(g);
    st_grid_column(g, "LABEL", 0);
    st_grid_column(g, "COUNT", 1);
    st_grid_column(g, "A LONGER HEADER", 1);
}

/* A streamed grid (rows made twice, each cell written as it is set) writes byte for byte what
 * the grid that keeps every row renders, escapes, empty cells and widths included;
 * a streamed grid that failed marks its output failed. */
static void test_grid_stream(void)
{
    st_grid_t g;
    st_strbuf_t kept, streamed;
    st_strbuf_init(&kept);
    st_strbuf_init(&streamed);
    grid_columns(&g);
    grid_rows(&g);
    st_grid_render(&kept, &g, "A TABLE");
    st_grid_free(&g);

    grid_columns(&g);
    st_grid_measure(&g);
    grid_rows(&g);
    st_grid_stream(&g, &streamed, "A TABLE");
    grid_rows(&g);
    st_grid_end(&g);
    CHECK(g.nrows == 0 && g.caprows <= 64);
    st_grid_free(&g);
    CHECK(!kept.failed && !streamed.failed);
    CHECK_STR(st_strbuf_cstr(&streamed), st_strbuf_cstr(&kept));
    CHECK(strstr(st_strbuf_cstr(&kept), "\\e]0;title\\x07 with\\nescapes") != NULL);

    st_strbuf_t bad;
    st_strbuf_init(&bad);
    grid_columns(&g);
    st_grid_measure(&g);
    grid_rows(&g);
    st_grid_stream(&g, &bad, "A TABLE");
    g.failed = 1;
    st_grid_end(&g);
    CHECK(bad.failed);
    st_grid_free(&g);
    st_strbuf_free(&bad);

    /* a streamed row's cells come in column order: one set out of it fails */
    st_strbuf_init(&bad);
    grid_columns(&g);
    st_grid_measure(&g);
    grid_rows(&g);
    st_grid_stream(&g, &bad, "A TABLE");
    st_grid_row(&g);
    st_grid_cell_str(&g, 2, "1");
    st_grid_cell_str(&g, 1, "2");
    st_grid_end(&g);
    CHECK(g.failed && bad.failed);
    st_grid_free(&g);
    st_strbuf_free(&bad);
    st_strbuf_free(&kept);
    st_strbuf_free(&streamed);
}

/* The widths a streamed table measures without formatting are the widths printf
 * writes: every value where the grid is sure, near powers of ten, rounding edges. */
static void test_grid_widths(void)
{
    char text[128];
    int wrong = 0, sure = 0;
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
        double v;
        switch (i % 4) {
        case 0: v = (double)(x >> 11) / (double)(1ull << 53) * 20.0; break; /* [0, 20) */
        case 1: v = ldexp((double)(x >> 11), (int)(x % 90) - 90); break;   /* tiny to 1e10 */
        case 2: v = pow(10.0, (double)(x % 15)) - ldexp(1.0, -(int)(x % 60)); break;
        default: v = pow(10.0, (double)(x % 15)) * (1 - 1e-9 * (double)(x % 7)); break;
        }
        for (int p = 0; p <= 12; p++) {
            size_t w = st_grid_fixed_width(v, p);
            if (!w)
                continue;
            sure++;
            if (w != (size_t)snprintf(text, sizeof text, "%.*f", p, v) && wrong++ < 5)
                fprintf(stderr, "%.17g at %d: %zu, printf %s\n", v, p, w, text);
        }
        if (st_grid_uint_width(x >> (x % 64)) !=
            (size_t)snprintf(text, sizeof text, "%llu", (unsigned long long)(x >> (x % 64))))
            wrong++;
    }
    CHECK(wrong == 0);
    CHECK(sure > 2000000);
    CHECK(st_grid_fixed_width(9.9999996, 6) == 0 && st_grid_fixed_width(0.0, 6) == 8);
    CHECK(st_grid_fixed_width(-0.0, 6) == 0 && st_grid_fixed_width(NAN, 1) == 0);
    CHECK(st_grid_uint_width(0) == 1 && st_grid_uint_width(UINT64_MAX) == 20);
}

int main(void)
{
    test_lfunc_merge();
    test_fgraph();
    test_pstats();
    test_dot();
    test_folded_speedscope_callgrind();
    test_html();
    test_jsonpull();
    test_roundtrip();
    test_metrics_v2();
    test_merge();
    test_empty();
    test_formats();
    test_grid_stream();
    test_grid_widths();
    return st_check_report();
}
