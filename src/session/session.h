/* A profiling session: the settings it runs with, the label table, the recorder
 * every collector feeds (core/recorder.h: each thread's call paths and events), the
 * collectors (collector.h), and the results folder. Front ends (the Python
 * extension, later the preload library) own one session, add their collector and
 * drive the run: st_session_begin, st_session_start, st_session_stop,
 * st_session_finish. Writers see the results only as an st_model_t.
 *
 * Threads register with the recorder as they first record and are never removed: a
 * thread's paths outlive the thread, so that results include finished threads.
 * Not thread-safe apart from the recorder's own protocol: the Python front end calls
 * it with the GIL held. */
#ifndef STRATA_SESSION_SESSION_H
#define STRATA_SESSION_SESSION_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"
#include "core/components.h"
#include "core/intern.h"
#include "core/loctab.h"
#include "core/recorder.h"
#include "core/settings.h"
#include "model/model.h"
#include "session/collector.h"
#include "system/hwc.h"
#include "system/sampler.h"

#define ST_SESSION_MAX_COLLECTORS 8

typedef struct st_session {
    st_settings_t settings;
    st_intern_t labels;
    st_loctab_t locs;      /* where each label's code lives (pstats, callgrind) */
    int has_rank;          /* an MPI launcher gave this process a rank */
    uint32_t rank;
    st_recorder_t rec;     /* every thread's paths and events (the settings' limits) */
    unsigned components;   /* 1 << st_component_t for each chosen */
    char outdir[PATH_MAX]; /* absolute: a program that changes directory keeps it */
    char outdir_shown[PATH_MAX]; /* as the user named it (relative to where strata began) */
    char **command;
    size_t ncommand;
    char target[128];      /* what runs: the script's or module's name */
    uint64_t start_ns;     /* CLOCK_REALTIME */
    int written;
    int tracing;           /* threads record timelines (STRATA_TRACE; rec.cfg.trace) */
    int sampling;          /* the process sampler runs (STRATA_USE_PROCESS_SAMPLING) */
    int helper_threads;    /* threads the front end runs for strata (set before start):
                            * the sampler leaves them out of the program's */
    int timed;             /* a collector times calls (the profile hook runs) */
    int stack_sampling;    /* a stack sampler ran (its collector sets it) */
    int memory_stacks;     /* sampled allocations carry their stacks (--memory=sample
                            * without the profile): the memory metrics have tables */
    int stack_failed;      /* its samples could not all be folded (memory, spill) */
    st_model_stacks_t stacks; /* what the stack sampler contributes */
    /* the stack sampler's frames: sampled id f is the labels
     * stack_chain[stack_first[f] .. stack_first[f + 1]), outermost first (as
     * st_rec_fold_chains takes them); kept for the timeline's samples; owned */
    uint32_t *stack_first, *stack_chain;
    uint32_t stack_nids;
    st_sampler_t sampler;
    st_model_metric_t sampler_metrics[ST_SAMPLER_MAX_METRICS]; /* what it contributes */
    double ns_per_tick[ST_NTIMERS]; /* each timer's, while results are written */
    uint64_t trace_stats[4]; /* what writing the timeline gave (st_session_write_timeline) */
    double trace_write_s;    /* and how long it took */
    st_hwc_t hwc;            /* the counters read at every call (perf:, papi:) */
    uint32_t mpi_bytes;      /* the MPI calls' bytes metric, or ST_METRIC_NONE */
    uint32_t mem_metrics[4]; /* --memory's metrics with tables: bytes and allocations made,
                              * bytes held at the peak and at the end */
    uint32_t nmem_metrics;
    struct st_gpu *gpu;      /* the GPU collector (session/gpu.h), NULL: none */
    uint32_t gpu_metric;     /* its gpu_time metric, or ST_METRIC_NONE */
    st_collector_t collectors[ST_SESSION_MAX_COLLECTORS];
    int ncollectors;
    /* a followed process tree (STRATA_FOLLOW_CHILDREN): its top run's results folder
     * ("" when not following), this process's parent in it (0 at the top), and the
     * children of this process read back from the tree's record at the end */
    char tree[PATH_MAX];
    long tree_parent;
    struct st_tree_proc *children_rec; /* the record's lines read at the end */
    size_t nrec;
    int nstarted;            /* collectors started and not stopped yet */
    int nran;                /* collectors started (the first nran): they flush and
                              * contribute when results are written */
} st_session_t;

/* A session with a copy of settings, a recorder set up from them (node limit,
 * timers, timeline budget, fill policy and depth; a flush spills into the results
 * folder made later), and the built-in collectors the settings ask for (the process
 * sampler, the timeline). Returns 0, ST_ENOMEM, or ST_EINVAL when no component is
 * chosen (msg says so). */
int st_session_init(st_session_t *s, const st_settings_t *settings, st_msg_t *msg);

/* Begins a run: st_session_init, the clock the settings name (core/clock.h), the
 * results folder (st_session_make_outdir, for `target`) and the command line for
 * the metadata. On failure nothing needs freeing. */
int st_session_begin(st_session_t *s, const st_settings_t *settings, const char *target,
                     int argc, char *const *argv, st_msg_t *msg);

/* Adds a collector (copied) to be started after those already in the list.
 * Before st_session_start. Returns 0, or ST_EINVAL when the list is full. */
int st_session_add_collector(st_session_t *s, const st_collector_t *c);
void st_session_free(st_session_t *s);

/* One process of a followed tree's record (processes.jsonl). */
typedef struct st_tree_proc {
    long pid, parent;        /* pid 0: not known (a program started by subprocess) */
    char *folder;            /* its results folder's name, in the tree's folder; NULL
                              * for a process that is not followed */
    char *not_followed;      /* why it is not followed ("not Python"), or NULL */
    char **command;
    size_t ncommand;
} st_tree_proc_t;

/* Reads <tree>/processes.jsonl into *out (malloc'd, in the record's order; lines
 * that are not a record are skipped). 0; -1 when there is no record (*n 0). */
int st_tree_read(const char *tree, st_tree_proc_t **out, size_t *n);
void st_tree_free(st_tree_proc_t *v, size_t n);

/* This run is part of a followed process tree whose top run writes into `tree`:
 * a child (parent != 0) adds itself to the tree's record, <tree>/processes.jsonl
 * (one line, one write: processes never interleave), and every run of the tree
 * lists its own children from it in profile.json (metadata.children) and, at the
 * top, says on the terminal how many processes were profiled. */
void st_session_follow(st_session_t *s, const char *tree, long parent);

/* The same line written by the process that is about to become the program (a
 * child between fork and exec), into the record of the tree whose top run writes
 * into `tree` ("": nothing): no allocation, no lock (its buffer is a mapping of its
 * own), so that a child of vfork may call it. */
void st_session_record_not_followed(const char *tree, long pid, long parent, const char *why,
                                    char *const *command, size_t ncommand);

/* A process this run starts (or becomes, by exec) that the tree does not follow:
 * named in the tree's record with its command line and why (pid 0 when not known).
 * Nothing when the run is not part of a followed tree. */
void st_session_not_followed(st_session_t *s, long pid, char *const *command, size_t ncommand,
                             const char *why);

/* Records the command line for the metadata (copied). */
int st_session_set_command(st_session_t *s, int argc, char *const *argv);

/* Creates the results folder: the output_path setting, else
 * strata-<target>-output/<YYYY-MM-DD_HH.MM.SS>/ under the current directory
 * (with a _2, _3 ... suffix if that exists already). Checks that it can be written.
 * The folder is kept as an absolute path (outdir), so that a program that changes
 * its working directory neither loses its results nor has them written into its new
 * directory; outdir_shown is the name as given, for messages. Leaves in it a note,
 * incomplete.txt (incomplete-<rank>.txt), saying that the run has not ended yet,
 * removed once the results are written: a run that ends without letting strata
 * write (os._exit before the hook, SIGKILL, a crash) leaves a folder that says why
 * it holds no profile. Call before the target starts, so that a bad place is an
 * error before anything runs. */
int st_session_make_outdir(st_session_t *s, const char *target, st_msg_t *msg);

/* Names and creates a results folder as st_session_make_outdir does (without its
 * note), for a front end that makes it before the session exists (strata
 * sample, before the program starts): abs gets its absolute path, shown the
 * name as given. */
int st_session_outdir(const st_settings_t *set, const char *target, int has_rank,
                      char abs[PATH_MAX], char shown[PATH_MAX], st_msg_t *msg);

/* The rank is `rank` (MPI_COMM_WORLD's, known once MPI is initialised): the files
 * of the run carry it from now on (the folder's note moves to its new name). */
void st_session_set_rank(st_session_t *s, uint32_t rank);

/* Removes the results folder's incomplete.txt note (after the results are
 * written, or when nothing ran). */
void st_session_unmark(st_session_t *s);

/* The name of a file of this run: stem, then "-<rank>" under an MPI launcher, then
 * ext ("trace" ".pftrace" -> trace-3.pftrace), so that ranks sharing a folder never
 * write the same file. */
void st_session_file_name(const st_session_t *s, const char *stem, const char *ext, char *buf,
                          size_t size);

/* Starts every collector, in order, once the results folder exists and before the
 * target starts. When one fails, those started are stopped again, the results
 * folder (empty but for its note) is removed, and its code is returned with msg
 * saying why: nothing ran, and no results are to be written. */
int st_session_start(st_session_t *s, st_msg_t *msg);

/* The run has ended: stops the collectors started (reverse order), then ends the
 * calls still open in every thread (daemon threads, the main thread's own frames),
 * in the paths and on the timeline. Once; later calls do nothing more. */
void st_session_stop(st_session_t *s);

/* Finishes a stopped run: the session takes `settings` as they ended (the program
 * may have changed them; NULL: keeps its own), writes the results
 * (st_session_write, with the clock's tick length and name), and says on `notes`
 * when memory ran out while recording. Returns st_session_write's code. */
int st_session_finish(st_session_t *s, const st_settings_t *settings, FILE *tables, FILE *notes,
                      st_msg_t *msg);

/* Writes trace.pftrace (and trace.json with the chrome format; trace-<rank>.* under
 * MPI) into the results folder, through temporary files created exclusively and
 * renamed into place. Open calls must have been closed. Fills the model's timeline
 * statistics. Defined in trace_out.c, with the timeline's collector, which calls it
 * from its flush. */
int st_session_write_timeline(st_session_t *s, double ns_per_tick, uint64_t stats[4],
                              st_msg_t *msg);
/* stats: events written, calls dropped (buffer full), calls too deep, bytes. */

/* Prints what the timeline holds to `info` (may be NULL), and what it lost to
 * `notes` (may be NULL): calls dropped or too deep, a spill file that could not be
 * written (trace_out.c). */
void st_session_print_trace_summary(FILE *info, FILE *notes, const st_session_t *s,
                                    const uint64_t stats[4]);

/* The MPI rank the launcher gave this process: the first of OMPI_COMM_WORLD_RANK,
 * PMI_RANK, PMIX_RANK, MV2_COMM_WORLD_RANK, PALS_RANKID, SLURM_PROCID that holds a
 * whole number, from envp (NULL: the process's environment). Returns 1 and sets
 * *rank, or 0. A session with a rank puts it in every file name
 * (profile-<rank>.json, <component>-<rank>.txt) and in profile.json. */
int st_session_rank_from_env(char *const *envp, uint32_t *rank);

/* A stack sampler's contribute (collector.h): what it did (s->stacks), once it
 * ran. */
void st_session_stacks_contribute(const st_collector_t *c, const st_session_t *s, st_model_t *m);

/* The GPU collector (gpu.c; its design in session/gpu.h). st_gpu_add registers the
 * gpu_time metric (before any thread records) and adds the collector to the
 * session, from st_session_init when the settings ask for it: 0 or ST_ENOMEM.
 * st_gpu_free frees what it holds (st_session_free). */
int st_gpu_add(st_session_t *s);
void st_gpu_free(st_session_t *s);

/* The timeline's collector (trace_out.c): flush writes the timeline files, contribute
 * gives the model their statistics. Added by st_session_init when the session traces. */
extern const st_collector_t st_session_timeline_collector;

/* Writes <component>.txt for each component, profile.json and the other formats
 * asked for into the results folder, each streamed as it is rendered to a temporary
 * file renamed into place, and prints the tables (copied back from their files, or
 * rendered again where a file was not written) and the folder's name to `tables`
 * (may be NULL); tables too long for a terminal (output/summary.h) are printed as a
 * summary of the top functions and where the full tables are.
 * Every file is tried even when another fails; each failure is printed to `notes`
 * as a `strata: error:` line, and so is every warning about data that was lost
 * (calls not recorded, a failed spill): `notes` gets them whether or not the tables
 * are printed (NULL: not printed). Returns 0, or the first failure's code with msg
 * holding its text. Open calls must have been closed. ns_per_tick converts each
 * timer's ticks. Before anything else, every collector flushes (the timeline's
 * files first, so that profile.json records what writing them gave); the model then
 * gets what each collector contributes. */
int st_session_write(st_session_t *s, const double ns_per_tick[ST_NTIMERS],
                     const char *clock_name, FILE *tables, FILE *notes, st_msg_t *msg);

#endif
