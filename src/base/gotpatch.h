/* Redirecting the calls a loaded shared object makes to a function of another one.
 *
 * A call from one ELF object to a function defined in another goes through a slot of
 * the caller's global offset table, which the dynamic linker fills with the function's
 * address (a JUMP_SLOT relocation for a call through the PLT, a GLOB_DAT one for a
 * call or an address taken without it). Writing another address into those slots
 * sends that object's calls there: how a profiler sees the mallocs of C libraries it
 * did not link and cannot preload into an interpreter that is already running.
 *
 * Only the objects the caller keeps are touched; the slots of one object that refer
 * to the symbol are all rewritten, whatever it bound to. Read-only slots (RELRO) are
 * made writable for the write and read-only again. A call already under way, or an
 * address the object saved elsewhere, is not affected. Thread-safe against the
 * program's calls (one aligned store a slot); not against a dlclose of the object
 * meanwhile, nor another thread redirecting at the same time. x86-64 and AArch64. */
#ifndef STRATA_BASE_GOTPATCH_H
#define STRATA_BASE_GOTPATCH_H

#include <stddef.h>

struct dl_phdr_info; /* <link.h>, with _GNU_SOURCE */

typedef struct {
    const char *symbol;      /* the function's name */
    void *from;              /* only slots holding this address, or NULL: any */
    void *to;                /* the address written */
} st_got_redirect_t;

/* Which objects to touch: 1 to redirect obj's slots. */
typedef int (*st_got_keep_t)(const struct dl_phdr_info *obj, void *arg);

/* Rewrites the slots of every loaded object keep accepts (NULL: all) that refer to
 * one of the n symbols. Returns the number of slots rewritten (0: none needed), or
 * a negative st_err code when a slot could not be made writable (the slots done so
 * far stay done). */
int st_got_redirect(const st_got_redirect_t *r, size_t n, st_got_keep_t keep, void *arg);

/* 1 when addr lies in one of obj's loaded segments. */
int st_got_holds(const struct dl_phdr_info *obj, const void *addr);

/* 1 when obj names its own library search paths (DT_RPATH or DT_RUNPATH): a dlopen
 * it makes depends on who calls, and cannot be made from another object. */
int st_got_has_search_path(const struct dl_phdr_info *obj);

/* 1 when obj is the C library, the dynamic linker, or the runtime of a sanitizer
 * or of another allocator: objects a profiler's redirections leave alone (their
 * calls among themselves pair up, and they run before and under everything). */
int st_got_runtime(const struct dl_phdr_info *obj);

/* A keep function: every object but the runtimes and the one that holds the address
 * arg (the caller's own, whose calls are to stay the real ones). */
int st_got_keep_others(const struct dl_phdr_info *obj, void *arg);

/* How many objects have been loaded in the process so far (the dynamic linker's
 * count): changes when a new one comes. */
unsigned long long st_got_loads(void);

#endif
