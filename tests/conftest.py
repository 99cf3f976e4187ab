"""Shared helpers for strata's end-to-end tests.

Every test runs the real command (``strata python ...``, ``python -m strata ...`` or a
plain ``python`` that does ``import strata``) in a subprocess, in its own temporary
folder, with an environment cleaned of the caller's ``STRATA_*`` settings and a
``HOME`` of its own (so no ``~/.strata.cfg`` leaks in).

The commands come from the virtual environment the build installs into: the one pytest
runs from when it holds a ``strata`` command (``make test-asan`` runs the suite from
``.venv-asan``), else ``.venv`` at the top of the repository, else ``$STRATA_TEST_VENV``
when set. Without a built ``strata`` every test skips, saying why.

Golden files live in ``tests/golden/``. Those taken from the seed document are fixed
(``SEED_GOLDENS``); the others were produced by strata and reviewed by hand, and
``pytest --regen-golden`` rewrites them (never the seed ones).
"""

from __future__ import annotations

import difflib
import glob
import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
GOLDEN = TESTS / "golden"
EXAMPLES = REPO / "examples"
EXAMPLE_PY = EXAMPLES / "example.py"

# Golden files copied from the seed text (../shared/seeds/000_*.txt): fixed forever.
SEED_GOLDENS = frozenset(
    {
        "example_trip_count.txt",  # strata python ./example.py, trip_count
        "example_builtin_trip_count.txt",  # @profile on inefficient, -b
        "config_args_trip_count.txt",  # strata.profiler.config, with profile(): run(5)
    }
)

SANITIZED = bool(os.environ.get("STRATA_TEST_SANITIZED"))
# Subprocess time limit: generous, the sanitized build is several times slower.
TIMEOUT = 120 if SANITIZED else 45

TIMING_COLUMNS = [
    "LABEL", "COUNT", "DEPTH", "METRIC", "UNITS", "SUM", "MEAN",
    "MIN", "MAX", "VAR", "STDDEV", "% SELF",
]
TITLES = {
    "trip_count": "COUNTS NUMBER OF INVOCATIONS",
    "wall_clock": "REAL-CLOCK TIMER (I.E. WALL-CLOCK TIMER)",
    "cpu_clock": "CPU-CLOCK TIMER FOR THE CALLING THREAD",
}


def pytest_addoption(parser):
    parser.addoption(
        "--regen-golden",
        action="store_true",
        default=False,
        help="rewrite the golden files that strata produced (never the seed's)",
    )


# --------------------------------------------------------------------------- locating


def _venv_dir() -> Path:
    explicit = os.environ.get("STRATA_TEST_VENV")
    if explicit:
        return Path(explicit)
    here = Path(sys.prefix)
    if (here / "bin" / "strata").exists():
        return here
    return REPO / ".venv"


VENV = _venv_dir()
STRATA = VENV / "bin" / "strata"
PYTHON = VENV / "bin" / "python"


def have_strata() -> bool:
    return STRATA.exists() and PYTHON.exists()


@pytest.fixture(scope="session")
def strata_bin() -> Path:
    if not have_strata():
        pytest.skip(f"strata is not built: {STRATA} is missing (run `make build`)")
    return STRATA


@pytest.fixture(scope="session")
def venv_python(strata_bin) -> Path:
    return PYTHON


def c_compiler() -> str:
    """The C compiler that builds the native test programs, or a skip saying why."""
    import shutil
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (Debian build-essential) to build the test programs")
    return cc


# --------------------------------------------------------------------------- running


@dataclass
class Result:
    args: list
    returncode: int
    stdout: str
    stderr: str
    cwd: Path

    def describe(self) -> str:
        return (
            f"command: {self.args}\ncwd: {self.cwd}\nexit status: {self.returncode}\n"
            f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
        )


def clean_env(home: Path, **extra) -> dict:
    """The caller's environment without STRATA_* settings (test switches kept) and
    without Python variables that change how a script runs; HOME is `home`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("STRATA_") and not k.startswith("STRATA_TEST_"))
        and k not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT",
                      "PYTHONSAFEPATH", "PYTHONWARNINGS", "PYTHON_EXECUTABLE",
                      "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTHONBREAKPOINT")
    }
    env["HOME"] = str(home)
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["LC_ALL"] = "C.UTF-8"
    env["PYTHONIOENCODING"] = "utf-8"
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def run_cmd(args, cwd, env, input=None, timeout=TIMEOUT) -> Result:
    args = [str(a) for a in args]
    try:
        p = subprocess.run(
            args,
            cwd=str(cwd),
            env=env,
            input=input.encode() if isinstance(input, str) else input,
            stdin=None if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        err = (e.stderr or b"").decode("utf-8", "replace")
        pytest.fail(f"timed out after {timeout}s: {args} in {cwd}\n--- stdout ---\n"
                    f"{out[-3000:]}\n--- stderr ---\n{err[-3000:]}")
    return Result(
        args,
        p.returncode,
        p.stdout.decode("utf-8", "surrogateescape"),
        p.stderr.decode("utf-8", "surrogateescape"),
        Path(cwd),
    )


class Runner:
    """Runs the three front ends in one test's folder.

    `strata(...)` is ``strata python ARGS``, `module(...)` is ``python -m strata ARGS``,
    `plain(...)` is ``python ARGS``. `env` entries add to (or, when None, remove from) the
    clean environment; `cwd` defaults to the test's folder."""

    def __init__(self, tmp_path: Path):
        self.dir = tmp_path
        self.home = tmp_path / "_home"
        self.home.mkdir(exist_ok=True)

    def env(self, env=None) -> dict:
        return clean_env(self.home, **(env or {}))

    def run(self, args, env=None, cwd=None, input=None, timeout=TIMEOUT) -> Result:
        return run_cmd(args, cwd or self.dir, self.env(env), input=input, timeout=timeout)

    def strata(self, *args, **kw) -> Result:
        return self.run([STRATA, "python", *args], **kw)

    def module(self, *args, **kw) -> Result:
        return self.run([PYTHON, "-m", "strata", *args], **kw)

    def plain(self, *args, **kw) -> Result:
        return self.run([PYTHON, *args], **kw)

    def front(self, form: str):
        """The front end named `form`: "strata" or "module"."""
        return {"strata": self.strata, "module": self.module}[form]

    def write(self, name: str, text: str) -> Path:
        """Write `text` (dedented) to `name` under the test's folder."""
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    def copy_example(self, name="example.py") -> Path:
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(EXAMPLE_PY.read_text())
        return path

    def results(self, cwd=None) -> Path:
        return find_results(cwd or self.dir)


@pytest.fixture
def runner(strata_bin, tmp_path) -> Runner:
    return Runner(tmp_path)


# --------------------------------------------------------------------------- results


def results_dirs(cwd: Path) -> list[Path]:
    return sorted(Path(p) for p in glob.glob(str(Path(cwd) / "strata-*-output" / "*"))
                  if Path(p).is_dir())


def find_results(cwd: Path) -> Path:
    """The one results folder strata made under `cwd` (strata-<script>-output/<time>/)."""
    found = results_dirs(cwd)
    assert len(found) == 1, f"expected one results folder under {cwd}, found {found}: " \
        f"{sorted(os.listdir(cwd))}"
    name = found[0].name
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d\.\d\d\.\d\d", name), \
        f"results folder {name!r} is not named <YYYY-MM-DD_HH.MM.SS>"
    return found[0]


def load_json(path: Path):
    """Parse a JSON file that may nest deeply (a 5,000-deep recursion)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 100_000))
    try:
        return json.loads(Path(path).read_text())
    finally:
        sys.setrecursionlimit(old)


def load_profile(results: Path) -> dict:
    path = Path(results) / "profile.json"
    assert path.is_file(), f"no profile.json in {results}: {sorted(os.listdir(results))}"
    data = load_json(path)
    assert isinstance(data, dict), "profile.json is not a JSON object"
    assert "format_version" in data, f"profile.json has no format_version: {list(data)}"
    return data


def count_nodes(profile: dict) -> int:
    """Number of call-tree nodes in a profile.json, every thread's (docs/formats.md)."""
    threads = profile.get("threads")
    assert isinstance(threads, list) and threads, f"no threads in profile.json: {list(profile)}"
    return sum(len(t["nodes"]) for t in threads)


# --------------------------------------------------------------------------- tables

_PREFIX = re.compile(r"^\|(\d+)>>> ")
# Indentation stops growing after this many levels, after BIG_INDENT in a table of
# more than BIG_ROWS nodes (docs/formats.md).
MAX_INDENT = 100
BIG_INDENT = 16
BIG_ROWS = 1000


@dataclass
class Row:
    label: str  # the whole label cell, stripped: "|0>>>   |_fib"
    thread: int
    name: str  # the label without thread prefix, indentation and "|_": "fib"
    indent: int  # columns of indentation after the prefix (2 per level)
    cells: dict  # column title -> stripped cell text
    level: int = 0  # nesting level the indentation says (0 for a root)
    parent: "Row | None" = None
    children: list = field(default_factory=list)

    @property
    def count(self) -> int:
        return int(self.cells["COUNT"])

    @property
    def depth(self) -> int:
        return int(self.cells["DEPTH"])

    def num(self, col: str) -> float:
        return float(self.cells[col])

    @property
    def path(self) -> tuple:
        names = []
        r = self
        while r is not None:
            names.append(r.name)
            r = r.parent
        return tuple(reversed(names))

    def __repr__(self):
        return f"Row({self.label!r}, count={self.cells.get('COUNT')}, depth={self.cells.get('DEPTH')})"


@dataclass
class Table:
    text: str
    title: str
    columns: list
    rows: list

    def paths(self) -> dict:
        """{(thread, (name, ..., name)): row} for every row. Two functions that share a
        label (two modules' `work()`, re.compile and re._compiler.compile) are two rows
        with the same path: the first one is kept."""
        out = {}
        for r in self.rows:
            out.setdefault((r.thread, r.path), r)
        return out

    def get(self, *path, thread=0) -> Row | None:
        return self.paths().get((thread, tuple(path)))

    def named(self, name) -> list:
        return [r for r in self.rows if r.name == name]

    def names(self) -> set:
        return {r.name for r in self.rows}

    def roots(self, thread=None) -> list:
        return [r for r in self.rows if r.parent is None and (thread is None or r.thread == thread)]

    def threads(self) -> list:
        return sorted({r.thread for r in self.rows})


def _split_cells(line: str, bounds: list) -> list:
    return [line[a + 1:b].strip() for a, b in zip(bounds, bounds[1:])]


def parse_table(text: str) -> Table:
    """Parse one timemory-style table (the whole text of a <component>.txt).

    Checks the frame: every line is as wide as the first, borders are where the
    header separator puts them, and each row's depth agrees with its indentation."""
    lines = text.split("\n")
    assert lines[-1] == "", "table text does not end with a newline"
    lines = lines[:-1]
    assert len(lines) >= 6, f"too few lines for a table:\n{text}"
    width = len(lines[0])
    for i, ln in enumerate(lines):
        assert len(ln) == width, f"line {i + 1} is {len(ln)} wide, not {width}:\n{text}"
    rule = "|" + "-" * (width - 2) + "|"
    assert lines[0] == rule and lines[2] == rule and lines[-1] == rule, f"bad frame:\n{text}"
    title = lines[1][1:-1].strip()
    sep = lines[4]
    assert re.fullmatch(r"\|(-+\|)+", sep), f"bad header separator {sep!r}"
    bounds = [i for i, c in enumerate(sep) if c == "|"]
    columns = _split_cells(lines[3], bounds)
    assert columns[0] == "LABEL", columns
    rows = []
    stack: list[Row] = []
    # where indentation stopped growing in this table: its deepest indentation
    cap = max((len(r) - len(r.lstrip(" ")) for r in
               (ln[bounds[0] + 2:bounds[1] - 1].rstrip() for ln in lines[5:-1])
               for r in [r[_PREFIX.match(r).end():] if _PREFIX.match(r) else r]), default=0) // 2 + 1
    for ln in lines[5:-1]:
        for b in bounds:
            assert ln[b] == "|", f"row {ln!r} has no border at column {b}"
        cells = dict(zip(columns, _split_cells(ln, bounds)))
        # the label cell is " <label><pad> "; keep its leading part exactly
        raw = ln[bounds[0] + 2:bounds[1] - 1].rstrip()
        m = _PREFIX.match(raw)
        assert m, f"label {raw!r} has no |N>>> thread prefix"
        rest = raw[m.end():]
        body = rest.lstrip(" ")
        indent = len(rest) - len(body)
        if body.startswith("|_"):
            name = body[2:]
            assert indent % 2 == 0, f"odd indentation in {raw!r}"
            level = indent // 2 + 1
            assert level <= MAX_INDENT + 1, f"indented past the cap: {raw!r}"
            if level == cap and cap in (MAX_INDENT + 1, BIG_INDENT + 1) and "DEPTH" in cells:
                level = int(cells["DEPTH"])  # indentation stops growing; DEPTH goes on
        else:
            assert indent == 0, f"indented label without |_ : {raw!r}"
            name = body
            level = 0
        row = Row(raw, int(m.group(1)), name, indent, cells, level)
        if "DEPTH" in cells:
            assert row.depth == level, f"DEPTH {row.depth} but indentation says {level}: {raw!r}"
        while stack and (stack[-1].thread != row.thread or stack[-1].level >= level):
            stack.pop()
        if level > 0:
            assert stack and stack[-1].level == level - 1, f"row {raw!r} has no parent row"
            row.parent = stack[-1]
            row.parent.children.append(row)
        stack.append(row)
        rows.append(row)
    return Table(text, title, columns, rows)


def read_table(results: Path, component: str) -> Table:
    path = Path(results) / f"{component}.txt"
    assert path.is_file(), f"no {component}.txt in {results}: {sorted(os.listdir(results))}"
    table = parse_table(path.read_text())
    assert table.title == TITLES[component], table.title
    return table


def tables_in(text: str) -> list:
    """Every table printed in `text` (standard error), as text, in order."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        ln = lines[i]
        if re.fullmatch(r"\|-+\|", ln) and i + 2 < len(lines) and lines[i + 2] == ln:
            j = i + 3  # header, then the |---|---| separator, rows, closing rule
            while j < len(lines) and lines[j] != ln:
                j += 1
            out.append("\n".join(lines[i:j + 1]) + "\n")
            i = j + 1
        else:
            i += 1
    return out


# --------------------------------------------------------------------------- goldens


@pytest.fixture
def golden(request):
    """golden(name, actual): compare `actual` with tests/golden/<name> byte for byte."""
    regen = request.config.getoption("--regen-golden")

    def check(name: str, actual: str):
        path = GOLDEN / name
        if name not in SEED_GOLDENS and (regen or not path.exists()):
            if not regen:
                pytest.fail(f"golden file {path} is missing: review the output below, "
                            f"then create it with `pytest --regen-golden`\n{actual}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(actual.encode("utf-8", "surrogateescape"))
            return
        # bytes, decoded as UTF-8: no newline translation, whatever the locale
        expected = path.read_bytes().decode("utf-8", "surrogateescape")
        if actual != expected and max(len(actual), len(expected)) > 4000:
            diff = "".join(difflib.unified_diff(
                expected.splitlines(True), actual.splitlines(True), "expected", "actual"))
            pytest.fail(f"output differs from golden file {path} (`pytest --regen-golden` "
                        f"rewrites it once the change is reviewed)\n{diff[:20000]}")
        assert actual == expected, (
            f"output differs from golden file {path}\n--- expected ---\n{expected}"
            f"--- actual ---\n{actual}"
        )

    return check


def golden_text(name: str) -> str:
    return (GOLDEN / name).read_text()
