"""`strata sample -- program`: call-stack sampling of any program (issue 11).

A C program with a known split is sampled built three ways (frame pointers at -O0
and -O2, none at -O2); threads started before and after the first samples are
sampled and named; fork, exec and dlopen/dlclose; the program keeps its own SIGPROF
timer, its exit status and its output; waits under the wall clock see no EINTR and
are attributed to the call that waited; mistakes are one line and exit 2.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import pytest

from conftest import PYTHON, STRATA, TESTS, c_compiler, load_profile
from test_sampling import samples_by_path as tree

SRC = TESTS / "data" / "native"


@pytest.fixture(scope="session")
def programs(tmp_path_factory):
    """The test program built three ways, and its library."""
    cc = c_compiler()
    out = tmp_path_factory.mktemp("native")
    builds = {
        "fp_o0": ["-O0", "-fno-omit-frame-pointer"],
        "fp_o2": ["-O2", "-fno-omit-frame-pointer"],
        "nofp_o2": ["-O2", "-fomit-frame-pointer"],
    }
    progs = {}
    for name, flags in builds.items():
        exe = out / f"split_{name}"
        subprocess.run([cc, "-g", *flags, str(SRC / "split.c"), "-o", str(exe), "-ldl",
                        "-lpthread"], check=True)
        progs[name] = exe
    lib = out / "libdso.so"
    subprocess.run([cc, "-g", "-O1", "-fPIC", "-shared", str(SRC / "dso.c"), "-o", str(lib)],
                   check=True)
    progs["dso"] = lib
    return progs


def sample(runner, *args, env=None):
    return runner.run([STRATA, "sample", *args], env=env)


def through(profile: dict, label: str, thread: int | None = None) -> int:
    """Samples of the paths through `label`."""
    return sum(v for p, v in tree(profile, thread).items() if label in p)


def within(f: int, g: int, signals: int) -> bool:
    """f's share is 70 % within three standard deviations of a share measured by
    `signals` independent samples (each signal's periods land together), and a
    little for the rounding of periods."""
    share = f / (f + g)
    return abs(share - 0.70) <= 3 * (0.21 / signals) ** 0.5 + 0.005


@pytest.mark.parametrize("build", ["fp_o0", "fp_o2", "nofp_o2"])
def test_known_split(runner, programs, build):
    """f 70 %, g 30 %: within 2 points with 4000 samples of the wall clock at 2 kHz
    (libunwind walks the program built without frame pointers; frame pointers the
    others)."""
    res = sample(runner, "-f", "2000", "--sample-clock", "wall", "--", programs[build], "split",
                 "2")
    assert res.returncode == 3 and res.stdout == "done\n", res.describe()
    if build == "nofp_o2" and "walked by frame pointers" in res.stderr:
        pytest.skip("libunwind is not installed (Debian libunwind8): code built without frame "
                    "pointers cannot be walked")
    prof = load_profile(runner.results())
    f, g = through(prof, "f"), through(prof, "g")
    st = prof["stack_sampling"]
    assert f + g > 3000 and st["samples"] > 3000, (f, g, st)
    # within 2 points on a quiet machine (3 standard deviations of 4000 samples are
    # 2.2): 3 leaves room for a machine that runs other work meanwhile
    assert abs(f / (f + g) - 0.70) <= 0.03 and within(f, g, st["samples"]), (f, g, st)
    # stacks read from the program's entry down: main -> (split, inlined at -O2) ->
    # f -> spin
    def calls_down(p):
        return "main" in p and "f" in p and p.index("main") < p.index("f") and \
            p[p.index("f") + 1:p.index("f") + 2] == ("spin",)
    assert any(calls_down(p) for p in tree(prof)), list(tree(prof))[:10]
    assert st["clock"] == "wall" and st["frequency"] == 2000 and st["threads"] == 1
    assert prof["components"] == []
    assert "STACK SAMPLES TAKEN" in res.stderr and "[strata] stack sampling:" in res.stderr
    assert (runner.results() / "samples.txt").is_file()


def test_known_split_cpu_clock(runner, programs):
    """The same on the CPU clock at 1 kHz: the kernel fires CPU timers at its tick
    (250 Hz here), each signal standing for the periods since the last, so every
    period is counted and the split holds within what 375 signals can tell."""
    res = sample(runner, "-f", "1000", programs["fp_o2"], "split", "1.5")
    assert res.returncode == 3, res.describe()
    prof = load_profile(runner.results())
    f, g = through(prof, "f"), through(prof, "g")
    st = prof["stack_sampling"]
    assert f + g > 1200 and within(f, g, st["samples"]), (f, g, st)
    assert st["clock"] == "cpu" and 900 <= st["period_rate_min"] <= 1010, st


def test_frame_pointers_forced(runner, programs):
    """STRATA_SAMPLING_UNWIND=fp on a program with frame pointers: the same split,
    no libunwind."""
    res = sample(runner, "-f", "2000", "--sample-clock", "wall", programs["fp_o2"], "split",
                 "1.5", env={"STRATA_SAMPLING_UNWIND": "fp"})
    assert res.returncode == 3, res.describe()
    prof = load_profile(runner.results())
    f, g = through(prof, "f"), through(prof, "g")
    assert f + g > 2000 and within(f, g, prof["stack_sampling"]["samples"]), (f, g)


def test_threads_before_and_after(runner, programs):
    """A thread started at once and one started later (ending with pthread_exit)
    are both sampled, under their own names, from their start routines."""
    res = sample(runner, "-f", "500", programs["fp_o2"], "threads")
    assert res.returncode == 0 and res.stdout == "threads\n", res.describe()
    prof = load_profile(runner.results())
    names = {th["name"]: th["index"] for th in prof["threads"]}
    assert "early" in names and "late" in names, names
    for name, fn in (("early", "early_worker"), ("late", "late_worker")):
        n = through(prof, fn, names[name])
        assert n > 100, (name, n, tree(prof, names[name]))
    assert prof["stack_sampling"]["threads"] == 3
    # strata's own thread trampoline is not on the stacks
    assert not any("trampoline" in lab for p in tree(prof) for lab in p)


def test_thread_blocking_the_signal(runner, programs):
    """A thread that blocks every signal is not sampled, and the run says so."""
    res = sample(runner, "-f", "500", programs["fp_o2"], "deaf")
    assert res.returncode == 0 and res.stdout == "deaf\n", res.describe()
    assert "blocks signal" in res.stderr, res.stderr


def test_program_keeps_its_sigprof(runner, programs):
    res = sample(runner, programs["fp_o2"], "sigprof")
    assert res.returncode == 0 and res.stdout == "sigprof ok\n", res.describe()


def test_program_takes_the_signal(runner, programs):
    """A program that installs a handler on strata's signal keeps it: strata moves to
    another at its maintenance thread's next tick (within 100 ms) and says so; after
    that the program's handler sees only its own signals, and sampling goes on."""
    res = sample(runner, "-f", "1000", programs["fp_o2"], "takesig")
    assert res.returncode == 0 and res.stdout == "takesig ok\n", res.describe()
    assert "stack sampling moved to signal" in res.stderr, res.stderr
    prof = load_profile(runner.results())
    assert prof["stack_sampling"]["samples"] > 80, prof["stack_sampling"]


def test_waits_under_the_wall_clock(runner, programs):
    """nanosleep, poll, select, a socket timeout and usleep under the wall clock:
    no EINTR, and the waiting time is sampled where the program waited."""
    res = sample(runner, "-f", "1000", "--sample-clock", "wall", programs["fp_o2"], "waits")
    assert res.returncode == 0 and res.stdout == "eintr 0\n", res.describe()
    prof = load_profile(runner.results())
    for call in ("nanosleep", "poll", "select", "recv"):
        assert through(prof, call) >= 60, (call, tree(prof))
    assert prof["stack_sampling"]["clock"] == "wall"


def test_fork(runner, programs):
    """The child runs unsampled and exits as it would; the parent's profile is
    written once."""
    res = sample(runner, "-f", "500", programs["fp_o2"], "fork")
    assert res.returncode == 0 and res.stdout == "child 7\n", res.describe()
    assert res.stderr.count("[strata] results in") == 1, res.stderr
    assert through(load_profile(runner.results()), "spin") > 20


def test_exec(runner, programs):
    """An exec of the process: the image it becomes is profiled, into the same
    folder, and its exit status is the run's."""
    res = sample(runner, "-f", "1000", programs["fp_o2"], "exec")
    assert res.returncode == 5 and res.stdout == "after exec\n", res.describe()
    prof = load_profile(runner.results())
    assert through(prof, "f") > 80 and through(prof, "g") > 30
    assert not (runner.results() / "incomplete.txt").exists()


def test_dlopen_dlclose(runner, programs):
    """Functions of a library unloaded before the end are still named."""
    res = sample(runner, "-f", "1000", programs["fp_o2"], "dlopen", programs["dso"])
    assert res.returncode == 0 and res.stdout == "dlopen\n", res.describe()
    prof = load_profile(runner.results())
    assert through(prof, "dso_inner") > 150, tree(prof)
    assert any(p[-2:] == ("dso_work", "dso_inner") for p in tree(prof)), list(tree(prof))


def test_abort_keeps_status_and_says_why(runner, programs):
    """A program that dies of a signal dies of it under strata too; the folder holds
    the note that says why there is no profile."""
    res = sample(runner, programs["fp_o2"], "abort")
    assert res.returncode == -6, res.describe()
    assert (runner.results() / "incomplete.txt").is_file()


def _default_stop_signals():
    # a shell's background job starts with SIGINT ignored, and that is inherited:
    # the program under test gets them at their default action, as from a terminal
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start(runner, *args):
    """strata sample ARGS, running, with SIGINT and SIGTERM at their default action."""
    return subprocess.Popen([str(STRATA), "sample", *map(str, args)], cwd=runner.dir,
                            env=runner.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_default_stop_signals)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stop_signal_writes_results(runner, programs, sig):
    """SIGTERM (a batch system's time limit) or SIGINT (Ctrl-C) at their default
    action: the results are written, then the program dies by the signal."""
    p = start(runner, "-f", "500", programs["fp_o2"], "forever")
    try:
        assert p.stdout.readline() == b"running\n"
        time.sleep(0.5)
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == -sig, (p.returncode, err.decode())
    prof = load_profile(runner.results())
    assert through(prof, "spin") > 50, err.decode()
    assert not (runner.results() / "incomplete.txt").exists()


def test_program_with_its_own_sigterm_handler(runner, programs):
    p = start(runner, programs["fp_o2"], "ownterm")
    try:
        assert p.stdout.readline() == b"running\n"
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 4 and out == b"clean exit\n", (p.returncode, out, err.decode())
    assert (runner.results() / "profile.json").is_file()


def test_report_formats(runner, programs):
    """A native profile renders in the report formats (folded stacks here)."""
    res = sample(runner, "-f", "500", programs["fp_o2"], "split", "0.5")
    assert res.returncode == 3, res.describe()
    out = runner.run([STRATA, "report", "--format", "folded", "-o", "folded.txt",
                      runner.results()])
    assert out.returncode == 0, out.describe()
    text = (runner.dir / "folded.txt").read_text()
    assert ";main;split;f;spin " in text, text[:2000]


@pytest.mark.parametrize("args, message", [
    ([], "no program to sample"),
    (["--", "no-such-program-xyz"], "program 'no-such-program-xyz' not found in PATH"),
    (["./missing"], "cannot run './missing'"),
    (["-f", "0", "true"], "STRATA_SAMPLING_FREQ"),
    (["--builtin", "true"], "unknown option '--builtin'"),
    (["--sample-clock", "sometimes", "true"], "STRATA_SAMPLING_CLOCK"),
    (["static-prog"], "'static-prog' is statically linked"),
])
def test_mistakes(runner, args, message):
    if args == ["static-prog"]:
        # a statically linked program never reads LD_PRELOAD: refused before it runs
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            pytest.skip("no C compiler")
        (runner.dir / "bin").mkdir()
        (runner.dir / "s.c").write_text("int main(void) { return 0; }\n")
        built = subprocess.run([cc, "-static", str(runner.dir / "s.c"), "-o",
                                str(runner.dir / "bin" / "static-prog")], capture_output=True)
        if built.returncode != 0:
            pytest.skip(f"cannot link statically here: {built.stderr.decode()[-200:]}")
        import os
        res = runner.run([STRATA, "sample", *args],
                         env={"PATH": f"{runner.dir / 'bin'}:{os.environ['PATH']}"})
        assert res.returncode == 2 and message in res.stderr, res.describe()
        return
    res = sample(runner, *args)
    assert res.returncode == 2 and res.stdout == "", res.describe()
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("strata: error: ") and message in lines[0], \
        res.stderr
    assert not list(runner.dir.glob("strata-*-output")), "a folder was left behind"


def test_help(runner):
    res = sample(runner, "--help")
    assert res.returncode == 0 and res.stdout.startswith("usage: strata sample "), res.describe()
    for flag in ("-f HZ", "--sample-clock", "-o DIR"):
        assert flag in res.stdout
    assert "--builtin" not in res.stdout


# --------------------------------------------------------------------------- Python + C

MIXED = """
import ctypes, sys, threading
lib = ctypes.CDLL(sys.argv[1])
lib.dso_work.argtypes = [ctypes.c_double]

def in_c():
    lib.dso_work(0.4)

def in_python():
    # 0.1 s of CPU whatever the interpreter's speed (1.5 million additions took 25 ms
    # on a fast 3.14: about 20 periods at 1 kHz, the threshold below)
    import time
    end = time.process_time() + 0.1
    s = 0
    while time.process_time() < end:
        for i in range(20_000):
            s += i
    return s

def main():
    in_c()
    in_python()

t = threading.Thread(target=in_c, name="worker")
t.start()
main()
t.join()
print("mixed")
"""


def mixed_paths(prof: dict, thread: int) -> list:
    return [p for p in tree(prof, thread) if "dso_inner" in p]


@pytest.mark.parametrize("how", ["python", "sample"])
def test_mixed_stacks(runner, programs, how):
    """strata python --sample --native (and strata sample -- python, which runs it): one
    stack reads from the Python caller through the C library, in every thread; the
    interpreter's eval loop stands replaced by the Python frames it ran."""
    runner.write("mixed.py", MIXED)
    if how == "python":
        res = runner.strata("--sample", "--native", "-f", "1000", "mixed.py", programs["dso"])
    else:
        res = sample(runner, "-f", "1000", "--", PYTHON, "mixed.py", programs["dso"])
    assert res.returncode == 0 and res.stdout == "mixed\n", res.describe()
    if "walked by frame pointers" in res.stderr:
        pytest.skip("libunwind is not installed (Debian libunwind8): the interpreter, built "
                    "without frame pointers, cannot be walked")
    prof = load_profile(runner.results())
    names = {th["name"]: th["index"] for th in prof["threads"]}
    for thread, caller in ((names["MainThread"], "main"), (names["worker"], "in_c")):
        paths = mixed_paths(prof, thread)
        assert paths, (thread, list(tree(prof, thread))[:20])
        for p in paths:
            # Python frames first (outermost), then C: never an eval loop frame
            assert caller in p and p.index(caller) < p.index("dso_work") < p.index("dso_inner"), p
            assert "_PyEval_EvalFrameDefault" not in p, p
        assert sum(tree(prof, thread)[p] for p in paths) > 250, paths
    # the pure Python part stays Python
    assert through(prof, "in_python") > 20
    assert prof["stack_sampling"]["threads"] == 2


def test_native_needs_sample(runner):
    runner.write("x.py", "print(1)\n")
    res = runner.strata("--native", "x.py")
    assert res.returncode == 2 and res.stdout == "", res.describe()
    assert res.stderr == ("strata: error: --native adds C frames to the stack samples, but no "
                          "stack is sampled: add --sample\n"), res.stderr


def test_trace_holds_the_samples(runner, programs):
    """--trace: trace.pftrace has every sample on its thread, its stack root first
    (the native functions, inlined ones included)."""
    from test_trace import decode, need_schema
    need_schema()
    res = sample(runner, "--trace", "-f", "1000", programs["fp_o2"], "split", "0.5")
    assert res.returncode == 3, res.describe()
    prof = load_profile(runner.results())
    tr = decode(runner.results() / "trace.pftrace")
    samples = [s for ss in tr.stack_samples.values() for s in ss]
    assert len(samples) == prof["stack_sampling"]["samples"], (len(samples), prof["stack_sampling"])
    stacks = {stack for _, stack, _ in samples}
    assert any(st[-3:] == ("split", "f", "spin") for st in stacks), sorted(stacks)[:5]
    assert sum(w for _, _, w in samples) == prof["stack_sampling"]["periods"] * 1_000_000


def test_long_run_keeps_every_sample(runner, programs):
    """Samples are added up as the run goes: 20000 samples (1.6 MB of events) fit a
    1 MB buffer with none lost (they would not if they were all kept to the end)."""
    res = sample(runner, "-f", "10000", "--sample-clock", "wall", programs["fp_o2"], "split", "2",
                 env={"STRATA_TRACE_BUFFER_SIZE": "1MiB", "STRATA_SAMPLING_UNWIND": "fp"})
    assert res.returncode == 3, res.describe()
    st = load_profile(runner.results())["stack_sampling"]
    assert st["samples"] > 15000 and st["lost"] == 0, st
    total = sum(tree(load_profile(runner.results())).values())
    assert total + st["left_out"] == st["periods"] - st["delayed"], (total, st)


def test_mpi_ranks_merge_by_samples(runner, programs):
    """mpirun -n 2 strata sample -- program: a profile per rank in one folder, and
    strata merge balances the ranks' work in samples."""
    mpirun = shutil.which("mpirun")
    if not mpirun:
        pytest.skip("mpirun is not installed (Debian's openmpi-bin)")
    env = {"STRATA_PRINT_TABLES": "OFF", "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"}
    res = runner.run([mpirun, "-n", "2", "--oversubscribe", STRATA, "sample", "-f", "500", "--",
                      programs["fp_o2"], "split", "0.4"], env=env, timeout=120)
    assert res.returncode == 3, res.describe()
    found = sorted(runner.dir.glob("strata-*-output/*/profile-*.json"))
    assert [p.name for p in found] == ["profile-0.json", "profile-1.json"], found
    out = runner.run([STRATA, "merge", "-o", "merged", *sorted({p.parent for p in found})])
    assert out.returncode == 0, out.describe()
    lb = (runner.dir / "merged" / "load_balance.txt").read_text()
    assert "2 of 2 ranks did any work" in lb and "(SAMPLES)" in lb, lb
    assert "spin [split.c]" in lb, lb
    merged = load_profile(runner.dir / "merged")
    assert merged["components"] == [] and merged["stack_sampling"]["samples"] > 100
    assert not (runner.dir / "merged" / "trip_count.txt").exists()
