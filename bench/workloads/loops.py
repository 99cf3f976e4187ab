"""Loop-heavy workload: few calls, long loops.

A handful of function calls, each running long pure-Python loops (integer
arithmetic, a sieve, a dynamic-programming table) with no calls inside the
loops.  A profile hook is almost never called, so this measures what a
profiler costs apart from its calls: its start-up and result writing, and, on
CPython 3.11, the interpreter's slower mode while any profile hook is set
(every instruction goes through the tracing path, unspecialised).
"""


def sieve(n):
    flags = bytearray(b"\x01") * (n + 1)
    flags[0] = flags[1] = 0
    i = 2
    while i * i <= n:
        if flags[i]:
            j = i * i
            while j <= n:
                flags[j] = 0
                j += i
        i += 1
    count = 0
    for f in flags:
        count += f
    return count


def collatz_steps(limit):
    total = 0
    for start in range(1, limit):
        n = start
        while n != 1:
            if n & 1:
                n = 3 * n + 1
            else:
                n >>= 1
            total += 1
    return total


def lcs_length(a, b):
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        k = 0
        for y in b:
            k += 1
            if x == y:
                cur[k] = prev[k - 1] + 1
            else:
                left = cur[k - 1]
                up = prev[k]
                cur[k] = left if left > up else up
        prev = cur
    return prev[-1]


def main():
    a = "ACGT" * 150 + "GATTACA" * 20
    b = "TGCA" * 140 + "ACATTAG" * 25
    print(sieve(1_500_000), collatz_steps(60_000), lcs_length(a, b))


if __name__ == "__main__":
    main()
