"""Real-world workload: a slice of CPython's own test suite.

The same as `python -m test -q --randseed 1 test_json`: regrtest runs the test_json package
(the C and the pure-Python json implementations, about 170 tests) in this one
process.  Lots of unittest machinery, imports, C calls and exceptions: a
profile of ordinary, untuned code.  Needs the interpreter's `test` package.
"""

import runpy
import sys

TESTS = ["test_json"]


def main():
    sys.argv = [sys.argv[0], "-q", "--randseed", "1", *TESTS]
    try:
        runpy.run_module("test", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise


if __name__ == "__main__":
    main()
