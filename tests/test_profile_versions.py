"""profile.json versions: a file of format_version 1 (tests/data/profile-v1, written
by strata before version 2) still loads, reports and merges into the tables it gave
then; version 2 files come back the same through `strata report --format json`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import STRATA, have_strata
from test_report import Env

pytestmark = pytest.mark.skipif(not have_strata(), reason=f"strata is not built: {STRATA}")

V1 = Path(__file__).parent / "data" / "profile-v1"
TABLES = ["trip_count.txt", "wall_clock.txt", "cpu_clock.txt"]


@pytest.fixture
def env(tmp_path):
    return Env(tmp_path)


def ok(r):
    assert r.returncode == 0, r.describe()
    assert "strata: error" not in r.stderr, r.describe()
    return r


def test_v1_reports_the_same_tables(env):
    assert json.loads((V1 / "profile.json").read_text())["format_version"] == 1
    ok(env.strata("report", "--format", "text,json", "-o", env.root / "out", V1 / "profile.json"))
    for name in TABLES:
        assert (env.root / "out" / name).read_text() == (V1 / name).read_text(), name


def test_v1_merges_into_the_same_tables(env):
    shutil.copy(V1 / "profile.json", env.root / "a.json")
    ok(env.strata("merge", "-o", env.root / "merged", V1 / "profile.json", env.root / "a.json"))
    for name in TABLES:
        assert (env.root / "merged" / name).read_text() == (V1 / "merged" / name).read_text(), name
    # the merge is written as version 2, which reports the same tables again
    merged = json.loads((env.root / "merged" / "profile.json").read_text())
    assert merged["format_version"] == 2
    ok(env.strata("report", "--format", "text,json", "-o", env.root / "again",
                  env.root / "merged" / "profile.json"))
    for name in TABLES:
        assert (env.root / "again" / name).read_text() == (V1 / "merged" / name).read_text(), name


def test_v1_read_as_v2(env):
    """Version 1's timers on the node are version 2's node metrics, value for value."""
    old = json.loads((V1 / "profile.json").read_text())
    ok(env.strata("report", "--format", "json", "-o", env.root / "v2.json", V1 / "profile.json"))
    new = json.loads((env.root / "v2.json").read_text())
    assert [m["name"] for m in new["metrics"]] == ["wall_clock", "cpu_clock"]
    assert all(m["kind"] == "timer" and m["unit"] == "ns" for m in new["metrics"])
    for th_old, th_new in zip(old["threads"], new["threads"], strict=True):
        for a, b in zip(th_old["nodes"], th_new["nodes"], strict=True):
            assert a["label"] == b["label"] and a["count"] == b["count"]
            for timer in ("wall_clock", "cpu_clock"):
                x, y = dict(a[timer]), dict(b["metrics"][timer])
                vx, vy = x.pop("var"), y.pop("var")
                assert x == y and vy == pytest.approx(vx, rel=1e-12, abs=1e-9)


def test_v2_round_trip(env):
    """Written, read and written again: the same bytes."""
    ok(env.strata("report", "--format", "json", "-o", env.root / "one.json", V1 / "profile.json"))
    ok(env.strata("report", "--format", "json", "-o", env.root / "two.json", env.root / "one.json"))
    assert (env.root / "two.json").read_bytes() == (env.root / "one.json").read_bytes()


def test_v2_metrics_beyond_timers(env):
    """Metrics other than timers, read from a version 2 file: kept through report and
    merge, each count, bytes or samples metric a table of its own (a hostile name
    makes a harmless file name)."""
    ok(env.strata("report", "--format", "json", "-o", env.root / "v2.json", V1 / "profile.json"))
    doc = json.loads((env.root / "v2.json").read_text())
    doc["metrics"] += [
        {"name": "alloc_bytes", "unit": "bytes", "kind": "bytes", "description": "bytes allocated"},
        {"name": "../trip_count", "unit": "calls", "kind": "count", "description": ""},
        {"name": "rss", "unit": "bytes", "kind": "gauge", "description": "resident memory"},
    ]
    top = doc["threads"][0]["nodes"][0]
    top["metrics"].update({"alloc_bytes": 4096, "../trip_count": 2,
                           "rss": {"n": 2, "last": 5.0, "min": 1.0, "max": 5.0}})
    (env.root / "extra.json").write_text(json.dumps(doc))
    ok(env.strata("report", "--format", "text,json", "-o", env.root / "out",
                  env.root / "extra.json"))
    out = env.root / "out"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        TABLES + ["profile.json", "alloc_bytes.txt", "___trip_count.txt"])
    table = (out / "alloc_bytes.txt").read_text()
    assert "BYTES ALLOCATED" in table and "| alloc_bytes | bytes " in table
    assert "|   4096 |   4096 |  100.0 |" in table
    again = json.loads((out / "profile.json").read_text())
    assert [m["name"] for m in again["metrics"]] == [m["name"] for m in doc["metrics"]]
    assert again["threads"][0]["nodes"][0]["metrics"]["rss"] == {
        "n": 2, "last": 5, "min": 1, "max": 5}
    # merged with itself: bytes and counts add up, the gauge keeps its range
    ok(env.strata("merge", "-o", env.root / "merged", env.root / "extra.json",
                  env.root / "extra.json"))
    merged = json.loads((env.root / "merged" / "profile.json").read_text())
    cells = merged["threads"][0]["nodes"][0]["metrics"]
    assert cells["alloc_bytes"] == 8192 and cells["../trip_count"] == 4
    assert cells["rss"] == {"n": 4, "last": 5, "min": 1, "max": 5}
    assert (env.root / "merged" / "alloc_bytes.txt").exists()
