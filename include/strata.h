/* strata's public C and C++ API: regions of a program's own, timed by strata.
 *
 *     #include <strata.h>
 *     strata_push("solve");       ... strata_pop();
 *     { strata::region r("solve"); ... }        // C++: the scope is the region
 *     strata_mark("converged");                 // a point in time, on the timeline
 *     strata_counter("residual", r);            // a value over time, on the timeline
 *     strata_stop(); ... strata_start();        // nothing entered in between
 *
 * Header only: a program built with it needs no library and runs as before when
 * not run under strata; under `strata run -- program` (or `strata sample`),
 * strata's preloaded library defines the functions these call, and each region
 * is a node of the call tree (beside the functions of -finstrument-functions),
 * with its time, in every table, trace and report. Regions nest; every push needs
 * its pop on the same thread. The name is copied when first seen: a buffer whose
 * text changes later names a new region. */
#ifndef STRATA_H
#define STRATA_H

#ifdef __cplusplus
extern "C" {
#endif

/* Defined by strata's preload library when it is loaded; absent otherwise. */
extern void strata__push(const char *name) __attribute__((weak));
extern void strata__pop(void) __attribute__((weak));
extern void strata__mark(const char *name) __attribute__((weak));
extern void strata__counter(const char *name, double value) __attribute__((weak));
extern void strata__start(void) __attribute__((weak));
extern void strata__stop(void) __attribute__((weak));

/* Never a function of its own in the call tree (-finstrument-functions). */
#define STRATA__INLINE static inline __attribute__((always_inline, no_instrument_function))

/* Opens the region `name` on the calling thread (a no-op without strata). */
STRATA__INLINE void strata_push(const char *name)
{
    if (strata__push)
        strata__push(name);
}

/* Closes the calling thread's innermost open region (a no-op without strata). */
STRATA__INLINE void strata_pop(void)
{
    if (strata__pop)
        strata__pop();
}

/* A mark named `name` now on the calling thread's track of the timeline (--trace). */
STRATA__INLINE void strata_mark(const char *name)
{
    if (strata__mark)
        strata__mark(name);
}

/* The counter `name` reads `value` now: a counter track of that name on the
 * timeline (--trace), e.g. a solver's residual per iteration. */
STRATA__INLINE void strata_counter(const char *name, double value)
{
    if (strata__counter)
        strata__counter(name, value);
}

/* Stops recording, on every thread, until strata_start(): no function, region,
 * mark or counter is entered meanwhile; calls open at the stop end as they would.
 * Profile one phase: strata_stop() at the start of main, strata_start() and
 * strata_stop() around the phase. */
STRATA__INLINE void strata_stop(void)
{
    if (strata__stop)
        strata__stop();
}

STRATA__INLINE void strata_start(void)
{
    if (strata__start)
        strata__start();
}

#ifdef __cplusplus
}

namespace strata {
/* The region of a scope: pushed when made, popped when it ends. */
class region {
  public:
    __attribute__((always_inline, no_instrument_function)) explicit region(const char *name)
    {
        strata_push(name);
    }
    __attribute__((always_inline, no_instrument_function)) ~region() { strata_pop(); }
    region(const region &) = delete;
    region &operator=(const region &) = delete;
};
} // namespace strata
#endif

#endif
