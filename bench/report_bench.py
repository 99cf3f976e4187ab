#!/usr/bin/env python3
"""Report and merge throughput: the two targets of `strata report` and `strata merge`.

    python bench/report_bench.py [--ranks N] [--nodes N] [--venv DIR] [--keep DIR]
                                 [--merge-only]

1. Merging N rank profiles (default 1,024) of a real program: bench/workloads/mixed.py
   is profiled once by `strata python` with OMPI_COMM_WORLD_RANK=0 (with --trace-c,
   so C calls are in the tree); its profile-0.json is copied to profile-1.json ...
   profile-<N-1>.json with each rank's times scaled by a seeded factor (0.5 to 1.5)
   and a quarter of the ranks idle in one hot function, as an unbalanced MPI job
   would be; every rank's profile also carries MPI calls (an MPI_Allreduce and an
   MPI_Sendrecv, with their bytes, under each of the 8 busiest functions, as
   `strata run`'s wrappers record them). Then `strata merge -o OUT DIR` is timed:
   it reads every file, keeps each rank's values, and writes profile.json, the
   summed tables, the load-balance table and the MPI summary. Target: 10 s.
2. `strata report` of a profile of N nodes (default 1,000,000): a synthetic
   profile.json (one thread, a tree 12 levels deep over 5,000 functions with
   locations) rendered to every format. Target: 10 s each.

Timings are wall-clock seconds, best of 3 (merge) or of 2 (report), on this
machine. This is a benchmark, not a test: nothing fails because of a timing.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FORMATS = ["text", "json", "pstats", "dot", "svg", "folded", "speedscope", "callgrind", "html"]


def best(cmd, runs, cwd, env=None):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            sys.exit(f"failed: {cmd}\n{p.stderr}")
    return min(times)


def scale_node(n, f):
    cells = n.get("metrics", n)  # format_version 2 (1: the timers on the node)
    for comp in ("wall_clock", "cpu_clock"):
        a = cells.get(comp)
        if not a:
            continue
        for k in ("sum", "self", "min", "max"):
            a[k] = int(a[k] * f)
        a["mean"] *= f
        a["var"] *= f * f


def add_mpi_calls(doc):
    """MPI calls under the 8 busiest functions of the profile, as strata run's
    wrappers record them (text labels, their bytes in mpi_bytes)."""
    doc["metrics"].append({"name": "mpi_bytes", "unit": "bytes", "kind": "bytes",
                           "description": "bytes passed to MPI calls"})
    nodes = doc["threads"][0]["nodes"]
    busiest = sorted(nodes, key=lambda n: -n["metrics"]["wall_clock"]["sum"])[:8]
    next_id = max(n["id"] for n in nodes) + 1
    for parent in busiest:
        for call, bytes_ in (("MPI_Allreduce", 8), ("MPI_Sendrecv", 8000)):
            t = max(parent["metrics"]["wall_clock"]["self"] // 10, 1000)
            nodes.append({"id": next_id, "parent": parent["id"], "depth": parent["depth"] + 1,
                          "label": call, "count": 10,
                          "metrics": {"wall_clock": {"sum": t, "self": t, "min": t // 20,
                                                     "max": t // 5, "mean": t / 10.0,
                                                     "var": float(t)},
                                      "mpi_bytes": 10 * bytes_}})
            next_id += 1


def make_ranks(strata, workdir, nranks):
    ranks = workdir / "ranks"
    ranks.mkdir()
    env = dict(os.environ, OMPI_COMM_WORLD_RANK="0", STRATA_PRINT_TABLES="OFF")
    subprocess.run([strata, "python", "--trace-c", "-o", str(ranks), "--",
                    str(REPO / "bench" / "workloads" / "mixed.py")],
                   cwd=workdir, env=env, check=True, stdout=subprocess.DEVNULL)
    base = json.loads((ranks / "profile-0.json").read_text())
    add_mpi_calls(base)
    nodes = base["threads"][0]["nodes"]
    hot = (max(nodes[1:], key=lambda n: n["metrics"]["wall_clock"]["self"])["id"]
           if len(nodes) > 1 else None)
    rng = random.Random(42)
    for r in range(1, nranks):
        doc = json.loads(json.dumps(base))
        doc["metadata"]["rank"] = r
        doc["threads"][0]["rank"] = r
        f = rng.uniform(0.5, 1.5)
        for n in doc["threads"][0]["nodes"]:
            scale_node(n, f)
        if r % 4 == 3 and hot is not None:  # idle in the hot function: drop its subtree
            gone = {hot}
            kept = []
            for n in doc["threads"][0]["nodes"]:  # parents come before children
                if n["id"] in gone or n["parent"] in gone:
                    gone.add(n["id"])
                else:
                    kept.append(n)
            doc["threads"][0]["nodes"] = kept
        (ranks / f"profile-{r}.json").write_text(json.dumps(doc))
    for p in ranks.glob("*.txt"):
        p.unlink()
    return ranks, len(nodes)


def make_big(path, nnodes, nfuncs=5000, depth=12):
    rng = random.Random(7)
    funcs = [{"file": f"/src/pkg/mod{i % 97}.py", "line": 10 + i, "name": f"f{i}"}
             for i in range(nfuncs)]
    with open(path, "w") as out:
        out.write('{"format_version": 1, "metadata": {"command": ["strata", "python", "--", '
                  '"big.py"], "pid": 1, "host": "bench", "clock": "tsc"}, '
                  '"components": [{"name": "trip_count"}, {"name": "wall_clock"}], "functions": ')
        out.write(json.dumps(funcs))
        out.write(', "threads": [{"index": 0, "tid": 1, "name": "MainThread", "nodes": [\n')
        # a random tree: each new node picks a parent among recent ones at depth < 12
        depth_of, parents = [0], []
        lines = []
        for i in range(1, nnodes + 1):
            if i == 1:
                parent, d = -1, 0
            else:
                parent = rng.randrange(max(1, i - 2000), i)
                d = depth_of[parent] + 1
                if d >= depth:
                    parent, d = 1, 1
            depth_of.append(d)
            fn = rng.randrange(nfuncs)
            cnt = rng.randrange(1, 100)
            s = rng.randrange(1000, 10_000_000)
            lines.append(
                f'{{"id": {i}, "parent": {parent}, "depth": {d}, "label": "f{fn}", "function": {fn}, '
                f'"count": {cnt}, "wall_clock": {{"sum": {s}, "self": {s // 3}, "min": {s // cnt // 2}, '
                f'"max": {s // cnt * 2}, "mean": {s / cnt}, "var": {float(s)}}}}}')
        out.write(",\n".join(lines))
        out.write("\n]}]}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--venv", default=str(REPO / ".venv"))
    ap.add_argument("--keep", help="work in this folder and keep it")
    ap.add_argument("--merge-only", action="store_true", help="time the merge alone")
    a = ap.parse_args()
    strata = str(Path(a.venv).resolve() / "bin" / "strata")
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="strata-report-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        ranks, per_rank = make_ranks(strata, work, a.ranks)
        size = sum(p.stat().st_size for p in ranks.glob("profile-*.json"))
        t = best([strata, "merge", "--force", "-o", str(work / "merged"), str(ranks)], 3, work)
        print(f"merge: {a.ranks} ranks x {per_rank} nodes ({size / 1e6:.0f} MB of profile.json): "
              f"{t:.2f} s")
        if not (work / "merged" / "mpi_summary.txt").exists():
            sys.exit("the merge wrote no MPI summary")
        if a.merge_only:
            return
        big = work / "big.json"
        t0 = time.perf_counter()
        make_big(big, a.nodes)
        print(f"made a {a.nodes:,}-node profile.json ({big.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t0:.1f} s")
        for fmt in FORMATS:
            if fmt == "svg" and not shutil.which("dot"):
                continue
            t = best([strata, "report", "--format", fmt, "-o", str(work / f"out.{fmt}"), str(big)],
                     2, work)
            out = work / f"out.{fmt}"
            print(f"report --format {fmt:<10} {t:6.2f} s  ({out.stat().st_size / 1e6:.1f} MB)")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
