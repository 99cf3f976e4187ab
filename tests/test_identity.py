"""Function identity (issue 9, items 2 and 29).

A call-tree node is a function, (file, first line, qualified name) for Python code
and the C function for --trace-c calls, not its display text: two modules' `work()`,
`re.compile` and `re._compiler.compile`, and several methods named `run` are
separate nodes and separate entries in every output, and `strata report` rebuilds
them from profile.json. Text tables still show the short label. --trace-c labels
are the names cProfile gives the same calls, checked against cProfile itself."""

from __future__ import annotations

import json
import pstats
import re
import subprocess

import pytest

from conftest import PYTHON, STRATA, have_strata, load_profile, read_table

pytestmark = pytest.mark.skipif(not have_strata(), reason=f"strata is not built: {STRATA}")

MAIN = """
import re
import pa.mod, pb.mod

class A:
    def run(self):
        return 1

class B:
    def run(self):
        return 2

def main():
    for _ in range(3):
        pa.mod.work()
        pb.mod.work()
        A().run()
        B().run()
    re.compile("a+b" + "c")
    # main's own time dwarfs work(): the dot writer's -n 0.5 drops it on any machine
    sum(range(3_000_000))

main()
"""


def make_program(runner):
    for pkg, n in (("pa", 100), ("pb", 200)):
        runner.write(f"{pkg}/__init__.py", "")
        runner.write(f"{pkg}/mod.py", f"def work():\n    return sum(range({n}))\n")
    runner.write("main.py", MAIN)


def nodes_of(profile):
    for th in profile["threads"]:
        yield from th["nodes"]


@pytest.fixture
def result(runner):
    make_program(runner)
    r = runner.strata("--", "main.py", env={
        "STRATA_OUTPUT_FORMATS": "text,json,pstats,callgrind,folded,speedscope,dot,html"})
    assert r.returncode == 0, r.describe()
    return runner.results()


def test_same_name_functions_are_separate_nodes(result):
    prof = load_profile(result)
    fns = prof["functions"]
    works = [n for n in nodes_of(prof) if n["label"] == "work"]
    assert len(works) == 2, works
    files = sorted(fns[n["function"]]["file"] for n in works)
    assert files[0].endswith("pa/mod.py") and files[1].endswith("pb/mod.py"), files
    assert all(n["count"] == 3 for n in works)
    runs = [n for n in nodes_of(prof) if n["label"] in ("A.run", "B.run")]
    assert sorted(fns[n["function"]]["qualname"] for n in runs) == ["A.run", "B.run"]
    # the table keeps the short label: two rows named work, three calls each
    rows = [r for r in read_table(result, "wall_clock").rows if r.name == "work"]
    assert [r.count for r in rows] == [3, 3], rows


def test_pstats_keys_each_function(result):
    stats = pstats.Stats(str(result / "profile.prof")).stats
    works = {k: v for k, v in stats.items() if k[2] == "work"}
    assert len(works) == 2 and all(v[1] == 3 for v in works.values()), works
    assert len([k for k in stats if k[2] == "run"]) == 2
    # re.compile and re._compiler.compile: no false recursion
    compiles = [k for k in stats if k[2] == "compile" and "/re/" in k[0]]
    assert len(compiles) == 2, compiles
    for k in compiles:
        assert k not in stats[k][4], f"{k} shown calling itself"


def test_callgrind_names_are_unique(result):
    text = (result / "callgrind.out").read_text()
    names = {}
    for ln in text.splitlines():
        m = re.fullmatch(r"c?fn=\((\d+)\) (.*)", ln)
        if m:
            names[m.group(1)] = m.group(2)
    values = list(names.values())
    assert len(values) == len(set(values)), [v for v in values if values.count(v) > 1]
    assert {"A.run", "B.run"} <= set(values)
    assert any(v.startswith("re.compile:") for v in values), values
    works = [v for v in values if v.startswith("work")]
    assert len(works) == 2 and any("pa/mod.py" in v for v in works), works


def frames_of(result):
    folded = (result / "profile.folded").read_text().splitlines()
    return {f for ln in folded for f in ln.rsplit(" ", 1)[0].split(";")}


def test_folded_speedscope_html_dot_disambiguate(result):
    works = sorted(f for f in frames_of(result) if f.startswith("work"))
    assert len(works) == 2 and works[0] != works[1], works
    assert "pa/mod.py:1]" in works[0] and "pb/mod.py:1]" in works[1], works
    # a name no other function has stays as it was
    assert "main" in frames_of(result)
    doc = json.loads((result / "profile.speedscope.json").read_text())
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert len([n for n in names if n.startswith("work")]) == 2
    assert len(names) == len(set(names))
    dot = (result / "callgraph.dot").read_text()
    assert "pa/mod.py:1:work" not in dot  # a small function, left out (-n 0.5)
    html = (result / "report.html").read_text()
    assert "pa/mod.py:1]" in html and "pb/mod.py:1]" in html


def test_dot_names_each_function(runner, result):
    out = runner.dir / "all.dot"
    r = runner.run([STRATA, "report", "--format", "dot", "-n", "0", "-e", "0", "-o", out,
                    result / "profile.json"])
    assert r.returncode == 0, r.describe()
    dot = out.read_text()
    assert "pa/mod.py:1:work" in dot and "pb/mod.py:1:work" in dot
    assert "main:5:run" in dot and "main:9:run" in dot


def test_report_rebuilds_unique_names(runner, result):
    out = runner.dir / "again.folded"
    r = runner.run([STRATA, "report", "--format", "folded", "-o", out, result / "profile.json"])
    assert r.returncode == 0, r.describe()
    assert out.read_text() == (result / "profile.folded").read_text()


def test_report_reads_files_without_qualname(runner, result):
    """A profile.json written before functions had "qualname" (and with nodes of
    one label sharing a function) still reads."""
    prof = json.loads((result / "profile.json").read_text())
    for f in prof["functions"]:
        f.pop("qualname", None)
    old = runner.dir / "old.json"
    old.write_text(json.dumps(prof))
    r = runner.run([STRATA, "report", "--format", "pstats", "-o", runner.dir / "old.prof", old])
    assert r.returncode == 0, r.describe()
    stats = pstats.Stats(str(runner.dir / "old.prof")).stats
    assert len([k for k in stats if k[2] == "work"]) == 2


# ---------------------------------------------------------------- --trace-c labels

CPROG = """
import collections

class L(list):
    pass

class D(dict):
    pass

def main():
    for _ in range(2):
        x = L()
        x.append(1)
        [].append(2)
        dict.fromkeys("ab")
        D.fromkeys("cd")
        bytes.fromhex("00")
        int.from_bytes(b"\\x01", "big")
        d = D(a=1)
        d.get("a")
        collections.OrderedDict().setdefault("k", 1)
        len(x)
        sorted([3, 1])
        "a,b".split(",")

main()
"""


def called_from_main(path):
    """{C function name: calls made from cprog.py's main()} in a pstats file."""
    stats = pstats.Stats(str(path)).stats
    out = {}
    for k, v in stats.items():
        for caller, c in v[4].items():
            if k[0] == "~" and caller[0].endswith("cprog.py") and caller[2] == "main":
                out[k[2]] = c[1]
    return out


def test_trace_c_labels_match_cprofile(runner):
    runner.write("cprog.py", CPROG)
    r = runner.strata("--trace-c", "--", "cprog.py", env={"STRATA_OUTPUT_FORMATS": "text,json,pstats"})
    assert r.returncode == 0, r.describe()
    ours = called_from_main(runner.results() / "profile.prof")
    # cProfile itself, on the same program, in the same interpreter
    p = subprocess.run([str(PYTHON), "-m", "cProfile", "-o", "c.prof", "cprog.py"],
                       cwd=runner.dir, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    theirs = called_from_main(runner.dir / "c.prof")
    for name in ("<method 'append' of 'list' objects>", "<built-in method fromkeys>",
                 "<built-in method builtins.len>", "<method 'get' of 'dict' objects>",
                 "<built-in method fromhex>", "<built-in method from_bytes>",
                 "<method 'split' of 'str' objects>"):
        assert name in theirs, (name, sorted(theirs))
    assert ours == theirs, (sorted(ours.items()), sorted(theirs.items()))
    # the table shows the same names, builtins without their module as before
    names = {row.name for row in read_table(runner.results(), "wall_clock").rows}
    assert "<built-in method fromkeys>" in names and "<built-in method len>" in names, names


def test_timeline_names_each_function(runner):
    """The timeline (Chrome JSON, Perfetto) names the two work()s apart too."""
    make_program(runner)
    r = runner.strata("--", "main.py", env={"STRATA_TRACE": "ON", "STRATA_PRINT_TABLES": "OFF",
                                           "STRATA_TRACE_FORMAT": "perfetto,chrome"})
    assert r.returncode == 0, r.describe()
    res = runner.results()
    events = json.loads((res / "trace.json").read_text())["traceEvents"]
    works = {e["name"] for e in events if e["ph"] == "B" and e["name"].startswith("work")}
    assert len(works) == 2 and all("mod.py:1]" in w for w in works), works
    assert {e["name"] for e in events if e["ph"] == "B"} >= {"main", "A.run", "B.run"}
    pf = (res / "trace.pftrace").read_bytes()
    assert b"pa/mod.py:1]" in pf and b"pb/mod.py:1]" in pf
