"""strata run's benchmark (bench/run.py --mode run; issue 13).

    python bench/run.py --mode run [-n N] [--update-docs]

What `strata run -- program` costs a C program, beside the program built without
instrumentation (plain) and the floor: the same instrumented program with
bench/floor/cygfloor.c preloaded, hooks that read the TSC once and do nothing else.
The program is bench/workloads/native/calls.c, built -O2 without and with
-finstrument-functions into bench/build/native/:

    fib        calls fib 32        7 million calls (call-heavy: the hooks' cost)
    kernel     calls kernel 2000   a 5-point stencil, one call a row (real work)
    regions    calls regions 10000000   <strata.h> push+pop pairs
    empty      calls empty         start-up and exit

Event counters (`--components perf:...`, `papi:...`) are measured apart, on fib(25)
(242785 calls, 485570 reads of each counter): strata run with wall_clock alone,
with perf:page-faults, with perf:page-faults,task-clock, and with
papi:perf::PAGE-FAULTS where PAPI counts it; reported as the added microseconds a
call over wall_clock alone.

Each configuration runs as its own process: plain (the uninstrumented binary; for
regions the same binary, whose region calls are no-ops without strata), floor
(LD_PRELOAD of the floor library) and strata (strata run -o TMP --,
STRATA_PRINT_TABLES=OFF), one warm-up round and N timed ones, round-robin in a
shuffled order; CPU time of the child tree (run.py's timed_run); the checksum must be
plain's.  Reported: medians of plain, floor and strata; strata / floor and strata /
plain; for fib and regions, strata's and the floor's added ns a call (or a region);
for empty, strata's added milliseconds.  Targets (issue 13): fib ≤ 1.5x the floor,
kernel ≤ 1.1x plain, a region ≤ 20 ns recording (and ≤ 2 ns without strata: plain's),
start-up and exit ≤ 10 ms.
"""

import datetime
import os
import random
import statistics
import tempfile

from run import (BENCH, BUILD_DIR, ROOT, clean_env, compile_all, last_line, log, round_robin,
                 timed_run, update_doc)

SOURCE = os.path.join(BENCH, "workloads", "native", "calls.c")
FLOOR = os.path.join(BENCH, "floor", "cygfloor.c")
OUT = os.path.join(BUILD_DIR, "native")
WORKLOADS = {  # name -> (arguments, events counted for the per-call figure)
    "fib": (["fib", "32"], 2 * 7049155),      # fib(32) makes 7049155 calls: 2 hooks each
    "kernel": (["kernel", "2000"], None),
    "regions": (["regions", "10000000"], 10000000),
    "empty": (["empty"], None),
}
MARKERS = ("<!-- bench-run:begin (written by bench/run.py --mode run --update-docs) -->",
           "<!-- bench-run:end -->")


def build(cc):
    inc = "-I" + os.path.join(ROOT, "include")
    plain, instr = os.path.join(OUT, "calls"), os.path.join(OUT, "calls-instr")
    floor = os.path.join(OUT, "libcygfloor.so")
    compile_all(OUT, ([cc, "-O2", inc, SOURCE, "-o", plain],
                      [cc, "-O2", "-finstrument-functions", inc, SOURCE, "-o", instr],
                      [cc, "-O2", "-fPIC", "-shared", FLOOR, "-o", floor]))
    return plain, instr, floor


FIB25_CALLS = 242785
COUNTERS = ["wall_clock", "wall_clock,perf:page-faults", "wall_clock,perf:page-faults,task-clock",
            "wall_clock,papi:perf::PAGE-FAULTS"]


def counters_run(args, repeats, strata, instr, env):
    """strata run on fib(25) with each set of counters: rows of the table."""
    cenv = dict(env, STRATA_PRINT_TABLES="OFF")
    usable = []
    with tempfile.TemporaryDirectory() as tmp:
        for comps in COUNTERS:  # PAPI only where it counts here
            r = timed_run([strata, "run", "--components", comps, "-o", os.path.join(tmp, "p"),
                           "--", instr, "fib", "5"], cenv, tmp, args.timeout)
            if r.rc == 0:
                usable.append(comps)
            else:
                log(f"bench: {comps}: not measured ({last_line(r.stderr)})")
        times = {c: [] for c in usable}
        for rnd in range(repeats + 1):
            order = list(usable)
            random.shuffle(order)
            for comps in order:
                cmd = [strata, "run", "--components", comps, "-o",
                       os.path.join(tmp, f"c{rnd}{usable.index(comps)}"), "--", instr, "fib", "25"]
                r = timed_run(cmd, cenv, tmp, args.timeout)
                if r.rc != 0:
                    raise SystemExit(f"bench: {' '.join(cmd)} failed: {last_line(r.stderr)}")
                if rnd:
                    times[comps].append(r.cpu)
    med = {c: statistics.median(t) for c, t in times.items()}
    base = med["wall_clock"]
    return [f"| `{c}` | {med[c]:.3f} s | "
            + ("" if c == "wall_clock" else f"{(med[c] - base) / FIB25_CALLS * 1e6:.2f} us") + " |"
            for c in usable]


def main_run(args, repeats, strata):
    cc = os.environ.get("CC", "gcc")
    plain, instr, floor = build(cc)
    env = clean_env()
    configs = {
        "plain": lambda a, d: ([plain] + a, env),
        "floor": lambda a, d: ([instr] + a, dict(env, LD_PRELOAD=floor)),
        "strata": lambda a, d: ([strata, "run", "-o", d, "--", instr] + a,
                                dict(env, STRATA_PRINT_TABLES="OFF")),
    }
    runs = round_robin(configs, {w: v[0] for w, v in WORKLOADS.items()}, repeats, args.timeout)
    cpu = {w: {c: [(r.cpu, r.stdout) for r in runs[(w, c)]] for c in configs} for w in WORKLOADS}
    rows, med = [], {}
    for w, (argv, events) in WORKLOADS.items():
        outs = {out for c in configs for _, out in cpu[w][c]}
        if len(outs) != 1:
            raise SystemExit(f"bench: {w}: the configurations printed different results")
        m = {c: statistics.median(t for t, _ in cpu[w][c]) for c in configs}
        med[w] = m
        per = ""
        if events:
            per = (f"{(m['strata'] - m['plain']) / events * 1e9:.1f} ns / "
                   f"{(m['floor'] - m['plain']) / events * 1e9:.1f} ns")
        rows.append(f"| {w} (`calls {' '.join(argv)}`) | {m['plain']:.3f} s | "
                    f"{m['floor']:.3f} s | {m['strata']:.3f} s | "
                    f"{m['strata'] / m['floor']:.2f}x | {m['strata'] / m['plain']:.2f}x | {per} |")
    counter_rows = counters_run(args, repeats, strata, instr, env)
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    startup_ms = (med["empty"]["strata"] - med["empty"]["plain"]) * 1e3
    region_ns = (med["regions"]["strata"] - med["regions"]["plain"]) / 1e7 * 1e9
    section = "\n".join([
        "#### Latest results",
        "",
        f"- Date: {when}; median of {repeats} timed runs per configuration after one "
        f"warm-up round, round-robin in a shuffled order; command `.venv/bin/python "
        f"bench/run.py --mode run -n {repeats}`",
        f"- Machine: {os.cpu_count()} CPUs; compiler `{cc} -O2`",
        "",
        "CPU time (user + sys) of the process. Added a call: (configuration − plain) / the "
        "hooks called (two a function call) or the regions, strata's then the floor's.",
        "",
        "| workload | plain | floor | strata run | strata / floor | strata / plain | added: strata / floor |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "Targets (issue 13): fib ≤ 1.5x the floor: "
        f"{med['fib']['strata'] / med['fib']['floor']:.2f}x; kernel ≤ 1.1x plain: "
        f"{med['kernel']['strata'] / med['kernel']['plain']:.2f}x; a region ≤ 20 ns "
        f"recording: {region_ns:.1f} ns; start-up and exit ≤ 10 ms: {startup_ms:.1f} ms.",
        "",
        "Event counters on fib (`calls fib 25`, 242785 calls; every call reads each "
        "counter at its start and its end), added a call over `--components wall_clock`:",
        "",
        "| components | strata run | added a call |",
        "|---|---:|---:|",
        *counter_rows,
    ])
    print(section)
    if args.update_docs:
        update_doc(section, None, MARKERS)
