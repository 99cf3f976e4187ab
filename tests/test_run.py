"""`strata run -- program`: the call tree of a program built with
-finstrument-functions and its <strata.h> regions (issue 13).

Known call counts on two threads, the regions in the tree, the worker's own name,
the filters, C++'s scoped region, the same program run without strata, and
mistakes as one line and exit 2.
"""

from __future__ import annotations

import shutil
from pathlib import Path
import subprocess

import pytest

from conftest import REPO, STRATA, TESTS, c_compiler, load_profile

SRC = TESTS / "data" / "native"


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    cc = c_compiler()
    out = tmp_path_factory.mktemp("run")
    progs = {}
    for name in ("calls", "locks", "api", "late"):
        progs[name] = out / name
        subprocess.run([cc, "-O1", "-g", "-finstrument-functions", f"-I{REPO / 'include'}",
                        str(SRC / f"{name}.c"), "-o", str(progs[name]), "-lpthread"], check=True)
    progs["split"] = out / "split"
    subprocess.run([cc, "-O1", "-g", "-finstrument-functions", str(SRC / "split.c"), "-o",
                    str(progs["split"]), "-ldl", "-lpthread"], check=True)
    progs["dso"] = out / "libdso.so"
    subprocess.run([cc, "-O1", "-g", "-fPIC", "-shared", "-finstrument-functions",
                    str(SRC / "dso.c"), "-o", str(progs["dso"])], check=True)
    progs["kokkos"] = out / "kokkos_harness"
    subprocess.run([cc, "-O1", "-g", str(SRC / "kokkos_harness.c"), "-o", str(progs["kokkos"]),
                    "-ldl"], check=True)
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx:
        progs["region"] = out / "region"
        subprocess.run([cxx, "-O1", "-g", f"-I{REPO / 'include'}", str(SRC / "region.cc"), "-o",
                        str(progs["region"])], check=True)
    return progs


def run(runner, *args, env=None):
    return runner.run([STRATA, "run", *args], env=env)


def counts(prof: dict, thread: int) -> dict:
    """{label: calls} over a thread's nodes."""
    out = {}
    for th in prof["threads"]:
        if th["index"] == thread:
            for n in th["nodes"]:
                out[n["label"]] = out.get(n["label"], 0) + n["count"]
    return out


def paths(prof: dict, thread: int) -> set:
    out, by_id = set(), {}
    for th in prof["threads"]:
        if th["index"] == thread:
            for n in th["nodes"]:
                by_id[n["id"]] = (by_id[n["parent"]] if n["parent"] >= 0 else ()) + (n["label"],)
                out.add(by_id[n["id"]])
    return out


def test_calls_and_regions(runner, built):
    res = run(runner, "--", built["calls"])
    assert res.returncode == 0 and res.stdout == "6765 610\n", res.describe()
    prof = load_profile(runner.results())
    names = {th["name"]: th["index"] for th in prof["threads"]}
    assert "worker" in names, names
    main = next(i for n, i in names.items() if n != "worker")
    assert counts(prof, main)["fib"] == 21891 and counts(prof, main)["compute"] == 1
    assert counts(prof, names["worker"])["fib"] == 1973
    assert ("main", "compute", "fib", "fib") in paths(prof, main)
    assert ("worker", "worker-region", "fib") in paths(prof, names["worker"])
    assert "wall_clock" in prof["threads"][0]["nodes"][0]["metrics"]
    assert "REAL-CLOCK TIMER" in res.stderr and "[strata] results in" in res.stderr


def wall(prof: dict, thread: int, path: tuple) -> float:
    """Seconds of wall clock of the node at `path` (labels from the root)."""
    for th in prof["threads"]:
        if th["index"] != thread:
            continue
        by_id = {}
        for n in th["nodes"]:
            by_id[n["id"]] = (by_id[n["parent"]] if n["parent"] >= 0 else ()) + (n["label"],)
            if by_id[n["id"]] == path:
                return n["metrics"]["wall_clock"]["sum"] * 1e-9
    return -1.0


@pytest.mark.parametrize("cc, flags", [
    ("gcc", ["-O0", "-fno-omit-frame-pointer", "-finstrument-functions"]),
    ("gcc", ["-O2", "-fomit-frame-pointer", "-finstrument-functions"]),
    ("clang", ["-O0", "-finstrument-functions"]),
    ("clang", ["-O2", "-fomit-frame-pointer", "-finstrument-functions"]),
    ("clang", ["-O2", "-finstrument-functions-after-inlining"]),
])
def test_compilers_and_levels(runner, tmp_path, cc, flags):
    """Every function's calls, whatever the compiler, the level and the frame
    pointers: GCC and Clang's -finstrument-functions count inlined calls too (fib(20)
    is 21891 calls at -O0 and -O2); Clang's -finstrument-functions-after-inlining
    counts the calls left after inlining (fewer), in the same tree."""
    path = shutil.which(cc)
    if not path:
        pytest.skip(f"{cc} is not installed")
    exe = tmp_path / "calls"
    subprocess.run([path, *flags, "-g", f"-I{REPO / 'include'}", str(SRC / "calls.c"), "-o",
                    str(exe), "-lpthread"], check=True)
    res = run(runner, "-o", runner.dir / "res", "--", exe)
    assert res.returncode == 0 and res.stdout == "6765 610\n", res.describe()
    prof = load_profile(runner.dir / "res")
    names = {th["name"]: th["index"] for th in prof["threads"]}
    main = next(i for n, i in names.items() if n != "worker")
    fib_main, fib_worker = counts(prof, main)["fib"], counts(prof, names["worker"])["fib"]
    if "-finstrument-functions-after-inlining" in flags:
        assert 0 < fib_main < 21891 and 0 < fib_worker < 1973, (fib_main, fib_worker)
    else:
        assert (fib_main, fib_worker) == (21891, 1973)
    assert ("main", "compute", "fib") in paths(prof, main)
    assert ("worker", "worker-region", "fib") in paths(prof, names["worker"])


@pytest.mark.parametrize("cxx", ["g++", "clang++"])
def test_cxx_every_function(runner, tmp_path, cxx):
    """A C++ program at -O2: its methods by their demangled names, known counts,
    and the hot function (the stencil's row) with the most time of its own."""
    path = shutil.which(cxx)
    if not path:
        pytest.skip(f"{cxx} is not installed")
    exe = tmp_path / "stencil"
    subprocess.run([path, "-O2", "-g", "-finstrument-functions", str(SRC / "stencil.cc"), "-o",
                    str(exe)], check=True)
    res = run(runner, "-o", runner.dir / "res", "--", exe)
    assert res.returncode == 0 and res.stdout == "1\n", res.describe()
    prof = load_profile(runner.dir / "res")
    c = counts(prof, 0)
    assert c["sim::Grid::step()"] == 20 and c["sim::Grid::row(int)"] == 4000, c
    assert c["sim::Grid::Grid(int)"] == 1 and c["sim::Grid::~Grid()"] == 1, c
    own = {}
    for n in prof["threads"][0]["nodes"]:
        own[n["label"]] = own.get(n["label"], 0) + n["metrics"]["wall_clock"]["self"]
    assert max(own, key=own.get) == "sim::Grid::row(int)", own
    assert ("main", "sim::Grid::step()", "sim::Grid::row(int)") in paths(prof, 0)


def test_stop_start_marks_counters(runner, built):
    """strata_stop()/strata_start(): nothing entered in between (a region open
    across them ends as it would, one pushed while stopped closes nothing on its
    pop); strata_counter values are a counter track and strata_mark an instant on
    the timeline; without --trace the run says where they would be."""
    from test_trace import decode

    res = run(runner, "--trace", "-o", runner.dir / "res", "--", built["api"])
    assert res.returncode == 0 and res.stdout == "done\n", res.describe()
    prof = load_profile(runner.dir / "res")
    c = counts(prof, 0)
    assert "setup" not in c and "teardown" not in c, c
    assert c["solve"] == 5 and c["outer"] == 1, c
    assert c["fib"] == 5 * 1973 + 15, c  # fib(10) and fib(12) ran stopped
    ps = paths(prof, 0)
    assert ("main", "phase", "solve", "fib") in ps and ("main", "outer") in ps
    assert not [p for p in ps if p[:2] == ("main", "outer") and len(p) > 2], ps
    tr = decode(runner.dir / "res" / "trace.pftrace")
    assert [v for _, v in tr.samples["residual"]] == [1.0, 0.5, 0.25, 0.125, 0.0625]
    marks = [m for ms in tr.instants.values() for m in ms]
    assert [m[0] for m in marks] == ["converged"], marks
    # the mark comes after the last counter value and before the end of main
    assert tr.samples["residual"][-1][0] <= marks[0][1]
    res = run(runner, "-o", runner.dir / "res2", "--", built["api"])
    assert res.returncode == 0, res.describe()
    assert "marks: 1, counter values: 5" in res.stderr and "--trace" in res.stderr
    # without strata: the header's calls do nothing
    plain = runner.run([built["api"]])
    assert plain.returncode == 0 and plain.stdout == "done\n", plain.describe()


def test_separate_debug_file(runner, tmp_path):
    """A program whose DWARF is in a separate file (objcopy --only-keep-debug, then
    --add-gnu-debuglink, as distributions ship -dbgsym files) is named with its
    source file, found locally (strata never asks a debuginfod server)."""
    objcopy = shutil.which("objcopy")
    if not objcopy:
        pytest.skip("objcopy (binutils) is not installed")
    exe = tmp_path / "calls"
    subprocess.run([c_compiler(), "-O1", "-g", "-finstrument-functions",
                    f"-I{REPO / 'include'}", str(SRC / "calls.c"), "-o", str(exe), "-lpthread"],
                   check=True)
    debug = tmp_path / "calls.debug"
    for args in (["--only-keep-debug", str(exe), str(debug)], ["--strip-debug", str(exe)],
                 [f"--add-gnu-debuglink={debug}", str(exe)]):
        subprocess.run([objcopy, *args], check=True, cwd=tmp_path)
    res = run(runner, "-o", runner.dir / "res", "--", exe)
    assert res.returncode == 0, res.describe()
    prof = load_profile(runner.dir / "res")
    fib = next(f for f in prof["functions"] if f.get("qualname", f.get("name")) == "fib"
               or f.get("name") == "fib")
    assert fib["file"].endswith("calls.c"), fib


def test_threads_made_before_the_start(runner, built):
    """A thread made by a constructor before main and one made while recording is
    stopped: each records from strata_start() on, in a tree of its own (fib(12)
    once each: 465 calls), and nothing of what ran stopped."""
    res = run(runner, "-o", runner.dir / "res", "--", built["late"])
    assert res.returncode == 0 and res.stdout == "144 144\n", res.describe()
    prof = load_profile(runner.dir / "res")
    names = {th["name"]: th["index"] for th in prof["threads"]}
    assert {"early", "late"} <= set(names), names
    for name in ("early", "late"):
        assert counts(prof, names[name]).get("fib") == 465, (name, counts(prof, names[name]))
    main = [i for n, i in names.items() if n not in ("early", "late")]
    assert all(counts(prof, i).get("fib", 0) == 0 for i in main), prof["threads"]


def test_lock_waits(runner, built):
    """A mutex another thread holds: the wait is a call of its own under the
    function that waited, about 180 ms; 100000 uncontended locks add no node; a
    condition variable's wait is measured too."""
    res = run(runner, built["locks"])
    assert res.returncode == 0 and res.stdout == "locks\n", res.describe()
    prof = load_profile(runner.results())
    main = next(th["index"] for th in prof["threads"] if th["nodes"] and
                th["nodes"][0]["label"] == "main")
    waited = wall(prof, main, ("main", "waiter_work", "pthread_mutex_lock (contended)"))
    assert 0.12 <= waited <= 0.5, (waited, paths(prof, main))
    assert not [p for p in paths(prof, main) if "quiet_locks" in p and len(p) > 2], paths(prof, main)
    assert wall(prof, main, ("main", "wait_ready", "pthread_cond_wait")) >= 0.05


def test_kokkos_tools(runner, built):
    """Kokkos finds its tools through KOKKOS_TOOLS_LIBS, which strata run points at
    its library: kernels, fences, deep copies and regions are calls of their own,
    allocations are charged to the call that made them (a harness calls the ABI as
    Kokkos does)."""
    res = run(runner, built["kokkos"])
    assert res.returncode == 0 and res.stdout == "kokkos\n", res.describe()
    prof = load_profile(runner.results())
    nodes = {n["label"]: n for n in prof["threads"][0]["nodes"]}
    assert nodes["parallel_for axpy"]["count"] == 10 and nodes["parallel_reduce dot"]["count"] == 1
    assert {"fence sync", "deep_copy x -> y", "setup"} <= set(nodes), set(nodes)
    assert ("setup", "parallel_for axpy") in paths(prof, 0)
    assert nodes["setup"]["metrics"]["alloc_bytes"] == 8000000
    assert 0.04 <= wall(prof, 0, ("setup", "parallel_for axpy")) <= 0.5
    # a tools library the user names is left alone (here one that does not exist)
    mine = runner.run([STRATA, "run", built["kokkos"]],
                      env={"KOKKOS_TOOLS_LIBS": "/nonexistent/libtool.so"})
    assert mine.returncode == 1 and "/nonexistent/libtool.so" in mine.stderr, mine.describe()


def clang_openmp(tmp_path, source: str, *flags) -> Path:
    """tests/data/native/<source> built with clang -fopenmp (LLVM's libomp: OMPT)."""
    clang = shutil.which("clang")
    if not clang:
        pytest.skip("clang is not installed (Debian's clang, libomp-dev)")
    exe = tmp_path / Path(source).stem
    built = subprocess.run([clang, "-O1", "-g", "-fopenmp", *flags, str(SRC / source), "-o",
                            str(exe)], capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"clang -fopenmp does not build here (Debian's libomp-dev): {built.stderr[-200:]}")
    return exe


def test_real_kokkos(runner, tmp_path):
    """A program of a real Kokkos (Debian's Trilinos has Kokkos 3, which reads its tool
    from KOKKOS_PROFILE_LIBRARY, where Kokkos 4 reads KOKKOS_TOOLS_LIBS): its named
    kernels under the region that ran them, the views' own kernels, the deep copy;
    the output unchanged."""
    header = Path("/usr/include/trilinos/Kokkos_Core.hpp")
    gxx = shutil.which("g++")
    if not header.exists() or not gxx:
        pytest.skip("no Kokkos here (Debian's libtrilinos-kokkos-dev)")
    exe = tmp_path / "kokkos_axpy"
    subprocess.run([gxx, "-O1", "-g", "-fopenmp", f"-I{header.parent}",
                    str(SRC / "kokkos_axpy.cc"), "-o", str(exe), "-ltrilinos_kokkoscore"],
                   check=True)
    plain = runner.run([exe], env={"OMP_NUM_THREADS": "2"})
    res = run(runner, exe, env={"OMP_NUM_THREADS": "2"})
    assert (res.returncode, res.stdout) == (plain.returncode, plain.stdout) == (0, "kokkos 3\n"), \
        res.describe()
    prof = load_profile(runner.results())
    calls = {}
    for th in prof["threads"]:
        by_id = {}
        for n in th["nodes"]:
            p = (by_id[n["parent"]] if n["parent"] >= 0 else ()) + (n["label"],)
            by_id[n["id"]] = p
            calls[p] = calls.get(p, 0) + n["count"]
    assert calls[("solve", "parallel_for axpy")] == 3, calls
    assert calls[("solve", "parallel_reduce norm")] == 3, calls
    assert ("parallel_for Kokkos::View::initialization [x]",) in calls, calls
    assert ("deep_copy y -> y",) in calls, calls


def test_openmp_with_ompt(runner, tmp_path):
    """LLVM's libomp finds strata as its OMPT tool: every thread of the team has its
    share of the parallel region, its loop and its barrier waits."""
    exe = clang_openmp(tmp_path, "omp.c")
    res = run(runner, exe)
    assert res.returncode == 0 and res.stdout == "omp\n", res.describe()
    prof = load_profile(runner.results())
    teams = [th for th in prof["threads"] if any(n["label"] == "omp parallel" for n in th["nodes"])]
    assert len(teams) == 4, [[n["label"] for n in th["nodes"]] for th in prof["threads"]]
    for th in teams:
        ps = paths(prof, th["index"])
        assert ("omp parallel", "omp loop") in ps, ps
        # each of the 5 regions once a thread, side by side: a worker's region ends
        # inside its closing barrier, which must not hold the next region
        regions = [n for n in th["nodes"] if n["label"] == "omp parallel"]
        assert sum(n["count"] for n in regions) == 5, ps
        assert not [p for p in ps if p[-1] == "omp parallel" and
                    any(x.startswith("omp ") for x in p[:-1])], ps
    assert "libgomp" not in res.stderr


def test_openmp_tasks(runner, tmp_path):
    """Explicit tasks: each run is an "omp task" call under where its thread ran it
    (a barrier, a taskwait), its body's functions under it; 196 tasks in all (20
    that call work, 176 of fib(10)), a taskwait is "omp taskwait", and every task
    of fib nests under a taskwait of the fib that made it."""
    exe = clang_openmp(tmp_path, "omp_tasks.c", "-finstrument-functions")
    res = run(runner, exe)
    assert res.returncode == 0 and res.stdout == "fib 55 tasks\n", res.describe()
    prof = load_profile(runner.results())
    tasks = work_tasks = 0
    for th in prof["threads"]:
        by_id = {}
        for n in th["nodes"]:
            p = (by_id[n["parent"]] if n["parent"] >= 0 else ()) + (n["label"],)
            by_id[n["id"]] = p
            if p[-1] == "omp task":
                tasks += n["count"]
                assert p[-2] in ("omp barrier", "omp taskwait"), p
                assert p[-2] == "omp barrier" or p[-3] == "fib", p
            if p[-1] == "work":
                assert "omp task" in p, p
                work_tasks += n["count"]
    assert tasks == 196 and work_tasks == 20, (tasks, work_tasks)


def test_openmp_libgomp_says_why(runner, tmp_path):
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("no gcc")
    exe = tmp_path / "omp_gomp"
    subprocess.run([gcc, "-O1", "-g", "-fopenmp", str(SRC / "omp.c"), "-o", str(exe)], check=True)
    res = run(runner, exe)
    assert res.returncode == 0 and res.stdout == "omp\n", res.describe()
    assert "GCC's libgomp, which has no tools interface (OMPT)" in res.stderr, res.stderr


def test_exit_status_and_filters(runner, built):
    """-E leaves fib out (decided once per function): its callers' time holds it."""
    res = run(runner, "-E", "^fib$", "--", built["calls"], "fail")
    assert res.returncode == 7 and res.stdout == "6765 610\n", res.describe()
    prof = load_profile(runner.results())
    labels = {n["label"] for th in prof["threads"] for n in th["nodes"]}
    assert "fib" not in labels and {"main", "compute", "worker-region"} <= labels, labels


def test_without_strata(runner, built):
    """A program built with <strata.h> and -finstrument-functions runs as before
    without strata (no library to link, no symbol missing)."""
    res = runner.run([built["calls"]])
    assert res.returncode == 0 and res.stdout == "6765 610\n", res.describe()


def test_cxx_scoped_region(runner, built):
    if "region" not in built:
        pytest.skip("no C++ compiler")
    res = run(runner, built["region"])
    assert res.returncode == 0, res.describe()
    prof = load_profile(runner.results())
    assert counts(prof, 0).get("scoped") == 1, counts(prof, 0)


def test_with_stack_samples(runner, built):
    """--sample too: the calls timed and the stacks sampled in one profile."""
    res = run(runner, "--sample", "-f", "1000", "--", built["calls"])
    assert res.returncode == 0, res.describe()
    prof = load_profile(runner.results())
    assert prof["stack_sampling"]["threads"] >= 1
    assert "STACK SAMPLES TAKEN" in res.stderr


@pytest.mark.parametrize("args, message", [
    ([], "no program to profile"),
    (["--builtin", "true"], "unknown option '--builtin' (see 'strata run --help'"),
    (["--", "no-such-program-xyz"], "program 'no-such-program-xyz' not found in PATH"),
])
def test_mistakes(runner, args, message):
    res = run(runner, *args)
    check_mistake(res, runner, message)


def check_mistake(res, runner, message):
    assert res.returncode == 2 and res.stdout == "", res.describe()
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr
    assert not list(runner.dir.glob("strata-*-output"))


def test_files_that_are_not_programs(runner, built):
    """A file that is not executable, and a shared library (executable bit and all)
    given as the program: one line each, exit 2, nothing run."""
    data = runner.write("data.txt", "not a program\n")
    check_mistake(run(runner, "--", data), runner, "not an executable file")
    res = run(runner, "--", built["dso"])
    check_mistake(res, runner, "is a shared library, not a program")


def test_fork_exec_dlopen(runner, built):
    """fork: the child runs untimed and writes nothing; exec: the new image is timed
    into the same folder; a library's functions keep their names after dlclose."""
    res = run(runner, built["split"], "fork")
    assert res.returncode == 0 and res.stdout == "child 7\n", res.describe()
    assert res.stderr.count("[strata] results in") == 1
    res = run(runner, "-o", "exec", built["split"], "exec")
    assert res.returncode == 5 and res.stdout == "after exec\n", res.describe()
    c = counts(load_profile(runner.dir / "exec"), 0)
    assert c.get("split", 0) == 1 and c.get("f", 0) > 5, c
    res = run(runner, "-o", "dl", built["split"], "dlopen", built["dso"])
    assert res.returncode == 0 and res.stdout == "dlopen\n", res.describe()
    c = counts(load_profile(runner.dir / "dl"), 0)
    assert c.get("dso_work") == 1 and c.get("dso_inner") == 1, c


def test_nothing_to_time_says_so(runner):
    res = run(runner, "--", "true")
    assert res.returncode == 0, res.describe()
    assert "[strata] nothing was timed: true has no function built with -finstrument-functions" \
        in res.stderr, res.stderr


def test_help(runner):
    res = run(runner, "--help")
    assert res.returncode == 0 and res.stdout.startswith("usage: strata run "), res.describe()
    for flag in ("-E FUNC", "--trace", "--sample", "--components"):
        assert flag in res.stdout


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_fortran_module(runner, built, venv_python, tmp_path, opt):
    """`use strata` in Fortran, linked with -lstrata (the stubs): the program runs
    as before without strata, and under strata run its region holds the kernel."""
    fc = shutil.which("gfortran")
    if not fc:
        pytest.skip("gfortran is not installed (Debian's gfortran)")
    pkg = subprocess.run([venv_python, "-c", "import os, strata; print(os.path.dirname("
                          "strata.__file__))"], capture_output=True, text=True).stdout.strip()
    lib = pkg and __import__("pathlib").Path(pkg)
    if not lib or not (lib / "libstrata.so").exists():
        pytest.skip(f"libstrata.so is not installed in {pkg!r}")
    exe = tmp_path / "regions"
    subprocess.run([fc, opt, "-g", "-finstrument-functions", f"-J{tmp_path}",
                    str(lib / "include" / "strata.f90"), str(SRC / "regions.f90"), "-o", str(exe),
                    f"-L{lib}", "-lstrata", f"-Wl,-rpath,{lib}"], check=True)
    plain = runner.run([exe])
    assert plain.returncode == 0 and plain.stdout == "fortran ok\n", plain.describe()
    res = run(runner, exe)
    assert res.returncode == 0 and res.stdout == "fortran ok\n", res.describe()
    prof = load_profile(runner.results())
    c = counts(prof, 0)
    # gfortran's module procedure by its own name, not its linkage name
    # (__kern_MOD_heavy)
    heavy = "heavy"
    assert c.get("fortran-region") == 1 and c.get(heavy) == 3, c
    assert not [k for k in c if "strata_" in k], c  # the module's wrappers are not calls
    assert any(p[-2:] == ("fortran-region", heavy) for p in paths(prof, 0)), paths(prof, 0)
