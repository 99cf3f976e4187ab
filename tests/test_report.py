"""`strata report`: one result rendered in every format the usual tools read.

A small program (recursion, a C call, a sleep) is profiled once per module; each
test renders it with the real `strata report` command and checks the output with
the tool that reads it (pstats, gprof2dot, SnakeViz's loader, Graphviz, headless
Chromium) or by its documented structure. Bad inputs end with one line and exit
status 2."""

from __future__ import annotations

import json
import marshal
import os
import pstats
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest

from conftest import PYTHON, STRATA, TIMEOUT, clean_env, have_strata, parse_table, run_cmd

pytestmark = pytest.mark.skipif(not have_strata(), reason=f"strata is not built: {STRATA}")

PROG = textwrap.dedent(
    """
    import time

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def work():
        sorted(range(2000), reverse=True)
        time.sleep(0.01)
        return fib(12)

    def main():
        for _ in range(3):
            work()

    main()
    """
).lstrip()
FIB_CALLS = 465  # calls of fib made by one fib(12)


class Env:
    def __init__(self, root: Path):
        self.root = root
        self.home = root / "_home"
        self.home.mkdir(exist_ok=True)

    def run(self, *args, env=None, cwd=None, timeout=TIMEOUT):
        return run_cmd([str(a) for a in args], cwd or self.root, clean_env(self.home, **(env or {})),
                       timeout=timeout)

    def strata(self, *args, **kw):
        return self.run(STRATA, *args, **kw)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return Env(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def result(env):
    """The results folder of one profiled run of PROG (with --trace-c)."""
    prog = env.root / "prog.py"
    prog.write_text(PROG)
    r = env.strata("python", "--trace-c", "-o", "res", "--", "prog.py")
    assert r.returncode == 0, r.describe()
    return env.root / "res"


def report(env, result, *args, ok=True, environ=None):
    r = env.strata("report", *args, result, env=environ)
    if ok:
        assert r.returncode == 0, r.describe()
        assert r.stderr.count("strata: error") == 0, r.describe()
    return r


def fn_key(stats, name):
    keys = [k for k in stats if k[2] == name]
    assert len(keys) == 1, f"{name}: {keys} in {sorted(stats)}"
    return keys[0]


# ---------------------------------------------------------------------------- text, json


def test_text_is_the_tables(env, result):
    """The tables again, from profile.json (times there are whole nanoseconds, so a
    last decimal may round the other way)."""
    r = report(env, result)
    ours, theirs = parse_table(r.stdout), parse_table((result / "wall_clock.txt").read_text())
    assert ours.columns == theirs.columns and len(ours.rows) == len(theirs.rows)
    for a, b in zip(ours.rows, theirs.rows):
        assert a.label == b.label and a.count == b.count
        for col in ("SUM", "MEAN", "MIN", "MAX", "STDDEV"):
            assert abs(a.num(col) - b.num(col)) <= 2e-6, (a, b, col)


def test_json_keeps_locations(env, result):
    data = json.loads((result / "profile.json").read_text())
    assert data["format_version"] == 2
    funcs = data["functions"]
    by_name = {f["name"]: f for f in funcs}
    assert by_name["fib"]["file"].endswith("prog.py") and by_name["fib"]["line"] == 3
    assert by_name["<built-in method time.sleep>"] == {
        "file": "~", "line": 0, "name": "<built-in method time.sleep>"}
    nodes = data["threads"][0]["nodes"]
    for n in nodes:  # a function's name is in its label (cProfile names builtins' module)
        name = funcs[n["function"]]["name"]
        assert name in n["label"] or name == n["label"].replace("method ", "method builtins.")
    # report --format json gives the same document back
    out = env.root / "again.json"
    report(env, result, "--format", "json", "-o", out)
    again = json.loads(out.read_text())
    assert again["functions"] == funcs
    # the same nodes; the variance back to its last bit or so (it is rebuilt as M2 / n)
    for x, y in zip(data["threads"][0]["nodes"], again["threads"][0]["nodes"]):
        vx, vy = x["metrics"]["wall_clock"].pop("var"), y["metrics"]["wall_clock"].pop("var")
        assert x == y and vy == pytest.approx(vx, rel=1e-12, abs=1e-9)


# ---------------------------------------------------------------------------- pstats


@pytest.fixture(scope="module")
def prof(env, result):
    out = env.root / "out.prof"
    report(env, result, "--format", "pstats", "-o", out)
    return out


def test_pstats_loads_with_cprofile_keys(env, result, prof):
    st = pstats.Stats(str(prof))
    stats = st.stats
    fib = fn_key(stats, "fib")
    assert fib[0] == str(env.root / "prog.py") and fib[1] == 3
    cc, nc, tt, ct, callers = stats[fib]
    assert nc == 3 * FIB_CALLS and cc == 3, (cc, nc)  # primitive versus total calls
    work = fn_key(stats, "work")
    assert set(callers) == {work, fib}
    assert callers[work][:2] == (3, 3)  # (nc, cc) from work
    assert 0 < tt <= ct
    assert ("~", 0, "<built-in method builtins.sorted>") in stats  # cProfile's name
    sleep = ("~", 0, "<built-in method time.sleep>")
    assert sleep in stats and stats[sleep][1] == 3 and stats[sleep][3] >= 0.03
    assert stats[fn_key(stats, "main")][3] >= 0.03  # cumulative time in seconds
    # the same keys cProfile gives the same program
    cp = env.root / "cprofile.prof"
    r = env.run(PYTHON, "-m", "cProfile", "-o", cp, "prog.py")
    assert r.returncode == 0, r.describe()
    def short(keys):  # python names the script as it was given; strata by full path
        return {(os.path.basename(k[0]), k[1], k[2]) for k in keys if k[0].endswith("prog.py")}
    theirs = short(pstats.Stats(str(cp)).stats)
    assert short(stats) == theirs - {k for k in theirs if k[2] == "<module>"}
    assert {k for k in pstats.Stats(str(cp)).stats if k[0] == "~"} >= {
        k for k in stats if k[0] == "~" and not k[2].startswith("<thread ")}
    st.sort_stats("cumulative").print_stats(0)  # renders without error


def test_pstats_one_root_per_thread(env):
    """Calls made at import time (module-level code is filtered out as `<module>`)
    hang under one root per thread, as in cProfile's files, not as many roots."""
    (env.root / "roots.py").write_text(textwrap.dedent("""
        import threading
        def a(): pass
        def b(): a()
        def main(): b()
        a(); b(); a()
        t = threading.Thread(target=main, name="worker"); t.start(); t.join()
        main()
    """))
    r = env.strata("python", "-o", "roots", "--", "roots.py")
    assert r.returncode == 0, r.describe()
    out = env.root / "roots.prof"
    report(env, env.root / "roots", "--format", "pstats", "-o", out)
    stats = pstats.Stats(str(out)).stats
    roots = [k for k, v in stats.items() if not v[4]]
    assert sorted(roots) == [("~", 0, "<thread 0 (MainThread)>"), ("~", 0, "<thread 1 (worker)>")]
    main_root = stats[("~", 0, "<thread 0 (MainThread)>")]
    assert main_root[:2] == (1, 1)
    # the root's cumulative time is what its thread's top-level calls took
    top = [v[4][("~", 0, "<thread 0 (MainThread)>")] for v in stats.values()
           if ("~", 0, "<thread 0 (MainThread)>") in v[4]]
    assert abs(main_root[3] - sum(e[3] for e in top)) < 1e-9
    a = fn_key(stats, "a")
    assert stats[a][4][("~", 0, "<thread 0 (MainThread)>")][:2] == (2, 2)  # a() twice at the top
    doc = json.loads(report(env, env.root / "roots", "--format", "speedscope", "-o", "-").stdout)
    frames = doc["shared"]["frames"]
    for prof in doc["profiles"]:
        ev = prof["events"]
        assert frames[ev[0]["frame"]]["name"] == prof["name"] and ev[0]["type"] == "O"
        assert ev[-1] == {"type": "C", "frame": ev[0]["frame"], "at": prof["endValue"]}
        depth = 0
        for e in ev[1:-1]:
            depth += 1 if e["type"] == "O" else -1
            assert depth >= 0  # nothing closes the root early: one root
    assert sorted(p["name"] for p in doc["profiles"]) == ["thread 0 (MainThread)",
                                                          "thread 1 (worker)"]
    folded = report(env, env.root / "roots", "--format", "folded", "-o", "-").stdout
    bottoms = {ln.split(";")[0] for ln in folded.splitlines()}
    assert bottoms == {"thread 0 (MainThread)", "thread 1 (worker)"}


def test_gprof2dot_reads_pstats(env, prof):
    pytest.importorskip("gprof2dot", reason="gprof2dot is not installed (requirements-dev.txt)")
    # -n 0: every function, fib's small share of the time included (under the default
    # 0.5 % on a fast machine)
    r = env.run(PYTHON, "-m", "gprof2dot", "--colour-nodes-by-selftime", "-n", "0", "-f", "pstats",
                prof)
    assert r.returncode == 0, r.describe()
    assert "digraph" in r.stdout and "prog:3:fib" in r.stdout


def test_snakeviz_loads_pstats(env, prof):
    pytest.importorskip("snakeviz", reason="snakeviz is not installed (requirements-dev.txt)")
    code = textwrap.dedent(f"""
        import json, pstats
        from snakeviz.stats import json_stats, table_rows
        s = pstats.Stats({str(prof)!r})
        rows = table_rows(s)
        data = json_stats(s)
        data = json.loads(data) if isinstance(data, str) else data
        print(len(rows), len(data))
    """)
    r = env.run(PYTHON, "-c", code)
    assert r.returncode == 0, r.describe()
    nrows, ndata = map(int, r.stdout.split())
    assert nrows >= 4 and ndata >= 4


# ---------------------------------------------------------------------------- call graph


def dot_nodes(text):
    return {m.group(2): m.group(1) for m in
            re.finditer(r'^\t\d+ \[color="(#[0-9a-f]{6})".*label="([^"\\]*(?:\\.[^"\\]*)*)"',
                        text, re.M)}


def test_dot_in_gprof2dots_language(env, result):
    r = report(env, result, "--format", "dot", "-n", "0", "-o", "-")  # fib's share is small
    text = r.stdout
    assert text.startswith("digraph {") and text.rstrip().endswith("}")
    labels = dot_nodes(text)
    fib = [lb for lb in labels if lb.startswith("prog:3:fib\\n")]
    assert fib, labels
    parts = fib[0].split("\\n")
    assert re.fullmatch(r"\d+\.\d\d%", parts[1]) and re.fullmatch(r"\(\d+\.\d\d%\)", parts[2])
    assert parts[3] == f"{3 * FIB_CALLS}\u00d7"
    assert re.search(r'\t\d+ -> \d+ \[.*label="\d+\.\d\d%\\n\d+\u00d7"', text)
    # by total time main is red; by self time, the sleep is
    def red(c):
        return int(c[1:3], 16) >= 0xf0 and int(c[3:5], 16) < 0x10 and int(c[5:], 16) < 0x10
    main = [c for lb, c in labels.items() if lb.startswith("prog:11:main")]
    assert len(main) == 1 and red(main[0]), labels
    by_self = dot_nodes(report(env, result, "--format", "dot", "--colour-nodes-by-selftime",
                               "-o", "-").stdout)
    assert [red(c) for lb, c in by_self.items() if "time.sleep" in lb] == [True]
    assert [red(c) for lb, c in by_self.items() if lb.startswith("prog:11:main")] == [False]
    # -n leaves out functions under the threshold, -e calls
    few = dot_nodes(report(env, result, "--format", "dot", "-n", "50", "-o", "-").stdout)
    assert not any("fib" in lb for lb in few) and any("time.sleep" in lb for lb in few)
    none = report(env, result, "--format", "dot", "-e", "100", "-o", "-").stdout
    assert " -> " not in none


@pytest.mark.skipif(not shutil.which("dot"), reason="Graphviz's dot is not installed")
@pytest.mark.parametrize("fmt,magic", [("png", b"\x89PNG\r\n\x1a\n"), ("svg", b"<?xml")])
def test_png_svg_through_graphviz(env, result, fmt, magic):
    out = env.root / f"graph.{fmt}"
    report(env, result, "--format", fmt, "-n", "0", "-o", out)
    data = out.read_bytes()
    assert data.startswith(magic)
    if fmt == "svg":
        assert b"prog:3:fib" in data


def test_png_without_graphviz_is_a_clear_error(env, result):
    bare = env.root / "nodot"
    bare.mkdir(exist_ok=True)
    out = env.root / "never.png"
    r = report(env, result, "--format", "png", "-o", out, ok=False, environ={"PATH": str(bare)})
    assert r.returncode == 2, r.describe()
    assert r.stderr.startswith("strata: error: ") and "graphviz" in r.stderr.lower()
    assert len(r.stderr.splitlines()) == 1
    assert not out.exists() and not list(env.root.glob(".never.png*"))


def test_one_failing_format_never_stops_the_others(env, result):
    """report and merge into a folder: Graphviz's dot fails on png (the first of the
    formats asked for in file order), the formats after it are written all the same,
    each file written is listed, and the failure is one `strata: error:` line."""
    bin_dir = env.root / "brokendot"
    bin_dir.mkdir(exist_ok=True)
    dot = bin_dir / "dot"
    dot.write_text("#!/bin/sh\necho 'dot: out of order' >&2\nexit 1\n")
    dot.chmod(0o755)
    path = {"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    for cmd, out, fmts, want in (
            ("report", env.root / "partly", "png,folded,callgrind",
             ["callgrind.out", "profile.folded"]),
            ("merge", env.root / "partly-merged", "json,svg,html",
             ["profile.json", "report.html"])):
        r = env.strata(cmd, "--format", fmts, "-o", out, result, env=path)
        assert r.returncode == 2, r.describe()
        assert sorted(os.listdir(out)) == want, (cmd, os.listdir(out))
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("strata: error: ")]
        assert len(errors) == 1 and "dot: out of order" in errors[0], r.stderr
        for name in want:
            assert f"{out / name}\n" in r.stderr, r.stderr


# ---------------------------------------------------------------------------- flame formats


def test_folded_stacks(env, result):
    text = report(env, result, "--format", "folded", "-o", "-").stdout
    lines = text.splitlines()
    assert lines and all(re.fullmatch(r"[^;\n]+(;[^;\n]+)* \d+", ln) for ln in lines), lines[:5]
    stacks = {ln.rsplit(" ", 1)[0]: int(ln.rsplit(" ", 1)[1]) for ln in lines}
    top = "thread 0 (MainThread);"  # the bottom frame names the thread
    assert all(s.startswith(top) for s in stacks)
    assert top + "main;work;<built-in method time.sleep>" in stacks
    assert stacks[top + "main;work;<built-in method time.sleep>"] >= 30_000_000  # ns
    assert any(s.startswith(top + "main;work;fib;fib;fib") for s in stacks)
    data = json.loads((result / "profile.json").read_text())
    total = data["threads"][0]["nodes"][0]["metrics"]["wall_clock"]["sum"]
    assert abs(sum(stacks.values()) - total) <= len(stacks)  # self times add up to the run


def test_speedscope_json(env, result):
    doc = json.loads(report(env, result, "--format", "speedscope", "-o", "-").stdout)
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert any(f["name"] == "fib" and f["line"] == 3 for f in frames)
    (prof,) = doc["profiles"]
    assert prof["type"] == "evented" and prof["unit"] == "nanoseconds"
    stack, last = [], 0
    for ev in prof["events"]:
        assert ev["at"] >= last
        last = ev["at"]
        if ev["type"] == "O":
            stack.append(ev["frame"])
        else:
            assert stack.pop() == ev["frame"]
    assert not stack and last <= prof["endValue"]


def test_callgrind(env, result):
    text = report(env, result, "--format", "callgrind", "-o", "-").stdout
    lines = text.splitlines()
    assert lines[0] == "# callgrind format"
    assert "events: wall_clock" in lines and any(ln.startswith("summary: ") for ln in lines)
    names = {}
    for ln in lines:
        m = re.fullmatch(r"c?fn=\((\d+)\)(?: (.*))?", ln)
        if m and m.group(2):
            names[m.group(1)] = m.group(2)
    assert {"fib", "work", "main", "<built-in method time.sleep>"} <= set(names.values())
    calls = [ln for ln in lines if ln.startswith("calls=")]
    assert calls and all(re.fullmatch(r"calls=\d+ \d+", c) for c in calls)
    for i, ln in enumerate(lines):  # every calls= line is followed by its cost line
        if ln.startswith("calls="):
            assert re.fullmatch(r"\d+ \d+", lines[i + 1])


# ---------------------------------------------------------------------------- html


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(env, *args):
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-dev-shm-usage", f"--user-data-dir={env.root / '_chrome'}", *args]
    # Chromium is no sanitized program: the sanitizer run's preloaded runtime stays out.
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90,
                          env=clean_env(env.home, LD_PRELOAD=None))


def png_colours(path):
    """Distinct colours of an RGB(A) 8-bit PNG (no dependency beyond zlib)."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = {2: 3, 6: 4}[ctype]
    raw, stride, prev, seen = zlib.decompress(idat), width * bpp, bytearray(width * bpp), set()
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 4 == 0:
            seen.update(bytes(line[i:i + 3]) for i in range(0, stride, bpp * 4))
        prev = line
    return seen


@pytest.fixture(scope="module")
def hostile(env):
    """A result whose labels carry markup (--label args with a hostile value)."""
    (env.root / "evil.py").write_text(textwrap.dedent("""
        def show(x):
            return len(x)
        show("</script><img src=x onerror=alert(1)>&amp;\\u2028")
        show("<b>bold</b>")
    """))
    r = env.strata("python", "--label", "args", "-o", "evil", "--", "evil.py")
    assert r.returncode == 0, r.describe()
    out = env.root / "evil.html"
    report(env, env.root / "evil", "--format", "html", "-o", out)
    return out


def test_html_escapes_every_label(hostile):
    html = hostile.read_text()
    assert html.count("</script>") == 2 and "<img" not in html and "<b>bold" not in html
    assert "\\u003c/script\\u003e\\u003cimg src=x" in html
    assert "http://" not in html and "https://" not in html  # works offline


@pytest.mark.skipif(not chromium(), reason="headless Chromium is not installed (Debian's "
                                           "chromium, in the Makefile's TEST_DEBS)")
@pytest.mark.parametrize("which", ["plain", "hostile"])
def test_html_in_headless_chromium(env, result, hostile, which):
    if which == "plain":
        page = env.root / "copy" / "report.html"
        page.parent.mkdir(exist_ok=True)
        report(env, result, "--format", "html", "-o", page)
    else:
        page = hostile
    r = run_chromium(env, "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0",
                     "--dump-dom", page.as_uri() + "#selftest")
    assert r.returncode == 0, r.stderr[-3000:]
    body = re.search(r"<body[^>]*>", r.stdout)
    assert body, r.stdout[:2000]
    attrs = dict(re.findall(r'(data-[a-z]+)="([^"]*)"', body.group(0)))
    assert attrs.get("data-errors") == "", attrs
    assert attrs.get("data-selftest", "").startswith("zoomed:"), attrs  # a click zooms
    assert int(attrs["data-frames"]) >= 3 and int(attrs["data-rows"]) >= 1
    assert attrs.get("data-root") == "thread 0 (MainThread)", attrs  # one root, the thread
    console = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert not [ln for ln in console if "rror" in ln or "Uncaught" in ln], console
    if which == "plain":
        shot = env.root / "shot.png"
        r = run_chromium(env, "--window-size=1000,700", f"--screenshot={shot}", page.as_uri())
        assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
        colours = png_colours(shot)
        # the graph's warm frame colours are on the page
        warm = [c for c in colours if c[0] > 200 and 120 < c[1] < 230 and c[2] < 120]
        assert len(colours) > 20 and warm, sorted(colours)[:20]


# ---------------------------------------------------------------------------- run time, errors


def test_formats_at_run_time(env):
    r = env.strata("python", "-o", "rt", "--", "prog.py",
                   env={"STRATA_OUTPUT_FORMATS": "text,json,pstats,folded,callgrind,html"})
    assert r.returncode == 0, r.describe()
    names = sorted(os.listdir(env.root / "rt"))
    assert names == ["callgrind.out", "profile.folded", "profile.json", "profile.prof",
                     "report.html", "wall_clock.txt"], names
    pstats.Stats(str(env.root / "rt" / "profile.prof"))
    r = env.strata("python", "-o", "rt2", "--", "prog.py", env={"STRATA_OUTPUT_FORMATS": "pstat"})
    assert r.returncode == 2 and "STRATA_OUTPUT_FORMATS" in r.stderr and "pstat" in r.stderr
    assert not (env.root / "rt2").exists()


def test_old_profile_without_locations(env, result):
    """A format_version 1 file from before locations: keys fall back to labels."""
    data = json.loads((result / "profile.json").read_text())
    del data["functions"]
    for n in data["threads"][0]["nodes"]:
        del n["function"]
    old = env.root / "old.json"
    old.write_text(json.dumps(data))
    out = env.root / "old.prof"
    report(env, old, "--format", "pstats", "-o", out)
    stats = pstats.Stats(str(out)).stats
    assert ("~", 0, "fib") in stats and stats[("~", 0, "fib")][1] == 3 * FIB_CALLS


def bad(env, *args):
    r = env.strata(*args)
    assert r.returncode == 2, r.describe()
    assert r.stderr.startswith("strata: error: ") and len(r.stderr.splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    return r.stderr


def test_every_truncation_is_said_to_be_one(env, result):
    """A profile.json cut anywhere (a copy cut short by a full disk, an unfinished
    transfer) says it is truncated: among the cuts, each right after a number's '-',
    '.' or 'e', where a number reader sees 'a bad number'."""
    # cut short of its last bracket (a cut of only the final newline leaves it whole)
    text = (result / "profile.json").read_text().rstrip()
    cuts = set(range(1, len(text), max(1, len(text) // 120)))
    cuts |= {i + 1 for i, c in enumerate(text[:-1])
             if c in ".eE" and text[i - 1].isdigit()}
    signs = [i + 1 for i, c in enumerate(text[:-1]) if c == "-" and text[i + 1].isdigit()]
    assert signs  # "parent": -1
    cut = env.root / "cut.json"
    for n in sorted(cuts)[:400] + signs[:20]:
        cut.write_text(text[:n])
        err = bad(env, "report", cut)
        assert "truncated" in err, (n, text[max(0, n - 20):n], err)


def test_bad_inputs(env, result):
    text = (result / "profile.json").read_text()
    (env.root / "trunc.json").write_text(text[: len(text) // 2])
    assert "truncated" in bad(env, "report", env.root / "trunc.json")
    (env.root / "corrupt.json").write_bytes(b"{\"format_version\": 1, \"threads\": [\x00\xff]}")
    assert "not a valid profile.json" in bad(env, "report", env.root / "corrupt.json")
    newer = json.loads(text)
    newer["format_version"] = 3
    (env.root / "newer.json").write_text(json.dumps(newer))
    assert "newer" in bad(env, "report", env.root / "newer.json")
    (env.root / "empty.json").write_text("")
    assert "empty" in bad(env, "report", env.root / "empty.json")
    (env.root / "emptydir").mkdir(exist_ok=True)
    assert "no profile.json" in bad(env, "report", env.root / "emptydir")
    assert "cannot read" in bad(env, "report", env.root / "missing.json")
    assert "unknown format 'flame'" in bad(env, "report", "--format", "flame", result)
    assert "unknown option" in bad(env, "report", "--bogus", result)
    assert "needs a RESULT" in bad(env, "report")
    assert "percentage" in bad(env, "report", "--format", "dot", "-n", "x", result)
    # nothing half-written: an unwritable output leaves no file behind
    assert "cannot write" in bad(env, "report", "--format", "json", "-o",
                                 env.root / "nope" / "x.json", result)
    assert not (env.root / "nope").exists()


# ---------------------------------------------------------------------------- what is written over


def test_report_never_replaces_a_file_without_force(env, result):
    out = env.root / "kept.prof"
    out.write_text("mine")
    err = bad(env, "report", "--format", "pstats", "-o", out, result)
    assert "already exists" in err and "--force" in err
    assert out.read_text() == "mine" and not list(env.root.glob(".kept.prof*"))
    report(env, result, "--format", "pstats", "-o", out, "--force")
    assert pstats.Stats(str(out)).stats
    # into a folder: every name is checked first, so nothing at all is written
    folder = env.root / "several"
    folder.mkdir()
    (folder / "profile.folded").write_text("mine")
    err = bad(env, "report", "--format", "pstats,folded", "-o", folder, result)
    assert "profile.folded' already exists" in err
    assert sorted(os.listdir(folder)) == ["profile.folded"]
    report(env, result, "--format", "pstats,folded", "-o", folder, "--force")
    assert sorted(os.listdir(folder)) == ["profile.folded", "profile.prof"]


def test_report_never_writes_over_its_input(env, result):
    before = (result / "profile.json").read_bytes()
    for args in (["--format", "json"], ["--format", "json", "--force"],
                 ["--format", "json", "-o", result / "profile.json", "--force"],
                 ["--format", "json,text", "-o", result, "--force"]):
        err = bad(env, "report", *args, result)
        assert "is an input" in err, args
    link = env.root / "link.json"
    link.symlink_to(result / "profile.json")
    assert "is an input" in bad(env, "report", "--format", "json", "-o", link, "--force",
                                result / "profile.json")
    assert (result / "profile.json").read_bytes() == before


def test_merge_never_writes_over_its_inputs(env, result):
    before = (result / "profile.json").read_bytes()
    assert "is an input" in bad(env, "merge", "-o", result, "--force", result)
    assert (result / "profile.json").read_bytes() == before
    r = env.strata("merge", "-o", "merged", result)
    assert r.returncode == 0, r.describe()
    assert "already exists" in bad(env, "merge", "-o", "merged", result)
    r = env.strata("merge", "--force", "-o", "merged", result)
    assert r.returncode == 0, r.describe()


def test_report_refuses_a_fifo(env):
    fifo = env.root / "pipe.json"
    os.mkfifo(fifo)
    r = env.strata("report", fifo, timeout=20)  # it used to wait for a writer forever
    assert r.returncode == 2, r.describe()
    assert r.stderr == f"strata: error: cannot read '{fifo}': not a regular file\n"
    assert "not a regular file" in bad(env, "merge", "-o", "m", fifo)
    assert "not a regular file" in bad(env, "report", "/dev/zero")


def test_titles_name_the_module_of_a_dash_m_run(env, result):
    pkg = env.root / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tool.py").write_text("def f():\n    return 1\nf()\n")
    r = env.strata("python", "-o", "dashm", "-m", "mypkg.tool", "arg",
                   env={"STRATA_OUTPUT_FORMATS": "json,speedscope,html"})
    assert r.returncode == 0, r.describe()
    assert json.loads((env.root / "dashm" / "profile.speedscope.json").read_text())["name"] \
        == "mypkg.tool"
    assert "<title>mypkg.tool - strata</title>" in (env.root / "dashm" / "report.html").read_text()
    doc = json.loads(report(env, env.root / "dashm", "--format", "speedscope", "-o", "-").stdout)
    assert doc["name"] == "mypkg.tool"
    r = env.strata("python", "-o", "dashm2", "--", "-m", "mypkg.tool")
    assert r.returncode == 0, r.describe()
    doc = json.loads(report(env, env.root / "dashm2", "--format", "speedscope", "-o", "-").stdout)
    assert doc["name"] == "mypkg.tool"
    # a script with arguments is named by the script, not its last argument (nor
    # by the file of -s)
    (env.root / "setup_x.py").write_text("")
    r = env.strata("python", "-s", "setup_x.py", "-o", "scriptargs", "prog.py", "x", "y")
    assert r.returncode == 0, r.describe()
    doc = json.loads(report(env, env.root / "scriptargs", "--format", "speedscope",
                            "-o", "-").stdout)
    assert doc["name"] == "prog.py"


# ---------------------------------------------------------------------------- deep recursion

MAXRSS = """
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:])
sys.stderr.write("maxrss %d\\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(r.returncode)
"""


def deep_profile(env, result, depth):
    """profile.json of a recursion `depth` calls deep, each level with 1 us of its own."""
    data = json.loads((result / "profile.json").read_text())
    fib = next(n["function"] for n in data["threads"][0]["nodes"] if n["label"] == "fib")
    nodes = []
    for i in range(depth):
        t = (depth - i) * 1000
        nodes.append({"id": i + 1, "parent": i if i else -1, "depth": i, "label": "fib",
                      "function": fib, "count": 1,
                      "wall_clock": {"sum": t, "self": 1000, "min": t, "max": t, "mean": t,
                                     "var": 0}})
    data["threads"] = [{"index": 0, "tid": 1, "name": "MainThread", "dropped_calls": 0,
                        "nodes": nodes}]
    path = env.root / f"deep{depth}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("fmt", ["folded", "speedscope", "pstats", "callgrind", "html", "json",
                                 "dot", "text"])
def test_deep_recursion_stays_linear(env, result, fmt):
    """Every writer's time, memory and output grow with the profile's nodes: a
    30,000-deep recursion made 900 MB of folded stacks (927 MB of memory)."""
    sizes, peaks = {}, {}
    for depth in (10_000, 30_000):
        src = deep_profile(env, result, depth)
        out = env.root / f"deep-out{depth}.{fmt}"
        r = env.run(PYTHON, "-c", MAXRSS, STRATA, "report", "--format", fmt, "-o", out, src)
        assert r.returncode == 0, r.describe()
        peaks[depth] = int(re.search(r"maxrss (\d+)", r.stderr).group(1)) * 1024
        sizes[depth] = out.stat().st_size
    assert sizes[30_000] < 4 * sizes[10_000] + 100_000, sizes  # linear, not quadratic
    assert sizes[30_000] < 30_000 * 400, sizes
    assert peaks[30_000] < 120 << 20, peaks
    if fmt == "folded":
        lines = (env.root / "deep-out30000.folded").read_text().splitlines()
        assert len(lines) == 257  # 256 frames deep, then the rest summed on one line
        frames, value = lines[-1].rsplit(" ", 1)
        assert frames.split(";")[0] == "thread 0 (MainThread)"
        assert frames.endswith(";fib;[deeper calls]") and frames.count(";fib") == 256
        assert int(value) == (30_000 - 256) * 1000
        assert sum(int(ln.rsplit(" ", 1)[1]) for ln in lines) == 30_000 * 1000


def test_deep_recursion_at_the_end_of_a_run(env):
    """The issue's case: a 30,000-deep recursion took 927 MB at exit and wrote 900 MB
    of folded stacks."""
    (env.root / "deep.py").write_text(textwrap.dedent("""
        import sys
        sys.setrecursionlimit(40_000)

        def down(n):
            return 0 if n == 0 else 1 + down(n - 1)

        down(30_000)
    """))
    r = env.run(PYTHON, "-c", MAXRSS, STRATA, "python", "-o", "deeprun", "--", "deep.py",
                env={"STRATA_OUTPUT_FORMATS": "text,json,folded,speedscope,pstats,html",
                     "STRATA_PRINT_TABLES": "OFF"})
    assert r.returncode == 0, r.describe()
    peak = int(re.search(r"maxrss (\d+)", r.stderr).group(1)) * 1024
    folded = env.root / "deeprun" / "profile.folded"
    assert folded.stat().st_size < 2 << 20, folded.stat().st_size
    assert peak < 200 << 20, peak
    data = json.loads((env.root / "deeprun" / "profile.json").read_text())
    assert max(n["depth"] for n in data["threads"][0]["nodes"]) >= 30_000


@pytest.mark.skipif(not chromium(), reason="headless Chromium is not installed (Debian's "
                                           "chromium, in the Makefile's TEST_DEBS)")
def test_html_weighed_by_allocations(env):
    """A profile with allocation sites (--memory): the page can weigh its flame graph and
    table by the bytes allocated and by the allocations, and the graph's total is the
    sum of the profile's own cells, shown in bytes."""
    (env.root / "alloc.py").write_text(textwrap.dedent("""
        def make(n):
            return [bytes(100_000) for _ in range(n)]
        def main():
            return len(make(50))
        main()
    """))
    r = env.strata("python", "--memory", "-o", "alloc", "--", "alloc.py")
    assert r.returncode == 0, r.describe()
    page = env.root / "alloc.html"
    report(env, env.root / "alloc", "--format", "html", "-o", page)
    prof = json.loads((env.root / "alloc" / "profile.json").read_text())
    want = {name: sum(n["metrics"].get(name, 0) for th in prof["threads"] for n in th["nodes"])
            for name in ("alloc_bytes", "allocations")}
    r = run_chromium(env, "--virtual-time-budget=5000", "--dump-dom", page.as_uri() + "#selftest")
    assert r.returncode == 0, r.stderr[-3000:]
    body = re.search(r"<body[^>]*>", r.stdout)
    attrs = dict(re.findall(r'(data-[a-z]+)="([^"]*)"', body.group(0)))
    assert attrs.get("data-errors") == "", attrs
    got = {w.split(":")[0]: w.split(":") for w in attrs["data-weigh"].split(";")}
    assert int(got["alloc_bytes"][1]) == want["alloc_bytes"] and "MiB" in got["alloc_bytes"][2]
    assert int(got["allocations"][1]) == want["allocations"], got
