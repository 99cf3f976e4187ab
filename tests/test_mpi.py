"""MPI calls through PMPI under `strata run` (issue 14, part 1): C and Fortran (`use
mpi` and `use mpi_f08`) programs on Open MPI (`mpirun --oversubscribe`) and MPICH
(`mpiexec`, Hydra), and mpi4py on Open MPI, four ranks: each MPI call a node under its caller with its count, time
and bytes (the mpi_bytes table), a rank's files carrying its rank, the imbalance
where it is, and a program that never calls MPI_Finalize."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import STRATA, TESTS, have_strata, load_json

pytestmark = pytest.mark.skipif(not have_strata(), reason=f"strata is not built: {STRATA}")

SRC = TESTS / "data" / "native"
ENV = {"STRATA_PRINT_TABLES": "OFF", "OMPI_ALLOW_RUN_AS_ROOT": "1",
       "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"}


# Debian's names of each implementation's tools (the unsuffixed ones are Open MPI's)
FLAVOURS = {
    "openmpi": {"cc": "mpicc.openmpi", "fc": "mpifort.openmpi", "run": "mpirun.openmpi",
                "debs": "openmpi-bin libopenmpi-dev"},
    "mpich": {"cc": "mpicc.mpich", "fc": "mpifort.mpich", "run": "mpiexec.mpich",
              "debs": "mpich libmpich-dev"},
}


def need(flavour: str, tool: str) -> str:
    name = FLAVOURS[flavour][tool]
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} is not installed (Debian's {FLAVOURS[flavour]['debs']})")
    return path


def wrappers_built(flavour: str) -> None:
    """libstrata-mpi.so is built, with `flavour`'s wrappers (its mpi.h was found)."""
    headers = {"openmpi": "/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h",
               "mpich": "/usr/include/x86_64-linux-gnu/mpich/mpi.h"}
    lib = Path(STRATA).resolve().parent.parent / "lib"
    found = list(lib.glob("python3*/site-packages/strata/libstrata-mpi.so")) + \
        list(Path(STRATA).resolve().parent.glob("libstrata-mpi.so"))
    if not found or not Path(headers[flavour]).exists():
        pytest.skip(f"strata was built without {flavour}'s headers "
                    f"({FLAVOURS[flavour]['debs'].split()[-1]})")


def need_mpi4py(runner, python) -> None:
    if runner.run([python, "-c", "import mpi4py"]).returncode != 0:
        pytest.skip(f"mpi4py is not installed in {python}")


def mpirun(runner, flavour, n, *args, timeout=120, out="res"):
    launcher = need(flavour, "run")
    extra = ["--oversubscribe"] if flavour == "openmpi" else []
    return runner.run([launcher, "-n", str(n), *extra, STRATA, "run", "-o", runner.dir / out,
                       "--", *args], env=ENV, timeout=timeout)


def rank_profiles(res: Path, n: int) -> list:
    return [load_json(res / f"profile-{r}.json") for r in range(n)]


def calls(prof: dict) -> dict:
    """{label: (calls, mpi bytes)} over every thread."""
    out = {}
    for th in prof["threads"]:
        for node in th["nodes"]:
            c, b = out.get(node["label"], (0, 0))
            out[node["label"]] = (c + node["count"],
                                  b + node["metrics"].get("mpi_bytes", 0))
    return out


def wall(prof: dict, label: str) -> int:
    return sum(n["metrics"]["wall_clock"]["sum"] for th in prof["threads"] for n in th["nodes"]
               if n["label"] == label)


@pytest.fixture(scope="module", params=list(FLAVOURS))
def ring(request, tmp_path_factory):
    flavour = request.param
    mpicc = need(flavour, "cc")
    wrappers_built(flavour)
    out = tmp_path_factory.mktemp(f"mpi-{flavour}") / "ring"
    subprocess.run([mpicc, "-O1", "-g", "-finstrument-functions", str(SRC / "mpi_ring.c"), "-o",
                    str(out)], check=True)
    return flavour, out


def test_c_calls_bytes_and_imbalance(runner, ring):
    flavour, ring = ring
    r = mpirun(runner, flavour, 4, ring)
    assert r.returncode == 0, r.describe()
    assert "ranks 4 sum" in r.stdout, r.describe()
    profs = rank_profiles(runner.dir / "res", 4)
    for rank, prof in enumerate(profs):
        assert prof["metadata"]["rank"] == rank
        c = calls(prof)
        assert c["MPI_Init"][0] == 1 and c["MPI_Finalize"][0] == 1, c
        assert c["MPI_Sendrecv"] == (10, 10 * 1000 * 8), c
        assert c["MPI_Allreduce"] == (10, 10 * 8), c
        assert c["MPI_Barrier"][0] == 1, c
        if rank == 0:
            assert c["MPI_Send"] == (3, 3 * 100 * 4) and "MPI_Recv" not in c, c
        else:
            assert c["MPI_Recv"] == (1, 100 * 4) and "MPI_Send" not in c, c
        assert c["work"][0] == 10
        # the implementation's own lock waits are MPI's time, not nodes of their own
        paths = {}
        for th in prof["threads"]:
            by_id = {}
            for n in th["nodes"]:
                by_id[n["id"]] = (by_id[n["parent"]] if n["parent"] >= 0 else ()) + (n["label"],)
                paths[by_id[n["id"]]] = n
        assert ("main", "MPI_Allreduce") in paths and ("main", "work") in paths
        assert not [p for p in paths if len(p) > 2 and p[1].startswith("MPI_")], sorted(paths)
    # rank 0 works four times as long as the others, which wait for it in MPI
    for rank in (1, 2, 3):
        assert wall(profs[0], "work") > wall(profs[rank], "work")
    # the bytes table of each rank, and the merge of the four
    table = (runner.dir / "res" / "mpi_bytes-2.txt").read_text()
    assert "BYTES PASSED TO MPI CALLS" in table and "MPI_Sendrecv" in table
    m = runner.run([STRATA, "merge", "-o", runner.dir / "merged", runner.dir / "res"])
    assert m.returncode == 0, m.describe()
    check_summary((runner.dir / "merged" / "mpi_summary.txt").read_text())


def rows_of(text: str, title: str) -> list:
    """The cells of each row of the table titled `title`."""
    lines = text[text.index(title):].splitlines()[4:]
    rows = []
    for ln in lines:
        if ln.startswith("|--") or not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip("|").split("|")])
    return rows


def check_summary(text: str):
    """mpiP's view of the ring: every rank's MPI share, rank 0 (four times the
    work) the lowest; the call sites by time and by bytes."""
    ranks = {r[0]: r for r in rows_of(text, "MPI TIME PER RANK")}
    assert set(ranks) == {"0", "1", "2", "3", "*"}, ranks
    share = {k: float(v[3]) for k, v in ranks.items()}
    assert all(share["0"] < share[k] for k in ("1", "2", "3")), share
    sites = {(r[0], r[1]): r for r in rows_of(text, "MPI CALL SITES BY TIME")}
    assert sites[("MPI_Sendrecv", "main")][2] == "40", sites
    assert sites[("MPI_Sendrecv", "main")][8] == str(4 * 10 * 8000), sites
    assert sites[("MPI_Allreduce", "main")][2] == "40", sites
    by_bytes = rows_of(text, "MPI CALL SITES BY BYTES")
    assert by_bytes[0][:4] == ["MPI_Sendrecv", "main", "40", "320000"], by_bytes
    assert by_bytes[0][5:] == ["80000", "80000"], by_bytes


def test_one_trace_for_all_ranks(runner, ring):
    """`strata merge` of traced ranks writes one trace.pftrace: a process a rank,
    each with its MPI calls as slices, the ranks' sequences apart."""
    from test_trace import decode, need_schema
    need_schema()
    flavour, ring = ring
    extra = ["--oversubscribe"] if flavour == "openmpi" else []
    r = runner.run([need(flavour, "run"), "-n", "2", *extra, STRATA, "run", "--trace", "-o",
                    runner.dir / "res", "--", ring], env=ENV, timeout=120)
    assert r.returncode == 0, r.describe()
    m = runner.run([STRATA, "merge", "-o", runner.dir / "merged", runner.dir / "res"])
    assert m.returncode == 0 and "merged 2 traces" in m.stderr, m.describe()
    tr = decode(runner.dir / "merged" / "trace.pftrace")
    pids = {pid for pid, _ in tr.processes.values()}
    assert len(pids) == 2, tr.processes
    per_process = {}
    tids = {uuid: tid for uuid, (tid, _) in tr.threads.items()}
    for tid, slices in tr.slices.items():
        per_process.setdefault(tid, 0)
        per_process[tid] += sum(1 for s in slices if s[0] == "MPI_Allreduce")
    assert sorted(v for v in per_process.values() if v) == [10, 10], per_process
    assert len(tids) >= 2
    # the merged trace holds both ranks' files whole
    sizes = sum(p.stat().st_size for p in (runner.dir / "res").glob("trace-*.pftrace"))
    assert abs((runner.dir / "merged" / "trace.pftrace").stat().st_size - sizes) < sizes // 10


def launch_per_rank(runner, command: list) -> Path:
    """A script that runs `command` with a results folder of the rank's own
    (res-<rank>), as ranks on nodes of their own disks would have."""
    script = runner.dir / "per_rank.sh"
    script.write_text("#!/bin/sh\nr=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}\n"
                      f'exec {" ".join(map(str, command))} -o "{runner.dir}/res-$r" "$@"\n')
    script.chmod(0o755)
    return script


def test_gather_at_finalize(runner, ring):
    """STRATA_MPI_GATHER=ON: ranks with folders of their own; at MPI_Finalize rank 0
    receives every rank's profile and trace into its folder and merges them (the
    MPI summary as `strata merge` writes it, one trace of four processes); the
    other ranks keep their own files; nothing half-written is left."""
    from test_trace import decode, need_schema
    flavour, ring = ring
    extra = ["--oversubscribe"] if flavour == "openmpi" else []
    script = launch_per_rank(runner, [STRATA, "run", "--trace"])
    r = runner.run([need(flavour, "run"), "-n", "4", *extra, script, "--", ring],
                   env={**ENV, "STRATA_MPI_GATHER": "ON"}, timeout=120)
    assert r.returncode == 0 and "ranks 4 sum" in r.stdout, r.describe()
    assert "merged 4 profiles of 4 MPI ranks" in r.stderr, r.describe()
    zero = runner.dir / "res-0"
    for rank in range(4):
        mine = runner.dir / f"res-{rank}" / f"profile-{rank}.json"
        assert (zero / mine.name).read_bytes() == mine.read_bytes()
        assert (zero / f"trace-{rank}.pftrace").stat().st_size > 0
    assert not list(runner.dir.glob("res-*/.*.part"))
    assert not (runner.dir / "res-1" / "merged").exists()
    merged = zero / "merged"
    assert load_json(merged / "profile.json")["metadata"]["ranks"] == 4
    check_summary((merged / "mpi_summary.txt").read_text())
    try:
        need_schema()
    except pytest.skip.Exception:
        return
    tr = decode(merged / "trace.pftrace")
    assert len({pid for pid, _ in tr.processes.values()}) == 4, tr.processes


def test_gather_shared_folder_and_off(runner, ring):
    """Ranks sharing a folder: the gather sends headers only (each file is there
    already, unchanged) and merges; without the setting nothing is merged."""
    flavour, ring = ring
    r = mpirun(runner, flavour, 2, ring)
    assert r.returncode == 0 and not (runner.dir / "res" / "merged").exists(), r.describe()
    before = {p.name: p.stat().st_mtime_ns for p in (runner.dir / "res").glob("profile-*")}
    launcher = need(flavour, "run")
    extra = ["--oversubscribe"] if flavour == "openmpi" else []
    r = runner.run([launcher, "-n", "2", *extra, STRATA, "run", "-o", runner.dir / "shared",
                    "--", ring], env={**ENV, "STRATA_MPI_GATHER": "ON"}, timeout=120)
    assert r.returncode == 0 and "merged 2 profiles of 2 MPI ranks" in r.stderr, r.describe()
    assert sorted(p.name for p in (runner.dir / "shared").glob("profile-*")) == sorted(before)
    assert load_json(runner.dir / "shared" / "merged" / "profile.json")["metadata"]["ranks"] == 2


def test_without_finalize(runner, ring):
    """A program that never calls MPI_Finalize: each rank still writes its profile
    at exit, and mpirun's verdict is the same as without strata.

    MPICH's verdict on such a program varies from run to run without strata (its
    launcher sometimes hangs up on a rank that has not exited yet and fails the job;
    2 runs in 20 here), so there the pair runs again, up to 4 times, until both end 0,
    and the profiles read are those of that last strata run."""
    flavour, ring = ring
    extra = ["--oversubscribe"] if flavour == "openmpi" else []
    tries = 4 if flavour == "mpich" else 1
    for i in range(tries):
        plain = runner.run([need(flavour, "run"), "-n", "2", *extra, ring, "never-finalize"],
                           env=ENV, timeout=120)
        r = mpirun(runner, flavour, 2, ring, "never-finalize", out=f"res{i}")
        if r.returncode == plain.returncode == 0:
            break
    # both reports in full when the statuses differ (pytest cuts a tuple's parts short)
    assert r.returncode == plain.returncode, \
        "plain:\n" + plain.describe() + "\nstrata:\n" + r.describe()
    for prof in rank_profiles(runner.dir / f"res{i}", 2):
        c = calls(prof)
        assert c["MPI_Barrier"][0] == 1 and "MPI_Finalize" not in c, c


def test_a_rank_that_crashes(runner, ring):
    """Rank 1 dies of SIGSEGV: the job fails as it does without strata, rank 1's
    folder says its results were not written, and no rank leaves a half-written
    file (each has its whole profile or its note)."""
    flavour, ring = ring
    extra = ["--oversubscribe"] if flavour == "openmpi" else []
    plain = runner.run([need(flavour, "run"), "-n", "2", *extra, ring, "crash"], env=ENV,
                       timeout=120)
    r = mpirun(runner, flavour, 2, ring, "crash")
    assert (r.returncode != 0) == (plain.returncode != 0), (plain.describe(), r.describe())
    res = runner.dir / "res"
    assert (res / "incomplete-1.txt").exists() and not (res / "profile-1.json").exists()
    for rank in (0, 1):
        prof, note = res / f"profile-{rank}.json", res / f"incomplete-{rank}.txt"
        assert prof.exists() != note.exists(), sorted(p.name for p in res.iterdir())
        if prof.exists():
            assert load_json(prof)["metadata"]["rank"] == rank
    assert not [p for p in res.iterdir() if p.name.startswith(".")], list(res.iterdir())


@pytest.mark.parametrize("flavour", list(FLAVOURS))
@pytest.mark.parametrize("module", ["mpi", "mpi_f08"])
def test_fortran(runner, tmp_path, module, flavour):
    """Open MPI's Fortran layers call PMPI_* themselves: the Fortran names are
    wrapped (mpi_bcast_, and mpi_f08's mpi_bcast_f08_), with bytes from the Fortran
    datatype handles."""
    mpifort = need(flavour, "fc")
    wrappers_built(flavour)
    src = tmp_path / "calls.f90"
    src.write_text((SRC / "mpi_calls.f90").read_text().replace("use mpi\n", f"use {module}\n"))
    exe = tmp_path / "calls"
    b = subprocess.run([mpifort, "-O1", "-g", str(src), "-o", str(exe)], capture_output=True,
                       text=True)
    if b.returncode != 0 and module == "mpi_f08":
        pytest.skip(f"this {flavour} has no mpi_f08 module: {b.stderr[-200:]}")
    assert b.returncode == 0, b.stderr
    r = mpirun(runner, flavour, 2, exe)
    assert r.returncode == 0 and "ranks 2 sum 11.0" in r.stdout, r.describe()
    for rank, prof in enumerate(rank_profiles(runner.dir / "res", 2)):
        assert prof["metadata"]["rank"] == rank
        c = calls(prof)
        assert c["MPI_Init"][0] == 1 and c["MPI_Finalize"][0] == 1, c
        assert c["MPI_Bcast"] == (1, 40) and c["MPI_Allreduce"] == (5, 40), c
        assert c["MPI_Barrier"][0] == 1, c


def test_mpi4py_under_strata_run(runner, venv_python):
    """mpi4py's calls reach the wrappers (its libmpi sits in a local scope), under
    the Python program's strata.region."""
    need("openmpi", "run")
    wrappers_built("openmpi")
    need_mpi4py(runner, venv_python)
    runner.write("app.py", """
        from array import array
        from mpi4py import MPI
        import strata

        comm = MPI.COMM_WORLD
        x, y = array("d", [comm.rank + 1.0]), array("d", [0.0])
        with strata.region("solve"):
            for _ in range(5):
                comm.Allreduce(x, y, op=MPI.SUM)
        comm.Barrier()
        if comm.rank == 0:
            print("ranks", comm.size, "sum", y[0])
    """)
    r = mpirun(runner, "openmpi", 2, venv_python, "app.py")
    assert r.returncode == 0 and "ranks 2 sum 3.0" in r.stdout, r.describe()
    for prof in rank_profiles(runner.dir / "res", 2):
        c = calls(prof)
        assert c["MPI_Init_thread"][0] == 1 and c["MPI_Barrier"][0] == 1, c
        assert c["MPI_Allreduce"] == (5, 40), c
        kids = [n for th in prof["threads"] for n in th["nodes"] if n["label"] == "MPI_Allreduce"]
        parents = {n["id"]: n["label"] for th in prof["threads"] for n in th["nodes"]}
        assert all(parents[k["parent"]] == "solve" for k in kids), kids


def test_mpi4py_under_strata_python(runner, venv_python):
    """strata python under mpirun preloads the MPI wrappers too: mpi4py's calls are
    nodes under the Python function that made them, with their bytes, and the rank
    from MPI_COMM_WORLD names the files."""
    wrappers_built("openmpi")
    need_mpi4py(runner, venv_python)
    runner.write("app.py", """
        from array import array
        from mpi4py import MPI

        def reduce_all(comm):
            x, y = array("d", [comm.rank + 1.0]), array("d", [0.0])
            for _ in range(5):
                comm.Allreduce(x, y, op=MPI.SUM)
            return y[0]

        comm = MPI.COMM_WORLD
        total = reduce_all(comm)
        comm.Barrier()
        if comm.rank == 0:
            print("ranks", comm.size, "sum", total)
    """)
    r = runner.run([need("openmpi", "run"), "-n", "2", "--oversubscribe", STRATA, "python",
                    "-o", runner.dir / "res", "--", "app.py"], env=ENV, timeout=120)
    assert r.returncode == 0 and "ranks 2 sum 3.0" in r.stdout, r.describe()
    for rank, prof in enumerate(rank_profiles(runner.dir / "res", 2)):
        assert prof["metadata"]["rank"] == rank
        by_id, found = {}, {}
        for th in prof["threads"]:
            for n in th["nodes"]:
                by_id[n["id"]] = n
                if n["label"] == "MPI_Allreduce":
                    found["allreduce"] = n
                if n["label"] == "MPI_Barrier":
                    found["barrier"] = n
        allreduce = found["allreduce"]
        assert allreduce["count"] == 5 and allreduce["metrics"]["mpi_bytes"] == 40, allreduce
        assert by_id[allreduce["parent"]]["label"] == "reduce_all", by_id[allreduce["parent"]]
        assert found["barrier"]["count"] == 1
        assert (runner.dir / "res" / f"mpi_bytes-{rank}.txt").exists()


def test_gather_mpi4py_explicit_finalize(runner, venv_python):
    """strata python: a program that calls MPI.Finalize() itself has its results
    written there (with the GIL taken by the hook), gathered and merged, and goes
    on running after it as it would."""
    wrappers_built("openmpi")
    need_mpi4py(runner, venv_python)
    runner.write("app.py", """
        from array import array
        from mpi4py import MPI

        def reduce_all(comm):
            x, y = array("d", [comm.rank + 1.0]), array("d", [0.0])
            for _ in range(3):
                comm.Allreduce(x, y, op=MPI.SUM)
            return y[0]

        total = reduce_all(MPI.COMM_WORLD)
        MPI.Finalize()
        print("after finalize", total)
    """)
    script = launch_per_rank(runner, [STRATA, "python"])
    r = runner.run([need("openmpi", "run"), "-n", "2", "--oversubscribe", script, "--", "app.py"],
                   env={**ENV, "STRATA_MPI_GATHER": "ON"}, timeout=120)
    # (mpirun interleaves the two ranks' output: the words are counted, not lines)
    assert r.returncode == 0 and r.stdout.count("after finalize") == 2 and \
        r.stdout.count("3.0") == 2, r.describe()
    assert "merged 2 profiles of 2 MPI ranks" in r.stderr, r.describe()
    merged = load_json(runner.dir / "res-0" / "merged" / "profile.json")
    assert merged["metadata"]["ranks"] == 2
    assert (runner.dir / "res-0" / "profile-1.json").exists()


def test_launcher_of_another_mpi(runner, venv_python):
    """The wrappers follow the MPI the process loads, not the launcher: PyPI's
    mpi4py under MPICH's mpiexec loads Open MPI here (Debian names MPICH's library
    libmpich.so.12, which its wheel does not look for) and runs each rank as a
    singleton; under strata python it does just the same (the MPICH wrappers,
    which the launcher's variables suggest, failed its MPI_Init_thread), and each
    rank's calls are recorded by the Open MPI wrappers."""
    need("mpich", "run")
    wrappers_built("openmpi")
    need_mpi4py(runner, venv_python)
    # each rank says what it saw in a file of its own (the launcher interleaves the
    # two processes' output)
    runner.write("app.py", """
        import os, sys
        from mpi4py import MPI
        MPI.COMM_WORLD.Barrier()
        with open(f"{sys.argv[1]}-{os.environ['PMI_RANK']}.txt", "w") as f:
            f.write(f"size {MPI.COMM_WORLD.Get_size()} {MPI.Get_library_version().split()[0]}")
    """)
    plain = runner.run([need("mpich", "run"), "-n", "2", venv_python, "app.py", "plain"],
                       env=ENV, timeout=120)
    r = runner.run([need("mpich", "run"), "-n", "2", STRATA, "python", "-o", runner.dir / "res",
                    "--", "app.py", "strata"], env=ENV, timeout=120)
    # one string each (a tuple's parts are cut short in pytest's report)
    assert plain.returncode == 0, plain.describe()
    assert r.returncode == 0, r.describe()
    for rank in range(2):
        said = (runner.dir / f"strata-{rank}.txt").read_text()
        assert said == (runner.dir / f"plain-{rank}.txt").read_text() == "size 1 Open", said
    for rank in range(2):
        c = calls(load_json(runner.dir / "res" / f"profile-{rank}.json"))
        assert c["MPI_Barrier"][0] == 1, c


def test_not_mpi_no_wrappers(runner, ring):
    """A program that is not MPI gets no MPI wrappers nor an mpi_bytes table; an
    MPI program run alone (a singleton) is one process with no rank, its MPI chosen
    from the libraries it needs."""
    flavour, ring = ring
    r = runner.run([STRATA, "run", "-o", runner.dir / "plain", "--", "true"], env=ENV)
    assert r.returncode == 0, r.describe()
    assert not list((runner.dir / "plain").glob("mpi_bytes*"))
    r = runner.run([STRATA, "run", "-o", runner.dir / "single", "--", ring], env=ENV)
    assert r.returncode == 0 and "ranks 1 sum" in r.stdout, r.describe()
    prof = load_json(runner.dir / "single" / "profile.json")
    assert calls(prof)["MPI_Allreduce"] == (10, 80)
