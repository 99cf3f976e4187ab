"""Child processes (issue 15): with STRATA_FOLLOW_CHILDREN (`--follow-children`, on by
default) every child process of a `strata python` run that runs Python (forked and
going on, multiprocessing's workers by fork, spawn and forkserver, subprocesses of the
same interpreter) profiles itself with the run's settings into process-<pid> of the
results folder, listed in processes.jsonl; the program behaves as without strata
(output, exit status, environment), children print nothing of strata's."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from conftest import STRATA, TIMEOUT, Runner, load_profile

POOL = """
    import multiprocessing as mp
    import sys

    def work(x):
        return sum(i * i for i in range(x * 5000))

    def main():
        with mp.get_context(sys.argv[1]).Pool(4) as pool:
            print(sum(pool.map(work, range(20))))

    if __name__ == "__main__":
        main()
"""

FAMILY = """
    import os
    import subprocess
    import sys

    def leaf():
        return sum(range(1000))

    def forked():
        leaf()
        os._exit(3)

    print("strata in my environment:",
          sorted(k for k in os.environ if "STRATA" in k and not k.startswith("STRATA_TEST")))
    out = subprocess.run([sys.executable, "kid.py"], capture_output=True, text=True)
    print("kid said:", out.stdout.strip(), "| stderr:", repr(out.stderr))
    pid = os.fork()
    if pid == 0:
        forked()
    print("forked child's status:", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""

KID = """
    import os

    def kid_work():
        return sum(range(500))

    kid_work()
    print(sorted(k for k in os.environ if "STRATA" in k and not k.startswith("STRATA_TEST")))
"""


def labels(profile) -> dict:
    """Calls of each label over the profile's threads."""
    out = {}
    for t in profile["threads"]:
        for n in t["nodes"]:
            out[n["label"]] = out.get(n["label"], 0) + n["count"]
    return out


def children(results: Path) -> dict:
    """{pid: (record, profile)} of every child folder, once each has its results
    (a child may end after its parent: multiprocessing's resource tracker)."""
    records = [json.loads(line) for line in (results / "processes.jsonl").read_text().splitlines()]
    records = [r for r in records if "not_followed" not in r]  # named only (test below)
    out = {}
    deadline = time.monotonic() + TIMEOUT
    for rec in records:
        folder = results / rec["folder"]
        while not (folder / "profile.json").exists():
            assert time.monotonic() < deadline, (rec, sorted(os.listdir(folder)))
            time.sleep(0.02)
        out[rec["pid"]] = (rec, load_profile(folder))
    folders = sorted(p.name for p in results.glob("process-*"))
    assert folders == sorted(f"process-{pid}" for pid in out), folders
    return out


def check_tree(results: Path, kids: dict):
    """Every child descends from the run's process, and its profile is its own."""
    meta = load_profile(results)["metadata"]
    top = meta["pid"]
    # the run's profile lists its own children, with their folders and command lines
    direct = {pid: rec for pid, (rec, _) in kids.items() if rec["parent"] == top}
    followed = [c for c in meta.get("children", []) if "folder" in c]
    assert {c["pid"]: (c["folder"], c["command"]) for c in followed} == \
        {pid: (r["folder"], r["command"]) for pid, r in direct.items()}
    for pid, (rec, profile) in kids.items():
        assert profile["metadata"]["pid"] == pid
        parent = rec["parent"]
        while parent != top:
            assert parent in kids, (rec, sorted(kids))
            parent = kids[parent][0]["parent"]


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pool_workers_are_profiled(runner: Runner, method):
    """A multiprocessing.Pool(4)'s workers: `work` is called exactly once a task over
    all of them (20 tasks), whatever the start method; the program's output is
    plain python's."""
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    runner.write("pool.py", POOL)
    plain = runner.plain("pool.py", method)
    res = runner.strata("-o", "out", "pool.py", method)
    assert res.returncode == plain.returncode == 0, res.describe()
    assert res.stdout == plain.stdout
    results = runner.dir / "out"
    kids = children(results)
    check_tree(results, kids)
    calls = sum(labels(p).get("work", 0) for _, p in kids.values())
    assert calls == 20, {pid: labels(p).get("work") for pid, (_, p) in kids.items()}
    assert "work" not in labels(load_profile(results))  # the parent only hands them out
    # strata report on the folder: the parent's tables, the process tree, and work as
    # one row over the workers
    rep = runner.run([STRATA, "report", results])
    assert rep.returncode == 0, rep.describe()
    tree = rep.stdout.split("CHILD PROCESSES (processes.jsonl)")[1].split("LOAD BALANCE")[0]
    assert all(f"process-{pid}/" in tree for pid in kids), tree
    row = [ln for ln in rep.stdout.splitlines() if ln.startswith("| work [pool.py:")]
    assert len(row) == 1, rep.stdout[-3000:]
    cells = [c.strip() for c in row[0].strip("|").split("|")]
    workers = sum(1 for _, p in kids.values() if labels(p).get("work"))
    assert int(cells[1]) == workers and float(cells[-1]) > 0, cells
    # the children printed nothing of strata's (their stderr is their parent's to read)
    assert "child process" in res.stderr and res.stderr.count("[strata] results in") == 1


def test_forked_and_spawned_children(runner: Runner):
    """A subprocess of the same interpreter and a forked child that ends by os._exit
    are profiled; exit statuses, outputs and the environment the programs see are
    as without strata, and the parent's command line and the child's are recorded."""
    runner.write("family.py", FAMILY)
    runner.write("kid.py", KID)
    plain = runner.plain("family.py")
    res = runner.strata("-o", "out", "--components", "trip_count", "family.py")
    assert res.returncode == plain.returncode == 0, res.describe()
    assert res.stdout == plain.stdout, res.describe()
    assert "forked child's status: 3" in res.stdout and "strata in my environment: []" in res.stdout
    results = runner.dir / "out"
    kids = children(results)
    check_tree(results, kids)
    by_name = {}
    for rec, profile in kids.values():
        by_name[Path(rec["command"][-1]).name if "kid.py" in rec["command"][-1] else "fork"] = (
            rec, profile)
    assert set(by_name) == {"kid.py", "fork"}, [r["command"] for r, _ in kids.values()]
    kid_rec, kid = by_name["kid.py"]
    assert labels(kid)["kid_work"] == 1  # beside what the interpreter's start imports
    assert kid_rec["command"][1:] == ["kid.py"]
    fork_rec, forked = by_name["fork"]
    # the child's calls are those made after the fork (beside forked and leaf, the
    # interpreter's own after-fork hooks); the parent's profile has none of them
    assert labels(forked)["forked"] == labels(forked)["leaf"] == 1, labels(forked)
    assert "forked" not in labels(load_profile(results))
    assert fork_rec["command"] == ["strata", "python", "-o", "out", "--components", "trip_count",
                                   "family.py"]
    # the flags reach the children: trip_count alone, as the parent
    for _, profile in kids.values():
        assert [c["name"] for c in profile["components"]] == ["trip_count"]


def test_follow_children_off(runner: Runner):
    """--follow-children off: children run unprofiled, nothing of strata in their
    environment, nothing written for them."""
    runner.write("family.py", FAMILY)
    runner.write("kid.py", KID)
    plain = runner.plain("family.py")
    res = runner.strata("-o", "out", "--follow-children", "off", "family.py")
    assert res.returncode == 0 and res.stdout == plain.stdout, res.describe()
    assert "kid said: [] |" in res.stdout
    assert not list((runner.dir / "out").glob("process-*"))
    assert not (runner.dir / "out" / "processes.jsonl").exists()


def test_results_folder_used_again(runner: Runner):
    """A second run into the same results folder lists its own children only: the
    first run's lines leave processes.jsonl, and the end line counts this run's."""
    runner.write("family.py", FAMILY)
    runner.write("kid.py", KID)
    for _ in range(2):
        res = runner.strata("-o", "out", "family.py")
        assert res.returncode == 0, res.describe()
    assert "2 child processes profiled" in res.stderr, res.describe()
    records = [json.loads(line)
               for line in (runner.dir / "out" / "processes.jsonl").read_text().splitlines()]
    top = load_profile(runner.dir / "out")["metadata"]["pid"]
    assert len(records) == 2 and all(r["parent"] == top for r in records), records


def test_children_trace_and_sample(runner: Runner):
    """The run's modes are the children's: --trace gives each child its timeline,
    --sample its samples; the timelines of a run's processes merge into one."""
    runner.write("pool.py", POOL)
    for opts, wanted in ((["--trace"], "trace.pftrace"), (["--sample", "-f", "1000"], "samples.txt")):
        out = f"out-{wanted}"
        res = runner.strata("-o", out, *opts, "pool.py", "fork")
        assert res.returncode == 0, res.describe()
        kids = children(runner.dir / out)
        assert len(kids) == 4
        for pid in kids:
            assert (runner.dir / out / f"process-{pid}" / wanted).is_file()
    # the processes ran together: strata merge makes one timeline of them, a process
    # track each, as of an MPI job's ranks
    folders = [str(runner.dir / "out-trace.pftrace")] + \
        [str(p) for p in sorted((runner.dir / "out-trace.pftrace").glob("process-*"))]
    m = runner.run([STRATA, "merge", "-o", "merged", *folders])
    assert m.returncode == 0 and "merged 5 traces" in m.stderr, m.describe()
    from test_trace import decode, need_schema
    need_schema()
    pids = {pid for pid, _ in decode(runner.dir / "merged" / "trace.pftrace").processes.values()}
    top = load_profile(runner.dir / "out-trace.pftrace")["metadata"]["pid"]
    assert pids == {top} | set(children(runner.dir / "out-trace.pftrace")), pids
    # runs one after another are not one timeline
    again = runner.strata("-o", "again", "--trace", "pool.py", "fork")
    assert again.returncode == 0, again.describe()
    m2 = runner.run([STRATA, "merge", "-o", "merged2", str(runner.dir / "out-trace.pftrace"),
                     str(runner.dir / "again")])
    assert m2.returncode == 0 and "traces" not in m2.stderr, m2.describe()


OTHERS = """
    import os
    import subprocess
    import sys

    subprocess.run(["ls", "-d", "/"])                       # a program: named
    subprocess.run("exit 4", shell=True)                    # a shell: named
    subprocess.run(["./tool.sh"])                           # a script of the shell: named
    subprocess.run(["./pyscript"])                          # a script of this Python: followed
    subprocess.run([sys.executable, "-c", "pass"], env={"A": "1"})  # its own environment
    print("system:", os.system("exit 2") >> 8)
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/echo", ["echo", "exec'd"])       # the fork becomes a program
    print("exec'd child:", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    try:
        subprocess.run(["./no-such-program"])
    except OSError as e:
        print("missing:", type(e).__name__)
"""


def test_programs_not_followed_are_named(runner: Runner):
    """Children that run another program (subprocess, a shell, os.system, a script of
    another interpreter, a fork that execs) are named in processes.jsonl with their
    command line and why they are not followed, and so is a Python child given an
    environment of its own; a script of this Python is followed. The program's output
    and statuses are plain python's; strata report shows them in the tree."""
    import sys
    runner.write("others.py", OTHERS)
    runner.write("tool.sh", "#!/bin/sh\necho tool\n")
    runner.write("pyscript", f"#!{sys.executable}\ndef scripted():\n    pass\nscripted()\n")
    for name in ("tool.sh", "pyscript"):
        os.chmod(runner.dir / name, 0o755)
    plain = runner.plain("others.py")
    res = runner.strata("-o", "out", "others.py")
    assert res.returncode == plain.returncode == 0, res.describe()
    assert res.stdout == plain.stdout, res.describe()
    assert "missing: FileNotFoundError" in res.stdout and "system: 2" in res.stdout
    results = runner.dir / "out"
    records = [json.loads(line) for line in (results / "processes.jsonl").read_text().splitlines()]
    named = [(r["pid"], r["command"], r["not_followed"]) for r in records if "not_followed" in r]
    # (children() waits for every followed process's profile.json: the fork wrote
    # what it recorded before it became echo)
    kids = children(results)
    fork_pid = [pid for pid, (rec, _) in kids.items() if rec["command"][0] == "strata"]
    assert len(fork_pid) == 1, [rec for rec, _ in kids.values()]
    assert [(command, why) for _, command, why in named] == [
        (["ls", "-d", "/"], "not Python"),
        (["/bin/sh", "-c", "exit 4"], "not Python"),
        (["./tool.sh"], "not Python"),
        ([named[3][1][0], "-c", "pass"], "an environment without strata's variable"),
        (["/bin/sh", "-c", "exit 2"], "not Python"),
        (["echo", "exec'd"], "not Python"),
    ], named  # the missing program is not: it never started
    # each with its own pid (a child names itself just before it becomes the
    # program), but the shell of os.system, named before it starts
    pids = [pid for pid, _, _ in named]
    assert len(set(pids[:4])) == 4 and all(pid > 0 for pid in pids[:4]), named
    assert pids[4:] == [0, fork_pid[0]], named
    top = load_profile(results)["metadata"]["pid"]
    assert all(r["parent"] == top for r in records if "not_followed" in r and r["pid"] in pids[:4])
    assert Path(named[3][1][0]).name.startswith("python")  # the program's sys.executable
    scripted = [p for rec, p in kids.values() if rec["command"][-1] == "./pyscript"]
    assert len(scripted) == 1 and labels(scripted[0])["scripted"] == 1
    # the run's profile lists them among its children, pid null where not known
    meta = load_profile(results)["metadata"]
    listed = [(c["pid"], c["not_followed"]) for c in meta["children"] if "not_followed" in c]
    assert listed == [(None if pid == 0 else pid, why) for pid, _, why in named]
    assert "5 not followed" not in res.stderr and "6 not followed" in res.stderr, res.stderr
    rep = runner.run([STRATA, "report", results])
    assert rep.returncode == 0, rep.describe()
    tree = rep.stdout.split("CHILD PROCESSES (processes.jsonl)")[1]
    assert "| not followed: not Python" in tree and "ls -d /" in tree
    assert f"process-{fork_pid[0]}/ (then it ran another program)" in tree, tree


def test_programs_named_with_their_pids(runner: Runner):
    """The programs a run starts are named from the C library's calls, as the
    interpreter makes them: os.posix_spawn's program with the pid it returned, a
    program given as a pathlib path by its text, a control character escaped, and
    a program started from another thread; each with its own pid. Output and
    statuses are plain python's."""
    runner.write("spawn.py", """
        import os
        import pathlib
        import subprocess
        import threading

        pid = os.posix_spawn("/bin/echo", ["echo", "spawned"], os.environ)
        print("status:", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
        print("spawned pid:", pid, flush=True)
        subprocess.run([pathlib.Path("/bin/echo"), "a path"])
        subprocess.run(["/bin/echo", "a\\ttab"])

        def start():
            subprocess.run(["/bin/true"])

        t = threading.Thread(target=start)
        t.start()
        t.join()
    """)
    plain = runner.plain("spawn.py")
    res = runner.strata("-o", "out", "spawn.py")
    assert res.returncode == plain.returncode == 0, res.describe()

    def without_pid(out):
        return [line for line in out.splitlines() if not line.startswith("spawned pid:")]
    assert without_pid(res.stdout) == without_pid(plain.stdout), res.describe()
    spawned = int(res.stdout.split("spawned pid:")[1].split()[0])
    records = [json.loads(line)
               for line in (runner.dir / "out" / "processes.jsonl").read_text().splitlines()]
    named = [(r["command"], r["not_followed"]) for r in records if "not_followed" in r]
    assert named == [
        (["echo", "spawned"], "not Python"),
        (["/bin/echo", "a path"], "not Python"),
        (["/bin/echo", "a\ttab"], "not Python"),
        (["/bin/true"], "not Python"),
    ], named
    pids = [r["pid"] for r in records if "not_followed" in r]
    assert pids[0] == spawned and all(p > 0 for p in pids) and len(set(pids)) == 4, pids


def test_exec_writes_results(runner: Runner):
    """A run that becomes another program (os.execv) writes what it recorded first,
    as at its end, followed or not; the program's output is plain python's."""
    runner.write("ex.py", """
        import os
        import sys

        def before():
            return sum(range(1000))

        before()
        print("python part", flush=True)
        os.execv("/bin/echo", ["echo", "now echo"])
    """)
    plain = runner.plain("ex.py")
    for follow in ("on", "off"):
        res = runner.strata("-o", f"out-{follow}", "--follow-children", follow, "ex.py")
        assert res.returncode == plain.returncode == 0, res.describe()
        assert res.stdout == plain.stdout == "python part\nnow echo\n", res.describe()
        results = runner.dir / f"out-{follow}"
        assert labels(load_profile(results))["before"] == 1
        assert not (results / "incomplete.txt").exists()
        assert "[strata] results in" in res.stderr
        assert "not followed" not in res.stderr  # the run itself became echo: no child
    rec = json.loads((runner.dir / "out-on" / "processes.jsonl").read_text())
    assert rec["command"] == ["echo", "now echo"] and rec["not_followed"] == "not Python"


def test_html_report_of_the_tree(runner: Runner):
    """strata report -f html on a folder whose run followed its children: one page of
    the whole tree, each process's threads as its own (by pid), the tree's table
    (the programs not followed too), the pool's work summed over the workers; in
    Chromium, a click on a process shows its profile alone."""
    import re
    import shutil
    import subprocess
    runner.write("pool.py", POOL + "\n    import subprocess\n    subprocess.run(['true'])\n")
    res = runner.strata("-o", "out", "pool.py", "fork")
    assert res.returncode == 0, res.describe()
    results = runner.dir / "out"
    kids = children(results)
    top = load_profile(results)["metadata"]["pid"]
    page = runner.dir / "tree.html"
    rep = runner.run([STRATA, "report", results, "--format", "html", "-o", page])
    assert rep.returncode == 0, rep.describe()
    html = page.read_text()
    data = json.loads(re.search(r'id="strata-data">(.*?)</script>', html, re.S).group(1))
    records = [json.loads(line) for line in (results / "processes.jsonl").read_text().splitlines()]
    assert [p[0] for p in data["processes"]] == [top] + [r["pid"] for r in records]
    assert data["processes"][-1][2:4] == [None, "not Python"]
    assert {t["rank"] for t in data["threads"]} == {top} | set(kids)
    work = data["labels"].index("work")
    calls = sum(t["nodes"][7 * i + 2] for t in data["threads"]
                for i in range(len(t["nodes"]) // 7) if t["nodes"][7 * i + 1] == work)
    assert calls == 20
    assert f"{len(kids) + 1} processes with results" in html
    # several formats: the page is the tree's, the other formats the run's own
    both = runner.run([STRATA, "report", results, "--format", "html,json", "-o", "two"])
    assert both.returncode == 0, both.describe()
    assert (runner.dir / "two" / "report.html").read_text().count('"processes":') == 1
    assert "work" not in labels(json.loads((runner.dir / "two" / "profile.json").read_text()))
    browser = shutil.which("chromium")
    if not browser:
        return  # the page's behaviour is test_report.py's Chromium test's, where it runs
    r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-dev-shm-usage", f"--user-data-dir={runner.dir / '_chrome'}",
                        "--virtual-time-budget=5000", "--dump-dom", page.as_uri() + "#selftest"],
                       capture_output=True, text=True, timeout=90, env=runner.env({"LD_PRELOAD": None}))
    body = re.search(r"<body[^>]*>", r.stdout)
    assert r.returncode == 0 and body, r.stderr[-2000:]
    attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', body.group(0)))
    assert attrs["data-errors"] == "" and attrs["data-processes"] == str(len(records) + 1), attrs
    shown = attrs["data-process-click"]
    assert re.fullmatch(r"process \d+ thread 0 \(MainThread\):\d+", shown), attrs
    assert int(shown.split()[1]) in kids, attrs
