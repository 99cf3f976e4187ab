/* Redirecting calls through global offset tables (see gotpatch.h). */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "base/gotpatch.h"

#include "base/err.h"

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define R_GLOB_DAT R_AARCH64_GLOB_DAT
#else
#error "gotpatch: x86-64 and AArch64 only"
#endif

typedef struct {
    const st_got_redirect_t *r;
    size_t n;
    st_got_keep_t keep;
    void *arg;
    int done;
    int err;
} walk_t;

/* The dynamic linker rebases most objects' dynamic entries in place; a read-only
 * dynamic section (the vDSO's) keeps them relative to the load address. */
static uintptr_t dyn_addr(const struct dl_phdr_info *obj, uintptr_t p)
{
    return p < obj->dlpi_addr ? obj->dlpi_addr + p : p;
}

static const ElfW(Dyn) *dynamic(const struct dl_phdr_info *obj)
{
    for (int i = 0; i < obj->dlpi_phnum; i++)
        if (obj->dlpi_phdr[i].p_type == PT_DYNAMIC)
            return (const ElfW(Dyn) *)(obj->dlpi_addr + obj->dlpi_phdr[i].p_vaddr);
    return NULL;
}

/* 1 when a lies in one of obj's segments of this type (as loaded). */
static int in_segment(const struct dl_phdr_info *obj, uint32_t type, uintptr_t a)
{
    for (int i = 0; i < obj->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &obj->dlpi_phdr[i];
        uintptr_t lo = obj->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == type && a >= lo && a < lo + ph->p_memsz)
            return 1;
    }
    return 0;
}

static int write_slot(const struct dl_phdr_info *obj, void **slot, void *to)
{
    if (!in_segment(obj, PT_GNU_RELRO, (uintptr_t)slot)) {
        __atomic_store_n(slot, to, __ATOMIC_RELAXED);
        return 0;
    }
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    void *lo = (void *)((uintptr_t)slot & ~(page - 1));
    if (mprotect(lo, page, PROT_READ | PROT_WRITE) != 0)
        return ST_EIO;
    __atomic_store_n(slot, to, __ATOMIC_RELAXED);
    mprotect(lo, page, PROT_READ);
    return 0;
}

/* One table of relocations (Rela, x86-64 and AArch64 use no Rel). */
static void redirect_table(walk_t *w, const struct dl_phdr_info *obj, const ElfW(Rela) *rel,
                           size_t size, const ElfW(Sym) *symtab, const char *strtab)
{
    for (size_t k = 0; k < size / sizeof *rel && !w->err; k++) {
        unsigned type = (unsigned)ELF64_R_TYPE(rel[k].r_info);
        size_t sym = ELF64_R_SYM(rel[k].r_info);
        if ((type != R_JUMP_SLOT && type != R_GLOB_DAT) || !sym)
            continue;
        const char *name = strtab + symtab[sym].st_name;
        for (size_t j = 0; j < w->n; j++) {
            const st_got_redirect_t *r = &w->r[j];
            if (name[0] != r->symbol[0] || strcmp(name, r->symbol) != 0)
                continue;
            void **slot = (void **)(obj->dlpi_addr + rel[k].r_offset);
            void *now = __atomic_load_n(slot, __ATOMIC_RELAXED);
            if (now == r->to || (r->from && now != r->from))
                break;
            int rc = write_slot(obj, slot, r->to);
            if (rc < 0)
                w->err = rc;
            else
                w->done++;
            break;
        }
    }
}

static int visit(struct dl_phdr_info *obj, size_t size, void *data)
{
    (void)size;
    walk_t *w = data;
    const ElfW(Dyn) *d = dynamic(obj);
    if (!d || (w->keep && !w->keep(obj, w->arg)))
        return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    size_t jmpsz = 0, relasz = 0;
    int pltrela = 1;
    for (; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_addr(obj, d->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)dyn_addr(obj, d->d_un.d_ptr); break;
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn_addr(obj, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: jmpsz = d->d_un.d_val; break;
        case DT_PLTREL: pltrela = d->d_un.d_val == DT_RELA; break;
        case DT_RELA: rela = (const ElfW(Rela) *)dyn_addr(obj, d->d_un.d_ptr); break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        default: break;
        }
    }
    if (!symtab || !strtab)
        return 0;
    if (jmprel && pltrela)
        redirect_table(w, obj, jmprel, jmpsz, symtab, strtab);
    if (rela)
        redirect_table(w, obj, rela, relasz, symtab, strtab);
    return w->err;
}

int st_got_redirect(const st_got_redirect_t *r, size_t n, st_got_keep_t keep, void *arg)
{
    walk_t w = {.r = r, .n = n, .keep = keep, .arg = arg};
    dl_iterate_phdr(visit, &w);
    return w.err ? w.err : w.done;
}

int st_got_holds(const struct dl_phdr_info *obj, const void *addr)
{
    return in_segment(obj, PT_LOAD, (uintptr_t)addr);
}

int st_got_has_search_path(const struct dl_phdr_info *obj)
{
    const ElfW(Dyn) *d = dynamic(obj);
    for (; d && d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_RPATH || d->d_tag == DT_RUNPATH)
            return 1;
    return 0;
}

int st_got_runtime(const struct dl_phdr_info *obj)
{
    static const char *const runtimes[] = {
        "libc.so", "ld-linux", "ld64.so", "libasan.so", "libtsan.so", "libubsan.so",
        "liblsan.so", "libhwasan.so", "libmemusage.so", "libjemalloc.so", "libtcmalloc",
        "libmimalloc.so",
    };
    const char *slash = strrchr(obj->dlpi_name, '/');
    const char *base = slash ? slash + 1 : obj->dlpi_name;
    for (size_t i = 0; i < sizeof runtimes / sizeof *runtimes; i++)
        if (strncmp(base, runtimes[i], strlen(runtimes[i])) == 0)
            return 1;
    return 0;
}

int st_got_keep_others(const struct dl_phdr_info *obj, void *arg)
{
    return !st_got_holds(obj, arg) && !st_got_runtime(obj);
}

static int count_loads(struct dl_phdr_info *obj, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = obj->dlpi_adds;
    return 1;
}

unsigned long long st_got_loads(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(count_loads, &adds);
    return adds;
}
