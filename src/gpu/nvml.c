#include "gpu/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* The part of NVML's API used here (nvml.h, stable since CUDA 5). */
typedef struct {
    unsigned long long total, free, used;
} nvml_memory_t;
typedef struct {
    unsigned int gpu, memory;
} nvml_util_t;
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_count_fn)(unsigned int *);
typedef int (*nvml_handle_fn)(unsigned int, void **);

const st_nvml_metric_t st_nvml_metrics[ST_NVML_NMETRICS] = {
    {"memory_used", "bytes"},
    {"power", "W"},
    {"temperature", "C"},
    {"utilization", "%"},
};

void st_nvml_open(st_nvml_t *n)
{
    memset(n, 0, sizeof *n);
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(n->note, sizeof n->note,
                 "no NVIDIA driver (libnvidia-ml.so.1 not found): GPU metrics skipped");
        return;
    }
    nvml_init_fn init = (nvml_init_fn)dlsym(h, "nvmlInit_v2");
    nvml_count_fn count = (nvml_count_fn)dlsym(h, "nvmlDeviceGetCount_v2");
    nvml_handle_fn handle = (nvml_handle_fn)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    n->mem = (int (*)(void *, void *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    n->power = (int (*)(void *, unsigned int *))dlsym(h, "nvmlDeviceGetPowerUsage");
    n->temp = (int (*)(void *, int, unsigned int *))dlsym(h, "nvmlDeviceGetTemperature");
    n->util = (int (*)(void *, void *))dlsym(h, "nvmlDeviceGetUtilizationRates");
    unsigned int count_n = 0;
    if (!init || !count || !handle || !n->mem || !n->power || !n->temp || !n->util ||
        init() != 0 || count(&count_n) != 0) {
        memset(n, 0, sizeof *n);
        snprintf(n->note, sizeof n->note,
                 "the NVIDIA driver's libnvidia-ml.so.1 did not initialise: GPU metrics skipped");
        dlclose(h);
        return;
    }
    n->lib = h;
    for (unsigned int i = 0; i < count_n && n->ngpus < ST_NVML_MAX_GPUS; i++)
        if (handle(i, &n->gpus[n->ngpus]) == 0)
            n->ngpus++;
    if (n->ngpus == 0)
        snprintf(n->note, sizeof n->note, "the NVIDIA driver reports no GPU");
}

void st_nvml_read(const st_nvml_t *n, int gpu, double out[ST_NVML_NMETRICS])
{
    nvml_memory_t mem = {0, 0, 0};
    unsigned int mw = 0, temp = 0;
    nvml_util_t util = {0, 0};
    n->mem(n->gpus[gpu], &mem);
    n->power(n->gpus[gpu], &mw);
    n->temp(n->gpus[gpu], 0 /* NVML_TEMPERATURE_GPU */, &temp);
    n->util(n->gpus[gpu], &util);
    out[0] = (double)mem.used;
    out[1] = (double)mw / 1000.0;
    out[2] = (double)temp;
    out[3] = (double)util.gpu;
}

void st_nvml_close(st_nvml_t *n)
{
    if (n->lib)
        dlclose(n->lib);
    memset(n, 0, sizeof *n);
}
