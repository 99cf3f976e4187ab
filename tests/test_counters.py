"""Event counters as components (issue 13, part 5): `--components perf:EVENT,...`
through perf_event_open and `papi:EVENT` through PAPI, read at every call's enter
and exit and charged to the call open meanwhile; `strata avail -H` says what this
host counts. Hardware events need a PMU (these machines are VMs: often none), so
the tests count software events (page faults, task-clock), which every Linux has,
and check hardware ones only where they open."""

from __future__ import annotations

import ctypes
import ctypes.util
import subprocess

import pytest

from conftest import PYTHON, REPO, STRATA, TESTS, c_compiler, have_strata, load_profile

pytestmark = pytest.mark.skipif(not have_strata(), reason=f"strata is not built: {STRATA}")

SRC = TESTS / "data" / "native"


def perf_opens(event: str) -> bool:
    """Whether perf event `event` opens here, as `strata avail -H` says."""
    out = subprocess.run([STRATA, "avail", "-H"], capture_output=True, text=True).stdout
    for ln in out.splitlines():
        words = ln.split()
        if words and event in words[0].split("|"):
            return words[1] == "yes"
    return False


def papi_counts(event: str) -> bool:
    """Whether PAPI is installed and counts `event` here, as `strata avail -H` says
    (PAPI in a root without /sys counts none of perf's events)."""
    if not ctypes.util.find_library("papi"):
        return False
    out = subprocess.run([STRATA, "avail", "-H"], capture_output=True, text=True).stdout
    return f"  {event} " in out


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    out = tmp_path_factory.mktemp("hwc") / "faults"
    subprocess.run([c_compiler(), "-O1", "-g", "-finstrument-functions", str(SRC / "faults.c"),
                    "-o", str(out), "-lpthread"], check=True)
    return out


def metric_of(prof: dict, thread_name: str | None, label: str, metric: str) -> int:
    """A label's own count of `metric`, summed over its nodes (in one thread)."""
    total = 0
    for th in prof["threads"]:
        if thread_name and th["name"] != thread_name:
            continue
        for n in th["nodes"]:
            if n["label"] == label:
                total += n["metrics"].get(metric, 0)
    return total


def test_avail_lists_what_counts_here():
    r = subprocess.run([STRATA, "avail", "-H"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for ev in ("cycles|cpu-cycles", "instructions", "task-clock", "page-faults|faults",
               "context-switches|cs"):
        assert any(ln.split()[:1] == [ev] for ln in r.stdout.splitlines()), (ev, r.stdout)
    # software events count on every Linux
    assert perf_opens("task-clock") and perf_opens("page-faults")
    if not perf_opens("cycles"):
        assert "no hardware performance counters" in r.stdout
    assert "PAPI events" in r.stdout


def test_page_faults_per_function(runner, faults):
    r = runner.run([STRATA, "run", "--components", "wall_clock,perf:page-faults,task-clock",
                    "-o", runner.dir / "res", "--", faults])
    assert r.returncode == 0, r.describe()
    res = runner.dir / "res"
    prof = load_profile(res)
    names = {m["name"]: m for m in prof["metrics"]}
    assert names["perf:page-faults"]["kind"] == "count"
    assert names["perf:task-clock"]["unit"] == "ns"
    # one fault a fresh page: 4 calls of 1000 pages; quiet touches none
    assert 4000 <= metric_of(prof, None, "toucher", "perf:page-faults") <= 4040
    assert metric_of(prof, None, "quiet", "perf:page-faults") <= 4
    # the table: self and total per row, main's total holding its callees'
    table = (res / "perf_page-faults.txt").read_text()
    assert "PAGE FAULTS (PERF:PAGE-FAULTS)" in table
    row = [c.strip() for c in next(ln for ln in table.splitlines() if "main" in ln).split("|")]
    self_, total = int(row[-4]), int(row[-3])
    assert total >= self_ + 4000, row
    assert "PAGE FAULTS" in r.stderr  # on the terminal with the other tables
    # task-clock: CPU time, the two functions' within main's
    tc = (res / "perf_task-clock.txt").read_text()
    assert "toucher" in tc and "quiet" in tc
    # CPU time within the call's wall time (one thread: never more)
    for fn in ("toucher", "quiet"):
        cpu = metric_of(prof, None, fn, "perf:task-clock")
        wall = sum(n["metrics"]["wall_clock"]["sum"] for th in prof["threads"]
                   for n in th["nodes"] if n["label"] == fn)
        assert 0 < cpu <= wall * 1.05 + 1e6, (fn, cpu, wall)


def test_counters_per_thread(runner, faults):
    r = runner.run([STRATA, "run", "--components", "perf:page-faults", "-o", runner.dir / "res",
                    "--", faults, "thread"])
    assert r.returncode == 0, r.describe()
    prof = load_profile(runner.dir / "res")
    assert 500 <= metric_of(prof, "toucher", "toucher", "perf:page-faults") <= 520
    main = [th["name"] for th in prof["threads"] if th["name"] != "toucher"][0]
    assert 4000 <= metric_of(prof, main, "toucher", "perf:page-faults") <= 4040
    # counters alone: the calls are counted, no timer table asked for
    assert (runner.dir / "res" / "trip_count.txt").exists()
    assert not (runner.dir / "res" / "wall_clock.txt").exists()


def test_python_functions(runner):
    runner.write("touch.py", """
def touch():
    return len(b"\\x01" * (40 << 20))   # 10240 fresh pages, written

def idle():
    return sum(range(1000))

for _ in range(2):
    touch()
    idle()
""")
    r = runner.strata("--components", "wall_clock,perf:minor-faults", "--", "touch.py")
    assert r.returncode == 0, r.describe()
    prof = load_profile(runner.results())
    assert metric_of(prof, None, "touch", "perf:minor-faults") >= 2 * 9000
    assert metric_of(prof, None, "idle", "perf:minor-faults") < 100


def test_bare_names_follow_their_source(runner, faults):
    r = runner.run([STRATA, "run", "--components", "perf:page-faults,minor-faults,cs",
                    "-o", runner.dir / "res", "--", faults])
    assert r.returncode == 0, r.describe()
    # a table each, even for one that counted nothing (profile.json lists the
    # metrics that hold values)
    for f in ("perf_page-faults.txt", "perf_minor-faults.txt", "perf_context-switches.txt"):
        assert (runner.dir / "res" / f).exists(), f
    names = [m["name"] for m in load_profile(runner.dir / "res")["metrics"]]
    assert {"perf:page-faults", "perf:minor-faults"} <= set(names)


@pytest.mark.parametrize("components, says", [
    ("perf:nosuch", "unknown perf event 'nosuch'"),
    ("perf:", "names no event"),
    ("perf:a,b,c,d,e,f,g,h,i", "unknown perf event 'a'"),
    ("perf:page-faults,minor-faults,major-faults,cs,migrations,task-clock,cpu-clock,"
     "alignment-faults,emulation-faults", "at most 8 counters"),
])
def test_bad_counters(runner, faults, components, says):
    out = runner.dir / "res"
    r = runner.run([STRATA, "run", "--components", components, "-o", out, "--", faults])
    assert r.returncode == 2, r.describe()
    assert r.stderr.startswith("strata: error:") and says in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


def test_hardware_counter_without_pmu_is_an_error(runner, faults):
    if perf_opens("cycles"):
        r = runner.run([STRATA, "run", "--components", "perf:cycles,instructions", "-o",
                        runner.dir / "res", "--", faults])
        assert r.returncode == 0, r.describe()
        prof = load_profile(runner.dir / "res")
        assert metric_of(prof, None, "quiet", "perf:instructions") > 4 * 100000
        return
    r = runner.run([STRATA, "run", "--components", "perf:cycles", "-o", runner.dir / "res",
                    "--", faults])
    assert r.returncode == 2, r.describe()
    assert "perf:cycles: this machine has no hardware PMU" in r.stderr
    assert not (runner.dir / "res").exists()
    # strata python says the same before the script runs
    runner.write("x.py", "print('ran')\n")
    r = runner.strata("--components", "perf:cycles", "--", "x.py")
    assert r.returncode == 2 and "ran" not in r.stdout, r.describe()
    assert "no hardware PMU" in r.stderr


def test_sample_refuses_counters(runner, faults):
    r = runner.run([STRATA, "sample", "--", faults], env={"STRATA_COMPONENTS": "perf:page-faults"})
    assert r.returncode == 2, r.describe()
    assert "use strata run" in r.stderr


def test_papi(runner, faults):
    if not papi_counts("perf::PAGE-FAULTS"):
        pytest.skip("PAPI does not count perf::PAGE-FAULTS here (strata avail -H says why: "
                    "not installed, strata built without libpapi-dev, or no perf events)")
    r = runner.run([STRATA, "run", "--components", "wall_clock,papi:perf::PAGE-FAULTS",
                    "-o", runner.dir / "res", "--", faults, "thread"])
    assert r.returncode == 0, r.describe()
    res = runner.dir / "res"
    prof = load_profile(res)
    assert 4500 <= metric_of(prof, None, "toucher", "papi:perf::PAGE-FAULTS") <= 4560
    assert 500 <= metric_of(prof, "toucher", "toucher", "papi:perf::PAGE-FAULTS") <= 520
    assert (res / "papi_perf__PAGE-FAULTS.txt").exists()
    # an event PAPI does not know: one line, exit 2
    r = runner.run([STRATA, "run", "--components", "papi:NO_SUCH_EVENT", "--", faults])
    assert r.returncode == 2 and "papi:NO_SUCH_EVENT" in r.stderr, r.describe()
