"""IPython and Jupyter (issue 15): `%load_ext strata`, then `%strata [options] statement`
and `%%strata [options]` over a cell profile the code as `strata python` profiles a
script, each run a session of its own in the one process (the kernel). Tested with
plain IPython running a script, with a real Jupyter kernel executing a notebook
(ipykernel through nbclient), and, below them, sessions begun one after another by a
plain program."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from conftest import PYTHON, SANITIZED, TIMEOUT, have_strata, load_profile, parse_table, \
    run_cmd, clean_env

pytestmark = pytest.mark.skipif(not have_strata(), reason="strata is not built")

FIB = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
FIB_CALLS = {10: 177, 12: 465, 15: 1973}  # calls of fib that one fib(n) makes


def fib_calls(results: Path) -> int:
    """Calls of fib in a results folder's call tree (every path's)."""
    table = parse_table((Path(results) / "wall_clock.txt").read_text())
    return sum(r.count for r in table.named("fib"))


def has_module(name: str, tmp_path: Path) -> bool:
    r = run_cmd([PYTHON, "-c", f"import {name}"], tmp_path, clean_env(tmp_path))
    return r.returncode == 0


def need(tmp_path, *names):
    for name in names:
        if not has_module(name, tmp_path):
            pytest.skip(f"{name} is not installed in strata's environment (requirements-dev.txt)")


# --------------------------------------------------------------------------- sessions


SESSIONS = """
import sys, threading
from strata import _strata

FIB

def lines(n):
    t = 0
    for i in range(n):
        t += i
    return t

def session(out, options, work):
    _strata.parse_cli(options + ["-o", out], statement=True)
    _strata.set("builtin", True)
    _strata.begin("cell", ["test"])
    _strata.start()
    _strata.scope_enter()
    work()
    _strata.scope_exit()
    return _strata.finalize(capture=True)

for i in range(2):
    session(f"plain{i}", [], lambda: fib(12))
session("trace", ["--trace"], lambda: fib(10))
session("lines", ["-l", "-R", "lines"], lambda: lines(1000))
printed = session("sample", ["--sample", "-f", "1000"], lambda: fib(27))
print("sampled" if "STACK SAMPLES TAKEN" in printed else printed)
session("memory1", ["--memory", "-R", "lines"], lambda: lines(1000))
try:
    session("memory2", ["--memory"], lambda: None)
except _strata.Error as e:
    print("memory:", e)
session("after", [], lambda: fib(15))
print("done")
""".replace("FIB\n", FIB)


def test_sessions_one_after_another(tmp_path):
    """Each session records only its own calls, in every mode, and a later session
    is whole after a sampled, traced, line-timed or memory one; memory profiling,
    whose allocator state is the process's, is refused after its first session."""
    prog = tmp_path / "sessions.py"
    prog.write_text(SESSIONS)
    r = run_cmd([PYTHON, prog], tmp_path, clean_env(tmp_path))
    assert r.returncode == 0, r.describe()
    assert r.stdout.splitlines()[-3:] == [
        "sampled",
        "memory: --memory profiles one session of a process, and an earlier one did: start "
        "a new process or kernel to profile memory again",
        "done",
    ], r.describe()
    for out in ("plain0", "plain1"):
        assert fib_calls(tmp_path / out) == FIB_CALLS[12]
    assert fib_calls(tmp_path / "trace") == FIB_CALLS[10]
    assert (tmp_path / "trace" / "trace.pftrace").stat().st_size > 0
    assert "Line #" in (tmp_path / "lines" / "line_profile.txt").read_text()
    assert fib_calls(tmp_path / "after") == FIB_CALLS[15]
    assert "Mem usage" in (tmp_path / "memory1" / "memory_profile.txt").read_text()
    assert not (tmp_path / "memory2").exists()
    profile = load_profile(tmp_path / "after")
    assert len(profile["threads"]) == 1


# --------------------------------------------------------------------------- IPython


IPY_SCRIPT = """
get_ipython().run_line_magic("load_ext", "strata")
FIB
def spin(seconds):
    import time
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def work(n):
    total = 0
    for i in range(n):
        total += i
    return total

get_ipython().run_line_magic("strata", "-o r1 fib(15)")
get_ipython().run_cell_magic("strata", "-o r2", "x = fib(10)\\nprint('x is', x)\\n")
print("after the cell, x is", x)
get_ipython().run_line_magic("strata", "--bogus fib(3)")
get_ipython().run_line_magic("strata", "-o r3 1 / 0")
print("after the exception")
get_ipython().run_line_magic("strata", "-o r4 --sample -f 1000 spin(0.3)")
get_ipython().run_line_magic("strata", "-o r5 -l -R work -- work(1000)")
import strata
@strata.profile
def marked(n):
    return work(n) + 1
get_ipython().run_line_magic("strata", "-o r7 -l marked(100)")
get_ipython().run_cell_magic("strata", "-o r6 fib(3)", "pass\\n")
get_ipython().run_line_magic("strata", "--help")
""".replace("FIB\n", FIB)


@pytest.fixture(scope="module")
def ipython_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ipython")
    need(tmp, "IPython")
    script = tmp / "script.ipy"
    script.write_text(IPY_SCRIPT)
    r = run_cmd([PYTHON, "-m", "IPython", "--quick", "--no-banner", "--colors=nocolor",
                 script], tmp, clean_env(tmp), timeout=TIMEOUT * 2)
    return tmp, r


def test_line_and_cell_magics(ipython_run):
    """A statement and a cell are profiled with exact call counts, their tables are
    printed where the notebook shows output, and the cell's names stay defined."""
    tmp, r = ipython_run
    assert r.returncode == 0, r.describe()
    assert fib_calls(tmp / "r1") == FIB_CALLS[15]
    assert fib_calls(tmp / "r2") == FIB_CALLS[10]
    out = r.stdout
    assert "x is 55" in out and "after the cell, x is 55" in out, r.describe()
    assert out.count("REAL-CLOCK TIMER (I.E. WALL-CLOCK TIMER)") >= 3
    assert "[strata] results in r1" in out and "[strata] results in r2" in out
    for name in ("r1", "r2"):
        assert (tmp / name / "report.html").is_file()
        assert f"{tmp / name / 'report.html'}" in out  # the link, as IPython shows one
    profile = load_profile(tmp / "r2")
    assert profile["metadata"]["command"] == ["%%strata", "-o", "r2"]


def test_magic_errors(ipython_run):
    """A bad option is one line and nothing runs nor is written; the cell magic takes
    options only; an exception in the code is shown as IPython shows it, after its
    results are written, and the session after it is whole."""
    tmp, r = ipython_run
    err = [ln for ln in r.stderr.splitlines() + r.stdout.splitlines() if "strata: error:" in ln]
    assert any(ln.startswith("strata: error: unknown option '--bogus'") for ln in err), r.describe()
    assert any("%%strata takes options only on its line, not 'fib(3)'" in ln for ln in err), err
    assert not (tmp / "r6").exists()
    assert "ZeroDivisionError" in r.stdout + r.stderr and "after the exception" in r.stdout
    assert (tmp / "r3" / "profile.json").is_file()
    assert "Traceback" not in r.stdout.split("ZeroDivisionError")[0].split("[strata] results in r3")[-1]


def test_magic_modes(ipython_run):
    """--sample and --lines (of -R's functions, and of @strata.profile's) through the
    magic, and --help."""
    tmp, r = ipython_run
    samples = (tmp / "r4" / "samples.txt").read_text()
    # the thread that runs the code is the first sampled, whatever threads IPython has
    assert "|0>>> spin" in samples, samples
    assert "Line #" in (tmp / "r5" / "line_profile.txt").read_text()
    # @strata.profile in the notebook marks a function for -l (no session of its own)
    marked = (tmp / "r7" / "line_profile.txt").read_text()
    assert "Function: marked" in marked and "return work(n) + 1" in marked, marked
    assert "usage: strata python" in r.stdout


# --------------------------------------------------------------------------- Jupyter


def run_notebook(tmp: Path, cells: list) -> list:
    """Executes a notebook of `cells` in a real kernel (ipykernel, started by nbclient
    with strata's interpreter); returns each cell's outputs."""
    runner = tmp / "run_nb.py"
    runner.write_text(textwrap.dedent("""
        import json, sys
        import nbformat
        from nbclient import NotebookClient
        cells = json.loads(open(sys.argv[1]).read())
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
        NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": sys.argv[2]}}).execute()
        print(json.dumps([c.outputs for c in nb.cells]))
    """))
    cells_file = tmp / "cells.json"
    cells_file.write_text(json.dumps(cells))
    r = run_cmd([PYTHON, runner, cells_file, tmp], tmp, clean_env(tmp), timeout=TIMEOUT * 4)
    assert r.returncode == 0, r.describe()
    return json.loads(r.stdout.splitlines()[-1])


def text_of(outputs) -> str:
    parts = []
    for o in outputs:
        if o["output_type"] == "stream":
            parts.append(o["text"])
        elif o["output_type"] in ("display_data", "execute_result"):
            parts.append(o["data"].get("text/plain", ""))
        elif o["output_type"] == "error":
            parts.append(o["ename"])
    return "".join(parts)


@pytest.mark.skipif(SANITIZED, reason="a Jupyter kernel under AddressSanitizer's preload is "
                                      "not what this tests (the kernel's own libraries)")
def test_magics_in_a_jupyter_kernel(tmp_path):
    """The notebook a user writes: the extension loaded, a cell and a statement
    profiled in one kernel, their tables in the cells' output with a link to the
    HTML report, and the kernel's namespace as without strata."""
    need(tmp_path, "ipykernel", "nbclient", "nbformat")
    outs = run_notebook(tmp_path, [
        "%load_ext strata",
        FIB,
        f"%%strata -o {tmp_path / 'k1'}\ny = fib(15)\nprint('y is', y)",
        f"%strata -o {tmp_path / 'k2'} fib(10)",
        "print('y after', y)",
        f"%%strata -o {tmp_path / 'k3'}\nraise ValueError('in the cell')",
        "print('kernel alive')",
        "def boom():\n    raise KeyError('from an earlier cell')\n\n"
        "def work(n):\n    return sum(range(n))",
        f"%strata -o {tmp_path / 'k4'} -l -R work -- work(10)",
        "boom()",
        f"%strata --inline -o {tmp_path / 'k5'} fib(5)",
    ])
    assert fib_calls(tmp_path / "k1") == FIB_CALLS[15]
    assert fib_calls(tmp_path / "k2") == FIB_CALLS[10]
    cell = text_of(outs[2])
    assert "y is 610" in cell and "REAL-CLOCK TIMER" in cell and "|0>>> fib" in cell, cell
    links = [o for o in outs[2] if o["output_type"] == "display_data"]
    assert links and "report.html" in json.dumps(links[0]["data"]), outs[2]
    assert "REAL-CLOCK TIMER" in text_of(outs[3])
    assert text_of(outs[4]) == "y after 610\n"
    assert "ValueError" in text_of(outs[5]) and (tmp_path / "k3" / "profile.json").is_file()
    assert text_of(outs[6]) == "kernel alive\n"
    # --lines read the cells' source from linecache and left IPython's there: a later
    # traceback still shows an earlier cell's line
    assert "return sum(range(n))" in (tmp_path / "k4" / "line_profile.txt").read_text()
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", "".join(outs[9][0]["traceback"]))
    assert "raise KeyError('from an earlier cell')" in traceback, traceback
    # --inline: the HTML report itself, in a frame of its own
    frames = [o["data"]["text/html"] for o in outs[10] if o["output_type"] == "display_data"]
    assert frames and frames[0].startswith("<iframe srcdoc=") and "&lt;html" in frames[0].lower()


@pytest.mark.skipif(SANITIZED, reason="a Jupyter kernel under AddressSanitizer's preload is "
                                      "not what this tests (the kernel's own libraries)")
def test_cells_unchanged_by_the_extension(tmp_path):
    """Loading the extension changes nothing in cells that do not use it."""
    need(tmp_path, "ipykernel", "nbclient", "nbformat")
    cells = [FIB, "import sys\nprint(fib(12), sys.getrecursionlimit())",
             "print(sorted(k for k in globals() if not k.startswith('_')))"]
    plain = run_notebook(tmp_path, cells)
    loaded = run_notebook(tmp_path, ["%load_ext strata"] + cells)
    assert [text_of(o) for o in loaded[1:]] == [text_of(o) for o in plain]
    assert not list(tmp_path.glob("strata-*-output"))
