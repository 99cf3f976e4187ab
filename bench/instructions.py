"""Instructions an event: strata beside the floor, counted by callgrind (issue 17).

Timings on a shared 2-CPU virtual machine move by several percent between runs; the
instructions a program executes do not. This runs naive fib(N) for two values of N
under `valgrind --tool=callgrind` in each configuration (plain, the floor hook, the
floor with one TSC read an event, strata's profile, strata's profile with --trace)
and divides the difference by the difference in events (a call and a return each),
so that start-up and writing the results cancel out:

    instructions an event = (Ir(fib(N2)) - Ir(fib(N1))) / (events(N2) - events(N1))

It prints a table of instructions an event for each configuration, what each adds to
plain Python, and strata's added instructions divided by the floor-tsc's. The same
configurations and commands as bench/run.py (whose helpers build the floors).
Instructions are not time (an rdtsc is one instruction and 8 to 14 ns here), so
this says where strata's own work grows or shrinks, not the overhead ratio.

    .venv/bin/python bench/instructions.py            # N = 18 and 22
    .venv/bin/python bench/instructions.py --n 16 20 --tools floor-tsc,strata
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (bench/run.py: floors, environment, commands)

CONFIGS = ["plain", "floor", "floor-tsc", "strata", "strata-trace"]
# fib through a closure cell, not a global: a global's lookup costs what the hash of
# its name and the globals dict's layout (which differ with the runner) make it cost
FIB = """import sys
def main(n):
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)
    return fib(n)
print(main(int(sys.argv[1])))
"""


def fib_calls(n):
    """Calls naive fib(n) makes: 1 for n < 2, else 1 + calls(n-1) + calls(n-2)."""
    a, b = 1, 1  # calls(0), calls(1)
    for _ in range(n - 1):
        a, b = b, 1 + a + b
    return b if n >= 1 else a


def collected(cmd, env, tmp):
    """Instructions callgrind counted in the last process of cmd (the profiled Python:
    strata's launcher execs it)."""
    out = os.path.join(tmp, "callgrind.out")
    full = ["valgrind", "--tool=callgrind", "--trace-children=yes",
            f"--callgrind-out-file={out}.%p"] + cmd
    p = subprocess.run(full, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=1800)
    found = re.findall(r"Collected : (\d+)", p.stderr)
    if p.returncode != 0 or not found:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: "
                           f"{(p.stderr.strip().splitlines() or ['no output'])[-1]}")
    return int(found[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=os.path.join(bench.ROOT, ".venv", "bin", "python"))
    ap.add_argument("--strata", default=None, help="strata command (default: beside --python)")
    ap.add_argument("--n", type=int, nargs=2, default=[18, 22], metavar=("N1", "N2"))
    ap.add_argument("--tools", default=",".join(CONFIGS[1:]),
                    help="comma-separated, from " + ", ".join(CONFIGS[1:]))
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        print("bench/instructions.py: error: valgrind is not installed", file=sys.stderr)
        return 2
    names = ["plain"] + [t for t in args.tools.split(",") if t and t != "plain"]
    bad = [t for t in names if t not in CONFIGS]
    if bad:
        print(f"bench/instructions.py: error: unknown tool {bad[0]}", file=sys.stderr)
        return 2
    python = os.path.abspath(args.python)
    strata = args.strata or os.path.join(os.path.dirname(python), "strata")
    info = bench.interpreter_info(python)
    n1, n2 = sorted(args.n)
    events = 2 * (fib_calls(n2) - fib_calls(n1))  # main() is one call in each
    tmp = tempfile.mkdtemp(prefix="strata-instr-")
    try:
        script = os.path.join(tmp, "fib.py")
        with open(script, "w") as f:
            f.write(FIB)
        per = {}
        for name in names:
            tool = bench.Tool(name)
            if name == "floor":
                bench.build_floor(tool, info)
            elif name == "floor-tsc":
                bench.build_floor(tool, info, "benchfloortsc")
                tool.env["FLOOR_MODULE"] = "benchfloortsc"
            else:
                tool.strata = strata
            if not tool.available:
                print(f"{name}: skipped: {tool.reason}", file=sys.stderr)
                continue
            env = bench.clean_env()
            env.update(tool.env)
            env["STRATA_PRINT_TABLES"] = "OFF"
            counts = []
            for n in (n1, n2):
                outdir = os.path.join(tmp, f"{name}-{n}")
                cmd = bench.command(tool if name != "plain" else "plain", python, script, outdir)
                counts.append(collected(cmd + [str(n)], env, tmp))
            per[name] = (counts[1] - counts[0]) / events
            print(f"{name}: {per[name]:.1f} instructions an event", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"Python: {info['version'].split()[0]}; fib({n1}) and fib({n2}): {events:,} events "
          f"between them; callgrind")
    print()
    print("| configuration | instructions an event | added to plain | added / floor-tsc added |")
    print("|---|---:|---:|---:|")
    base = per.get("plain", 0.0)
    tsc = per.get("floor-tsc", base) - base
    for name, v in per.items():
        add = v - base
        ratio = f"{add / tsc:.2f}" if name != "plain" and tsc > 0 else "—"
        print(f"| {name} | {v:.1f} | {add:+.1f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
