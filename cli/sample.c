/* `strata sample [options] [--] program [args]`: call-stack sampling of any
 * program (issue 11); `strata run [options] [--] program [args]`: the profile of
 * a native program, its functions built with -finstrument-functions and its
 * <strata.h> regions (issue 13). One launcher for both.
 *
 * It checks the command line and the program, makes the results folder (so that
 * a mistake is reported before anything runs), then replaces itself with the
 * program, with strata's preload library (src/native/preload.c) appended to
 * LD_PRELOAD and the settings in the environment: each flag given as its
 * STRATA_* variable, the folder as STRATA_OUTPUT_PATH, and _STRATA_SAMPLE* for
 * the library (the process to profile, the target's name, the folder's name as
 * shown). The program keeps this process: its pid, its signals, its exit status. */
#define _GNU_SOURCE
#include "verbs.h"

#include <elf.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "session/args.h"
#include "session/session.h"

extern char **environ;

#ifndef STRATA_PRELOAD_REL
#define STRATA_PRELOAD_REL ""
#endif
#define PRELOAD_NAME "libstrata-preload.so"

static int die(const char *text)
{
    fprintf(stderr, "strata: error: %s\n", text);
    return 2;
}

/* The strata command's own path, in self (PATH_MAX bytes); -1 if unknown. */
static int self_exe(char *self)
{
    ssize_t n = readlink("/proc/self/exe", self, PATH_MAX - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    return 0;
}

/* The preload library: beside this executable (a build tree), else where the
 * Python package installs it relative to the scripts folder. */

static int find_preload(char *buf, size_t size)
{
    char self[PATH_MAX];
    if (self_exe(self) < 0)
        return -1;
    const char *dir = dirname(self);
    const char *rel[] = {"", STRATA_PRELOAD_REL};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        if (i > 0 && !*rel[i])
            continue;
        if (snprintf(buf, size, "%s/%s%s" PRELOAD_NAME, dir, rel[i], *rel[i] ? "/" : "") <
                (int)size &&
            access(buf, R_OK) == 0)
            return 0;
    }
    return -1;
}

/* 0 unless `path` is an ELF executable with no program interpreter (statically
 * linked: the loader that reads LD_PRELOAD never runs); scripts and dynamic
 * executables pass. */
static int check_dynamic(const char *path, const char *prog, char *why, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0; /* execvp says why */
    Elf64_Ehdr eh;
    int is_static = 0, is_library = 0;
    if (fread(&eh, sizeof eh, 1, f) == 1 && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr)) {
        is_static = 1;
        for (int i = 0; i < eh.e_phnum && is_static; i++) {
            Elf64_Phdr ph;
            if (fseek(f, (long)(eh.e_phoff + (uint64_t)i * sizeof ph), SEEK_SET) != 0 ||
                fread(&ph, sizeof ph, 1, f) != 1)
                is_static = 0; /* unreadable: let the kernel judge */
            else if (ph.p_type == PT_INTERP)
                is_static = 0;
        }
    }
    fclose(f);
    /* no interpreter and no entry point: a shared library, not a program */
    is_library = is_static && eh.e_type == ET_DYN && eh.e_entry == 0;
    if (is_library)
        snprintf(why, size, "'%s' is a shared library, not a program: run the program that "
                            "loads it", prog);
    else if (is_static)
        snprintf(why, size, "'%s' is statically linked: strata needs a program that loads "
                            "shared libraries (its preload library is one)", prog);
    return is_static ? -1 : 0;
}

/* 1 when the ELF program at `path` needs a library whose name starts with one of
 * `names` (its DT_NEEDED entries), else 0 (not ELF, unreadable: 0). */
static int needs_library(const char *path, const char *const *names)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    Elf64_Ehdr eh;
    Elf64_Phdr ph[64];
    int found = 0, nph = 0;
    if (fread(&eh, sizeof eh, 1, f) != 1 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
        fseek(f, (long)eh.e_phoff, SEEK_SET) != 0)
        goto out;
    nph = eh.e_phnum < 64 ? eh.e_phnum : 64;
    if (fread(ph, sizeof ph[0], (size_t)nph, f) != (size_t)nph)
        goto out;
    /* a virtual address's offset in the file, through the loaded segments */
#define FILE_OFF(va, off)                                                                      for (int k = 0; k < nph; k++)                                                                  if (ph[k].p_type == PT_LOAD && (va) >= ph[k].p_vaddr &&                                        (va) < ph[k].p_vaddr + ph[k].p_filesz)                                                     off = (long)((va) - ph[k].p_vaddr + ph[k].p_offset);
    for (int i = 0; i < nph && !found; i++) {
        if (ph[i].p_type != PT_DYNAMIC)
            continue;
        size_t n = ph[i].p_filesz / sizeof(Elf64_Dyn);
        Elf64_Dyn dyn[512];
        if (n > 512)
            n = 512;
        if (fseek(f, (long)ph[i].p_offset, SEEK_SET) != 0 || fread(dyn, sizeof dyn[0], n, f) != n)
            break;
        long strtab = -1;
        for (size_t d = 0; d < n && dyn[d].d_tag != DT_NULL; d++)
            if (dyn[d].d_tag == DT_STRTAB)
                FILE_OFF(dyn[d].d_un.d_ptr, strtab)
        for (size_t d = 0; strtab >= 0 && d < n && dyn[d].d_tag != DT_NULL && !found; d++) {
            char name[64] = "";
            if (dyn[d].d_tag != DT_NEEDED || fseek(f, strtab + (long)dyn[d].d_un.d_val, SEEK_SET) != 0 ||
                !fgets(name, sizeof name, f))
                continue;
            for (const char *const *w = names; *w && !found; w++)
                found = strncmp(name, *w, strlen(*w)) == 0;
        }
    }
#undef FILE_OFF
out:
    fclose(f);
    return found;
}

/* 1 when the program runs with MPI: its launcher's variables (Open MPI's mpirun,
 * MPICH's Hydra, PMI and PMIx as srun sets them), else an MPI library it needs. */
static int runs_mpi(const char *path)
{
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") ||
        getenv("HYDRA_CONTROL_FD") || getenv("PMI_FD"))
        return 1;
    static const char *const libs[] = {"libmpi.so.40", "libmpi_mpifh.so.40", "libmpi.so.12",
                                       "libmpich.so.12", "libmpifort.so.12",
                                       "libmpichfort.so.12", NULL};
    return path && needs_library(path, libs);
}

const char *st_cli_mpi_wrappers(const char *program, char *buf, size_t size)
{
    char lib[PATH_MAX];
    if (!runs_mpi(program) || find_preload(lib, sizeof lib) < 0)
        return NULL;
    char *slash = strrchr(lib, '/');
    if (slash)
        *slash = '\0';
    if (snprintf(buf, size, "%s/libstrata-mpi.so", slash ? lib : ".") >= (int)size ||
        access(buf, R_OK) != 0)
        return NULL; /* strata was built without MPI headers */
    /* the command itself, for STRATA_MPI_GATHER's merge (native/mpigather.c) */
    char self[PATH_MAX];
    if (self_exe(self) == 0)
        setenv("_STRATA_EXE", self, 1);
    return buf;
}

/* 0 when `prog` names an executable file (a path, or a name found in PATH) that
 * is not statically linked; its path goes to `path` (PATH_MAX bytes). */
static int check_program(const char *prog, char *path, char *why, size_t size)
{
    struct stat st;
    if (strchr(prog, '/')) {
        if (stat(prog, &st) != 0) {
            snprintf(why, size, "cannot run '%s': %s", prog, strerror(errno));
            return -1;
        }
        if (S_ISDIR(st.st_mode) || access(prog, X_OK) != 0) {
            snprintf(why, size, "cannot run '%s': not an executable file", prog);
            return -1;
        }
        snprintf(path, PATH_MAX, "%s", prog);
        return check_dynamic(prog, prog, why, size);
    }
    const char *dirs = getenv("PATH");
    if (!dirs)
        dirs = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = dirs;; p++) {
        size_t n = strcspn(p, ":");
        char full[PATH_MAX];
        if (snprintf(full, sizeof full, "%.*s%s%s", (int)n, n ? p : ".", "/", prog) <
                (int)sizeof full &&
            stat(full, &st) == 0 && !S_ISDIR(st.st_mode) && access(full, X_OK) == 0) {
            snprintf(path, PATH_MAX, "%s", full);
            return check_dynamic(full, prog, why, size);
        }
        p += n;
        if (!*p)
            break;
    }
    snprintf(why, size, "program '%s' not found in PATH", prog);
    return -1;
}

/* Each flag given on the command line as its STRATA_* variable. */
static int export_flags(const st_settings_t *set)
{
    st_strbuf_t v;
    st_strbuf_init(&v);
    int rc = 0;
    for (int i = 0; i < ST_NSETTINGS && rc == 0; i++) {
        if (set->v[i].source != ST_SRC_FLAG)
            continue;
        st_strbuf_reset(&v);
        st_settings_format(set, (st_setting_id_t)i, &v);
        rc = v.failed ? -1 : setenv(st_setting_def((st_setting_id_t)i)->env, st_strbuf_cstr(&v), 1);
    }
    st_strbuf_free(&v);
    return rc;
}

/* 1 when `path` is the interpreter `strata python` runs and `args` (the words
 * after it) name a script or -m module as strata python takes them. */
static int is_strata_python(const char *path, char *const *args, int nargs)
{
    char buf[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
    const char *python = st_cli_find_python(buf, sizeof buf);
    if (!strchr(python, '/') || !realpath(path, a) || !realpath(python, b) || strcmp(a, b) != 0)
        return 0;
    return nargs > 0 && (args[0][0] != '-' || strcmp(args[0], "-m") == 0);
}

/* `strata sample [flags] -- python ARGS` as `strata python --sample --native
 * [flags] ARGS`: the Python frames in place of the interpreter's eval loop. */
static int sample_python(int argc, char **argv, int target_at)
{
    char **words = calloc((size_t)argc + 3, sizeof *words);
    if (!words)
        return die("out of memory");
    int n = 0;
    words[n++] = "--sample";
    words[n++] = "--native";
    for (int i = 0; i < target_at; i++)
        if (strcmp(argv[i], "--") != 0)
            words[n++] = argv[i];
    words[n++] = "--";
    for (int i = target_at + 1; i < argc; i++)
        words[n++] = argv[i];
    int rc = st_python_main(n, words);
    free(words);
    return rc;
}

/* Both verbs: run is 0 (sample) or 1 (run). */
static int launch(int run, int argc, char **argv)
{
    st_args_t args;
    st_msg_t msg;
    int rc = st_args_parse_python(&args, argc, argv, environ, run ? ST_ARGS_RUN : ST_ARGS_EXE, NULL,
                                  stdout, &msg);
    if (rc == ST_EHELP)
        return 0;
    if (rc < 0)
        return die(msg.text);
    char why[PATH_MAX + 64], lib[PATH_MAX], path[PATH_MAX];
    if (check_program(args.target, path, why, sizeof why) < 0) {
        st_args_free(&args);
        return die(why);
    }
    /* counters are read at calls: strata run's, not samples; each must count here */
    st_hwc_t hwc;
    rc = st_hwc_parse(&args.settings, &hwc, &msg);
    if (rc == 0 && hwc.n && !run)
        rc = st_msg_set(&msg, ST_EINVAL, "%s: counters are read where calls begin and end: "
                        "use strata run (or strata python) for them", hwc.ev[0].metric);
    if (rc == 0)
        rc = st_hwc_check(&hwc, &msg);
    if (rc < 0) {
        st_args_free(&args);
        return die(msg.text);
    }
    if (!run && is_strata_python(path, args.target_args, args.ntarget_args)) {
        int at = (int)(args.target_args - 1 - argv);
        st_args_free(&args);
        return sample_python(argc, argv, at);
    }
    if (find_preload(lib, sizeof lib) < 0) {
        st_args_free(&args);
        return die("cannot find strata's preload library " PRELOAD_NAME " (is strata installed "
                   "whole?)");
    }
    /* the results folder, named after the program */
    char target[128], abs[PATH_MAX], shown[PATH_MAX];
    snprintf(target, sizeof target, "%s", strrchr(args.target, '/') ? strrchr(args.target, '/') + 1
                                                                   : args.target);
    uint32_t rank;
    if (st_session_outdir(&args.settings, target, st_session_rank_from_env(NULL, &rank), abs, shown,
                          &msg) < 0) {
        st_args_free(&args);
        return die(msg.text);
    }
    /* LD_PRELOAD: the program's own first (a sanitizer's runtime must come first) */
    const char *old = getenv("LD_PRELOAD");
    st_strbuf_t pre;
    st_strbuf_init(&pre);
    if (old && *old)
        st_strbuf_printf(&pre, "%s ", old);
    st_strbuf_puts(&pre, lib);
    /* strata run of an MPI program: the wrappers of its implementation, after */
    char mpilib[PATH_MAX];
    const char *mpi = run ? st_cli_mpi_wrappers(path, mpilib, sizeof mpilib) : NULL;
    if (mpi)
        st_strbuf_printf(&pre, " %s", mpilib);
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    if (pre.failed || export_flags(&args.settings) < 0 || setenv("LD_PRELOAD", st_strbuf_cstr(&pre), 1) < 0 ||
        setenv("STRATA_OUTPUT_PATH", abs, 1) < 0 ||
        (!run && setenv("STRATA_USE_SAMPLING", "ON", 1) < 0) ||
        setenv("_STRATA_MODE", run ? "run" : "sample", 1) < 0 ||
        setenv("_STRATA_SAMPLE", pid, 1) < 0 || setenv("_STRATA_SAMPLE_TARGET", target, 1) < 0 ||
        setenv("_STRATA_SAMPLE_SHOWN", shown, 1) < 0 ||
        (mpi ? setenv("_STRATA_MPI", "1", 1) : unsetenv("_STRATA_MPI")) < 0) {
        st_strbuf_free(&pre);
        st_args_free(&args);
        return die("out of memory");
    }
    st_strbuf_free(&pre);
    /* strata run: Kokkos loads its tools from KOKKOS_TOOLS_LIBS (Kokkos 3:
     * KOKKOS_PROFILE_LIBRARY, set by the library when the program's Kokkos is one,
     * native/kokkos.h): strata's library, already loaded, unless the user names
     * another */
    const char *kt = getenv("KOKKOS_TOOLS_LIBS"), *kp = getenv("KOKKOS_PROFILE_LIBRARY");
    if (run && (!kt || !*kt) && (!kp || !*kp) &&
        (setenv("KOKKOS_TOOLS_LIBS", lib, 1) < 0 || setenv("_STRATA_KOKKOS_LIB", lib, 1) < 0)) {
        st_args_free(&args);
        return die("out of memory");
    }
    char **cmd = args.target_args - 1; /* the program's word, then its arguments */
    const char *prog = args.target;
    st_args_free(&args);
    execvp(prog, cmd);
    snprintf(why, sizeof why, "cannot run '%s': %s", prog, strerror(errno));
    rmdir(abs);
    return die(why);
}

int st_sample_main(int argc, char **argv)
{
    return launch(0, argc, argv);
}

int st_run_main(int argc, char **argv)
{
    return launch(1, argc, argv);
}
