/*
 * walk: the native sampling benchmark's workload (bench/native.py).
 *
 *     walk THREADS ROUNDS
 *
 * A CPU-bound numeric kernel about 20 frames deep: each round walks a binary tree
 * of calls 16 levels deep (walk -> walk -> ... -> leaf) whose 65,536 leaves each run
 * a short floating-point loop, so that nearly every interrupt finds a stack of 22
 * frames (_start, two libc frames, main, run_rounds, 16 walks, leaf; 20 in a thread:
 * clone3, start_thread, run_rounds, ...).  THREADS 0 runs the rounds on the main
 * thread; THREADS N > 0 starts N threads that run ROUNDS / N rounds each (the same
 * work in total) and joins them.  A fixed amount of work, never a fixed time: a
 * slower run is a slowdown.  Prints one checksum line, the same under any sampler,
 * and on stderr the process's CPU time at the end of main (every thread's, from
 * CLOCK_PROCESS_CPUTIME_ID): what the process spends after that (a profiler's work
 * at exit) is its whole CPU time minus this.
 *
 * bench/native.py builds it with -O2, with and without -fno-omit-frame-pointer.
 * walk and leaf are noinline and walk uses the result of each call after it
 * returns, so every level keeps a frame of its own (only walk(0) jumps to leaf).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define DEPTH 16
#define LEAF_STEPS 96

__attribute__((noinline)) static double leaf(double x)
{
    double a = x, b = 1.0;
    for (int i = 0; i < LEAF_STEPS; i++) {
        a = a * 0.999 + b * 1e-3;
        b = b * 0.998 + a * 2e-3;
    }
    return a + b;
}

/* A binary tree of calls `depth` levels deep; the mix after the calls is not linear,
 * so it cannot be turned into a loop. */
__attribute__((noinline)) static double walk(int depth, double x)
{
    if (depth == 0)
        return leaf(x);
    double l = walk(depth - 1, x * 1.0001);
    double r = walk(depth - 1, x * 0.9999 + l * 1e-6);
    return l * 0.5 + r * 0.5 + 1.0 / (1.0 + l * r);
}

struct job {
    long rounds;
    double sum;
};

__attribute__((noinline)) static void *run_rounds(void *arg)
{
    struct job *job = arg;
    double sum = 0;
    for (long i = 0; i < job->rounds; i++)
        sum += walk(DEPTH, 1.0 + (double)i * 1e-3);
    job->sum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: walk THREADS ROUNDS\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    long rounds = atol(argv[2]);
    if (threads < 0 || rounds < 0) {
        fprintf(stderr, "walk: THREADS and ROUNDS are counts\n");
        return 2;
    }
    double sum = 0;
    if (threads == 0) {
        struct job job = {rounds, 0};
        run_rounds(&job);
        sum = job.sum;
    } else {
        struct job *jobs = calloc((size_t)threads, sizeof *jobs);
        pthread_t *ids = calloc((size_t)threads, sizeof *ids);
        if (!jobs || !ids) {
            fprintf(stderr, "walk: out of memory\n");
            return 1;
        }
        for (int t = 0; t < threads; t++) {
            jobs[t].rounds = rounds / threads + (t < rounds % threads);
            if (pthread_create(&ids[t], NULL, run_rounds, &jobs[t]) != 0) {
                fprintf(stderr, "walk: cannot start a thread\n");
                return 1;
            }
        }
        for (int t = 0; t < threads; t++) {
            pthread_join(ids[t], NULL);
            sum += jobs[t].sum;
        }
        free(jobs);
        free(ids);
    }
    printf("walk: %d threads, %ld rounds, checksum %.6e\n", threads, rounds, sum);
    struct timespec cpu;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    fprintf(stderr, "walk: CPU at the end of main %.6f s\n",
            (double)cpu.tv_sec + (double)cpu.tv_nsec * 1e-9);
    return 0;
}
