#!/usr/bin/env python3
"""Trace-mode benchmark: strata's timeline against strata's profile and viztracer.

    python bench/trace_bench.py [-n N] [--update-docs]

Each workload runs as its own process under:

    plain          python script.py
    strata         strata python -- script.py            (profile only)
    strata-trace   strata python --trace -- script.py    (profile and trace.pftrace)
    viztracer      python -m viztracer -o trace.json script.py   (from PyPI, .venv-bench)

viztracer keeps its events in a circular buffer (1 million entries by default) and
silently drops the oldest; it is given room for every event here so that both tools
record the same calls. For each tool the report gives the CPU time it adds to plain
python (median of N runs, round-robin) and what its trace costs on disk per recorded
call (a call is a begin and an end for strata, one complete event for viztracer),
plus the time strata spent writing its trace at exit (from profile.json). Ratios are
from the same run; this is a benchmark, not a test.
"""

import argparse
import datetime
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
VENV_PY = os.path.join(ROOT, ".venv", "bin", "python")
STRATA = os.path.join(ROOT, ".venv", "bin", "strata")
BENCH_VENV = os.path.join(ROOT, ".venv-bench")
DOC = os.path.join(ROOT, "docs", "performance.md")
DOC_BEGIN = "<!-- trace-bench:begin (written by bench/trace_bench.py --update-docs) -->"
DOC_END = "<!-- trace-bench:end -->"
WORKLOADS = {
    "call-heavy: fib(30)": os.path.join(BENCH, "workloads", "fib.py"),
    "mixed": os.path.join(BENCH, "workloads", "mixed.py"),
}


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STRATA_", "PYTHON")) and k != "VIRTUAL_ENV"}
    env["PYTHONHASHSEED"] = "0"
    env["STRATA_PRINT_TABLES"] = "OFF"
    return env


def bench_site_packages():
    """viztracer in .venv-bench (made from the same base interpreter)."""
    py = os.path.join(BENCH_VENV, "bin", "python")
    if not os.path.exists(py):
        base = subprocess.run([VENV_PY, "-c", "import sys; print(sys._base_executable)"],
                              capture_output=True, text=True, check=True).stdout.strip()
        subprocess.run([base, "-m", "venv", BENCH_VENV], check=True)
    probe = subprocess.run([py, "-c", "import viztracer"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run([py, "-m", "pip", "install", "-q", "viztracer"], check=True)
    return subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def run(cmd, env, cwd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"failed: {cmd}\n{p.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def configs(script, out, site):
    viz_env = {"PYTHONPATH": site}
    return {
        "plain": ([VENV_PY, script], {}),
        "strata": ([STRATA, "python", "-o", out + "/p", "--", script], {}),
        "strata-trace": ([STRATA, "python", "--trace", "-o", out + "/t", "--", script], {}),
        "viztracer": ([VENV_PY, "-m", "viztracer", "--quiet", "--tracer_entries", "20000000",
                       "-o", out + "/viz.json", script], viz_env),
    }


def measure(name, script, repeats, site):
    times = {}
    sizes = {}
    with tempfile.TemporaryDirectory() as tmp:
        cfgs = configs(script, tmp, site)
        order = list(cfgs)
        for rnd in range(repeats + 1):
            random.shuffle(order)
            for tool in order:
                cmd, extra = cfgs[tool]
                env = {**clean_env(), **extra}
                t = run(cmd, env, tmp)
                if rnd:  # the first round warms up
                    times.setdefault(tool, []).append(t)
        prof = json.load(open(os.path.join(tmp, "t", "profile.json")))
        calls = prof["trace"]["events"] / 2
        sizes["strata-trace"] = (prof["trace"]["bytes"], calls, prof["trace"]["write_seconds"])
        viz = json.load(open(os.path.join(tmp, "viz.json")))
        vcalls = sum(1 for e in viz["traceEvents"] if e.get("ph") == "X")
        sizes["viztracer"] = (os.path.getsize(os.path.join(tmp, "viz.json")), vcalls, None)
    med = {k: statistics.median(v) for k, v in times.items()}
    return med, sizes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=5, help="timed runs per configuration")
    ap.add_argument("--update-docs", action="store_true")
    args = ap.parse_args()
    site = bench_site_packages()
    viz_version = subprocess.run([VENV_PY, "-c", "import viztracer; print(viztracer.__version__)"],
                                 env={**clean_env(), "PYTHONPATH": site}, capture_output=True,
                                 text=True).stdout.strip()
    lines = [
        f"### Trace mode ({datetime.date.today()}, median of {args.n} runs, CPU time; "
        f"viztracer {viz_version})",
        "",
        "| workload | plain | strata profile added | strata trace added | viztracer added "
        "| trace / profile added | trace / viztracer added | strata bytes per call "
        "| viztracer bytes per call | strata trace write at exit |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, script in WORKLOADS.items():
        med, sizes = measure(name, script, args.n, site)
        add = {k: med[k] - med["plain"] for k in med}
        sb, scalls, write_s = sizes["strata-trace"]
        vb, vcalls, _ = sizes["viztracer"]
        lines.append(
            f"| {name} | {med['plain']:.3f} s | +{add['strata']:.3f} s | "
            f"+{add['strata-trace']:.3f} s | +{add['viztracer']:.3f} s | "
            f"**{add['strata-trace'] / add['strata']:.2f}** | "
            f"**{add['strata-trace'] / add['viztracer']:.2f}** | "
            f"{sb / scalls:.1f} ({sb / scalls / 2:.1f} an event) | {vb / vcalls:.1f} | "
            f"{write_s:.3f} s for {2 * scalls / 1e6:.1f} M events |")
        print(lines[-1], flush=True)
    lines += ["", "Targets: trace added ≤ 1.5× profile added on the call-heavy workload; "
              "at most 16 bytes per call event on disk; a 10-million-event trace written in "
              "at most 1 s at exit."]
    text = "\n".join(lines)
    print(text)
    if args.update_docs:
        doc = open(DOC).read()
        block = f"{DOC_BEGIN}\n{text}\n{DOC_END}"
        if DOC_BEGIN in doc:
            head, rest = doc.split(DOC_BEGIN, 1)
            doc = head + block + rest.split(DOC_END, 1)[1]
        else:
            doc = doc.rstrip("\n") + "\n\n## Trace mode\n\n" + \
                "Measured by `.venv/bin/python bench/trace_bench.py --update-docs`.\n\n" + \
                block + "\n"
        open(DOC, "w").write(doc)


if __name__ == "__main__":
    sys.exit(main())
