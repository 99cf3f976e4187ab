"""Regions of a program's own, timed: `region`, `timing` and `summary`.

    with strata.region("assemble"):      # a block
        ...

    @strata.region("solve")              # every call of a function
    def solve(): ...

    strata.timing("solve")               # seconds spent in it, all calls
    strata.timing("solve", total=False)  # seconds a call, on average
    strata.summary()                     # the table of every region

PyOP2's timed_region, timed_function, timing and summary in strata's names (and
STRATA_PRINT_SUMMARY=1 prints the table at exit, as PYOP2_PRINT_SUMMARY does). The
timings are kept here, with or without strata; under `strata python` each region is
also a call of its own in the call tree, tables, traces and reports, with the
functions it calls under it; under `strata run -- python ...` a region of the
native profile, beside the C, C++ and Fortran regions.
"""
import atexit
import os
import sys
import time
# _thread, not threading: importing threading (and the collections and functools it
# pulls in) would add about 5 ms to the start of every program run under strata.
from _thread import _local, allocate_lock

from . import _strata

__all__ = ["region", "timing", "summary"]

_lock = allocate_lock()
_stats = {}            # name -> [calls, seconds]
_open = _local()


def _native_api():
    """Under `strata run -- python ...`, the preloaded library's region calls (the
    interpreter's regions then land in the native profile), else None."""
    if os.environ.get("_STRATA_MODE") != "run":
        return None, None
    try:
        import ctypes

        lib = ctypes.CDLL(None)
        push, pop = lib.strata__push, lib.strata__pop
        push.argtypes, push.restype = [ctypes.c_char_p], None
        pop.argtypes, pop.restype = [], None
        return push, pop
    except (OSError, AttributeError):
        return None, None


_native_push, _native_pop = _native_api()


class region:
    """A named region: `with region(name):` or `@region(name)`."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = str(name)

    def __enter__(self):
        stack = getattr(_open, "stack", None)
        if stack is None:
            stack = _open.stack = []
        token = [self.name]  # identifies this entry (nested and recursive ones apart)
        _strata.region_enter(self.name, token)
        if _native_push:
            _native_push(self.name.encode())
        stack.append((token, time.perf_counter()))
        return self

    def __exit__(self, *exc):
        token, t0 = _open.stack.pop()
        elapsed = time.perf_counter() - t0
        if _native_pop:
            _native_pop()
        _strata.region_exit(token)
        with _lock:
            s = _stats.setdefault(self.name, [0, 0.0])
            s[0] += 1
            s[1] += elapsed
        return False

    def __call__(self, fn):
        name = self.name

        def timed(*args, **kwargs):
            with region(name):
                return fn(*args, **kwargs)

        # what functools.wraps copies, without calling into functools (whose
        # calls would show in the program's profile)
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            try:
                setattr(timed, attr, getattr(fn, attr))
            except AttributeError:
                pass
        timed.__dict__.update(getattr(fn, "__dict__", {}))
        timed.__wrapped__ = fn
        return timed


def timing(name, total=True):
    """Seconds spent in region `name`: over all its calls (total), or a call on
    average (total=False); 0.0 for a region that never ran."""
    with _lock:
        calls, secs = _stats.get(str(name), (0, 0.0))
    if total:
        return secs
    return secs / calls if calls else 0.0


def summary(file=None):
    """Prints every region's calls, total and mean seconds, the longest first."""
    out = file if file is not None else sys.stderr
    with _lock:
        rows = sorted(_stats.items(), key=lambda kv: -kv[1][1])
    width = max([len("REGION")] + [len(n) for n, _ in rows])
    out.write(f"{'REGION':<{width}}  {'CALLS':>8}  {'TOTAL (s)':>12}  {'MEAN (s)':>12}\n")
    for name, (calls, secs) in rows:
        out.write(f"{name:<{width}}  {calls:>8}  {secs:>12.6f}  {secs / calls:>12.6f}\n")
    out.flush()


def _summary_at_exit():
    """STRATA_PRINT_SUMMARY: the session's setting under strata (environment or
    config file), else the environment's, read at exit (reading the settings when
    strata is imported would report their mistakes twice)."""
    try:
        if _strata.state()["live"]:
            wanted = _strata.get("print_summary")
        else:
            v = os.environ.get("STRATA_PRINT_SUMMARY", "").strip().lower()
            wanted = v in ("1", "on", "true", "yes")
    except Exception:  # a bad value was reported when the settings were read
        wanted = False
    if wanted and _stats:
        summary()


atexit.register(_summary_at_exit)
