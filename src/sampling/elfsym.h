/* Function symbols of one ELF file on disk (.symtab, else .dynsym), for the
 * symboliser's fallback when libdw or debug information is missing. Reads the
 * file, not the loaded image, so it works after a dlclose too. Every offset of
 * the file is checked against its size. Not thread-safe; never in a handler. */
#ifndef STRATA_SAMPLING_ELFSYM_H
#define STRATA_SAMPLING_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t value, size;   /* file virtual address, bytes (0: unknown) */
    const char *name;       /* in the file's mapping */
} st_elfsym_t;

typedef struct {
    void *map;
    size_t map_size;
    st_elfsym_t *syms;      /* n entries sorted by value */
    size_t n;
} st_elfsyms_t;

/* Maps path and collects its function symbols. 0, ST_EIO (cannot open or map)
 * or ST_EINVAL (not a 64-bit ELF file, or no symbol table); e is empty then. */
int st_elfsyms_open(st_elfsyms_t *e, const char *path);

/* The function holding file virtual address vaddr, or NULL; *start (if not
 * NULL) gets its first address. The name lives until st_elfsyms_close. */
const char *st_elfsyms_lookup(const st_elfsyms_t *e, uint64_t vaddr, uint64_t *start);

/* Unmaps; e is empty afterwards. */
void st_elfsyms_close(st_elfsyms_t *e);

#endif
