"""Bad input: one line `strata: error: ...` on standard error, exit status 2, and the
script never starts (it would create a marker file and print)."""

import os

import pytest

SCRIPT = """
import pathlib
pathlib.Path("started.marker").write_text("started")
print("STARTED")
"""


def assert_usage_error(runner, res):
    lines = res.stderr.split("\n")
    assert res.returncode == 2, res.describe()
    assert res.stderr.endswith("\n") and len(lines) == 2, \
        f"expected exactly one line on standard error\n{res.describe()}"
    assert lines[0].startswith("strata: error: "), res.describe()
    assert len(lines[0]) > len("strata: error: "), "the error says nothing"
    assert res.stdout == "", res.describe()
    assert not (runner.dir / "started.marker").exists(), "the script started"


def prepare(runner, tmp_path):
    runner.write("target.py", SCRIPT)
    (tmp_path / "regular_file").write_text("not a folder\n")


# (id, options before the script, extra environment, config file text)
BAD = [
    ("unknown-flag", ["--no-such-flag"], {}, None),
    ("unknown-short-flag", ["-Z"], {}, None),
    ("bad-regex-E", ["-E", "("], {}, None),
    ("bad-regex-I", ["-I", "[a-"], {}, None),
    ("bad-regex-R", ["-R", "a{2,1}"], {}, None),
    ("bad-regex-MI", ["-MI", "("], {}, None),
    ("bad-regex-ME", ["-ME", "(?<"], {}, None),
    ("bad-regex-MR", ["-MR", "*x"], {}, None),
    ("bad-regex-env", [], {"STRATA_FUNCTION_EXCLUDE": "ok ("}, None),
    ("bad-regex-config", [], {}, "STRATA_MODULE_EXCLUDE = (\n"),
    ("unknown-component", ["--components", "bogus"], {}, None),
    ("unknown-component-in-list", ["--components", "trip_count,bogus"], {}, None),
    ("unknown-component-env", [], {"STRATA_COMPONENTS": "wall_clock bogus"}, None),
    ("unknown-component-config", [], {}, "STRATA_COMPONENTS = bogus\n"),
    ("bad-label", ["--label", "nope"], {}, None),
    ("bad-label-among-good", ["--label", "args", "nope"], {}, None),
    ("bad-label-env", [], {"STRATA_LABEL": "file,oops"}, None),
    ("output-in-proc", ["-o", "/proc/nope"], {}, None),
    ("output-under-regular-file", ["-o", "regular_file/sub"], {}, None),
    ("output-env-under-regular-file", [], {"STRATA_OUTPUT_PATH": "regular_file/sub"}, None),
    ("bad-bool-profile-env", [], {"STRATA_PROFILE": "maybe"}, None),
    ("bad-bool-print-tables-env", [], {"STRATA_PRINT_TABLES": "sometimes"}, None),
    ("bad-bool-trace-c-flag", ["--trace-c", "perhaps"], {}, None),
    ("bad-bool-full-filepath-flag", ["-F", "2"], {}, None),
    ("bad-bool-config", [], {}, "STRATA_TRACE_C = kinda\n"),
    ("bad-verbosity", ["-v", "loud"], {}, None),
    ("bad-precision-env", [], {"STRATA_PRECISION": "six"}, None),
    ("missing-config-file", ["-c", "no_such.cfg"], {}, None),
    ("missing-config-file-env", [], {"STRATA_CONFIG_FILE": "no_such.cfg"}, None),
    ("missing-setup-file", ["-s", "no_such_setup.py"], {}, None),
]


@pytest.mark.parametrize("opts, env, cfg", [pytest.param(*b[1:], id=b[0]) for b in BAD])
def test_bad_input_strata_python(runner, tmp_path, opts, env, cfg):
    prepare(runner, tmp_path)
    if cfg is not None:
        runner.write("bad.cfg", cfg)
        opts = ["-c", "bad.cfg", *opts]
    res = runner.strata(*opts, "--", "target.py", env=env)
    assert_usage_error(runner, res)


@pytest.mark.parametrize(
    "opts, env",
    [
        pytest.param(["--no-such-flag"], {}, id="unknown-flag"),
        pytest.param(["-E", "("], {}, id="bad-regex"),
        pytest.param(["--components", "bogus"], {}, id="unknown-component"),
        pytest.param(["--label", "nope"], {}, id="bad-label"),
        pytest.param(["-o", "regular_file/sub"], {}, id="unwritable-output"),
        pytest.param([], {"STRATA_PROFILE": "maybe"}, id="bad-bool-env"),
    ],
)
def test_bad_input_python_m_strata(runner, tmp_path, opts, env):
    prepare(runner, tmp_path)
    res = runner.module(*opts, "--", "target.py", env=env)
    assert_usage_error(runner, res)


@pytest.mark.parametrize("form", ["strata", "module"])
def test_missing_script(runner, form):
    res = runner.front(form)("--", "no_such_script.py")
    assert_usage_error(runner, res)


@pytest.mark.parametrize("opts", [[], ["--"], ["-o"], ["-E", "x"]], ids=["nothing", "dashdash",
                                                                       "flag-without-value", "no-script"])
def test_no_script_at_all(runner, opts):
    res = runner.strata(*opts)
    assert_usage_error(runner, res)


@pytest.mark.parametrize("opts", [["--label", "args", "target.py"], ["-E", "^x$", "target.py"]],
                         ids=["label", "regex"])
def test_multi_value_option_swallows_script(runner, tmp_path, opts):
    """Options that take several values consume the script's name when no `--` ends
    them: that is an error, not a silent run."""
    prepare(runner, tmp_path)
    assert_usage_error(runner, runner.strata(*opts))


@pytest.mark.parametrize("opts, env", [
    (["--no-such-flag"], {}),
    (["-E", "("], {}),
    (["--components", "bogus"], {}),
    ([], {"STRATA_PROFILE": "maybe"}),
], ids=["unknown-flag", "bad-regex", "unknown-component", "bad-bool-env"])
def test_bad_input_leaves_no_results_folder(runner, opts, env):
    """A usage error is found before the results folder is made."""
    runner.write("target.py", SCRIPT)
    res = runner.strata(*opts, "--", "target.py", env=env)
    assert res.returncode == 2, res.describe()
    assert not list(runner.dir.glob("strata-*-output")), sorted(p.name for p in runner.dir.iterdir())


def test_help(runner):
    for run in (runner.strata, runner.module):
        res = run("--help")
        assert res.returncode == 0, res.describe()
        text = res.stdout + res.stderr
        for opt in ("--builtin", "--config", "--setup", "--full-filepath", "--label",
                    "--function-include", "--function-exclude", "--function-restrict",
                    "--module-include", "--module-exclude", "--module-restrict",
                    "--trace-c", "--output", "--components"):
            assert opt in text, f"{opt} missing from the help\n{text}"
        assert not list(runner.dir.glob("strata-*-output"))
    assert runner.strata("-h").returncode == 0


def test_help_text_unchanged(runner, golden):
    """The help of `strata python` and `python -m strata`, generated from the settings
    registry, is the text it always was (the seed's options, in the seed's order and
    wording), byte for byte."""
    for run in (runner.strata, runner.module):
        res = run("--help")
        assert res.returncode == 0 and res.stderr == "", res.describe()
        golden("python_help.txt", res.stdout)


def test_version(runner, strata_bin):
    from conftest import REPO, run_cmd, clean_env
    import re
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    res = run_cmd([strata_bin, "--version"], runner.dir, clean_env(runner.home))
    assert res.returncode == 0, res.describe()
    assert version.group(1) in res.stdout + res.stderr


@pytest.mark.parametrize("opts", [["--no-such-flag"], ["-E", "("], ["--components", "bogus"],
                                  ["--label", "nope"]],
                         ids=["unknown-flag", "bad-regex", "unknown-component", "bad-label"])
def test_both_forms_say_the_same(runner, tmp_path, opts):
    """Both front ends parse with the same code: the same message for the same mistake."""
    prepare(runner, tmp_path)
    a = runner.strata(*opts, "--", "target.py")
    b = runner.module(*opts, "--", "target.py")
    assert (a.returncode, a.stderr) == (b.returncode, b.stderr), a.describe() + "\n" + b.describe()


# ----------------------------------------------------------- errors a user can act on (item 18)


@pytest.mark.parametrize("form", ["strata", "module"])
@pytest.mark.parametrize("setup", ["dir", "syntax", "null-byte"])
def test_setup_file_that_cannot_run(runner, tmp_path, form, setup):
    """-s naming a directory, or a file Python cannot compile: one `strata: error:` line
    that names the file, exit status 2, nothing run and no results folder."""
    prepare(runner, tmp_path)
    if setup == "dir":
        (tmp_path / "setup_dir").mkdir()
        name = "setup_dir"
    elif setup == "syntax":
        runner.write("setup_bad.py", "import pathlib\npathlib.Path('setup.ran').touch()\ndef (:\n")
        name = "setup_bad.py"
    else:
        (tmp_path / "setup_nul.py").write_bytes(b"x = 1\0\n")
        name = "setup_nul.py"
    res = runner.front(form)("-s", name, "--", "target.py")
    assert_usage_error(runner, res)
    assert name in res.stderr, res.describe()
    if setup == "syntax":
        assert "line 3" in res.stderr and "SyntaxError" in res.stderr, res.describe()
    assert not (tmp_path / "setup.ran").exists()
    assert not list(runner.dir.glob("strata-*-output")), sorted(p.name for p in runner.dir.iterdir())


def test_python_executable_without_strata(runner, tmp_path, venv_python):
    """PYTHON_EXECUTABLE naming an interpreter that cannot import strata: one
    `strata: error:` line that says so, exit status 2, nothing run or written."""
    import sys as _sys
    prepare(runner, tmp_path)
    bare = runner.write("bare_python.sh", f"""\
        #!/bin/sh
        exec {_sys.executable} -S "$@"
    """)
    os.chmod(bare, 0o755)
    res = runner.strata("--", "target.py", env={"PYTHON_EXECUTABLE": bare})
    assert_usage_error(runner, res)
    assert "cannot import strata" in res.stderr and "PYTHON_EXECUTABLE" in res.stderr, \
        res.describe()
    assert not list(runner.dir.glob("strata-*-output"))


def test_interpreter_options_need_the_strata_command(runner, tmp_path):
    """`python -m strata -u ...`: the interpreter has started, its options cannot be
    applied; the error says where they go."""
    prepare(runner, tmp_path)
    res = runner.module("-u", "--", "target.py")
    assert_usage_error(runner, res)
    assert "python -u -m strata" in res.stderr, res.describe()


@pytest.mark.parametrize("opt", ["-S", "-x", "-d"])
def test_other_interpreter_options_name_the_way(runner, tmp_path, opt):
    prepare(runner, tmp_path)
    res = runner.strata(opt, "--", "target.py")
    assert_usage_error(runner, res)
    assert "PYTHON" in res.stderr and "-X" in res.stderr, res.describe()
