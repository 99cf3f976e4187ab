#include "output/gpu.h"

#include <stdio.h>

#include "output/grid.h"

void st_gpu_kernels_write(st_strbuf_t *out, const st_model_t *m)
{
    const st_model_gpu_t *gpu = m->gpu;
    if (!gpu)
        return;
    st_grid_t g;
    st_grid_init(&g);
    static const char *const heads[] = {"KERNEL", "COUNT", "TOTAL (ms)", "MEAN (us)",
                                        "MIN (us)", "MAX (us)", "STDDEV (us)"};
    for (int c = 0; c < 7; c++)
        st_grid_column(&g, heads[c], c > 0);
    st_strbuf_t b;
    st_strbuf_init(&b);
    for (size_t k = 0; k < gpu->nkernels; k++) {
        const st_model_kernel_t *x = &gpu->kernels[k];
        st_grid_row(&g);
        st_grid_cell_str(&g, 0, x->name);
        st_strbuf_printf(&b, "%llu", (unsigned long long)x->count);
        st_grid_cell(&g, 1, &b);
        st_strbuf_printf(&b, "%.3f", (double)x->total_ns * 1e-6);
        st_grid_cell(&g, 2, &b);
        const double v[4] = {x->mean_ns, (double)x->min_ns, (double)x->max_ns, x->stddev_ns};
        for (int c = 0; c < 4; c++) {
            st_strbuf_printf(&b, "%.3f", v[c] * 1e-3);
            st_grid_cell(&g, 3 + c, &b);
        }
    }
    st_grid_render(out, &g, "GPU KERNELS (CUPTI: TIME ON THE GPU)");
    st_grid_free(&g);
    st_strbuf_free(&b);
}

void st_gpu_copies_write(st_strbuf_t *out, const st_model_t *m)
{
    const st_model_gpu_t *gpu = m->gpu;
    if (!gpu)
        return;
    st_grid_t g;
    st_grid_init(&g);
    static const char *const heads[] = {"DIRECTION", "COUNT", "BYTES (MiB)", "TIME (ms)",
                                        "BANDWIDTH (GB/s)"};
    for (int c = 0; c < 5; c++)
        st_grid_column(&g, heads[c], c > 0);
    st_strbuf_t b;
    st_strbuf_init(&b);
    for (size_t k = 0; k < gpu->ncopies; k++) {
        const st_model_copy_t *x = &gpu->copies[k];
        st_grid_row(&g);
        st_grid_cell_str(&g, 0, x->direction);
        st_strbuf_printf(&b, "%llu", (unsigned long long)x->count);
        st_grid_cell(&g, 1, &b);
        st_strbuf_printf(&b, "%.3f", (double)x->bytes / 1048576.0);
        st_grid_cell(&g, 2, &b);
        st_strbuf_printf(&b, "%.3f", (double)x->total_ns * 1e-6);
        st_grid_cell(&g, 3, &b);
        if (x->total_ns)
            st_strbuf_printf(&b, "%.3f", (double)x->bytes / (double)x->total_ns);
        else
            st_strbuf_puts(&b, "-");
        st_grid_cell(&g, 4, &b);
    }
    st_grid_render(out, &g, "GPU MEMORY COPIES AND SETS (CUPTI)");
    st_grid_free(&g);
    st_strbuf_free(&b);
}

void st_gpu_json_write(st_strbuf_t *out, const st_model_t *m)
{
    const st_model_gpu_t *gpu = m->gpu;
    if (!gpu)
        return;
    st_strbuf_puts(out, "  \"gpu\": {\"library\": ");
    st_strbuf_json_string(out, gpu->library ? gpu->library : "");
    st_strbuf_printf(out,
                     ", \"activities\": %llu, \"attributed\": %llu, \"dropped\": %llu, "
                     "\"clock_error_ns\": %.1f,\n    \"kernels\": [",
                     (unsigned long long)gpu->launches, (unsigned long long)gpu->attributed,
                     (unsigned long long)gpu->dropped, gpu->clock_error_ns);
    for (size_t k = 0; k < gpu->nkernels; k++) {
        const st_model_kernel_t *x = &gpu->kernels[k];
        st_strbuf_puts(out, k ? ",\n      {\"name\": " : "\n      {\"name\": ");
        st_strbuf_json_string(out, x->name);
        st_strbuf_printf(out,
                         ", \"count\": %llu, \"total_ns\": %llu, \"mean_ns\": %.17g, "
                         "\"min_ns\": %llu, \"max_ns\": %llu, \"stddev_ns\": %.17g}",
                         (unsigned long long)x->count, (unsigned long long)x->total_ns,
                         x->mean_ns, (unsigned long long)x->min_ns, (unsigned long long)x->max_ns,
                         x->stddev_ns);
    }
    st_strbuf_puts(out, "],\n    \"copies\": [");
    for (size_t k = 0; k < gpu->ncopies; k++) {
        const st_model_copy_t *x = &gpu->copies[k];
        st_strbuf_puts(out, k ? ",\n      {\"direction\": " : "\n      {\"direction\": ");
        st_strbuf_json_string(out, x->direction);
        st_strbuf_printf(out, ", \"count\": %llu, \"bytes\": %llu, \"total_ns\": %llu}",
                         (unsigned long long)x->count, (unsigned long long)x->bytes,
                         (unsigned long long)x->total_ns);
    }
    st_strbuf_puts(out, "]},\n");
}
