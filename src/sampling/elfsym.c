/* ELF function symbols from the file (elfsym.h). */
#include "sampling/elfsym.h"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"

/* 1 when [off, off + len) lies inside a file of `size` bytes. */
static int inside(uint64_t off, uint64_t len, size_t size)
{
    return off <= size && len <= size - off;
}

static int by_value(const void *a, const void *b)
{
    const st_elfsym_t *x = a, *y = b;
    return x->value < y->value ? -1 : x->value > y->value;
}

/* The symbols of table `sh` (SHT_SYMTAB or SHT_DYNSYM), or 0 when the file has
 * none of that type. ST_ENOMEM on failure. */
static int collect(st_elfsyms_t *e, const Elf64_Shdr *sh, int nsh, uint32_t type)
{
    const unsigned char *base = e->map;
    for (int i = 0; i < nsh; i++) {
        if (sh[i].sh_type != type || sh[i].sh_entsize != sizeof(Elf64_Sym) ||
            !inside(sh[i].sh_offset, sh[i].sh_size, e->map_size) || sh[i].sh_link >= (uint32_t)nsh)
            continue;
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        if (!inside(str->sh_offset, str->sh_size, e->map_size))
            continue;
        const Elf64_Sym *sym = (const Elf64_Sym *)(base + sh[i].sh_offset);
        size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
        const char *strs = (const char *)(base + str->sh_offset);
        e->syms = malloc((count ? count : 1) * sizeof *e->syms);
        if (!e->syms)
            return ST_ENOMEM;
        for (size_t k = 0; k < count; k++) {
            int t = ELF64_ST_TYPE(sym[k].st_info);
            if ((t != STT_FUNC && t != STT_GNU_IFUNC) || sym[k].st_shndx == SHN_UNDEF ||
                sym[k].st_value == 0 || sym[k].st_name >= str->sh_size)
                continue;
            const char *name = strs + sym[k].st_name;
            if (!name[0] || !memchr(name, '\0', str->sh_size - sym[k].st_name))
                continue;
            e->syms[e->n++] = (st_elfsym_t){sym[k].st_value, sym[k].st_size, name};
        }
        qsort(e->syms, e->n, sizeof *e->syms, by_value);
        return 1;
    }
    return 0;
}

int st_elfsyms_open(st_elfsyms_t *e, const char *path)
{
    memset(e, 0, sizeof *e);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ST_EIO;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return ST_EIO;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return ST_EIO;
    e->map = map;
    e->map_size = (size_t)st.st_size;
    const Elf64_Ehdr *eh = map;
    int rc = ST_EINVAL;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) ||
        !inside(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), e->map_size))
        goto fail;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)((const unsigned char *)map + eh->e_shoff);
    rc = collect(e, sh, eh->e_shnum, SHT_SYMTAB);
    if (rc == 0)
        rc = collect(e, sh, eh->e_shnum, SHT_DYNSYM);
    if (rc == 1 && e->n > 0)
        return 0;
    if (rc >= 0)
        rc = ST_EINVAL;
fail:
    st_elfsyms_close(e);
    return rc;
}

const char *st_elfsyms_lookup(const st_elfsyms_t *e, uint64_t vaddr, uint64_t *start)
{
    size_t lo = 0, hi = e->n;   /* the last symbol with value <= vaddr is at lo - 1 */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->syms[mid].value <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Among aliases and nested symbols at or below vaddr, the nearest that holds it. */
    for (size_t i = lo; i-- > 0;) {
        const st_elfsym_t *s = &e->syms[i];
        if (vaddr < s->value + (s->size ? s->size : 1)) {
            if (start)
                *start = s->value;
            return s->name;
        }
        if (lo - i > 64)
            break;
    }
    return NULL;
}

void st_elfsyms_close(st_elfsyms_t *e)
{
    if (e->map)
        munmap(e->map, e->map_size);
    free(e->syms);
    memset(e, 0, sizeof *e);
}
