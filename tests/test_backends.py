"""The collector's two backends: the profile hook (CPython 3.11) and sys.monitoring
(3.12 and later) give the same results; on 3.12+ left-out code stops producing events,
and the sys.monitoring tool id is taken politely.

Tests that make sense on one kind of interpreter only skip on the other, saying why.
Everything else here runs on both, and the rest of the suite (golden files included) is
shared by both backends unchanged.
"""

from __future__ import annotations

import functools
import itertools
import json
import shutil
import subprocess

import pytest

from conftest import PYTHON, read_table, results_dirs

TRIP = {"STRATA_COMPONENTS": "trip_count", "STRATA_PRINT_TABLES": "OFF"}
_RUNS = itertools.count()


@functools.lru_cache(maxsize=None)
def target_version() -> tuple:
    """(major, minor) of the interpreter strata runs programs with."""
    out = subprocess.run([str(PYTHON), "-c", "import sys; print(*sys.version_info[:2])"],
                         capture_output=True, text=True, check=True).stdout.split()
    return tuple(int(x) for x in out)


def monitoring() -> bool:
    """Whether strata runs on the sys.monitoring backend (False when not built: the
    tests then skip, saying so, through the runner fixture)."""
    return PYTHON.exists() and target_version() >= (3, 12)


needs_monitoring = pytest.mark.skipif("not monitoring()",
                                      reason="sys.monitoring exists on CPython 3.12 and later; "
                                             "3.11 uses the profile hook")


def run(runner, *args, script="s.py", env=None, expect_rc=0):
    """strata python ARGS -- SCRIPT with its own results folder; (result, folder)."""
    out = runner.dir / f"results{next(_RUNS)}"
    res = runner.strata(*args, "--", script, env={**TRIP, "STRATA_OUTPUT_PATH": out, **(env or {})})
    assert res.returncode == expect_rc, res.describe()
    return res, out


def shape(table):
    return [(r.thread, r.path, r.count) for r in table.rows]


def test_backend_follows_the_interpreter(runner):
    """3.11 builds the profile-hook backend, 3.12+ the sys.monitoring one."""
    runner.write("s.py", "import strata._strata as s\nprint(s.state()['backend'])\n")
    res, _ = run(runner)
    want = "sys.monitoring" if monitoring() else "profile hook"
    assert res.stdout == want + "\n", res.describe()


# ------------------------------------------------------------- left-out code costs nothing

EXCLUDED = """
import strata._strata as s

def excluded(n):
    if n > 3:
        return 1
    return 2

def excluded_gen():
    yield 1
    yield 2

def kept():
    pass

def main():
    before = s._skipped_events()
    for i in range(2000):
        excluded(i)
        for _ in excluded_gen():
            pass
        kept()
    print(s._skipped_events() - before)

main()
"""


@needs_monitoring
@pytest.mark.parametrize("opts", [["-E", "^excluded", "^main$"], ["-R", "^kept$"]],
                         ids=["exclude", "restrict"])
def test_excluded_code_gets_no_more_events(runner, opts):
    """Left-out code's events are switched off after its first call: strata's callbacks
    see a handful of its events (its first call, each return and yield place once),
    not two per call, while the recorded code is recorded as always."""
    runner.write("s.py", EXCLUDED)
    res, out = run(runner, *opts)
    seen = int(res.stdout)
    assert seen <= 12, f"{seen} events of left-out code for 2000 calls of each:\n{res.describe()}"
    table = read_table(out, "trip_count")
    assert shape(table) == [(0, ("kept",), 2000)], table.text


@needs_monitoring
def test_code_under_noprofile_is_not_switched_off(runner):
    """A @noprofile call leaves out what it calls on its thread only: the same function
    called elsewhere is recorded (its events must stay on)."""
    runner.write("s.py", """
        def leaf():
            pass

        @noprofile
        def quiet():
            for _ in range(50):
                leaf()

        def main():
            quiet()
            for _ in range(3):
                leaf()
            quiet()
            leaf()

        main()
    """)
    _, out = run(runner)
    assert shape(read_table(out, "trip_count")) == [(0, ("main",), 1), (0, ("main", "leaf"), 4)]


def test_settings_changed_by_the_program_apply_to_left_out_code(runner):
    """A function left out (and, on 3.12+, switched off) is recorded once the program
    changes the filters."""
    runner.write("s.py", """
        from strata.profiler import config

        def f():
            pass

        for _ in range(10):
            f()
        config.exclude_functions.remove("^f$")
        for _ in range(3):
            f()
    """)
    _, out = run(runner, "-E", "^f$")
    assert shape(read_table(out, "trip_count")) == [(0, ("f",), 3)]


@pytest.mark.parametrize("opts, want", [
    # left out by a filter (on 3.12+ its events switched off): only g's own calls
    (["-E", "^f$"], [(0, ("g",), 4)]),
    # recorded (its code's cached verdict says record): left out, with what it calls,
    # from its next call
    ([], [(0, ("f",), 3), (0, ("f", "g"), 3), (0, ("g",), 1)]),
], ids=["left_out", "recorded"])
def test_noprofile_applied_late(runner, opts, want):
    """@noprofile applied while the program runs, to a function already called,
    takes effect at its next call."""
    runner.write("s.py", """
        def g():
            pass

        def f():
            g()

        for _ in range(3):
            f()
        noprofile(f)
        for _ in range(2):
            f()
        g()
    """)
    _, out = run(runner, *opts)
    assert shape(read_table(out, "trip_count")) == want


def test_trace_c_switched_on_by_the_program(runner):
    """config.trace_c = True while running records the C calls made after it."""
    runner.write("s.py", """
        from strata.profiler import config

        def caller():
            return len([1, 2])

        caller()
        config.trace_c = True
        caller()
        config.trace_c = False
        caller()
    """)
    _, out = run(runner)
    assert shape(read_table(out, "trip_count")) == [
        (0, ("caller",), 3), (0, ("caller", "<built-in method len>"), 1)]


# ------------------------------------------------------- matching calls without frames

def test_recursive_noprofile(runner):
    """A @noprofile function that recurses stays left out until its outermost call
    returns (3.12+ matches calls by code object, not frame)."""
    runner.write("s.py", """
        def leaf():
            pass

        @noprofile
        def quiet(n):
            leaf()
            if n:
                quiet(n - 1)
            leaf()

        def main():
            quiet(4)
            leaf()

        main()
    """)
    _, out = run(runner)
    assert shape(read_table(out, "trip_count")) == [(0, ("main",), 1), (0, ("main", "leaf"), 1)]


def test_recursive_profile_scope(runner):
    """Under -b, the scope a recursive @profile function opens ends with its outermost
    call."""
    runner.write("s.py", """
        def leaf():
            pass

        @profile
        def scoped(n):
            if n:
                scoped(n - 1)
            leaf()

        scoped(2)
        leaf()
    """)
    _, out = run(runner, "-b")
    assert shape(read_table(out, "trip_count")) == [
        (0, ("scoped",), 1), (0, ("scoped", "scoped"), 1), (0, ("scoped", "scoped", "scoped"), 1),
        (0, ("scoped", "scoped", "scoped", "leaf"), 1), (0, ("scoped", "scoped", "leaf"), 1),
        (0, ("scoped", "leaf"), 1)]


def test_generator_resumed_from_different_callers(runner):
    """Each resume of a generator is a call under whoever resumes it, as on 3.11."""
    runner.write("s.py", """
        def gen():
            yield 1
            yield 2
            yield 3

        def first(g):
            return next(g)

        def second(g):
            return next(g)

        def main():
            g = gen()
            first(g)
            second(g)
            list(g)

        main()
    """)
    _, out = run(runner)
    assert shape(read_table(out, "trip_count")) == [
        (0, ("main",), 1), (0, ("main", "first"), 1), (0, ("main", "first", "gen"), 1),
        (0, ("main", "second"), 1), (0, ("main", "second", "gen"), 1), (0, ("main", "gen"), 2)]


def test_trace_c_call_from_left_out_code_inside_a_recorded_one(runner):
    """sorted() called from a left-out module, inside a recorded sorted() call: the
    inner call's end must not close the outer one (what the key calls next is still
    under the outer sorted)."""
    runner.write("helper_mod.py", """
        def make_key(then):
            def key(x):
                sorted([x, 0])
                then()
                return x
            return key
    """)
    runner.write("s.py", """
        import helper_mod

        def inside():
            pass

        def main():
            sorted([3, 1, 2], key=helper_mod.make_key(inside))
            inside()

        main()
    """)
    _, out = run(runner, "--trace-c", "-ME", "helper_mod", "-R", "^main$", "^inside$", "^sorted$")
    assert shape(read_table(out, "trip_count")) == [
        (0, ("main",), 1), (0, ("main", "<built-in method sorted>"), 1),
        (0, ("main", "<built-in method sorted>", "inside"), 3), (0, ("main", "inside"), 1)]


def test_recorded_function_called_under_noprofile(runner):
    """A recorded function that a @noprofile call calls again: that inner call's end
    must not close the outer, recorded call."""
    runner.write("s.py", """
        def leaf():
            pass

        @noprofile
        def quiet():
            rec(0)

        def rec(n):
            if n:
                quiet()
                leaf()

        rec(1)
    """)
    _, out = run(runner)
    assert shape(read_table(out, "trip_count")) == [(0, ("rec",), 1), (0, ("rec", "leaf"), 1)]


def test_function_left_out_while_a_call_of_it_runs(runner):
    """The program leaves out a function while a recorded call of it is open: that
    call still ends where it returns (on 3.12+ its return is not switched off)."""
    runner.write("s.py", """
        from strata.profiler import config

        def leaf():
            pass

        def g():
            config.exclude_functions.append("^rec$")
            rec(-1)

        def rec(n):
            r = 0
            if n > 0:
                g()
            return r

        def main():
            rec(1)
            leaf()

        main()
    """)
    _, out = run(runner)
    assert shape(read_table(out, "trip_count")) == [
        (0, ("main",), 1), (0, ("main", "rec"), 1), (0, ("main", "rec", "g"), 1),
        (0, ("main", "leaf"), 1)]


# ------------------------------------------------------------------------ the tool id

CLAIM = """
import sys
for tool in {ids}:
    sys.monitoring.use_tool_id(tool, "other-tool")
"""

TARGET = """
import pathlib

def work():
    return 42

pathlib.Path("started.marker").write_text("started")
print(work())
"""


@needs_monitoring
@pytest.mark.parametrize("taken, want", [([], 4), ([2], 4), ([4], 3), ([0, 1, 2, 4, 5], 3)])
def test_tool_id_left_for_the_program(runner, taken, want):
    """strata takes an id CPython assigns to no kind of tool (4, else 3), quietly: the
    profiler's, debugger's, coverage tool's and optimizer's stay free for the program."""
    runner.write("claim.py", CLAIM.format(ids=taken))
    runner.write("s.py", TARGET + """
import sys
print([sys.monitoring.get_tool(i) for i in range(6)])
""")
    res, out = run(runner, "-s", "claim.py", "-R", "^work$")
    tools = [None] * 6
    for i in taken:
        tools[i] = "other-tool"
    tools[want] = "strata"
    assert (res.stdout, res.stderr) == (f"42\n{tools}\n", ""), res.describe()
    assert shape(read_table(out, "trip_count")) == [(0, ("work",), 1)]


@needs_monitoring
def test_tool_id_fallback_to_an_assigned_one_warns(runner):
    runner.write("claim.py", CLAIM.format(ids=[3, 4]))
    runner.write("s.py", TARGET)
    res, out = run(runner, "-s", "claim.py", "-R", "^work$")
    assert res.stderr == ("strata: warning: sys.monitoring tool ids 4 and 3 are in use (4 by "
                          "other-tool); using id 5, which the program cannot then take\n"), \
        res.describe()
    assert shape(read_table(out, "trip_count")) == [(0, ("work",), 1)]


@needs_monitoring
def test_no_free_tool_id_stops_before_the_target(runner):
    """Every tool id 0-5 taken: one `strata: error:` line, exit status 2, the target never
    starts and no results folder is left behind."""
    runner.write("claim.py", CLAIM.format(ids=list(range(6))))
    runner.write("s.py", TARGET)
    res = runner.strata("-s", "claim.py", "--", "s.py", env=TRIP)
    assert res.returncode == 2, res.describe()
    lines = res.stderr.split("\n")
    assert len(lines) == 2 and lines[1] == "", res.describe()
    assert lines[0].startswith("strata: error: sys.monitoring tool ids 0 to 5 are all in use"), \
        res.describe()
    assert res.stdout == "", res.describe()
    assert not (runner.dir / "started.marker").exists(), "the target started"
    assert results_dirs(runner.dir) == [], "a results folder was left behind"


@needs_monitoring
def test_no_free_tool_id_from_the_source_api(runner):
    """A program run by plain python that imports strata is never stopped by strata:
    it says why it cannot profile, and the program runs on, unprofiled."""
    runner.write("s.py", CLAIM.format(ids=list(range(6))) + """
import strata

@strata.profile()
def work():
    return 42

print(work())
""")
    res = runner.plain("s.py", env=TRIP)
    assert res.returncode == 0 and res.stdout == "42\n", res.describe()
    assert res.stderr.startswith("strata: error: sys.monitoring tool ids 0 to 5 are all in use"), \
        res.describe()
    assert res.stderr.endswith("the program runs without profiling\n"), res.describe()
    assert results_dirs(runner.dir) == []


@needs_monitoring
def test_tool_id_is_given_back(runner):
    """When the profile is written, strata frees its tool id: an atexit handler that
    runs after strata's (registered before strata started) finds it free."""
    runner.write("s.py", """
        import atexit, sys

        def check():
            print("at exit:", [sys.monitoring.get_tool(i) for i in range(6)])

        atexit.register(check)

        import strata

        @strata.profile()
        def work():
            print("while profiling:", sys.monitoring.get_tool(4))

        work()
    """)
    res = runner.plain("s.py", env=TRIP)
    assert res.returncode == 0, res.describe()
    assert res.stdout == "while profiling: strata\nat exit: [None, None, None, None, None, None]\n", \
        res.describe()


def test_threads_started_before_profiling_are_followed(runner):
    """A thread the setup file starts (before profiling) is followed once it runs code."""
    runner.write("setup_t.py", """
        import builtins, threading
        go = threading.Event()
        done = threading.Event()

        def early_leaf():
            pass

        def early():
            go.wait()
            early_leaf()
            builtins.EARLY_TID = threading.get_native_id()
            done.set()

        builtins.GO, builtins.DONE = go, done
        threading.Thread(target=early, name="early-thread", daemon=True).start()
    """)
    runner.write("s.py", """
        import threading

        def main():
            GO.set()
            DONE.wait()

        main()
        print("tids", threading.get_native_id(), EARLY_TID)
    """)
    res, out = run(runner, "-s", "setup_t.py", "-R", "^main$", "^early_leaf$")
    table = read_table(out, "trip_count")
    assert shape(table) == [(0, ("main",), 1), (1, ("early_leaf",), 1)], table.text
    data = json.loads((out / "profile.json").read_text())
    assert [t["name"] for t in data["threads"]] == ["MainThread", "early-thread"]
    # each thread registered with the recorder from itself (its own kernel thread id)
    tids = [int(w) for w in res.stdout.split("tids")[1].split()[:2]]
    assert [t["tid"] for t in data["threads"]] == tids, (data["threads"], tids)


C_THREAD = """
#include <pthread.h>
static void *run(void *fn) { ((void (*)(void))fn)(); return 0; }
int run_in_thread(void (*fn)(void))
{
    pthread_t t;
    return pthread_create(&t, 0, run, (void *)fn) ? -1 : pthread_join(t, 0);
}
"""


@needs_monitoring
def test_threads_python_never_started_are_followed(runner):
    """A pthread started in C, which threading never knew, records once it runs Python
    code (a ctypes callback): the recorder registers it on its first call and it gets
    a made-up name. (3.11's profile hook reaches only the threads threading starts and
    those that exist when profiling starts.)"""
    if not shutil.which("gcc"):
        pytest.skip("gcc is needed to build the C library that starts the thread")
    (runner.dir / "cthread.c").write_text(C_THREAD)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(runner.dir / "libcthread.so"),
                    str(runner.dir / "cthread.c"), "-lpthread"], check=True)
    runner.write("s.py", f"""
        import ctypes, threading

        lib = ctypes.CDLL({str(runner.dir / "libcthread.so")!r})

        def leaf():
            pass

        def in_c_thread():
            for _ in range(3):
                leaf()
            print("c tid", threading.get_native_id(), flush=True)

        callback = ctypes.CFUNCTYPE(None)(in_c_thread)

        def main():
            assert lib.run_in_thread(callback) == 0

        main()
    """)
    res, out = run(runner, "-R", "^main$", "^in_c_thread$", "^leaf$")
    table = read_table(out, "trip_count")
    assert shape(table) == [(0, ("main",), 1), (1, ("in_c_thread",), 1),
                            (1, ("in_c_thread", "leaf"), 3)], table.text
    threads = json.loads((out / "profile.json").read_text())["threads"]
    assert len(threads) == 2 and threads[1]["name"].startswith("Thread-"), threads
    assert threads[1]["tid"] == int(res.stdout.split("c tid")[1].split()[0]), threads


# ------------------------------------------------------ a program with its own profiler

SELF_PROFILING = """
import cProfile
import pstats
import sys
import threading

def a():
    return sum(range(10))

def b():
    return a() + 1

def after():
    return b()

def names(pr):
    return sorted((k[2], v[1]) for k, v in pstats.Stats(pr).stats.items()
                  if k[2] in ("a", "b", "after", "work"))

def main():
    events = []

    def tracer(frame, event, arg):
        if event in ("call", "return"):
            events.append((event, frame.f_code.co_name))

    old = sys.getprofile()
    print("getprofile at first:", old)
    sys.setprofile(tracer)
    print("getprofile is the tracer:", sys.getprofile() is tracer)
    b()
    sys.setprofile(old)
    print("events:", events)
    print("getprofile after:", sys.getprofile())

    pr = cProfile.Profile()
    pr.enable()
    b()
    pr.disable()
    print("cProfile saw:", names(pr))
    pr2 = cProfile.Profile()
    print("runcall:", pr2.runcall(b), names(pr2))

    def worker():
        w = cProfile.Profile()
        w.enable()
        b()
        w.disable()
        print("worker's cProfile saw:", names(w))
        after()

    t = threading.Thread(target=worker, name="worker")
    t.start()
    t.join()
    after()

main()
"""


@pytest.mark.parametrize("opts", [[], ["--trace-c"]], ids=["python", "trace-c"])
def test_program_with_its_own_profiler(runner, opts):
    """sys.setprofile, sys.getprofile and cProfile (enable, disable, runcall, on the main
    thread and another) work as without strata, and strata records every call, those
    made under the program's profiler and after it included (issue 9 item 4)."""
    runner.write("s.py", SELF_PROFILING)
    plain = runner.plain("s.py")
    assert plain.returncode == 0 and plain.stderr == "", plain.describe()
    assert "getprofile at first: None" in plain.stdout
    res, out = run(runner, *opts, "-R", "^(a|b|after|main|worker)$")
    assert (res.stdout, res.stderr) == (plain.stdout, ""), res.describe()
    table = read_table(out, "trip_count")
    got = [(r.thread, r.path, r.count) for r in table.rows if not r.name.startswith("<")]
    W = "main.<locals>.worker"
    assert got == [
        (0, ("main",), 1), (0, ("main", "b"), 3), (0, ("main", "b", "a"), 3),
        (0, ("main", "after"), 1), (0, ("main", "after", "b"), 1),
        (0, ("main", "after", "b", "a"), 1),
        (1, (W,), 1), (1, (W, "b"), 1), (1, (W, "b", "a"), 1),
        (1, (W, "after"), 1), (1, (W, "after", "b"), 1),
        (1, (W, "after", "b", "a"), 1),
    ], table.text


def test_python_m_cprofile_under_strata(runner):
    """`strata python -m cProfile script.py`: cProfile profiles, strata too."""
    runner.write("s.py", """
        def work():
            return sum(range(100))

        for _ in range(3):
            work()
        print("done")
    """)
    out = runner.dir / "results"
    res = runner.strata("-R", "^work$", "--", "-m", "cProfile", "-s", "ncalls", "s.py",
                        env={**TRIP, "STRATA_OUTPUT_PATH": out})
    assert res.returncode == 0, res.describe()
    assert res.stdout.startswith("done\n") and "function calls" in res.stdout, res.describe()
    assert "s.py:1(work)" in res.stdout, res.describe()
    assert res.stderr == "", res.describe()
    assert [(r.name, r.count) for r in read_table(out, "trip_count").rows] == [("work", 3)]


@needs_monitoring
@pytest.mark.parametrize("takes_over", [False, True], ids=["frees", "frees-and-takes"])
def test_program_frees_the_tool_id_of_strata(runner, takes_over):
    """A program that frees every sys.monitoring tool id: strata records for as long as
    its callbacks stay (freeing an id leaves them on 3.12 and 3.13; from 3.14 it clears
    them, which stops strata as taking the id over does); a program that then takes
    the id for its own callbacks and events stops strata, and strata says so, once, at
    the end, and leaves the program's callbacks alone."""
    runner.write("s.py", f"""
        import sys
        mon = sys.monitoring

        def before():
            pass

        def later():
            pass

        before()
        for i in range(6):
            if mon.get_tool(i) is not None:
                mon.free_tool_id(i)
        seen = []
        if {takes_over}:
            mon.use_tool_id(4, "the program's")
            mon.register_callback(4, mon.events.PY_START, lambda code, off: seen.append(code.co_name))
            mon.set_events(4, mon.events.PY_START)
        later()
        print(mon.get_tool(4), "later" in seen)
    """)
    res, out = run(runner, "-R", "^(before|later)$")
    rows = [r.name for r in read_table(out, "trip_count").rows]
    if takes_over:
        assert res.stdout == "the program's True\n", res.describe()
        assert res.stderr == ("strata: warning: the program took over sys.monitoring tool id 4, "
                              "which strata held (it changed its callbacks or events); calls "
                              "made after that may be missing from the profile\n"), res.describe()
        assert rows == ["before"]
    elif target_version() >= (3, 14):
        assert res.stdout == "None False\n" and res.stderr == (
            "strata: warning: the program took over sys.monitoring tool id 4, which strata "
            "held (it changed its callbacks or events); calls made after that may be "
            "missing from the profile\n"), res.describe()
        assert rows == ["before"]
    else:
        assert (res.stdout, res.stderr) == ("None False\n", ""), res.describe()
        assert rows == ["before", "later"]


def test_own_profiler_on_a_thread_with_a_trace_function(runner):
    """On 3.11 a thread has one profile hook: when the program's own takes strata's
    place on a thread strata cannot watch at once (it has a trace function, and the
    main thread, which could, is waiting), calls there are lost, and strata says so
    once at the end. On 3.12+ nothing is lost and nothing is said."""
    runner.write("s.py", """
        import cProfile
        import sys
        import threading

        def a():
            return 1

        def worker():
            sys.settrace(lambda *args: None)
            pr = cProfile.Profile()
            pr.enable()
            a()
            pr.disable()
            a()

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        a()
        print("done")
    """)
    res, out = run(runner, "-R", "^a$")
    assert res.stdout == "done\n", res.describe()
    rows = [(r.thread, r.name, r.count) for r in read_table(out, "trip_count").rows]
    if monitoring():
        assert res.stderr == "", res.describe()
        assert rows == [(0, "a", 1), (1, "a", 2)], rows
    else:
        assert res.stderr.startswith("strata: warning: the program's own profile function "
                                     "(sys.setprofile or cProfile) took strata's place"), \
            res.describe()
        assert len(res.stderr.splitlines()) == 1, res.describe()
        assert (0, "a", 1) in rows, rows


def test_other_ways_a_program_profiles_itself(runner):
    """A profile function that raises, cProfile as a context manager, the pure-Python
    profile module (which checks every event it gets) and threading.setprofile all
    behave as without strata; strata records throughout (on 3.11 it cannot follow a
    thread started after threading.setprofile(None), and says so)."""
    runner.write("s.py", """
        import cProfile
        import profile
        import pstats
        import sys
        import threading

        def a():
            return 1

        def b():
            return a() + 1

        def bad(frame, event, arg):
            if event == "call" and frame.f_code.co_name == "a":
                raise ValueError("from the profile function")

        sys.setprofile(bad)
        try:
            b()
        except ValueError as e:
            print("raised:", e, sys.getprofile())
        with cProfile.Profile() as pr:
            b()
        print(sorted(k[2] for k in pstats.Stats(pr).stats if k[2] in "ab"))
        p = profile.Profile()
        p.runcall(b)
        print(sorted(k[2] for k in pstats.Stats(p).stats if k[2] in "ab"))
        seen = []

        def thread_profile(frame, event, arg):
            if event == "call":
                seen.append(frame.f_code.co_name)

        threading.setprofile(thread_profile)
        t = threading.Thread(target=b)
        t.start()
        t.join()
        threading.setprofile(None)
        print("thread saw", [n for n in seen if n in ("a", "b")], threading.getprofile())
        t = threading.Thread(target=b)
        t.start()
        t.join()
    """)
    plain = runner.plain("s.py")
    # 3.15 warns that the profile module is deprecated: the program's own words
    assert plain.returncode == 0, plain.describe()
    assert plain.stderr == "" or plain.stderr.endswith(
        "s.py:2: DeprecationWarning: The profile module is deprecated and will be removed in "
        "Python 3.17. Use profiling.tracing (or cProfile) for tracing profilers instead.\n"
        "  import profile\n"), plain.describe()
    res, out = run(runner, "-R", "^(a|b)$")
    assert res.stdout == plain.stdout, res.describe()
    rows = [(r.thread, r.path, r.count) for r in read_table(out, "trip_count").rows]
    first = [(0, ("b",), 3), (0, ("b", "a"), 2), (1, ("b",), 1), (1, ("b", "a"), 1)]
    if monitoring():
        assert res.stderr == plain.stderr, res.describe()
        assert rows == first + [(2, ("b",), 1), (2, ("b", "a"), 1)], rows
    else:
        assert res.stderr == ("strata: warning: the program cleared threading's profile "
                              "function (threading.setprofile(None)); threads it started after "
                              "that were not followed\n"), res.describe()
        assert rows == first, rows


def test_own_profiler_started_before_strata(runner):
    """A profiler the setup file starts (before strata's) keeps hearing every call, and
    strata records beside it."""
    runner.write("setup_prof.py", """
        import builtins
        import cProfile

        builtins.PR = cProfile.Profile()
        builtins.PR.enable()
    """)
    runner.write("s.py", """
        import pstats

        def work():
            return 5

        work()
        work()
        PR.disable()
        print([v[1] for k, v in pstats.Stats(PR).stats.items() if k[2] == "work"])
    """)
    res, out = run(runner, "-s", "setup_prof.py", "-R", "^work$")
    assert (res.stdout, res.stderr) == ("[2]\n", ""), res.describe()
    assert [(r.name, r.count) for r in read_table(out, "trip_count").rows] == [("work", 2)]


def test_profiler_warning_goes_to_stratas_terminal(runner):
    """strata's warning that a program's own profiling lost calls goes where its tables
    go, the standard error strata started with, not into a file the program opened as
    fd 2 after closing its standard error."""
    runner.write("s.py", """
        import os
        import sys
        import threading

        def a():
            return 1

        if sys.version_info >= (3, 12):
            mon = sys.monitoring
            if mon.get_tool(4) is not None:
                mon.free_tool_id(4)
            mon.use_tool_id(4, "the program's")
            mon.register_callback(4, mon.events.PY_START, lambda code, off: None)
            mon.set_events(4, mon.events.PY_START)
        else:
            threading.setprofile(None)
        a()
        os.close(2)
        fd = os.open("program.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        assert fd == 2, fd
        os.write(2, b"the program's log\\n")
    """)
    res, _ = run(runner)
    assert (runner.dir / "program.log").read_text() == "the program's log\n"
    what = "took over sys.monitoring tool id 4" if monitoring() else \
        "cleared threading's profile function"
    assert res.stderr.startswith("strata: warning: the program " + what), res.describe()
    assert len(res.stderr.splitlines()) == 1, res.describe()
