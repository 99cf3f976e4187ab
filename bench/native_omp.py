"""strata run's OpenMP benchmark (bench/run.py --mode omp; issue 14).

    python bench/run.py --mode omp [-n N]

What OMPT costs a program: bench/workloads/native/omp_bench.c built with clang
-O2 -fopenmp (LLVM's libomp, which has OMPT), 10,000 parallel regions of a
worksharing loop over 20,000 doubles with a reduction, on two threads
(OMP_NUM_THREADS=2), in three configurations in the same rounds, in a shuffled
order: plain; the floor (bench/floor/omptfloor.c preloaded: an OMPT tool with the
same callbacks, each reading the TSC once); strata run (STRATA_PRINT_TABLES=OFF).
Wall-clock seconds of each run (the program's threads wait in barriers: CPU time
would count their spinning), medians. Target (issue 14): a parallel-for with
10,000 regions costs at most 1.1 times plain.
"""

import datetime
import os
import shutil
import statistics

from run import BENCH, BUILD_DIR, clean_env, compile_all, round_robin, update_doc

SOURCE = os.path.join(BENCH, "workloads", "native", "omp_bench.c")
FLOOR = os.path.join(BENCH, "floor", "omptfloor.c")
OUT = os.path.join(BUILD_DIR, "omp")
REGIONS = 10000
MARKERS = ("<!-- bench-omp:begin (written by bench/run.py --mode omp --update-docs) -->",
           "<!-- bench-omp:end -->")


def build(cc):
    prog, floor = os.path.join(OUT, "omp_bench"), os.path.join(OUT, "libomptfloor.so")
    compile_all(OUT, ([cc, "-O2", "-fopenmp", SOURCE, "-o", prog],
                      [cc, "-O2", "-fPIC", "-shared", FLOOR, "-o", floor]))
    return prog, floor


def main_omp(args, repeats, strata):
    cc = shutil.which("clang")
    if not cc:
        raise SystemExit("bench: --mode omp needs clang and LLVM's libomp (Debian's clang, "
                         "libomp-dev)")
    prog, floor = build(cc)
    env = dict(clean_env(), OMP_NUM_THREADS="2")
    configs = {
        "plain": lambda a, d: ([prog] + a, env),
        "floor": lambda a, d: ([prog] + a, dict(env, LD_PRELOAD=floor)),
        "strata": lambda a, d: ([strata, "run", "-o", d, "--", prog] + a,
                                dict(env, STRATA_PRINT_TABLES="OFF")),
    }
    runs = round_robin(configs, {"regions": [str(REGIONS)]}, repeats, args.timeout)
    wall = {c: [r.wall for r in runs[("regions", c)]] for c in configs}
    if len({r.stdout.strip() for rs in runs.values() for r in rs}) != 1:
        raise SystemExit("bench: the configurations computed different results")
    m = {c: statistics.median(v) for c, v in wall.items()}
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    per = lambda c: (m[c] - m["plain"]) / REGIONS * 1e6  # noqa: E731
    section = "\n".join([
        "#### Latest results",
        "",
        f"- Date: {when}; median of {repeats} runs per configuration after one warm-up "
        f"round, in a shuffled order; command `.venv/bin/python bench/run.py --mode omp "
        f"-n {repeats}`",
        f"- Machine: {os.cpu_count()} CPUs; clang -O2 -fopenmp (LLVM's libomp), "
        "OMP_NUM_THREADS=2",
        "",
        "| workload | plain | floor | strata run | strata / plain | floor / plain | added a region: strata / floor |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| {REGIONS:,} parallel regions (loop, reduction, barrier) | {m['plain']:.3f} s | "
        f"{m['floor']:.3f} s | {m['strata']:.3f} s | {m['strata'] / m['plain']:.2f}x | "
        f"{m['floor'] / m['plain']:.2f}x | {per('strata'):.1f} us / {per('floor'):.1f} us |",
        "",
        f"Target (issue 14): at most 1.1 times plain: {m['strata'] / m['plain']:.2f}x.",
    ])
    print(section)
    if args.update_docs:
        update_doc(section, None, MARKERS)
