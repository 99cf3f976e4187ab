"""What the terminal gets, and how large the tables on disk grow (issue 9, item 25).

Small tables go to the terminal whole, byte for byte as before (test_golden.py);
past 256 KiB the terminal gets the top functions by own time and where the full
tables are. On disk, rows stop at depth 256 and what lies deeper is one folded row,
so a deep recursion makes a small table and no table is larger than profile.json."""

from __future__ import annotations

import pytest

from conftest import STRATA, have_strata, load_profile, read_table, tables_in

pytestmark = pytest.mark.skipif(not have_strata(), reason=f"strata is not built: {STRATA}")

DEEP = """
import sys
sys.setrecursionlimit(30000)

def deep(n):
    return 0 if n == 0 else 1 + deep(n - 1)

def main():
    deep(10000)

main()
"""

WIDE = """
src = "".join(f"def function_number_{i}(x):\\n    return x + {i}\\n" for i in range(20000))
exec(compile(src, "generated.py", "exec"))
fs = [globals()[f"function_number_{i}"] for i in range(20000)]

def sq(i):
    return i * i

def hot():
    for i in range(50000):
        sq(i)

def main():
    for f in fs:
        f(1)
    hot()

main()
"""

COMPONENTS = "trip_count,wall_clock,cpu_clock"


def sizes(results):
    json_size = (results / "profile.json").stat().st_size
    return json_size, {c: (results / f"{c}.txt").stat().st_size for c in COMPONENTS.split(",")}


def test_deep_recursion_folds(runner):
    runner.write("deep.py", DEEP)
    r = runner.strata("--", "deep.py", env={"STRATA_COMPONENTS": COMPONENTS})
    assert r.returncode == 0, r.describe()
    res = runner.results()
    json_size, tables = sizes(res)
    for name, size in tables.items():
        assert size < json_size / 10, (name, size, json_size)
    table = read_table(res, "wall_clock")
    rows = table.named("deep")
    assert len(rows) == 256 and max(r.depth for r in rows) == 256
    folded = [r for r in table.rows if r.name.startswith("... ")]
    assert len(folded) == 1, folded
    fold = folded[0]
    assert fold.count == 10001 - 256 and fold.depth == 257
    assert fold.name == f"... {10001 - 256} calls in {10001 - 256} deeper nodes (folded)"
    # the folded row holds the time under the last row shown
    last = [r for r in rows if r.depth == 256][0]
    assert fold.num("SUM") <= last.num("SUM")
    assert abs(fold.num("SUM") - last.num("SUM")) < 0.001
    trips = read_table(res, "trip_count")
    assert [r for r in trips.rows if r.name.startswith("... ")][0].num("SUM") == 10001 - 256


def test_small_tables_printed_whole(runner):
    runner.write("deep.py", DEEP.replace("10000", "100"))
    r = runner.strata("--", "deep.py", env={"STRATA_COMPONENTS": COMPONENTS})
    assert r.returncode == 0, r.describe()
    printed = tables_in(r.stderr)
    assert len(printed) == 3 and "too long for the terminal" not in r.stderr
    assert printed[1] == (runner.results() / "wall_clock.txt").read_text()


def test_many_nodes_terminal_gets_a_summary(runner):
    runner.write("wide.py", WIDE)
    r = runner.strata("--", "wide.py", env={"STRATA_COMPONENTS": COMPONENTS})
    assert r.returncode == 0, r.describe()
    res = runner.results()
    assert len(r.stderr) < 20_000, len(r.stderr)
    assert "TOP 20 FUNCTIONS BY OWN TIME (wall_clock)" in r.stderr, r.stderr
    assert "too long for the terminal" in r.stderr
    for c in COMPONENTS.split(","):
        assert f"{res}/{c}.txt" in r.stderr or f"{res.relative_to(runner.dir)}/{c}.txt" in r.stderr
    lines = r.stderr.splitlines()
    first = [ln for ln in lines if ln.startswith("| ") and "FUNCTION" not in ln][0]
    assert "function_number" not in first, first
    assert first.split("|")[1].strip() in ("hot", "main", "sq"), first
    # the full tables are on disk, every node a row, none larger than profile.json
    table = read_table(res, "wall_clock")
    assert len(table.rows) >= 20000
    json_size, tables = sizes(res)
    for name, size in tables.items():
        assert size <= json_size, (name, size, json_size)
    assert load_profile(res)


def test_many_nodes_and_a_deep_path(runner):
    """Thousands of short rows beside one path 300 deep: indentation stops at 16
    levels in so big a table, so the deep path does not widen every row past what
    profile.json takes for the same nodes."""
    runner.write("wd.py", WIDE.replace("    hot()\n", "    hot()\n    deep(300)\n").replace(
        "def main():", "def deep(n):\n    return 0 if n == 0 else 1 + deep(n - 1)\n\ndef main():"))
    for comps in ("trip_count", "wall_clock", "trip_count,wall_clock,cpu_clock"):
        out = runner.dir / comps.replace(",", "_")
        r = runner.strata("-o", out, "--", "wd.py", env={"STRATA_COMPONENTS": comps})
        assert r.returncode == 0, r.describe()
        json_size = (out / "profile.json").stat().st_size
        for c in comps.split(","):
            size = (out / f"{c}.txt").stat().st_size
            assert size <= json_size, (c, size, json_size)
        table = read_table(out, comps.split(",")[0])
        deep = table.named("deep")
        assert len(deep) == 256 and max(r.depth for r in deep) == 256
        assert max(r.indent for r in deep) == 2 * 16


def test_trip_count_summary_by_calls(runner):
    runner.write("wide.py", WIDE)
    r = runner.strata("--", "wide.py", env={"STRATA_COMPONENTS": "trip_count"})
    assert r.returncode == 0, r.describe()
    assert "TOP 20 FUNCTIONS BY CALLS (trip_count)" in r.stderr, r.stderr[-3000:]
    lines = r.stderr.splitlines()
    head = [i for i, ln in enumerate(lines) if "% CALLS" in ln][0]
    top = lines[head + 2]
    assert top.split("|")[1].strip() == "sq" and top.split("|")[2].strip() == "50000", top


def test_long_label_cut_in_tables(runner):
    """One very long label does not widen every row of the tables: it is cut at 256
    bytes (profile.json keeps it whole)."""
    name = "f" + "x" * 5000
    runner.write("long.py", f"""
def {name}():
    pass

def main():
    for i in range(3):
        {name}()

main()
""")
    r = runner.strata("--", "long.py")
    assert r.returncode == 0, r.describe()
    res = runner.results()
    row = [r for r in read_table(res, "wall_clock").rows if r.name.startswith("fx")][0]
    assert row.name.endswith("...") and len(row.name.encode()) <= 256, len(row.name.encode())
    assert row.name[:-3] == name[:len(row.name) - 3] and row.count == 3
    prof = load_profile(res)
    assert any(n["label"] == name for th in prof["threads"] for n in th["nodes"])
    assert (res / "wall_clock.txt").stat().st_size < 4000  # 10 lines of about 380 bytes


def test_summary_without_table_files(runner):
    """Tables that are not written to files (STRATA_OUTPUT_FORMATS=json) are rendered
    for the terminal only: past 256 KiB they are summarized too, and the terminal is
    told how to get them."""
    runner.write("wide.py", WIDE)
    r = runner.strata("--", "wide.py", env={"STRATA_COMPONENTS": "wall_clock",
                                            "STRATA_OUTPUT_FORMATS": "json"})
    assert r.returncode == 0, r.describe()
    assert len(r.stderr) < 20_000, len(r.stderr)
    assert "TOP 20 FUNCTIONS BY OWN TIME (wall_clock)" in r.stderr, r.stderr[-3000:]
    assert "`strata report` on the results prints the full tables" in r.stderr
    res = runner.results()
    assert not list(res.glob("*.txt")) and load_profile(res)


def test_no_tables_still_warns(runner):
    """STRATA_PRINT_TABLES=OFF prints neither tables nor their summary, but the
    warning about calls not recorded still prints (the notes stream)."""
    runner.write("wide.py", WIDE)
    r = runner.strata("--", "wide.py", env={"STRATA_PRINT_TABLES": "OFF",
                                            "STRATA_MAX_NODES": "5000"})
    assert r.returncode == 0, r.describe()
    assert "FUNCTIONS BY" not in r.stderr and "|0>>>" not in r.stderr, r.stderr[-3000:]
    assert "calls were not recorded (STRATA_MAX_NODES reached)" in r.stderr, r.stderr
