/* The profile components: what a profile measures on every call.
 *
 * trip_count counts calls (every tree counts them anyway); wall_clock and cpu_clock
 * are the tree's two timers. The table writer and profile.json take their names,
 * titles and units from here. */
#ifndef STRATA_CORE_COMPONENTS_H
#define STRATA_CORE_COMPONENTS_H

/* The timers, numbered as the recorder's timer metrics (ST_REC_WALL, ST_REC_CPU):
 * a model's metric 0 is the wall timer, metric 1 the CPU timer when it was chosen. */
#define ST_TIMER_WALL 0
#define ST_TIMER_CPU 1
#define ST_NTIMERS 2

typedef enum {
    ST_COMP_TRIP_COUNT = 0,
    ST_COMP_WALL_CLOCK = 1,
    ST_COMP_CPU_CLOCK = 2,
    ST_NCOMPONENTS = 3,
} st_component_t;

typedef struct {
    const char *name;         /* as in --components */
    const char *title;        /* the table's title */
    const char *units;        /* "" for counts */
    const char *description;
    int timer;                /* timer (metric id), -1 for trip_count */
} st_component_info_t;

/* Static information about component c (0 <= c < ST_NCOMPONENTS). */
const st_component_info_t *st_component_info(st_component_t c);

/* The component named `name`, or -1. */
int st_component_find(const char *name);

#endif
