"""Options and settings: filters, labels, --trace-c, @noprofile, -b, -c, -s, -F, -o,
--components and the precedence default < config file < environment < command line."""

import itertools
import os

import pytest

from conftest import find_results, golden_text, parse_table, read_table, results_dirs

TRIP = {"STRATA_COMPONENTS": "trip_count", "STRATA_PRINT_TABLES": "OFF"}


def run_table(runner, *args, env=None, script=None, component="trip_count", form="strata"):
    """Run `strata python ARGS -- SCRIPT` (or ARGS alone when `script` is None and ARGS
    names it) with its own results folder; return the parsed table of `component`."""
    out = runner.dir / f"results{next(_RUNS)}"  # two runs may start in the same second
    full_env = {**TRIP, "STRATA_OUTPUT_PATH": out, **(env or {})}
    words = [*args, "--", script] if script else list(args)
    res = runner.front(form)(*words, env=full_env)
    assert res.returncode == 0, res.describe()
    assert res.stderr == "", res.describe()
    return read_table(out, component)


_RUNS = itertools.count()


# Rows that the test environment adds to any script that imports a module: setuptools
# puts a meta path finder (_distutils_hack) in the virtual environment. It is the
# program's own code as far as strata knows, so it is recorded, but it is not what
# these tests are about.
IMPORT_NOISE = {"DistutilsMetaFinder.find_spec"}


def shape(table):
    """[(thread, path, count)] in table order, without IMPORT_NOISE roots."""
    return [(r.thread, r.path, r.count) for r in table.rows if r.path[0] not in IMPORT_NOISE]


def golden_shape():
    return shape(parse_table(golden_text("example_trip_count.txt")))


GOLDEN_FIB = [(r.count, r.depth) for r in parse_table(golden_text("example_trip_count.txt")).rows
              if r.name == "fib"]


# ------------------------------------------------------------------------- function filters


def test_exclude_fib(runner):
    runner.copy_example()
    table = run_table(runner, "-E", "^fib$", script="example.py")
    assert shape(table) == [(0, ("run",), 1), (0, ("run", "inefficient"), 1)], table.text


def test_exclude_long_flag_and_search_anywhere(runner):
    runner.copy_example()
    table = run_table(runner, "--function-exclude", "effic", script="example.py")
    assert shape(table) == [s for s in golden_shape() if s[1][-1] != "inefficient"]


def test_restrict_fib(runner):
    """-R keeps only fib: its rows are the seed's, one level up."""
    runner.copy_example()
    table = run_table(runner, "-R", "^fib$", script="example.py")
    assert {r.name for r in table.rows} == {"fib"}
    assert [(r.count, r.depth) for r in table.rows] == [(c, d - 1) for c, d in GOLDEN_FIB]


def test_restrict_several_values(runner):
    runner.copy_example()
    table = run_table(runner, "--function-restrict", "^run$", "^inefficient$", script="example.py")
    assert shape(table) == [(0, ("run",), 1), (0, ("run", "inefficient"), 1)], table.text


def test_include_overrides_exclude(runner, golden):
    runner.copy_example()
    res = runner.strata("-E", "^fib$", "^run$", "-I", "^fib$", "^run$", "--", "example.py",
                        env=TRIP)
    assert res.returncode == 0, res.describe()
    golden("example_trip_count.txt", (find_results(runner.dir) / "trip_count.txt").read_text())


LAMBDA = """
def fib(n):
    return n if n < 2 else (fib(n - 1) + fib(n - 2))

def run():
    f = lambda: fib(2)
    return f() + sum([fib(1) for _ in range(2)])

run()
"""


def test_default_exclusions_and_flag_adds(runner):
    """<lambda>, <listcomp> and <module> are left out by default, and what they call is
    recorded under the nearest recorded caller; -E adds to those exclusions."""
    runner.write("lam.py", LAMBDA)
    want = [(0, ("run",), 1), (0, ("run", "fib"), 3), (0, ("run", "fib", "fib"), 2)]
    assert shape(run_table(runner, script="lam.py")) == want
    table = run_table(runner, "-E", "^nothing$", script="lam.py")
    assert shape(table) == want


def test_env_replaces_default_exclusions(runner):
    """STRATA_FUNCTION_EXCLUDE replaces the list: <module> and <lambda> come back."""
    runner.write("lam.py", LAMBDA)
    table = run_table(runner, env={"STRATA_FUNCTION_EXCLUDE": "^nothing$"}, script="lam.py")
    assert table.get("<module>") is not None, table.text
    lam = table.get("<module>", "run", "run.<locals>.<lambda>", "fib")
    assert lam is not None and lam.count == 1, table.text


def test_env_regex_with_comma(runner):
    """Regex lists are split on spaces only: a regex may hold a comma."""
    runner.copy_example()
    table = run_table(runner, env={"STRATA_FUNCTION_EXCLUDE": "^f{1,2}ib$ ^<.*>$"},
                      script="example.py")
    assert shape(table) == [(0, ("run",), 1), (0, ("run", "inefficient"), 1)], table.text


def test_filters_match_co_name_not_qualname(runner):
    runner.write("q.py", """
        class Solver:
            def step(self):
                return leaf()

        def leaf():
            return 1

        def main():
            Solver().step()
            leaf()

        main()
    """)
    table = run_table(runner, "-E", "^step$", script="q.py")
    assert shape(table) == [(0, ("Solver",), 1), (0, ("main",), 1), (0, ("main", "leaf"), 2)], \
        table.text


# --------------------------------------------------------------------------- module filters

MAIN = """
import helper_mod

def callback():
    pass

def main():
    helper_mod.helper_fn(callback)

main()
"""
HELPER = """
def helper_fn(cb):
    helper_leaf()
    cb()

def helper_leaf():
    pass
"""
FULL = [(0, ("main",), 1), (0, ("main", "helper_fn"), 1),
        (0, ("main", "helper_fn", "helper_leaf"), 1), (0, ("main", "helper_fn", "callback"), 1)]


@pytest.mark.parametrize("opts, want", [
    ([], FULL),
    (["-ME", r"/helper_mod\.py$"], [(0, ("main",), 1), (0, ("main", "callback"), 1)]),
    (["--module-exclude", r"helper_mod\.py$"], [(0, ("main",), 1), (0, ("main", "callback"), 1)]),
    (["-ME", r"helper_mod\.py$", "-MI", r"helper_mod\.py$"], FULL),
    (["--module-exclude", r"helper_mod\.py$", "--module-include", r"helper_mod\.py$"], FULL),
    (["-MR", r"/main\.py$"], [(0, ("main",), 1), (0, ("main", "callback"), 1)]),
    (["--module-restrict", r"helper_mod\.py$"],
     [(0, ("helper_fn",), 1), (0, ("helper_fn", "helper_leaf"), 1)]),
], ids=["none", "ME", "module-exclude", "ME-MI", "long-include", "MR", "module-restrict"])
def test_module_filters(runner, opts, want):
    runner.write("main.py", MAIN)
    runner.write("helper_mod.py", HELPER)
    table = run_table(runner, *opts, script="main.py")
    assert shape(table) == want, table.text


def test_module_exclude_env_replaces_defaults(runner):
    """With the default module exclusions replaced, the frozen importlib shows up; the
    -ME flag keeps them."""
    runner.write("main.py", MAIN)
    runner.write("helper_mod.py", HELPER)
    table = run_table(runner, "-ME", r"^nothing$", script="main.py")
    assert shape(table) == FULL
    table = run_table(runner, env={"STRATA_MODULE_EXCLUDE": r"helper_mod\.py$"}, script="main.py")
    assert "_find_and_load" in table.names(), table.text
    # threading.py is recorded too now; the main thread is still thread 0
    row = table.get("main", "callback", thread=0)
    assert row is not None and row.count == 1, table.text


# --------------------------------------------------------------------------------- labels

LAB = """\
def leaf(n):
    return n

def top(n):
    return leaf(n) + leaf(n + 1) + leaf(n)

def long_arg(s):
    return s

top(1)
long_arg("a" * 100)
"""


@pytest.mark.parametrize("opts, env, want", [
    (["--label", "args"], {}, ["top(n=1)", "leaf(n=1)", "leaf(n=2)"]),
    (["--label", "file"], {}, ["top[lab.py]", "leaf[lab.py]"]),
    (["--label", "line"], {}, ["top[:4]", "leaf[:1]"]),
    (["--label", "file", "line"], {}, ["top[lab.py:4]", "leaf[lab.py:1]"]),
    (["--label", "args", "file", "line"], {},
     ["top(n=1)[lab.py:4]", "leaf(n=1)[lab.py:1]", "leaf(n=2)[lab.py:1]"]),
    ([], {"STRATA_LABEL": "line,file"}, ["top[lab.py:4]", "leaf[lab.py:1]"]),
    ([], {"STRATA_LABEL": "args line"}, ["top(n=1)[:4]", "leaf(n=1)[:1]", "leaf(n=2)[:1]"]),
], ids=["args", "file", "line", "file-line", "args-file-line", "env-comma", "env-space"])
def test_labels(runner, opts, env, want):
    runner.write("lab.py", LAB)
    table = run_table(runner, *opts, env=env, script="lab.py")
    top = [r for r in table.rows if r.name.startswith("top")]
    assert len(top) == 1 and top[0].parent is None
    got = [top[0].name] + [c.name for c in top[0].children]
    assert got == want, table.text
    counts = [c.count for c in top[0].children]
    assert counts == ([2, 1] if "args" in str(opts) + str(env) else [3]), table.text


def test_label_args_cut_at_32(runner):
    runner.write("lab.py", LAB)
    table = run_table(runner, "--label", "args", script="lab.py")
    rows = [r for r in table.rows if r.name.startswith("long_arg(")]
    assert len(rows) == 1, table.text
    name = rows[0].name
    assert name.startswith("long_arg(s='aaaaaaaa") and name.endswith(")"), name
    value = name[len("long_arg(s="):-1]
    assert 0 < len(value) <= 32 + 3, f"{name!r}: the argument is not cut at 32 characters"


def test_label_args_runs_no_code_of_the_program(runner):
    """--label args shows builtin values (and builtin containers of them) by their
    repr, any other object as <TypeName object>: the program's __repr__ never runs
    (its effects would happen only under strata; issue 9 item 15)."""
    runner.write("rep.py", """
        class Loud:
            def __repr__(self):
                print("__repr__ ran")
                return "Loud()"

        class MyInt(int):
            def __repr__(self):
                print("__repr__ of the subclass ran")
                return "MyInt"

        def f(a, b, c, d, *rest, **kw):
            return a

        f(1, "x", [2, (3,), {"k": Loud()}], Loud(), MyInt(4), None, 2.5, k=b"z")
        print("done")
    """)
    out = runner.dir / "results"
    res = runner.strata("--label", "args", "--", "rep.py", env={**TRIP, "STRATA_OUTPUT_PATH": out})
    assert res.returncode == 0 and res.stdout == "done\n", res.describe()
    rows = [r.name for r in read_table(out, "trip_count").rows if r.name.startswith("f(")]
    assert rows == ["f(a=1, b='x', c=[2, (3,), {'k': <Loud object>}], d=<Loud object>, "
                    "rest=(<MyInt object>, None, 2.5), kw={'k': b'z'})"], rows


@pytest.mark.parametrize("opts, env, full", [
    (["--label", "file", "-F"], {}, True),
    (["--label", "file", "--full-filepath"], {}, True),
    (["--label", "file", "-F", "true"], {}, True),
    (["--label", "file", "-F", "off"], {}, False),
    (["--label", "file"], {"STRATA_FULL_FILEPATH": "ON"}, True),
    (["--label", "file", "-F", "0"], {"STRATA_FULL_FILEPATH": "ON"}, False),
], ids=["F", "long", "F-true", "F-off", "env", "flag-beats-env"])
def test_full_filepath(runner, opts, env, full):
    runner.write("lab.py", LAB)
    table = run_table(runner, *opts, env=env, script="lab.py")
    path = str(runner.dir / "lab.py") if full else "lab.py"
    # the exact label format is test_labels' business: here only the path counts
    name = table.roots(0)[0].name
    assert name.startswith("top") and name.endswith(f"[{path}]"), table.text
    assert name[len("top"):-len(f"[{path}]")].strip() == "", table.text


def test_qualified_names(runner):
    runner.write("qn.py", """
        class Solver:
            def step(self):
                return self.make()

            @classmethod
            def make(cls):
                return 1

            @staticmethod
            def util():
                return 2

        def outer():
            def inner():
                return 3
            return inner()

        def main():
            Solver().step()
            Solver.util()
            outer()

        main()
    """)
    table = run_table(runner, script="qn.py")
    assert shape(table) == [
        (0, ("Solver",), 1),  # the class body: its code is named Solver
        (0, ("main",), 1),
        (0, ("main", "Solver.step"), 1),
        (0, ("main", "Solver.step", "Solver.make"), 1),
        (0, ("main", "Solver.util"), 1),
        (0, ("main", "outer"), 1),
        (0, ("main", "outer", "outer.<locals>.inner"), 1),
    ], table.text


# -------------------------------------------------------------------------------- trace-c

TRACE_C = """
import time

def key(x):
    return -x

def caller():
    xs = sorted([3, 1, 2], key=key)
    out = []
    out.append(1)
    time.sleep(0)
    return xs

caller()
"""
SORTED = "<built-in method sorted>"
APPEND = "<method 'append' of 'list' objects>"
SLEEP = "<built-in method time.sleep>"


def c_rows(table):
    return [r for r in table.rows if r.name.startswith("<built-in") or r.name.startswith("<method")]


@pytest.mark.parametrize("opts, env", [
    (["--trace-c"], {}),
    (["--trace-c", "ON"], {}),
    ([], {"STRATA_TRACE_C": "yes"}),
    (["--trace-c"], {"STRATA_TRACE_C": "off"}),
], ids=["flag", "flag-on", "env", "flag-beats-env"])
def test_trace_c(runner, opts, env):
    runner.write("tc.py", TRACE_C)
    table = run_table(runner, *opts, env=env, script="tc.py")
    assert table.get("caller") is not None, f"caller is not a root of the tree:\n{table.text}"
    assert table.get("caller", SORTED).count == 1, table.text
    assert table.get("caller", SORTED, "key").count == 3, table.text
    assert table.get("caller", APPEND).count == 1, table.text
    assert table.get("caller", SLEEP).count == 1, table.text
    assert table.get("caller", "key") is None


@pytest.mark.parametrize("opts, env", [
    ([], {}),
    (["--trace-c", "false"], {}),
    (["--trace-c", "0"], {"STRATA_TRACE_C": "ON"}),
], ids=["default", "flag-false", "flag-beats-env"])
def test_no_trace_c(runner, opts, env):
    runner.write("tc.py", TRACE_C)
    table = run_table(runner, *opts, env=env, script="tc.py")
    assert shape(table) == [(0, ("caller",), 1), (0, ("caller", "key"), 3)], table.text
    assert not c_rows(table)


@pytest.mark.parametrize("opts, gone", [
    (["-E", "^sorted$"], SORTED),
    (["-ME", "^time$"], SLEEP),
    (["-ME", "^list$"], APPEND),
], ids=["E-sorted", "ME-time", "ME-list"])
def test_trace_c_filters(runner, opts, gone):
    """C functions are filtered by bare name and by module or type name."""
    runner.write("tc.py", TRACE_C)
    table = run_table(runner, "--trace-c", *opts, script="tc.py")
    assert table.get("caller") is not None, f"caller is not a root of the tree:\n{table.text}"
    children = {c.name for c in table.get("caller").children}
    assert gone not in children, table.text
    assert {SORTED, APPEND, SLEEP} - {gone} <= children, table.text
    if gone == SORTED:
        assert table.get("caller", "key").count == 3


# ------------------------------------------------------------------------------ noprofile


NOPROFILE = """
def child():
    pass

def quiet_helper():
    child()

@noprofile
def noisy():
    child()
    quiet_helper()
    return 5

def main():
    print(noisy())
    child()

main()
"""


def test_noprofile(runner):
    """@noprofile removes the function and everything it calls."""
    runner.write("np.py", NOPROFILE)
    res = runner.strata("--", "np.py", env=TRIP)
    assert res.returncode == 0 and res.stdout == "5\n", res.describe()
    table = read_table(find_results(runner.dir), "trip_count")
    assert shape(table) == [(0, ("main",), 1), (0, ("main", "child"), 1)], table.text


def test_noprofile_inside_builtin_profile(runner):
    runner.write("np.py", NOPROFILE.replace("def main", "@profile\ndef main"))
    table = run_table(runner, "-b", script="np.py")
    assert shape(table) == [(0, ("main",), 1), (0, ("main", "child"), 1)], table.text


def test_profile_and_noprofile_are_builtins(runner):
    runner.write("b.py", """
        import builtins
        print(hasattr(builtins, "profile"), hasattr(builtins, "noprofile"))
    """)
    res = runner.strata("--", "b.py", env=TRIP)
    assert res.stdout == "True True\n", res.describe()


# -------------------------------------------------------------------------------------- -o


@pytest.mark.parametrize("flag", ["-o", "--output"])
def test_output_folder(runner, flag):
    runner.copy_example()
    res = runner.strata(flag, "myresults", "--", "example.py",
                        env={"STRATA_COMPONENTS": "trip_count"})
    assert res.returncode == 0, res.describe()
    out = runner.dir / "myresults"
    assert (out / "trip_count.txt").read_text() == golden_text("example_trip_count.txt")
    assert (out / "profile.json").is_file()
    assert not results_dirs(runner.dir)
    last = res.stderr.rstrip("\n").split("\n")[-1]
    assert "myresults" in last, f"the folder is not announced last:\n{res.stderr}"


def test_output_env_and_absolute(runner, tmp_path):
    runner.copy_example()
    out = tmp_path / "elsewhere" / "abs"
    (tmp_path / "elsewhere").mkdir()
    res = runner.strata("--", "example.py", env={**TRIP, "STRATA_OUTPUT_PATH": out})
    assert res.returncode == 0, res.describe()
    assert (out / "trip_count.txt").is_file() and (out / "profile.json").is_file()
    assert not results_dirs(runner.dir)


def test_output_flag_beats_env(runner):
    runner.copy_example()
    res = runner.strata("-o", "flag_out", "--", "example.py",
                        env={**TRIP, "STRATA_OUTPUT_PATH": "env_out"})
    assert res.returncode == 0, res.describe()
    assert (runner.dir / "flag_out" / "trip_count.txt").is_file()
    assert not (runner.dir / "env_out").exists()


def test_default_folder_named_after_script(runner):
    runner.copy_example("myscript.py")
    res = runner.strata("--", "myscript.py", env=TRIP)
    assert res.returncode == 0, res.describe()
    results = find_results(runner.dir)
    assert results.parent.name.startswith("strata-myscript"), results


# ---------------------------------------------------------- components and precedence


def txt_files(runner, results=None):
    return sorted(p.stem for p in (results or find_results(runner.dir)).glob("*.txt"))


@pytest.mark.parametrize("config, home, config_env, env, flag, want", [
    (None, None, None, None, None, ["wall_clock"]),
    ("cpu_clock", None, None, None, None, ["cpu_clock"]),
    ("cpu_clock", None, None, "trip_count", None, ["trip_count"]),
    ("cpu_clock", None, None, "trip_count", "wall_clock,cpu_clock", ["cpu_clock", "wall_clock"]),
    (None, "trip_count", None, None, None, ["trip_count"]),
    (None, "cpu_clock", "trip_count", None, None, ["trip_count"]),
    ("wall_clock,trip_count", "cpu_clock", "cpu_clock", None, None, ["trip_count", "wall_clock"]),
    (None, None, None, "trip_count wall_clock", None, ["trip_count", "wall_clock"]),
    (None, None, None, "cpu_clock", "trip_count", ["trip_count"]),
], ids=["default", "config", "env-beats-config", "flag-beats-env", "home-config",
        "config-env-beats-home", "c-beats-config-env", "env-space-list", "flag-beats-env2"])
def test_components_precedence(runner, config, home, config_env, env, flag, want):
    runner.write("tiny.py", "def f():\n    pass\nf()\n")
    opts, extra = [], {"STRATA_PRINT_TABLES": "OFF"}
    if config:
        runner.write("my.cfg", f"STRATA_COMPONENTS = {config}\n")
        opts += ["-c", "my.cfg"]
    if home:
        (runner.home / ".strata.cfg").write_text(f"STRATA_COMPONENTS = {home}\n")
    if config_env:
        runner.write("env.cfg", f"STRATA_COMPONENTS = {config_env}\n")
        extra["STRATA_CONFIG_FILE"] = runner.dir / "env.cfg"
    if env:
        extra["STRATA_COMPONENTS"] = env
    if flag:
        opts += ["--components", flag]
    res = runner.strata(*opts, "--", "tiny.py", env=extra)
    assert res.returncode == 0 and res.stderr == "", res.describe()
    assert txt_files(runner) == want


def test_only_one_config_file_is_read(runner):
    """-c names the config file: ~/.strata.cfg is then not read at all."""
    runner.write("tiny.py", "def f():\n    pass\nf()\n")
    (runner.home / ".strata.cfg").write_text("STRATA_COMPONENTS = cpu_clock\n")
    runner.write("my.cfg", "STRATA_PRECISION = 3\n")
    res = runner.strata("--config", "my.cfg", "--", "tiny.py", env={"STRATA_PRINT_TABLES": "OFF"})
    assert res.returncode == 0, res.describe()
    assert txt_files(runner) == ["wall_clock"]


def test_config_file_seed_style(runner, golden):
    """-c FILE with `STRATA_COMPONENTS = trip_count` reproduces the seed's table."""
    runner.copy_example()
    runner.write("strata.cfg", "STRATA_PROFILE = ON\nSTRATA_COMPONENTS = trip_count\n")
    res = runner.strata("-c", "strata.cfg", "--", "./example.py")
    assert res.returncode == 0, res.describe()
    golden("example_trip_count.txt", (find_results(runner.dir) / "trip_count.txt").read_text())


def test_config_file_settings_other_than_components(runner):
    runner.copy_example()
    runner.write("strata.cfg", "STRATA_COMPONENTS = trip_count\nSTRATA_FUNCTION_RESTRICT = ^run$ ^inefficient$\n"
                 "STRATA_PRINT_TABLES = OFF\n")
    res = runner.strata("-c", "strata.cfg", "--", "example.py")
    assert res.returncode == 0 and res.stderr == "", res.describe()
    table = read_table(find_results(runner.dir), "trip_count")
    assert shape(table) == [(0, ("run",), 1), (0, ("run", "inefficient"), 1)]


def test_regex_list_precedence(runner):
    """The environment's list replaces the config file's."""
    runner.copy_example()
    runner.write("strata.cfg", "STRATA_FUNCTION_EXCLUDE = ^fib$ ^<.*>$\n")
    table = run_table(runner, "-c", "strata.cfg",
                      env={"STRATA_FUNCTION_EXCLUDE": "^inefficient$ ^<.*>$"}, script="example.py")
    assert "fib" in table.names() and "inefficient" not in table.names(), table.text


@pytest.mark.parametrize("value", ["OFF", "off", "false", "FALSE", "no", "No", "0"])
def test_print_tables_off_spellings(runner, value):
    runner.write("tiny.py", "def f():\n    pass\nf()\n")
    res = runner.strata("--", "tiny.py", env={"STRATA_PRINT_TABLES": value})
    assert res.returncode == 0 and res.stderr == "", res.describe()


@pytest.mark.parametrize("value", ["ON", "on", "True", "yes", "YES", "1"])
def test_print_tables_on_spellings(runner, value):
    runner.write("tiny.py", "def f():\n    pass\nf()\n")
    res = runner.strata("--", "tiny.py",
                        env={"STRATA_PRINT_TABLES": value, "STRATA_COMPONENTS": "trip_count"})
    assert res.returncode == 0 and "COUNTS NUMBER OF INVOCATIONS" in res.stderr, res.describe()


# -------------------------------------------------------------------------------- -s setup

SETUP = """
import builtins
import threading

SETUP_ONLY = "the setup's own namespace"
go = threading.Event()

def setup_leaf():
    pass

def setup_worker():
    go.wait()
    setup_leaf()

def setup_helper():
    setup_leaf()

setup_helper()  # runs before profiling: not recorded
builtins.SETUP_GO = go
threading.Thread(target=setup_worker, name="setup-thread").start()
print("setup ran")
"""
SETUP_MAIN = """
import threading

def main():
    print("SETUP_ONLY" in globals(), "setup_helper" in globals())
    SETUP_GO.set()
    for t in threading.enumerate():
        if t.name == "setup-thread":
            t.join()
    print("joined")

main()
"""


@pytest.mark.parametrize("how", ["-s", "--setup", "env"])
def test_setup_file(runner, how):
    runner.write("setup_code.py", SETUP)
    runner.write("main.py", SETUP_MAIN)
    if how == "env":
        res = runner.strata("--", "main.py", env={**TRIP, "STRATA_SETUP": "setup_code.py"})
    else:
        res = runner.strata(how, "setup_code.py", "--", "main.py", env=TRIP)
    assert res.returncode == 0, res.describe()
    assert res.stdout == "setup ran\nFalse False\njoined\n", res.describe()
    table = read_table(find_results(runner.dir), "trip_count")
    assert "setup_helper" not in table.names(), table.text
    leaf = table.named("setup_leaf")
    assert len(leaf) == 1 and leaf[0].count == 1 and leaf[0].thread != 0, table.text
    assert table.get("main").count == 1


# ------------------------------------------------------------------------ interpreter options

FLAGS_SCRIPT = """
import sys
import warnings

def work():
    return 3

print("optimize", sys.flags.optimize, "debug", __debug__, "dont_write_bytecode",
      sys.flags.dont_write_bytecode, "safe_path", sys.flags.safe_path)
print("xoptions", sorted(sys._xoptions.items()), "dev", sys.flags.dev_mode)
print("warnoptions", sys.warnoptions)
print("unbuffered", sys.stdout.write_through, sys.stderr.write_through)
print("path0 is the script's folder", sys.path[0] == __import__("os").getcwd())
try:
    warnings.warn("a user warning")
    print("warning not raised")
except UserWarning as e:
    print("warning raised:", e)
try:
    assert False, "assertions run"
except AssertionError as e:
    print(e)
print(work())
"""


@pytest.mark.parametrize("opts", [
    ["-u", "-O", "-X", "dev", "-W", "error::UserWarning"],
    ["-OO", "-B", "-Xfrozen_modules=off", "-Werror", "-X", "int_max_str_digits=700"],
    ["-uB", "-q", "-P"],
], ids=["separate", "attached", "bundled-safe-path"])
def test_interpreter_options(runner, opts):
    """`strata python -u -O -X dev -W error -- s.py` runs the script as
    `python -u -O -X dev -W error s.py` does, and profiles it (issue 9 item 17)."""
    runner.write("flags.py", FLAGS_SCRIPT)
    plain = runner.plain(*opts, "flags.py")
    assert plain.returncode == 0, plain.describe()
    out = runner.dir / "results"
    res = runner.strata(*opts, "--", "flags.py", env={**TRIP, "STRATA_OUTPUT_PATH": out})
    assert (res.returncode, res.stdout, res.stderr) == (0, plain.stdout, plain.stderr), \
        f"plain:\n{plain.describe()}\nstrata:\n{res.describe()}"
    assert read_table(out, "trip_count").get("work").count == 1


def test_interpreter_options_mixed_with_strata_options(runner):
    runner.write("flags.py", FLAGS_SCRIPT)
    plain = runner.plain("-O", "-W", "error::UserWarning", "flags.py")
    out = runner.dir / "results"
    res = runner.strata("-O", "-R", "^work$", "-W", "error::UserWarning", "-o", out, "--",
                        "flags.py", env=TRIP)
    assert (res.returncode, res.stdout) == (0, plain.stdout), res.describe()
    assert [r.name for r in read_table(out, "trip_count").rows] == ["work"]


# ------------------------------------------------------------------------ interpreter choice


def test_python_executable(runner, venv_python):
    """strata python runs the interpreter named by PYTHON_EXECUTABLE."""
    marker = runner.dir / "wrapper.ran"
    wrapper = runner.write("wrapper.sh", f"""\
        #!/bin/sh
        echo "$@" > {marker}
        exec {venv_python} "$@"
    """)
    os.chmod(wrapper, 0o755)
    runner.copy_example()
    res = runner.strata("--", "example.py",
                        env={"STRATA_COMPONENTS": "trip_count", "PYTHON_EXECUTABLE": wrapper})
    assert res.returncode == 0, res.describe()
    assert marker.exists(), "PYTHON_EXECUTABLE was not used"
    assert (find_results(runner.dir) / "trip_count.txt").read_text() == \
        golden_text("example_trip_count.txt")
