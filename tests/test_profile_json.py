"""profile.json (docs/formats.md): its layout, that it says what the tables say, that
it records where each setting came from, and that its size follows the number of
distinct call paths, not the number of calls."""

import json
import os
import platform
import re
import time

import pytest

from conftest import PYTHON, SANITIZED, STRATA as STRATA_BIN, TIMEOUT, TITLES, Runner, count_nodes, find_results, load_profile, read_table

QUIET = {"STRATA_PRINT_TABLES": "OFF", "STRATA_COMPONENTS": "trip_count"}

THREADED = """
import os
import threading
import time

def leaf():
    pass

def nap():
    time.sleep(0.01)
    leaf()

def worker():
    for _ in range(3):
        nap()

def main():
    t = threading.Thread(target=worker, name="worker-thread")
    t.start()
    t.join()
    nap()
    leaf()

with open("pid.txt", "w") as f:
    f.write(str(os.getpid()))
main()
"""


@pytest.fixture(scope="module")
def threaded(strata_bin, tmp_path_factory):
    """THREADED run once with all three components: (profile, {component: table}, pid,
    wall-clock bounds of the run in ns)."""
    runner = Runner(tmp_path_factory.mktemp("json"))
    runner.write("threaded.py", THREADED)
    before = time.time_ns()
    res = runner.strata("--components", "trip_count,wall_clock,cpu_clock", "--", "threaded.py",
                        env={"STRATA_PRINT_TABLES": "OFF"})
    after = time.time_ns()
    assert res.returncode == 0, res.describe()
    results = find_results(runner.dir)
    tables = {c: read_table(results, c) for c in TITLES}
    pid = int((runner.dir / "pid.txt").read_text())
    return load_profile(results), tables, pid, (before, after)


def test_layout(threaded):
    data, _, pid, (before, after) = threaded
    assert data["format_version"] == 2
    assert {"format_version", "metadata", "settings", "components", "metrics",
            "threads"} <= set(data)
    md = data["metadata"]
    assert isinstance(md["command"], list) and md["command"][-1] == "threaded.py", md["command"]
    assert md["python_version"] == platform.python_version()  # the suite runs the same venv
    assert md["pid"] == pid
    assert isinstance(md["host"], str) and md["host"]
    assert before <= md["start_time_ns"] <= md["end_time_ns"] <= after, md
    assert md["clock"] in ("tsc", "monotonic")
    assert md["dropped_calls"] == 0
    assert isinstance(md["strata_version"], str) and md["strata_version"]
    assert [c["name"] for c in data["components"]] == ["trip_count", "wall_clock", "cpu_clock"]
    for c in data["components"]:
        assert c["title"] == TITLES[c["name"]]
        assert c["units"] == ("calls" if c["name"] == "trip_count" else "ns")
    # format_version 2: the metrics every node carries, named by the registry
    assert [(m["name"], m["unit"], m["kind"]) for m in data["metrics"]] == [
        ("wall_clock", "ns", "timer"), ("cpu_clock", "ns", "timer")]
    assert all(isinstance(m["description"], str) and m["description"] for m in data["metrics"])
    for name, s in data["settings"].items():
        assert set(s) == {"value", "source"}, (name, s)
        assert isinstance(s["value"], str)
        assert s["source"] in ("default", "file", "environment", "flag", "program"), (name, s)
    threads = data["threads"]
    assert [t["index"] for t in threads] == list(range(len(threads)))
    assert threads[0]["name"] == "MainThread"
    assert threads[1]["name"] == "worker-thread"
    assert all(t["dropped_calls"] == 0 for t in threads)
    assert len({t["tid"] for t in threads}) == len(threads)


def test_nodes_well_formed(threaded):
    data = threaded[0]
    for t in data["threads"]:
        seen = {}
        for n in t["nodes"]:
            assert n["id"] not in seen, f"id {n['id']} twice"
            if n["parent"] == -1:
                assert n["depth"] == 0
            else:
                assert n["parent"] in seen, "a parent comes after its child"
                assert n["depth"] == seen[n["parent"]]["depth"] + 1
            assert isinstance(n["label"], str) and isinstance(n["count"], int)
            assert "trip_count" not in n  # trip_count is the count field
            assert set(n["metrics"]) == {"wall_clock", "cpu_clock"}, n
            for comp in ("wall_clock", "cpu_clock"):
                m = n["metrics"][comp]
                assert set(m) == {"sum", "self", "min", "max", "mean", "var"}, m
                assert 0 <= m["self"] <= m["sum"] + 1, m
                assert m["min"] <= m["mean"] + 1 and m["mean"] <= m["max"] + 1, m
                assert m["var"] >= 0
                assert abs(m["mean"] * n["count"] - m["sum"]) <= max(2, 1e-6 * m["sum"]), m
            seen[n["id"]] = n


def json_rows(data):
    """The nodes in table order: thread by thread, depth first, children in first-call
    order (their order in the file)."""
    rows = []
    for t in data["threads"]:
        kids = {}
        for n in t["nodes"]:
            kids.setdefault(n["parent"], []).append(n)
        stack = list(reversed(kids.get(-1, [])))
        while stack:
            n = stack.pop()
            rows.append((t["index"], n))
            stack.extend(reversed(kids.get(n["id"], [])))
    return rows


def test_json_says_what_the_tables_say(threaded):
    data, tables, _, _ = threaded
    rows = json_rows(data)
    trip = tables["trip_count"]
    assert [(i, n["depth"], n["label"], n["count"]) for i, n in rows] == \
        [(r.thread, r.depth, r.name, r.count) for r in trip.rows]
    for comp in ("wall_clock", "cpu_clock"):
        for (i, n), r in zip(rows, tables[comp].rows):
            m = n["metrics"][comp]
            for col, key in (("SUM", "sum"), ("MEAN", "mean"), ("MIN", "min"), ("MAX", "max")):
                assert abs(r.num(col) - m[key] / 1e9) <= 1.5e-6, (comp, r, col, m)
            assert abs(r.num("VAR") - m["var"] / 1e18) <= 1.5e-6, (comp, r, m)
            # the table divides the clock's ticks, profile.json holds them rounded to
            # whole nanoseconds: up to 100/sum percentage points apart, besides the
            # table's 0.05 of rounding (a 4.8 us call read 62.85 % here, 62.8 there)
            self_pct = 100.0 * m["self"] / m["sum"] if m["sum"] else 100.0
            slack = 0.05 + (100.0 / m["sum"] if m["sum"] else 0.0) + 1e-9
            assert abs(r.num("% SELF") - self_pct) <= slack or m["sum"] < 1000, \
                (comp, r.cells, m)


def test_sleeps_in_nanoseconds(threaded):
    data = threaded[0]
    worker = data["threads"][1]
    naps = [n for n in worker["nodes"] if n["label"] == "nap"]
    assert len(naps) == 1 and naps[0]["count"] == 3
    assert naps[0]["metrics"]["wall_clock"]["sum"] >= 0.029e9
    assert naps[0]["metrics"]["wall_clock"]["min"] >= 0.0095e9


# ------------------------------------------------------------------------- settings sources


def settings_of(runner, *args, env=None, script="tiny.py"):
    out = runner.dir / f"out{len(list(runner.dir.glob('out*')))}"
    res = runner.strata("-o", out, *args, "--", script, env={"STRATA_PRINT_TABLES": "OFF", **(env or {})})
    assert res.returncode == 0, res.describe()
    return load_profile(out)["settings"]


def test_settings_sources(runner):
    runner.write("tiny.py", "def f():\n    pass\nf()\n")
    runner.write("my.cfg", "STRATA_COMPONENTS = cpu_clock\nSTRATA_PRECISION = 4\n")
    s = settings_of(runner)
    assert s["components"] == {"value": "wall_clock", "source": "default"}
    assert s["trace_c"]["source"] == "default"
    s = settings_of(runner, "-c", "my.cfg")
    assert s["components"] == {"value": "cpu_clock", "source": "file"}
    assert s["precision"] == {"value": "4", "source": "file"}
    s = settings_of(runner, "-c", "my.cfg", env={"STRATA_COMPONENTS": "trip_count"})
    assert s["components"] == {"value": "trip_count", "source": "environment"}
    assert s["precision"]["source"] == "file"
    s = settings_of(runner, "-c", "my.cfg", "--components", "trip_count,wall_clock",
                    "--trace-c", env={"STRATA_COMPONENTS": "trip_count"})
    assert s["components"]["source"] == "flag"
    assert re.split(r"[, ]+", s["components"]["value"]) == ["trip_count", "wall_clock"]
    assert s["trace_c"]["source"] == "flag"


def test_settings_set_by_program(runner):
    runner.write("prog.py", """
        import strata
        from strata.profiler import config

        config.trace_c = True

        def f():
            return sorted([2, 1])

        with strata.profile():
            f()
    """)
    res = runner.plain("prog.py", env=QUIET)
    assert res.returncode == 0, res.describe()
    data = load_profile(find_results(runner.dir))
    assert data["settings"]["trace_c"]["source"] == "program"
    assert data["settings"]["components"]["source"] == "environment"
    labels = [n["label"] for n in data["threads"][0]["nodes"]]
    assert labels == ["f", "<built-in method sorted>"], labels


# ---------------------------------------------------------------------- escaping, limits


def test_labels_with_control_characters(runner):
    """Labels are user data: quotes, backslashes and control characters are escaped."""
    weird = 'we"ird\\name\x01\ttab\nnewline'
    runner.write("weird.py", f"""
        def f():
            pass

        f.__code__ = f.__code__.replace(co_name={weird!r}, co_qualname={weird!r})
        f()
    """)
    res = runner.strata("--", "weird.py", env=QUIET)
    assert res.returncode == 0, res.describe()
    text = (find_results(runner.dir) / "profile.json").read_text()
    data = json.loads(text)  # strict: a raw control character is an error
    assert [n["label"] for n in data["threads"][0]["nodes"]] == [weird]


def test_text_tables_escape_labels(runner):
    """A label's escape sequences and newlines never reach the terminal raw nor break
    a row: in the tables on stderr, the table files, `strata report` and the
    load-balance table alike."""
    evil = "\x1b]0;pwned\x07\x1b[2J\nrow\rcr\x9b31m caf\u00e9\x7f"
    runner.write("evil.py", f"""
        def f():
            pass

        f.__code__ = f.__code__.replace(co_name={evil!r}, co_qualname={evil!r})
        f()
    """)
    res = runner.strata("-o", "res", "--", "evil.py", env={"STRATA_COMPONENTS": "trip_count"})
    assert res.returncode == 0, res.describe()
    want = "\\e]0;pwned\\x07\\e[2J\\nrow\\rcr\\u009b31m caf\u00e9\\x7f"  # UTF-8 kept
    for text in (res.stderr, (runner.dir / "res" / "trip_count.txt").read_text(),
                 runner.run([STRATA_BIN, "report", "res"]).stdout):
        assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", text), repr(text)
        rows = [ln for ln in text.splitlines() if ln.startswith("| |0>>>")]
        assert len(rows) == 1 and want in rows[0], text
        table = [ln for ln in text.splitlines() if ln.startswith("|")]
        assert len({len(ln.encode()) for ln in table}) == 1, table  # rows as wide as the rule
    # the same label under two ranks: the load-balance table escapes it too
    for rank in (0, 1):
        res = runner.strata("-o", "job", "--", "evil.py",
                            env={"STRATA_COMPONENTS": "trip_count", "PMI_RANK": str(rank),
                                 "STRATA_PRINT_TABLES": "OFF"})
        assert res.returncode == 0, res.describe()
    text = runner.run([STRATA_BIN, "report", "job"]).stdout
    assert "LOAD BALANCE" in text and want in text
    # the folder named on the terminal too
    res = runner.strata("-o", "odd\x1b[31m", "--", "evil.py")
    assert res.returncode == 0 and "[strata] results in odd\\e[31m\n" in res.stderr, res.stderr
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", text), repr(text)


def test_max_nodes_drops_calls_and_says_so(runner):
    runner.copy_example()
    res = runner.strata("--", "example.py", env={"STRATA_COMPONENTS": "trip_count",
                                                 "STRATA_MAX_NODES": "5"})
    assert res.returncode == 0, res.describe()
    data = load_profile(find_results(runner.dir))
    main = data["threads"][0]
    assert len(main["nodes"]) <= 5
    assert main["dropped_calls"] > 0
    assert data["metadata"]["dropped_calls"] == sum(t["dropped_calls"] for t in data["threads"])
    assert "STRATA_MAX_NODES" in res.stderr


# ----------------------------------------------------------------------- bounded memory

CALLS = """
import sys

def tiny():
    pass

def main(n):
    for _ in range(n):
        tiny()

main(int(sys.argv[1]))
"""


def test_memory_grows_with_paths_not_calls(runner):
    runner.write("calls.py", CALLS)
    nodes = {}
    for n in (200_000, 2_000_000):
        out = runner.dir / f"out{n}"
        res = runner.strata("-o", out, "--", "calls.py", str(n), env=QUIET)
        assert res.returncode == 0, res.describe()
        table = read_table(out, "trip_count")
        assert table.get("main", "tiny").count == n
        nodes[n] = (count_nodes(load_profile(out)), len(table.rows))
    assert nodes[200_000] == nodes[2_000_000], nodes
    assert nodes[200_000][0] == 2


# Peak RSS of one child command, measured from a fresh Python whose only child it is.
MAXRSS = """
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:])
print("maxrss", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, flush=True)
sys.exit(r.returncode)
"""


def peak_rss(runner, args, env=None):
    res = runner.run([PYTHON, "-c", MAXRSS, *map(str, args)], env=env)
    assert res.returncode == 0, res.describe()
    return res, int(re.search(r"^maxrss (\d+)$", res.stdout, re.M).group(1)) * 1024


@pytest.mark.skipif(SANITIZED, reason="ASan's quarantine and redzones change what RSS measures")
def test_writing_results_costs_little_memory(runner):
    """Writing the results streams every file, the text table too: the peak RSS at
    exit is the call tree plus a constant, not 3-4 times the tree (200,000 nodes cost
    590 bytes a node more at exit once; then about 140 while the table was built
    whole, a grid of every row; 1,001,000 nodes: +156 MB at exit then, +0.1 MB now,
    the table streamed a row at a time)."""
    nf, ng = 200, 1000
    runner.write("bigmod.py", "\n".join(
        [f"def g{j}(): pass" for j in range(ng)]
        + ["gs = [" + ", ".join(f"g{j}" for j in range(ng)) + "]"]
        + [f"def f{i}():\n    for g in gs: g()" for i in range(nf)]
        + ["fs = [" + ", ".join(f"f{i}" for i in range(nf)) + "]"]) + "\n")
    runner.write("big.py", """
        import atexit
        import bigmod

        for f in bigmod.fs:
            f()

        def hwm():  # runs before strata writes (strata's handler was registered first)
            for ln in open("/proc/self/status"):
                if ln.startswith("VmHWM"):
                    print("hwm", int(ln.split()[1]) * 1024, flush=True)

        atexit.register(hwm)
    """)
    res, peak = peak_rss(runner, [STRATA_BIN, "python", "-o", "big", "--", "big.py"],
                         env={"STRATA_PRINT_TABLES": "OFF"})
    before = int(re.search(r"^hwm (\d+)$", res.stdout, re.M).group(1))
    nodes = count_nodes(load_profile(runner.dir / "big"))
    assert nodes >= nf + nf * ng, nodes
    # the table written is far larger than what the bound allows writing to cost
    table = (runner.dir / "big" / "wall_clock.txt").stat().st_size
    assert table > 100 * nodes, table
    per_node = (peak - before) / nodes
    assert per_node < 30, f"writing the results cost {per_node:.0f} bytes a node"


def test_fork_profile_is_the_parents(runner):
    """A forked child that exits normally writes its own results, in a folder of its
    own (STRATA_FOLLOW_CHILDREN), never over its parent's: profile.json has the
    parent's pid and calls (the child ends last); with following off the child
    writes nothing."""
    runner.write("forker.py", """
        import os
        import sys
        import time

        def child_only():
            pass

        with open("parent.pid", "w") as f:
            f.write(str(os.getpid()))
        parent = os.getpid()
        sys.stdout.flush()
        if os.fork() == 0:
            deadline = time.monotonic() + 10
            while os.getppid() == parent and time.monotonic() < deadline:
                time.sleep(0.005)
            child_only()
            sys.exit(0)
    """)
    for follow in ("ON", "OFF"):
        res = runner.strata("-o", follow, "--follow-children", follow, "--", "forker.py",
                            env=QUIET)
        assert res.returncode == 0, res.describe()
        results = runner.dir / follow
        data = load_profile(results)
        assert data["metadata"]["pid"] == int((runner.dir / "parent.pid").read_text())
        assert "child_only" not in [n["label"] for t in data["threads"] for n in t["nodes"]]
        leftovers = sorted(p for p in os.listdir(results)
                           if p not in ("profile.json", "trip_count.txt"))
        if follow == "OFF":
            assert not leftovers, leftovers
            continue
        assert len(leftovers) == 2 and leftovers[1] == "processes.jsonl", leftovers
        # the child writes once its parent has ended (and strata with it)
        deadline = time.monotonic() + TIMEOUT
        while not (results / leftovers[0] / "profile.json").exists():
            assert time.monotonic() < deadline, os.listdir(results / leftovers[0])
            time.sleep(0.01)
        child = load_profile(results / leftovers[0])
        assert leftovers[0] == f"process-{child['metadata']['pid']}"
        assert "child_only" in [n["label"] for t in child["threads"] for n in t["nodes"]]
