import sys

def fib(n):
    return n if n < 2 else (fib(n - 1) + fib(n - 2))


def inefficient(n):
    a = 0
    for i in range(n):
        a += i
        for j in range(n):
            a += j
    return a


def run(n):
    return fib(n) + inefficient(n)


if __name__ == "__main__":
    run(20)
