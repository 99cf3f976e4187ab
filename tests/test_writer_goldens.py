"""A golden file per writer, from one fixture model (the safety net of the engine's
restructuring, issue 10).

tests/c/fixture_model.c builds a small profile by hand with exact times (two named
threads of MPI rank 3, recursion, a C function, two functions with the same
qualified name, a label that needs escaping, three components, process sampling and
a timeline); tests/c/golden_writers renders it in every format, through the calls
the session and `strata report` make, and these tests compare each file with
tests/golden/writers/<file>. What is not text is compared as text: the pstats file
as a sorted dump of its dict, the Perfetto trace decoded by `protoc` against
perfetto_trace.proto (../shared/formats), and the HTML report with its built-in
script and style (checked to be src/output/html/report.{js,css} verbatim) left out.

`pytest --regen-golden` rewrites them all; review every change by eye.

The driver is built by CMake in build/ctest (`make test-c` makes it; the sanitizer
leg uses build/asan-ctest), here if it is missing. Every format is also rendered from
the fixture's profile.json by `strata report`, which must give the same files.
"""

from __future__ import annotations

import json
import marshal
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import GOLDEN, REPO, SANITIZED, TIMEOUT, clean_env, run_cmd

WRITERS = GOLDEN / "writers"
SHARED = REPO.parent / "shared"
PROTO = SHARED / "formats" / "perfetto_trace.proto"
HTML_ASSETS = REPO / "src" / "output" / "html"

# The files the driver writes (rank 3: the rank is in the names a results folder
# gives them) and the golden each is compared with.
TEXT_FILES = [
    "wall_clock-3.txt",
    "cpu_clock-3.txt",
    "trip_count-3.txt",
    "process_sampling-3.txt",
    "gpu_kernels-3.txt",
    "gpu_memcpy-3.txt",
    "profile-3.json",
    "profile-3.folded",
    "profile-3.speedscope.json",
    "callgrind.out-3",
    "callgraph-3.dot",
    "trace-3.json",
    "line_profile-3.txt",
    "memory_profile-3.txt",
    "mprofile-3.dat",
    "memplot-3.svg",
    "merged/wall_clock.txt",
    "merged/cpu_clock.txt",
    "merged/trip_count.txt",
    "merged/load_balance.txt",
    "merged/profile.json",
    "merged/line_profile.txt",
    "merged/memory_profile.txt",
    "merged/mprofile.dat",
    "merged/memplot.svg",
    "merged/gpu_kernels.txt",
    "merged/gpu_memcpy.txt",
]
DECODED = {  # file -> its golden, a text form of it
    "profile-3.prof": "profile-3.prof.txt",
    "report-3.html": "report-3.html",
    "trace-3.pftrace": "trace-3.pftrace.txt",
    "profile-3.lprof": "profile-3.lprof.txt",
    "merged/profile.lprof": "merged/profile.lprof.txt",
}
# What `strata report` renders from profile-3.json (the timeline and the sampling
# table are written only at the end of a run).
REPORT_FORMATS = ("text,json,pstats,dot,folded,speedscope,callgrind,html,lines,lprof,memory,"
                  "mprof,memplot")
REPORT_FILES = [
    "wall_clock-3.txt", "cpu_clock-3.txt", "trip_count-3.txt", "profile-3.json",
    "profile-3.prof", "callgraph-3.dot", "profile-3.folded", "profile-3.speedscope.json",
    "callgrind.out-3", "report-3.html", "line_profile-3.txt", "profile-3.lprof",
    "memory_profile-3.txt", "mprofile-3.dat", "memplot-3.svg", "gpu_kernels-3.txt",
    "gpu_memcpy-3.txt",
]


# --------------------------------------------------------------------------- the driver


def _build_dir() -> Path:
    """build/asan-ctest under the sanitizer leg when `make test-asan` made it, else
    build/ctest."""
    if SANITIZED and (REPO / "build" / "asan-ctest" / "CMakeCache.txt").exists():
        return REPO / "build" / "asan-ctest"
    return REPO / "build" / "ctest"


@pytest.fixture(scope="session")
def driver() -> Path:
    """tests/c/golden_writers, brought up to date (configured first if need be)."""
    build = _build_dir()
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed: the writer goldens' driver cannot be built")
    steps = []
    if not (build / "CMakeCache.txt").exists():
        steps.append(["cmake", "-S", REPO, "-B", build, "-DCMAKE_BUILD_TYPE=Debug"])
    steps.append(["cmake", "--build", build, "-j2", "--target", "golden_writers"])
    for step in steps:
        p = subprocess.run([str(a) for a in step], cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=900)
        assert p.returncode == 0, (f"building the driver failed: {step}\n"
                                   f"{p.stdout.decode(errors='replace')[-4000:]}")
    return build / "golden_writers"


@pytest.fixture(scope="session")
def written(driver, tmp_path_factory) -> Path:
    """The folder the driver wrote every format into."""
    out = tmp_path_factory.mktemp("writers") / "out"
    home = out.parent / "home"
    home.mkdir()
    res = run_cmd([driver, out], out.parent, clean_env(home))
    assert res.returncode == 0 and res.stderr == "", res.describe()
    return out


# --------------------------------------------------------------------------- text forms


def pstats_text(path: Path) -> str:
    """cProfile's dict, one function a line (sorted), its callers indented below."""
    stats = marshal.loads(path.read_bytes())
    lines = []
    for key in sorted(stats):
        cc, nc, tt, ct, callers = stats[key]
        lines.append(f"{key!r}: cc={cc} nc={nc} tt={tt!r} ct={ct!r}")
        for caller in sorted(callers):
            lines.append(f"    <- {caller!r}: {callers[caller]!r}")
    return "\n".join(lines) + "\n"


def perfetto_text(path: Path) -> str:
    if shutil.which("protoc") is None:
        pytest.skip("protoc is not installed (apt-get install protobuf-compiler): the "
                    "Perfetto trace cannot be decoded")
    if not PROTO.is_file():
        pytest.skip(f"{PROTO} is missing (the shared/ folder beside the checkout)")
    p = subprocess.run(["protoc", f"-I{PROTO.parent}", "--decode=perfetto.protos.Trace",
                        str(PROTO)], input=path.read_bytes(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout.decode("utf-8", "surrogateescape")


def html_text(path: Path) -> str:
    """The report without its built-in style and script, which must be
    src/output/html/report.css and report.js exactly (once each)."""
    text = path.read_bytes().decode("utf-8", "surrogateescape")
    for name, before, after in (("report.css", "<style>\n", "</style>\n"),
                                ("report.js", "<script>\n", "</script>\n</body>")):
        asset = (HTML_ASSETS / name).read_text()
        whole = before + asset + after
        assert text.count(whole) == 1, f"{name} is not built into the report verbatim"
        text = text.replace(whole, f"{before}[src/output/html/{name}]\n{after}")
    return text


def lprof_text(path: Path) -> str:
    """The pickle's opcodes (pickletools), which need no line_profiler to read."""
    import io
    import pickletools
    out = io.StringIO()
    pickletools.dis(path.read_bytes(), out)
    return out.getvalue()


def as_text(path: Path, name: str) -> str:
    if name.endswith(".lprof"):
        return lprof_text(path)
    if name.endswith(".prof"):
        return pstats_text(path)
    if name.endswith(".pftrace"):
        return perfetto_text(path)
    if name.endswith(".html"):
        return html_text(path)
    return path.read_bytes().decode("utf-8", "surrogateescape")


def golden_name(name: str) -> str:
    return "writers/" + DECODED.get(name, name)


# --------------------------------------------------------------------------- the goldens


def test_driver_writes_every_file(written):
    """Exactly the files listed here: a new format (or file) gets its golden too."""
    got = sorted(str(p.relative_to(written)) for p in written.rglob("*") if p.is_file())
    assert got == sorted(TEXT_FILES + list(DECODED)), got


def test_no_stale_goldens():
    """Every file of tests/golden/writers is some writer's golden."""
    if not WRITERS.is_dir():
        pytest.skip("no goldens yet: run `pytest --regen-golden`")
    want = {golden_name(n)[len("writers/"):] for n in TEXT_FILES + list(DECODED)}
    have = {str(p.relative_to(WRITERS)) for p in WRITERS.rglob("*") if p.is_file()}
    assert have <= want, f"golden files no writer makes: {sorted(have - want)}"


@pytest.mark.parametrize("name", TEXT_FILES + list(DECODED))
def test_writer_golden(written, golden, name):
    golden(golden_name(name), as_text(written / name, name))


# --------------------------------------------------------------------------- reader round trip


@pytest.fixture(scope="session")
def reported(written, strata_bin, tmp_path_factory) -> Path:
    """Every format rendered by `strata report` from the driver's profile-3.json."""
    out = tmp_path_factory.mktemp("report") / "out"
    home = out.parent / "home"
    home.mkdir()
    res = run_cmd([strata_bin, "report", "--format", REPORT_FORMATS, "-o", out,
                   written / "profile-3.json"], out.parent, clean_env(home))
    assert res.returncode == 0, res.describe()
    got = sorted(p.name for p in out.iterdir())
    assert got == sorted(REPORT_FILES), got
    return out


@pytest.mark.parametrize("name", REPORT_FILES)
def test_report_from_profile_json_matches(written, reported, name):
    """The reader rebuilds the model the writers were given: `strata report` of
    profile-3.json writes what the driver wrote, profile.json whole (the sections only a
    run writes, trace and process_sampling, included)."""
    assert as_text(reported / name, name) == as_text(written / name, name)


def test_merge_keeps_run_sections(written):
    """A merge keeps the sections only a run writes: the timelines' counts added up (only
    rank 3 of the fixture's two has one), the sampled metrics' summaries combined (the
    same samples in both)."""
    one = json.loads((written / "profile-3.json").read_text())
    merged = json.loads((written / "merged" / "profile.json").read_text())
    assert merged["trace"] == one["trace"]
    ps1, ps2 = one["process_sampling"], merged["process_sampling"]
    assert ps2["samples"] == 2 * ps1["samples"] and ps2["gpu_note"] == ps1["gpu_note"]
    assert ps2["metrics"] == ps1["metrics"]


def test_merged_report_round_trip(written, strata_bin, tmp_path):
    """The merged result's profile.json renders the same tables (the ranks summed and
    the load-balance table) and the same profile.json again."""
    out = tmp_path / "out"
    res = run_cmd([strata_bin, "report", "--format", "text,json", "-o", out,
                   written / "merged" / "profile.json"], tmp_path, clean_env(tmp_path))
    assert res.returncode == 0, res.describe()
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(Path(n).name for n in TEXT_FILES + list(DECODED)
                           if n.startswith("merged/")), names
    for n in names:
        assert (out / n).read_bytes() == (written / "merged" / n).read_bytes(), n


def test_lines_text_is_line_profilers(written, monkeypatch):
    """line_profile-3.txt is line_profiler's show_text of profile-3.lprof, byte for byte,
    with the fixture's edge cases: hits and times too wide for their columns (%g, %5.3g),
    a function whose file was gone ("Could not find file"), and the fixture's source
    blocks given to line_profiler in place of files this machine does not have."""
    try:
        import line_profiler.line_profiler as lp
    except ImportError:
        pytest.skip("line_profiler is not installed in the test venv (pip install line_profiler)")
    import io
    import pickle
    profile = json.loads((written / "profile-3.json").read_text())
    blocks = {f["file"]: [line + "\n" for line in f["source"]]
              for f in profile["line_timings"] if f["source"] is not None}
    real_exists = os.path.exists
    monkeypatch.setattr(lp.os.path, "exists", lambda p: p in blocks or real_exists(p))
    monkeypatch.setattr(lp, "get_code_block", lambda f, lineno: blocks[f])
    monkeypatch.setattr(lp.linecache, "clearcache", lambda: None)
    for name in ("line_profile-3.txt", "merged/line_profile.txt"):
        lprof = written / name.replace("line_profile", "profile").replace(".txt", ".lprof")
        stats = pickle.loads(lprof.read_bytes())
        out = io.StringIO()
        lp.show_text(stats.timings, stats.unit, output_unit=1e-6, stream=out, config=False)
        assert (written / name).read_text() == out.getvalue(), name
