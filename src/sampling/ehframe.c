/* Function bounds from .eh_frame_hdr (ehframe.h). */
#define _GNU_SOURCE
#include "sampling/ehframe.h"

#include <elf.h>
#include <link.h>
#include <string.h>

/* The pointer encodings (DWARF's DW_EH_PE_*) this reader knows. */
#define PE_ABSPTR 0x00
#define PE_UDATA4 0x03
#define PE_PCREL_SDATA4 0x1b
#define PE_DATAREL_SDATA4 0x3b

typedef struct {
    uintptr_t addr;
    const uint8_t *hdr; /* the object's .eh_frame_hdr, or NULL */
} find_t;

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    find_t *f = arg;
    const uint8_t *hdr = NULL;
    int holds = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && f->addr >= lo && f->addr < lo + ph->p_memsz)
            holds = 1;
        else if (ph->p_type == PT_GNU_EH_FRAME)
            hdr = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
    }
    if (!holds)
        return 0;
    f->hdr = hdr;
    return 1;
}

static int32_t s32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static const uint8_t *skip_leb128(const uint8_t *p)
{
    while (*p++ & 0x80)
        ;
    return p;
}

/* The bytes of a value in encoding enc, or 0 for one of variable length. */
static size_t encoded_size(uint8_t enc)
{
    switch (enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: return 8;
    case 0x02: case 0x0a: return 2;
    case 0x03: case 0x0b: return 4;
    default: return 0;
    }
}

/* The encoding of the FDEs' addresses, from their CIE's augmentation ('R'). */
static int cie_fde_encoding(const uint8_t *cie, uint8_t *enc)
{
    if (u32(cie) == 0xffffffffu || u32(cie + 4) != 0)
        return -1; /* 64-bit DWARF, or not a CIE */
    const uint8_t *p = cie + 8;
    uint8_t version = *p++;
    const char *aug = (const char *)p;
    p += strlen(aug) + 1;
    p = skip_leb128(p); /* code alignment */
    p = skip_leb128(p); /* data alignment */
    p = version == 1 ? p + 1 : skip_leb128(p); /* return address register */
    *enc = PE_ABSPTR;
    if (aug[0] != 'z')
        return 0;
    p = skip_leb128(p); /* augmentation data's length */
    for (const char *a = aug + 1; *a; a++) {
        if (*a == 'R') {
            *enc = *p;
            return 0;
        }
        if (*a == 'P') {
            size_t n = encoded_size(*p);
            if (!n)
                return -1;
            p += 1 + n;
        } else if (*a == 'L') {
            p++;
        } else if (*a != 'S' && *a != 'B') {
            return -1;
        }
    }
    return 0;
}

/* The .eh_frame_hdr of the loaded object holding addr, or NULL. */
static const uint8_t *object_table(uintptr_t addr)
{
    find_t f = {addr, NULL};
    return dl_iterate_phdr(find_object, &f) ? f.hdr : NULL;
}

/* The function (FDE) holding addr in the object whose table is h. */
static int lookup(const uint8_t *h, uintptr_t addr, st_range_t *out)
{
    if (!h || h[0] != 1 || h[1] != PE_PCREL_SDATA4 || h[2] != PE_UDATA4 ||
        h[3] != PE_DATAREL_SDATA4)
        return -1;
    uint32_t count = u32(h + 8);
    const uint8_t *table = h + 12; /* pairs of (start, FDE), relative to h */
    /* the last entry that starts at or before addr */
    uint32_t lo = 0, hi = count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)(h + s32(table + 8 * (size_t)mid)) <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const uint8_t *entry = table + 8 * (size_t)(lo - 1);
    uintptr_t start = (uintptr_t)(h + s32(entry));
    const uint8_t *fde = h + s32(entry + 4);
    if (u32(fde) == 0xffffffffu)
        return -1;
    uint8_t enc;
    if (cie_fde_encoding(fde + 4 - u32(fde + 4), &enc) < 0)
        return -1;
    size_t n = encoded_size(enc);
    if (!n)
        return -1;
    uint64_t range = 0; /* little-endian, unsigned: the range is a length */
    memcpy(&range, fde + 8 + n, n);
    if (addr >= start + range)
        return -1; /* in a gap between functions */
    out->lo = start;
    out->hi = start + range;
    return 0;
}

int st_ehframe_function(uintptr_t addr, st_range_t *out)
{
    return lookup(object_table(addr), addr, out);
}

int st_ehframe_parts(uintptr_t fn, size_t size, st_range_t *out, int cap)
{
#if defined(__x86_64__)
    enum { MAX_SEEN = 16 };
    st_range_t seen[MAX_SEEN];
    int hits[MAX_SEEN], nseen = 0;
    const uint8_t *code = (const uint8_t *)fn;
    const uint8_t *table = object_table(fn); /* its parts lie in its own object */
    for (size_t i = 0; i + 5 <= size; i++) {
        size_t len = code[i] == 0xe9 ? 5
                     : i + 6 <= size && code[i] == 0x0f && (code[i + 1] & 0xf0) == 0x80 ? 6
                                                                                       : 0;
        if (!len)
            continue;
        uintptr_t to = fn + i + len + (intptr_t)s32(code + i + len - 4);
        st_range_t r;
        if ((to >= fn && to < fn + size) || lookup(table, to, &r) < 0 ||
            (r.lo < fn + size && r.hi > fn))
            continue;
        int k = 0;
        while (k < nseen && seen[k].lo != r.lo)
            k++;
        if (k == nseen) {
            if (nseen == MAX_SEEN)
                continue;
            seen[nseen] = r;
            hits[nseen++] = 0;
        }
        hits[k]++;
    }
    int n = 0;
    for (int k = 0; k < nseen && n < cap; k++)
        if (hits[k] >= 2)
            out[n++] = seen[k];
    return n;
#else
    (void)fn;
    (void)size;
    (void)out;
    (void)cap;
    return 0;
#endif
}
