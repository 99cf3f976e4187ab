#!/usr/bin/env python3
"""Overhead benchmark: strata against the bare event source, cProfile and yappi.

    python bench/run.py [--quick] [-n N] [--only W[,W]] [--tools T[,T]] [--update-docs]
                        [--before STRATA]

Every workload of WORKLOADS (bench/workloads/; diff_split.py there is
bench/diff_bench.py's) runs as a separate process under each configuration:

    plain     python script.py
    floor     the same with empty callbacks (bench/floor/benchfloor.c): a C profile
              hook on 3.11, sys.monitoring callbacks on 3.12+
    strata    strata python -o TMP -- script.py      (STRATA_PRINT_TABLES=OFF)
    excluded  strata python -o TMP -ME 'script.py$' -- script.py: the workload's own
              code left out by a filter (what left-out code costs)
    cProfile  python -m cProfile -o /dev/null script.py
    yappi     python -m yappi -c wall -o /dev/null script.py
    before    with --before STRATA: the same as `strata`, run by another build's strata
              command (e.g. the previous commit's, installed in its own virtual
              environment, whose python it runs); its added time is compared with
              strata's, measured in the same run

All of them use one interpreter (.venv/bin/python, the one strata was built
for); yappi comes from PyPI into .venv-bench (made by this script from the
same base interpreter) and is put on that interpreter's PYTHONPATH for the
yappi runs only.  Each run is timed by the CPU time of the child process
(user + sys, from getrusage(RUSAGE_CHILDREN) deltas) and by wall time.  The
configurations are repeated N times, round-robin in a shuffled order each
round, after one untimed warm-up round; medians are reported.  What matters is
the time a tool ADDS to plain python, and how strata's added time compares to
the others' added times measured in the same run.

Results: a markdown table on standard output, bench/results/latest.md and
bench/results/latest.json; --update-docs also rewrites the results section of
docs/performance.md.  This is a benchmark, not a test: nothing here fails
because of a timing.

Sampling mode (issue 11):

    python bench/run.py --mode sample [--rates HZ[,HZ]] [--tools T[,T]] [-n N] ...

compares stack samplers, each at every rate (default 100 and 1000 Hz), with the
same workloads, rounds and medians:

    plain      python script.py
    floor@HZ   bench/runners/sample_floor.py: a timer on each thread's CPU clock
               at HZ whose signal handler reads one clock (bench/floor/samplefloor.c):
               what an in-process sampler pays just for being interrupted
    strata@HZ  strata python --sample -f HZ --follow-children off -o TMP -- script.py
               (the program's child processes are not profiled, as py-spy and
               austin do not sample them by default: test_json starts 8; the cost
               of following them is measured by bench/children_bench.py)
    py-spy@HZ  py-spy record -r HZ -o FILE --format raw -- python script.py
    austin@HZ  austin -i 1000000/HZ -o FILE python script.py

py-spy and austin (austin-dist, pinned: see PEERS) come from PyPI into
.venv-bench, as yappi does; one that cannot be installed or does not run is
left out with its reason.  Per run: the CPU time of the whole child tree
(RUSAGE_CHILDREN, as above) and, for py-spy and austin, which run the program as
their own child and reap it, their own CPU: the profiler is waited for with
waitid(WNOWAIT) and its /proc/PID/stat read while it is a zombie (utime + stime:
its own threads, without the reaped program; clock ticks, 10 ms steps).  The
program's CPU is the tree's minus the profiler's own.  strata samples inside the
program: the program's CPU is the tree's, and profile.json's
stack_sampling.sampler_cpu_s (the handlers' and the maintenance thread's time)
is strata's own share of it.  Reported per workload and rate: the slowdown
(program CPU / plain CPU), the sampler's own CPU, and the samples taken per
second of the program's CPU (strata: stack_sampling.samples, and the timer
periods they stand for; py-spy: the counts on its raw lines; austin: its
sample lines).  Output: bench/results/sample-latest.{md,json}; --update-docs
rewrites the "Stack sampling" results section of docs/performance.md.

Line timing and memory (issue 12): python bench/run.py --mode lines [-n N] compares
strata python -l with kernprof -l (line_profiler) and the floor of line events with
one clock read each, on a loop-heavy function; --mode memory strata python --memory
with python -m memory_profiler and memray (bench/lines_bench.py says how).

GPU mode (issue 16): python bench/run.py --mode gpu [-n N] measures what strata run
--gpu costs a CUDA launch, through the tests' stand-in libcupti (no GPU needed),
beside a bare CUPTI client (bench/gpu_bench.py says how).

MPI and OpenMP modes (issue 14): python bench/run.py --mode mpi [-n N] measures
what strata run's MPI wrappers cost a call (bench/native_mpi.py says how), --mode
omp what its OMPT callbacks cost a program of 10,000 parallel regions
(bench/native_omp.py).

Native mode (issue 11):

    python bench/run.py --mode native [--rates HZ[,HZ]] [--tools T[,T]] [-n N] ...

measures `strata sample -- program` on C programs built here (frame pointers or
not, one thread or many) beside plain runs and a preloaded timer-signal floor, in
the same rounds, with the same medians and sampling measures; its own module,
bench/native.py, says how.  Output: bench/results/native-latest.{md,json};
--update-docs rewrites the "Native stack sampling (strata sample)" results section.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import random
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
WORKLOAD_DIR = os.path.join(BENCH, "workloads")
RUNNERS = os.path.join(BENCH, "runners")
BUILD_DIR = os.path.join(BENCH, "build")
RESULTS_DIR = os.path.join(BENCH, "results")
DOC = os.path.join(ROOT, "docs", "performance.md")
BENCH_VENV = os.path.join(ROOT, ".venv-bench")
YAPPI_REQUIREMENT = "yappi"

DOC_BEGIN = "<!-- bench-results:begin (written by bench/run.py --update-docs) -->"
DOC_END = "<!-- bench-results:end -->"


def doc_markers(version):
    """The results section of docs/performance.md for an interpreter version ("3.13"):
    CPython 3.11's keeps its original markers, every other version has its own."""
    if version == "3.11":
        return DOC_BEGIN, DOC_END
    return (f"<!-- bench-results-{version}:begin (written by bench/run.py --update-docs) -->",
            f"<!-- bench-results-{version}:end -->")


# Targets from the issues, for the call-heavy workload (strata added / other added):
# the profile hook (3.11), and sys.monitoring (3.12+), where left-out code must also run
# at (nearly) full speed: excluded / plain.
TARGETS = {"floor": 1.25, "floor-tsc": 1.1, "cProfile": 0.65}
TARGETS_MONITORING = {"floor-tsc": 1.1, "cProfile": 0.6}
EXCLUDED_TARGET = 1.05
TARGET_WORKLOAD = "fib"

# name -> (script, label, aliases, compare stdout with plain's)
WORKLOADS = {
    "fib": ("fib.py", "call-heavy: fib(30)", ("call-heavy", "recursive"), True),
    "mixed": ("mixed.py", "mixed: classes, json, re, sorting", ("mixed",), True),
    "loops": ("loops.py", "loop-heavy: few calls, long loops", ("loop-heavy",), True),
    "stdlib_tests": ("stdlib_tests.py", "real: python -m test test_json",
                     ("real", "test_json", "regrtest"), False),
    "pypi_tests": ("pypi_tests.py", "real: pytest, NetworkX's shortest paths",
                   ("pytest", "networkx"), False),
    "threads": ("threads.py", "threaded: 64 threads of Python work", ("threaded", "64"), True),
    "startup": ("startup.py", "start-up: an empty script", ("empty",), True),
}
TOOLS = ["floor", "floor-tsc", "strata", "strata-cpu", "strata-trace", "excluded", "cProfile",
         "yappi", "pyinstrument"]
# strata's added time is divided by theirs
COMPARED = ["floor", "floor-tsc", "cProfile", "yappi", "pyinstrument"]
PYINSTRUMENT_REQUIREMENT = "pyinstrument>=5,<6"
# the pypi_tests workload's package (pinned: its test suite is the workload)
NETWORKX_REQUIREMENT = "networkx==3.6.1"
STRATA_TOOLS = ("strata", "strata-cpu", "strata-trace", "excluded", "before")
# issue 17: wall_clock,cpu_clock's added time over wall_clock's alone, at most
CPU_CLOCK_TARGET = 1.5
# issue 17: the profile with its timeline (--trace) over the profile alone, at most
TRACE_TARGET = 1.5


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_capture(cmd, env=None, timeout=600, cwd=None):
    """Runs a setup command; returns (returncode, combined output)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=env, timeout=timeout, cwd=cwd)
        return p.returncode, p.stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)


def last_line(text):
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def compile_all(out_dir, cmds):
    """Runs each build command (out_dir made first); exits on the first that fails."""
    os.makedirs(out_dir, exist_ok=True)
    for cmd in cmds:
        rc, out = run_capture(cmd)
        if rc != 0:
            raise SystemExit(f"bench: {' '.join(cmd)} failed: {last_line(out)}")


def round_robin(configs, items, repeats, timeout):
    """Runs every (item, configuration) once a round, in a shuffled order: a warm-up
    round, then `repeats` timed ones. configs: name -> f(args, results dir) ->
    (command, env); items: name -> args. Returns {(item, config): [Run, ...]} of
    the timed rounds; exits when a run fails."""
    runs = {(i, c): [] for i in items for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(repeats + 1):
            order = list(runs)
            random.shuffle(order)
            for i, c in order:
                cmd, cenv = configs[c](items[i], os.path.join(tmp, f"{i}-{c}-{rnd}"))
                r = timed_run(cmd, cenv, tmp, timeout)
                if r.rc != 0:
                    raise SystemExit(f"bench: {' '.join(cmd)} failed ({r.rc}): "
                                     f"{last_line(r.stderr)}")
                if rnd:
                    runs[(i, c)].append(r)
            log(f"bench: round {rnd} of {repeats} done" if rnd else "bench: warm-up done")
    return runs


# --------------------------------------------------------------------------- setup

class Tool:
    def __init__(self, name):
        self.name = name
        self.available = True
        self.reason = ""
        self.env = {}
        self.version = ""

    def disable(self, reason):
        self.available = False
        self.reason = reason


def clean_env():
    """The environment every run starts from: the caller's, without settings that would
    change what is measured (STRATA_*, PYTHON* paths and flags), with a fixed hash seed."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("STRATA_") and not k.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = "0"
    return env


def interpreter_info(python):
    code = ("import sys, sysconfig, json; print(json.dumps({'version': sys.version, "
            "'base': getattr(sys, '_base_executable', sys.executable), 'prefix': sys.prefix, "
            "'base_prefix': sys.base_prefix, "
            "'include': sysconfig.get_paths()['include'], "
            "'platinclude': sysconfig.get_paths()['platinclude'], "
            "'ext_suffix': sysconfig.get_config_var('EXT_SUFFIX'), "
            "'soabi': sysconfig.get_config_var('SOABI') or 'abi', "
            "'hexversion': sys.hexversion}))")
    rc, out = run_capture([python, "-c", code], env=clean_env())
    if rc != 0:
        raise SystemExit(f"bench: cannot run {python}: {last_line(out)}")
    return json.loads(out.strip().splitlines()[-1])


def build_floor(tool, info, module="benchfloor"):
    """Compiles bench/floor/<module>.c for the interpreter into bench/build/<soabi>/."""
    src = os.path.join(BENCH, "floor", module + ".c")
    out_dir = os.path.join(BUILD_DIR, info["soabi"])
    target = os.path.join(out_dir, module + info["ext_suffix"])
    tool.ext_dir = out_dir
    # benchfloortsc.c includes benchfloor.c; the Python floors include asmain.h
    deps = [os.path.join(BENCH, "floor", f) for f in ("benchfloor.c", "asmain.h")]
    newest = max(os.path.getmtime(f) for f in [src] + deps)
    if os.path.exists(target) and os.path.getmtime(target) >= newest:
        return
    os.makedirs(out_dir, exist_ok=True)
    cc = os.environ.get("CC", "gcc")
    cmd = [cc, "-O2", "-fPIC", "-shared", "-Wall", "-I" + info["include"]]
    if info["platinclude"] != info["include"]:
        cmd.append("-I" + info["platinclude"])
    cmd += [src, "-o", target]
    what = {"benchfloor": "the floor hook", "benchfloortsc": "the floor hook with one TSC "
            "read an event"}.get(module, "the sampling floor")
    log(f"bench: building {what}: " + " ".join(shlex.quote(c) for c in cmd))
    rc, out = run_capture(cmd)
    if rc != 0:
        tool.disable(f"building bench/floor/{module}.c failed: {last_line(out)}")


def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def make_bench_venv(tool, info):
    """Makes .venv-bench from the interpreter's base python (once); returns its python,
    or None with the tool disabled."""
    py = venv_python(BENCH_VENV)
    if os.path.exists(py):
        rc, out = run_capture([py, "-c", "import sys; print(sys.version)"], env=clean_env())
        if rc != 0 or out.strip() != info["version"].strip():
            log(f"bench: {BENCH_VENV} was made from another python; recreating it")
            shutil.rmtree(BENCH_VENV, ignore_errors=True)
    if not os.path.exists(py):
        log(f"bench: creating {BENCH_VENV} from {info['base']}")
        rc, out = run_capture([info["base"], "-m", "venv", BENCH_VENV])
        if rc != 0:
            tool.disable(f"cannot create {BENCH_VENV}: {last_line(out)}")
            return None
    return py


def setup_bench_venv(tool, info, module="yappi", requirement=YAPPI_REQUIREMENT):
    """Makes .venv-bench and installs a peer (yappi; memray for --mode memory) into it;
    its runs use the measured interpreter with .venv-bench's site-packages on
    PYTHONPATH, so every configuration runs the very same executable and site setup."""
    py = make_bench_venv(tool, info)
    if py is None:
        return
    check = f"import {module}, sysconfig; print(sysconfig.get_paths()['purelib'])"
    rc, out = run_capture([py, "-c", check], env=clean_env())
    if rc != 0:
        log(f"bench: installing {requirement} into {BENCH_VENV}")
        rc, out = run_capture([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               requirement], env=clean_env())
        if rc != 0:
            return tool.disable(f"pip install {requirement} failed: {last_line(out)}")
        rc, out = run_capture([py, "-c", check], env=clean_env())
        if rc != 0:
            return tool.disable(f"{module} does not import after installing: {last_line(out)}")
    tool.env["PYTHONPATH"] = out.strip().splitlines()[-1]


def setup_pypi_tests(info, python):
    """NetworkX into .venv-bench for the pypi_tests workload (which appends that
    site-packages to its sys.path), and pytest in the measured interpreter; returns
    why the workload cannot run, or None."""
    holder = Tool("pypi_tests")
    py = make_bench_venv(holder, info)
    if py is None:
        return holder.reason
    check = "import networkx; print(networkx.__version__)"
    want = NETWORKX_REQUIREMENT.split("==")[1]
    rc, out = run_capture([py, "-c", check], env=clean_env())
    if rc != 0 or last_line(out) != want:
        log(f"bench: installing {NETWORKX_REQUIREMENT} into {BENCH_VENV}")
        rc, out = run_capture([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               NETWORKX_REQUIREMENT], env=clean_env())
        if rc != 0:
            return f"pip install {NETWORKX_REQUIREMENT} failed: {last_line(out)}"
    rc, out = run_capture([python, "-c", "import pytest"], env=clean_env())
    if rc != 0:
        return f"pytest does not import in {python}: {last_line(out)}"
    return None


def setup_before(tool, strata):
    """The other build's strata runs its own venv's python (the same base interpreter):
    that venv holds that build's extension module."""
    python = os.path.join(os.path.dirname(strata), "python")
    if not os.path.exists(python):
        return tool.disable(f"{python} not found beside {strata}")
    setup_strata(tool, strata, python)


def setup_strata(tool, strata, python):
    if not strata or not os.path.exists(strata):
        return tool.disable(f"{strata or '.venv/bin/strata'} not found (build it: make build)")
    tool.strata = strata
    tool.env["STRATA_PRINT_TABLES"] = "OFF"
    tool.env["PYTHON_EXECUTABLE"] = python
    rc, out = run_capture([strata, "--version"], env=clean_env(), timeout=60)
    version = last_line(out) if rc == 0 else ""
    tool.version = version[len("strata "):] if version.startswith("strata ") else version
    rc, out = run_capture([python, "-c", "import os, strata; print(os.path.dirname(strata.__file__))"],
                          env=clean_env(), timeout=60)
    tool.package_dir = out.strip().splitlines()[-1] if rc == 0 and out.strip() else None
    tool.fingerprint = strata_fingerprint(tool)
    cfg = os.path.expanduser("~/.strata.cfg")
    if os.path.exists(cfg):
        log(f"bench: warning: {cfg} exists and strata will read it")


def strata_fingerprint(tool):
    """Content hashes of the strata command and its installed package: a rebuild during a
    run would mix two builds in one table (a reinstall of the same build does not)."""
    paths = [tool.strata]
    if tool.package_dir and os.path.isdir(tool.package_dir):
        paths += [os.path.join(tool.package_dir, f) for f in sorted(os.listdir(tool.package_dir))
                  if f != "__pycache__"]
    stamps = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                stamps.append((path, hashlib.sha256(f.read()).hexdigest()))
        except OSError:
            stamps.append((path, None))
    return stamps


def command(tool, python, script, outdir):
    """The command line that runs `script` under `tool` (a Tool or 'plain')."""
    name = tool if isinstance(tool, str) else tool.name
    if getattr(tool, "hz", None):
        return sample_command(tool, python, script, outdir)
    if name == "plain":
        return [python, script]
    if name in ("floor", "floor-tsc"):  # floor-tsc: FLOOR_MODULE in its env
        return [python, os.path.join(RUNNERS, "floor.py"), tool.ext_dir, script]
    if name in ("strata", "before", "strata-cpu", "strata-trace", "excluded"):
        # the parent only, as the floor and the peers hook it (test_json starts 8
        # child interpreters; what following a child costs: bench/children_bench.py)
        extra = {
            "strata-cpu": ["--components", "wall_clock,cpu_clock"],  # issue 17: carried forward
            "strata-trace": ["--trace"],  # the profile and its timeline (trace.perfetto)
            "excluded": ["-ME", re.escape(os.path.basename(script)) + "$"],
        }.get(name, [])
        return [tool.strata, "python", "--follow-children", "off", "-o", outdir, *extra, "--",
                script]
    if name == "cProfile":
        return [python, "-m", "cProfile", "-o", os.devnull, script]
    if name == "yappi":
        return [python, "-m", "yappi", "-c", "wall", "-o", os.devnull, script]
    if name == "pyinstrument":
        return [python, "-m", "pyinstrument", "-o", os.devnull, script]
    raise ValueError(name)


# --------------------------------------------------------------------------- running

class Run:
    __slots__ = ("cpu", "wall", "rc", "stdout", "stderr", "timed_out", "own")


def proc_cpu(pid):
    """The CPU seconds of an exited, not yet reaped process's own threads, without its
    reaped children's, from /proc/PID/stat (utime + stime: clock ticks, 10 ms steps)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_run(cmd, env, cwd, timeout, own_cpu=False):
    """Runs one configuration; CPU time from getrusage(RUSAGE_CHILDREN) deltas.  With
    own_cpu, also the child's own CPU without its reaped children's (Run.own): read
    from /proc while it is a zombie (waitid with WNOWAIT), before it is reaped."""
    r = Run()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                             cwd=cwd, start_new_session=True)
        killed = []

        def kill():  # a timer, not wait(timeout): that polls, in steps of up to 50 ms
            killed.append(True)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.start()
        r.own = None
        if own_cpu:
            os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
            t1 = time.perf_counter()
            r.own = proc_cpu(p.pid)
        p.wait()
        if not own_cpu:
            t1 = time.perf_counter()
        timer.cancel()
        r.timed_out = bool(killed)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        r.wall = t1 - t0
        r.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        r.rc = p.returncode
        out.seek(0)
        err.seek(0)
        r.stdout = out.read().decode(errors="replace")
        r.stderr = err.read().decode(errors="replace")
    return r


def run_extras(tool, r, outdir, strata_out):
    """What run_workload keeps of a run besides its times, by default: a sampling
    configuration's measures (sample_extras), nothing for the others."""
    return sample_extras(tool, r, outdir, strata_out) if getattr(tool, "hz", None) else {}


def run_workload(name, tools, make_cmd, check_stdout, repeats, timeout, tmp_root, results,
                 reproductions, extras=run_extras):
    """Runs one workload under plain and every available tool, round-robin, into
    results[name]; make_cmd(tool, outdir) gives a configuration's command line (tool: a
    Tool or 'plain'), check_stdout whether each must print what plain prints, and
    extras(tool, run, outdir, strata_out) what else each run measured (a dict of
    values, kept per round, and an optional 'note')."""
    configs = ["plain"] + [t.name for t in tools if t.available]
    by_name = {t.name: t for t in tools}
    samples = {c: {"cpu": [], "wall": []} for c in configs}
    failed = {}
    notes = {}
    reference = None
    rng = random.Random(sum(map(ord, name)))  # the same shuffles every time
    base_env = clean_env()
    total_rounds = repeats + 1
    for rnd in range(total_rounds):
        order = [c for c in configs if c not in failed]
        rng.shuffle(order)
        if rnd == 0 and "plain" in order:  # the reference output comes from plain
            order.remove("plain")
            order.insert(0, "plain")
        for cfg in order:
            if cfg in failed:
                continue
            tool = by_name.get(cfg, cfg)
            outdir = tempfile.mkdtemp(prefix=f"{cfg}-", dir=tmp_root)
            strata_out = os.path.join(outdir, "profile")
            cmd = make_cmd(tool, strata_out)
            env = dict(base_env)
            if not isinstance(tool, str):
                env.update(tool.env)
            peer = getattr(tool, "peer", False)
            r = timed_run(cmd, env, outdir, timeout, own_cpu=peer)
            for _ in range(PEER_RETRIES if peer else 0):
                if r.rc == 0 or r.timed_out:
                    break
                log(f"  {name:13s} {cfg} failed (exit status {r.rc}): {last_line(r.stderr)}; "
                    "again")
                r = timed_run(cmd, env, outdir, timeout, own_cpu=peer)
            label = "warm-up" if rnd == 0 else f"round {rnd}/{repeats}"
            log(f"  {name:13s} {label:12s} {cfg:9s} cpu {r.cpu:7.3f}s  wall {r.wall:7.3f}s"
                + ("" if r.rc == 0 else f"  rc={r.rc}"))
            shown_env = () if isinstance(tool, str) else tool.env
            repro = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(
                (k, v) for k, v in env.items()
                if k.startswith(("STRATA_", "PYTHON")) or k in shown_env))
            shown = [os.path.join(tempfile.gettempdir(), "strata-bench-repro") if c == strata_out
                     else c for c in cmd]
            repro = (repro + " " if repro else "") + " ".join(shlex.quote(c) for c in shown)
            if r.timed_out or r.rc != 0:
                why = "timed out after %gs" % timeout if r.timed_out else f"exit status {r.rc}"
                failed[cfg] = f"{why}: {last_line(r.stderr)}"
                reproductions.append({"workload": name, "tool": cfg, "why": why,
                                      "command": repro, "stderr_tail": r.stderr[-3000:]})
                shutil.rmtree(outdir, ignore_errors=True)
                continue
            if cfg == "plain" and reference is None:
                reference = r.stdout
            elif (check_stdout and reference is not None
                  and program_stdout(tool, r.stdout) != reference and cfg not in notes):
                notes[cfg] = "its standard output differs from plain python's"
                reproductions.append({"workload": name, "tool": cfg, "why": "stdout differs",
                                      "command": repro, "stdout": r.stdout[-1000:],
                                      "expected": reference[-1000:]})
            if cfg in STRATA_TOOLS and not os.path.isdir(strata_out) and cfg not in notes:
                notes[cfg] = "it wrote no output folder"
                reproductions.append({"workload": name, "tool": cfg, "why": notes[cfg],
                                      "command": repro})
            extra = extras(tool, r, outdir, strata_out)
            if extra.get("note") and cfg not in notes:
                notes[cfg] = extra["note"]
            shutil.rmtree(outdir, ignore_errors=True)
            if rnd > 0:
                samples[cfg]["cpu"].append(r.cpu)
                samples[cfg]["wall"].append(r.wall)
                for key, value in extra.items():  # None kept: lists stay paired by round
                    if key != "note":
                        samples[cfg].setdefault(key, []).append(value)
    results[name] = {"samples": samples, "failed": failed, "notes": notes}


# --------------------------------------------------------------------------- reporting

def median(xs):
    return statistics.median(xs) if xs else None


def noise_floor(plain):
    """Added times below this are not distinguishable from run-to-run noise."""
    return max(0.010, 0.02 * plain)


def fmt_s(x):
    return "n/a" if x is None else (f"{x:.3f} s" if abs(x) < 10 else f"{x:.2f} s")


def fmt_added(x):
    text = f"{x:+.3f}" if abs(x) < 10 else f"{x:+.2f}"
    return ("+" + text[1:] if text.startswith("-") and float(text) == 0 else text) + " s"


def summarize(results, tools, metric):
    """Per workload: plain median, and per tool its added time and x-factor."""
    summary = {}
    for name, res in results.items():
        plain = median(res["samples"]["plain"][metric])
        row = {"plain": plain, "tools": {}, "ratios": {}}
        for t in tools:
            s = res["samples"].get(t.name)
            if not t.available:
                row["tools"][t.name] = {"na": t.reason}
            elif t.name in res["failed"]:
                row["tools"][t.name] = {"na": "failed: " + res["failed"][t.name]}
            elif not s or not s[metric] or plain is None:
                row["tools"][t.name] = {"na": "not run"}
            else:
                m = median(s[metric])
                row["tools"][t.name] = {"median": m, "added": m - plain, "factor": m / plain,
                                        "min": min(s[metric]), "max": max(s[metric])}
                if t.name in res["notes"]:
                    row["tools"][t.name]["note"] = res["notes"][t.name]
        st = row["tools"].get("strata", {})
        for other in COMPARED + ["before"]:
            ot = row["tools"].get(other, {})
            if "added" not in st or "added" not in ot:
                row["ratios"][other] = {"na": "n/a"}
            elif ot["added"] < noise_floor(plain):
                row["ratios"][other] = {"na": "noise", "value": None}
            else:
                row["ratios"][other] = {"value": st["added"] / ot["added"]}
        summary[name] = row
    return summary


def table(summary, tools, metric_title):
    names = [t.name for t in tools]
    compared = [o for o in COMPARED + ["before"] if o in names and "strata" in names]
    head = ["workload", "plain"] + [f"{n} added (x)" for n in names] + \
           [f"strata/{o} added" for o in compared]
    lines = [f"**{metric_title}**", "", "| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    footnotes = {}

    def note(text):
        key = footnotes.setdefault(text, len(footnotes) + 1)
        return f"[{key}]"

    for name, row in summary.items():
        cells = [WORKLOADS[name][1], fmt_s(row["plain"])]
        for n in names:
            c = row["tools"][n]
            if "na" in c:
                cells.append("n/a " + note(f"{n}: {c['na']}"))
            else:
                cells.append(f"{fmt_added(c['added'])} ({c['factor']:.2f}x)"
                             + (" " + note(f"{n}: {c['note']}") if "note" in c else ""))
        if "strata" in names:
            for o in compared:
                r = row["ratios"][o]
                if r.get("value") is not None:
                    cells.append(f"**{r['value']:.2f}**")
                elif r["na"] == "noise":
                    cells.append("— " + note(f"{o}'s added time is within noise "
                                             "(under max(10 ms, 2% of plain)): no ratio"))
                else:
                    cells.append("n/a")
        lines.append("| " + " | ".join(cells) + " |")
    if footnotes:
        lines.append("")
        for text, key in footnotes.items():
            lines.append(f"[{key}] {text}  ")
    return "\n".join(lines)


def targets_text(summary, monitoring):
    row = summary.get(TARGET_WORKLOAD)
    if not row:
        return ""
    out = [f"Targets on the call-heavy workload ({WORKLOADS[TARGET_WORKLOAD][1]}, CPU time):", ""]
    for other, limit in (TARGETS_MONITORING if monitoring else TARGETS).items():
        r = row["ratios"].get(other, {})
        if r.get("value") is None:
            out.append(f"- strata added / {other} added ≤ {limit}: not measured")
        else:
            ok = "met" if r["value"] <= limit else "NOT met"
            out.append(f"- strata added / {other} added ≤ {limit}: **{r['value']:.2f}** ({ok})")
    cpu, st = row["tools"].get("strata-cpu", {}), row["tools"].get("strata", {})
    if "added" in cpu and st.get("added"):
        r = cpu["added"] / st["added"]
        ok = "met" if r <= CPU_CLOCK_TARGET else "NOT met"
        out.append(f"- strata-cpu (wall_clock,cpu_clock) added / strata added ≤ "
                   f"{CPU_CLOCK_TARGET}: **{r:.2f}** ({ok})")
    tr = row["tools"].get("strata-trace", {})
    if "added" in tr and st.get("added"):
        r = tr["added"] / st["added"]
        ok = "met" if r <= TRACE_TARGET else "NOT met"
        out.append(f"- strata-trace (--trace) added / strata added ≤ {TRACE_TARGET}: "
                   f"**{r:.2f}** ({ok})")
    ex = row["tools"].get("excluded", {})
    start = summary.get("startup", {}).get("tools", {}).get("excluded", {})
    if monitoring and "factor" in ex and "added" in start:
        # The left-out code's own speed: strata's fixed cost (start-up and writing an
        # empty profile, the start-up row's added time) taken out.
        code = (ex["median"] - start["added"]) / row["plain"]
        ok = "met" if code <= EXCLUDED_TARGET else "NOT met"
        out.append(f"- the workload's code left out (-ME), strata / plain ≤ {EXCLUDED_TARGET}, "
                   f"strata's fixed start-up cost ({start['added']:.3f} s, the start-up row) "
                   f"taken out: **{code:.3f}** ({ok}); with it: {ex['factor']:.3f}")
    elif monitoring and "factor" in ex:
        ok = "met" if ex["factor"] <= EXCLUDED_TARGET else "NOT met"
        out.append(f"- the workload's code left out (-ME), strata / plain ≤ {EXCLUDED_TARGET}: "
                   f"**{ex['factor']:.3f}** ({ok}; start-up included: run the start-up "
                   "workload too to take it out)")
    elif monitoring:
        out.append(f"- the workload's code left out (-ME), strata / plain ≤ {EXCLUDED_TARGET}: "
                   "not measured")
    return "\n".join(out)


def absolute_table(results, tools):
    lines = ["| workload | config | CPU median (min–max) | wall median (min–max) | runs |",
             "|---|---|---:|---:|---:|"]
    for name, res in results.items():
        for cfg, s in res["samples"].items():
            if not s["cpu"]:
                continue
            lines.append(
                f"| {name} | {cfg} | {median(s['cpu']):.3f} ({min(s['cpu']):.3f}–{max(s['cpu']):.3f})"
                f" | {median(s['wall']):.3f} ({min(s['wall']):.3f}–{max(s['wall']):.3f})"
                f" | {len(s['cpu'])} |")
    return "\n".join(lines)


def machine_info(interp, tools):
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    info = {"nproc": usable, "cpu_count": os.cpu_count(), "cpu_model": model,
            "kernel": platform.release(), "python": interp["version"].split()[0],
            "python_full": " ".join(interp["version"].split()),
            "python_executable": interp.get("executable", ""),
            "tool_versions": {t.name: t.version for t in tools
                              if t.version and t.name != "excluded"}}
    return info


def report(results, tools, machine, repeats, when, probes, reproductions, cmdline, skipped):
    cpu = summarize(results, tools, "cpu")
    wall = summarize(results, tools, "wall")
    versions = ", ".join(f"{k} {v}" for k, v in machine["tool_versions"].items())
    interp_path = os.path.relpath(machine["python_executable"], ROOT)
    if not interp_path.startswith(".."):
        machine = dict(machine, python_executable=interp_path)
    parts = [
        f"- Date: {when}",
        f"- Machine: {machine['cpu_model']}, {machine['nproc']} CPUs (nproc), "
        f"Linux {machine['kernel']}; 1-minute load average {machine['load_before']:.2f} at "
        f"the start, {machine['load_after']:.2f} at the end (the benchmark itself counts "
        "for about 1; more means other work shared the machine)",
        f"- Python: CPython {machine['python_full']} (`{machine['python_executable']}`)",
        f"- Tools: {versions or 'none'}",
        f"- Runs: median of {repeats} timed runs per configuration after one warm-up round, "
        f"round-robin in a shuffled order; command `{cmdline}`",
        "",
        "Each cell: the time the tool adds to plain python (tool − plain) and, in parentheses, "
        "the overhead factor tool / plain. The last columns divide strata's added time by "
        "another tool's added time from the same run (below 1: strata adds less).",
        "",
        table(cpu, tools, "CPU time of the process (user + sys)"),
        "",
        table(wall, tools, "Wall time"),
        "",
        targets_text(cpu, machine.get("monitoring", False)),
    ]
    for t in tools:
        if t.name in STRATA_TOOLS and t.available and strata_fingerprint(t) != t.fingerprint:
            parts += ["", "**Warning: strata was rebuilt or reinstalled during this run; "
                      "the table mixes two builds. Run the benchmark again.**"]
            log("bench: warning: strata changed during the run")
    if skipped:
        parts += ["", "Skipped: " + "; ".join(skipped) + "."]
    interps = sorted({p["version"] for p in probes.values()})
    if len(interps) > 1:
        parts += ["", "**Warning: the configurations did not all run the same interpreter:** "
                  + "; ".join(f"{k}: {v['version']}" for k, v in probes.items())]
    if reproductions:
        parts += ["", "Problems seen (reproduce from the repository root):", ""]
        for r in reproductions:
            parts.append(f"- {r['workload']} under {r['tool']}: {r['why']}: `{r['command']}`")
    return "\n".join(parts), cpu, wall


def update_doc(section, version, markers=None):
    """Replaces the results section of docs/performance.md for this Python version (or
    the one between the given markers)."""
    begin, end = markers or doc_markers(version)
    if not os.path.exists(DOC):
        raise SystemExit(f"bench: {DOC} does not exist")
    with open(DOC) as f:
        text = f.read()
    if begin not in text or end not in text:
        text = text.rstrip("\n") + "\n\n" + begin + "\n" + end + "\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(DOC, "w") as f:
        f.write(head + begin + "\n" + section.strip("\n") + "\n" + end + tail)
    log(f"bench: updated {os.path.relpath(DOC, ROOT)} ({begin})")


# --------------------------------------------------------------------------- sampling mode

SAMPLE_TOOLS = ["floor", "strata", "py-spy", "austin"]
SAMPLE_RATES = [100, 1000]
# py-spy fails at random on a program that ends before it attaches (start-up) and
# austin at random with "discover it automatically" (exit status 32): runs again
PEER_RETRIES = 2
# name -> (requirement, binary).  austin-dist 4.0's binary needs glibc 2.38 (Debian 12
# has 2.36); 3.7.0's is manylinux2010.
PEERS = {"py-spy": ("py-spy", "py-spy"), "austin": ("austin-dist==3.7.0", "austin")}
# issue 11: strata --sample's slowdown (CPU time, every workload) at each rate
SAMPLE_TARGETS = {100: 1.01, 1000: 1.03}


def sample_tools(names, rates):
    """One Tool per (tool, rate): floor@100, strata@100, py-spy@100, ..."""
    tools = []
    for base in names:
        for hz in rates:
            t = Tool(f"{base}@{hz}")
            t.base, t.hz, t.peer = base, hz, base in PEERS
            tools.append(t)
    return tools


def setup_peer(tool, info):
    """py-spy or austin from PyPI into .venv-bench (pip); their binaries land in its bin/."""
    requirement, binary = PEERS[tool.base]
    py = make_bench_venv(tool, info)
    if py is None:
        return
    exe = os.path.join(BENCH_VENV, "bin", binary)
    pinned = requirement.partition("==")[2]
    rc, out = run_capture([exe, "--version"], env=clean_env(), timeout=60)
    if not os.path.exists(exe) or (pinned and (rc != 0 or not out.strip().endswith(pinned))):
        log(f"bench: installing {requirement} into {BENCH_VENV}")
        rc, out = run_capture([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               requirement], env=clean_env())
        if rc != 0:
            return tool.disable(f"pip install {requirement} failed: {last_line(out)}")
        if not os.path.exists(exe):
            return tool.disable(f"pip install {requirement} gave no {exe}")
    tool.exe = exe
    rc, out = run_capture([exe, "--version"], env=clean_env(), timeout=60)
    tool.version = last_line(out).split()[-1] if rc == 0 else ""


def setup_sample_tool(tool, info, strata, python):
    if tool.base == "floor":
        build_floor(tool, info, "samplefloor")
    elif tool.base == "strata":
        setup_strata(tool, strata, python)
    else:
        setup_peer(tool, info)


def sample_command(tool, python, script, outdir):
    """The command line of a sampling configuration (its output under outdir's folder)."""
    hz = tool.hz
    if tool.base == "floor":
        return [python, os.path.join(RUNNERS, "sample_floor.py"), tool.ext_dir, str(hz), script]
    if tool.base == "strata":
        return [tool.strata, "python", "--sample", "-f", str(hz), "--follow-children", "off",
                "-o", outdir, "--", script]
    out = os.path.join(os.path.dirname(outdir), "samples.txt")
    if tool.base == "py-spy":
        return [tool.exe, "record", "-r", str(hz), "-o", out, "--format", "raw", "--",
                python, script]
    if tool.base == "austin":
        return [tool.exe, "-i", str(1000000 // hz), "-o", out, python, script]
    raise ValueError(tool.name)


def count_samples(tool, path):
    """Samples in a peer's output: py-spy's raw lines end with a count; every austin
    line that is not a # comment is one sample (of one thread)."""
    taken = 0
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if tool.base == "py-spy":
                taken += int(line.split()[-1])  # an empty stack is a line of its count
            else:
                taken += 1
    return taken


def program_stdout(tool, stdout):
    """The program's standard output: py-spy writes its own lines ("py-spy> ...", with a
    blank line after the first and before the second) into it."""
    if getattr(tool, "base", None) != "py-spy":
        return stdout
    lines = [ln for ln in stdout.splitlines(keepends=True) if not ln.startswith("py-spy> ")]
    if lines and lines[0] == "\n":
        lines.pop(0)
    if lines and lines[-1] == "\n":
        lines.pop()
    return "".join(lines)


def sample_extras(tool, r, outdir, strata_out):
    """What a sampling run measured besides its CPU time: the program's own CPU
    ('prog'), the sampler's own CPU ('own'), and the samples it took ('taken'; strata:
    also 'periods', the timer periods they stand for, and 'lost', samples its buffers
    had no room for)."""
    if r.rc != 0 or r.timed_out:
        return {}
    if tool.base == "floor":
        return {"prog": r.cpu}
    if tool.base == "strata":
        path = os.path.join(strata_out, "profile.json")
        try:
            with open(path) as f:
                st = json.load(f)["stack_sampling"]
        except (OSError, ValueError, KeyError) as exc:
            return {"prog": r.cpu, "note": f"no stack_sampling in its profile.json ({exc})"}
        return {"prog": r.cpu, "own": st["sampler_cpu_s"], "taken": st["samples"],
                "periods": st["periods"], "lost": st.get("lost")}
    extra = {"own": r.own, "prog": None if r.own is None else r.cpu - r.own}
    try:
        extra["taken"] = count_samples(tool, os.path.join(outdir, "samples.txt"))
    except (OSError, ValueError, IndexError) as exc:
        extra["note"] = f"its samples could not be read ({exc})"
    return extra


def fmt_pct(factor):
    text = f"{(factor - 1) * 100:+.1f} %"
    return "+0.0 %" if text == "-0.0 %" else text


def paired_median(xs, ys, ratio=True):
    """The median over rounds of xs[i] / ys[i] (or xs[i] alone), rounds with a value."""
    vals = [x / y if ratio else x for x, y in zip(xs, ys) if x is not None and y]
    return median(vals)


def sample_summary(results, tools):
    """Per workload: plain's median CPU; per configuration the medians of the program's
    CPU, its slowdown (the median over rounds of program CPU / plain's CPU in the same
    round: a round's configurations run back to back, so a slower machine in one round
    slows them all), the sampler's own CPU (also as a share of the program's CPU),
    samples per second of the program's CPU, and the samples lost over all rounds."""
    summary = {}
    for name, res in results.items():
        plain = median(res["samples"]["plain"]["cpu"])
        row = {"plain": plain, "tools": {}}
        for t in tools:
            s = res["samples"].get(t.name, {})
            if not t.available:
                row["tools"][t.name] = {"na": t.reason}
            elif t.name in res["failed"]:
                row["tools"][t.name] = {"na": "failed: " + res["failed"][t.name]}
            elif plain is None or paired_median(s.get("prog", []), s.get("prog", []),
                                                False) is None:
                row["tools"][t.name] = {"na": "not measured"}
            else:
                prog = s["prog"]
                c = {"prog": paired_median(prog, prog, False),
                     "slowdown": paired_median(prog, res["samples"]["plain"]["cpu"]),
                     "total": median(s["cpu"]), "runs": len(prog)}
                for key, out in (("own", "own"), ("taken", "rate"), ("periods", "period_rate")):
                    if not s.get(key):
                        continue
                    c[out] = (paired_median(s[key], prog, False) if key == "own"
                              else paired_median(s[key], prog))
                if s.get("own"):
                    c["own_share"] = paired_median(s["own"], prog)
                if s.get("lost"):
                    c["lost"] = sum(x for x in s["lost"] if x)
                if t.name in res["notes"]:
                    c["note"] = res["notes"][t.name]
                row["tools"][t.name] = c
        summary[name] = row
    return summary


def sample_table(summary, tools, rates, bases=None, labels=None, share=False):
    """One row per workload and rate; per tool its slowdown, its own CPU, its samples
    per second of the program's CPU.  bases: the column groups, each the tools named
    BASE@HZ (default: those of SAMPLE_TOOLS run); labels: each workload's row label
    (default WORKLOADS'); share: the own CPU also as a share of the program's."""
    if bases is None:
        bases = [b for b in SAMPLE_TOOLS if any(t.base == b for t in tools)]
    labels = labels or {w: spec[1] for w, spec in WORKLOADS.items()}
    head = ["workload", "Hz", "plain CPU"]
    for b in bases:
        head.append(f"{b} slowdown")
        if b != "floor":
            head += [f"{b} own CPU", f"{b} samples/s"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    footnotes = {}

    def note(text):
        return f"[{footnotes.setdefault(text, len(footnotes) + 1)}]"

    for name, row in summary.items():
        for hz in rates:
            cells = [labels[name], str(hz), fmt_s(row["plain"])]
            for b in bases:
                c = row["tools"].get(f"{b}@{hz}")
                width = 1 if b == "floor" else 3
                if c is None:
                    cells += ["—"] * width
                    continue
                if "na" in c:
                    cells += ["n/a " + note(f"{b}@{hz}: {c['na']}")] + ["n/a"] * (width - 1)
                    continue
                text = fmt_pct(c["slowdown"])
                if "note" in c:
                    text += " " + note(f"{b}@{hz}: {c['note']}")
                cells.append(text)
                if b == "floor":
                    continue
                own = fmt_s(c.get("own")) if "own" in c else "n/a"
                if share and "own_share" in c:
                    own += f" ({c['own_share'] * 100:.2f} %)"
                cells.append(own)
                rate = f"{c['rate']:.0f}" if "rate" in c else "n/a"
                if "period_rate" in c:
                    rate += f" ({c['period_rate']:.0f})"
                cells.append(rate)
            lines.append("| " + " | ".join(cells) + " |")
    if footnotes:
        lines.append("")
        lines += [f"[{k}] {text}  " for text, k in footnotes.items()]
    return "\n".join(lines)


def sample_targets_text(summary, results, rates, base="strata", what="strata --sample"):
    """The targets of issue 11 against the slowdowns of the tools named BASE@HZ."""
    out = [f"Targets (issue 11): {what}'s slowdown, CPU time, every workload:", ""]
    for hz in rates:
        limit = SAMPLE_TARGETS.get(hz)
        if limit is None:
            continue
        cells = []
        for name, row in summary.items():
            c = row["tools"].get(f"{base}@{hz}", {})
            if "slowdown" not in c:
                cells.append(f"{name} not measured")
                continue
            ok = "met" if c["slowdown"] <= limit else "NOT met"
            cells.append(f"{name} {fmt_pct(c['slowdown'])} ({ok})")
        out.append(f"- ≤ {(limit - 1) * 100:.0f} % at {hz} Hz: " + "; ".join(cells))
        cfg = f"{base}@{hz}"
        if "prog" not in summary.get("startup", {}).get("tools", {}).get(cfg, {}):
            continue
        # strata's fixed cost (start-up, writing the profile): the start-up row's added
        # CPU, paired by round as the slowdowns are
        start = results["startup"]["samples"]
        fixed = paired_median([p - q if p is not None else None
                               for p, q in zip(start[cfg]["prog"], start["plain"]["cpu"])],
                              start["plain"]["cpu"], False)
        cells = []
        for name, row in summary.items():
            if name == "startup" or "prog" not in row["tools"].get(cfg, {}):
                continue
            runs = results[name]["samples"]
            slow = paired_median([p - fixed if p is not None else None
                                  for p in runs[cfg]["prog"]], runs["plain"]["cpu"])
            if slow is not None:
                cells.append(f"{name} {fmt_pct(slow)} ({'met' if slow <= limit else 'NOT met'})")
        out.append(f"  - strata's fixed cost ({fixed * 1000:.0f} ms of CPU, the start-up row's) "
                   "taken out: " + "; ".join(cells))
    return "\n".join(out)


def sample_header(tools, machine, repeats, when, cmdline, python=True):
    """The first lines of a sampling report: date, machine, tools, runs."""
    versions = ", ".join(sorted({f"{t.base} {t.version}" for t in tools if t.version}))
    return [
        f"- Date: {when}",
        f"- Machine: {machine['cpu_model']}, {machine['nproc']} CPUs (nproc), "
        f"Linux {machine['kernel']}; 1-minute load average {machine['load_before']:.2f} at "
        f"the start, {machine['load_after']:.2f} at the end",
    ] + ([f"- Python: CPython {machine['python_full']}"] if python else []) + [
        f"- Tools: {versions or 'none'}",
        f"- Runs: median of {repeats} timed runs per configuration after one warm-up round, "
        f"round-robin in a shuffled order; command `{cmdline}`",
    ]


def sample_trailer(tools, reproductions, skipped):
    """The last lines of a sampling report: a rebuild during the run, what was skipped,
    the failed runs with a command that reproduces each."""
    parts = []
    for t in tools:
        if t.base == "strata" and t.available and strata_fingerprint(t) != t.fingerprint:
            parts += ["", "**Warning: strata was rebuilt or reinstalled during this run.**"]
    if skipped:
        parts += ["", "Skipped: " + "; ".join(skipped) + "."]
    if reproductions:
        parts += ["", "Problems seen (reproduce from the repository root):", ""]
        parts += [f"- {r['workload']} under {r['tool']}: {r['why']}: `{r['command']}`"
                  for r in reproductions]
    return parts


def sample_report(results, tools, machine, repeats, when, rates, reproductions, cmdline,
                  skipped):
    summary = sample_summary(results, tools)
    parts = sample_header(tools, machine, repeats, when, cmdline) + [
        "",
        "Slowdown: the program's CPU time (user + sys) under the tool over plain python's "
        "in the same round, minus 1 (the median over rounds). Own CPU: the sampler's own "
        "CPU time: strata's in-process cost (profile.json stack_sampling.sampler_cpu_s, "
        "already inside the program's CPU); "
        "py-spy's and austin's process (outside the program: the program's CPU is the "
        "child tree's minus it). Samples/s: samples taken per second of the program's CPU "
        "(strata: in parentheses, the timer periods they stand for).",
        "",
        sample_table(summary, tools, rates),
        "",
        sample_targets_text(summary, results, rates),
    ] + sample_trailer(tools, reproductions, skipped)
    return "\n".join(parts), summary


# --------------------------------------------------------------------------- main

def split_list(values):
    out = []
    for v in values or []:
        out += [x for x in v.replace(",", " ").split() if x]
    return out


def resolve_workloads(names, known=WORKLOADS):
    """The workloads named (or their aliases: each spec's third item), in order."""
    if not names:
        return list(known)
    chosen = []
    for n in names:
        key = n[:-3] if n.endswith(".py") else n
        match = [w for w, spec in known.items() if key == w or key in spec[2]]
        if not match:
            raise SystemExit(f"bench: unknown workload {n!r}; choose from "
                             + ", ".join(known))
        chosen += [m for m in match if m not in chosen]
    return chosen


def resolve_tools(names, known=TOOLS):
    if not names:
        return list(known)
    lower = {t.lower(): t for t in known}
    chosen = []
    for n in names:
        if n.lower() == "plain":
            continue
        if n.lower() not in lower:
            raise SystemExit(f"bench: unknown tool {n!r}; choose from " + ", ".join(known))
        chosen.append(lower[n.lower()])
    return [t for t in known if t in chosen]


def command_line(argv):
    """How this benchmark was run, for the report (without --update-docs)."""
    exe = os.path.relpath(sys.executable, ROOT)
    return ("python" if exe.startswith("..") else exe) + " bench/run.py" + "".join(
        " " + shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
        if a != "--update-docs")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--repeats", type=int, default=None,
                    help="timed runs per configuration (default 5; 3 with --quick)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats (3)")
    ap.add_argument("--only", action="append", metavar="WORKLOAD",
                    help="run only these workloads (repeatable or comma-separated): "
                         + ", ".join(WORKLOADS) + " (--mode native: its own, "
                         "bench/native.py)")
    ap.add_argument("--tools", action="append", metavar="TOOL",
                    help="tools to compare with plain python (comma-separated; default all): "
                         + ", ".join(TOOLS) + "; --mode sample: " + ", ".join(SAMPLE_TOOLS)
                         + "; --mode native: floor, fp, libunwind")
    ap.add_argument("--python", help="interpreter to measure (default: .venv/bin/python, "
                                     "the one strata was built for)")
    ap.add_argument("--strata", help="strata command (default: .venv/bin/strata)")
    ap.add_argument("--before", metavar="STRATA",
                    help="also run another build's strata command (in its own venv), e.g. "
                         "the previous commit's, and compare strata's added time with it")
    ap.add_argument("--mode", choices=["overhead", "sample", "native", "run", "gpu", "mpi", "omp",
                                       "lines", "memory"],
                    default="overhead",
                    help="overhead (default): the deterministic profilers; sample: stack "
                         "samplers (floor, strata --sample, py-spy, austin) at --rates; "
                         "native: strata sample on C programs (bench/native.py)")
    ap.add_argument("--rates", metavar="HZ[,HZ]",
                    help="sampling rates for --mode sample and native (default 100,1000)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds allowed per run")
    ap.add_argument("--update-docs", action="store_true",
                    help="rewrite the results section of docs/performance.md")
    args = ap.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 5)
    if repeats < 1:
        ap.error("--repeats must be at least 1")

    python = venv_python(os.path.join(ROOT, ".venv"))
    if args.python:  # runs happen in temporary folders: make the path absolute
        python = os.path.abspath(shutil.which(args.python) or args.python)
    if not os.path.exists(python):
        log(f"bench: {python} not found; measuring {sys.executable} instead")
        python = sys.executable
    strata = os.path.join(ROOT, ".venv", "bin", "strata")
    if args.strata:
        strata = os.path.abspath(shutil.which(args.strata) or args.strata)
    interp = interpreter_info(python)
    interp["executable"] = python
    log(f"bench: interpreter {python}: {' '.join(interp['version'].split())}")

    sampling = args.mode == "sample"
    if args.mode != "overhead":
        if args.before:
            ap.error("--before is for the overhead mode")
        rates = [int(x) for x in split_list([args.rates])] if args.rates else SAMPLE_RATES
        if not rates or min(rates) < 1:
            ap.error("--rates: positive numbers of samples a second")
    if args.mode == "run":
        import native_run  # bench/native_run.py: strata run (issue 13)
        return native_run.main_run(args, repeats, strata)
    if args.mode == "gpu":
        import gpu_bench  # bench/gpu_bench.py: strata run --gpu (issue 16)
        return gpu_bench.main_gpu(args, repeats, strata)
    if args.mode == "mpi":
        import native_mpi  # bench/native_mpi.py: strata run's MPI wrappers (issue 14)
        return native_mpi.main_mpi(args, repeats, strata)
    if args.mode == "omp":
        import native_omp  # bench/native_omp.py: strata run's OMPT callbacks (issue 14)
        return native_omp.main_omp(args, repeats, strata)
    if args.mode == "lines":
        import lines_bench  # bench/lines_bench.py: strata python --lines (issue 12)
        return lines_bench.main_lines(args, repeats, strata, python, interp)
    if args.mode == "memory":
        import lines_bench  # bench/lines_bench.py: strata python --memory (issue 12)
        return lines_bench.main_memory(args, repeats, strata, python, interp)
    if args.mode == "native":
        import native  # bench/native.py, which imports this module's helpers
        return native.main_native(args, repeats, rates, strata, python, interp,
                                  command_line(argv))
    workloads = resolve_workloads(split_list(args.only))
    if sampling:
        tools = sample_tools(resolve_tools(split_list(args.tools), SAMPLE_TOOLS), rates)
    else:
        tools = [Tool(n) for n in resolve_tools(split_list(args.tools))]
    if args.before:
        tools.append(Tool("before"))
    for t in tools:
        if sampling:
            setup_sample_tool(t, interp, strata, python)
        elif t.name == "floor":
            build_floor(t, interp)
        elif t.name == "floor-tsc":
            build_floor(t, interp, "benchfloortsc")
            t.env["FLOOR_MODULE"] = "benchfloortsc"
        elif t.name == "pyinstrument":
            setup_bench_venv(t, interp, "pyinstrument", PYINSTRUMENT_REQUIREMENT)
        elif t.name in ("strata", "strata-cpu", "strata-trace", "excluded"):
            setup_strata(t, strata, python)
        elif t.name == "before":
            setup_before(t, os.path.abspath(args.before))
        elif t.name == "yappi":
            setup_bench_venv(t, interp)
        elif t.name == "cProfile":
            t.version = "stdlib"

    tmp_root = tempfile.mkdtemp(prefix="strata-bench-")
    results, reproductions, probes, skipped = {}, [], {}, []
    try:
        # Which interpreter each configuration really runs (and whether it runs at all).
        probe = os.path.join(RUNNERS, "probe.py")
        for cfg in ["plain"] + [t for t in tools if t.available]:
            name = cfg if isinstance(cfg, str) else cfg.name
            if getattr(cfg, "peer", False):
                # py-spy and austin run the very python given them, and fail at random on
                # a process as short as the probe (it ends before they attach)
                continue
            outdir = tempfile.mkdtemp(dir=tmp_root)
            env = clean_env()
            if not isinstance(cfg, str):
                env.update(cfg.env)
            r = timed_run(command(cfg, python, probe, os.path.join(outdir, "profile")),
                          env, outdir, 120)
            found = [ln for ln in r.stdout.splitlines() if ln.startswith("PROBE ")]
            if r.rc != 0 or not found:
                msg = f"does not run (exit status {r.rc}): {last_line(r.stderr)}"
                if name == "plain":
                    raise SystemExit(f"bench: plain python {msg}")
                cfg.disable(msg)
                continue
            probes[name] = json.loads(found[0][6:])
            if name == "yappi":
                cfg.version = probes[name].get("yappi", "")
            log(f"bench: {name:9s} runs {probes[name]['executable']}: "
                f"{' '.join(probes[name]['version'].split())}")
        if "stdlib_tests" in workloads:
            rc, out = run_capture([python, "-c", "import test.libregrtest, test.test_json"],
                                  env=clean_env())
            if rc != 0:
                skipped.append("stdlib_tests: this interpreter has no `test` package with "
                               "test_json (python -m test test_json does not run; Debian: "
                               "libpython3.X-testsuite)")
                log("bench: skipping " + skipped[-1])
                workloads.remove("stdlib_tests")
        if "pypi_tests" in workloads:
            why = setup_pypi_tests(interp, python)
            if why:
                skipped.append("pypi_tests: " + why)
                log("bench: skipping " + skipped[-1])
                workloads.remove("pypi_tests")
        for t in tools:
            if not t.available:
                log(f"bench: {t.name}: n/a: {t.reason}")

        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        for name in workloads:
            log(f"bench: workload {name} ({WORKLOADS[name][1]})")
            script = os.path.join(WORKLOAD_DIR, WORKLOADS[name][0])
            run_workload(name, tools, lambda tool, out: command(tool, python, script, out),
                         WORKLOADS[name][3], repeats, args.timeout, tmp_root, results,
                         reproductions)
        elapsed = time.perf_counter() - start
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)

    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    machine = machine_info(interp, tools)
    machine.update(load_before=load_before, load_after=os.getloadavg()[0],
                   monitoring=interp["hexversion"] >= 0x030C0000)
    cmdline = command_line(argv)
    version = "%d.%d" % (interp["hexversion"] >> 24, (interp["hexversion"] >> 16) & 0xff)
    if sampling:
        return finish_sampling(results, tools, machine, repeats, when, rates, reproductions,
                               cmdline, skipped, probes, elapsed, version, args.update_docs)
    text, cpu, wall = report(results, tools, machine, repeats, when, probes, reproductions,
                             cmdline, skipped)
    print(text)
    log(f"bench: measured in {elapsed:.0f} s")

    os.makedirs(RESULTS_DIR, exist_ok=True)
    with open(os.path.join(RESULTS_DIR, "latest.md"), "w") as f:
        f.write(f"# strata overhead benchmark, {when}\n\n{text}\n\n"
                f"## Absolute medians (seconds; context only)\n\n"
                f"{absolute_table(results, tools)}\n")
    with open(os.path.join(RESULTS_DIR, "latest.json"), "w") as f:
        json.dump({"when": when, "machine": machine, "repeats": repeats, "command": cmdline,
                   "probes": probes, "elapsed_s": elapsed,
                   "tools": {t.name: {"available": t.available, "reason": t.reason,
                                      "version": t.version} for t in tools},
                   "results": results, "summary": {"cpu": cpu, "wall": wall},
                   "problems": reproductions}, f, indent=1)
    log(f"bench: wrote {os.path.relpath(RESULTS_DIR, ROOT)}/latest.md and latest.json")
    if args.update_docs:
        update_doc(f"### Latest results: CPython {version}\n\n{text}\n", version)
    return 0


def write_sampling_results(stem, title, text, head, tools, results, summary, reproductions,
                           elapsed):
    """Prints a sampling report and writes it to bench/results/STEM.md, with every
    sample in STEM.json (head's keys first)."""
    print(text)
    log(f"bench: measured in {elapsed:.0f} s")
    os.makedirs(RESULTS_DIR, exist_ok=True)
    with open(os.path.join(RESULTS_DIR, stem + ".md"), "w") as f:
        f.write(f"# {title}\n\n{text}\n")
    with open(os.path.join(RESULTS_DIR, stem + ".json"), "w") as f:
        json.dump(dict(head, elapsed_s=elapsed,
                       tools={t.name: {"available": t.available, "reason": t.reason,
                                       "version": t.version} for t in tools},
                       results=results, summary=summary, problems=reproductions),
                  f, indent=1)
    log(f"bench: wrote {os.path.relpath(RESULTS_DIR, ROOT)}/{stem}.md and .json")


def finish_sampling(results, tools, machine, repeats, when, rates, reproductions, cmdline,
                    skipped, probes, elapsed, version, update_docs):
    """--mode sample's output: the table on standard output, bench/results/sample-latest.md
    and .json, and with --update-docs its section of docs/performance.md."""
    text, summary = sample_report(results, tools, machine, repeats, when, rates,
                                  reproductions, cmdline, skipped)
    write_sampling_results("sample-latest", f"strata sampling benchmark, {when}", text,
                           {"when": when, "machine": machine, "repeats": repeats,
                            "rates": rates, "command": cmdline, "probes": probes},
                           tools, results, summary, reproductions, elapsed)
    if update_docs:
        update_doc(f"#### Latest results: CPython {version}\n\n{text}\n", version,
                   (f"<!-- bench-sampling-{version}:begin (written by bench/run.py --mode sample "
                    "--update-docs) -->", f"<!-- bench-sampling-{version}:end -->"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
