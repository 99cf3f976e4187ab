#!/usr/bin/env python3
"""What following a child process costs (issue 15: start-up cost per child <= 20 ms).

    python bench/children_bench.py [-n ROUNDS] [--children N] [--python PY] [--strata S]

A program starts N children one after another, each doing nothing, by each way a
Python program starts one (multiprocessing's fork, spawn and forkserver start methods,
and `subprocess.run([sys.executable, "-c", "pass"])`), and waits for it. It runs
plain, under `strata python --follow-children off` (the floor: strata's own start and
end, children not followed) and under `strata python` (children followed), round
robin; the CPU time (user + sys) of the whole process tree comes from wait4 (the
children's is their parent's, as they are waited for). Per child, in the same rounds
(medians): what following adds, (followed - not followed) / N, the CPU of a child as
the plain program starts it, plain's / N, and their ratio. Wall time likewise.

    python bench/children_bench.py --audit [-n ROUNDS] [--python PY] [--strata S]

What strata adds to every audited event of a run without the profile: once any
audit hook is installed, CPython builds each event's arguments and calls the hooks.
strata's used to name the programs that are not followed and write the results
before an exec; since then those come from the C library's calls
(src/python/spawns.h), and this checks that no hook came back. A loop of
2,000,000 calls of sys._getframe (audited) and of sys.getrecursionlimit (not
audited), each run plain and under `strata python` with STRATA_PROFILE=OFF, round
robin; the loops time themselves (process time, ns a call). The cost an event:
strata's added time on the audited loop less its added time on the other
(medians).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROG = textwrap.dedent("""
    import multiprocessing as mp
    import subprocess
    import sys

    def nothing():
        pass

    if __name__ == "__main__":
        how, n = sys.argv[1], int(sys.argv[2])
        for _ in range(n):
            if how == "subprocess":
                subprocess.run([sys.executable, "-c", "pass"], check=True)
            else:
                p = mp.get_context(how).Process(target=nothing)
                p.start()
                p.join()
""")

WAYS = ["fork", "spawn", "forkserver", "subprocess"]


def cpu_wall(cmd, cwd):
    """(CPU seconds of the process tree, wall seconds) of one run."""
    import time
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, STRATA_PRINT_TABLES="OFF"))
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"children_bench: {cmd} failed")
    return ru.ru_utime + ru.ru_stime, wall


LOOP = textwrap.dedent("""
    import sys
    import time

    call = sys._getframe if sys.argv[1] == "audited" else sys.getrecursionlimit
    n = int(sys.argv[2])
    t = time.process_time()
    for _ in range(n):
        call()
    print((time.process_time() - t) / n * 1e9)
""")


def audit(a):
    """What strata adds to an audited event (see the module's text)."""
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "loop.py")
        with open(prog, "w") as f:
            f.write(LOOP)
        for r in range(a.rounds + 1):
            for which in ("audited", "other"):
                for how in ("plain", "strata"):
                    cmd = [a.python, prog, which, "2000000"] if how == "plain" else \
                        [a.strata, "python", "-o", os.path.join(tmp, f"r{r}{which}"), prog,
                         which, "2000000"]
                    out = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True,
                                         env=dict(os.environ, STRATA_PROFILE="OFF",
                                                  STRATA_PRINT_TABLES="OFF"))
                    if out.returncode != 0:
                        raise SystemExit(f"children_bench: {cmd} failed: {out.stderr}")
                    if r:  # the first round warms the caches up
                        rows.setdefault((which, how), []).append(float(out.stdout))
    med = {k: statistics.median(v) for k, v in rows.items()}
    added = {w: med[(w, "strata")] - med[(w, "plain")] for w in ("audited", "other")}
    print("| loop | plain, a call | strata (no profile), a call | added |")
    print("|---|---:|---:|---:|")
    for w, name in (("audited", "sys._getframe (audited)"), ("other", "sys.getrecursionlimit")):
        print(f"| {name} | {med[(w, 'plain')]:.1f} ns | {med[(w, 'strata')]:.1f} ns | "
              f"{added[w]:+.1f} ns |")
    print(f"\nstrata an audited event: {added['audited'] - added['other']:.1f} ns "
          f"(medians of {a.rounds} rounds)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--rounds", type=int, default=7)
    ap.add_argument("--children", type=int, default=10)
    ap.add_argument("--audit", action="store_true",
                    help="measure what strata adds to an audited event instead")
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--strata", default=os.path.join(ROOT, ".venv", "bin", "strata"))
    a = ap.parse_args()
    if a.audit:
        return audit(a)
    print(f"children_bench: {a.rounds} rounds of {a.children} children a way, "
          f"python {a.python}", file=sys.stderr)
    print("| start method | plain CPU a child | followed: added CPU a child | ratio | "
          "plain wall a child | followed: added wall a child |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "children.py")
        with open(prog, "w") as f:
            f.write(PROG)
        for way in WAYS:
            configs = {
                "plain": [a.python, prog, way, str(a.children)],
                "off": [a.strata, "python", "--follow-children", "off", "-o",
                        os.path.join(tmp, "off"), prog, way, str(a.children)],
                "on": [a.strata, "python", "-o", os.path.join(tmp, "on"), prog, way,
                       str(a.children)],
                "plain0": [a.python, prog, way, "0"],
            }
            got = {k: [] for k in configs}
            for r in range(a.rounds + 1):
                for k, cmd in configs.items():
                    res = cpu_wall(cmd, tmp)
                    if r:  # the first round warms the caches up
                        got[k].append(res)
            n = a.children
            added = [(on[0] - off[0]) / n for on, off in zip(got["on"], got["off"])]
            added_w = [(on[1] - off[1]) / n for on, off in zip(got["on"], got["off"])]
            child = [(p[0] - z[0]) / n for p, z in zip(got["plain"], got["plain0"])]
            child_w = [(p[1] - z[1]) / n for p, z in zip(got["plain"], got["plain0"])]
            c, ad = statistics.median(child), statistics.median(added)
            if way == "forkserver":
                # the workers are the fork server's children, which the program does
                # not wait for: their CPU is not in the tree's; the wall time tells
                print(f"| {way} | n/a | n/a | n/a | "
                      f"{statistics.median(child_w) * 1e3:.1f} ms | "
                      f"{statistics.median(added_w) * 1e3:.1f} ms |")
                continue
            print(f"| {way} | {c * 1e3:.1f} ms | {ad * 1e3:.1f} ms | {ad / c:.2f} | "
                  f"{statistics.median(child_w) * 1e3:.1f} ms | "
                  f"{statistics.median(added_w) * 1e3:.1f} ms |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
