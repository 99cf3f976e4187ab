"""Line timing's workload (bench/lines_bench.py): a loop-heavy function, decorated
with @profile where a line profiler puts `profile` in the builtins (`hot`), and the
same kind of loop undecorated (`cold`: what code that is not timed pays).

    python lines_loop.py hot|cold N"""
import sys

try:
    profile  # noqa: B018  (kernprof's, strata's or the floor's)
except NameError:
    def profile(fn):
        return fn


@profile
def hot(n):
    total = 0
    for i in range(n):
        x = i * 2
        if x % 3:
            total += x
        else:
            total -= 1
    return total


def cold(n):
    total = 0
    for i in range(n):
        x = i * 2
        if x % 3:
            total += x
        else:
            total -= 1
    return total


print((hot if sys.argv[1] == "hot" else cold)(int(sys.argv[2])))
