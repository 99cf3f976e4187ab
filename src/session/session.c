#include "session/session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/components.h"
#include "core/model.h"
#include "core/strbuf.h"
#include "output/json.h"
#include "output/table.h"

int st_session_init(st_session_t *s, const st_settings_t *settings, st_msg_t *msg)
{
    memset(s, 0, sizeof *s);
    if (st_settings_copy(&s->settings, settings) < 0)
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    st_intern_init(&s->labels);
    for (int c = 0; c < ST_NCOMPONENTS; c++)
        if (st_settings_has(settings, ST_S_COMPONENTS, st_component_info((st_component_t)c)->name))
            s->components |= 1u << c;
    if (!s->components) {
        st_session_free(s);
        return st_msg_set(msg, ST_EINVAL, "STRATA_COMPONENTS: no component chosen (choose from "
                                          "trip_count,wall_clock,cpu_clock)");
    }
    s->ntimers = (s->components & (1u << ST_COMP_CPU_CLOCK))    ? 2
                 : (s->components & (1u << ST_COMP_WALL_CLOCK)) ? 1
                                                                 : 0;
    s->start_ns = st_clock_realtime_ns();
    return 0;
}

void st_session_free(st_session_t *s)
{
    for (size_t i = 0; i < s->nthreads; i++) {
        st_calltree_free(&s->threads[i]->tree);
        free(s->threads[i]);
    }
    free(s->threads);
    for (size_t i = 0; i < s->ncommand; i++)
        free(s->command[i]);
    free(s->command);
    st_intern_free(&s->labels);
    st_settings_free(&s->settings);
    memset(s, 0, sizeof *s);
}

int st_session_set_command(st_session_t *s, int argc, char *const *argv)
{
    char **cmd = calloc((size_t)argc + 1, sizeof *cmd);
    if (!cmd)
        return ST_ENOMEM;
    for (int i = 0; i < argc; i++) {
        if (!(cmd[i] = strdup(argv[i]))) {
            for (int j = 0; j < i; j++)
                free(cmd[j]);
            free(cmd);
            return ST_ENOMEM;
        }
    }
    for (size_t i = 0; i < s->ncommand; i++)
        free(s->command[i]);
    free(s->command);
    s->command = cmd;
    s->ncommand = (size_t)argc;
    return 0;
}

/* mkdir -p; returns 0 or -1 with errno set. */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int st_session_make_outdir(st_session_t *s, const char *target, st_msg_t *msg)
{
    const char *want = st_settings_str(&s->settings, ST_S_OUTPUT_PATH);
    char path[PATH_MAX];
    if (*want) {
        if (snprintf(path, sizeof path, "%s", want) >= (int)sizeof path)
            return st_msg_set(msg, ST_EINVAL, "output folder name too long: '%s'", want);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char stamp[64];
        strftime(stamp, sizeof stamp, "%Y-%m-%d_%H.%M.%S", &tm);
        char base[PATH_MAX];
        if (snprintf(base, sizeof base, "strata-%s-output/%s", target, stamp) >= (int)sizeof base)
            return st_msg_set(msg, ST_EINVAL, "output folder name too long");
        snprintf(path, sizeof path, "%s", base);
        struct stat st;
        for (int k = 2; stat(path, &st) == 0 && k < 1000; k++)
            if (snprintf(path, sizeof path, "%s_%d", base, k) >= (int)sizeof path)
                return st_msg_set(msg, ST_EINVAL, "output folder name too long");
    }
    if (make_dirs(path) != 0 || access(path, W_OK | X_OK) != 0)
        return st_msg_set(msg, ST_EIO, "cannot create the results folder '%s': %s", path,
                          strerror(errno ? errno : EACCES));
    snprintf(s->outdir, sizeof s->outdir, "%s", path);
    return 0;
}

st_thread_t *st_session_new_thread(st_session_t *s, uint64_t tid, const char *name)
{
    if (s->nthreads == s->capthreads) {
        size_t cap = s->capthreads ? s->capthreads * 2 : 8;
        st_thread_t **p = realloc(s->threads, cap * sizeof *p);
        if (!p)
            return NULL;
        s->threads = p;
        s->capthreads = cap;
    }
    st_thread_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (st_calltree_init(&t->tree, (uint32_t)st_settings_int(&s->settings, ST_S_MAX_NODES)) < 0) {
        free(t);
        return NULL;
    }
    t->index = (uint32_t)s->nthreads;
    t->tid = tid;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    s->threads[s->nthreads++] = t;
    return t;
}

/* Writes data to dir/name through dir/.name.tmp, renamed into place. */
static int write_file(const char *dir, const char *name, const st_strbuf_t *data, st_msg_t *msg)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path ||
        snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name) >= (int)sizeof tmp)
        return st_msg_set(msg, ST_EIO, "results path too long in '%s'", dir);
    if (data->failed)
        return st_msg_set(msg, ST_ENOMEM, "out of memory writing '%s'", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(errno));
    size_t n = fwrite(data->data ? data->data : "", 1, data->len, f);
    int bad = n != data->len || ferror(f);
    int err = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (bad || rename(tmp, path) != 0) {
        if (!bad)
            err = errno;
        unlink(tmp);
        return st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(err));
    }
    return 0;
}

int st_session_write(st_session_t *s, const double ns_per_tick[ST_NTIMERS],
                     const char *clock_name, FILE *tables, st_msg_t *msg)
{
    st_model_thread_t *threads = calloc(s->nthreads ? s->nthreads : 1, sizeof *threads);
    if (!threads)
        return st_msg_set(msg, ST_ENOMEM, "out of memory writing results");
    uint64_t dropped = 0;
    for (size_t i = 0; i < s->nthreads; i++) {
        threads[i].tree = &s->threads[i]->tree;
        threads[i].index = s->threads[i]->index;
        threads[i].tid = s->threads[i]->tid;
        threads[i].name = s->threads[i]->name;
        dropped += s->threads[i]->tree.dropped;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    st_model_t m = {
        .labels = &s->labels,
        .threads = threads,
        .nthreads = s->nthreads,
        .settings = &s->settings,
        .components = s->components,
        .command = (const char *const *)s->command,
        .ncommand = s->ncommand,
        .python_version = s->python_version,
        .clock_name = clock_name,
        .pid = (long)getpid(),
        .host = host,
        .start_ns = s->start_ns,
        .end_ns = st_clock_realtime_ns(),
        .dropped = dropped,
    };
    for (int i = 0; i < ST_NTIMERS; i++)
        m.ns_per_tick[i] = ns_per_tick[i];

    int rc = 0;
    int precision = (int)st_settings_int(&s->settings, ST_S_PRECISION);
    st_strbuf_t buf, all;
    st_strbuf_init(&buf);
    st_strbuf_init(&all);
    for (int c = 0; c < ST_NCOMPONENTS && rc == 0; c++) {
        if (!(s->components & (1u << c)))
            continue;
        const st_component_info_t *info = st_component_info((st_component_t)c);
        st_strbuf_reset(&buf);
        st_table_write(&buf, &m, (st_component_t)c, precision);
        char name[64];
        snprintf(name, sizeof name, "%s.txt", info->name);
        rc = write_file(s->outdir, name, &buf, msg);
        if (all.len)
            st_strbuf_putc(&all, '\n');
        st_strbuf_add(&all, buf.data ? buf.data : "", buf.len);
    }
    if (rc == 0) {
        st_strbuf_reset(&buf);
        st_json_write(&buf, &m);
        rc = write_file(s->outdir, "profile.json", &buf, msg);
    }
    if (tables && !all.failed) {
        fputs(st_strbuf_cstr(&all), tables);
        if (rc == 0)
            fprintf(tables, "[strata] results in %s\n", s->outdir);
        if (dropped)
            fprintf(tables, "[strata] %llu calls were not recorded (STRATA_MAX_NODES reached)\n",
                    (unsigned long long)dropped);
        fflush(tables);
    }
    st_strbuf_free(&buf);
    st_strbuf_free(&all);
    free(threads);
    s->written = rc == 0;
    return rc;
}
