"""Line timing's and line memory's benchmarks (bench/run.py --mode lines, --mode
memory; issue 12).

    python bench/run.py --mode lines [-n N] [--update-docs]

bench/workloads/lines_loop.py runs a loop-heavy function of N iterations (six line
events an iteration): `hot`, decorated with @profile, and `cold`, the same loop
undecorated, 12,000,000 iterations (what code that is not timed pays; long enough
that strata's fixed costs are a small part). Each under four configurations in
the same rounds, in a shuffled order, after a warm-up round:

    plain     python lines_loop.py hot|cold N
    floor     bench/runners/line_floor.py: line events with one clock read each
              (bench/floor/linefloor.c): 3.11, a C trace function, the event
              source kernprof uses there; 3.12+, sys.monitoring LINE events
              switched on for the decorated function only
    strata    strata python -l -o TMP -- lines_loop.py ...  (STRATA_PRINT_TABLES=OFF)
    no -l     the same without -l: the call-tree profile alone, so that what -l adds
              to undecorated code is told apart from strata's fixed start-up and
              exit (about 10 to 20 ms, issue 11)
    kernprof  python -m kernprof -l -o TMP lines_loop.py ...  (line_profiler, from
              the test venv's requirements-dev.txt)

CPU time of each run (user + sys of the child), medians; every configuration must
print the same result. Reported: each one's time over plain, and the time strata
adds over the floor's and over kernprof's. Targets (issue 12): on 3.11 strata's
added time within 1.2 times the floor's (about 4 times less than line_profiler's);
on 3.12+ at least 5 times less added time than line_profiler's, and undecorated
code at most 1.05 times plain.

    python bench/run.py --mode memory [-n N] [--update-docs]

runs the decorated loop (100,000 iterations: memory_profiler reads the process's
memory through psutil at every line) under

    plain     python lines_loop.py hot 100000
    heap      strata python --memory -o TMP -- ...  (strata's allocator hooks)
    rss       strata python --memory=rss -o TMP -- ...  (/proc/self/statm a line)
    sample    strata python --memory=sample -o TMP -- ...  (sampled allocations, no
              line events)
    profile   strata python -o TMP -- ...  (the call-tree profile alone: what sample
              adds is told apart from it)
    memory_profiler   python -m memory_profiler lines_loop.py ...  (requirements-dev.txt)
    memray    python -m memray run -o TMP lines_loop.py ...  (every allocation with its
              stack; from PyPI into .venv-bench, as yappi)
    scalene   python -m scalene run -o TMP lines_loop.py --- ...  (sampled CPU and
              memory; from PyPI into .venv-bench)
    tracemalloc   python -X tracemalloc=1 lines_loop.py ...  (every allocation with its
              innermost frame: the standard library's own)

and then bench/workloads/alloc_mix.py (150 rounds of records, strings, a JSON round
trip and buffers; about a second; no function chosen) under plain, heap, sample,
profile, memray, scalene and tracemalloc: the sampled mode's own row (on the loop, a
20 ms program, strata's start-up is most of what it adds).

Targets (issue 12): the memory mode at least 20 times faster than memory_profiler
(its added time 20 times smaller) and below memray's added time; the sampled mode at
most 1.15 times plain.
"""

import datetime
import os
import statistics

from run import (BENCH, RUNNERS, Tool, build_floor, clean_env, round_robin, run_capture,
                 setup_bench_venv, update_doc)

SCRIPT = os.path.join(BENCH, "workloads", "lines_loop.py")
ALLOC_MIX = os.path.join(BENCH, "workloads", "alloc_mix.py")
ALLOC_ROUNDS = "150"


def on_script(config, script):
    """config (args, results dir -> command, env) with `script` in place of the loop's."""
    def run(args, out):
        cmd, env = config(args, out)
        return [script if x == SCRIPT else x for x in cmd], env
    return run
# the undecorated loop runs long enough (about a second) that strata's fixed costs (its
# start-up, and with -l the import of inspect at the end for the tables' source, as
# line_profiler's) do not read as what undecorated code pays
ITEMS = {"hot": ["hot", "1000000"], "cold": ["cold", "12000000"]}


def markers(version):
    return (f"<!-- bench-lines-{version}:begin (written by bench/run.py --mode lines "
            "--update-docs) -->", f"<!-- bench-lines-{version}:end -->")


def main_lines(args, repeats, strata, python, interp):
    floor = Tool("floor")
    build_floor(floor, interp, module="linefloor")
    if not floor.available:
        raise SystemExit(f"bench: {floor.reason}")
    rc, out = run_capture([python, "-c", "import line_profiler; print(line_profiler.__version__)"])
    if rc != 0:
        raise SystemExit("bench: --mode lines needs line_profiler in the measured python "
                         "(it is in requirements-dev.txt: make setup)")
    lp_version = out.strip()
    env = clean_env()
    quiet = dict(env, STRATA_PRINT_TABLES="OFF")
    configs = {
        "plain": lambda a, d: ([python, SCRIPT] + a, env),
        "floor": lambda a, d: ([python, os.path.join(RUNNERS, "line_floor.py"), floor.ext_dir,
                                SCRIPT] + a, env),
        "strata": lambda a, d: ([strata, "python", "-l", "-o", d, "--", SCRIPT] + a, quiet),
        "no -l": lambda a, d: ([strata, "python", "-o", d, "--", SCRIPT] + a, quiet),
        "kernprof": lambda a, d: ([python, "-m", "kernprof", "-l", "-q", "-o", d + ".lprof",
                                   SCRIPT] + a, env),
    }
    runs = round_robin(configs, ITEMS, repeats, args.timeout)
    for item in ITEMS:
        if len({r.stdout.strip() for c in configs for r in runs[(item, c)]}) != 1:
            raise SystemExit(f"bench: the configurations printed different results ({item})")
    cpu = {k: statistics.median(r.cpu for r in v) for k, v in runs.items()}
    version = "%d.%d" % (interp["hexversion"] >> 24, (interp["hexversion"] >> 16) & 0xff)
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    rows = []
    for item, what in (("hot", "decorated loop (timed)"), ("cold", "undecorated loop")):
        p = cpu[(item, "plain")]
        added = {c: cpu[(item, c)] - p for c in configs}
        x = {c: cpu[(item, c)] / p for c in configs}
        rows.append(f"| {what}, {int(ITEMS[item][1]):,} iterations | {x['floor']:.2f}x | "
                    f"{x['strata']:.2f}x | {x['no -l']:.2f}x | {x['kernprof']:.2f}x | "
                    + (f"{added['strata'] / added['floor']:.2f} | "
                       f"{added['kernprof'] / added['strata']:.1f} |" if item == "hot" else
                       "| |"))
    hot = {c: cpu[("hot", c)] - cpu[("hot", "plain")] for c in configs}
    if interp["hexversion"] >= 0x030C0000:
        target = (f"Targets (issue 12, 3.12+): at least 5 times less added time than "
                  f"line_profiler's: {hot['kernprof'] / hot['strata']:.1f} times less; "
                  f"undecorated code at most 1.05 times plain: "
                  f"{cpu[('cold', 'strata')] / cpu[('cold', 'plain')]:.2f}x, of which "
                  f"{cpu[('cold', 'no -l')] / cpu[('cold', 'plain')]:.2f}x without -l "
                  f"(strata's start-up and exit): -l itself adds "
                  f"{cpu[('cold', 'strata')] / cpu[('cold', 'no -l')]:.2f}x, its fixed cost "
                  f"(the import of inspect at the end) included.")
    else:
        target = (f"Targets (issue 12, 3.11): strata's added time within 1.2 times the "
                  f"floor's: {hot['strata'] / hot['floor']:.2f}; about 4 times less than "
                  f"line_profiler's: {hot['kernprof'] / hot['strata']:.1f} times less.")
    section = "\n".join([
        f"#### Latest results: CPython {version}",
        "",
        f"- Date: {when}; CPU time (user + sys), median of {repeats} runs per configuration "
        f"after one warm-up round, in a shuffled order; command `python bench/run.py --mode "
        f"lines -n {repeats}`; line_profiler {lp_version}",
        f"- Machine: {os.cpu_count()} CPUs; {' '.join(interp['version'].split())}",
        "",
        "| workload | floor / plain | strata -l / plain | strata (no -l) / plain | kernprof -l / plain | strata added / floor added | kernprof added / strata added |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        target,
    ])
    print(section)
    if args.update_docs:
        update_doc(section, None, markers(version))
    return 0


def memory_markers(version):
    return (f"<!-- bench-memory-{version}:begin (written by bench/run.py --mode memory "
            "--update-docs) -->", f"<!-- bench-memory-{version}:end -->")


def main_memory(args, repeats, strata, python, interp):
    rc, out = run_capture([python, "-c", "import memory_profiler as m; print(m.__version__)"])
    if rc != 0:
        raise SystemExit("bench: --mode memory needs memory_profiler in the measured python "
                         "(it is in requirements-dev.txt: make setup)")
    mp_version = out.strip()
    memray = Tool("memray")
    setup_bench_venv(memray, interp, "memray", "memray")
    scalene = Tool("scalene")
    setup_bench_venv(scalene, interp, "scalene", "scalene")
    env = clean_env()
    quiet = dict(env, STRATA_PRINT_TABLES="OFF")
    configs = {
        "plain": lambda a, d: ([python, SCRIPT] + a, env),
        "heap": lambda a, d: ([strata, "python", "--memory", "-o", d, "--", SCRIPT] + a, quiet),
        "rss": lambda a, d: ([strata, "python", "--memory=rss", "-o", d, "--", SCRIPT] + a,
                             quiet),
        "sample": lambda a, d: ([strata, "python", "--memory=sample", "-o", d, "--", SCRIPT]
                                + a, quiet),
        "profile": lambda a, d: ([strata, "python", "-o", d, "--", SCRIPT] + a, quiet),
        "memory_profiler": lambda a, d: ([python, "-m", "memory_profiler", SCRIPT] + a, env),
    }
    if memray.available:
        configs["memray"] = lambda a, d: ([python, "-m", "memray", "run", "-q", "-o",
                                           d + ".bin", SCRIPT] + a,
                                          dict(env, **memray.env))
    if scalene.available:
        configs["scalene"] = lambda a, d: ([python, "-m", "scalene", "run", "-o", d + ".json",
                                            SCRIPT, "---"] + a, dict(env, **scalene.env))
    # tracemalloc: every allocation with its innermost frame (python -X tracemalloc)
    configs["tracemalloc"] = lambda a, d: ([python, "-X", "tracemalloc=1", SCRIPT] + a, env)
    items = {"hot": ["hot", "100000"]}
    runs = round_robin(configs, items, repeats, args.timeout)
    results = {r.stdout.strip().splitlines()[0] for rs in runs.values() for r in rs}
    if len(results) != 1:
        raise SystemExit(f"bench: the configurations printed different results: {results}")
    cpu = {c: statistics.median(r.cpu for r in runs[("hot", c)]) for c in configs}
    added = {c: cpu[c] - cpu["plain"] for c in configs}
    # the allocating program (no function chosen: memory_profiler and rss have no
    # line to measure there), its script in place of the loop's
    mix = {c: on_script(configs[c], ALLOC_MIX)
           for c in ("plain", "heap", "sample", "profile", "memray", "scalene", "tracemalloc")
           if c in configs}
    mix_runs = round_robin(mix, {"mix": [ALLOC_ROUNDS]}, repeats, args.timeout)
    mix_results = {r.stdout.strip() for rs in mix_runs.values() for r in rs}
    if len(mix_results) != 1:
        raise SystemExit(f"bench: the configurations printed different results: {mix_results}")
    mix_cpu = {c: statistics.median(r.cpu for r in mix_runs[("mix", c)]) for c in mix}
    version = "%d.%d" % (interp["hexversion"] >> 24, (interp["hexversion"] >> 16) & 0xff)
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    cols = [c for c in configs if c != "plain"]
    names = {"heap": "strata --memory", "rss": "strata --memory=rss",
             "sample": "strata --memory=sample", "profile": "strata (no --memory)",
             "memory_profiler": f"memory_profiler {mp_version}", "memray": "memray run",
             "scalene": f"scalene {scalene.version or ''}".strip(),
             "tracemalloc": "python -X tracemalloc"}
    head = "| workload | " + " | ".join(f"{names[c]} / plain" for c in cols) + \
        " | memory_profiler added / strata added | memray added / strata added |"
    mem_ratio = f"{added['memray'] / added['heap']:.1f}" if "memray" in added else "n/a"
    row = (f"| decorated loop, 100,000 iterations (600,000 line events) | "
           + " | ".join(f"{cpu[c] / cpu['plain']:.2f}x" for c in cols)
           + f" | {added['memory_profiler'] / added['heap']:.0f} | {mem_ratio} |")
    mix_added = {c: mix_cpu[c] - mix_cpu["plain"] for c in mix}
    mix_mem = (f"{mix_added['memray'] / mix_added['heap']:.1f}" if "memray" in mix
               and mix_added["heap"] > 0 else "n/a")
    mix_row = (f"| allocating program ({ALLOC_ROUNDS} rounds, no function chosen) | "
               + " | ".join(f"{mix_cpu[c] / mix_cpu['plain']:.2f}x" if c in mix else "n/a"
                            for c in cols)
               + f" | n/a | {mix_mem} |")
    section = "\n".join([
        f"#### Latest results: CPython {version}",
        "",
        f"- Date: {when}; CPU time (user + sys), median of {repeats} runs per configuration "
        f"after one warm-up round, in a shuffled order; command `python bench/run.py --mode "
        f"memory -n {repeats}`" + ("" if memray.available else f"; memray: {memray.reason}")
        + ("" if scalene.available else f"; scalene: {scalene.reason}"),
        f"- Machine: {os.cpu_count()} CPUs; {' '.join(interp['version'].split())}",
        "",
        head,
        "|---|" + "---:|" * (len(cols) + 2),
        row,
        mix_row,
        "",
        f"Targets (issue 12): at least 20 times less added time than memory_profiler's: "
        f"{added['memory_profiler'] / added['heap']:.0f} times less; below memray's: "
        + (f"{mem_ratio} times less" if "memray" in added else "memray did not run")
        + f"; the sampled mode at most 1.15 times plain, on the allocating program (on "
        f"the loop strata's start-up, {cpu['sample'] - cpu['plain']:.3f} s, is most of "
        f"the run): {mix_cpu['sample'] / mix_cpu['plain']:.2f}.",
    ])
    print(section)
    if args.update_docs:
        update_doc(section, None, memory_markers(version))
    return 0
