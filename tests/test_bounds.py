"""Bounds of the call tree (issue 9, item 8): with STRATA_MAX_NODES every call that is
not recorded is counted, those made under a dropped call too, and the labels and
functions a profile lists stay bounded by its nodes, however many distinct functions
the program runs."""

from __future__ import annotations

import pytest

from conftest import STRATA, count_nodes, have_strata, load_profile

pytestmark = pytest.mark.skipif(not have_strata(), reason=f"strata is not built: {STRATA}")

# 300 distinct functions, each calling a leaf 5 times: 1 + 300 * 6 calls from main.
MANY = """
def leaf():
    pass

src = "".join(f"def f{i}():\\n    for _ in range(5):\\n        leaf()\\n" for i in range(300))
exec(compile(src, "generated.py", "exec"))
fs = [globals()[f"f{i}"] for i in range(300)]

def main():
    for f in fs:
        f()

main()
"""


def calls(profile):
    return sum(n["count"] for th in profile["threads"] for n in th["nodes"])


def test_dropped_counts_every_missing_call(runner):
    runner.write("many.py", MANY)
    r = runner.strata("-o", "full", "--", "many.py")
    assert r.returncode == 0, r.describe()
    full = load_profile(runner.dir / "full")
    assert full["metadata"]["dropped_calls"] == 0
    total = calls(full)
    assert total >= 1 + 300 * 6
    r = runner.strata("-o", "cut", "--", "many.py", env={"STRATA_MAX_NODES": 50})
    assert r.returncode == 0, r.describe()
    cut = load_profile(runner.dir / "cut")
    dropped = cut["metadata"]["dropped_calls"]
    assert count_nodes(cut) <= 50
    # every call is either in the tree or counted: the leaf calls under a dropped fN too
    assert calls(cut) + dropped == total, (calls(cut), dropped, total)
    assert f"{dropped} calls were not recorded" in r.stderr, r.stderr[-2000:]


def test_functions_bounded_by_nodes(runner):
    runner.write("many.py", MANY)
    r = runner.strata("--", "many.py", env={"STRATA_MAX_NODES": 50})
    assert r.returncode == 0, r.describe()
    prof = load_profile(runner.results())
    nodes = count_nodes(prof)
    assert nodes <= 50
    # a function is listed only if a node names it (not every function that ran)
    assert len(prof.get("functions", [])) <= nodes, (len(prof["functions"]), nodes)
