"""`strata diff` (issue 15, part 5): runs compared function by function, the noise of
each change from the runs' spread, and --fail-on as a CI gate."""

from __future__ import annotations

import json
import re

import pytest

from conftest import REPO, STRATA, have_strata

pytestmark = pytest.mark.skipif(not have_strata(), reason=f"strata is not built: {STRATA}")

# small() takes about 5 % of the time; SLOW scales its work, CALLS its calls
PROG = REPO / "bench" / "workloads" / "diff_split.py"
SMALL, BIG = "diff_split:9:small", "diff_split:16:big"


def run_once(runner, folder, script, env) -> str:
    r = runner.strata("-o", folder, script,
                      env={"STRATA_PRINT_TABLES": "OFF", **{k: str(v) for k, v in env.items()}})
    assert r.returncode == 0, r.describe()
    return str(folder)


def runs(runner, name: str, n: int, **env) -> list[str]:
    """n runs of the program, each its own results folder."""
    return [run_once(runner, runner.dir / f"{name}{i}", PROG, env) for i in range(n)]


def sides(runner, n: int, a_env: dict, b_env: dict, script=PROG, prefix="") -> tuple[list, list]:
    """n runs a side, A and B in turn (as bench/diff_bench.py and the docs advise: a
    slow spell of the machine then falls on both sides, not on one)."""
    a, b = [], []
    for i in range(n):
        a.append(run_once(runner, runner.dir / f"{prefix}a{i}", script, a_env))
        b.append(run_once(runner, runner.dir / f"{prefix}b{i}", script, b_env))
    return a, b


def diff(runner, *args):
    return runner.run([STRATA, "diff", *map(str, args)])


def test_slower_function_flagged(runner):
    """small() made 60 % slower in B: flagged beyond the noise of five runs a side,
    --fail-on exits 1; big() is not; the JSON says the same. A slow spell of the
    machine longer than a pair of runs can still make the unchanged big() read slower
    on one side beyond its spread (+39 % once here, in make test's 3.14 leg):
    the runs are then taken again, three times at most."""
    for attempt in range(3):
        a, b = sides(runner, 5, {}, {"SLOW": 1.6}, prefix=f"try{attempt}-")
        r = diff(runner, "--fail-on", 25, *a, "--", *b)
        rows = {ln.split("|")[1].strip(): ln for ln in r.stdout.splitlines()
                if ln.startswith("| diff")}
        if "SLOWER" not in rows.get(BIG, ""):
            break
    assert r.returncode == 1, r.describe()
    assert "SLOWER" in rows[SMALL] and "SLOWER" not in rows.get(BIG, ""), r.stdout
    assert "CHANGES, A (5 RUNS) TO B (5 RUNS)" in r.stdout
    j = diff(runner, "--format", "json", "--fail-on", 25, *a, "--", *b)
    assert j.returncode == 1, j.describe()
    doc = json.loads(j.stdout)
    fns = {f["name"]: f for f in doc["functions"]}
    assert doc["runs"] == [5, 5] and doc["regressions"] == 1
    small = fns[SMALL]
    assert small["regression"] and small["change"] > 25 and small["calls"] == [10, 10]
    assert small["self"][1] - small["self"][0] > small["noise"] > 0
    assert 2 < small["share"] < 15, small
    # most grown first (in time: big()'s noise may outgrow small()'s 60 %, so the
    # order, not small()'s place, is what is checked)
    growth = [f["self"][1] - f["self"][0] for f in doc["functions"]]
    assert growth == sorted(growth, reverse=True)
    # without --fail-on the change is said and the status is 0
    assert diff(runner, *a, "--", *b).returncode == 0
    # the differential flame graph: B's paths, small() red (it grew 60 %), the table
    page = runner.dir / "diff.html"
    h = diff(runner, "--format", "html", "-o", page, *a, "--", *b)
    assert h.returncode == 0 and h.stdout == "", h.describe()
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "A (5 runs) to B (5 runs)" in html
    frames = re.findall(r"<title>([^\n<]*)\n.*?fill=\"rgb\((\d+),(\d+),(\d+)\)\"", html, re.S)
    colour = {name: tuple(map(int, rgb)) for name, *rgb in frames}
    assert colour["small"][0] == 255 and colour["small"][1] < 200, colour
    # every frame's colour is its tooltip's change of mean self time (full at 50 %,
    # red grew, blue shrank): big() may move either way by the machine's noise
    tips = re.findall(r"<title>([^\n<]*)\nself: ([\d.]+) s in A, ([\d.]+) s in B", html)
    assert {name for name, *_ in tips} >= {"small", "big"}, tips
    for name, a_s, b_s in tips:
        a_s, b_s = float(a_s), float(b_s)
        if name not in ("small", "big"):
            continue
        c = max(-1.0, min(1.0, (b_s - a_s) / max(a_s, b_s) / 0.5))
        s = round(255 * (1 - abs(c)))
        want = (255 if c >= 0 else s, s, 255 if c <= 0 else s)
        assert all(abs(x - y) <= 1 for x, y in zip(colour[name], want)), (name, colour, want)
    assert "CHANGES, A (5 RUNS) TO B (5 RUNS)" in html and "SLOWER" in html


def test_same_program_nothing_flagged(runner):
    """Two sets of runs of the same program: nothing beyond the noise at 25 %, exit 0;
    call counts equal."""
    a = runs(runner, "a", 4)
    b = runs(runner, "b", 4)
    r = diff(runner, "--fail-on", 25, "--format", "json", *a, "--", *b)
    assert r.returncode == 0, r.describe()
    doc = json.loads(r.stdout)
    assert doc["regressions"] == 0
    assert all(f["calls"][0] == f["calls"][1] for f in doc["functions"]), doc


def test_calls_compared_exactly(runner):
    """Two single runs: the changed call count is said ("calls"), whatever the times."""
    a = runs(runner, "a", 1)
    b = runs(runner, "b", 1, CALLS=11)
    r = diff(runner, a[0], b[0])
    assert r.returncode == 0, r.describe()
    row = next(ln for ln in r.stdout.splitlines() if SMALL in ln)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:3] == ["10", "11"] and cells[-1] in ("calls", "SLOWER"), cells


def test_by_rank(runner):
    """Two runs of a two-rank job (each rank's profile in one folder, as an MPI
    launcher's ranks write them): with --by-rank each rank's functions are apart,
    and only rank 1's small(), made four times slower, is SLOWER; without it the
    ranks are summed. One run a side: small() is called 40 times (about 25 ms), so
    that a pause of a few milliseconds does not make rank 0's 2.5 times slower (rank
    1's is 4 times: --fail-on 150)."""
    for name, slow in (("a", 1), ("b", 4)):
        for rank in (0, 1):
            r = runner.strata("-o", runner.dir / name, PROG, env={
                "STRATA_PRINT_TABLES": "OFF", "OMPI_COMM_WORLD_RANK": str(rank),
                "SLOW": str(slow if rank == 1 else 1), "CALLS": "40"})
            assert r.returncode == 0, r.describe()
    r = diff(runner, "--by-rank", "--format", "json", "--fail-on", 150, runner.dir / "a",
             runner.dir / "b")
    assert r.returncode == 1, r.describe()
    fns = {f["name"]: f for f in json.loads(r.stdout)["functions"]}
    assert f"[rank 0] {SMALL}" in fns and f"[rank 1] {BIG}" in fns, sorted(fns)
    assert fns[f"[rank 1] {SMALL}"]["regression"] and not fns[f"[rank 0] {SMALL}"]["regression"]
    summed = json.loads(diff(runner, "--format", "json", runner.dir / "a",
                             runner.dir / "b").stdout)
    assert {f["name"] for f in summed["functions"]} >= {SMALL, BIG}
    assert next(f for f in summed["functions"] if f["name"] == SMALL)["calls"] == [80, 80]


def test_by_thread(runner):
    """--by-thread: the same function run by two threads, made four times slower in
    the thread named "worker" only: that thread's is SLOWER, the main thread's not;
    threads are matched by name from run to run."""
    runner.write("threads.py", """
        import os, threading

        def spin(n):
            s = 0
            for i in range(n):
                s += i
            return s

        t = threading.Thread(name="worker",
                             target=lambda: spin(int(300000 * float(os.environ["SLOW"]))))
        t.start()
        t.join()
        spin(300000)
    """)
    # three runs a side, in turn: the main thread's spin() has its noise measured
    a, b = sides(runner, 3, {"SLOW": 1}, {"SLOW": 4}, script=runner.dir / "threads.py")
    r = diff(runner, "--by-thread", "--format", "json", "--fail-on", 50, *a, "--", *b)
    assert r.returncode == 1, r.describe()
    fns = {f["name"]: f for f in json.loads(r.stdout)["functions"]}
    worker = [k for k in fns if k.startswith("[worker] ") and k.endswith(":spin")]
    main = [k for k in fns if k.startswith("[MainThread] ") and k.endswith(":spin")]
    assert len(worker) == 1 and len(main) == 1, sorted(fns)
    assert fns[worker[0]]["regression"] and not fns[main[0]]["regression"], fns


@pytest.mark.parametrize("args, words", [
    ([], "compares two results"),
    (["only-one"], "compares two results"),
    (["a", "--"], "needs runs on both sides"),
    (["--fail-on", "x", "a", "b"], "needs a percentage"),
    (["--format", "xml", "a", "b"], "takes text, json or html"),
    (["--bogus", "a", "b"], "unknown option"),
    (["/nonexistent/a", "/nonexistent/b"], "cannot read"),
])
def test_mistakes(runner, args, words):
    r = diff(runner, *args)
    assert r.returncode == 2 and r.stdout == "", r.describe()
    assert r.stderr.startswith("strata: error: ") and words in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
