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


# ---------------------------------------------------------------------- numbers, config files


@pytest.mark.parametrize("name, value", [
    ("STRATA_PROCESS_SAMPLING_FREQ", "1e-12"),   # was taken, and sampled at ~10 kHz
    ("STRATA_PROCESS_SAMPLING_FREQ", "nan"),
    ("STRATA_PROCESS_SAMPLING_FREQ", "inf"),
    ("STRATA_PROCESS_SAMPLING_FREQ", "0x10"),
    ("STRATA_PROCESS_SAMPLING_FREQ", "1e999"),
    ("STRATA_PROCESS_SAMPLING_FREQ", "20001"),
    ("STRATA_PROCESS_SAMPLING_FREQ", "5 5"),
    ("STRATA_PRECISION", "nan"),
    ("STRATA_PRECISION", "3.0"),
    ("STRATA_MAX_NODES", "99999999999999999999"),  # overflow, not a wrap
    ("STRATA_MAX_NODES", "0x10"),
    ("STRATA_TRACE_BUFFER_SIZE", "nanMB"),
    ("STRATA_TRACE_BUFFER_SIZE", "inf"),
])
def test_strict_numbers_refused(runner, name, value):
    r = avail(runner, env={name: value})
    assert r.returncode == 2, r.describe()
    assert r.stderr.startswith(f"strata: error: {name}: '{value}'") and r.stderr.count("\n") == 1


def test_numbers_spaces_and_ranges(runner):
    """Spaces around a number are ignored on both sides alike (" 5" and "5 ")."""
    for text in (" 5", "5 ", " 5 ", "5"):
        s = by_env(avail_json(runner, env={"STRATA_PRECISION": text}))
        assert s["STRATA_PRECISION"]["value"] == "5", repr(text)
        s = by_env(avail_json(runner, env={"STRATA_PROCESS_SAMPLING_FREQ": text}))
        assert s["STRATA_PROCESS_SAMPLING_FREQ"]["value"] == "5", repr(text)
    for text, want in (("0.001", "0.001"), ("1e3", "1000"), (".5", "0.5"), ("10000", "10000")):
        s = by_env(avail_json(runner, env={"STRATA_PROCESS_SAMPLING_FREQ": text}))
        assert s["STRATA_PROCESS_SAMPLING_FREQ"]["value"] == want, text
    s = by_env(avail_json(runner, env={"STRATA_MAX_NODES": " 2M "}))
    assert s["STRATA_MAX_NODES"]["value"] == "2000000"


def test_report_flags_take_the_same_numbers(runner):
    runner.write("s.py", "def f():\n    return 1\nf()\n")
    r = runner.strata("-o", "res", "--", "s.py")
    assert r.returncode == 0, r.describe()
    for flag, value in (("-n", "nan"), ("-e", "inf"), ("-n", "0x10"), ("-n", "101"),
                        ("--precision", "nan"), ("--precision", "1e1")):
        r = runner.run([STRATA, "report", "--format", "dot", flag, value, "res"])
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (flag, value, r.describe())
        assert r.stderr.startswith("strata: error: ") and value in r.stderr and r.stdout == ""
    for flag, value in (("-n", " 5"), ("-n", "5 "), ("--precision", " 3 ")):
        r = runner.run([STRATA, "report", "--format", "dot", "-o", "-", flag, value, "res"])
        assert r.returncode == 0 and "digraph" in r.stdout, (flag, value, r.describe())


def test_config_file_long_lines_and_sizes(runner):
    # a long comment was split at 8191 bytes and its tail applied as a setting
    tail = "STRATA_PRECISION = 1"
    cfg = runner.write("long.cfg", "#" + "x" * (8191 - 1 - len(tail) + 1) + tail + "\n")
    r = avail(runner, env={"STRATA_CONFIG_FILE": cfg})
    assert r.returncode == 2, r.describe()
    assert r.stderr == f"strata: error: {cfg}:1: a line longer than 8191 bytes\n"
    ok = runner.write("ok.cfg", "#" + "x" * 8100 + "\nSTRATA_PRECISION = 2\n")
    assert by_env(avail_json(runner, env={"STRATA_CONFIG_FILE": ok}))["STRATA_PRECISION"][
        "value"] == "2"
    big = runner.dir / "big.cfg"
    big.write_text(("# padding\n" * 110_000))
    r = avail(runner, env={"STRATA_CONFIG_FILE": big})
    assert r.returncode == 2 and "larger than 1048576 bytes" in r.stderr, r.describe()
    nul = runner.dir / "nul.cfg"
    nul.write_bytes(b"STRATA_PRECISION = 2\x00\n")
    r = avail(runner, env={"STRATA_CONFIG_FILE": nul})
    assert r.returncode == 2 and "nul.cfg:1: a NUL byte" in r.stderr, r.describe()
    # -c /dev/zero spun forever; a FIFO waited for a writer
    for path in ("/dev/zero",):
        r = runner.run([STRATA, "python", "-c", path, "--", "x.py"], timeout=20)
        assert r.returncode == 2, r.describe()
        assert r.stderr == f"strata: error: config file: cannot read '{path}': not a regular file\n"
    import os
    fifo = runner.dir / "fifo.cfg"
    os.mkfifo(fifo)
    r = avail(runner, env={"STRATA_CONFIG_FILE": fifo})
    assert r.returncode == 2 and "not a regular file" in r.stderr, r.describe()


def test_errors_escape_what_the_user_gave(runner):
    r = avail(runner, env={"STRATA_PRECISION": "\x1b]0;pwned\x07\n9"})
    assert r.returncode == 2, r.describe()
    assert r.stderr == ("strata: error: STRATA_PRECISION: '\\e]0;pwned\\x07\\n9' is not a whole "
                        "number from 0 to 12 (k, M and G suffixes allowed)\n")
    cfg = runner.dir / "bad.cfg"
    cfg.write_bytes(b"STRATA_\x1b[2JBOGUS = 1\nSTRATA_CLOCK = \xff\xfe\xc2\x9b\n")
    r = avail(runner, env={"STRATA_CONFIG_FILE": cfg})
    assert r.returncode == 2
    assert "\x1b" not in r.stderr and "\x9b" not in r.stderr and r.stderr.count("\n") == 2
    assert "unknown setting 'STRATA_\\e[2JBOGUS'" in r.stderr
    assert "'\\xff\\xfe\\u009b'" in r.stderr


def test_generate_never_replaces_without_force(runner):
    cfg = runner.dir / "mine.cfg"
    cfg.write_text("# my notes\n")
    r = avail(runner, "-G", cfg)
    assert r.returncode == 2 and "already exists" in r.stderr and "--force" in r.stderr
    assert cfg.read_text() == "# my notes\n"
    r = avail(runner, "-G", cfg, "--force")
    assert r.returncode == 0, r.describe()
    assert "STRATA_PRECISION = 6" in cfg.read_text()
    # the config file the values came from is never written over, even with --force
    cfg.write_text("STRATA_PRECISION = 3\n")
    for env in ({"STRATA_CONFIG_FILE": cfg}, {}):
        if not env:
            (runner.home / ".strata.cfg").write_text("STRATA_PRECISION = 3\n")
            cfg = runner.home / ".strata.cfg"
        r = avail(runner, "-G", cfg, "--force", env=env)
        assert r.returncode == 2 and "never written over" in r.stderr, r.describe()
        assert cfg.read_text() == "STRATA_PRECISION = 3\n"
