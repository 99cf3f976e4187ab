"""Threaded workload: 64 threads of pure-Python work.

64 threads started together, each running the same few functions (a sum of
squares over small helper calls, string building, a dict count) for the same
amount of work; the main thread waits for them. Under the GIL they take turns,
so the program's CPU time is about that of the work done one after another, and
a sampler has 64 thread timers (or 64 threads to walk) instead of one: what
issue 11 asks of a sampler at 1 kHz ("64 threads: <= 3 %"). Deterministic: each
thread's result depends on its index only, and the main thread prints their sum.
"""

import threading

THREADS = 64
ROUNDS = 240


def square(x):
    return x * x


def squares(n, k):
    total = 0
    for i in range(n):
        total += square(i + k)
    return total


def words(n, k):
    parts = []
    for i in range(n):
        parts.append(str((i * 7 + k) % 1000))
    return len("-".join(parts))


def counts(n, k):
    seen = {}
    for i in range(n):
        key = (i * k) % 97
        seen[key] = seen.get(key, 0) + 1
    return max(seen.values())


def work(k, out):
    total = 0
    for r in range(ROUNDS):
        total += squares(200, k + r) + words(60, k) + counts(120, k + 1)
    out[k] = total


def main():
    out = [0] * THREADS
    threads = [threading.Thread(target=work, args=(k, out), name=f"worker-{k}")
               for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(sum(out))


if __name__ == "__main__":
    main()
