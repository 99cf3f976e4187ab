"""The three components: table titles and columns, and sanity of the times they measure
(generous bounds only: a 0.2 s sleep, a busy loop), and the precision setting."""

import re

import pytest

from conftest import TIMING_COLUMNS, TITLES, Runner, find_results, read_table, tables_in

TIMED = """
import time

def sleeper():
    time.sleep(0.2)

def outer():
    sleeper()

def busy():
    x = 0
    end = time.perf_counter() + 0.15
    while time.perf_counter() < end:
        x += 1
    return x

outer()
busy()
"""

NUMERIC = ["SUM", "MEAN", "MIN", "MAX", "VAR", "STDDEV"]


@pytest.fixture(scope="module")
def timed(strata_bin, tmp_path_factory):
    """Run TIMED once with all three components; return {component: table}."""
    runner = Runner(tmp_path_factory.mktemp("timed"))
    runner.write("timed.py", TIMED)
    res = runner.strata("--components", "trip_count,wall_clock,cpu_clock", "--", "timed.py")
    assert res.returncode == 0 and res.stdout == "", res.describe()
    results = find_results(runner.dir)
    assert sorted(p.name for p in results.glob("*.txt")) == \
        ["cpu_clock.txt", "trip_count.txt", "wall_clock.txt"]
    tables = {c: read_table(results, c) for c in TITLES}
    printed = tables_in(res.stderr)
    assert sorted(printed) == sorted(t.text for t in tables.values()), res.describe()
    return tables


def test_titles_and_columns(timed):
    assert timed["trip_count"].columns == ["LABEL", "COUNT", "DEPTH", "METRIC", "SUM"]
    for comp in ("wall_clock", "cpu_clock"):
        table = timed[comp]
        assert table.title == TITLES[comp]
        assert table.columns == TIMING_COLUMNS, table.text
        header = table.text.split("\n")[3]
        assert "% SELF" in header
        for row in table.rows:
            assert row.cells["METRIC"] == comp, row
            assert row.cells["UNITS"] == "sec", row
            for col in NUMERIC:
                assert re.fullmatch(r"\d+\.\d{6}", row.cells[col]), (col, row.cells[col])
            assert 0.0 <= row.num("% SELF") <= 100.0, row.cells


def test_same_tree_in_every_component(timed):
    shapes = {c: [(r.path, r.count) for r in t.rows] for c, t in timed.items()}
    assert shapes["trip_count"] == shapes["wall_clock"] == shapes["cpu_clock"]
    assert shapes["trip_count"] == [(("outer",), 1), (("outer", "sleeper"), 1), (("busy",), 1)]


def test_sleep_is_wall_time_not_cpu_time(timed):
    wall = timed["wall_clock"].get("outer", "sleeper")
    cpu = timed["cpu_clock"].get("outer", "sleeper")
    assert wall.num("SUM") >= 0.19, wall.cells
    assert wall.num("SUM") < 5.0, wall.cells
    assert cpu.num("SUM") < 0.05, cpu.cells
    # one call: every statistic is that call
    for col in ("MEAN", "MIN", "MAX"):
        assert wall.num(col) == wall.num("SUM"), wall.cells
    assert wall.num("VAR") == 0 and wall.num("STDDEV") == 0
    # outer spends its time in sleeper; sleeper in itself (time.sleep is not traced)
    outer = timed["wall_clock"].get("outer")
    assert outer.num("SUM") >= wall.num("SUM")
    assert outer.num("% SELF") < 20, outer.cells
    assert wall.num("% SELF") > 80, wall.cells


def test_busy_loop_cpu_close_to_wall(timed):
    wall = timed["wall_clock"].get("busy").num("SUM")
    cpu = timed["cpu_clock"].get("busy").num("SUM")
    assert wall >= 0.14, wall
    assert 0.5 * wall <= cpu <= wall + 0.02, (cpu, wall)


def test_variance_of_several_calls(runner):
    runner.write("var.py", """
        import time

        def nap(t):
            time.sleep(t)

        for t in (0.01, 0.05, 0.09):
            nap(t)
    """)
    res = runner.strata("--", "var.py", env={"STRATA_PRINT_TABLES": "OFF"})
    assert res.returncode == 0, res.describe()
    row = read_table(find_results(runner.dir), "wall_clock").get("nap")
    assert row.count == 3
    assert row.num("MIN") >= 0.009 and row.num("MAX") >= 0.089
    assert row.num("MIN") <= row.num("MEAN") <= row.num("MAX")
    assert abs(row.num("MEAN") * 3 - row.num("SUM")) < 1e-5
    # sample or population variance of ~(0.01, 0.05, 0.09): 0.0016 or 0.00107
    assert 0.0005 < row.num("VAR") < 0.003, row.cells
    assert abs(row.num("STDDEV") ** 2 - row.num("VAR")) < 1e-5, row.cells


@pytest.mark.parametrize("precision", ["3", "9"])
def test_precision(runner, precision):
    runner.write("tiny.py", "import time\ndef f():\n    time.sleep(0.001)\nf()\n")
    res = runner.strata("--", "tiny.py", env={"STRATA_PRINT_TABLES": "OFF",
                                              "STRATA_PRECISION": precision})
    assert res.returncode == 0, res.describe()
    row = read_table(find_results(runner.dir), "wall_clock").get("f")
    for col in NUMERIC:
        assert re.fullmatch(r"\d+\.\d{%s}" % precision, row.cells[col]), (col, row.cells)


def test_default_component_is_wall_clock(runner):
    runner.write("tiny.py", "def f():\n    pass\nf()\n")
    res = runner.strata("--", "tiny.py")
    assert res.returncode == 0, res.describe()
    results = find_results(runner.dir)
    assert sorted(p.name for p in results.glob("*.txt")) == ["wall_clock.txt"]
    assert [t.split("\n")[1].strip("| ") for t in tables_in(res.stderr)] == [TITLES["wall_clock"]]
