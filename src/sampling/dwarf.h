/* The symboliser's libdw path (elfutils' libdw.so.1, loaded with dlopen so that
 * strata builds and runs without it; its headers, Debian libdw-dev, are needed
 * at build time, else this path is compiled out and st_dw_load says so).
 * One Dwfl session per file: the file is reported at bias 0, so addresses are
 * the file's own virtual addresses (address - load bias), which holds for a
 * library unloaded since, or loaded at several places. Debug information is
 * found as elfutils finds it (the file, .gnu_debuglink, /usr/lib/debug/.build-id).
 * A file without .debug_aranges (clang's default), which libdw 0.188 needs to
 * find an address's CU, is searched CU by CU (once per address: symbols.c
 * caches).
 * Not thread-safe; never in a handler. */
#ifndef STRATA_SAMPLING_DWARF_H
#define STRATA_SAMPLING_DWARF_H

#include <stdint.h>

#include "base/err.h"

typedef struct st_dwfile st_dwfile_t;

/* Receives one frame of an address, innermost first: the function's name (a
 * linkage name where DWARF has one, so possibly mangled; NULL: unknown), its
 * source file (NULL: unknown) and line (0: unknown), and whether it is inlined
 * into the next one. The strings live only during the call. Returns 0 to go
 * on, < 0 to stop. */
typedef int (*st_dw_emit_fn)(void *arg, const char *function, const char *file, int line,
                             int inlined);

/* Loads libdw once per process. 0, or ST_EINVAL with msg saying why not. */
int st_dw_load(st_msg_t *msg);

/* Opens the file at path for lookups; NULL when it cannot be read, or when
 * build_id (build_id_len > 0) is not the file's (the file changed since it was
 * loaded). */
st_dwfile_t *st_dw_open(const char *path, const unsigned char *build_id, int build_id_len);

/* The frames at file virtual address vaddr, passed to emit: the inlined ones,
 * innermost first, then the function holding them; the ELF symbol's name when
 * there is no debug information. Returns the number of frames given (0: none
 * known) or what emit returned when < 0. */
int st_dw_resolve(st_dwfile_t *f, uint64_t vaddr, st_dw_emit_fn emit, void *arg);

/* The function's name alone at vaddr, from the symbol table libdw finds for the
 * file (its own, or its separate debug file's: internal functions included),
 * without reading DWARF: the cheap lookup for system libraries. Returns 1, or 0
 * when no symbol holds vaddr. */
int st_dw_resolve_name(st_dwfile_t *f, uint64_t vaddr, st_dw_emit_fn emit, void *arg);

/* Ends the file's session. */
void st_dw_close(st_dwfile_t *f);

#endif
