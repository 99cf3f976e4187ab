/* strata's public C and C++ API: regions of a program's own, timed by strata.
 *
 *     #include <strata.h>
 *     strata_push("solve");       ... strata_pop();
 *     { strata::region r("solve"); ... }        // C++: the scope is the region
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
