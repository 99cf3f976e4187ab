"""strata run's MPI benchmark (bench/run.py --mode mpi; issue 14).

    python bench/run.py --mode mpi [-n N]

What the MPI wrappers cost a call: bench/workloads/native/mpi_bench.c (mpicc,
-O2) on two ranks under Open MPI's mpirun, a ping-pong of one int (a round trip
is four calls one after the other, each rank's send and receive: each call's
cost adds to it) and an allreduce of one double (one call a rank, the two ranks'
at the same time: one call's cost adds to it), and MPI_Test of
MPI_REQUEST_NULL, which returns at once (one call: the wrapper's own cost without
communication, the steadiest figure), 200,000 iterations (test: 2,000,000)
timed inside the program (MPI_Wtime, after a warm-up), in three configurations
in the same rounds, in a shuffled order:

    plain    mpirun -n 2 prog
    floor    the same with bench/floor/mpifloor.c preloaded: wrappers that read
             the TSC once and call PMPI (what any PMPI tool pays)
    strata   mpirun -n 2 strata run -o DIR -- prog (STRATA_PRINT_TABLES=OFF)

Reported: medians of the nanoseconds an iteration, and the added nanoseconds a
call, (configuration - plain) / calls an iteration, strata's and the floor's.
Target (issue 14): at most 50 ns a call.
"""

import datetime
import os
import shutil
import statistics

from run import BENCH, BUILD_DIR, clean_env, compile_all, round_robin, update_doc

SOURCE = os.path.join(BENCH, "workloads", "native", "mpi_bench.c")
FLOOR = os.path.join(BENCH, "floor", "mpifloor.c")
OUT = os.path.join(BUILD_DIR, "mpi")
ITERS = 200000
WORKLOADS = {"pingpong": 4, "allreduce": 1, "test": 1}  # name -> calls on an iteration's path
MARKERS = ("<!-- bench-mpi:begin (written by bench/run.py --mode mpi --update-docs) -->",
           "<!-- bench-mpi:end -->")
ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def build(mpicc):
    prog, floor = os.path.join(OUT, "mpi_bench"), os.path.join(OUT, "libmpifloor.so")
    compile_all(OUT, ([mpicc, "-O2", SOURCE, "-o", prog],
                      [mpicc, "-O2", "-fPIC", "-shared", FLOOR, "-o", floor]))
    return prog, floor


def main_mpi(args, repeats, strata):
    mpicc, mpirun = shutil.which("mpicc.openmpi") or shutil.which("mpicc"), \
        shutil.which("mpirun.openmpi") or shutil.which("mpirun")
    if not mpicc or not mpirun:
        raise SystemExit("bench: --mode mpi needs Open MPI (Debian's openmpi-bin, libopenmpi-dev)")
    prog, floor = build(mpicc)
    env = dict(clean_env(), **ENV)
    configs = {
        "plain": lambda a, d: ([mpirun, "-n", "2", prog] + a, env),
        "floor": lambda a, d: ([mpirun, "-n", "2", "-x", f"LD_PRELOAD={floor}", prog] + a, env),
        "strata": lambda a, d: ([mpirun, "-n", "2", strata, "run", "-o", d, "--", prog] + a,
                                dict(env, STRATA_PRINT_TABLES="OFF")),
    }
    items = {w: [w, str(ITERS * 10 if w == "test" else ITERS)] for w in WORKLOADS}
    runs = round_robin(configs, items, repeats, args.timeout)
    ns = {w: {c: [(float(r.stdout.split()[0]), r.stdout.split()[-1]) for r in runs[(w, c)]]
              for c in configs} for w in WORKLOADS}
    rows, added = [], {}
    for w, calls in WORKLOADS.items():
        if len({chk for c in configs for _, chk in ns[w][c]}) != 1:
            raise SystemExit(f"bench: {w}: the configurations computed different results")
        m = {c: statistics.median(v for v, _ in ns[w][c]) for c in configs}
        added[w] = (m["strata"] - m["plain"]) / calls
        rows.append(f"| {w} ({calls} call{'s' if calls > 1 else ''} on an iteration's path) | "
                    f"{m['plain']:.0f} ns | {m['floor']:.0f} ns | {m['strata']:.0f} ns | "
                    f"{added[w]:.0f} ns / {(m['floor'] - m['plain']) / calls:.0f} ns |")
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    section = "\n".join([
        "#### Latest results",
        "",
        f"- Date: {when}; median of {repeats} runs per configuration after one warm-up "
        f"round, round-robin in a shuffled order; {ITERS:,} iterations a run ({ITERS * 10:,} "
        f"for test); command "
        f"`.venv/bin/python bench/run.py --mode mpi -n {repeats}`",
        f"- Machine: {os.cpu_count()} CPUs; Open MPI, two ranks on one node (shared memory)",
        "",
        "Nanoseconds an iteration (rank 0's loop, MPI_Wtime). Added a call: "
        "(configuration − plain) / the calls of an iteration, strata's then the floor's.",
        "",
        "| workload | plain | floor | strata run | added a call: strata / floor |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
        "Target (issue 14): an MPI call costs at most 50 ns more under strata: "
        + "; ".join(f"{w} {a:.0f} ns" for w, a in added.items()) + ".",
    ])
    print(section)
    if args.update_docs:
        update_doc(section, None, MARKERS)
