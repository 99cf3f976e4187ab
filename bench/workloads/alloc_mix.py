"""Sampled memory's workload (bench/lines_bench.py --mode memory): a program that
allocates as ordinary Python programs do (records as dicts, strings, lists, a JSON
round trip, bytes buffers), about a second of CPU, with no function chosen for line
profiles. Prints a checksum.

    python alloc_mix.py ROUNDS"""
import json
import sys


def records(n, seed):
    return [{"id": i, "name": f"item-{seed}-{i}", "tags": [str(i % 7), "x" * (i % 13)],
             "value": i * 0.5} for i in range(n)]


def digest(rows):
    text = json.dumps(rows)
    back = json.loads(text)
    return sum(len(r["name"]) + len(r["tags"][1]) for r in back) + len(text)


def buffers(n):
    kept = [bytearray(4096 + i % 5000) for i in range(n)]
    return sum(len(b) for b in kept)


def main(rounds):
    total = 0
    for r in range(rounds):
        total += digest(records(2000, r)) + buffers(500)
    return total


print(main(int(sys.argv[1])))
