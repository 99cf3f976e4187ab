"""The GPU benchmark (bench/run.py --mode gpu; issue 16).

    python bench/run.py --mode gpu [-n N] [--update-docs]

What `strata run --gpu` costs a program at each CUDA launch, beside the program
alone and the floor of any CUPTI client. There is no GPU here: the program,
bench/workloads/native/gpu_launch.c, launches through the tests' stand-in libcupti
(tests/data/gpu/fake_cupti.c), which does at each fake_launch / fake_copy what CUPTI
does at each cudaLaunchKernel / cudaMemcpyAsync: the subscriber's callback at the
API's enter and exit, and the activity record written into a buffer the client lent
(handed back when full or flushed). The stand-in's own work is in every
configuration that subscribes; a real launch costs microseconds of its own, which
this leaves out, so the per-launch figures are strata's bookkeeping, not a share of
a real program.

    plain         gpu_launch STEPS                  (no CUPTI client)
    floor         the same with bench/floor/cuptifloor.c preloaded: a client whose
                  callback reads the clock once, that lends buffers and walks the
                  records reading the clock once each (kernels, copies, sets on)
    floor-trace   the same asking for the API calls' records too, as --trace does
    strata-nogpu  strata run -- gpu_launch STEPS    (strata's start and exit)
    strata        strata run --gpu -- gpu_launch STEPS
    strata-trace  strata run --gpu --trace -- ...   (flows, slices, API calls' records)

STEPS steps of 9 launches (8 kernels and a copy); one warm-up round and N timed
ones, round-robin in a shuffled order; CPU time of the child tree (run.py's
timed_run). Reported: the medians, and the added time a launch: the floors' over
plain, strata's over strata-nogpu (its start and exit taken out), and the ratio of
strata's to the floor asking CUPTI for the same records (strata-trace's: writing
the timeline at the end included).
"""

import datetime
import os
import statistics

from run import (BENCH, BUILD_DIR, ROOT, clean_env, compile_all, round_robin, update_doc)

STANDIN = os.path.join(ROOT, "tests", "data", "gpu", "fake_cupti.c")
PROGRAM = os.path.join(BENCH, "workloads", "native", "gpu_launch.c")
FLOOR = os.path.join(BENCH, "floor", "cuptifloor.c")
OUT = os.path.join(BUILD_DIR, "gpu")
STEPS = 20000
LAUNCHES = 9 * STEPS
MARKERS = ("<!-- bench-gpu:begin (written by bench/run.py --mode gpu --update-docs) -->",
           "<!-- bench-gpu:end -->")


def build(cc):
    lib, prog = os.path.join(OUT, "libcupti.so"), os.path.join(OUT, "gpu_launch")
    floor = os.path.join(OUT, "libcuptifloor.so")
    compile_all(OUT, ([cc, "-O2", "-shared", "-fPIC", STANDIN, "-o", lib, "-lpthread"],
                      [cc, "-O2", PROGRAM, "-o", prog, f"-L{OUT}", "-lcupti",
                       f"-Wl,-rpath,{OUT}"],
                      [cc, "-O2", "-shared", "-fPIC", FLOOR, "-o", floor, "-ldl"]))
    return lib, prog, floor


def main_gpu(args, repeats, strata):
    cc = os.environ.get("CC", "gcc")
    lib, prog, floor = build(cc)
    env = clean_env()
    senv = dict(env, STRATA_PRINT_TABLES="OFF", STRATA_CUPTI_LIBRARY=lib)
    configs = {
        "plain": lambda a, d: ([prog] + a, env),
        "floor": lambda a, d: ([prog] + a, dict(env, LD_PRELOAD=floor)),
        "floor-trace": lambda a, d: ([prog] + a, dict(env, LD_PRELOAD=floor, CUPTIFLOOR_API="1")),
        "strata-nogpu": lambda a, d: ([strata, "run", "-o", d, "--", prog] + a, senv),
        "strata": lambda a, d: ([strata, "run", "--gpu", "-o", d, "--", prog] + a, senv),
        "strata-trace": lambda a, d: ([strata, "run", "--gpu", "--trace", "-o", d, "--",
                                       prog] + a, senv),
    }
    runs = round_robin(configs, {"train": [str(STEPS)]}, repeats, args.timeout)
    outs = {r.stdout for c in configs for r in runs[("train", c)]}
    if len(outs) != 1:
        raise SystemExit("bench: the configurations printed different results")
    med = {c: statistics.median(r.cpu for r in runs[("train", c)]) for c in configs}

    def added(c):  # ns a launch over the configuration without a CUPTI client
        base = "plain" if c.startswith("floor") else "strata-nogpu"
        return (med[c] - med[base]) / LAUNCHES * 1e9

    rows = []
    for c in configs:
        if c in ("plain", "strata-nogpu"):
            rows.append(f"| {c} | {med[c]:.3f} s | | |")
        elif c.startswith("floor"):
            rows.append(f"| {c} | {med[c]:.3f} s | {added(c):.0f} ns | |")
        else:  # over the floor that asks CUPTI for the same records
            floor_of = "floor-trace" if c == "strata-trace" else "floor"
            rows.append(f"| {c} | {med[c]:.3f} s | {added(c):.0f} ns | "
                        f"{added(c) / added(floor_of):.2f}x |")
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    section = "\n".join([
        "#### Latest results",
        "",
        f"- Date: {when}; median of {repeats} timed runs per configuration after one "
        f"warm-up round, round-robin in a shuffled order; command `.venv/bin/python "
        f"bench/run.py --mode gpu -n {repeats}`",
        f"- Machine: {os.cpu_count()} CPUs, no GPU (the stand-in libcupti); compiler "
        f"`{cc} -O2`; {STEPS} steps, {LAUNCHES} launches",
        "",
        "CPU time (user + sys) of the process tree. Added a launch: the floors' over "
        "plain, strata's over strata run without --gpu (its start and exit); ratio: "
        "strata's added time over the floor's that asks CUPTI for the same records "
        "(floor-trace for strata-trace, whose time includes writing the trace).",
        "",
        "| configuration | CPU | added a launch | over the floor's |",
        "|---|---:|---:|---:|",
        *rows,
    ])
    print(section)
    if args.update_docs:
        update_doc(section, None, MARKERS)
