/* Collectors: what feeds a session, behind one interface.
 *
 * Design note. A session (session.h) owns a list of collectors: the process
 * sampler and the timeline (built in, added by the session as the settings ask),
 * and whatever the front end adds before the run starts (the Python backend;
 * later a signal-driven stack sampler, the preload library, CUPTI). A collector
 * records through the session's recorder (core/recorder.h) or keeps its own data;
 * the session drives every one the same way and knows none of them:
 *
 *   start(c, s)         the run begins: the results folder exists, the target has
 *                       not started. In list order; when one fails, those started
 *                       are stopped again (reverse order) and the run does not
 *                       happen (the session removes its empty results folder).
 *   stop(c, s)          the run has ended: stop recording (reverse list order),
 *                       before open calls are closed and results written.
 *   flush(c, s)         the results are being written: write the files that are
 *                       the collector's own (the timeline's trace.pftrace) into the
 *                       results folder. Before any contribute, so that what writing
 *                       gave (the timeline's statistics) can be contributed.
 *   contribute(c, s, m) add what the collector knows to the model the writers read:
 *                       metadata (the Python version), summaries (the sampler's
 *                       metrics), statistics (the timeline's). What it points the
 *                       model to must live until the session is freed.
 *
 * Every operation may be NULL (nothing to do). `ctx` is the collector's own state,
 * not owned by the session. All of this runs in the thread that owns the session
 * (the Python front end: with the GIL held). */
#ifndef STRATA_SESSION_COLLECTOR_H
#define STRATA_SESSION_COLLECTOR_H

#include "base/err.h"
#include "model/model.h"

struct st_session;

typedef struct st_collector {
    const char *name;        /* for messages: "python", "process sampler", "timeline" */
    void *ctx;
    /* 0, or a negative st_err code with msg saying why */
    int (*start)(struct st_collector *c, struct st_session *s, st_msg_t *msg);
    void (*stop)(struct st_collector *c, struct st_session *s);
    int (*flush)(struct st_collector *c, struct st_session *s, st_msg_t *msg);
    void (*contribute)(const struct st_collector *c, const struct st_session *s, st_model_t *m);
} st_collector_t;

#endif
