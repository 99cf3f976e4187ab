"""A run's life from its start to its results, however it ends (issue 9).

The results folder is fixed before the program starts (a chdir cannot move it); every
file a rank writes carries the rank; every file is created exclusively; a file that
cannot be written never stops the others and is always reported; warnings about lost
data print whether or not the tables do; strata's messages reach the terminal even when
the program reuses fd 2; SIGTERM and os._exit still leave a profile, and what ends a
run without one leaves a note that says so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import STRATA, find_results, load_profile, read_table, results_dirs

QUIET = {"STRATA_PRINT_TABLES": "OFF", "STRATA_COMPONENTS": "trip_count"}


def names(folder: Path) -> set:
    return set(os.listdir(folder))


# --------------------------------------------------------------------------- item 3: chdir

CHDIR = """
import os
def before():
    pass
def after():
    pass
before()
os.makedirs("elsewhere", exist_ok=True)
os.chdir("elsewhere")
after()
open("profile.json", "w").write("the program's own file\\n")
print(os.getcwd().endswith("elsewhere"))
"""


def test_program_that_changes_directory_keeps_default_folder(runner):
    runner.write("cd.py", CHDIR)
    r = runner.strata("--", "cd.py", env={"STRATA_COMPONENTS": "trip_count"})
    assert r.returncode == 0 and r.stdout == "True\n", r.describe()
    res = find_results(runner.dir)  # in the folder strata started in
    table = read_table(res, "trip_count")
    assert table.get("before") and table.get("after"), table.text
    assert not (runner.dir / "elsewhere" / "strata-cd-output").exists()
    assert (runner.dir / "elsewhere" / "profile.json").read_text() == "the program's own file\n"
    # announced as the user named it, relative to where the user is
    assert f"[strata] results in {res.relative_to(runner.dir)}\n" in r.stderr


def test_relative_output_folder_is_fixed_before_the_program_runs(runner):
    runner.write("cd.py", CHDIR)
    r = runner.strata("-o", "out", "--", "cd.py", env={"STRATA_COMPONENTS": "trip_count"})
    assert r.returncode == 0, r.describe()
    assert (runner.dir / "out" / "profile.json").is_file()
    assert read_table(runner.dir / "out", "trip_count").get("after")
    # the program's file of the same name in its new directory is untouched
    assert (runner.dir / "elsewhere" / "profile.json").read_text() == "the program's own file\n"
    assert not (runner.dir / "elsewhere" / "out").exists()
    assert "[strata] results in out\n" in r.stderr


# --------------------------------------------------------------------------- item 1: ranks

def test_every_file_of_a_rank_carries_the_rank(runner):
    """Under an MPI launcher (its rank variable), the trace, the Chrome trace and the
    sampling table are per rank, as profile-N.json and the tables already were."""
    runner.write("r.py", "def work():\n    return 1\nwork()\n")
    env = {**QUIET, "OMPI_COMM_WORLD_RANK": "3", "STRATA_TRACE": "ON",
           "STRATA_TRACE_FORMAT": "perfetto,chrome", "STRATA_USE_PROCESS_SAMPLING": "ON",
           "STRATA_OUTPUT_PATH": runner.dir / "out"}
    r = runner.strata("--", "r.py", env=env)
    assert r.returncode == 0 and r.stderr == "", r.describe()
    assert names(runner.dir / "out") == {"trace-3.pftrace", "trace-3.json",
                                         "process_sampling-3.txt", "trip_count-3.txt",
                                         "profile-3.json"}


BREAKS_FOLDER = """
import shutil, sys
def work():
    return 1
work()
shutil.rmtree(sys.argv[1])
open(sys.argv[1], "w").write("not a folder\\n")
"""


def test_every_file_is_tried_and_each_failure_said(runner):
    """The results folder is gone at the end: each file's failure is reported, then how
    many failed, even with STRATA_PRINT_TABLES=OFF; the exit status is the program's."""
    runner.write("b.py", BREAKS_FOLDER)
    out = runner.dir / "out"
    env = {**QUIET, "STRATA_TRACE": "ON", "STRATA_USE_PROCESS_SAMPLING": "ON",
           "STRATA_OUTPUT_FORMATS": "text,json,folded", "OMPI_COMM_WORLD_RANK": "2"}
    r = runner.strata("-o", out, "--", "b.py", out, env=env)
    assert r.returncode == 0, r.describe()
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("strata: error: ")]
    for name in ("trace-2.pftrace", "process_sampling-2.txt", "trip_count-2.txt",
                 "profile-2.json", "profile-2.folded"):
        assert any(name in e for e in errors), (name, r.stderr)
    assert errors[-1].startswith("strata: error: 5 files of the results could not be "
                                 "written by rank 2"), r.stderr
    assert "results in" not in r.stderr


def test_tables_print_when_their_files_cannot_be_written(runner):
    """The terminal's tables are copied from their files; with the folder gone they are
    rendered straight to the terminal instead, and the failures follow them."""
    runner.write("b.py", BREAKS_FOLDER)
    out = runner.dir / "out"
    env = {"STRATA_COMPONENTS": "trip_count", "STRATA_USE_PROCESS_SAMPLING": "ON"}
    r = runner.strata("-o", out, "--", "b.py", out, env=env)
    assert r.returncode == 0, r.describe()
    assert "COUNTS NUMBER OF INVOCATIONS" in r.stderr and "work" in r.stderr, r.stderr
    assert "PROCESS SAMPLING" in r.stderr.upper(), r.stderr
    tables_end = r.stderr.index("COUNTS NUMBER OF INVOCATIONS")
    assert r.stderr.index("strata: error: 3 files of the results could not be written") > \
        tables_end, r.stderr
    assert "results in" not in r.stderr


# --------------------------------------------------------------------------- item 1: mpirun

MPI_PROG = """
from mpi4py import MPI

def work(rank):
    return sum(i * rank for i in range(20000))

comm = MPI.COMM_WORLD
total = comm.allreduce(work(comm.Get_rank()))
if comm.Get_rank() == 0:
    print("total", total, "size", comm.Get_size())
"""


def test_mpirun_four_ranks_trace_and_sampling(runner, venv_python):
    """mpi4py on Open MPI, four ranks sharing the default results folder, with the
    trace and process sampling on: every rank writes all its files."""
    mpirun = shutil.which("mpirun")
    if not mpirun:
        pytest.skip("mpirun is not installed (Debian's openmpi-bin)")
    probe = runner.run([venv_python, "-c", "import mpi4py"])
    if probe.returncode != 0:
        pytest.skip(f"mpi4py is not installed in {venv_python} (make venv installs it)")
    runner.write("mpi.py", MPI_PROG)
    env = {"STRATA_TRACE": "ON", "STRATA_USE_PROCESS_SAMPLING": "ON",
           "STRATA_PRINT_TABLES": "OFF", "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"}
    r = runner.run([mpirun, "-n", "4", "--oversubscribe", STRATA, "python", "--", "mpi.py"],
                   env=env, timeout=120)
    assert r.returncode == 0, r.describe()
    assert "total" in r.stdout and "size 4" in r.stdout, r.describe()
    assert "strata: error" not in r.stderr and "cannot write" not in r.stderr, r.describe()
    # the ranks share the folder of the second they started in (two, when they
    # started across a second's boundary)
    found = results_dirs(runner.dir)
    assert 1 <= len(found) <= 2, found
    files = {f: d for d in found for f in names(d)}
    for rank in range(4):
        for name in (f"profile-{rank}.json", f"wall_clock-{rank}.txt", f"trace-{rank}.pftrace",
                     f"process_sampling-{rank}.txt"):
            assert name in files, (name, sorted(files))
        prof = json.loads((files[f"profile-{rank}.json"] / f"profile-{rank}.json").read_text())
        assert prof["metadata"]["rank"] == rank
    assert not [f for f in files if f.startswith(".") or f.startswith("incomplete")], files


# --------------------------------------------------------------------------- item 5: endings

SLEEPER = """
import sys, time
def waiting():
    print("ready", flush=True)
    time.sleep(30)
def before():
    pass
before()
waiting()
print("not reached")
"""


def test_sigterm_from_outside_writes_then_dies_by_sigterm(runner):
    """As Slurm's time limit or mpirun's cleanup sends it: the profile is written, the
    call that was running is in it, and the process still ends by SIGTERM."""
    runner.write("sl.py", SLEEPER)
    p = subprocess.Popen([str(STRATA), "python", "--", "sl.py"], cwd=runner.dir,
                         env=runner.env({"STRATA_COMPONENTS": "trip_count"}),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGTERM, (p.returncode, err.decode())
    assert b"not reached" not in out
    res = find_results(runner.dir)
    table = read_table(res, "trip_count")
    assert table.get("waiting").count == 1 and table.get("before").count == 1, table.text
    assert "incomplete.txt" not in names(res)
    assert b"[strata] results in" in err


def test_sigterm_while_c_code_holds_the_gil_still_ends_the_process(runner):
    """A program stuck in C code that holds the interpreter's lock: strata cannot write,
    but the process must still end by SIGTERM (after strata's 10 s wait), not hang."""
    runner.write("stuck.py", """
import re
print("ready", flush=True)
re.match(r"(a+)+$", "a" * 64 + "b")  # backtracks for ages in C, holding the GIL
""")
    p = subprocess.Popen([str(STRATA), "python", "--", "stuck.py"], cwd=runner.dir,
                         env=runner.env(QUIET), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    time.sleep(0.5)  # into the regex
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=40)
    assert p.returncode == -signal.SIGTERM and time.monotonic() - t0 < 30
    assert names(find_results(runner.dir)) == {"incomplete.txt"}


def test_sigterm_while_results_are_written_waits_for_them(runner):
    """A SIGTERM that comes while strata writes at the normal end (here a slow
    Graphviz, 12 s: past the watchdog's 10 s) lets the writing finish, then ends the
    process by SIGTERM."""
    bin_dir = runner.dir / "bin"
    bin_dir.mkdir()
    dot = bin_dir / "dot"
    dot.write_text("#!/bin/sh\ncat >/dev/null\nsleep 12\necho slow-png\n")
    dot.chmod(dot.stat().st_mode | stat.S_IEXEC)
    runner.write("end.py", "def work():\n    return 1\nwork()\nprint('ending', flush=True)\n")
    env = runner.env({**QUIET, "STRATA_OUTPUT_FORMATS": "text,png,folded",
                      "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                      "STRATA_OUTPUT_PATH": runner.dir / "out"})
    p = subprocess.Popen([str(STRATA), "python", "--", "end.py"], cwd=runner.dir, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"ending\n"
    time.sleep(1)  # strata is waiting for dot now
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGTERM, (p.returncode, err.decode())
    files = names(runner.dir / "out")
    assert {"trip_count.txt", "callgraph.png", "profile.folded"} <= files, files
    assert (runner.dir / "out" / "callgraph.png").read_text() == "slow-png\n"


def test_own_sigterm_handler_is_kept(runner):
    """A program that handles SIGTERM itself sees its own handler run, as without
    strata; strata writes at the normal end."""
    runner.write("h.py", """
import os, signal, sys
print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
def handler(signum, frame):
    print("handled", signum)
    sys.exit(7)
signal.signal(signal.SIGTERM, handler)
os.kill(os.getpid(), signal.SIGTERM)
""")
    plain = runner.plain("h.py")
    prof = runner.strata("--", "h.py", env=QUIET)
    assert (plain.returncode, plain.stdout) == (7, "True\nhandled 15\n")
    assert (prof.returncode, prof.stdout, prof.stderr) == (7, plain.stdout, plain.stderr)
    assert read_table(find_results(runner.dir), "trip_count").get("handler")


def test_os_exit_in_a_thread_writes_the_profile(runner):
    runner.write("x.py", """
import os, threading
def work():
    return 1
def leave():
    work()
    os._exit(3)
threading.Thread(target=leave).start()
threading.Event().wait(30)
""")
    r = runner.strata("--", "x.py", env=QUIET)
    assert r.returncode == 3 and r.stderr == "", r.describe()
    res = find_results(runner.dir)
    assert read_table(res, "trip_count").named("work"), names(res)
    assert "incomplete.txt" not in names(res)


def test_os_exit_keeps_its_errors_and_children(runner):
    """A bad argument raises what plain Python raises; a forked child's os._exit
    writes nothing; os._exit is the real one again once the results are written."""
    runner.write("e.py", """
import os, sys
try:
    os._exit("x")
except TypeError as e:
    print("TypeError", e)
pid = os.fork()
if pid == 0:
    os._exit(4)
print(os.waitpid(pid, 0)[1] >> 8)
import atexit
atexit.register(lambda: print(os._exit.__module__, os._exit.__name__))
""")
    plain = runner.plain("e.py")
    prof = runner.strata("--", "e.py", env=QUIET)
    assert plain.returncode == 0
    assert (prof.returncode, prof.stdout, prof.stderr) == (0, plain.stdout, plain.stderr)
    assert len(results_dirs(runner.dir)) == 1


def test_strata_thread_is_gone_while_the_program_forks(runner):
    """CPython 3.12+ warns when a process with several threads forks: strata's SIGTERM
    watcher ends before os.fork and starts again after, so the program forks with its
    own threads only (counted as CPython counts them, in /proc/self/stat)."""
    # registered before strata's hooks, so it runs after them, just before the fork
    runner.write("setup.py", """
import os
def count():
    with open("/proc/self/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[17]
os.register_at_fork(before=lambda: open("threads_at_fork", "a").write(count() + "\\n"))
""")
    runner.write("fk.py", """
import os
def count():
    with open("/proc/self/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[17]
for i in range(2):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
print(count())
""")
    r = runner.strata("-s", "setup.py", "--", "fk.py", env=QUIET)
    assert r.returncode == 0 and r.stderr == "", r.describe()
    assert (runner.dir / "threads_at_fork").read_text() == "1\n1\n"
    assert r.stdout == "2\n"  # the watcher is back after each fork
    assert read_table(find_results(runner.dir), "trip_count").get("count")


def test_sigterm_after_a_fork_still_writes(runner):
    """After os.fork the watcher is back (on 3.13+ from the parent's next bytecode, as
    CPython counts threads after the fork hooks there): a SIGTERM then still writes the
    profile and ends the process by SIGTERM."""
    runner.write("fs.py", """
import os, time
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
def waiting():
    print("ready", flush=True)
    time.sleep(30)
waiting()
print("not reached")
""")
    p = subprocess.Popen([str(STRATA), "python", "--", "fs.py"], cwd=runner.dir,
                         env=runner.env({"STRATA_COMPONENTS": "trip_count"}),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGTERM, (p.returncode, err.decode())
    assert b"DeprecationWarning" not in err and b"not reached" not in out, err.decode()
    res = find_results(runner.dir)
    assert read_table(res, "trip_count").get("waiting").count == 1
    assert "incomplete.txt" not in names(res)


def test_sigkill_leaves_a_note_not_an_empty_folder(runner):
    runner.write("k.py", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    r = runner.strata("--", "k.py", env=QUIET)
    assert r.returncode == -signal.SIGKILL, r.describe()
    res = find_results(runner.dir)
    assert names(res) == {"incomplete.txt"}
    note = (res / "incomplete.txt").read_text()
    assert "SIGKILL" in note and "removes this file once the results are written" in note


# --------------------------------------------------------------------------- item 12: fd 2

CLOSES_STDERR = """
import os
def work():
    return 1
work()
os.close(2)
fd = os.open("program.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
assert fd == 2, fd
os.write(2, b"the program's log\\n")
"""


def test_tables_never_land_in_the_programs_file(runner):
    runner.write("c.py", CLOSES_STDERR)
    r = runner.strata("--", "c.py", env={"STRATA_COMPONENTS": "trip_count"})
    assert r.returncode == 0, r.describe()
    assert (runner.dir / "program.log").read_text() == "the program's log\n"
    assert "COUNTS NUMBER OF INVOCATIONS" in r.stderr and "[strata] results in" in r.stderr


# --------------------------------------------------------------------------- item 9: warnings

def test_lost_data_is_said_without_tables(runner):
    runner.write("w.py", """
def f0(): pass
def f1(): pass
def f2(): pass
def f3(): pass
for f in (f0, f1, f2, f3):
    f()
""")
    r = runner.strata("--", "w.py", env={**QUIET, "STRATA_MAX_NODES": "2"})
    assert r.returncode == 0, r.describe()
    assert "calls were not recorded (STRATA_MAX_NODES reached)" in r.stderr, r.describe()
    assert "COUNTS NUMBER" not in r.stderr and "results in" not in r.stderr


def test_trace_drops_are_said_without_tables(runner):
    runner.write("d.py", "def tiny(i):\n    return i\nfor i in range(120000):\n    tiny(i)\n")
    r = runner.strata("--", "d.py", env={**QUIET, "STRATA_TRACE": "ON",
                                         "STRATA_TRACE_BUFFER_SIZE": "1MiB"})
    assert r.returncode == 0, r.describe()
    assert "calls were not recorded: the buffer was full" in r.stderr, r.describe()


# --------------------------------------------------------------------------- item 7: spill

SPILL_FAILS = """
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, hard))  # the disk is "full"
def tiny(i):
    return i
for i in range(120000):
    tiny(i)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # room again for the results
"""


def test_failed_spill_is_a_write_error_and_the_trace_says_so(runner):
    from test_trace import decode, need_schema
    runner.write("sp.py", SPILL_FAILS)
    env = {**QUIET, "STRATA_TRACE": "ON", "STRATA_TRACE_BUFFER_SIZE": "1MiB",
           "STRATA_TRACE_FILL_POLICY": "flush", "STRATA_OUTPUT_PATH": runner.dir / "out"}
    r = runner.strata("--", "sp.py", env=env)
    assert r.returncode == 0, r.describe()
    want = "strata: error: trace: writing the spill file in"
    assert want in r.stderr and os.strerror(27) in r.stderr, r.describe()  # EFBIG
    assert "the trace is incomplete" in r.stderr
    assert "the buffer was full" not in r.stderr, r.describe()
    need_schema()
    t = decode(runner.dir / "out" / "trace.pftrace")
    assert "writing the spill file failed (File too large)" in t.attributes["strata.incomplete"]
    lost = int(t.attributes["strata.dropped_calls"])
    assert lost > 0 and t.names()["tiny"] + lost == 120000


# --------------------------------------------------------------------------- item 11: links

@pytest.mark.parametrize("name, fmt", [("trace.pftrace", "perfetto"), ("trace.json", "chrome")])
def test_planted_link_in_results_folder_is_never_followed(runner, name, fmt):
    victim = runner.dir / "victim.txt"
    victim.write_text("precious\n")
    out = runner.dir / "out"
    runner.write("p.py", f"""
import os, sys
os.symlink({str(victim)!r}, os.path.join(sys.argv[1], ".{name}.tmp"))
def work():
    return 1
work()
""")
    env = {**QUIET, "STRATA_TRACE": "ON", "STRATA_TRACE_FORMAT": fmt}
    r = runner.strata("-o", out, "--", "p.py", out, env=env)
    assert r.returncode == 0 and r.stderr == "", r.describe()
    assert victim.read_text() == "precious\n"
    assert (out / name).is_file() and not (out / name).is_symlink()
    assert (out / name).stat().st_size > 0


# --------------------------------------------------------------------------- item 22: Graphviz

def test_png_without_graphviz_is_an_error_before_the_run(runner):
    runner.write("g.py", "open('ran', 'w').close()\n")
    for front in (runner.strata, runner.module):
        r = front("--", "g.py", env={**QUIET, "STRATA_OUTPUT_FORMATS": "text,png",
                                     "PATH": runner.dir / "nothing-here"})
        assert r.returncode == 2, r.describe()
        assert r.stderr.startswith("strata: error: STRATA_OUTPUT_FORMATS: png needs "
                                   "Graphviz's dot"), r.stderr
        assert len(r.stderr.splitlines()) == 1
        assert not (runner.dir / "ran").exists() and not results_dirs(runner.dir)


def test_one_failing_format_never_stops_the_others(runner):
    """Graphviz's dot is there at the start but fails at the end: png is reported,
    and the formats after it are written all the same."""
    bin_dir = runner.dir / "bin"
    bin_dir.mkdir()
    dot = bin_dir / "dot"
    dot.write_text("#!/bin/sh\necho 'dot: out of order' >&2\nexit 1\n")
    dot.chmod(dot.stat().st_mode | stat.S_IEXEC)
    runner.write("f.py", "def work():\n    return 1\nwork()\n")
    env = {**QUIET, "STRATA_OUTPUT_FORMATS": "text,json,png,folded,callgrind",
           "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
           "STRATA_OUTPUT_PATH": runner.dir / "out"}
    r = runner.strata("--", "f.py", env=env)
    assert r.returncode == 0, r.describe()
    assert "strata: error: Graphviz's dot failed to make png: dot: out of order" in r.stderr
    assert "1 file of the results could not be written" in r.stderr
    assert {"profile.folded", "callgrind.out", "profile.json", "trip_count.txt"} <= \
        names(runner.dir / "out"), names(runner.dir / "out")
    assert "callgraph.png" not in names(runner.dir / "out")


# --------------------------------------------------------------------------- item 23

def test_trace_format_without_trace(runner):
    runner.write("t.py", "open('ran', 'w').close()\n")
    r = runner.strata("--trace-format", "chrome", "--", "t.py", env=QUIET)
    assert r.returncode == 2 and not (runner.dir / "ran").exists(), r.describe()
    assert r.stderr == ("strata: error: --trace-format chrome chooses the timeline's formats, "
                        "but no timeline is recorded: add --trace (or STRATA_TRACE=ON)\n")
    # from the environment or a config file (set once for every run): a warning
    r = runner.strata("--", "t.py", env={**QUIET, "STRATA_TRACE_FORMAT": "chrome"})
    assert r.returncode == 0 and (runner.dir / "ran").exists(), r.describe()
    assert r.stderr == ("strata: warning: STRATA_TRACE_FORMAT=chrome (from the environment) "
                        "has no effect: no timeline is recorded without STRATA_TRACE=ON "
                        "(or --trace)\n")
    r = runner.strata("--trace", "--trace-format", "chrome", "--", "t.py", env=QUIET)
    assert r.returncode == 0 and r.stderr == "", r.describe()
    # a config file from `strata avail -G` holds every setting, the default format too
    cfg = runner.dir / "all.cfg"
    g = runner.run([STRATA, "avail", "-G", cfg])
    assert g.returncode == 0 and "STRATA_TRACE_FORMAT = perfetto" in cfg.read_text(), g.describe()
    r = runner.strata("-c", cfg, "--", "t.py", env=QUIET)
    assert r.returncode == 0 and r.stderr == "", r.describe()


# --------------------------------------------------------------------------- item 30: network

NET = """
import socket, threading, time
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
def serve():
    c, _ = srv.accept()
    while c.recv(65536):
        pass
t = threading.Thread(target=serve)
t.start()
cli = socket.create_connection(srv.getsockname())
time.sleep(0.1)
cli.sendall(b"x" * 4_000_000)
cli.close()
t.join()
time.sleep(0.1)
"""


def test_network_counts_are_the_runs(runner):
    """network.received/sent start at 0 with the run (they were the namespace's totals
    since boot), and the table says what they measure."""
    runner.write("n.py", NET)
    env = {**QUIET, "STRATA_USE_PROCESS_SAMPLING": "ON", "STRATA_PROCESS_SAMPLING_FREQ": "100"}
    for i in range(2):  # the first run's traffic is history for the second
        out = runner.dir / f"out{i}"
        r = runner.strata("-o", out, "--", "n.py", env=env)
        assert r.returncode == 0, r.describe()
    metrics = {m["name"]: m for m in load_profile(out)["process_sampling"]["metrics"]}
    for name in ("network.received", "network.sent"):
        m = metrics[name]
        assert m["min"] < 100_000, m  # a few packets of other processes at most
        assert m["max"] >= 4_000_000, m
    table = (out / "process_sampling.txt").read_text()
    assert "network.received, network.sent: bytes through every interface of the network " \
           "namespace (all its processes, not only this one) since sampling began" in table
