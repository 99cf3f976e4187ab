"""Native sampling benchmark: strata sample on C programs (bench/run.py --mode native).

    python bench/run.py --mode native [--rates HZ[,HZ]] [--only W[,W]] [--tools T[,T]]
                        [-n N] [--update-docs]

What `strata sample -- program` costs a native program, at every rate (default 100
and 1000 Hz).  The workloads are C programs built here from
bench/workloads/native/walk.c with the system C compiler ($CC, else gcc) into
bench/build/native/ (rebuilt on every run, never committed): a numeric kernel that
spends its time 22 frames deep (20 in a thread: a binary tree of recursive calls 16
levels deep above a floating-point loop), built -O2 with frame pointers
(-fno-omit-frame-pointer) and without (-fomit-frame-pointer), on one thread or split
over 8 or 64 threads, and an empty run (no rounds) for the fixed cost:

    deep-fp    walk-fp 0 40     one thread, frame pointers
    deep       walk 0 40        one thread, no frame pointers
    threads    walk-fp 8 40     the same work over 8 threads
    threads64  walk-fp 64 64    64 threads
    startup    walk-fp 0 0      no rounds: start and exit only

Each runs as its own process under each configuration (--tools picks among floor,
fp and libunwind; plain always runs):

    plain                program args
    floor@HZ             the same with bench/floor/nsamplefloor.c preloaded
                         (LD_PRELOAD, NSAMPLEFLOOR_HZ=HZ): a timer on each thread's
                         CPU clock at HZ whose handler reads one clock, following new
                         threads through pthread_create: what an in-process sampler
                         pays just for being interrupted
    strata-fp@HZ         strata sample -f HZ -o TMP -- program args, with
                         STRATA_SAMPLING_UNWIND=fp (frame pointers)
    strata-libunwind@HZ  the same with STRATA_SAMPLING_UNWIND=libunwind; left out
                         with strata's reason where libunwind does not load

(STRATA_PRINT_TABLES=OFF for strata.)  A probe run of each configuration on the
empty workload comes first; one that fails is left out with its reason.  Then the
rounds of bench/run.py: one untimed warm-up round and N timed ones, round-robin in a
shuffled order; each run's CPU time is the child tree's (RUSAGE_CHILDREN deltas),
its standard output must be plain's.  Reported per workload and rate, as medians
over the rounds (run.py's sample_summary): the slowdown (program CPU / plain's CPU
in the same round), strata's own CPU (profile.json stack_sampling.sampler_cpu_s:
its signal handlers and maintenance thread, already inside the program's CPU) in
seconds and as a share of the program's CPU, and the samples (timer signals
handled, stacks walked) and periods (what they stand for) per second of the
program's CPU; the samples strata lost (its buffers full), summed over the rounds.
Output: bench/results/native-latest.{md,json}; --update-docs rewrites the "Native
stack sampling (strata sample)" results section of docs/performance.md.
"""

import datetime
import functools
import json
import os
import re
import shutil
import tempfile
import time

from run import (BENCH, BUILD_DIR, Tool, clean_env, fmt_pct, fmt_s, last_line, log,
                 machine_info, paired_median, resolve_tools, resolve_workloads, run_capture,
                 run_extras, run_workload, sample_header, sample_summary, sample_table,
                 sample_targets_text, sample_trailer, setup_strata, split_list, timed_run,
                 update_doc, write_sampling_results)

SOURCE = os.path.join(BENCH, "workloads", "native", "walk.c")
FLOOR_SOURCE = os.path.join(BENCH, "floor", "nsamplefloor.c")
NATIVE_BUILD = os.path.join(BUILD_DIR, "native")
# binary -> its compiler flags
BUILDS = {
    "walk-fp": ["-O2", "-fno-omit-frame-pointer"],
    "walk": ["-O2", "-fomit-frame-pointer"],
}
# name -> (binary, label, aliases, arguments: threads and rounds)
NATIVE_WORKLOADS = {
    "deep-fp": ("walk-fp", "deep, frame pointers: 1 thread, 22 frames", ("fp",), ["0", "40"]),
    "deep": ("walk", "deep, no frame pointers: 1 thread, 22 frames", ("nofp",), ["0", "40"]),
    "threads": ("walk-fp", "8 threads, frame pointers", ("threads8",), ["8", "40"]),
    "threads64": ("walk-fp", "64 threads, frame pointers", ("64",), ["64", "64"]),
    "startup": ("walk-fp", "start-up: no rounds", ("empty",), ["0", "0"]),
}
NATIVE_TOOLS = ["floor", "fp", "libunwind"]
# each tool's column group in the table (the configurations are GROUP@HZ)
GROUPS = {"floor": "floor", "fp": "strata-fp", "libunwind": "strata-libunwind"}
DOC_MARKERS = ("<!-- bench-native:begin (written by bench/run.py --mode native "
               "--update-docs) -->", "<!-- bench-native:end -->")


def native_tools(names, rates):
    """One Tool per (tool, rate): floor@100, strata-fp@100, strata-libunwind@100, ...;
    base "floor" or "strata" (as run.py's sample_extras reads them)."""
    tools = []
    for name in names:
        for hz in rates:
            t = Tool(f"{GROUPS[name]}@{hz}")
            t.base = "floor" if name == "floor" else "strata"
            t.hz, t.peer, t.unwind = hz, False, name
            tools.append(t)
    return tools


def compile_c(cc, target, flags):
    """Runs the compiler; returns None, or why it failed."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    cmd = [cc] + flags + ["-o", target]
    log("bench: building " + " ".join(cmd))
    rc, out = run_capture(cmd)
    return None if rc == 0 else f"{' '.join(cmd)} failed: {last_line(out)}"


def build_workloads(cc):
    """Builds every binary of BUILDS (every run: a changed compiler or flag is never
    stale); returns name -> path."""
    paths = {}
    for name, flags in BUILDS.items():
        paths[name] = os.path.join(NATIVE_BUILD, name)
        why = compile_c(cc, paths[name], flags + ["-Wall", "-pthread", SOURCE])
        if why:
            raise SystemExit(f"bench: {why}")
    return paths


def setup_native_tool(tool, strata, python, floor_lib, floor_why):
    """The floor: its library preloaded at its rate (or left out: it did not build);
    strata: its command, its unwinder."""
    if tool.base == "floor" and floor_why:
        tool.disable(floor_why)
    elif tool.base == "floor":
        tool.env.update(LD_PRELOAD=floor_lib, NSAMPLEFLOOR_HZ=str(tool.hz))
    else:
        setup_strata(tool, strata, python)
        tool.env.pop("PYTHON_EXECUTABLE", None)  # strata sample runs no python
        tool.env["STRATA_SAMPLING_UNWIND"] = tool.unwind


def native_command(tool, outdir, exe, args):
    """The command line of a configuration (the floor's library is in its env)."""
    if isinstance(tool, str) or tool.base == "floor":
        return [exe] + args
    return [tool.strata, "sample", "-f", str(tool.hz), "-o", outdir, "--", exe] + args


def probe(tools, binaries, tmp_root):
    """Runs every configuration once on the empty workload; one that fails is left out
    with its reason (strata's libunwind where libunwind does not load)."""
    binary, _, _, args = NATIVE_WORKLOADS["startup"]
    for cfg in ["plain"] + [t for t in tools if t.available]:
        outdir = tempfile.mkdtemp(dir=tmp_root)
        env = clean_env()
        if not isinstance(cfg, str):
            env.update(cfg.env)
        cmd = native_command(cfg, os.path.join(outdir, "profile"), binaries[binary], args)
        r = timed_run(cmd, env, outdir, 120)
        if r.rc != 0:
            msg = f"does not run (exit status {r.rc}): {last_line(r.stderr)}"
            if cfg == "plain":
                raise SystemExit(f"bench: the native workload {msg}")
            cfg.disable(msg)
            log(f"bench: {cfg.name}: n/a: {msg}")


def mean_frames(path):
    """The mean number of frames of the stacks sampled, from a profile.json's nodes (a
    node's own samples are stacks that end there, depth + 1 frames long); None
    without samples."""
    frames = taken = 0
    with open(path) as f:
        for thread in json.load(f)["threads"]:
            for node in thread["nodes"]:
                n = node["metrics"].get("samples", 0)
                frames += n * (node["depth"] + 1)
                taken += n
    return frames / taken if taken else None


def native_extras(tool, r, outdir, strata_out):
    """run.py's measures of a run; 'exit': the CPU the process spent after main
    returned (its CPU time minus what walk printed at the end of main: strata
    sample's naming of the addresses and writing of the profile); strata's 'frames',
    the mean frames of a sampled stack."""
    extra = run_extras(tool, r, outdir, strata_out)
    m = re.search(r"CPU at the end of main ([0-9.]+) s", r.stderr)
    extra["exit"] = r.cpu - float(m.group(1)) if m else None
    if "own" in extra:
        try:
            extra["frames"] = mean_frames(os.path.join(strata_out, "profile.json"))
        except (OSError, ValueError, KeyError) as exc:
            extra["note"] = f"its profile.json has no nodes to read ({exc})"
    return extra


def until_main(runs):
    """Per round, the CPU time until main returned (the run's minus its 'exit')."""
    return [c - x if x is not None else None for c, x in zip(runs["cpu"], runs["exit"])]


def exit_table(results, tools, rates, groups, labels):
    """Per workload and rate: plain's and each strata configuration's median CPU
    after main returned; strata's slowdown until then (paired by round as the
    slowdowns are) and the median of its mean frames a sampled stack."""
    strata = [g for g in groups if g != "floor"]
    head = ["workload", "Hz", "plain after main"]
    for g in strata:
        head += [f"{g} after main", f"{g} slowdown until main returned",
                 f"{g} frames a stack"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    available = {t.name for t in tools if t.available}
    for name, res in results.items():
        plain = res["samples"]["plain"]
        for hz in rates:
            cells = [labels[name], str(hz), fmt_s(paired_median(plain["exit"], plain["exit"],
                                                                False))]
            for cfg in [f"{g}@{hz}" for g in strata]:
                runs = res["samples"].get(cfg, {})
                if cfg not in available or not runs.get("exit"):
                    cells += ["n/a"] * 3
                    continue
                slow = paired_median(until_main(runs), until_main(plain))
                frames = paired_median(runs.get("frames", []), runs.get("frames", []), False)
                cells += [fmt_s(paired_median(runs["exit"], runs["exit"], False)),
                          "n/a" if slow is None else fmt_pct(slow),
                          "n/a" if frames is None else f"{frames:.1f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def lost_text(summary):
    """The samples strata lost (its buffers full), or that it lost none."""
    lost = [f"{name} under {cfg}: {c['lost']}" for name, row in summary.items()
            for cfg, c in row["tools"].items() if c.get("lost")]
    return ("Samples lost (strata's buffers full), over all rounds: "
            + ("; ".join(lost) if lost else "none") + ".")


def native_report(results, tools, machine, repeats, when, rates, reproductions, cmdline):
    summary = sample_summary(results, tools)
    groups = [g for g in GROUPS.values() if any(t.name.startswith(g + "@") for t in tools)]
    labels = {w: spec[1] for w, spec in NATIVE_WORKLOADS.items()}
    flags = "; ".join(f"{b}: {' '.join(f)}" for b, f in BUILDS.items())
    parts = sample_header(tools, machine, repeats, when, cmdline, python=False) + [
        f"- Compiler: {machine['compiler']} ({flags})",
        "",
        "Slowdown: the program's CPU time (user + sys, its whole process tree) under the "
        "configuration over plain's in the same round, minus 1 (the median over rounds). "
        "Own CPU: strata's in-process cost, profile.json stack_sampling.sampler_cpu_s (its "
        "signal handlers and maintenance thread; already inside the program's CPU), and in "
        "parentheses its share of the program's CPU. Samples/s: timer signals handled "
        "(stacks walked) per second of the program's CPU, in parentheses the timer periods "
        "they stand for.",
        "",
        sample_table(summary, tools, rates, groups, labels, share=True),
        "",
        "After main: the CPU time the process spent after main returned (its CPU time minus "
        "its CPU at the end of main, which the workload prints; median): strata sample's "
        "naming of the sampled addresses and writing of the profile, not in its own CPU "
        "above but in the slowdown. Slowdown until main returned: the slowdown without "
        "that (the CPU until main returned over plain's, minus 1; strata's start-up is "
        "in it). Frames a stack: the mean length of the stacks strata recorded (median "
        "over the rounds; the workload's are 22 frames deep, 20 in its threads).",
        "",
        exit_table(results, tools, rates, groups, labels),
    ]
    for g in groups:
        if g != "floor":
            parts += ["", sample_targets_text(summary, results, rates, g,
                                              f"strata sample ({g.split('-', 1)[1]})")]
    parts += ["", lost_text(summary)] + sample_trailer(tools, reproductions, [])
    return "\n".join(parts), summary


def main_native(args, repeats, rates, strata, python, interp, cmdline):
    """bench/run.py --mode native: builds, probes, runs, reports (see the docstring)."""
    workloads = resolve_workloads(split_list(args.only), NATIVE_WORKLOADS)
    tools = native_tools(resolve_tools(split_list(args.tools), NATIVE_TOOLS), rates)
    cc = os.environ.get("CC", "gcc")
    rc, out = run_capture([cc, "--version"])
    compiler = out.splitlines()[0].strip() if rc == 0 and out.strip() else cc
    binaries = build_workloads(cc)
    floor_lib = os.path.join(NATIVE_BUILD, "libnsamplefloor.so")
    floor_why = None
    if any(t.base == "floor" for t in tools):
        floor_why = compile_c(cc, floor_lib, ["-O2", "-fPIC", "-shared", "-Wall", "-pthread",
                                              FLOOR_SOURCE, "-ldl"])
    for t in tools:
        setup_native_tool(t, strata, python, floor_lib, floor_why)

    tmp_root = tempfile.mkdtemp(prefix="strata-bench-native-")
    results, reproductions = {}, []
    try:
        probe(tools, binaries, tmp_root)
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        for name in workloads:
            binary, label, _, wargs = NATIVE_WORKLOADS[name]
            log(f"bench: workload {name} ({label})")
            make_cmd = functools.partial(native_command, exe=binaries[binary], args=wargs)
            run_workload(name, tools, make_cmd, True, repeats, args.timeout, tmp_root,
                         results, reproductions, native_extras)
        elapsed = time.perf_counter() - start
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)

    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    machine = machine_info(interp, tools)
    machine.update(load_before=load_before, load_after=os.getloadavg()[0], compiler=compiler)
    text, summary = native_report(results, tools, machine, repeats, when, rates,
                                  reproductions, cmdline)
    write_sampling_results(
        "native-latest", f"strata sample benchmark (native stacks), {when}", text,
        {"when": when, "machine": machine, "repeats": repeats, "rates": rates,
         "command": cmdline,
         "workloads": {w: {"binary": spec[0], "flags": BUILDS[spec[0]], "args": spec[3]}
                       for w, spec in NATIVE_WORKLOADS.items() if w in workloads}},
        tools, results, summary, reproductions, elapsed)
    if args.update_docs:
        update_doc(f"#### Latest results\n\n{text}\n", "native", DOC_MARKERS)
    return 0
