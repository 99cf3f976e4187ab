/* Symbolisation of sampled native addresses, after the run (never in a signal
 * handler): address -> frames (function, file:line), the inlined ones first.
 *
 * Design note. An address is looked up in the module map (modules.h) with the
 * generation it was sampled in, then in that module's file, by its file virtual
 * address (address - load bias), so libraries unloaded since still resolve:
 *   1. libdw (dwarf.h), unless ST_SYMBOLS_NO_DWARF: function, file, line, and
 *      the inlined frames at the address, from the file's DWARF or its separate
 *      debug file; without DWARF, the ELF symbol libdw finds. Libraries of the
 *      system (under /lib, /usr/lib) get the symbol alone (their debug files are
 *      large and slow to read: tens of milliseconds for libc's).
 *   2. Without libdw, or when libdw knows nothing there: the file's ELF symbol
 *      table (elfsym.h): the function only.
 *   3. For an object with no file (the vDSO), while it is still mapped: the
 *      symbol the loader knows there (dladdr).
 *   4. Else "module+0xoffset" (the file's base name), or "0xaddress" outside
 *      every module.
 * C++ names are demangled with __cxa_demangle when the process has it loaded
 * (libstdc++; found with dlsym); otherwise they stay mangled.
 * Each (module entry, address) is resolved once: the frames are cached. Memory
 * is bounded: at most ST_SYMBOLS_MAX_ADDRS addresses cached and
 * ST_SYMBOLS_MAX_INLINE frames per address; past the cap, an address is
 * resolved each time into a scratch record. Not thread-safe. */
#ifndef STRATA_SAMPLING_SYMBOLS_H
#define STRATA_SAMPLING_SYMBOLS_H

#include <stdint.h>

#include "base/err.h"
#include "sampling/modules.h"

#define ST_SYMBOLS_MAX_ADDRS (1 << 20)
#define ST_SYMBOLS_MAX_INLINE 16

/* Flags of st_symbols_new. */
enum {
    ST_SYMBOLS_NO_DWARF = 1,   /* do not use libdw (the fallback alone) */
};

/* One frame of a resolved address. */
typedef struct {
    const char *function;   /* never NULL: a name, "module+0xoffset" or "0xaddress" */
    const char *file;       /* source file, NULL when unknown */
    int line;               /* 0 when unknown */
    int inlined;            /* 1: inlined into the next frame of the same address */
    const char *module;     /* the module's path (owned by the module map), NULL
                               outside every module */
} st_symframe_t;

typedef struct st_symbols st_symbols_t;

/* A symboliser over mods (borrowed: it must outlive the symboliser; it may be
 * refreshed in between). NULL only when out of memory; a missing libdw is not
 * an error (st_symbols_backend says what is used). */
st_symbols_t *st_symbols_new(const st_modules_t *mods, int flags);

/* What resolves names: "libdw", or "ELF symbol tables (<why libdw is not used>)".
 * Lives as long as s. */
const char *st_symbols_backend(const st_symbols_t *s);

/* The frames of pc sampled in module generation gen (0: unknown), innermost
 * first; *frames points at them. Returns their number (>= 1) or ST_ENOMEM.
 * The frames live until st_symbols_free (past the address cap: until the next
 * call). */
int st_symbols_resolve(st_symbols_t *s, uintptr_t pc, uint32_t gen, const st_symframe_t **frames);

/* Frees s and everything it resolved. */
void st_symbols_free(st_symbols_t *s);

#endif
