"""The seed's three trip_count tables, reproduced byte for byte.

Seed: ../shared/seeds/000_ce0cd4e631a55686.txt ("Profiling Python scripts"). The
expected tables are in tests/golden/ (copied from the seed, RST indentation removed):

- example_trip_count.txt: ``strata python ./example.py`` with trip_count, and also the
  ``@strata.profile()`` decorator and ``with strata.profile():`` forms under plain python;
- example_builtin_trip_count.txt: ``@profile`` on ``inefficient``, run with ``-b``;
- config_args_trip_count.txt: ``strata.profiler.config`` changed from the script, run
  under plain python.
"""

import re

import pytest

from conftest import EXAMPLE_PY, golden_text, read_table, tables_in

TRIP = {"STRATA_PROFILE": "ON", "STRATA_COMPONENTS": "trip_count"}


def check_results(runner, res, golden, name="example_trip_count.txt"):
    """The run succeeded, wrote exactly the golden table to trip_count.txt, printed it
    to standard error followed by the results folder's name, and wrote profile.json."""
    assert res.returncode == 0, res.describe()
    assert res.stdout == "", res.describe()
    results = runner.results()
    golden(name, (results / "trip_count.txt").read_text())
    txt = sorted(p.name for p in results.glob("*.txt"))
    assert txt == ["trip_count.txt"], txt
    assert (results / "profile.json").is_file()
    printed = tables_in(res.stderr)
    assert printed == [golden_text(name)], res.describe()
    tail = res.stderr[res.stderr.index(printed[0]) + len(printed[0]):]
    assert results.name in tail, f"the results folder is not named after the table:\n{tail}"
    return results


def with_profile_decorator(src: str, func: str) -> str:
    out, n = re.subn(rf"^def {func}\(", f"@profile\ndef {func}(", src, flags=re.M)
    assert n == 1
    return out


# ------------------------------------------------------------ strata python ./example.py


@pytest.mark.parametrize(
    "form",
    [
        "strata python ./example.py",
        "strata python -- ./example.py",
        "strata python example.py",
        "python -m strata ./example.py",
        "python -m strata -- ./example.py",
        "strata python -- -m examplepkg.example",
        "python -m strata -- -m examplepkg.example",
    ],
)
def test_example_trip_count(runner, golden, form):
    runner.copy_example()
    runner.write("examplepkg/__init__.py", "")
    runner.copy_example("examplepkg/example.py")
    words = form.split()
    if words[0] == "strata":
        res = runner.strata(*words[2:], env=TRIP)
    else:
        res = runner.module(*words[3:], env=TRIP)
    check_results(runner, res, golden)


def test_example_components_flag(runner, golden):
    """--components on the command line instead of the environment."""
    runner.copy_example()
    res = runner.strata("--components", "trip_count", "--", "./example.py")
    check_results(runner, res, golden)


def test_example_print_tables_off(runner, golden):
    runner.copy_example()
    res = runner.strata("./example.py", env={**TRIP, "STRATA_PRINT_TABLES": "OFF"})
    assert res.returncode == 0, res.describe()
    assert res.stderr == "" and res.stdout == "", res.describe()
    golden("example_trip_count.txt", (runner.results() / "trip_count.txt").read_text())


# --------------------------------------------------------------------------- -b, @profile


def test_builtin_profile_inefficient(runner, golden):
    """Seed: @profile on inefficient, `strata python -b -- ./example.py`."""
    runner.write("example.py", with_profile_decorator(EXAMPLE_PY.read_text(), "inefficient"))
    res = runner.strata("-b", "--", "./example.py", env=TRIP)
    check_results(runner, res, golden, "example_builtin_trip_count.txt")


def test_builtin_long_flag(runner, golden):
    runner.write("example.py", with_profile_decorator(EXAMPLE_PY.read_text(), "inefficient"))
    res = runner.strata("--builtin", "--", "./example.py", env=TRIP)
    check_results(runner, res, golden, "example_builtin_trip_count.txt")


def test_builtin_env(runner, golden):
    runner.write("example.py", with_profile_decorator(EXAMPLE_PY.read_text(), "inefficient"))
    res = runner.strata("--", "./example.py", env={**TRIP, "STRATA_BUILTIN": "ON"})
    check_results(runner, res, golden, "example_builtin_trip_count.txt")


def test_builtin_profile_on_run(runner, golden):
    """@profile on run with -b records run and everything it calls: the full table."""
    runner.write("example.py", with_profile_decorator(EXAMPLE_PY.read_text(), "run"))
    res = runner.strata("-b", "--", "./example.py", env=TRIP)
    check_results(runner, res, golden)


def test_builtin_with_profile_block(runner, golden):
    """`with profile:` (no call) around run(20), with -b: the full table."""
    src = EXAMPLE_PY.read_text().replace("    run(20)", "    with profile:\n        run(20)")
    runner.write("example.py", src)
    res = runner.strata("-b", "--", "./example.py", env=TRIP)
    check_results(runner, res, golden)


def test_profile_decorator_without_builtin(runner, golden):
    """Without -b, @profile changes nothing: everything is recorded."""
    runner.write("example.py", with_profile_decorator(EXAMPLE_PY.read_text(), "inefficient"))
    res = runner.strata("--", "./example.py", env=TRIP)
    check_results(runner, res, golden)


def test_builtin_nothing_outside_profile(runner):
    """With -b, calls outside @profile functions are not recorded."""
    runner.write("example.py", with_profile_decorator(EXAMPLE_PY.read_text(), "inefficient")
                 + "    fib(3)\n    inefficient(2)\n")
    res = runner.strata("-b", "--", "./example.py", env=TRIP)
    assert res.returncode == 0, res.describe()
    table = read_table(runner.results(), "trip_count")
    assert [(r.label, r.count) for r in table.rows] == [("|0>>> inefficient", 2)], table.text


# ------------------------------------------------------------- plain python, import strata

CONFIG_SCRIPT = '''\
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
    from strata.profiler import config
    from strata import profile

    config.include_args = True
    config.include_filename = False
    config.include_line = False
    config.restrict_functions += ["fib", "run"]

    with profile():
        run(5)
'''


def test_plain_python_config(runner, golden):
    """Seed: strata.profiler.config from the script, `with profile(): run(5)`."""
    runner.write("example.py", CONFIG_SCRIPT)
    res = runner.plain("example.py", env={"STRATA_COMPONENTS": "trip_count"})
    check_results(runner, res, golden, "config_args_trip_count.txt")


def decorator_script() -> str:
    src = EXAMPLE_PY.read_text().replace("import sys\n", "import sys\nimport strata\n", 1)
    out, n = re.subn(r"^def run\(", "@strata.profile()\ndef run(", src, flags=re.M)
    assert n == 1
    return out


def context_manager_script() -> str:
    src = EXAMPLE_PY.read_text().replace("import sys\n", "import sys\nimport strata\n", 1)
    return src.replace("    run(20)", "    with strata.profile():\n        run(20)")


@pytest.mark.parametrize("script", [decorator_script, context_manager_script],
                         ids=["decorator", "context-manager"])
def test_plain_python_source_instrumentation(runner, golden, script):
    """Seed: @strata.profile() on run, or `with strata.profile(): run(20)`, under plain
    python, give the same table as `strata python ./example.py`."""
    runner.write("example.py", script())
    res = runner.plain("example.py", env={"STRATA_COMPONENTS": "trip_count"})
    check_results(runner, res, golden)


def test_plain_python_only_inside_scopes(runner):
    """Under plain python only what runs inside profile() scopes is recorded."""
    runner.write(
        "prog.py",
        """
        import strata

        def leaf():
            pass

        def outside():
            leaf()

        @strata.profile()
        def inside():
            leaf()

        outside()
        inside()
        with strata.profile():
            leaf()
        outside()
        inside()
        """,
    )
    res = runner.plain("prog.py", env={"STRATA_COMPONENTS": "trip_count",
                                      "STRATA_PRINT_TABLES": "OFF"})
    assert res.returncode == 0 and res.stderr == "", res.describe()
    table = read_table(runner.results(), "trip_count")
    got = {(r.path, r.count) for r in table.rows}
    assert got == {(("inside",), 2), (("inside", "leaf"), 2), (("leaf",), 1)}, table.text


# ------------------------------------------------- the seed's tables from the command line


def test_label_args_restrict_from_command_line(runner, golden):
    """--label args with -R fib run, on a script that calls run(5): the seed's third
    table, this time from the command line."""
    runner.write("example.py", EXAMPLE_PY.read_text().replace("run(20)", "run(5)"))
    res = runner.strata("--label", "args", "-R", "fib", "run", "--", "./example.py", env=TRIP)
    check_results(runner, res, golden, "config_args_trip_count.txt")


# ------------------------------------------------------ golden files produced by strata

THREADS = """\
import threading

def leaf():
    pass

def worker(n):
    for _ in range(n):
        leaf()

def main():
    for n in (2, 3):
        t = threading.Thread(target=worker, args=(n,))
        t.start()
        t.join()
    leaf()

main()
"""


def test_threads_table(runner, golden):
    """One tree per thread, |0>>> first, then the threads in the order they ran
    (tests/golden/threads_trip_count.txt was produced by strata and reviewed)."""
    runner.write("threads.py", THREADS)
    res = runner.strata("-R", "^main$", "^worker$", "^leaf$", "--", "threads.py", env=TRIP)
    assert res.returncode == 0, res.describe()
    golden("threads_trip_count.txt", (runner.results() / "trip_count.txt").read_text())
