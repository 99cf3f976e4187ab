"""GPU activities through CUPTI (issue 16): `--gpu` / STRATA_USE_CUPTI.

No GPU here: a stand-in libcupti.so (tests/data/gpu/fake_cupti.c), built by the test
with the system's C compiler, goes through strata's real paths: loading with dlopen,
the runtime-API callback at each launch, buffers lent and handed back, records read
with cuptiActivityGetNextRecord, the GPU clock converted, kernels tied to the code
that launched them. Where CUDA's headers are installed the stand-in writes the
records exactly as CUDA 13 lays them out (CUpti_ActivityKernel10 ...), which checks
strata's own declaration of them. Test programs call the stand-in's fake_launch,
fake_copy and fake_set where a CUDA program calls cudaLaunchKernel, cudaMemcpyAsync
and cudaMemsetAsync: a C program under `strata run`, a Python one (ctypes) under
`strata python`. The real libcupti of the CUDA toolkit, when installed, fails to start
without a driver: that path is tested too.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import STRATA, TESTS, c_compiler, find_results, load_profile
from test_trace import decode, need_schema

DATA = TESTS / "data" / "gpu"
CUDA_INCLUDE = next((p for p in (Path("/usr/local/cuda/include"),
                                 *sorted(Path("/usr/local").glob("cuda-*/include")))
                     if (p / "cupti.h").exists()), None)
REAL_CUPTI = next((p for p in (Path("/usr/local/cuda/lib64/libcupti.so"),
                               *sorted(Path("/usr/local").glob("cuda-*/lib*/libcupti.so")))
                   if p.exists()), None)


@pytest.fixture(scope="session")
def fakes(tmp_path_factory):
    """{abi: folder holding libcupti.so and the C program linked to it}: "own" (the
    stand-in's declarations), and "cuda" (CUDA's headers) where they are installed."""
    cc = c_compiler()
    out = {}
    for abi in ("own", "cuda") if CUDA_INCLUDE else ("own",):
        d = tmp_path_factory.mktemp(f"cupti-{abi}")
        flags = ["-DREAL_HEADERS", f"-I{CUDA_INCLUDE}"] if abi == "cuda" else []
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", *flags,
                        "-o", str(d / "libcupti.so"), str(DATA / "fake_cupti.c"), "-lpthread"],
                       check=True)
        subprocess.run([cc, "-O1", "-g", "-finstrument-functions", "-o", str(d / "launch"),
                        str(DATA / "launch.c"), f"-L{d}", "-lcupti", f"-Wl,-rpath,{d}"],
                       check=True)
        out[abi] = d
    return out


def best(fakes) -> Path:
    return fakes.get("cuda", fakes["own"])


def gpu_env(lib: Path, **more) -> dict:
    return {"STRATA_CUPTI_LIBRARY": str(lib / "libcupti.so"), "STRATA_TRACE": "ON",
            "STRATA_OUTPUT_FORMATS": "text,json", **more}


def gpu_times(res: Path) -> dict:
    """{label: gpu_time} over every thread's nodes of profile.json, and the table
    gpu_time.txt holds the same labels."""
    out = {}
    for th in load_profile(res)["threads"]:
        for n in th["nodes"]:
            out[n["label"]] = out.get(n["label"], 0) + n["metrics"].get("gpu_time", 0)
    table = (res / "gpu_time.txt").read_text()
    assert "GPU TIME OF THE KERNELS, COPIES AND SETS THE CALL LAUNCHED" in table
    assert all(f"_{label} " in table or f">>> {label} " in table
               for label, v in out.items() if v)
    return out


N = 2500  # launches of the C program's step(): every 1000, the stand-in hands a buffer back


@pytest.mark.parametrize("abi", ["own", "cuda"])
def test_native_program(runner, fakes, abi):
    if abi not in fakes:
        pytest.skip("CUDA's cupti.h is not installed: the stand-in uses its own declarations")
    lib = fakes[abi]
    r = runner.run([STRATA, "run", "--gpu", "--", str(lib / "launch"), str(N)], env=gpu_env(lib))
    assert r.returncode == 3, r.describe()  # the program's own status
    assert r.stdout == f"launched {N + 1}\n"
    assert "warning" not in r.stderr, r.stderr
    res = find_results(runner.dir)
    gpu = load_profile(res)["gpu"]
    assert gpu["library"] == str(lib / "libcupti.so")
    assert gpu["activities"] == N + 4 and gpu["attributed"] == N + 4 and gpu["dropped"] == 0
    kernels = {k["name"]: k for k in gpu["kernels"]}
    mm = kernels["matmul(float*, float*, float*, int)"]  # demangled
    durations = [20000 + (i % 3) * 1000 for i in range(N)]
    assert mm["count"] == N and mm["total_ns"] == sum(durations)
    assert mm["min_ns"] == 20000 and mm["max_ns"] == 22000
    mean = sum(durations) / N
    assert mm["mean_ns"] == pytest.approx(mean)
    assert mm["stddev_ns"] == pytest.approx((sum((d - mean) ** 2 for d in durations) / N) ** 0.5)
    assert kernels["reduce_kernel"]["count"] == 1
    copies = {c["direction"]: c for c in gpu["copies"]}
    assert copies["HtoD"] == {"direction": "HtoD", "count": 1, "bytes": 1 << 20, "total_ns": 100000}
    assert copies["DtoH"]["bytes"] == 4096 and copies["memset"]["bytes"] == 4096
    # the GPU time of each launch went to the function that launched it
    own = gpu_times(res)
    assert own["step"] == sum(durations)
    assert own["upload"] == 102000 and own["reduce"] == 9000
    table = (res / "gpu_kernels.txt").read_text()
    assert "GPU KERNELS" in table and "matmul(float*, float*, float*, int)" in table
    assert f"| {N} |" in table.replace("  ", " ").replace("  ", " ")
    copies_table = (res / "gpu_memcpy.txt").read_text()
    assert "HtoD" in copies_table and "10.486" in copies_table  # 1 MiB in 100 us: GB/s
    assert "[strata] GPU: 2504 kernels, copies and sets; 2504 (100.0 %) tied" in r.stderr


def test_merge_sums_the_gpu_tables(runner, fakes):
    """`strata merge` of two runs (or ranks): a kernel's launches, total, minimum,
    maximum, and the mean and standard deviation of all its launches; the copies'
    counts and bytes; the activities and the share tied to their launch."""
    lib = best(fakes)
    runs, durations = [], []
    for n in (1000, 1500):
        out = runner.dir / f"run{n}"
        r = runner.run([STRATA, "run", "--gpu", "-o", str(out), "--", str(lib / "launch"), str(n)],
                       env=gpu_env(lib))
        assert r.returncode == 3, r.describe()
        runs.append(str(out))
        durations += [20000 + (i % 3) * 1000 for i in range(n)]
    r = runner.run([STRATA, "merge", "--format", "text,json", "-o", str(runner.dir / "merged"),
                    *runs])
    assert r.returncode == 0, r.describe()
    gpu = load_profile(runner.dir / "merged")["gpu"]
    assert gpu["activities"] == 2500 + 8 and gpu["attributed"] == 2500 + 8
    kernels = {k["name"]: k for k in gpu["kernels"]}
    mm = kernels["matmul(float*, float*, float*, int)"]
    mean = sum(durations) / len(durations)
    assert (mm["count"], mm["total_ns"], mm["min_ns"], mm["max_ns"]) == \
        (2500, sum(durations), 20000, 22000)
    assert mm["mean_ns"] == pytest.approx(mean)
    assert mm["stddev_ns"] == pytest.approx(
        (sum((d - mean) ** 2 for d in durations) / len(durations)) ** 0.5)
    assert kernels["reduce_kernel"]["count"] == 2
    assert [k["total_ns"] for k in gpu["kernels"]] == \
        sorted((k["total_ns"] for k in gpu["kernels"]), reverse=True)
    copies = {c["direction"]: c for c in gpu["copies"]}
    assert copies["HtoD"]["count"] == 2 and copies["HtoD"]["bytes"] == 2 << 20
    assert "| 2500 |" in (runner.dir / "merged" / "gpu_kernels.txt").read_text().replace(
        "  ", " ").replace("  ", " ")


@pytest.mark.parametrize("nested", ["0", "1"])
def test_native_trace_tracks_flows_and_clock(runner, fakes, nested):
    """A track per stream; each kernel a slice there, ending the flow its launch
    started on the CPU thread (one flow a launch, also when the runtime's launch makes
    a driver launch of its own inside it: nested); the GPU clock (another base than
    strata's: the stand-in adds 10^15 ns) converted so that a kernel starts just after
    its launch."""
    need_schema()
    lib = best(fakes)
    r = runner.run([STRATA, "run", "--gpu", "--", str(lib / "launch"), str(N)],
                   env=gpu_env(lib, FAKE_CUPTI_NESTED=nested))
    assert r.returncode == 3, r.describe()
    res = find_results(runner.dir)
    t = decode(res / "trace.pftrace")
    api_tracks = [name for name in t.gpu_slices if name.startswith("CUDA API thread ")]
    assert len(api_tracks) == 1, list(t.gpu_slices)  # the program launches from one thread
    calls = t.gpu_slices.pop(api_tracks[0])
    assert set(t.gpu_slices) == {"GPU 0 stream 7", "GPU 0 stream 13", "GPU 0 stream 0"}
    s7 = t.gpu_slices["GPU 0 stream 7"]
    assert len(s7) == N + 1
    assert sum(1 for s in s7 if s[0] == "matmul(float*, float*, float*, int)") == N
    assert {s[0] for s in t.gpu_slices["GPU 0 stream 13"]} == {"memcpy HtoD", "memset"}
    err = load_profile(res)["gpu"]["clock_error_ns"]
    assert 0 <= err < 1e6
    for stream in t.gpu_slices.values():
        for i, (name, begin, end, ends) in enumerate(sorted(stream, key=lambda s: s[1])):
            assert len(ends) == 1 and ends[0] in t.flows, name
            tid, at, api = t.flows[ends[0]]
            assert api in ("cudaLaunchKernel", "cuLaunchKernel", "cudaMemcpyAsync",
                           "cudaMemsetAsync", "cudaMemcpy")
            # the stand-in starts work 1 us after its launch, or when the stream is
            # free: converted, never before the launch (but for the conversion's
            # error), and the first of a stream within microseconds of it
            assert begin - at >= -2 * err - 1000, (name, begin - at)
            if i == 0:
                assert begin - at <= 200_000, (name, begin - at)
            # durations through the conversion's slope (1 less some parts per million)
            assert any(abs(end - begin - d) <= 2 + d * 1e-4
                       for d in (20000, 21000, 22000, 5000, 100000, 2000, 4000)), end - begin
    assert len(t.flows) == N + 4
    assert load_profile(res)["gpu"]["attributed"] == N + 4
    # every API call a slice of its thread's API track (a driver launch inside its
    # runtime launch when nested), and each launch's flow starts inside its call's
    names = [c[0] for c in calls]
    # step()'s N runtime launches (each with a driver launch inside when nested) and
    # reduce()'s driver launch
    assert names.count("cudaLaunchKernel") == N, sorted(set(names))
    assert names.count("cuLaunchKernel") == (N + 1 if nested == "1" else 1)
    assert {"cudaMemcpyAsync", "cudaMemsetAsync"} <= set(names)
    by_name = {}
    for name, begin, end, _ in calls:
        assert end >= begin
        by_name.setdefault(name, []).append((begin, end))
    for tid, at, api in t.flows.values():
        spans = by_name[api]
        assert any(b - 2 * err - 1000 <= at <= e + 2 * err + 1000 for b, e in spans), (api, at)
    if nested == "1":  # each runtime launch holds its driver launch
        outer = sorted(by_name["cudaLaunchKernel"])
        for b, e in by_name["cuLaunchKernel"][:-1]:  # (the last: reduce()'s own)
            assert any(ob <= b < e <= oe for ob, oe in outer), (b, e)


def test_buffers_are_bounded(runner, fakes):
    """A CUPTI slow to hand buffers back: strata lends its 16 and no more, CUPTI drops
    what it cannot write and strata counts it; the program never waits."""
    lib = best(fakes)
    # (no timeline: the API calls' records would share the buffers)
    r = runner.run([STRATA, "run", "--gpu", "--", str(lib / "launch"), "30000"],
                   env=gpu_env(lib, FAKE_CUPTI_HOLD="1", STRATA_PRINT_TABLES="OFF",
                               STRATA_TRACE="OFF"))
    assert r.returncode == 3 and r.stdout == "launched 30001\n", r.describe()
    gpu = load_profile(find_results(runner.dir))["gpu"]
    # the stand-in fills a buffer with 1000 launches (fake_flush) and holds it
    assert gpu["activities"] == 16 * 1000 + 2  # and the copy and set of upload()
    assert gpu["activities"] + gpu["dropped"] == 30000 + 4
    assert gpu["attributed"] == gpu["activities"]
    assert f"[strata] {gpu['dropped']} GPU activity records were lost" in r.stderr


PY = """
import ctypes
import sys
import threading

lib = ctypes.CDLL(sys.argv[1])
lib.fake_launch.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint64]
lib.fake_copy.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32,
                          ctypes.c_uint64]
launched = 0

def train_step():
    global launched
    lib.fake_launch(b"cudaLaunchKernel", b"_Z4gemmILi128EEvPKfS1_Pfi", 7, 30000)
    launched += 1

def load_batch():
    lib.fake_copy(b"cudaMemcpyAsync", 1, 1 << 20, 7, 50000)

def worker():
    for i in range(200):
        lib.fake_launch(b"cudaLaunchKernel_v7000", b"worker_kernel", 9, 1000)  # versioned

t = threading.Thread(target=worker)
t.start()
for i in range(3000):
    if i % 100 == 0:
        load_batch()
    train_step()
t.join()
print("launched", launched)
"""


def test_python_program(runner, fakes):
    """Under strata python: each kernel's GPU time on the Python function that
    launched it; >= 99 % of launches attributed (here all)."""
    lib = best(fakes)
    runner.write("train.py", PY)
    r = runner.strata("--gpu", "--", "train.py", str(lib / "libcupti.so"),
                      env=gpu_env(lib, STRATA_PRINT_TABLES="OFF"))
    assert r.returncode == 0, r.describe()
    assert r.stdout == "launched 3000\n" and "warning" not in r.stderr
    res = find_results(runner.dir)
    gpu = load_profile(res)["gpu"]
    assert gpu["activities"] == 3230
    assert gpu["attributed"] / gpu["activities"] >= 0.99
    assert [(k["name"], k["count"]) for k in gpu["kernels"]] == \
        [("void gemm<128>(float const*, float const*, float*, int)", 3000),
         ("worker_kernel", 200)]
    own = gpu_times(res)
    assert own["train_step"] == 3000 * 30000
    assert own["load_batch"] == 30 * 50000
    assert own["worker"] == 200 * 1000  # on the thread that launched them
    # strata report renders the profile again, gpu_time and all
    r = runner.run([STRATA, "report", str(res)])
    assert r.returncode == 0, r.describe()
    assert "GPU TIME OF THE KERNELS, COPIES AND SETS THE CALL LAUNCHED" in r.stdout
    assert re.search(r"\btrain_step\s.*\|\s*90000000\s*\|", r.stdout), r.stdout


def test_python_without_trace(runner, fakes):
    """No timeline: the tables and gpu_time all the same, no slices kept."""
    lib = best(fakes)
    runner.write("train.py", PY)
    env = gpu_env(lib, STRATA_TRACE="OFF", STRATA_USE_CUPTI="ON", STRATA_PRINT_TABLES="OFF")
    r = runner.strata("--", "train.py", str(lib / "libcupti.so"), env=env)
    assert r.returncode == 0, r.describe()
    res = find_results(runner.dir)
    assert not (res / "trace.pftrace").exists()
    assert gpu_times(res)["train_step"] == 3000 * 30000
    assert (res / "gpu_kernels.txt").exists()


EXIT = """
import sys
print("ran")
sys.exit(4)
"""


def one_warning(r) -> str:
    lines = [line for line in r.stderr.splitlines() if "strata: warning:" in line]
    assert len(lines) == 1, r.stderr
    assert "strata: error" not in r.stderr
    return lines[0]


def no_gpu_results(runner):
    res = find_results(runner.dir)
    assert not (res / "gpu_kernels.txt").exists() and not (res / "gpu_time.txt").exists()
    assert "gpu" not in load_profile(res)


def test_no_libcupti(runner):
    runner.write("s.py", EXIT)
    r = runner.strata("--gpu", "--", "s.py", env={"STRATA_CUPTI_LIBRARY": "/nonexistent/libcupti.so",
                                                    "STRATA_OUTPUT_FORMATS": "text,json"})
    assert r.returncode == 4 and r.stdout == "ran\n", r.describe()
    assert "cannot load CUPTI from '/nonexistent/libcupti.so'" in one_warning(r)
    no_gpu_results(runner)


@pytest.mark.skipif(REAL_CUPTI is None, reason="no CUDA toolkit's libcupti.so installed")
def test_real_libcupti_without_driver(runner):
    """The toolkit's libcupti on a machine with no GPU driver: one line, the run goes
    on."""
    if Path("/usr/lib/x86_64-linux-gnu/libcuda.so.1").exists():
        pytest.skip("an NVIDIA driver is installed here")
    runner.write("s.py", EXIT)
    r = runner.strata("--gpu", "--", "s.py", env={"STRATA_CUPTI_LIBRARY": str(REAL_CUPTI),
                                                    "STRATA_OUTPUT_FORMATS": "text,json"})
    assert r.returncode == 4 and r.stdout == "ran\n", r.describe()
    assert "no NVIDIA driver" in one_warning(r)
    no_gpu_results(runner)


@pytest.mark.parametrize("where, words", [
    ("subscribe", "another CUPTI subscriber (Nsight Systems or Nsight Compute?)"),
    ("enable", "another CUPTI client (Nsight Systems or Nsight Compute?)"),
])
def test_another_subscriber(runner, fakes, where, words):
    """CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (Nsight holds CUPTI): one line."""
    lib = best(fakes)
    r = runner.run([STRATA, "run", "--gpu", "--", str(lib / "launch"), "10"],
                   env=gpu_env(lib, FAKE_CUPTI_FAIL=where))
    assert r.returncode == 3 and r.stdout == "launched 11\n", r.describe()
    assert words in one_warning(r)
    no_gpu_results(runner)


def test_bad_setting(runner):
    runner.write("s.py", EXIT)
    r = runner.strata("--", "s.py", env={"STRATA_USE_CUPTI": "maybe"})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("strata: error:") and "STRATA_USE_CUPTI" in r.stderr
