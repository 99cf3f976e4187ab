/*
 * benchfloortsc: benchfloor.c's callbacks with one TSC read an event (the clock any
 * timing profiler must read), the floor issue 17 measures strata's bookkeeping
 * against.
 */
#define FLOOR_NAME benchfloortsc
#define FLOOR_TSC 1
#include "benchfloor.c"
