/* STRATA_MPI_GATHER: rank 0 gathers the ranks' results at MPI_Finalize and
 * merges them (issue 14): in libstrata-mpi.so, built once per MPI implementation.
 *
 * Design note. MPI_Finalize first deletes the attributes of MPI_COMM_SELF, with
 * MPI still working: the attribute set after MPI_Init (st_mpi_gather_arm) is how
 * a tool runs collective code at the end (MPI's own advice). Its delete callback,
 * on every rank:
 *   1. writes the rank's results now (strata__mpi_finish): a failure later loses
 *      nothing, the rank's files are on its disk;
 *   2. ranks 1..N-1 send rank 0 a header (the names, sizes and FNV-1a hashes of
 *      profile-<rank>.json and trace-<rank>.pftrace), and then each file rank 0
 *      does not already hold (ranks sharing a folder send nothing but headers),
 *      1 MiB a message, over a duplicate of MPI_COMM_WORLD (the program's messages
 *      are never matched);
 *   3. rank 0 writes each file it receives into its own folder (a temporary name,
 *      renamed when whole) and runs `strata merge` on the folder into merged/:
 *      the load balance, the MPI summary and one trace, as the command would.
 * Everything goes as MPI_BYTE. Rank 0 takes the ranks in order, one file at a
 * time: its memory is one buffer, whatever the job's size. Work a rank does after
 * MPI_Finalize is not in its results then (they were written at its start). */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "native/mpiwrap.h"

#define NOTRACE __attribute__((no_instrument_function))
#define CHUNK (1u << 20)
#define TAG_HEAD 0x5717
#define TAG_WANT 0x5718
#define TAG_DATA 0x5719

extern char **environ;

typedef struct {
    int64_t size; /* -1: none */
    uint64_t hash;
    char name[64];
} file_head_t;

typedef struct {
    file_head_t f[2]; /* profile-<rank>.json, trace-<rank>.pftrace */
} head_t;

static struct {
    MPI_Comm comm;
    MPI_Datatype byte;
    int (*send)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
    int (*recv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
    char *buf; /* CHUNK bytes */
} g;

/* FNV-1a of the file's bytes and its size; -1 when it cannot be read. */
NOTRACE static int64_t hash_file(const char *path, uint64_t *hash)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    uint64_t h = 0xcbf29ce484222325ull;
    int64_t size = 0;
    ssize_t n;
    while ((n = read(fd, g.buf, CHUNK)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            h = (h ^ (unsigned char)g.buf[i]) * 0x100000001b3ull;
        size += n;
    }
    close(fd);
    *hash = h;
    return n < 0 ? -1 : size;
}

NOTRACE static void describe(file_head_t *f, const char *dir, const char *fmt, int rank)
{
    char path[PATH_MAX];
    snprintf(f->name, sizeof f->name, fmt, rank);
    f->size = -1;
    if (dir && snprintf(path, sizeof path, "%s/%s", dir, f->name) < (int)sizeof path)
        f->size = hash_file(path, &f->hash);
}

/* A rank but 0: the header, then the files rank 0 asks for, whole or not at all
 * (a file that shrinks while it is sent is padded: rank 0 counts bytes). */
NOTRACE static void send_files(const char *dir, int rank)
{
    head_t h;
    describe(&h.f[0], dir, "profile-%d.json", rank);
    describe(&h.f[1], dir, "trace-%d.pftrace", rank);
    unsigned char want = 0;
    if (g.send(&h, (int)sizeof h, g.byte, 0, TAG_HEAD, g.comm) != MPI_SUCCESS ||
        g.recv(&want, 1, g.byte, 0, TAG_WANT, g.comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return;
    for (int i = 0; i < 2; i++) {
        if (!(want & (1u << i)))
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, h.f[i].name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        for (int64_t left = h.f[i].size; left > 0;) {
            int n = left < CHUNK ? (int)left : (int)CHUNK;
            ssize_t got = fd >= 0 ? read(fd, g.buf, (size_t)n) : -1;
            if (got < n)
                memset(g.buf + (got > 0 ? got : 0), 0, (size_t)(n - (got > 0 ? got : 0)));
            g.send(g.buf, n, g.byte, 0, TAG_DATA, g.comm);
            left -= n;
        }
        if (fd >= 0)
            close(fd);
    }
}

/* A name a rank sent: a plain file name of ours, nothing that leaves the folder. */
NOTRACE static int good_name(const file_head_t *f)
{
    if (f->size < 0 || !memchr(f->name, '\0', sizeof f->name))
        return 0;
    if (strncmp(f->name, "profile-", 8) != 0 && strncmp(f->name, "trace-", 6) != 0)
        return 0;
    return strchr(f->name, '/') == NULL;
}

/* Rank 0: one file of `size` bytes into dir/name, through dir/.name.part; the
 * bytes are received (and dropped) even when it cannot be written. */
NOTRACE static int receive_file(const char *dir, const char *name, int64_t size, int from)
{
    char path[PATH_MAX], part[PATH_MAX];
    int ok = dir && snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path &&
             snprintf(part, sizeof part, "%s/.%s.part", dir, name) < (int)sizeof part;
    int fd = ok ? open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    int err = fd < 0 ? errno : 0;
    for (int64_t left = size; left > 0;) {
        int n = left < CHUNK ? (int)left : (int)CHUNK;
        if (g.recv(g.buf, n, g.byte, from, TAG_DATA, g.comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            err = err ? err : EIO;
        if (fd >= 0 && !err && write(fd, g.buf, (size_t)n) != n)
            err = errno ? errno : ENOSPC;
        left -= n;
    }
    if (fd >= 0 && close(fd) != 0 && !err)
        err = errno;
    if (fd >= 0 && !err && rename(part, path) != 0)
        err = errno;
    if (err) {
        if (fd >= 0)
            unlink(part);
        fprintf(stderr, "strata: error: MPI gather: rank %d's %s not written: %s\n", from, name,
                strerror(err));
    }
    return err ? -1 : 0;
}

/* Rank 0: every other rank's files that its folder lacks (or holds otherwise). */
NOTRACE static int receive_all(const char *dir, int size)
{
    int failed = 0;
    for (int r = 1; r < size; r++) {
        head_t h;
        if (g.recv(&h, (int)sizeof h, g.byte, r, TAG_HEAD, g.comm, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            return -1;
        unsigned char want = 0;
        for (int i = 0; i < 2; i++) {
            file_head_t *f = &h.f[i];
            if (!good_name(f)) {
                f->size = -1;
                continue;
            }
            char path[PATH_MAX];
            uint64_t mine = 0;
            if (!dir || snprintf(path, sizeof path, "%s/%s", dir, f->name) >= (int)sizeof path ||
                hash_file(path, &mine) != f->size || mine != f->hash)
                want |= (unsigned char)(1u << i);
        }
        if (g.send(&want, 1, g.byte, r, TAG_WANT, g.comm) != MPI_SUCCESS)
            return -1;
        for (int i = 0; i < 2; i++)
            if (want & (1u << i))
                failed |= receive_file(dir, h.f[i].name, h.f[i].size, r) < 0;
        if (h.f[0].size < 0)
            fprintf(stderr, "strata: error: MPI gather: rank %d wrote no profile; the merge "
                            "leaves it out\n", r);
    }
    return failed ? -1 : 0;
}

/* Rank 0: `strata merge --force -o dir/merged dir`, the command that started this
 * process (_STRATA_EXE), without the preloaded libraries. */
NOTRACE static void merge(const char *dir)
{
    const char *exe = getenv("_STRATA_EXE");
    char out[PATH_MAX];
    if (!exe || snprintf(out, sizeof out, "%s/merged", dir) >= (int)sizeof out) {
        fprintf(stderr, "strata: error: MPI gather: cannot run strata merge; the ranks' "
                        "files are in %s\n", dir);
        return;
    }
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 1, sizeof *env);
    if (!env)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            env[k++] = environ[i];
    char *argv[] = {"strata", "merge", "--force", "-o", out, (char *)dir, NULL};
    pid_t pid;
    int st;
    if (posix_spawn(&pid, exe, NULL, NULL, argv, env) == 0)
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
    else
        fprintf(stderr, "strata: error: MPI gather: cannot run %s: %s\n", exe, strerror(errno));
    free(env);
}

/* MPI_COMM_SELF's attribute is deleted: MPI_Finalize has begun. */
NOTRACE static int on_finalize(MPI_Comm self, int key, void *value, void *extra)
{
    (void)self;
    (void)key;
    (void)value;
    (void)extra;
    st_mpi_finish_fn finish = st_mpi_finisher();
    int (*rank_of)(MPI_Comm, int *) = st_mpi_real("PMPI_Comm_rank");
    int (*size_of)(MPI_Comm, int *) = st_mpi_real("PMPI_Comm_size");
    int rank, size;
    if (!finish || !rank_of || !size_of || rank_of(g.comm, &rank) != MPI_SUCCESS ||
        size_of(g.comm, &size) != MPI_SUCCESS || !(g.buf = malloc(CHUNK)))
        return MPI_SUCCESS; /* nothing can be sent: each rank keeps its own files */
    const char *dir = finish(1);
    if (rank != 0)
        send_files(dir, rank);
    else if (receive_all(dir, size) == 0 && dir)
        merge(dir);
    free(g.buf);
    g.buf = NULL;
    return MPI_SUCCESS;
}

NOTRACE static int no_copy(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag)
{
    (void)c;
    (void)key;
    (void)extra;
    (void)in;
    (void)out;
    *flag = 0;
    return MPI_SUCCESS;
}

void st_mpi_gather_arm(MPI_Comm world)
{
    st_mpi_finish_fn finish = st_mpi_finisher();
    if (!finish || !finish(0))
        return;
    int (*dup)(MPI_Comm, MPI_Comm *) = st_mpi_real("PMPI_Comm_dup");
    int (*keyval)(MPI_Comm_copy_attr_function *, MPI_Comm_delete_attr_function *, int *,
                  void *) = st_mpi_real("PMPI_Comm_create_keyval");
    int (*set)(MPI_Comm, int, void *) = st_mpi_real("PMPI_Comm_set_attr");
    g.send = st_mpi_real("PMPI_Send");
    g.recv = st_mpi_real("PMPI_Recv");
    g.byte = ST_MPI_HANDLE(MPI_Datatype, ompi_mpi_byte, MPI_BYTE);
    MPI_Comm self = ST_MPI_HANDLE(MPI_Comm, ompi_mpi_comm_self, MPI_COMM_SELF);
    int key;
    if (!dup || !keyval || !set || !g.send || !g.recv || !g.byte || !self ||
        dup(world, &g.comm) != MPI_SUCCESS)
        return;
    if (keyval(no_copy, on_finalize, &key, NULL) != MPI_SUCCESS ||
        set(self, key, NULL) != MPI_SUCCESS)
        fprintf(stderr, "strata: error: MPI gather: cannot set an attribute on MPI_COMM_SELF; "
                        "each rank's results stay in its folder\n");
}
