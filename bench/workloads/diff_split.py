# strata diff's program (bench/diff_bench.py, tests/test_diff.py): small() takes
# about 5 % of the time, big() the rest; SLOW scales small()'s work, CALLS its calls.
import os

SLOW = float(os.environ.get("SLOW", "1"))
CALLS = int(os.environ.get("CALLS", "10"))


def small():
    s = 0
    for i in range(int(20000 * SLOW)):
        s += i
    return s


def big():
    s = 0
    for i in range(380000):
        s += i
    return s


def main():
    for _ in range(CALLS):
        small()
    for _ in range(10):
        big()


main()
