/* Kokkos Tools (issue 14): the kokkosp_* C ABI that Kokkos calls in the library
 * named by KOKKOS_TOOLS_LIBS, which `strata run` sets to this preloaded library
 * (dlopen then gives Kokkos the library already loaded). Parallel for, reduce and
 * scan kernels and fences are calls of their own under the host code that launched
 * them ("parallel_for <name>", "parallel_reduce ...", "parallel_scan ...",
 * "fence ..."), as are profile regions (their own names) and deep copies
 * ("deep_copy <src> -> <dst>"); allocations and deallocations of Kokkos views are
 * the alloc_bytes and allocs of the call that made them (site: the view's name).
 * Times are the host's: a kernel launched asynchronously on a device ends, for
 * strata, when Kokkos reports its end. Only under `strata run`.
 *
 * Kokkos 3 (Debian's Trilinos 13 has one) reads its tool from
 * KOKKOS_PROFILE_LIBRARY, which Kokkos 4 still reads but warns about: so the
 * command sets KOKKOS_TOOLS_LIBS, and st_nkokkos_env sets the old name too when
 * the program's Kokkos core library does not know the new one. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "native/instrument.h"
#include "native/kokkos.h"

#define EXPORT __attribute__((visibility("default")))

/* Kokkos::Tools::SpaceHandle: a memory space's name. */
typedef struct {
    char name[64];
} space_handle_t;

static _Atomic uint64_t next_id = 1;
static const char region_key, copy_key;

/* A kernel or fence begins: its id (the key its end presents), or 0. */
static void begin(const char *kind, const char *name, uint64_t *id)
{
    char text[512];
    snprintf(text, sizeof text, "%s %s", kind, name ? name : "");
    uint64_t k = atomic_fetch_add(&next_id, 1);
    *id = st_ninstr_enter_text(text, (const void *)(uintptr_t)k) ? k : 0;
}

static void end(uint64_t id)
{
    if (id)
        st_ninstr_exit_key((const void *)(uintptr_t)id);
}

EXPORT void kokkosp_init_library(int load_seq, uint64_t version, uint32_t ndevices, void *devices)
{
    (void)load_seq;
    (void)version;
    (void)ndevices;
    (void)devices;
}

EXPORT void kokkosp_finalize_library(void) {}

EXPORT void kokkosp_begin_parallel_for(const char *name, uint32_t dev, uint64_t *id)
{
    (void)dev;
    begin("parallel_for", name, id);
}
EXPORT void kokkosp_end_parallel_for(uint64_t id) { end(id); }

EXPORT void kokkosp_begin_parallel_reduce(const char *name, uint32_t dev, uint64_t *id)
{
    (void)dev;
    begin("parallel_reduce", name, id);
}
EXPORT void kokkosp_end_parallel_reduce(uint64_t id) { end(id); }

EXPORT void kokkosp_begin_parallel_scan(const char *name, uint32_t dev, uint64_t *id)
{
    (void)dev;
    begin("parallel_scan", name, id);
}
EXPORT void kokkosp_end_parallel_scan(uint64_t id) { end(id); }

EXPORT void kokkosp_begin_fence(const char *name, uint32_t dev, uint64_t *id)
{
    (void)dev;
    begin("fence", name, id);
}
EXPORT void kokkosp_end_fence(uint64_t id) { end(id); }

EXPORT void kokkosp_push_profile_region(const char *name)
{
    st_ninstr_enter_text(name ? name : "", &region_key);
}
EXPORT void kokkosp_pop_profile_region(void) { st_ninstr_exit_key(&region_key); }

EXPORT void kokkosp_allocate_data(space_handle_t space, const char *name, const void *ptr,
                                  uint64_t size)
{
    (void)space;
    st_ninstr_alloc(name ? name : "", ptr, size);
}

EXPORT void kokkosp_deallocate_data(space_handle_t space, const char *name, const void *ptr,
                                    uint64_t size)
{
    (void)space;
    (void)name;
    (void)size;
    st_ninstr_free(ptr);
}

EXPORT void kokkosp_begin_deep_copy(space_handle_t dst_space, const char *dst_name,
                                    const void *dst, space_handle_t src_space,
                                    const char *src_name, const void *src, uint64_t size)
{
    (void)dst_space;
    (void)dst;
    (void)src_space;
    (void)src;
    (void)size;
    char text[512];
    snprintf(text, sizeof text, "deep_copy %s -> %s", src_name ? src_name : "",
             dst_name ? dst_name : "");
    st_ninstr_enter_text(text, &copy_key);
}
EXPORT void kokkosp_end_deep_copy(void) { st_ninstr_exit_key(&copy_key); }

/* 1 when the file at `path` holds the text `word` (mapped, not read). */
static int file_holds(const char *path, const char *word)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return 0;
    int found = memmem(p, (size_t)st.st_size, word, strlen(word)) != NULL;
    munmap(p, (size_t)st.st_size);
    return found;
}

/* A Kokkos core library loaded that knows only KOKKOS_PROFILE_LIBRARY. */
static int old_kokkos(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    const char *name = info->dlpi_name;
    return name && strstr(name, "kokkoscore") && !file_holds(name, "KOKKOS_TOOLS_LIBS");
}

void st_nkokkos_env(void)
{
    const char *lib = getenv("_STRATA_KOKKOS_LIB");
    if (!lib || !*lib)
        return;
    if (!getenv("KOKKOS_PROFILE_LIBRARY") && dl_iterate_phdr(old_kokkos, NULL))
        setenv("KOKKOS_PROFILE_LIBRARY", lib, 1);
    unsetenv("_STRATA_KOKKOS_LIB");
}
