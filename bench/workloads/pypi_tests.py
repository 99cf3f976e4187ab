"""Real-world workload: a PyPI package's own pytest suite.

The same as `pytest -q -p no:cacheprovider --pyargs networkx.algorithms.shortest_paths
networkx.algorithms.components`: pytest collects and runs about 190 tests of NetworkX
(pure Python graph algorithms, as scientists use them) in this one process.  pytest's
collection, fixtures and assertion rewriting, and NetworkX's dicts of dicts: a profile
of ordinary code that is neither the interpreter's nor ours.

pytest comes from the measured interpreter's environment (requirements-dev.txt);
NetworkX, pinned, from .venv-bench, which bench/run.py fills from PyPI before the
runs (NETWORKX_REQUIREMENT in bench/run.py) and whose site-packages this script appends to
sys.path: every configuration imports the very same files.
"""

import os
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = ["networkx.algorithms.shortest_paths", "networkx.algorithms.components"]


def bench_site():
    """.venv-bench's site-packages for this interpreter's version."""
    rel = os.path.relpath(sysconfig.get_paths()["purelib"], sys.prefix)
    return os.path.join(ROOT, ".venv-bench", rel)


def main():
    sys.path.append(bench_site())
    # NumPy (in the environment: some of these tests use it) must not start
    # OpenBLAS's threads, whose spinning between calls is CPU time that varies
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    import pytest

    code = pytest.main(["-q", "-p", "no:cacheprovider", "--pyargs", *TESTS])
    if code != 0:
        raise SystemExit(f"pytest failed: exit status {int(code)}")


if __name__ == "__main__":
    main()
