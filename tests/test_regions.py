"""strata.region, strata.timing and strata.summary: PyOP2's timed regions in
strata (issue 13). With plain python the timings alone; under strata python each
region is a call of its own in the tree, with what it calls under it."""

from __future__ import annotations

from conftest import load_profile

PROG = """
    import threading
    import strata

    def leaf():
        s = 0
        for i in range(50000):
            s += i
        return s

    @strata.region("decorated")
    def work():
        return leaf()

    def failing():
        with strata.region("raises"):
            raise ValueError("inside")

    def main():
        with strata.region("block"):
            leaf()
            work()
        work()
        try:
            failing()
        except ValueError:
            pass
        t = threading.Thread(target=work, name="helper")
        t.start()
        t.join()
        print(strata.timing("decorated") > 0, strata.timing("decorated", total=False) > 0,
              strata.timing("never"), work.__name__)

    main()
"""


def tree(prof: dict, name: str) -> dict:
    """{(label, ...): count} of the thread named `name`."""
    for th in prof["threads"]:
        if th["name"] == name:
            out, by_id = {}, {}
            for n in th["nodes"]:
                by_id[n["id"]] = (by_id[n["parent"]] if n["parent"] >= 0 else ()) + (n["label"],)
                out[by_id[n["id"]]] = n["count"]
            return out
    raise AssertionError(f"no thread {name}: {[t['name'] for t in prof['threads']]}")


def test_timings_without_strata(runner):
    runner.write("p.py", PROG)
    res = runner.plain("p.py")
    assert res.returncode == 0 and res.stdout == "True True 0.0 work\n", res.describe()
    assert res.stderr == ""


def test_print_summary_at_exit(runner):
    runner.write("p.py", PROG)
    res = runner.plain("p.py", env={"STRATA_PRINT_SUMMARY": "1"})
    assert res.returncode == 0, res.describe()
    lines = res.stderr.splitlines()
    assert lines[0].split() == ["REGION", "CALLS", "TOTAL", "(s)", "MEAN", "(s)"], res.stderr
    rows = {l.split()[0]: int(l.split()[1]) for l in lines[1:]}
    assert rows == {"decorated": 3, "block": 1, "raises": 1}, rows


def test_regions_in_the_profile(runner):
    runner.write("p.py", PROG)
    res = runner.strata("p.py")
    assert res.returncode == 0 and res.stdout == "True True 0.0 work\n", res.describe()
    prof = load_profile(runner.results())
    main = tree(prof, "MainThread")
    assert main[("main", "block", "leaf")] == 1
    assert main[("main", "block", "decorated", "work", "leaf")] == 1
    assert main[("main", "decorated", "work")] == 1
    # a region left by an exception closes, and what follows is not under it
    assert main[("main", "failing", "raises")] == 1
    assert not [p for p in main if p[:3] == ("main", "failing", "raises") and len(p) > 3]
    assert tree(prof, "helper")[("decorated", "work", "leaf")] == 1
    # strata's own code (the region class, the wrapper) is not in the tree
    labels = {l for p in main for l in p}
    assert not labels & {"__enter__", "__exit__", "timed", "wraps"}, labels


def test_regions_under_strata_run(runner, venv_python):
    """strata run -- python: the interpreter's regions land in the native profile."""
    from conftest import STRATA
    runner.write("p.py", PROG)
    res = runner.run([STRATA, "run", "--", venv_python, "p.py"])
    assert res.returncode == 0 and res.stdout == "True True 0.0 work\n", res.describe()
    prof = load_profile(runner.results())
    labels = {}
    for th in prof["threads"]:
        for n in th["nodes"]:
            labels[n["label"]] = labels.get(n["label"], 0) + n["count"]
    assert labels.get("block") == 1 and labels.get("decorated") == 3, labels
