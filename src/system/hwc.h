/* Hardware and software event counters per call: the components perf:EVENT and
 * papi:EVENT.
 *
 * Design note. A counter is read on the thread it counts, at every enter and exit
 * the recorder sees (st_rec_counters_t, core/recorder.h): the recorder charges each
 * increase to the call open meanwhile, so a node of the call tree holds its calls'
 * own events and the tables show self and total, as for time. Two sources:
 *   - perf: perf_event_open(2) on the calling thread (user space only, no
 *     inheritance), every counter of a thread in one group, so that one read(2)
 *     gives them all and the kernel schedules them together (never a multiplexed
 *     part of a group);
 *   - papi: PAPI's named events (presets such as PAPI_TOT_CYC, native ones such as
 *     perf::PAGE-FAULTS), libpapi loaded with dlopen when the first papi counter is
 *     asked for; one event set a thread.
 * A read is a system call (perf) or a library call (PAPI) at every enter and exit:
 * about a microsecond a call, which the call's time includes; counters are for
 * regions and functions that do real work, not for every tiny call.
 * A process forked from a counting one reads nothing (its descriptors count the
 * parent's threads). */
#ifndef STRATA_SYSTEM_HWC_H
#define STRATA_SYSTEM_HWC_H

#include <stdint.h>

#include "base/err.h"
#include "base/strbuf.h"
#include "core/recorder.h"
#include "core/settings.h"

typedef struct {
    int papi;                 /* 0: perf, 1: PAPI */
    char name[96];            /* as given after "perf:" or "papi:" */
    char metric[104];         /* the metric's name: "perf:cycles" */
    const char *unit;         /* "events", "ns" */
    char desc[112];           /* the table's title: "page faults (perf)" */
    uint32_t type;            /* perf: attr.type and attr.config */
    uint64_t config;
} st_hwc_event_t;

typedef struct {
    uint32_t n;
    st_hwc_event_t ev[ST_REC_MAX_COUNTERS];
    st_rec_counters_t rc;     /* what the recorder calls; metric ids filled by the session */
} st_hwc_t;

/* The counters the components setting names (items "perf:EVENT" and
 * "papi:EVENT"; settings.c has spelt every one out). Returns 0 (h->n may be 0),
 * or ST_EINVAL for an unknown perf event or too many counters (msg says which). */
int st_hwc_parse(const st_settings_t *set, st_hwc_t *h, st_msg_t *msg);

/* Opens and reads h's counters once on the calling thread: 0, or ST_EINVAL with a
 * message saying why one cannot count here (no PMU in this machine, PAPI not
 * installed, the event unknown to PAPI, perf_event_paranoid). Before the program
 * starts, so that a counter that cannot work is an error, never an empty column. */
int st_hwc_check(st_hwc_t *h, st_msg_t *msg);

/* Fills h->rc (open, read, close) for h's counters; the caller sets h->rc.metric.
 * h must outlive the recorder. */
void st_hwc_counters(st_hwc_t *h);

/* What this host can count, for `strata avail -H`: every perf event strata names,
 * with whether it opens here (and why not), and PAPI's presets that count here
 * when PAPI is installed. */
void st_hwc_avail(st_strbuf_t *out);

#endif
