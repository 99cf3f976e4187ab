/* Address -> frames after the run: libdw, else ELF symbols, else module+offset,
 * each address once (symbols.h). */
#define _GNU_SOURCE
#include "sampling/symbols.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "sampling/dwarf.h"
#include "sampling/elfsym.h"

#define ST_SYMBOLS_BLOCK_FRAMES 1024
#define ST_SYMBOLS_BLOCK_BYTES 65536
#define ST_SYMBOLS_SCRATCH_TEXT 512

/* Frames in blocks that never move, so that resolved frames stay put. */
typedef struct fblock {
    struct fblock *next;
    int used;
    st_symframe_t f[ST_SYMBOLS_BLOCK_FRAMES];
} fblock_t;

/* Strings in blocks that never move. */
typedef struct sblock {
    struct sblock *next;
    size_t used, cap;
    char data[];
} sblock_t;

/* What a module entry has opened. */
typedef struct {
    int dw_tried, elf_tried, elf_ok;
    st_dwfile_t *dw;
    st_elfsyms_t elf;
    st_u64map_t cache;     /* pc -> record */
} modstate_t;

typedef struct {
    const st_symframe_t *frames;
    int n;
} record_t;

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

struct st_symbols {
    const st_modules_t *mods;
    int use_dw;
    char backend[1100];
    demangle_fn demangle;
    modstate_t *ms;
    int nms;
    st_u64map_t nomod;     /* pc -> record, outside every module */
    record_t *recs;
    uint32_t nrecs, arecs;
    fblock_t *fb;
    sblock_t *sb;
    st_u64map_t interned;  /* string hash -> index in strs */
    const char **strs;
    uint32_t nstrs, astrs;
    /* the address being resolved */
    st_symframe_t tmp[ST_SYMBOLS_MAX_INLINE];
    int ntmp, scratch, oom;
    char scratch_text[ST_SYMBOLS_MAX_INLINE][2][ST_SYMBOLS_SCRATCH_TEXT];
};

st_symbols_t *st_symbols_new(const st_modules_t *mods, int flags)
{
    st_symbols_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->mods = mods;
    st_msg_t why;
    if (flags & ST_SYMBOLS_NO_DWARF) {
        snprintf(s->backend, sizeof s->backend, "ELF symbol tables (libdw not asked for)");
    } else if (st_dw_load(&why) == 0) {
        s->use_dw = 1;
        snprintf(s->backend, sizeof s->backend, "libdw");
    } else {
        snprintf(s->backend, sizeof s->backend, "ELF symbol tables (%s)", why.text);
    }
    void *d = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    memcpy(&s->demangle, &d, sizeof d);
    return s;
}

const char *st_symbols_backend(const st_symbols_t *s)
{
    return s->backend;
}

/* A copy of str that lives as long as s, or in scratch text (truncated) past the
 * address cap; identical strings are stored once. NULL when out of memory. */
static const char *keep(st_symbols_t *s, const char *str, int slot, int which)
{
    if (s->scratch) {
        snprintf(s->scratch_text[slot][which], ST_SYMBOLS_SCRATCH_TEXT, "%s", str);
        return s->scratch_text[slot][which];
    }
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)str; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    h &= ~(1ull << 63);                    /* UINT64_MAX is the map's reserved key */
    uint32_t at = st_u64map_get(&s->interned, h);
    if (at != UINT32_MAX && strcmp(s->strs[at], str) == 0)
        return s->strs[at];
    size_t len = strlen(str) + 1;
    if (!s->sb || s->sb->cap - s->sb->used < len) {
        size_t cap = len > ST_SYMBOLS_BLOCK_BYTES ? len : ST_SYMBOLS_BLOCK_BYTES;
        sblock_t *b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->next = s->sb;
        b->used = 0;
        b->cap = cap;
        s->sb = b;
    }
    char *copy = memcpy(s->sb->data + s->sb->used, str, len);
    s->sb->used += len;
    if (at == UINT32_MAX) {
        if (s->nstrs == s->astrs) {
            uint32_t a = s->astrs ? 2 * s->astrs : 256;
            const char **grown = realloc(s->strs, a * sizeof *grown);
            if (!grown)
                return copy;
            s->strs = grown;
            s->astrs = a;
        }
        if (st_u64map_put(&s->interned, h, s->nstrs, NULL) == 0)
            s->strs[s->nstrs++] = copy;
    }
    return copy;
}

/* One frame into s->tmp: the name demangled when it is a C++ one. */
static int on_frame(void *arg, const char *function, const char *file, int line, int inlined)
{
    st_symbols_t *s = arg;
    if (s->ntmp == ST_SYMBOLS_MAX_INLINE)
        return -1;
    st_symframe_t *f = &s->tmp[s->ntmp];
    memset(f, 0, sizeof *f);
    char *demangled = NULL;
    int status = -1;
    if (function && s->demangle && function[0] == '_' && function[1] == 'Z')
        demangled = s->demangle(function, NULL, NULL, &status);
    if (function) {
        f->function = keep(s, status == 0 && demangled ? demangled : function, s->ntmp, 0);
        if (!f->function)
            s->oom = 1;
    }
    free(demangled);
    if (file) {
        f->file = keep(s, file, s->ntmp, 1);
        if (!f->file)
            s->oom = 1;
    }
    f->line = file ? line : 0;
    f->inlined = inlined;
    s->ntmp++;
    return 0;
}

/* The state of module entry idx, grown to the module map's size. */
static modstate_t *modstate(st_symbols_t *s, int idx)
{
    if (idx >= s->nms) {
        int n = s->mods->count;
        modstate_t *grown = realloc(s->ms, (size_t)n * sizeof *grown);
        if (!grown)
            return NULL;
        memset(grown + s->nms, 0, (size_t)(n - s->nms) * sizeof *grown);
        s->ms = grown;
        s->nms = n;
    }
    return &s->ms[idx];
}

/* 1 for a library of the system (under /lib, /usr/lib): named from its symbol
 * table only. Its separate debug file (libc6-dbg...) is large, and reading its
 * DWARF for a handful of frames cost 60 to 90 ms at the end of every run
 * (docs/performance.md); the program's own code and the libraries it brings
 * keep their source files and inlined frames. */
static int system_library(const char *path)
{
    static const char *const dirs[] = {"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (strncmp(path, dirs[i], strlen(dirs[i])) == 0)
            return 1;
    return 0;
}

/* Fills s->tmp with the frames of pc in module idx (-1: none). */
static void lookup(st_symbols_t *s, modstate_t *m, int idx, uintptr_t pc)
{
    char text[ST_SYMBOLS_SCRATCH_TEXT];
    if (idx < 0) {
        snprintf(text, sizeof text, "0x%llx", (unsigned long long)pc);
        on_frame(s, text, NULL, 0, 0);
        return;
    }
    const st_module_t *mod = &s->mods->mods[idx];
    uint64_t vaddr = pc - mod->bias;
    if (s->use_dw) {
        if (!m->dw_tried) {
            m->dw_tried = 1;
            m->dw = st_dw_open(mod->path, mod->build_id, mod->build_id_len);
        }
        /* past ST_SYMBOLS_MAX_INLINE: the innermost frames only */
        if (m->dw && system_library(mod->path))
            st_dw_resolve_name(m->dw, vaddr, on_frame, s);
        else if (m->dw)
            st_dw_resolve(m->dw, vaddr, on_frame, s);
    }
    const char *name = NULL;
    if (s->ntmp == 0 || !s->tmp[s->ntmp - 1].function) {
        if (!m->elf_tried) {
            m->elf_tried = 1;
            m->elf_ok = st_elfsyms_open(&m->elf, mod->path) == 0;
        }
        if (m->elf_ok)
            name = st_elfsyms_lookup(&m->elf, vaddr, NULL);
    }
    Dl_info info;
    /* an object with no file (the vDSO) is named by the loader while it is mapped */
    if (!name && mod->loaded && mod->path[0] != '/' &&
        (s->ntmp == 0 || !s->tmp[s->ntmp - 1].function) && dladdr((void *)pc, &info) &&
        info.dli_sname && info.dli_saddr)
        name = info.dli_sname;
    if (!name && (s->ntmp == 0 || !s->tmp[s->ntmp - 1].function)) {
        const char *base = strrchr(mod->path, '/');
        snprintf(text, sizeof text, "%s+0x%llx", base ? base + 1 : mod->path,
                 (unsigned long long)vaddr);
        name = text;
    }
    if (s->ntmp == 0) {
        on_frame(s, name, NULL, 0, 0);
    } else if (!s->tmp[s->ntmp - 1].function) {
        st_symframe_t *last = &s->tmp[s->ntmp - 1];
        last->function = keep(s, name, s->ntmp - 1, 0);
        if (!last->function)
            s->oom = 1;
    }
    for (int i = 0; i < s->ntmp; i++) {
        s->tmp[i].module = mod->path;
        if (!s->tmp[i].function) {   /* an inlined frame DWARF gives no name */
            s->tmp[i].function = keep(s, "?", i, 0);
            if (!s->tmp[i].function)
                s->oom = 1;
        }
    }
}

int st_symbols_resolve(st_symbols_t *s, uintptr_t pc, uint32_t gen, const st_symframe_t **frames)
{
    int idx = st_modules_find(s->mods, pc, gen);
    modstate_t *m = NULL;
    if (idx >= 0 && !(m = modstate(s, idx)))
        return ST_ENOMEM;
    st_u64map_t *cache = m ? &m->cache : &s->nomod;
    uint32_t at = st_u64map_get(cache, pc);
    if (at != UINT32_MAX) {
        *frames = s->recs[at].frames;
        return s->recs[at].n;
    }
    s->ntmp = 0;
    s->oom = 0;
    s->scratch = s->nrecs >= ST_SYMBOLS_MAX_ADDRS;
    lookup(s, m, idx, pc);
    if (s->oom)
        return ST_ENOMEM;
    if (s->scratch) {
        *frames = s->tmp;
        return s->ntmp;
    }
    if (!s->fb || ST_SYMBOLS_BLOCK_FRAMES - s->fb->used < s->ntmp) {
        fblock_t *b = malloc(sizeof *b);
        if (!b)
            return ST_ENOMEM;
        b->next = s->fb;
        b->used = 0;
        s->fb = b;
    }
    if (s->nrecs == s->arecs) {
        uint32_t a = s->arecs ? 2 * s->arecs : 1024;
        record_t *grown = realloc(s->recs, a * sizeof *grown);
        if (!grown)
            return ST_ENOMEM;
        s->recs = grown;
        s->arecs = a;
    }
    st_symframe_t *kept = memcpy(s->fb->f + s->fb->used, s->tmp, (size_t)s->ntmp * sizeof *kept);
    if (st_u64map_put(cache, pc, s->nrecs, NULL) < 0)
        return ST_ENOMEM;
    s->fb->used += s->ntmp;
    s->recs[s->nrecs++] = (record_t){kept, s->ntmp};
    *frames = kept;
    return s->ntmp;
}

void st_symbols_free(st_symbols_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nms; i++) {
        st_dw_close(s->ms[i].dw);
        st_elfsyms_close(&s->ms[i].elf);
        st_u64map_free(&s->ms[i].cache);
    }
    free(s->ms);
    st_u64map_free(&s->nomod);
    st_u64map_free(&s->interned);
    free(s->recs);
    free(s->strs);
    for (fblock_t *b = s->fb, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    for (sblock_t *b = s->sb, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(s);
}
