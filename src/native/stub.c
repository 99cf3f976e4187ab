/* libstrata.so: the API's functions doing nothing, for programs that call them
 * without the header's weak references (Fortran's `use strata`, or C linked with
 * -lstrata). Under `strata run` the preloaded library, searched before this one,
 * defines them for real. Nothing else here: it lives in every such program. */
#define EXPORT __attribute__((visibility("default")))

EXPORT void strata__push(const char *name);
EXPORT void strata__pop(void);
EXPORT void strata__mark(const char *name);
EXPORT void strata__counter(const char *name, double value);
EXPORT void strata__start(void);
EXPORT void strata__stop(void);

EXPORT void strata__push(const char *name)
{
    (void)name;
}

EXPORT void strata__pop(void)
{
}

EXPORT void strata__mark(const char *name)
{
    (void)name;
}

EXPORT void strata__counter(const char *name, double value)
{
    (void)name;
    (void)value;
}

EXPORT void strata__start(void)
{
}

EXPORT void strata__stop(void)
{
}
