/* Kokkos Tools (issue 14): the kokkosp_* C ABI that Kokkos calls in the library
 * named by KOKKOS_TOOLS_LIBS, which `strata run` sets to this preloaded library
 * (dlopen then gives Kokkos the library already loaded). Parallel for, reduce and
 * scan kernels and fences are calls of their own under the host code that launched
 * them ("parallel_for <name>", "parallel_reduce ...", "parallel_scan ...",
 * "fence ..."), as are profile regions (their own names) and deep copies
 * ("deep_copy <src> -> <dst>"); allocations and deallocations of Kokkos views are
 * the alloc_bytes and allocs of the call that made them (site: the view's name).
 * Times are the host's: a kernel launched asynchronously on a device ends, for
 * strata, when Kokkos reports its end. Only under `strata run`. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "native/instrument.h"

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
