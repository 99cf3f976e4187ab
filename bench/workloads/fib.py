"""Call-heavy workload: naive recursive fib(30).

2,692,537 Python calls (and returns), no C calls, almost no work per call: the
profiler's per-call cost dominates everything else.
"""


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


if __name__ == "__main__":
    print(fib(30))
