"""Trace mode (trace.pftrace, trace.json) and the process sampler.

Every Perfetto trace a test makes is decoded twice: by protoc against the reference
schema in ../shared/formats (a structural check that also fails on unknown fields) and
by a wire-format reader of our own below, which checks what protoc cannot: sequence
flags, interning before use, begin/end balance and nesting, and the track layout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO, SANITIZED, find_results, load_profile

SCHEMA_DIR = REPO.parent / "shared" / "formats"
SCHEMA = SCHEMA_DIR / "perfetto_trace.proto"


# --------------------------------------------------------------------------- wire reader

def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def fields(buf):
    """[(field number, wire type, value)] of one message; length-delimited values are
    bytes, fixed64 values are the raw 8 bytes."""
    out, i = [], 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise AssertionError(f"unexpected wire type {wt}")
        out.append((num, wt, v))
    assert i == len(buf), "message overruns its length"
    return out


def first(fs, num, default=None):
    for n, _, v in fs:
        if n == num:
            return v
    return default


def every(fs, num):
    return [v for n, _, v in fs if n == num]


class Trace:
    """What a strata trace holds, checked as it is read."""

    def __init__(self, data: bytes):
        self.threads = {}      # track uuid -> (tid, name)
        self.process = None    # (pid, name): the first process described
        self.processes = {}    # track uuid -> (pid, name): every one (a merged MPI job's)
        self.counters = {}     # track uuid -> name
        self.attributes = {}
        self.slices = {}       # tid -> [(name, begin_ns, end_ns, depth)]
        self.samples = {}      # counter name -> [(ns, value)]
        self.stack_samples = {}  # tid -> [(ns, (frame name, ...) root first, weight)]
        self.instants = {}     # tid -> [(name, ns)]
        self.tracks = {}       # track uuid -> name: the other named tracks (GPU streams)
        self.gpu_slices = {}   # track name -> [(name, begin_ns, end_ns, (ended flow ids))],
        #                        in the order they end
        self.flows = {}        # flow id -> (tid, ns, name): where each flow starts
        gpu_open = {}          # track uuid -> [(name, begin_ns, flows)]
        self.events = 0
        seqs = {}
        packets = every(fields(data), 1)
        assert packets, "no packets"
        for raw in packets:
            p = fields(raw)
            seq = first(p, 10)
            assert seq is not None, "packet without trusted_packet_sequence_id"
            st = seqs.get(seq)
            flags = first(p, 13, 0)
            # sequence 1 of each trace holds its descriptors (strata merge moves a
            # rank's sequences to a range of 65536 of their own)
            global_seq = seq % 65536 == 1
            if st is None:
                st = seqs[seq] = {"names": {}, "stack": [], "ts": None, "track": None,
                                  "tid": None, "started": global_seq, "functions": {},
                                  "frames": {}, "callstacks": {}}
            td = first(p, 60)
            if td is not None:
                self._descriptor(fields(td))
            attrs = first(p, 126)
            if attrs is not None:
                for a in every(fields(attrs), 1):
                    af = fields(a)
                    self.attributes[first(af, 1).decode()] = first(af, 3, b"").decode()
            if global_seq:
                continue
            if not st["started"]:
                # The first packet of an event sequence clears the state and sets up.
                assert flags == 1, f"sequence {seq} does not start by clearing its state"
                assert first(p, 87) == 1, "first_packet_on_sequence missing"
                defaults = fields(first(p, 59))
                assert first(defaults, 58) == 64
                ted = first(defaults, 11)
                st["track"] = first(fields(ted), 11) if ted is not None else None
                snap = fields(first(p, 6))
                clocks = {first(fields(c), 1): fields(c) for c in every(snap, 1)}
                assert first(clocks[64], 3) == 1, "clock 64 is not incremental"
                st["ts"] = first(clocks[64], 2)
                st["started"] = True
                continue
            assert flags == 2, f"event packet on sequence {seq} without NEEDS_INCREMENTAL_STATE"
            for ev in every(p, 12):  # interned data first: it may name this event
                interned = fields(ev)
                for en in every(interned, 2):
                    ef = fields(en)
                    st["names"][first(ef, 1)] = first(ef, 2).decode()
                for fn in every(interned, 5):
                    ff = fields(fn)
                    st["functions"][first(ff, 1)] = first(ff, 2).decode()
                for fr in every(interned, 6):
                    ff = fields(fr)
                    assert first(ff, 2) in st["functions"], "frame names an uninterned function"
                    st["frames"][first(ff, 1)] = st["functions"][first(ff, 2)]
                for cs in every(interned, 7):
                    cf = fields(cs)
                    ids = every(cf, 2)
                    assert ids and all(i in st["frames"] for i in ids), "callstack of unknown frames"
                    st["callstacks"][first(cf, 1)] = tuple(st["frames"][i] for i in ids)
            st["ts"] += first(p, 8)
            ss = first(p, 135)
            if ss is not None:  # a stack sample: the thread from its task context
                sf = fields(ss)
                task = fields(first(sf, 1))
                tid = first(task, 3)
                assert first(task, 2) in {p[0] for p in self.processes.values()}, \
                    "sample of a process not described"
                cs = first(sf, 6)
                assert cs in st["callstacks"], f"callstack iid {cs} used before it was interned"
                self.stack_samples.setdefault(tid, []).append(
                    (st["ts"], st["callstacks"][cs], first(sf, 11)))
                continue
            te = fields(first(p, 11))
            kind = first(te, 9)
            self.events += 1
            if kind == 4:
                name = self.counters[first(te, 11)]
                value = first(te, 44)
                import struct
                self.samples.setdefault(name, []).append((st["ts"], struct.unpack("<d", value)[0]))
                continue
            track = first(te, 11)
            if track in self.tracks:  # a GPU stream's or API track's slice
                opened = gpu_open.setdefault(track, [])
                if kind == 1:
                    ends = tuple(int.from_bytes(f, "little") for f in every(te, 48))
                    iid = first(te, 10)
                    assert iid in st["names"], f"name iid {iid} used before it was interned"
                    opened.append((st["names"][iid], st["ts"], ends))
                else:
                    assert kind == 2 and opened, f"unexpected GPU event {kind}"
                    name, begin, ends = opened.pop()
                    assert st["ts"] >= begin
                    self.gpu_slices.setdefault(self.tracks[track], []).append(
                        (name, begin, st["ts"], ends))
                continue
            tid = self.threads[st["track"]][0]
            stack = st["stack"]
            if kind in (1, 3):
                iid = first(te, 10)
                assert iid in st["names"], f"name iid {iid} used before it was interned"
                if kind == 3:  # an instant (a mark, or where a flow starts)
                    self.instants.setdefault(tid, []).append((st["names"][iid], st["ts"]))
                    for f in every(te, 47):
                        self.flows[int.from_bytes(f, "little")] = (tid, st["ts"], st["names"][iid])
                else:
                    stack.append((st["names"][iid], st["ts"]))
            else:
                assert kind == 2, f"unexpected event type {kind}"
                assert stack, f"slice end without a begin on thread {tid}"
                name, begin = stack.pop()
                assert st["ts"] >= begin
                self.slices.setdefault(tid, []).append((name, begin, st["ts"], len(stack)))
        for seq, st in seqs.items():
            assert not st["stack"], f"sequence {seq} ends with open slices: {st['stack'][:3]}"
        assert not any(gpu_open.values()), "a GPU stream's slice is left open"

    def _descriptor(self, td):
        uuid = first(td, 1)
        if first(td, 3) is not None:
            pf = fields(first(td, 3))
            self.processes[uuid] = (first(pf, 1), first(pf, 6, b"").decode())
            self.process = self.process or self.processes[uuid]
        elif first(td, 4) is not None:
            tf = fields(first(td, 4))
            self.threads[uuid] = (first(tf, 2), first(tf, 5, b"").decode())
        elif first(td, 8) is not None:
            self.counters[uuid] = first(td, 2).decode()
        elif first(td, 2) is not None:
            self.tracks[uuid] = first(td, 2).decode()

    def names(self, tid=None):
        return Counter(s[0] for t, ss in self.slices.items() if tid in (None, t) for s in ss)

    def thread_names(self):
        return {name for _, name in self.threads.values()}


def decode(path: Path) -> Trace:
    data = Path(path).read_bytes()
    if SCHEMA.exists() and shutil.which("protoc"):
        p = subprocess.run(
            ["protoc", f"-I{SCHEMA_DIR}", "--decode=perfetto.protos.Trace", SCHEMA.name],
            input=data, capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
        unknown = [line for line in p.stdout.decode().splitlines()
                   if line.strip()[:1].isdigit()]
        assert not unknown, f"protoc found fields the schema does not know: {unknown[:5]}"
    return Trace(data)


def need_schema():
    if not SCHEMA.exists():
        pytest.skip(f"the reference schema is not beside the checkout ({SCHEMA})")
    if not shutil.which("protoc"):
        pytest.skip("protoc is not installed (Debian's protobuf-compiler)")


TRACE = {"STRATA_TRACE": "ON", "STRATA_PRINT_TABLES": "OFF"}

THREADS = """
import threading

def leaf(n):
    return n

def work(n):
    return sum(leaf(i) for i in range(n))

ts = [threading.Thread(target=work, args=(5,), name=f"worker-{i}") for i in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
work(2)
"""


def run_traced(runner, script, *args, env=None, name="s.py"):
    runner.write(name, script)
    r = runner.strata(*args, "--", name, env={**TRACE, **(env or {})})
    assert r.returncode == 0, r.describe()
    return r, find_results(runner.dir)


def test_threads_named_and_balanced(runner):
    need_schema()
    r, res = run_traced(runner, THREADS)
    t = decode(res / "trace.pftrace")
    assert {"MainThread", "worker-0", "worker-1", "worker-2"} <= t.thread_names()
    assert t.process[1] == "s" and t.process[0] > 0
    main_tid = next(tid for tid, name in t.threads.values() if name == "MainThread")
    for tid, name in t.threads.values():
        if name.startswith("worker-"):
            assert t.names(tid)["work"] == 1 and t.names(tid)["leaf"] == 5, name
    assert t.names(main_tid)["work"] == 1 and t.names(main_tid)["leaf"] == 2
    # leaf is always inside work (the generator expression is left out by default)
    for tid, slices in t.slices.items():
        for name, b, e, depth in slices:
            if name == "leaf":
                assert any(n == "work" and b2 <= b and e <= e2 for n, b2, e2, _ in slices)
    assert t.attributes["strata.dropped_calls"] == "0"
    prof = load_profile(res)
    assert prof["trace"]["events"] == t.events and prof["trace"]["dropped_calls"] == 0


def test_trace_agrees_with_the_profile(runner):
    need_schema()
    r, res = run_traced(runner, (REPO / "examples" / "example.py").read_text(),
                        env={"STRATA_COMPONENTS": "trip_count"})
    t = decode(res / "trace.pftrace")
    counts = Counter()
    for th in load_profile(res)["threads"]:
        for n in th["nodes"]:
            counts[n["label"]] += n["count"]
    assert t.names() == counts
    assert counts["fib"] == 21891


def test_exception_unwinding_leaves_no_open_slice(runner):
    need_schema()
    script = """
    def f(n):
        if n == 0:
            raise ValueError("deep")
        return f(n - 1)

    for _ in range(3):
        try:
            f(10)
        except ValueError:
            pass
    """
    r, res = run_traced(runner, textwrap.dedent(script))
    t = decode(res / "trace.pftrace")  # the reader fails on any open slice
    assert t.names()["f"] == 33
    assert max(d for _, _, _, d in next(iter(t.slices.values()))) == 10


def test_calls_open_at_exit_are_closed(runner):
    need_schema()
    script = """
    import threading, time

    def forever(ev):
        ev.set()
        while True:
            time.sleep(0.01)

    ev = threading.Event()
    threading.Thread(target=forever, args=(ev,), daemon=True, name="daemon").start()
    ev.wait()
    """
    r, res = run_traced(runner, textwrap.dedent(script))
    t = decode(res / "trace.pftrace")
    tid = next(tid for tid, name in t.threads.values() if name == "daemon")
    (name, b, e, depth), = [s for s in t.slices[tid] if s[0] == "forever"]
    assert e > b


def test_depth_is_capped_and_counted(runner):
    need_schema()
    script = """
    import sys
    sys.setrecursionlimit(5000)
    def down(n):
        return 0 if n == 0 else down(n - 1)
    down(1000)
    """
    r, res = run_traced(runner, textwrap.dedent(script), env={"STRATA_PRINT_TABLES": "ON"})
    t = decode(res / "trace.pftrace")
    depths = [d for s in t.slices.values() for _, _, _, d in s]
    assert max(depths) == 499 and t.names()["down"] == 500
    assert t.attributes["strata.too_deep_calls"] == "501"
    assert load_profile(res)["trace"]["too_deep_calls"] == 501
    assert "501 calls nested deeper than 500 were not recorded" in r.stderr


MANY = """
def tiny(i):
    return i

def outer():
    for i in range(120000):
        tiny(i)

outer()
"""


def test_discard_policy_counts_and_stays_balanced(runner):
    need_schema()
    r, res = run_traced(runner, MANY, env={"STRATA_TRACE_BUFFER_SIZE": "1MiB",
                                           "STRATA_PRINT_TABLES": "ON"})
    t = decode(res / "trace.pftrace")
    dropped = int(t.attributes["strata.dropped_calls"])
    assert dropped > 0 and t.names()["tiny"] + dropped == 120000
    assert t.names()["outer"] == 1  # begun before the buffer filled, ended after
    assert f"{dropped} calls were not recorded: the buffer was full" in r.stderr
    assert load_profile(res)["trace"]["dropped_calls"] == dropped
    # the profile itself is complete
    assert any(n["label"] == "tiny" and n["count"] == 120000
               for th in load_profile(res)["threads"] for n in th["nodes"])


def test_flush_policy_keeps_everything(runner):
    need_schema()
    r, res = run_traced(runner, MANY, env={"STRATA_TRACE_BUFFER_SIZE": "1MiB",
                                           "STRATA_TRACE_FILL_POLICY": "flush"})
    t = decode(res / "trace.pftrace")
    assert t.names()["tiny"] == 120000 and t.attributes["strata.dropped_calls"] == "0"
    assert not [p for p in os.listdir(res) if p.startswith(".")], "spill files left behind"


def test_bytes_per_call_event(runner):
    r, res = run_traced(runner, MANY)
    prof = load_profile(res)
    size = (res / "trace.pftrace").stat().st_size
    assert prof["trace"]["bytes"] == size
    assert size / prof["trace"]["events"] <= 16, size / prof["trace"]["events"]


def test_chrome_format(runner):
    r, res = run_traced(runner, THREADS, env={"STRATA_TRACE_FORMAT": "perfetto,chrome"})
    data = json.loads((res / "trace.json").read_text())
    events = data["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"MainThread", "worker-0"} <= names
    depth = Counter()
    for e in events:
        if e["ph"] == "B":
            depth[e["tid"]] += 1
        elif e["ph"] == "E":
            depth[e["tid"]] -= 1
            assert depth[e["tid"]] >= 0
    assert not +depth
    assert sum(1 for e in events if e["ph"] == "B" and e["name"] == "leaf") == 17
    assert (res / "trace.pftrace").exists()
    # --trace-format on the command line, chrome alone
    for p in (runner.dir / "strata-s-output").iterdir():
        shutil.rmtree(p)
    r = runner.strata("--trace", "--trace-format", "chrome", "--", "s.py",
                      env={"STRATA_PRINT_TABLES": "OFF"})
    assert r.returncode == 0, r.describe()
    res = find_results(runner.dir)
    assert (res / "trace.json").exists() and not (res / "trace.pftrace").exists()


def test_trace_without_profile(runner):
    r, res = run_traced(runner, THREADS, env={"STRATA_PROFILE": "OFF", "STRATA_PRINT_TABLES": "ON"})
    assert (res / "trace.pftrace").exists()
    assert not list(res.glob("*.txt")) and "REAL-CLOCK" not in r.stderr


def test_program_unchanged_under_trace(runner):
    script = """
    import sys
    def f(n):
        print("f", n)
        if n == 2:
            raise KeyError(n)
        return f(n + 1)
    try:
        f(0)
    except KeyError as e:
        print("caught", e)
    sys.exit(4)
    """
    runner.write("u.py", textwrap.dedent(script))
    plain = runner.plain("u.py")
    traced = runner.strata("--trace", "--", "u.py", env={"STRATA_PRINT_TABLES": "OFF"})
    assert (plain.returncode, plain.stdout, plain.stderr) == \
        (traced.returncode, traced.stdout, traced.stderr) == (4, plain.stdout, "")


# --------------------------------------------------------------------------- sampler

ALLOC = """
import time
time.sleep(0.15)
block = bytearray(300_000_000)
for i in range(0, len(block), 4096):
    block[i] = 1
time.sleep(0.3)
del block
time.sleep(0.15)
"""


def test_process_sampler_sees_300_mb(runner):
    need_schema()
    env = {"STRATA_USE_PROCESS_SAMPLING": "ON", "STRATA_PROCESS_SAMPLING_FREQ": "100",
           "STRATA_PRINT_TABLES": "ON"}
    r, res = run_traced(runner, ALLOC, env=env)
    t = decode(res / "trace.pftrace")
    rss = [v for _, v in t.samples["memory.resident"]]
    assert max(rss) - min(rss) >= 280e6, (min(rss), max(rss))
    times = [ns for ns, _ in t.samples["memory.resident"]]
    assert times == sorted(times) and len(times) >= 20
    for name in ("memory.virtual", "page_faults.minor", "page_faults.major",
                 "context_switches.voluntary", "context_switches.involuntary",
                 "cpu_time.user", "cpu_time.system", "cpu.utilization", "io.read",
                 "io.written", "network.received", "network.sent", "threads",
                 "cpu0.frequency"):
        assert name in t.samples, name
    assert max(v for _, v in t.samples["threads"]) == 1  # the sampler does not count itself
    prof = load_profile(res)
    ps = prof["process_sampling"]
    metrics = {m["name"]: m for m in ps["metrics"]}
    assert metrics["memory.resident"]["max"] - metrics["memory.resident"]["min"] >= 280e6
    assert metrics["memory.resident"]["units"] == "bytes"
    assert ps["samples"] >= 20 and ps["frequency"] == 100 and ps["sampler_cpu_s"] >= 0
    table = (res / "process_sampling.txt").read_text()
    assert "PROCESS SAMPLING" in table and "memory.resident" in table and "MiB" in table
    assert "[strata] process sampling:" in r.stderr
    if not Path("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").exists():
        assert "GPU metrics skipped" in ps["gpu_note"] and "GPU metrics skipped" in r.stderr


FAKE_NVML = r"""
struct mem { unsigned long long total, free, used; };
struct util { unsigned int gpu, memory; };
int nvmlInit_v2(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) { *h = (void *)(long)(i + 1); return 0; }
int nvmlDeviceGetMemoryInfo(void *h, struct mem *m) { m->total = 80; m->free = 30; m->used = (unsigned long long)(long)h << 30; return 0; }
int nvmlDeviceGetPowerUsage(void *h, unsigned int *mw) { *mw = 150000 + (unsigned)(long)h; return 0; }
int nvmlDeviceGetTemperature(void *h, int sensor, unsigned int *c) { (void)h; *c = sensor == 0 ? 61 : 0; return 0; }
int nvmlDeviceGetUtilizationRates(void *h, struct util *u) { u->gpu = 40 + (unsigned)(long)h; u->memory = 0; return 0; }
"""


def test_gpu_metrics_through_nvml(runner):
    """The real dlopen path, against a stand-in libnvidia-ml.so.1 built here."""
    if not shutil.which("gcc"):
        pytest.skip("gcc is needed to build the stand-in NVML library")
    lib = runner.dir / "nvml"
    lib.mkdir()
    (lib / "fake.c").write_text(FAKE_NVML)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib / "libnvidia-ml.so.1"),
                    str(lib / "fake.c")], check=True)
    env = {"STRATA_USE_PROCESS_SAMPLING": "ON", "LD_LIBRARY_PATH": str(lib),
           "STRATA_PROCESS_SAMPLING_FREQ": "50"}
    r, res = run_traced(runner, "import time\ntime.sleep(0.1)\n", env=env)
    metrics = {m["name"]: m for m in load_profile(res)["process_sampling"]["metrics"]}
    assert metrics["gpu0.memory_used"]["max"] == 1 << 30
    assert metrics["gpu1.memory_used"]["max"] == 2 << 30
    assert metrics["gpu1.power"]["max"] == pytest.approx(150.002)
    assert metrics["gpu0.temperature"]["mean"] == 61
    assert metrics["gpu1.utilization"]["min"] == 42
    assert load_profile(res)["process_sampling"]["gpu_note"] is None


def test_sampling_without_trace_or_profile(runner):
    runner.write("s.py", ALLOC)
    r = runner.strata("--", "s.py", env={"STRATA_USE_PROCESS_SAMPLING": "ON",
                                         "STRATA_PROFILE": "OFF", "STRATA_PRINT_TABLES": "OFF"})
    assert r.returncode == 0, r.describe()
    res = find_results(runner.dir)
    assert (res / "process_sampling.txt").exists()
    assert not (res / "trace.pftrace").exists()


@pytest.mark.parametrize("name, value, want", [
    ("STRATA_TRACE_FILL_POLICY", "spill", "discard,flush"),
    ("STRATA_TRACE_BUFFER_SIZE", "lots", "MiB"),
    ("STRATA_TRACE_FORMAT", "json", "perfetto,chrome"),
    ("STRATA_PROCESS_SAMPLING_FREQ", "0", "from 0.001 to 10000"),
    ("STRATA_TRACE_MAX_DEPTH", "600", "from 1 to 512"),
])
def test_bad_trace_settings(runner, name, value, want):
    runner.write("s.py", "print('ran')\n")
    r = runner.strata("--", "s.py", env={name: value})
    assert r.returncode == 2 and r.stdout == "" and want in r.stderr and name in r.stderr


# ------------------------------------------------------- many short threads (issue 9 #6)

SHORT_THREADS = """
import sys
import threading

def leaf(i):
    return i

def work(i):
    leaf(i)
    leaf(i)

n = int(sys.argv[1])
batch = int(sys.argv[2])
for start in range(0, n, batch):
    ts = [threading.Thread(target=work, args=(i,)) for i in range(start, min(n, start + batch))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
# the peak of this process's own memory (ru_maxrss would include the parent's at fork)
hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:")][0].split()[1]
print("maxrss_kib", hwm)
"""


def thread_calls(res):
    """Calls of work and leaf in the trace, per the profile: (trace events, dropped)."""
    prof = load_profile(res)
    return prof["trace"]["events"], prof["trace"]["dropped_calls"]


@pytest.mark.parametrize("n,batch,buffer", [(100, 100, "1MiB"), (20000, 200, None)])
def test_short_threads_lose_nothing_under_flush(runner, n, batch, buffer):
    env = {"STRATA_TRACE_FILL_POLICY": "flush", "STRATA_PRINT_TABLES": "ON",
           "STRATA_TRACE_FORMAT": "chrome"}
    if buffer:
        env["STRATA_TRACE_BUFFER_SIZE"] = buffer
    runner.write("threads.py", SHORT_THREADS)
    r = runner.strata("--", "threads.py", n, batch, env={**TRACE, **env}, timeout=300)
    assert r.returncode == 0, r.describe()
    res = find_results(runner.dir)
    events, dropped = thread_calls(res)
    assert dropped == 0, r.stderr[-2000:]
    assert "were not recorded" not in r.stderr, r.stderr[-2000:]
    data = json.loads((res / "trace.json").read_text())
    begins = Counter(e["name"] for e in data["traceEvents"] if e["ph"] == "B")
    assert begins["work"] == n and begins["leaf"] == 2 * n, begins
    assert not [p for p in os.listdir(res) if p.startswith(".")], "spill files left behind"
    if n == 20000 and not SANITIZED:  # ASan's quarantine holds freed memory
        # a finished thread keeps its results and little else: far below the
        # 19 KB a thread (391 MB) it took when finished threads kept everything
        rss_kib = int(r.stdout.split("maxrss_kib")[1].split()[0])
        assert rss_kib < 150_000, rss_kib


def test_short_threads_give_back_their_chunks_under_discard(runner):
    """100 threads one after another, in a buffer of 16 chunks: each finished
    thread's chunk goes back, so none is dropped."""
    runner.write("threads.py", SHORT_THREADS)
    r = runner.strata("--", "threads.py", 100, 1, env={**TRACE, "STRATA_TRACE_BUFFER_SIZE": "1MiB",
                                                        "STRATA_TRACE_FORMAT": "chrome"})
    assert r.returncode == 0, r.describe()
    events, dropped = thread_calls(find_results(runner.dir))
    assert dropped == 0


def test_flush_failure_does_not_advise_flush(runner):
    """Under flush a lost call means the spill failed: the message says so and does
    not advise the policy in use. The program caps its file size while it runs, so
    the spill file cannot grow past 512 KiB."""
    script = MANY.replace("outer()\n", textwrap.dedent("""
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, hard))
        outer()
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        """))
    runner.write("s.py", script)
    r = runner.strata("--", "s.py", env={**TRACE, "STRATA_PRINT_TABLES": "ON",
                                         "STRATA_TRACE_BUFFER_SIZE": "1MiB",
                                         "STRATA_TRACE_FILL_POLICY": "flush"})
    assert "writing the spill file in" in r.stderr, r.stderr[-2000:]
    assert "calls after that were not recorded" in r.stderr, r.stderr[-2000:]
    assert "flush keeps them" not in r.stderr, r.stderr[-2000:]


def test_stack_samples_on_the_timeline(runner):
    """--sample with --trace: every sample is a StackSample on its thread, in time
    with the slices, its callstack the profile's path (root first), weighted by the
    nanoseconds of sampling clock it stands for."""
    need_schema()
    from test_sampling import split_program
    _, res = run_traced(runner, textwrap.dedent(split_program(40)), "--sample", "-f", "500")
    tr = decode(res / "trace.pftrace")
    prof = load_profile(res)
    st = prof["stack_sampling"]
    samples = [s for ss in tr.stack_samples.values() for s in ss]
    assert len(samples) >= st["samples"] - st["left_out"] - 5 and samples, (len(samples), st)
    assert sum(w for _, _, w in samples) <= st["periods"] * 2_000_000
    stacks = Counter(stack for _, stack, _ in samples)
    assert any(stack[-2:] == ("main", "f") or stack[-3:-1] == ("main", "f") for stack in stacks), \
        stacks.most_common(5)
    # the samples fall inside the run's slices, in order on their sequence
    times = [t for t, _, _ in samples]
    assert times == sorted(times)
    main_slices = [s for s in tr.slices[next(iter(tr.stack_samples))] if s[0] == "main"]
    assert prof["trace"]["events"] == tr.events + len(samples)
    assert main_slices and main_slices[0][1] <= times[len(times) // 2] <= main_slices[0][2]
