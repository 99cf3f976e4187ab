"""Line timings: `strata python --lines` (-l), line_profiler's job (issue 12).

The text strata prints and writes (line_profile.txt) is what line_profiler itself
renders from the .lprof strata writes, byte for byte; the hits of every line are
kernprof's for the same program; and the program runs as it does without strata."""
import io
import os
import pickle
import shutil
import subprocess
import sys

import pytest

from conftest import PYTHON, SANITIZED, c_compiler, load_json, run_cmd

PROGRAM = """
    import sys, threading

    @profile
    def work(n):
        total = 0
        for i in range(n):
            if i % 3 == 0:
                total += i
            else:
                total -= 1
        return total

    @profile
    def gen(n):
        for i in range(n):
            yield i * 2

    @profile
    def fails(x):
        try:
            raise ValueError(x)
        except ValueError:
            return -1

    class K:
        @profile
        def method(self, n):
            return sum(range(n))

    @profile
    def rec(n):
        if n <= 0:
            return 0
        return 1 + rec(n - 1)

    @profile
    def never():
        return 0

    def plain(n):
        return [i for i in range(n)]

    def main():
        print(work(1000), sum(gen(50)), fails(3), K().method(10), rec(20), len(plain(10)))
        ts = [threading.Thread(target=work, args=(500,)) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print("trace", sys.gettrace())

    main()
"""


def line_profiler_module():
    """line_profiler from the test venv (requirements-dev.txt), or a skip saying why."""
    try:
        import line_profiler.line_profiler as lp  # noqa: F401
    except ImportError:
        pytest.skip("line_profiler is not installed in the test venv (pip install line_profiler)")
    return lp


def hits_of(timings):
    return {(k[1], k[2]): [(line, hits) for line, hits, _ in rows] for k, rows in timings.items()}


def test_text_is_line_profilers_rendering(runner):
    """line_profile.txt, and the same text on the terminal, is line_profiler's
    show_text of the .lprof, byte for byte (columns, number formats, the function's
    source block, functions never called); `python -m line_profiler` reads the .lprof."""
    lp = line_profiler_module()
    runner.write("prog.py", PROGRAM)
    res = runner.strata("-l", "prog.py")
    assert res.returncode == 0, res.describe()
    results = runner.results()
    text = (results / "line_profile.txt").read_text()
    with open(results / "profile.lprof", "rb") as f:
        stats = pickle.load(f)
    assert type(stats).__name__ == "LineStats" and stats.unit == 1e-9
    out = io.StringIO()
    lp.show_text(stats.timings, stats.unit, output_unit=1e-6, stream=out, config=False)
    assert text == out.getvalue()
    assert text in res.stderr
    assert "Function: K.method at line 26" in text and "Function: never at line 36" in text
    assert "plain" not in {k[2] for k in stats.timings}
    # the command-line reader takes it as kernprof's
    shown = run_cmd([PYTHON, "-m", "line_profiler", results / "profile.lprof"], runner.dir,
                    runner.env())
    assert shown.returncode == 0 and shown.stdout == text, shown.describe()


def test_hits_are_kernprofs(runner):
    """Every line's hits are what kernprof -l counts for the same program: loops,
    branches, a generator, an exception caught, a method, recursion, three threads."""
    line_profiler_module()
    runner.write("prog.py", PROGRAM)
    res = runner.strata("-l", "prog.py")
    assert res.returncode == 0, res.describe()
    kern = runner.run([PYTHON, "-m", "kernprof", "-l", "-q", "-o", "k.lprof", "prog.py"])
    assert kern.returncode == 0, kern.describe()
    # the program's output is kernprof's run's: no trace function seen
    assert res.stdout == kern.stdout and res.stdout.endswith("trace None\n"), res.describe()
    with open(runner.dir / "k.lprof", "rb") as f:
        theirs = hits_of(pickle.load(f).timings)
    with open(runner.results() / "profile.lprof", "rb") as f:
        ours = hits_of(pickle.load(f).timings)
    assert ours == theirs


def test_time_goes_to_the_line_that_took_it(runner):
    """A line that sleeps 60 ms and one that sleeps 20 ms: the times split 3 to 1
    (their callees' time is theirs, as line_profiler counts it)."""
    runner.write("sleepy.py", """
        import time

        @profile
        def f():
            time.sleep(0.06)
            time.sleep(0.02)

        for _ in range(3):
            f()
    """)
    res = runner.strata("-l", "sleepy.py")
    assert res.returncode == 0, res.describe()
    prof = load_json(runner.results() / "profile.json")
    (fn,) = prof["line_timings"]
    rows = {line: (hits, ns) for line, hits, ns in fn["lines"]}
    assert rows[5][0] == 3 and rows[6][0] == 3
    assert 0.175 < rows[5][1] / 1e9 < 0.3 and 0.055 < rows[6][1] / 1e9 < 0.12, rows
    assert 2.2 < rows[5][1] / rows[6][1] < 3.6, rows


def test_functions_chosen_by_regex(runner):
    """With -R (and -MR), functions are chosen without a decorator: the regex's, and
    @profile ones still; other code is not timed."""
    runner.write("nodeco.py", """
        def solve_a(n):
            s = 0
            for i in range(n):
                s += i
            return s

        def solve_b(n):
            return solve_a(n) * 2

        def helper():
            return 1

        print(solve_b(100), helper())
    """)
    res = runner.strata("-l", "-R", "^solve_", "--", "nodeco.py")
    assert res.returncode == 0 and res.stdout == "9900 1\n", res.describe()
    prof = load_json(runner.results() / "profile.json")
    names = [f["function"] for f in prof["line_timings"]]
    assert names == ["solve_b", "solve_a"], names
    a = next(f for f in prof["line_timings"] if f["function"] == "solve_a")
    assert [row[:2] for row in a["lines"]] == [[2, 1], [3, 101], [4, 100], [5, 1]]


def test_without_lines_nothing_is_timed(runner):
    """Without -l, @profile functions are profiled as before and no line file is made."""
    runner.write("prog.py", PROGRAM)
    res = runner.strata("prog.py")
    assert res.returncode == 0, res.describe()
    results = runner.results()
    assert not (results / "line_profile.txt").exists() and not (results / "profile.lprof").exists()
    assert "line_timings" not in load_json(results / "profile.json")
    assert "Timer unit" not in res.stderr


def test_the_programs_own_trace_function_is_kept(runner):
    """A program that traces itself (a debugger, coverage) keeps its trace function and
    every event it would get. On 3.11 a thread has one trace function: strata says
    that the calls made under the program's were not timed; on 3.12+ both run."""
    runner.write("own.py", """
        import sys
        seen = []

        def tracer(frame, event, arg):
            if frame.f_code.co_name == "f":
                seen.append(event)
            return tracer

        @profile
        def f():
            x = 1
            return x + 1

        sys.settrace(tracer)
        f()
        sys.settrace(None)
        print(seen.count("line"), seen.count("call"), sys.gettrace())
        f()
    """)
    res = runner.strata("-l", "own.py")
    assert res.returncode == 0, res.describe()
    assert res.stdout == "2 1 None\n", res.describe()
    prof = load_json(runner.results() / "profile.json")
    (fn,) = prof["line_timings"]
    if sys.version_info < (3, 12):
        # one trace function a thread: the call made under the program's is not timed
        assert [row[:2] for row in fn["lines"]] == [[11, 1], [12, 1]]
        assert "1 call of chosen functions was not timed" in res.stderr
    else:
        # sys.monitoring: strata's LINE events beside the program's trace function
        assert [row[:2] for row in fn["lines"]] == [[11, 2], [12, 2]]


def test_merge_and_report(runner, strata_bin):
    """Two runs merged: every line's hits and time summed; `strata report --format
    lines` renders them from profile.json."""
    runner.write("sleepy.py", """
        @profile
        def f(n):
            return sum(range(n))

        f(10)
        f(20)
    """)
    for out in ("a", "b"):
        res = runner.strata("-l", "-o", out, "sleepy.py")
        assert res.returncode == 0, res.describe()
    merged = runner.run([strata_bin, "merge", "-o", "m", "a", "b"])
    assert merged.returncode == 0, merged.describe()
    prof = load_json(runner.dir / "m" / "profile.json")
    (fn,) = prof["line_timings"]
    a = load_json(runner.dir / "a" / "profile.json")["line_timings"][0]
    b = load_json(runner.dir / "b" / "profile.json")["line_timings"][0]
    assert fn["lines"] == [[3, 4, a["lines"][0][2] + b["lines"][0][2]]]
    assert (runner.dir / "m" / "profile.lprof").exists()
    text = (runner.dir / "m" / "line_profile.txt").read_text()
    rep = runner.run([strata_bin, "report", "--format", "lines", "-o", "again.txt",
                      "m/profile.json"])
    assert rep.returncode == 0, rep.describe()
    assert (runner.dir / "again.txt").read_text() == text


def test_bad_line_timings_in_a_profile(runner, strata_bin):
    """A profile.json whose line timings are malformed is refused with one line."""
    runner.write("sleepy.py", """
        @profile
        def f():
            return 1

        f()
    """)
    res = runner.strata("-l", "-o", "r", "sleepy.py")
    assert res.returncode == 0, res.describe()
    path = runner.dir / "r" / "profile.json"
    text = path.read_text()
    path.write_text(text.replace('"lines": [[', '"lines": [["x", '))
    rep = runner.run([strata_bin, "report", "r/profile.json"])
    assert rep.returncode == 2 and rep.stderr.startswith("strata: error:"), rep.describe()
    assert len(rep.stderr.splitlines()) == 1 and "Traceback" not in rep.stderr


# --------------------------------------------------------------------------- --memory

MEMORY = """
    @profile
    def my_func():
        a = [1] * (10 ** 6)
        b = [2] * (2 * 10 ** 7)
        del b
        return a

    @profile
    def grow(n):
        out = []
        for i in range(n):
            out.append(b"x" * (10 * 2 ** 20))
        del out[0]
        return len(out)

    @profile
    def unused():
        return 0

    if __name__ == "__main__":
        my_func()
        grow(5)
        print("done")
"""


def memory_rows(text):
    """{(file, line): (mem MiB, increment MiB, occurrences)} of memory_profiler's text."""
    import re
    rows, file = {}, None
    for ln in text.splitlines():
        if ln.startswith("Filename: "):
            file = ln[len("Filename: "):]
        m = re.match(r"^\s*(\d+)\s+(-?[\d.]+) MiB\s+(-?[\d.]+) MiB\s+(\d+)\s", ln)
        if m:
            rows[(file, int(m[1]))] = (float(m[2]), float(m[3]), int(m[4]))
    return rows


def memory_profiler_module():
    try:
        import memory_profiler  # noqa: F401
    except ImportError:
        pytest.skip("memory_profiler is not installed in the test venv (pip install memory_profiler)")
    return memory_profiler


def test_memory_is_memory_profilers_table(runner):
    """strata python --memory: memory_profiler's table for every @profile function that
    ran (memory_profile.txt and the terminal), byte for byte what memory_profiler's
    show_results renders from the same numbers, with the occurrences memory_profiler
    counts for the same program, and the increments of the bytes the lines allocate."""
    mp = memory_profiler_module()
    runner.write("mem.py", MEMORY)
    res = runner.strata("--memory", "mem.py")
    assert res.returncode == 0 and res.stdout == "done\n", res.describe()
    results = runner.results()
    text = (results / "memory_profile.txt").read_text()
    assert text in res.stderr
    assert not (results / "line_profile.txt").exists()  # no -l: no timings shown
    prof = load_json(results / "profile.json")
    assert prof["line_memory"] == "heap" and prof["line_time"] is False

    # memory_profiler's own rendering of these numbers
    class Map:
        def items(self):
            for f in prof["line_timings"]:
                rows = {r[0]: r for r in f["lines"] if r[3]}
                if not rows:
                    continue
                lines = range(f["first_line"], f["first_line"] + len(f["source"]))
                yield f["file"], ((n, (rows[n][4] / 2 ** 20, rows[n][5] / 2 ** 20, rows[n][3])
                                   if n in rows else None) for n in lines)

    out = io.StringIO()
    mp.show_results(type("P", (), {"code_map": Map()})(), stream=out, precision=3)
    assert text == out.getvalue()
    assert "unused" not in text  # never ran: memory_profiler leaves it out too

    ours = {(os.path.basename(f), n): v for (f, n), v in memory_rows(text).items()}
    theirs = runner.run([PYTHON, "-m", "memory_profiler", "mem.py"])
    assert theirs.returncode == 0, theirs.describe()
    theirs = {(os.path.basename(f), n): v for (f, n), v in memory_rows(theirs.stdout).items()}
    assert {k: v[2] for k, v in ours.items()} == {k: v[2] for k, v in theirs.items()}
    # the bytes: [1] * 10**6 is 7.6 MiB, [2] * 2*10**7 152.6 MiB, given back by del
    assert 7.5 < ours[("mem.py", 3)][1] < 7.8 and 152 < ours[("mem.py", 4)][1] < 153.5
    assert -153.5 < ours[("mem.py", 5)][1] < -152
    # five 10 MiB strings, one given back
    assert 49 < ours[("mem.py", 12)][1] < 52 and -10.5 < ours[("mem.py", 13)][1] < -9.5


def test_memory_rss(runner):
    """--memory=rss: the resident size, memory_profiler's meaning: the touched 150 MiB
    shows as the line's increment, and its release (glibc gives large blocks back) as
    the next line's."""
    runner.write("mem.py", MEMORY)
    res = runner.strata("--memory=rss", "mem.py")
    assert res.returncode == 0, res.describe()
    prof = load_json(runner.results() / "profile.json")
    assert prof["line_memory"] == "rss"
    rows = memory_rows((runner.results() / "memory_profile.txt").read_text())
    inc = {n: v[1] for (f, n), v in rows.items()}
    assert 140 < inc[4] < 160, rows
    if not SANITIZED:  # ASan keeps freed memory in quarantine: the resident size stays
        assert inc[5] < -100, rows


def test_lines_and_memory_together(runner, strata_bin):
    """-l --memory: both tables from one run, the call tree beside them; a merge of two
    runs sums the occurrences and keeps the highest memory."""
    runner.write("mem.py", MEMORY)
    for out in ("a", "b"):
        res = runner.strata("-l", "--memory", "-o", out, "mem.py")
        assert res.returncode == 0, res.describe()
        assert "Timer unit: 1e-06 s" in res.stderr and "Mem usage" in res.stderr
        assert (runner.dir / out / "wall_clock.txt").exists()
    merged = runner.run([strata_bin, "merge", "-o", "m", "a", "b"])
    assert merged.returncode == 0, merged.describe()
    one = memory_rows((runner.dir / "a" / "memory_profile.txt").read_text())
    two = memory_rows((runner.dir / "m" / "memory_profile.txt").read_text())
    assert {k: 2 * v[2] for k, v in one.items()} == {k: v[2] for k, v in two.items()}
    # the lines holding memory: the runs' sums
    held = {}
    for out in ("a", "b"):
        for ln in load_json(runner.dir / out / "profile.json").get("memory_lines", []):
            k = (ln["function"], ln["line"])
            held[k] = [x + y for x, y in zip(held.get(k, [0, 0]), [ln["peak"], ln["exit"]])]
    merged_lines = load_json(runner.dir / "m" / "profile.json").get("memory_lines", [])
    assert {(ln["function"], ln["line"]): [ln["peak"], ln["exit"]] for ln in merged_lines} == held
    assert (runner.dir / "m" / "line_profile.txt").exists()


def test_memory_beside_the_programs_tracemalloc(runner):
    """A program that traces its own allocations (tracemalloc) under --memory sees
    what it sees without strata: its hooks go on top of strata's, and its numbers
    are the bytes it asked for."""
    runner.write("own.py", """
        import tracemalloc

        def work():
            return [bytes(1000) for _ in range(1000)]

        tracemalloc.start()
        keep = work()
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(current > 1000 * 1000, peak >= current, tracemalloc.is_tracing())
    """)
    plain = runner.plain("own.py")
    res = runner.strata("--memory", "own.py")
    assert plain.returncode == 0 and res.returncode == 0, res.describe()
    assert res.stdout == plain.stdout == "True True False\n"


# --------------------------------------------------------------------------- memory over time

OVER_TIME = """
    import time

    @profile
    def build(n):
        data = []
        for i in range(n):
            data.append(b"x" * (1024 * 1024))
            time.sleep(0.004)
        return data

    @profile
    def main():
        a = build(40)
        time.sleep(0.05)
        del a
        b = build(10)
        return len(b)

    print(main())
"""


def test_memory_over_time(runner, strata_bin):
    """--memory also samples the memory every 20 ms: mprofile.dat is what mprof plot
    reads (memory_profiler's own reader takes it: the samples, each call of a chosen
    function with its nesting level), memplot.svg draws it, profile.json keeps it and
    `strata report` renders both again from it."""
    memory_profiler_module()
    import mprof
    import xml.etree.ElementTree as ET
    runner.write("grow.py", OVER_TIME)
    res = runner.strata("--memory", "-o", "r", "grow.py")
    assert res.returncode == 0 and res.stdout == "10\n", res.describe()
    assert "[strata] memory over time:" in res.stderr and "mprofile.dat" in res.stderr
    dat = mprof.read_mprofile_file(str(runner.dir / "r" / "mprofile.dat"))
    assert dat["cmd_line"].startswith("strata python --memory")
    mem, ts = dat["mem_usage"], dat["timestamp"]
    assert len(mem) >= 10 and ts == sorted(ts), ts
    assert max(mem) - mem[0] > 35, mem  # 40 MiB built, then given back
    funcs = dat["func_timestamp"]
    assert sorted(funcs) == ["build", "main"] and len(funcs["build"]) == 2
    (main,) = funcs["main"]
    assert main[4] == 0 and all(c[4] == 1 for c in funcs["build"])
    assert ts[0] <= main[0] < main[1] <= ts[-1]
    assert all(main[0] <= c[0] <= c[1] <= main[1] for c in funcs["build"])
    svg = ET.parse(runner.dir / "r" / "memplot.svg").getroot()
    assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 2  # resident, heap
    prof = load_json(runner.dir / "r" / "profile.json")
    over = prof["memory_over_time"]
    assert len(over["t"]) == len(over["resident"]) == len(over["heap"]) == len(mem)
    rep = runner.run([strata_bin, "report", "--format", "mprof,memplot", "-o", "again",
                      "r/profile.json"])
    assert rep.returncode == 0, rep.describe()
    for name in ("mprofile.dat", "memplot.svg"):
        assert (runner.dir / "again" / name).read_bytes() == (runner.dir / "r" / name).read_bytes()
    # the same plot as PNG, mprof plot's format, through librsvg's rsvg-convert
    if not shutil.which("rsvg-convert"):
        pytest.skip("librsvg's rsvg-convert is not installed (Debian librsvg2-bin)")
    png = runner.run([strata_bin, "report", "--format", "memplot-png", "-o", "plot.png",
                      "r/profile.json"])
    assert png.returncode == 0, png.describe()
    data = (runner.dir / "plot.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    assert int.from_bytes(data[16:20], "big") == 900  # the plot's width
    no_tool = runner.run([strata_bin, "report", "--format", "memplot-png", "-o", "p2.png",
                          "r/profile.json"], env={"PATH": "/nonexistent"})
    assert no_tool.returncode == 2 and not (runner.dir / "p2.png").exists(), no_tool.describe()
    assert no_tool.stderr.startswith("strata: error: ") and "rsvg-convert" in no_tool.stderr


def test_memory_over_time_without_chosen_functions(runner):
    """A script with no @profile under --memory: its memory over time alone, as `mprof
    run` gives it (no line table, no FUNC line)."""
    runner.write("plain.py", """
        import time
        x = [bytes(1 << 20) for _ in range(30)]
        time.sleep(0.1)
        print(len(x))
    """)
    res = runner.strata("--memory", "-o", "r", "plain.py")
    assert res.returncode == 0 and res.stdout == "30\n", res.describe()
    text = (runner.dir / "r" / "mprofile.dat").read_text()
    assert text.count("\nMEM ") >= 4 and "FUNC" not in text
    assert not (runner.dir / "r" / "memory_profile.txt").exists()


# --------------------------------------------------------------------------- allocation sites

SITES = """
    import sys

    def make(n):
        return [bytes(100_000) for _ in range(n)]

    def many(n):
        return [object() for _ in range(n)]

    def main():
        keep = make(200)
        objs = many(100_000)
        return len(keep) + len(objs)

    if "--tracemalloc" in sys.argv:
        import tracemalloc
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        keep = make(200)
        print(tracemalloc.get_traced_memory()[0] - before)
    else:
        print(main())
"""


def test_allocation_sites(runner):
    """--memory (heap) adds what each call path allocates: bytes (alloc_bytes.txt) and
    allocations (allocations.txt), self and total, in profile.json too; the bytes of a
    function that keeps what it makes agree with tracemalloc's within 1 %."""
    runner.write("sites.py", SITES)
    res = runner.strata("--memory", "-o", "r", "sites.py")
    assert res.returncode == 0 and res.stdout == "100200\n", res.describe()
    assert (runner.dir / "r" / "alloc_bytes.txt").exists()
    assert (runner.dir / "r" / "allocations.txt").exists()
    prof = load_json(runner.dir / "r" / "profile.json")
    nodes = {n["label"]: n for n in prof["threads"][0]["nodes"]}
    def metric(label, name):
        node = next(n for lab, n in nodes.items() if lab.split(" ")[0] == label)
        return node["metrics"][name]
    made = metric("make", "alloc_bytes")
    assert metric("many", "allocations") >= 100_000
    traced = runner.plain("sites.py", "--tracemalloc")
    assert traced.returncode == 0, traced.describe()
    expected = int(traced.stdout)
    assert abs(made - expected) <= 0.01 * expected, (made, expected)


LEAK = """
    cache = []

    def leak(n):
        for _ in range(n):
            cache.append(bytearray(1 << 20))

    def temp(n):
        t = [bytearray(1 << 20) for _ in range(n)]
        return len(t)

    def main():
        temp(60)
        leak(20)
        temp(10)

    main()
    print("ok")
"""


@pytest.mark.parametrize("mode", ["heap", "sample"])
def test_memory_held_at_peak_and_at_exit(runner, mode):
    """What each call path and line holds at the peak of the memory and at the end
    (leaks), from sampled allocations: temp() holds the 60 MiB of the peak and nothing
    at the end, leak() the 20 MiB kept to the end and nothing at the peak;
    peak_bytes.txt, exit_bytes.txt and memory_lines.txt, and the top lines on the
    terminal. --memory=sample has no line table
    (no line events) but the rest."""
    runner.write("leak.py", LEAK)
    res = runner.strata(f"--memory={mode}", "-o", "r", "leak.py")
    assert res.returncode == 0 and res.stdout == "ok\n", res.describe()
    assert "[strata] memory held (from" in res.stderr
    prof = load_json(runner.dir / "r" / "profile.json")
    cells = {}
    for n in prof["threads"][0]["nodes"]:
        cells[n["label"].split(" ")[0]] = n["metrics"]
    mib = 2 ** 20
    assert 0.6 * 60 * mib < cells["temp"]["peak_bytes"] < 1.4 * 60 * mib, cells
    assert 0.6 * 20 * mib < cells["leak"]["exit_bytes"] < 1.4 * 20 * mib, cells
    assert cells["temp"].get("exit_bytes", 0) == 0 and cells["leak"].get("peak_bytes", 0) == 0
    for name in ("peak_bytes.txt", "exit_bytes.txt", "alloc_bytes.txt", "mprofile.dat",
                 "memory_lines.txt"):
        assert (runner.dir / "r" / name).exists(), name
    # the lines: temp()'s list (line 8) at the peak, leak()'s append (line 5) at the end
    lines = {(os.path.basename(ln["file"]), ln["line"]): ln for ln in prof["memory_lines"]}
    assert 0.6 * 60 * mib < lines[("leak.py", 8)]["peak"] < 1.4 * 60 * mib, lines
    assert lines[("leak.py", 8)]["exit"] == 0
    assert 0.6 * 20 * mib < lines[("leak.py", 5)]["exit"] < 1.4 * 20 * mib, lines
    assert prof["memory_lines"][0]["line"] == 8  # the most at the peak first
    assert "MEMORY HELD BY LINE" in res.stderr
    # the bytes each made: exact in heap mode, estimated from the samples in sample mode
    made = cells["temp"]["alloc_bytes"]
    assert 0.6 * 70 * mib < made < 1.4 * 70 * mib, made
    if mode == "heap":
        assert 70 * mib <= made < 70 * mib + 65536, made


@pytest.mark.parametrize("mode", ["heap", "sample"])
def test_memory_and_fork(runner, mode):
    """A program that forks while strata tracks its allocations (and a thread
    allocates at the same time) runs as without strata: the child allocates, prints
    and exits with its status; the parent's profile is written."""
    runner.write("forks.py", """
        import os, threading

        def churn(stop):
            while not stop.is_set():
                [bytes(4096) for _ in range(100)]

        def main():
            stop = threading.Event()
            t = threading.Thread(target=churn, args=(stop,))
            t.start()
            kids = []
            for i in range(5):
                pid = os.fork()
                if pid == 0:
                    data = [bytearray(1 << 20) for _ in range(20)]
                    os.write(1, b"child %d\\n" % len(data))  # one write: lines stay whole
                    os._exit(7)
                kids.append(pid)
            codes = [os.waitpid(p, 0)[1] >> 8 for p in kids]
            stop.set()
            t.join()
            print("parent", codes)

        main()
    """)
    res = runner.strata(f"--memory={mode}", "-o", "r", "forks.py")
    assert res.returncode == 0, res.describe()
    assert res.stdout.count("child 20\n") == 5 and "parent [7, 7, 7, 7, 7]" in res.stdout
    assert (runner.dir / "r" / "profile.json").exists()


NUMPY = """
    import numpy as np

    def make():
        return np.ones((1024, 1024, 4))  # 32 MiB, kept

    def tmp():
        a = np.zeros((1024, 1024, 2))  # 16 MiB, given back
        a += 1
        return float(a.sum())

    keep = make()
    print(tmp())
"""


@pytest.mark.parametrize("setup", [False, True])
def test_memory_counts_numpy_arrays(runner, setup):
    """numpy allocates its arrays' data itself (not through Python's allocators);
    --memory counts it all the same: the bytes make() allocated, what it holds at the
    peak and at the end, and tmp() nothing at the end; with numpy imported by the
    setup file before profiling starts too."""
    pytest.importorskip("numpy", reason="numpy is not installed in the test venv")
    runner.write("arrays.py", NUMPY)
    args = ["--memory", "-o", "r"]
    if setup:
        runner.write("setup.py", "import numpy\n")
        args += ["-s", "setup.py"]
    res = runner.strata(*args, "arrays.py")
    assert res.returncode == 0 and res.stdout == "2097152.0\n", res.describe()
    prof = load_json(runner.dir / "r" / "profile.json")
    nodes = prof["threads"][0]["nodes"]
    def total(label, metric):  # the node and what it called (numpy's own functions)
        top = next(n for n in nodes if n["label"].split(" ")[0] == label and n["parent"] == -1)
        ids, sum_ = {top["id"]}, 0
        for n in nodes:  # parents come before their children
            if n["id"] in ids or n["parent"] in ids:
                ids.add(n["id"])
                sum_ += n["metrics"].get(metric, 0)
        return sum_
    mib = 2 ** 20
    assert 32 * mib <= total("make", "alloc_bytes") < 33 * mib
    assert 16 * mib <= total("tmp", "alloc_bytes") < 17 * mib
    assert 0.9 * 32 * mib < total("make", "exit_bytes") < 1.1 * 32 * mib
    assert total("tmp", "exit_bytes") < mib
    heap = prof["memory_over_time"]["heap"]
    assert heap[-1] - heap[0] >= 31 * mib, heap  # make()'s array, alive to the end


NATIVE_LIB = r"""
#include <stdlib.h>
#include <string.h>
static void *held[8];
void grab(size_t n, int i) { held[i] = malloc(n); memset(held[i], 1, n); }
void drop(int i) { free(held[i]); held[i] = 0; }
void churn(size_t n, int times)
{
    for (int k = 0; k < times; k++) {
        char *p = calloc(n, 1);
        p = realloc(p, 2 * n);
        free(p);
    }
}
"""

NATIVE_CXX = r"""
#include <vector>
static std::vector<double> *kept;
extern "C" void fill(unsigned long n) { kept = new std::vector<double>(n, 1.0); }
"""

NATIVE = """
    import ctypes, os, sqlite3
    import json  # an import after sqlite3's: strata has looked at what it loaded

    lib = ctypes.CDLL(os.path.abspath("libgrab.so"))
    cxx = ctypes.CDLL(os.path.abspath("libfill.so"))
    for f in (lib.grab, lib.churn):
        f.argtypes = [ctypes.c_size_t, ctypes.c_int]
    cxx.fill.argtypes = [ctypes.c_ulong]
    MIB = 1 << 20

    @profile
    def native():
        lib.grab(40 * MIB, 0)
        lib.grab(10 * MIB, 1)
        lib.drop(0)
        lib.churn(MIB, 3)
        cxx.fill(2 * MIB)
        return 0

    def db():
        con = sqlite3.connect(":memory:")
        con.execute("create table t(b)")
        con.execute("insert into t values (zeroblob(24000000))")
        return con

    native()
    keep = db()
    print("ok")
"""


def test_memory_counts_c_libraries(runner):
    """C libraries allocate with malloc themselves (a ctypes library, C++'s new in
    libstdc++, sqlite3 under Python's sqlite3 module): --memory counts it with the rest,
    once: each line's increment is what the line kept, a free counts only what was
    counted, and what a function keeps is in its call path's bytes at the end."""
    cc = c_compiler()
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no C++ compiler (Debian g++) to build the test library")
    runner.write("grab.c", NATIVE_LIB)
    runner.write("fill.cc", NATIVE_CXX)
    for compiler, src, out in ((cc, "grab.c", "libgrab.so"), (cxx, "fill.cc", "libfill.so")):
        built = subprocess.run([compiler, "-O1", "-shared", "-fPIC", "-o", out, src],
                               cwd=runner.dir, capture_output=True, text=True)
        assert built.returncode == 0, built.stderr
    runner.write("native.py", NATIVE)
    res = runner.strata("--memory", "-o", "r", "native.py")
    assert res.returncode == 0 and res.stdout == "ok\n", res.describe()
    mib = 2 ** 20
    rows = {}
    for line in (runner.dir / "r" / "memory_profile.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) > 5 and parts[0].isdigit() and parts[2] == "MiB":
            rows[" ".join(parts[6:])] = float(parts[3])
    def incr(code):
        return next(v for k, v in rows.items() if k.startswith(code))
    assert 40 <= incr("lib.grab(40") < 40.1, rows
    assert 10 <= incr("lib.grab(10") < 10.1, rows
    assert -40.1 < incr("lib.drop(0)") <= -40, rows
    assert abs(incr("lib.churn")) < 0.01, rows
    cxx_bytes = 0 if SANITIZED else 16 * mib  # ASan's runtime is operator new itself
    assert cxx_bytes <= incr("cxx.fill") * mib < cxx_bytes + 0.1 * mib, rows  # 2 Mi doubles
    prof = load_json(runner.dir / "r" / "profile.json")
    def node(label):
        return next(n for n in prof["threads"][0]["nodes"] if n["label"].split(" ")[0] == label)
    made = node("native")["metrics"]
    assert 40 * mib + 10 * mib + 3 * 3 * mib + cxx_bytes <= made["alloc_bytes"], made
    assert made["alloc_bytes"] < 60 * mib + cxx_bytes, made
    kept = 10 * mib + cxx_bytes  # sampled: an estimate
    assert 0.9 * kept < made["exit_bytes"] < 1.1 * kept, made
    db = node("db")["metrics"]  # the blob in sqlite's pages of 4 KiB
    assert db["alloc_bytes"] >= 24e6 and db["exit_bytes"] > 0.5 * 24e6, db  # ~46 samples


def test_everything_together(runner):
    """-l and --memory with the call tree, the trace, stack sampling and process
    sampling, in one run and one results folder: the program runs as it does alone
    (generators, an exception, recursion, three threads); every line's hits are what
    -l alone counts, and the memory table's occurrences what --memory alone counts;
    the trace holds every thread's calls of work(), and the samples and the process
    samples are there."""
    from test_trace import decode
    runner.write("prog.py", PROGRAM)
    runner.write("plain.py", "import builtins\nbuiltins.profile = lambda f: f\n"
                 "exec(open('prog.py').read())\n")
    plain = runner.plain("plain.py")
    env = {"STRATA_USE_PROCESS_SAMPLING": "ON", "STRATA_PROFILE": "ON"}
    res = runner.strata("-l", "--memory", "--trace", "--sample", "--sample-clock", "wall",
                        "-f", "2000", "-o", "all",
                        "prog.py", env=env)
    assert res.returncode == plain.returncode == 0, res.describe()
    assert res.stdout == plain.stdout, res.describe()
    alone = {}
    for flag in ("-l", "--memory"):
        one = runner.strata(flag, "-o", flag.strip("-"), "prog.py")
        assert one.returncode == 0 and one.stdout == plain.stdout, one.describe()
        alone[flag] = runner.dir / flag.strip("-")
    every = runner.dir / "all"
    for name in ("line_profile.txt", "profile.lprof", "memory_profile.txt", "mprofile.dat",
                 "wall_clock.txt", "samples.txt", "trace.pftrace", "process_sampling.txt"):
        assert (every / name).exists(), (name, sorted(p.name for p in every.iterdir()))
    with open(every / "profile.lprof", "rb") as f:
        ours = hits_of(pickle.load(f).timings)
    with open(alone["-l"] / "profile.lprof", "rb") as f:
        assert ours == hits_of(pickle.load(f).timings)
    occurrences = {k: v[2] for k, v in memory_rows((every / "memory_profile.txt").read_text()).items()}
    assert occurrences == {k: v[2] for k, v in
                           memory_rows((alone["--memory"] / "memory_profile.txt").read_text()).items()}
    trace = decode(every / "trace.pftrace")
    calls = sum(n for (name, n) in trace.names().items() if name.split(" ")[0] == "work")
    assert calls == 4, trace.names()
    prof = load_json(every / "profile.json")
    assert prof["stack_sampling"]["samples"] > 0
    assert any(n["metrics"].get("alloc_bytes") for t in prof["threads"] for n in t["nodes"])


# Blocks of 5 MiB: each is sampled but once in 22,000 (the mean gap is 512 KiB), so
# that the estimates below stay within their bounds (with 1 MiB blocks the worker's
# 10 MiB came out under 60 % in about one run in 200).
THREAD_LEAK = """
    import threading
    cache = []

    def leak(n):
        for _ in range(n):
            cache.append(bytearray(5 << 20))

    def main():
        leak(4)
        t = threading.Thread(target=leak, args=(2,), name="worker")
        t.start()
        t.join()
        return t

    kept = main()
    print("ok")
"""


@pytest.mark.parametrize("profile", ["default", "ON"])
def test_sampled_memory_without_the_profile(runner, profile):
    """--memory=sample alone runs no profile hook (the cheap mode, as --sample): each
    sampled allocation carries its Python stack, which becomes its thread's call path
    (the worker thread's own, named as threading names it); with STRATA_PROFILE=ON
    the samples land on the profile's nodes instead, which count calls."""
    runner.write("tl.py", THREAD_LEAK)
    env = {} if profile == "default" else {"STRATA_PROFILE": "ON"}
    res = runner.strata("--memory=sample", "-o", "r", "tl.py", env=env)
    assert res.returncode == 0 and res.stdout == "ok\n", res.describe()
    prof = load_json(runner.dir / "r" / "profile.json")
    threads = {t["name"]: {n["label"].split(" ")[0]: n for n in t["nodes"]}
               for t in prof["threads"]}
    mib = 2 ** 20
    main_leak, worker_leak = threads["MainThread"]["leak"], threads["worker"]["leak"]
    assert 0.6 * 20 * mib < main_leak["metrics"]["exit_bytes"] < 1.4 * 20 * mib, threads
    assert 0.6 * 10 * mib < worker_leak["metrics"]["exit_bytes"] < 1.4 * 10 * mib, threads
    parent = {n["id"]: n["label"].split(" ")[0] for n in prof["threads"][0]["nodes"]}
    assert parent[main_leak["parent"]] == "main"
    timed = "wall_clock" in {c["name"] for c in prof["components"]}
    assert timed == (profile == "ON"), prof["components"]
    assert (main_leak["count"] == 1) == (profile == "ON"), main_leak
    assert "BYTES STILL HELD AT THE END" in res.stderr
    assert (runner.dir / "r" / "wall_clock.txt").exists() == (profile == "ON")


def test_memory_leaves_the_import_system_alone(runner):
    """--memory changes nothing the program can see of the import system: sys.meta_path
    and sys.path_hooks are what they are without strata, before and after numpy."""
    pytest.importorskip("numpy", reason="numpy is not installed in the test venv")
    runner.write("imports.py", """
        import sys
        def seen():
            return [type(f).__name__ if not isinstance(f, type) else f.__name__
                    for f in sys.meta_path + sys.path_hooks]
        before = seen()
        import numpy
        print(before, seen(), float(numpy.ones(4).sum()))
    """)
    plain = runner.plain("imports.py")
    res = runner.strata("--memory", "-o", "r", "imports.py")
    assert plain.returncode == res.returncode == 0, res.describe()
    assert res.stdout == plain.stdout, (res.stdout, plain.stdout)
