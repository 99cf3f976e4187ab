/* The module map: dl_iterate_phdr snapshots with generations (modules.h). */
#define _GNU_SOURCE
#include "sampling/modules.h"

#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void st_modules_free(st_modules_t *m)
{
    for (int i = 0; i < m->count; i++)
        free(m->mods[i].path);
    free(m->mods);
    memset(m, 0, sizeof *m);
}

/* The GNU build-id note of a loaded object, from its PT_NOTE segments. */
static void read_build_id(const struct dl_phdr_info *info, st_module_t *mod)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        size_t left = ph->p_memsz;
        while (left >= sizeof(ElfW(Nhdr))) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            size_t name = (nh->n_namesz + 3u) & ~3u, desc = (nh->n_descsz + 3u) & ~3u;
            size_t len = sizeof *nh + name + desc;
            if (name > left || desc > left || len > left)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                memcmp(p + sizeof *nh, "GNU", 4) == 0 && nh->n_descsz > 0 &&
                nh->n_descsz <= ST_MODULE_BUILD_ID_MAX) {
                memcpy(mod->build_id, p + sizeof *nh + name, nh->n_descsz);
                mod->build_id_len = (int)nh->n_descsz;
                return;
            }
            p += len;
            left -= len;
        }
    }
}

typedef struct {
    st_module_t *seen;
    int count, alloc, err;
} snapshot_t;

static int on_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    snapshot_t *s = arg;
    st_module_t mod;
    memset(&mod, 0, sizeof mod);
    mod.bias = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum && mod.nranges < ST_MODULE_MAX_RANGES; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && ph->p_memsz > 0) {
            mod.ranges[mod.nranges].lo = info->dlpi_addr + ph->p_vaddr;
            mod.ranges[mod.nranges].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
            mod.nranges++;
        }
    }
    if (mod.nranges == 0)
        return 0;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    char exe[4096];
    if (!name[0]) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return 0;
        exe[n] = '\0';
        name = exe;
    }
    read_build_id(info, &mod);
    if (s->count == s->alloc) {
        int alloc = s->alloc ? 2 * s->alloc : 64;
        st_module_t *grown = realloc(s->seen, (size_t)alloc * sizeof *grown);
        if (!grown) {
            s->err = ST_ENOMEM;
            return 1;
        }
        s->seen = grown;
        s->alloc = alloc;
    }
    mod.path = strdup(name);
    if (!mod.path) {
        s->err = ST_ENOMEM;
        return 1;
    }
    s->seen[s->count++] = mod;
    return 0;
}

/* The loaded entry that is the same mapping as seen, or -1. */
static int same_mapping(const st_modules_t *m, const st_module_t *seen)
{
    for (int i = m->count - 1; i >= 0; i--) {
        const st_module_t *e = &m->mods[i];
        if (e->loaded && e->bias == seen->bias && e->ranges[0].lo == seen->ranges[0].lo &&
            e->ranges[0].hi == seen->ranges[0].hi && strcmp(e->path, seen->path) == 0)
            return i;
    }
    return -1;
}

int st_modules_refresh(st_modules_t *m)
{
    snapshot_t s = {0};
    dl_iterate_phdr(on_object, &s);
    int err = s.err, old = m->count;
    uint32_t gen = m->gen + 1;
    char *listed = calloc((size_t)old + 1, 1);
    if (!listed)
        err = ST_ENOMEM;
    for (int i = 0; listed && i < s.count; i++) {
        int at = same_mapping(m, &s.seen[i]);
        if (at >= 0) {
            m->mods[at].last_gen = gen;
            if (at < old)
                listed[at] = 1;
            continue;
        }
        if (m->count >= ST_MODULES_MAX) {
            err = ST_ERANGE;
            break;
        }
        if (m->count == m->alloc) {
            int alloc = m->alloc ? 2 * m->alloc : 64;
            st_module_t *grown = realloc(m->mods, (size_t)alloc * sizeof *grown);
            if (!grown) {
                err = ST_ENOMEM;
                break;
            }
            m->mods = grown;
            m->alloc = alloc;
        }
        st_module_t *e = &m->mods[m->count++];
        *e = s.seen[i];
        s.seen[i].path = NULL;   /* moved */
        e->first_gen = e->last_gen = gen;
        e->loaded = 1;
    }
    /* An entry the snapshot did not list is unloaded, unless the snapshot
     * itself was cut short. */
    for (int i = 0; listed && !s.err && i < old; i++)
        if (!listed[i])
            m->mods[i].loaded = 0;
    m->gen = gen;
    for (int i = 0; i < s.count; i++)
        free(s.seen[i].path);
    free(s.seen);
    free(listed);
    return err;
}

int st_modules_find(const st_modules_t *m, uintptr_t pc, uint32_t gen)
{
    int newest = -1;
    for (int i = m->count - 1; i >= 0; i--) {
        const st_module_t *e = &m->mods[i];
        int in = 0;
        for (int r = 0; r < e->nranges && !in; r++)
            in = pc >= e->ranges[r].lo && pc < e->ranges[r].hi;
        if (!in)
            continue;
        if (gen == 0 || (e->first_gen <= gen && gen <= e->last_gen))
            return i;
        if (newest < 0)
            newest = i;
    }
    return newest;
}
