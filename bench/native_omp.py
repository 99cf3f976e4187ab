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
import random
import shutil
import statistics
import tempfile

from run import BENCH, BUILD_DIR, clean_env, log, run_capture, last_line, timed_run, update_doc

SOURCE = os.path.join(BENCH, "workloads", "native", "omp_bench.c")
FLOOR = os.path.join(BENCH, "floor", "omptfloor.c")
OUT = os.path.join(BUILD_DIR, "omp")
REGIONS = 10000
MARKERS = ("<!-- bench-omp:begin (written by bench/run.py --mode omp --update-docs) -->",
           "<!-- bench-omp:end -->")


def build(cc):
    os.makedirs(OUT, exist_ok=True)
    prog, floor = os.path.join(OUT, "omp_bench"), os.path.join(OUT, "libomptfloor.so")
    for cmd in ([cc, "-O2", "-fopenmp", SOURCE, "-o", prog],
                [cc, "-O2", "-fPIC", "-shared", FLOOR, "-o", floor]):
        rc, out = run_capture(cmd)
        if rc != 0:
            raise SystemExit(f"bench: {' '.join(cmd)} failed: {last_line(out)}")
    return prog, floor


def main_omp(args, repeats, strata):
    cc = shutil.which("clang")
    if not cc:
        raise SystemExit("bench: --mode omp needs clang and LLVM's libomp (Debian's clang, "
                         "libomp-dev)")
    prog, floor = build(cc)
    env = dict(clean_env(), OMP_NUM_THREADS="2")
    configs = {
        "plain": lambda d: ([prog, str(REGIONS)], env),
        "floor": lambda d: ([prog, str(REGIONS)], dict(env, LD_PRELOAD=floor)),
        "strata": lambda d: ([strata, "run", "-o", d, "--", prog, str(REGIONS)],
                             dict(env, STRATA_PRINT_TABLES="OFF")),
    }
    wall = {c: [] for c in configs}
    outs = set()
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(repeats + 1):
            order = list(configs)
            random.shuffle(order)
            for c in order:
                cmd, cenv = configs[c](os.path.join(tmp, f"{c}-{rnd}"))
                r = timed_run(cmd, cenv, tmp, args.timeout)
                if r.rc != 0:
                    raise SystemExit(f"bench: {' '.join(cmd)} failed ({r.rc}): "
                                     f"{last_line(r.stderr)}")
                outs.add(r.stdout.strip())
                if rnd:
                    wall[c].append(r.wall)
            log(f"bench: round {rnd} of {repeats} done" if rnd else "bench: warm-up done")
    if len(outs) != 1:
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
