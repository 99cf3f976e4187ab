/* NVIDIA GPUs through NVML (libnvidia-ml.so.1, part of the driver), loaded with
 * dlopen so that strata builds and runs without it: each GPU's memory in use,
 * power, temperature and utilisation.
 *
 * Open once, read as often as wanted from one thread at a time, close once. When
 * the library is missing, does not initialise or reports no GPU, st_nvml_open
 * leaves ngpus at 0 and `note` says why (shown beside the process sampler's
 * summary). */
#ifndef STRATA_GPU_NVML_H
#define STRATA_GPU_NVML_H

#define ST_NVML_MAX_GPUS 4
/* What st_nvml_read gives per GPU, in this order. */
#define ST_NVML_NMETRICS 4

typedef struct {
    int ngpus;
    char note[160];         /* why there are no GPU metrics, or "" */
    /* private */
    void *lib;              /* dlopen handle */
    void *gpus[ST_NVML_MAX_GPUS];
    int (*mem)(void *, void *);
    int (*power)(void *, unsigned int *);
    int (*temp)(void *, int, unsigned int *);
    int (*util)(void *, void *);
} st_nvml_t;

/* The metrics of one GPU: name (after "gpu<N>.") and units, in st_nvml_read's
 * order: memory_used (bytes), power (W), temperature (C), utilization (%). */
typedef struct {
    const char *name, *units;
} st_nvml_metric_t;
extern const st_nvml_metric_t st_nvml_metrics[ST_NVML_NMETRICS];

/* Loads NVML and finds the GPUs (at most ST_NVML_MAX_GPUS). Never fails: with no
 * GPU, n->ngpus is 0 and n->note says why. */
void st_nvml_open(st_nvml_t *n);

/* The current values of GPU `gpu` (0 <= gpu < ngpus) into out[ST_NVML_NMETRICS];
 * a value NVML cannot give reads 0. */
void st_nvml_read(const st_nvml_t *n, int gpu, double out[ST_NVML_NMETRICS]);

/* Unloads NVML; n is empty afterwards. */
void st_nvml_close(st_nvml_t *n);

#endif
