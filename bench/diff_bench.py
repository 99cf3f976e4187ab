#!/usr/bin/env python3
"""The targets of `strata diff` (issue 15): false alarms and detection, in trials.

    python bench/diff_bench.py [--trials N] [--runs N] [--fail-on PCT] [--slow F]

Each trial profiles a program (small() takes about 5 % of its time, big() the rest)
--runs times a side with `strata python` (A and B in turn, so that a slow spell of
this machine falls on both) and runs `strata diff --fail-on PCT A... -- B...`:
  same    both sides the same program: a trial fails when anything is flagged;
  slower  B's small() does --slow times its work (1.2: a 20 % slowdown): a trial
          fails when small() is not flagged, or anything else is.
Target (issue 15): 5 runs a side, nothing flagged in 20 of 20 `same` trials and the
slowdown flagged in 20 of 20 `slower` trials. Prints a line per trial and the counts.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = os.path.join(ROOT, "bench", "workloads", "diff_split.py")
SMALL = "diff_split:9:small"


def sides(strata, prog, tmp, runs, slow):
    """The runs of A and of B, taken in turn (A B A B ...), so that a slow spell of
    the machine falls on both sides alike."""
    out = ([], [])
    for i in range(runs):
        for s, (name, factor) in enumerate((("a", 1.0), ("b", slow))):
            folder = os.path.join(tmp, f"{name}{i}")
            env = dict(os.environ, STRATA_PRINT_TABLES="OFF", SLOW=str(factor))
            subprocess.run([strata, "python", "-o", folder, prog], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            out[s].append(folder)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--fail-on", type=float, default=10)
    ap.add_argument("--slow", type=float, default=1.2)
    ap.add_argument("--strata", default=os.path.join(ROOT, ".venv", "bin", "strata"))
    a = ap.parse_args()
    ok = {"same": 0, "slower": 0}
    with tempfile.TemporaryDirectory() as tmp:
        prog = PROG
        for t in range(a.trials):
            for kind, slow in (("same", 1.0), ("slower", a.slow)):
                d = os.path.join(tmp, f"{kind}{t}")
                os.makedirs(d)
                A, B = sides(a.strata, prog, d, a.runs, slow)
                r = subprocess.run([a.strata, "diff", "--format", "json", "--fail-on",
                                    str(a.fail_on), *A, "--", *B], capture_output=True,
                                   text=True)
                doc = json.loads(r.stdout)
                flagged = sorted(f["name"] for f in doc["functions"] if f["regression"])
                good = flagged == ([] if kind == "same" else [SMALL])
                ok[kind] += good
                small = next(f for f in doc["functions"] if f["name"] == SMALL)
                print(f"trial {t + 1:2d} {kind:6s} flagged {flagged or 'nothing'}; small() "
                      f"{small['change']:+.1f} % (noise {1e3 * small['noise']:.2f} ms) "
                      f"{'ok' if good else 'WRONG'}", flush=True)
    print(f"same program, nothing flagged: {ok['same']} of {a.trials}; a {100 * (a.slow - 1):.0f} % "
          f"slowdown of a 5 % function flagged: {ok['slower']} of {a.trials} "
          f"({a.runs} runs a side, --fail-on {a.fail_on:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
