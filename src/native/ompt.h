/* OpenMP through OMPT (ompt.c): the preloaded library is the tool an OpenMP
 * runtime with the tools interface finds (ompt_start_tool). */
#ifndef STRATA_NATIVE_OMPT_H
#define STRATA_NATIVE_OMPT_H

#include <stdio.h>

/* 1 once a runtime has initialised strata as its tool. */
int st_nompt_active(void);

/* When the program runs GCC's libgomp (no tools interface), one line saying that
 * its parallel regions are not shown, to `notes`. */
void st_nompt_note(FILE *notes);

#endif
