/* Symbolisation with libdw, loaded with dlopen (dwarf.h). */
#include "sampling/dwarf.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef STRATA_HAVE_LIBDW

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <libelf.h>

/* The entry points used, found with dlsym; typed from libdw's own headers
 * (which are only read for their declarations: nothing links libdw). */
#define ST_DW_FUNCS(X)                                                                 \
    X(dwfl_begin) X(dwfl_end) X(dwfl_report_begin) X(dwfl_report_elf) X(dwfl_report_end) \
    X(dwfl_module_build_id) X(dwfl_module_addrdie) X(dwfl_module_addrname)           \
    X(dwfl_module_getsrc) X(dwfl_lineinfo) X(dwfl_build_id_find_elf)                 \
    X(dwfl_offline_section_address) X(dwarf_getscopes) X(dwarf_getscopes_die) \
    X(dwarf_tag) X(dwarf_diename) X(dwarf_attr) X(dwarf_attr_integrate)              \
    X(dwarf_formstring) X(dwarf_formudata) X(dwarf_getsrcfiles) X(dwarf_filesrc)     \
    X(dwfl_module_nextcu) X(dwarf_haspc) X(dwarf_getsrc_die) X(dwarf_linesrc)          \
    X(dwarf_lineno) X(dwarf_child) X(dwarf_siblingof) X(elf_version)

static struct {
#define ST_DW_FIELD(name) __typeof__(name) *name;
    ST_DW_FUNCS(ST_DW_FIELD)
#undef ST_DW_FIELD
} dw;
static void *dw_lib;
static Dwfl_Callbacks dw_callbacks;
static char *dw_debuginfo_path;

/* Opens a separate debug file candidate: its descriptor (and its name, for libdw),
 * or -1. */
static int open_debug(const char *path, const char *self, char **name)
{
    if (self && strcmp(path, self) == 0)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && !(*name = strdup(path))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* libdw's find_debuginfo, local only: a module's separate debug file by its
 * build-id (/usr/lib/debug/.build-id/ab/cdef.debug, as Debian's -dbgsym packages
 * install them) or its .gnu_debuglink (beside it, in .debug/ there, or under
 * /usr/lib/debug). Never a debuginfod server: dwfl_standard_find_debuginfo loads
 * libdebuginfod, and with it curl and TLS (7 ms at the end of every run that names
 * a function without DWARF), and queries the network where DEBUGINFOD_URLS is set
 * (a compute node without one would wait). */
static int find_debuginfo_local(Dwfl_Module *mod, void **userdata, const char *modname,
                                Dwarf_Addr base, const char *file_name,
                                const char *debuglink_file, GElf_Word debuglink_crc,
                                char **debuginfo_file_name)
{
    (void)userdata, (void)modname, (void)base, (void)debuglink_crc;
    char path[PATH_MAX];
    const unsigned char *bits;
    GElf_Addr at;
    int len = dw.dwfl_module_build_id(mod, &bits, &at), fd;
    if (len > 1 && len < 64) {
        int n = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/", bits[0]);
        for (int i = 1; i < len; i++)
            n += snprintf(path + n, sizeof path - (size_t)n, "%02x", bits[i]);
        snprintf(path + n, sizeof path - (size_t)n, ".debug");
        if ((fd = open_debug(path, file_name, debuginfo_file_name)) >= 0)
            return fd;
    }
    if (!debuglink_file || !file_name || strchr(debuglink_file, '/'))
        return -1;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", file_name);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    static const char *const where[] = {"%s/%s", "%s/.debug/%s", "/usr/lib/debug%s/%s"};
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        if (snprintf(path, sizeof path, where[i], dir, debuglink_file) >= (int)sizeof path)
            continue;
        if ((fd = open_debug(path, file_name, debuginfo_file_name)) >= 0)
            return fd;
    }
    return -1;
}

int st_dw_load(st_msg_t *msg)
{
    if (dw_lib)
        return 0;
    void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return st_msg_set(msg, ST_EINVAL, "libdw is not loaded: %s", dlerror());
#define ST_DW_SYM(name)                                                                \
    {                                                                                  \
        void *p = dlsym(h, #name);                                                     \
        if (!p) {                                                                      \
            dlclose(h);                                                                \
            memset(&dw, 0, sizeof dw);                                                 \
            return st_msg_set(msg, ST_EINVAL, "libdw is not loaded: no %s in libdw.so.1", \
                              #name);                                                  \
        }                                                                              \
        memcpy(&dw.name, &p, sizeof p);                                                \
    }
    ST_DW_FUNCS(ST_DW_SYM)
#undef ST_DW_SYM
    if (dw.elf_version(EV_CURRENT) == EV_NONE) {
        dlclose(h);
        memset(&dw, 0, sizeof dw);
        return st_msg_set(msg, ST_EINVAL, "libdw is not loaded: libelf refused EV_CURRENT");
    }
    dw_callbacks.find_elf = dw.dwfl_build_id_find_elf;
    dw_callbacks.find_debuginfo = find_debuginfo_local;
    dw_callbacks.section_address = dw.dwfl_offline_section_address;
    dw_callbacks.debuginfo_path = &dw_debuginfo_path;
    dw_lib = h;
    return 0;
}

struct st_dwfile {
    Dwfl *dwfl;
    Dwfl_Module *mod;
};

st_dwfile_t *st_dw_open(const char *path, const unsigned char *build_id, int build_id_len)
{
    if (!dw_lib || path[0] != '/')
        return NULL;
    st_dwfile_t *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->dwfl = dw.dwfl_begin(&dw_callbacks);
    if (!f->dwfl)
        goto fail;
    dw.dwfl_report_begin(f->dwfl);
    f->mod = dw.dwfl_report_elf(f->dwfl, path, path, -1, 0, true);
    if (dw.dwfl_report_end(f->dwfl, NULL, NULL) != 0 || !f->mod)
        goto fail;
    if (build_id_len > 0) {
        const unsigned char *bits;
        GElf_Addr at;
        int len = dw.dwfl_module_build_id(f->mod, &bits, &at);
        if (len != build_id_len || memcmp(bits, build_id, (size_t)len) != 0)
            goto fail;
    }
    return f;
fail:
    st_dw_close(f);
    return NULL;
}

/* A DIE's name for people: its linkage name where it is a mangled C++ or Rust
 * one (demangled later: "ns::Class::method(int)"), else its own name (a Fortran
 * module procedure's linkage name, "__kern_MOD_heavy", is no clearer than
 * "heavy"). */
static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *link = dw.dwarf_formstring(dw.dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
    if (!link)
        link = dw.dwarf_formstring(dw.dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
    if (link && link[0] == '_' && (link[1] == 'Z' || link[1] == 'R'))
        return link;
    /* its own or its declaration's (DW_AT_specification, abstract_origin) */
    const char *name = dw.dwarf_formstring(dw.dwarf_attr_integrate(die, DW_AT_name, &attr));
    return name ? name : link;
}

int st_dw_resolve_name(st_dwfile_t *f, uint64_t vaddr, st_dw_emit_fn emit, void *arg)
{
    const char *name = dw.dwfl_module_addrname(f->mod, vaddr);
    if (!name)
        return 0;
    /* without its symbol version ("__libc_start_main@@GLIBC_2.34") */
    char bare[512];
    size_t n = strcspn(name, "@");
    if (name[n] && n < sizeof bare) {
        memcpy(bare, name, n);
        bare[n] = '\0';
        name = bare;
    }
    int rc = emit(arg, name, NULL, 0, 0);
    return rc < 0 ? rc : 1;
}

/* The subprogram holding `pc` among the children of `parent`, down to `depth`
 * levels (a Fortran module's procedures are children of its DW_TAG_module, where
 * libdw 0.188's dwarf_getscopes does not look); 1 when found (into *out). */
static int find_subprogram(Dwarf_Die *parent, Dwarf_Addr pc, int depth, Dwarf_Die *out)
{
    Dwarf_Die child;
    if (depth == 0 || dw.dwarf_child(parent, &child) != 0)
        return 0;
    do {
        int tag = dw.dwarf_tag(&child);
        if (tag == DW_TAG_subprogram && dw.dwarf_haspc(&child, pc) > 0) {
            *out = child;
            return 1;
        }
        if ((tag == DW_TAG_module || tag == DW_TAG_namespace) &&
            find_subprogram(&child, pc, depth - 1, out))
            return 1;
    } while (dw.dwarf_siblingof(&child, &child) == 0);
    return 0;
}

int st_dw_resolve(st_dwfile_t *f, uint64_t vaddr, st_dw_emit_fn emit, void *arg)
{
    const char *file = NULL;
    int line = 0, n = 0, rc = 0;
    Dwfl_Line *dl = dw.dwfl_module_getsrc(f->mod, vaddr);
    if (dl)
        file = dw.dwfl_lineinfo(dl, NULL, &line, NULL, NULL, NULL);
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dw.dwfl_module_addrdie(f->mod, vaddr, &bias);
    if (!cu) {
        /* No .debug_aranges (clang does not write it by default), which libdw
         * 0.188 needs for the lookup: the CU whose ranges hold the address. */
        for (Dwarf_Die *c = NULL; (c = dw.dwfl_module_nextcu(f->mod, c, &bias));)
            if (dw.dwarf_haspc(c, vaddr - bias) > 0) {
                cu = c;
                break;
            }
        Dwarf_Line *l = cu && !dl ? dw.dwarf_getsrc_die(cu, vaddr - bias) : NULL;
        if (l && (file = dw.dwarf_linesrc(l, NULL, NULL)) && dw.dwarf_lineno(l, &line) != 0)
            line = 0;
    }
    Dwarf_Die *scopes = NULL, *chain = NULL;
    int nscopes = cu ? dw.dwarf_getscopes(cu, vaddr - bias, &scopes) : 0;
    /* The innermost function at the address, then (dwarf_getscopes_die: its
     * parents in the concrete tree, where dwarf_getscopes would go on into the
     * inlined function's abstract definition) the functions it is inlined into. */
    int nchain = 0;
    for (int i = 0; i < nscopes && nchain == 0; i++) {
        int tag = dw.dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram)
            nchain = dw.dwarf_getscopes_die(&scopes[i], &chain);
    }
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    if (cu && dw.dwarf_getsrcfiles(cu, &files, &nfiles) != 0)
        files = NULL;
    for (int i = 0; i < nchain; i++) {
        int tag = dw.dwarf_tag(&chain[i]);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
            continue;
        int inlined = tag == DW_TAG_inlined_subroutine;
        if ((rc = emit(arg, die_name(&chain[i]), file, line, inlined)) < 0)
            break;
        n++;
        if (!inlined)
            break;
        /* The frame it was inlined into is at the call site. */
        Dwarf_Attribute attr;
        Dwarf_Word v;
        file = NULL;
        line = 0;
        if (files && dw.dwarf_formudata(dw.dwarf_attr(&chain[i], DW_AT_call_file, &attr), &v) == 0)
            file = dw.dwarf_filesrc(files, v, NULL, NULL);
        if (dw.dwarf_formudata(dw.dwarf_attr(&chain[i], DW_AT_call_line, &attr), &v) == 0)
            line = (int)v;
    }
    free(chain);    /* libdw allocates both with malloc */
    free(scopes);
    if (rc < 0)
        return rc;
    Dwarf_Die sub;
    if (n == 0 && cu && find_subprogram(cu, vaddr - bias, 3, &sub)) {
        if ((rc = emit(arg, die_name(&sub), file, line, 0)) < 0)
            return rc;
        n = 1;
    }
    if (n == 0) {
        const char *name = dw.dwfl_module_addrname(f->mod, vaddr);
        if (!name && !file)
            return 0;
        if ((rc = emit(arg, name, file, line, 0)) < 0)
            return rc;
        n = 1;
    }
    return n;
}

void st_dw_close(st_dwfile_t *f)
{
    if (!f)
        return;
    if (f->dwfl)
        dw.dwfl_end(f->dwfl);
    free(f);
}

#else /* !STRATA_HAVE_LIBDW */

struct st_dwfile {
    int unused;
};

int st_dw_load(st_msg_t *msg)
{
    return st_msg_set(msg, ST_EINVAL,
                      "libdw is not loaded: strata was built without elfutils' headers "
                      "(Debian: libdw-dev)");
}

st_dwfile_t *st_dw_open(const char *path, const unsigned char *build_id, int build_id_len)
{
    (void)path, (void)build_id, (void)build_id_len;
    return NULL;
}

int st_dw_resolve_name(st_dwfile_t *f, uint64_t vaddr, st_dw_emit_fn emit, void *arg)
{
    (void)f;
    (void)vaddr;
    (void)emit;
    (void)arg;
    return 0;
}

int st_dw_resolve(st_dwfile_t *f, uint64_t vaddr, st_dw_emit_fn emit, void *arg)
{
    (void)f, (void)vaddr, (void)emit, (void)arg;
    return 0;
}

void st_dw_close(st_dwfile_t *f)
{
    (void)f;
}

#endif /* STRATA_HAVE_LIBDW */
