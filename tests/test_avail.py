"""`strata avail`, config files and the settings registry (docs/settings.md)."""

from __future__ import annotations

import itertools
import json

import pytest

from conftest import REPO, STRATA, find_results, run_cmd


def avail(runner, *args, env=None):
    return runner.run([STRATA, "avail", *args], env=env)


def avail_json(runner, *args, env=None) -> dict:
    r = avail(runner, "--json", *args, env=env)
    assert r.returncode == 0, r.describe()
    return json.loads(r.stdout)


def by_env(data) -> dict:
    return {s["env"]: s for s in data["settings"]}


def test_every_setting_is_described(runner):
    data = avail_json(runner)
    assert len(data["settings"]) >= 20
    for s in data["settings"]:
        assert s["description"].strip(), s
        assert s["category"].strip(), s
        assert s["env"] == "STRATA_" + s["name"].upper(), s
        assert s["type"] in ("bool", "int", "string", "list", "regex list", "choice", "size",
                             "number"), s
        if s["type"] == "choice":
            assert s["choices"], s
    names = {s["env"] for s in data["settings"]}
    # Every flag of `strata python` is a setting.
    for env in ("STRATA_BUILTIN", "STRATA_CONFIG_FILE", "STRATA_SETUP", "STRATA_FULL_FILEPATH",
                "STRATA_LABEL", "STRATA_FUNCTION_INCLUDE", "STRATA_MODULE_RESTRICT",
                "STRATA_TRACE_C", "STRATA_OUTPUT_PATH", "STRATA_COMPONENTS", "STRATA_VERBOSE"):
        assert env in names


def test_table_shows_value_and_source(runner):
    r = avail(runner, env={"STRATA_PRECISION": "3"})
    assert r.returncode == 0, r.describe()
    lines = {line.split("|")[1].strip(): line for line in r.stdout.splitlines()
             if line.startswith("| STRATA_")}
    assert "| 3 " in lines["STRATA_PRECISION"] and "environment" in lines["STRATA_PRECISION"]
    assert "default" in lines["STRATA_PROFILE"]
    assert "DESCRIPTION" not in r.stdout
    r = avail(runner, "--all")
    assert "DESCRIPTION" in r.stdout and "CHOICES" in r.stdout
    assert "trip_count,wall_clock,cpu_clock" in r.stdout


def test_category_filter(runner):
    data = avail_json(runner, "-c", "filters")
    assert data["settings"] and all(s["category"] == "filters" for s in data["settings"])
    r = avail(runner, "-c", "output")
    assert "STRATA_PRECISION" in r.stdout and "STRATA_BUILTIN" not in r.stdout
    r = avail(runner, "-c", "nope")
    assert r.returncode == 2 and r.stderr.startswith("strata: error: unknown category 'nope'")
    assert r.stderr.count("\n") == 1 and r.stdout == ""


def test_components(runner):
    r = avail(runner, "--components")
    assert r.returncode == 0, r.describe()
    for name in ("trip_count", "wall_clock", "cpu_clock"):
        assert name in r.stdout
    comps = {c["name"]: c for c in avail_json(runner, "--components")["components"]}
    assert comps["wall_clock"]["units"] == "sec" and comps["cpu_clock"]["units"] == "sec"
    assert comps["trip_count"]["title"] == "COUNTS NUMBER OF INVOCATIONS"


@pytest.mark.parametrize("all_", [False, True], ids=["plain", "all"])
def test_generate_loads_back_unchanged(runner, all_):
    env = {"STRATA_PRECISION": "3", "STRATA_COMPONENTS": "trip_count,cpu_clock",
           "STRATA_FUNCTION_EXCLUDE": r"^<.*>$ ^a{1,2}b$", "STRATA_LABEL": "args line",
           "STRATA_TRACE_C": "yes", "STRATA_OUTPUT_PATH": "some dir/out"}
    before = by_env(avail_json(runner, env=env))
    cfg = runner.dir / "strata.cfg"
    r = avail(runner, "-G", cfg, *(["--all"] if all_ else []), env=env)
    assert r.returncode == 0, r.describe()
    text = cfg.read_text()
    assert "STRATA_PRECISION = 3\n" in text
    assert ("# STRATA_COMPONENTS: " in text) == all_
    after = by_env(avail_json(runner, env={"STRATA_CONFIG_FILE": cfg}))
    for name, s in before.items():
        if name == "STRATA_CONFIG_FILE":
            continue
        assert after[name]["value"] == s["value"], name
        assert after[name]["source"] == "file", name
    # Generating again from the loaded file gives the same file.
    cfg2 = runner.dir / "again.cfg"
    avail(runner, "-G", cfg2, *(["--all"] if all_ else []), env={"STRATA_CONFIG_FILE": cfg})
    assert cfg2.read_text() == text


def test_generate_to_unwritable_place(runner):
    r = avail(runner, "-G", runner.dir / "no" / "such" / "dir" / "x.cfg")
    assert r.returncode == 2 and r.stderr.startswith("strata: error: cannot write")
    assert r.stderr.count("\n") == 1


def test_home_config_file(runner):
    (runner.home / ".strata.cfg").write_text("STRATA_PRECISION = 2\n")
    s = by_env(avail_json(runner))
    assert s["STRATA_PRECISION"]["value"] == "2" and s["STRATA_PRECISION"]["source"] == "file"
    # STRATA_CONFIG_FILE wins over ~/.strata.cfg
    other = runner.write("other.cfg", "STRATA_PRECISION = 4\n")
    s = by_env(avail_json(runner, env={"STRATA_CONFIG_FILE": other}))
    assert s["STRATA_PRECISION"]["value"] == "4"


# The precedence matrix: default < file < environment < flag, for a setting that has all
# four (components: --components), checked by what a real run measures.
SCRIPT = "def f():\n    return 1\nf()\n"
LEVELS = {"file": "trip_count", "env": "cpu_clock", "flag": "trip_count,cpu_clock"}


@pytest.mark.parametrize(
    "present",
    [c for n in range(4) for c in itertools.combinations(("file", "env", "flag"), n)],
    ids=lambda c: "+".join(c) or "default",
)
def test_precedence_matrix(runner, present):
    runner.write("s.py", SCRIPT)
    env, args = {"STRATA_PRINT_TABLES": "OFF"}, []
    if "file" in present:
        cfg = runner.write("c.cfg", f"STRATA_COMPONENTS = {LEVELS['file']}\n")
        env["STRATA_CONFIG_FILE"] = cfg
    if "env" in present:
        env["STRATA_COMPONENTS"] = LEVELS["env"]
    if "flag" in present:
        args = ["--components", LEVELS["flag"]]
    r = runner.strata(*args, "--", "s.py", env=env)
    assert r.returncode == 0, r.describe()
    winner = present[-1] if present else None
    want = set((LEVELS[winner] if winner else "wall_clock").split(","))
    results = find_results(runner.dir)
    got = {p.stem for p in results.glob("*.txt")}
    assert got == want, (present, got)
    settings = json.loads((results / "profile.json").read_text())["settings"]
    source = {"file": "file", "env": "environment", "flag": "flag", None: "default"}[winner]
    assert settings["components"]["source"] == source


BAD = [
    ("STRATA_PROFILE", "maybe", "ON/OFF"),
    ("STRATA_PRECISION", "many", "whole number"),
    ("STRATA_COMPONENTS", "bogus", "trip_count,wall_clock,cpu_clock"),
    ("STRATA_CLOCK", "sundial", "auto,tsc,monotonic"),
    ("STRATA_FUNCTION_EXCLUDE", "(", "bad regex"),
]


@pytest.mark.parametrize("where", ["file", "env"])
@pytest.mark.parametrize("name, value, accepted", BAD, ids=[b[0] for b in BAD])
def test_bad_value_names_setting_value_and_choices(runner, where, name, value, accepted):
    marker = runner.dir / "ran"
    runner.write("s.py", f"open({str(marker)!r}, 'w').close()\n")
    env = {}
    if where == "file":
        env["STRATA_CONFIG_FILE"] = runner.write("c.cfg", f"# settings\n{name} = {value}\n")
    else:
        env[name] = value
    for cmd in ([STRATA, "python", "--", "s.py"], [STRATA, "avail"]):
        r = runner.run(cmd, env=env)
        assert r.returncode == 2, r.describe()
        assert r.stderr.startswith("strata: error: ") and r.stderr.count("\n") == 1, r.stderr
        assert name in r.stderr and value in r.stderr and accepted in r.stderr, r.stderr
        if where == "file":
            assert "c.cfg:2" in r.stderr, r.stderr
    assert not marker.exists()


def test_bad_flag_value(runner):
    runner.write("s.py", "print('ran')\n")
    r = runner.strata("-v", "loud", "--", "s.py")
    assert r.returncode == 2 and "STRATA_VERBOSE" in r.stderr and "loud" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("word", ["ON", "on", "True", "YES", "1", "off", "FALSE", "No", "0"])
def test_boolean_spellings(runner, word):
    s = by_env(avail_json(runner, env={"STRATA_TRACE_C": word}))
    assert s["STRATA_TRACE_C"]["value"] == ("ON" if word.lower() in ("on", "true", "yes", "1")
                                            else "OFF")


def test_number_suffixes_and_sizes(runner):
    s = by_env(avail_json(runner, env={"STRATA_MAX_NODES": "250k"}))
    assert s["STRATA_MAX_NODES"]["value"] == "250000"
    for text, want in (("64MB", 64_000_000), ("64MiB", 64 << 20), ("2 GiB", 2 << 30),
                       ("1048576", 1 << 20), ("1.5M", 3 << 19)):
        s = by_env(avail_json(runner, env={"STRATA_TRACE_BUFFER_SIZE": text}))
        assert s["STRATA_TRACE_BUFFER_SIZE"]["value"] == str(want), text
    r = avail(runner, env={"STRATA_TRACE_BUFFER_SIZE": "64 parsecs"})
    assert r.returncode == 2 and "STRATA_TRACE_BUFFER_SIZE" in r.stderr and "MiB" in r.stderr


def test_unknown_names_warn_with_closest(runner):
    r = avail(runner, env={"STRATA_COMPONENT": "trip_count"})
    assert r.returncode == 0
    assert "strata: warning: unknown setting STRATA_COMPONENT" in r.stderr
    assert "did you mean STRATA_COMPONENTS?" in r.stderr
    cfg = runner.write("c.cfg", "STRATA_PRECISON = 3\n")
    r = avail(runner, env={"STRATA_CONFIG_FILE": cfg})
    assert r.returncode == 0 and "c.cfg:1: unknown setting 'STRATA_PRECISON'" in r.stderr
    assert "did you mean STRATA_PRECISION?" in r.stderr
    # The same warning, once, when profiling.
    runner.write("s.py", "print('ran')\n")
    r = runner.strata("--", "s.py", env={"STRATA_COMPONENT": "x", "STRATA_PRINT_TABLES": "OFF"})
    assert r.returncode == 0 and r.stdout == "ran\n"
    assert r.stderr.count("unknown setting STRATA_COMPONENT ") == 1, r.stderr


def test_docs_settings_md_in_step(runner):
    r = avail(runner, "--markdown")
    assert r.returncode == 0, r.describe()
    doc = REPO / "docs" / "settings.md"
    assert doc.read_text() == r.stdout, (
        "docs/settings.md is out of step with the registry: regenerate it with "
        "`.venv/bin/strata avail --markdown > docs/settings.md`")


def test_avail_usage_errors(runner):
    for args, want in ((["--bogus"], "unknown option '--bogus'"), (["-G"], "needs a value")):
        r = avail(runner, *args)
        assert r.returncode == 2 and want in r.stderr and r.stderr.count("\n") == 1
    r = avail(runner, "--help")
    assert r.returncode == 0 and "usage: strata avail" in r.stdout
    r = run_cmd([STRATA, "--help"], runner.dir, runner.env())
    assert "avail" in r.stdout


def test_clock_setting_from_a_file_is_honoured(runner):
    runner.write("s.py", SCRIPT)
    cfg = runner.write("c.cfg", "STRATA_CLOCK = monotonic\n")
    r = runner.strata("--", "s.py", env={"STRATA_CONFIG_FILE": cfg, "STRATA_PRINT_TABLES": "0"})
    assert r.returncode == 0, r.describe()
    meta = json.loads((find_results(runner.dir) / "profile.json").read_text())["metadata"]
    assert meta["clock"] == "monotonic"
