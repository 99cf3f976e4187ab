/* Unit tests of the session's collector list (session/collector.h): collectors start
 * in order and stop in reverse, a failed start stops those started and removes the
 * empty results folder, and writing the results flushes every collector that ran
 * before any contributes to the model. Prints "N passed, N failed"; exits non-zero
 * on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "core/settings.h"
#include "session/collector.h"
#include "session/session.h"

#include "check.h"

static char tmpdir[64];
static char journal[512]; /* what the collectors were asked to do, in order */

static void note(const st_collector_t *c, const char *what)
{
    size_t n = strlen(journal);
    snprintf(journal + n, sizeof journal - n, "%s%s.%s", n ? " " : "", c->name, what);
}

static int fake_start(st_collector_t *c, st_session_t *s, st_msg_t *msg)
{
    (void)s;
    note(c, "start");
    return c->ctx ? st_msg_set(msg, ST_EIO, "%s cannot start", c->name) : 0;
}
static void fake_stop(st_collector_t *c, st_session_t *s)
{
    (void)s;
    note(c, "stop");
}
static int fake_flush(st_collector_t *c, st_session_t *s, st_msg_t *msg)
{
    (void)s;
    (void)msg;
    note(c, "flush");
    return 0;
}
static void fake_contribute(const st_collector_t *c, const st_session_t *s, st_model_t *m)
{
    (void)s;
    note(c, "contribute");
    m->python_version = "9.9.9";
}

static st_collector_t fake(const char *name, int fails)
{
    return (st_collector_t){.name = name, .ctx = fails ? (void *)1 : NULL, .start = fake_start,
                            .stop = fake_stop, .flush = fake_flush,
                            .contribute = fake_contribute};
}

/* A session writing only profile.json into dir. */
static int begin(st_session_t *s, const char *dir)
{
    st_settings_t set;
    st_msg_t msg;
    char *argv[] = {"app.py"};
    int rc = st_settings_init(&set);
    if (rc == 0)
        rc = st_settings_set(&set, ST_S_OUTPUT_PATH, dir, ST_SRC_API, &msg);
    if (rc == 0)
        rc = st_settings_set(&set, ST_S_OUTPUT_FORMATS, "json", ST_SRC_API, &msg);
    if (rc == 0)
        rc = st_session_begin(s, &set, "app", 1, argv, &msg);
    st_settings_free(&set);
    return rc;
}

static void test_order(void)
{
    char dir[128], path[192];
    snprintf(dir, sizeof dir, "%s/run", tmpdir);
    st_session_t s;
    CHECK(begin(&s, dir) == 0);
    st_collector_t a = fake("a", 0), b = fake("b", 0);
    CHECK(st_session_add_collector(&s, &a) == 0 && st_session_add_collector(&s, &b) == 0);
    st_msg_t msg;
    journal[0] = '\0';
    CHECK(st_session_start(&s, &msg) == 0);
    st_session_stop(&s);
    st_session_stop(&s); /* once */
    CHECK_STR(journal, "a.start b.start b.stop a.stop");
    journal[0] = '\0';
    CHECK(st_session_finish(&s, NULL, NULL, NULL, &msg) == 0);
    CHECK_STR(journal, "a.flush b.flush a.contribute b.contribute");
    /* what they contributed is in the results */
    snprintf(path, sizeof path, "%s/profile.json", dir);
    FILE *f = fopen(path, "r");
    char text[65536] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    CHECK(strstr(text, "\"9.9.9\"") != NULL);
    st_session_free(&s);
    unlink(path);
    rmdir(dir);
}

static void test_failed_start(void)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/failed", tmpdir);
    st_session_t s;
    CHECK(begin(&s, dir) == 0);
    struct stat st;
    CHECK(stat(dir, &st) == 0); /* made, with its note */
    st_collector_t a = fake("a", 0), b = fake("b", 1), c = fake("c", 0);
    CHECK(st_session_add_collector(&s, &a) == 0 && st_session_add_collector(&s, &b) == 0 &&
          st_session_add_collector(&s, &c) == 0);
    st_msg_t msg;
    journal[0] = '\0';
    CHECK(st_session_start(&s, &msg) == ST_EIO);
    CHECK_STR(msg.text, "b cannot start");
    CHECK_STR(journal, "a.start b.start a.stop"); /* c never started, b never ran */
    CHECK(stat(dir, &st) != 0);                  /* nothing ran: the folder is gone */
    st_session_stop(&s);
    CHECK_STR(journal, "a.start b.start a.stop");
    st_session_free(&s);
}

static void test_full_list(void)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/full", tmpdir);
    st_session_t s;
    CHECK(begin(&s, dir) == 0);
    st_collector_t a = fake("a", 0);
    int added = 0;
    while (st_session_add_collector(&s, &a) == 0)
        added++;
    CHECK(s.ncollectors == ST_SESSION_MAX_COLLECTORS && added > 0);
    st_session_unmark(&s);
    rmdir(dir);
    st_session_free(&s);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/strata-session-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_order();
    test_failed_start();
    test_full_list();
    rmdir(tmpdir);
    return st_check_report();
}
