#include "core/components.h"

#include <string.h>

static const st_component_info_t infos[ST_NCOMPONENTS] = {
    {"trip_count", "COUNTS NUMBER OF INVOCATIONS", "", "number of calls", -1},
    {"wall_clock", "REAL-CLOCK TIMER (I.E. WALL-CLOCK TIMER)", "sec",
     "elapsed (wall-clock) time", ST_TIMER_WALL},
    {"cpu_clock", "CPU-CLOCK TIMER FOR THE CALLING THREAD", "sec",
     "CPU time of the calling thread (a system call per event)", ST_TIMER_CPU},
};

const st_component_info_t *st_component_info(st_component_t c) { return &infos[c]; }

int st_component_find(const char *name)
{
    for (int i = 0; i < ST_NCOMPONENTS; i++)
        if (strcmp(infos[i].name, name) == 0)
            return i;
    return -1;
}
