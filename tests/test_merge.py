"""`strata merge`: runs summed (the seed's concat.py), MPI ranks kept apart with a
load-balance table, and rank files written at run time from the launcher's rank
variables."""

from __future__ import annotations

import json
import os
import pstats
import re
import textwrap

import pytest

from conftest import STRATA, have_strata
from test_report import Env, bad
from test_trace import every, fields, first

pytestmark = pytest.mark.skipif(not have_strata(), reason=f"strata is not built: {STRATA}")

PROG = textwrap.dedent(
    """
    import os

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def solve(rank):
        # the last rank gets no work, as in the seed's Tau example
        return fib(10 + rank % 3) if rank != 3 else 0

    def main():
        rank = int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMI_RANK")
                   or os.environ.get("SLURM_PROCID") or 0)
        solve(rank)

    main()
    """
).lstrip()
FIB = {10: 177, 11: 287, 12: 465}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    e = Env(tmp_path_factory.mktemp("merge"))
    (e.root / "prog.py").write_text(PROG)
    return e


@pytest.fixture(scope="module")
def ranks(env):
    """One MPI-like job of 4 ranks, each from another launcher's variable."""
    variables = ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"]
    for rank, var in enumerate(variables):
        r = env.strata("python", "--components", "trip_count,wall_clock", "-o", "job", "--",
                       "prog.py", env={var: rank})
        assert r.returncode == 0, r.describe()
    return env.root / "job"


def test_rank_files_at_run_time(ranks):
    names = sorted(os.listdir(ranks))
    assert names == sorted([f"profile-{r}.json" for r in range(4)] +
                           [f"{c}-{r}.txt" for r in range(4) for c in ("trip_count", "wall_clock")])
    for r in range(4):
        data = json.loads((ranks / f"profile-{r}.json").read_text())
        assert data["metadata"]["rank"] == r and data["threads"][0]["rank"] == r


def test_merge_ranks_keeps_them_and_balances(env, ranks):
    r = env.strata("merge", "-o", "merged", ranks)
    assert r.returncode == 0, r.describe()
    assert "4 MPI ranks" in r.stderr
    out = env.root / "merged"
    data = json.loads((out / "profile.json").read_text())
    assert data["metadata"]["ranks"] == 4
    assert [t["rank"] for t in data["threads"]] == [0, 1, 2, 3]
    lb = (out / "load_balance.txt").read_text()
    assert lb.startswith("4 of 4 ranks did any work\n")
    rows = {m.group(1): [c.strip() for c in m.group(2).split("|")]
            for m in re.finditer(r"^\| (\S+) \[prog\.py:\d+\]\s*\|(.*)\|$", lb, re.M)}
    assert rows["fib"][0] == "3" and rows["fib"][-1] == "3"  # 3 ranks worked, rank 3 idle
    assert rows["main"][-1] == "-" and float(rows["fib"][5]) > 25  # imbalance %
    # the text tables sum the ranks: fib's calls over ranks 0-2
    calls = sum(FIB[10 + r % 3] for r in range(3))
    table = (out / "trip_count.txt").read_text()
    assert f"|0>>>   |_fib" in table
    assert int(re.search(r"\|0>>>   \|_fib\s*\|\s*(\d+)", table).group(1)) == 3
    # every format renders the merged result; the html has a rank selector's data
    for fmt in ("pstats", "dot", "folded", "speedscope", "callgrind", "html", "text"):
        r = env.strata("report", "--format", fmt, "-o", env.root / f"m.{fmt}", out)
        assert r.returncode == 0, r.describe()
    st = pstats.Stats(str(env.root / "m.pstats")).stats
    fib = [k for k in st if k[2] == "fib"][0]
    assert st[fib][1] == calls and st[fib][0] == 3
    html = (env.root / "m.html").read_text()
    assert '"rank":3' in html and "LOAD BALANCE" in (env.root / "m.text").read_text()
    speedscope = json.loads((env.root / "m.speedscope").read_text())
    assert [p["name"].split()[1] for p in speedscope["profiles"]] == ["0", "1", "2", "3"]


def test_html_load_balance_chart(env, ranks):
    """The merged result's HTML report draws a function's time in each of the 4
    ranks: by default the one whose slowest rank is furthest above the mean."""
    from test_report import chromium, run_chromium
    if not chromium():
        pytest.skip("headless Chromium is not installed (Debian's chromium)")
    r = env.strata("merge", "--force", "-o", "merged-html", ranks)
    assert r.returncode == 0, r.describe()
    page = env.root / "lb.html"
    r = env.strata("report", "--format", "html", "-o", page, env.root / "merged-html")
    assert r.returncode == 0, r.describe()
    r = run_chromium(env, "--virtual-time-budget=5000", "--dump-dom", page.as_uri() + "#selftest")
    assert r.returncode == 0, r.stderr[-2000:]
    body = re.search(r"<body[^>]*>", r.stdout).group(0)
    attrs = dict(re.findall(r'(data-[a-z]+)="([^"]*)"', body))
    assert attrs.get("data-errors") == "", attrs
    name, bars = attrs["data-balance"].rsplit(":", 1)
    assert bars == "4" and name.split(" [")[0] in ("fib", "solve", "main"), attrs


def _enc_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _encode(fs):
    """Writes a message back from fields() (numbers, wire types, values)."""
    out = bytearray()
    for num, wt, v in fs:
        out += _enc_varint(num << 3 | wt)
        out += _enc_varint(v) if wt == 0 else (_enc_varint(len(v)) + v if wt == 2 else v)
    return bytes(out)


def _snapshot(packet_fields):
    """{clock id: timestamp} of a packet's ClockSnapshot, or None."""
    snap = first(packet_fields, 6)
    if snap is None:
        return None
    return {first(fields(c), 1): first(fields(c), 2) for c in every(fields(snap), 1)}


def test_merged_trace_aligns_hosts(env):
    """Ranks traced on two hosts: the second's CLOCK_MONOTONIC becomes a clock of its
    own and its CLOCK_BOOTTIME readings move by the hosts' difference of REALTIME
    less BOOTTIME, so both land on the first host's BOOTTIME by the wall clock;
    ranks of one host are copied as they are. (The second host is made by moving
    the BOOTTIME of rank 1's snapshot by 1000 s, as another boot time would.)"""
    for rank in (0, 1):
        r = env.strata("python", "--trace", "-o", "hosts", "--", "prog.py",
                       env={"OMPI_COMM_WORLD_RANK": rank})
        assert r.returncode == 0, r.describe()
    hosts = env.root / "hosts"
    shift = 1000 * 10**9
    data = (hosts / "trace-1.pftrace").read_bytes()
    packets = every(fields(data), 1)
    original = _snapshot(fields(packets[0]))
    assert set(original) == {1, 3, 6}, original  # REALTIME, MONOTONIC, BOOTTIME
    pf = fields(packets[0])
    snap = [(n, wt, v) for n, wt, v in fields(first(pf, 6))]
    moved = []
    for n, wt, v in snap:
        if n == 1:
            c = fields(v)
            if first(c, 1) == 6:
                c = [(cn, cw, cv + shift if cn == 2 else cv) for cn, cw, cv in c]
            v = _encode(c)
        moved.append((n, wt, v))
    pf = [(n, wt, _encode(moved) if n == 6 else v) for n, wt, v in pf]
    out = _encode([(1, 2, _encode(pf))] + [(1, 2, p) for p in packets[1:]])
    (hosts / "trace-1.pftrace").write_bytes(out)
    r = env.strata("merge", "-o", "hosts-merged", hosts)
    assert r.returncode == 0 and "merged 2 traces" in r.stderr, r.describe()
    merged = every(fields((env.root / "hosts-merged" / "trace.pftrace").read_bytes()), 1)
    by_seq = {}
    for p in merged:
        pf = fields(p)
        by_seq.setdefault(first(pf, 10), []).append(pf)
    rank0, rank1 = by_seq[1], by_seq[65537]
    assert _snapshot(rank0[0]) == _snapshot(fields(every(fields(
        (hosts / "trace-0.pftrace").read_bytes()), 1)[0])), "rank 0 copied as it is"
    snap1 = _snapshot(rank1[0])
    assert set(snap1) == {1, 129, 6}, snap1  # its MONOTONIC is a clock of its own
    assert snap1[1] == original[1] and snap1[129] == original[3]
    # back on the first host's BOOTTIME: the fake boot shift undone, within the
    # microseconds between the two runs' readings of REALTIME less BOOTTIME
    assert abs(snap1[6] - original[6]) < 10**6, (snap1[6], original[6])
    # its descriptors stamped with its own MONOTONIC
    clocks = {first(pf, 58) for pf in rank1 if first(pf, 58) is not None}
    assert clocks == {129}, clocks
    # the decoder reads the merged trace whole
    from test_trace import decode
    tr = decode(env.root / "hosts-merged" / "trace.pftrace")
    assert len(tr.processes) == 2


def test_report_reads_a_folder_of_ranks(env, ranks):
    r = env.strata("report", ranks)
    assert r.returncode == 0, r.describe()
    assert "LOAD BALANCE ACROSS MPI RANKS" in r.stdout


def test_merge_runs_sums(env):
    for i in range(3):
        r = env.strata("python", "-o", f"run{i}", "--", "prog.py", env={"SLURM_PROCID": None})
        assert r.returncode == 0, r.describe()
    r = env.strata("merge", "--format", "text,json,pstats", "-o", "runs",
                   *(env.root / f"run{i}" for i in range(3)))
    assert r.returncode == 0, r.describe()
    data = json.loads((env.root / "runs" / "profile.json").read_text())
    assert data["metadata"]["merged_runs"] == 3 and "ranks" not in data["metadata"]
    nodes = {n["label"]: n for n in data["threads"][0]["nodes"] if n["depth"] <= 2}
    assert nodes["main"]["count"] == 3 and nodes["fib"]["count"] == 3
    one = json.loads((env.root / "run0" / "profile.json").read_text())
    main1 = one["threads"][0]["nodes"][0]["metrics"]["wall_clock"]
    main3 = data["threads"][0]["nodes"][0]["metrics"]["wall_clock"]
    assert main3["min"] <= main1["min"] and main3["max"] >= main1["max"]
    assert main3["sum"] >= 3 * main3["min"]
    st = pstats.Stats(str(env.root / "runs" / "profile.prof")).stats
    fib = [k for k in st if k[2] == "fib"][0]
    assert st[fib][1] == 3 * FIB[10]  # 3 runs of rank 0's fib(10)
    # a merged result merges again (runs add up)
    r = env.strata("merge", "-o", "runs2", env.root / "runs", env.root / "run0")
    assert r.returncode == 0, r.describe()
    data = json.loads((env.root / "runs2" / "profile.json").read_text())
    assert data["metadata"]["merged_runs"] == 4


def test_merge_errors(env):
    assert "needs -o" in bad(env, "merge", env.root)
    assert "needs one RESULT" in bad(env, "merge", "-o", "x")
    assert "cannot read" in bad(env, "merge", "-o", "x", env.root / "missing")
    (env.root / "junk.json").write_text("{\"format_version\": 1, \"threads\": [")
    assert "truncated" in bad(env, "merge", "-o", "x", env.root / "junk.json")
    assert not (env.root / "x").exists()


def test_merging_one_run_twice_warns(env):
    r = env.strata("python", "-o", "twice", "--", "prog.py", env={"SLURM_PROCID": None})
    assert r.returncode == 0, r.describe()
    (env.root / "copy.json").write_bytes((env.root / "twice" / "profile.json").read_bytes())
    r = env.strata("merge", "-o", "twice_merged", env.root / "twice", env.root / "copy.json")
    assert r.returncode == 0, r.describe()
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("strata: warning:")]
    assert len(warn) == 1 and "same run" in warn[0] and "counted twice" in warn[0], r.stderr
    assert "copy.json" in warn[0] and "twice/profile.json" in warn[0]
    # different runs merge without a word
    r = env.strata("python", "-o", "other", "--", "prog.py", env={"SLURM_PROCID": None})
    r = env.strata("merge", "-o", "fine_merged", env.root / "twice", env.root / "other")
    assert r.returncode == 0 and "warning" not in r.stderr, r.describe()


def test_huge_sums_round_trip_and_saturate(env):
    """Counts and sums near 2^63 are written exactly (and read back); merging them
    saturates at 2^63 - 1 and says so, never wraps."""
    r = env.strata("python", "-o", "big", "--", "prog.py", env={"SLURM_PROCID": None})
    assert r.returncode == 0, r.describe()
    data = json.loads((env.root / "big" / "profile.json").read_text())
    node = data["threads"][0]["nodes"][0]
    big = 2**63 - 5
    node["count"] = big
    node["metrics"]["wall_clock"]["sum"] = big
    node["metrics"]["wall_clock"]["self"] = 0
    (env.root / "big.json").write_text(json.dumps(data))
    r = env.strata("merge", "-o", "big_one", env.root / "big.json")
    assert r.returncode == 0, r.describe()
    one = json.loads((env.root / "big_one" / "profile.json").read_text())
    assert one["threads"][0]["nodes"][0]["count"] == big  # exactly, no float rounding
    assert one["threads"][0]["nodes"][0]["metrics"]["wall_clock"]["sum"] == big
    (env.root / "big2.json").write_text(json.dumps(data))
    data["metadata"]["pid"] += 1  # another run, so no "same run" warning
    (env.root / "big3.json").write_text(json.dumps(data))
    r = env.strata("merge", "-o", "big_three", env.root / "big.json", env.root / "big3.json",
                   env.root / "big_one")
    assert r.returncode == 0, r.describe()
    assert "saturated" in r.stderr, r.stderr
    three = json.loads((env.root / "big_three" / "profile.json").read_text())
    top = three["threads"][0]["nodes"][0]
    assert top["count"] == 2**63 - 1 and top["metrics"]["wall_clock"]["sum"] == 2**63 - 1
    r = env.strata("report", env.root / "big_three")  # and it reads back
    assert r.returncode == 0, r.describe()
