"""The program runs as it would without strata.

Each case runs a script twice in the same folder: with plain ``python`` and under strata
(``strata python`` and, for some, ``python -m strata``) with STRATA_PRINT_TABLES=OFF, so
that standard error is the program's own. Standard output, standard error (tracebacks
included) and the exit status must be identical. When the program's end lets strata
write (everything but SIGKILL and other fatal signals; SIGTERM and os._exit included),
profile.json and trip_count.txt must exist and parse, and the call tree must have the
right shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest

from conftest import find_results, load_profile, read_table

FINAL = """
def final_marker():
    pass
"""


@dataclass
class Case:
    files: dict  # relative path -> source (str, or bytes written as they are)
    argv: list  # what follows `python` (and `strata python --`)
    expect_rc: int = 0  # plain python's exit status (checks the script itself)
    input: str | None = None
    profiled: bool = True  # strata can write results at the end
    check: Callable | None = None  # check(table, results, runner)
    both_forms: bool = False  # also run through `python -m strata`
    timeout: int | None = None


CASES: dict[str, Case] = {}


def case(name, **kw):
    assert name not in CASES, f"two cases named {name}"

    def deco(check):
        CASES[name] = Case(check=check, **kw)
        return check
    return deco


def ends_clean(table):
    """The tree came back to the top: final_marker, called last at module level, is a
    root of the main thread."""
    row = table.get("final_marker")
    assert row is not None and row.count == 1, f"final_marker is not a root:\n{table.text}"


# ---------------------------------------------------------------------------- the cases


@case("exceptions_caught", argv=["exc.py"], both_forms=True, files={"exc.py": """
import sys

def thrower():
    raise ValueError("boom")

def mid(k):
    if k == 0:
        thrower()
    else:
        mid(k - 1)

def after():
    pass

def catcher(k):
    try:
        mid(k)
    except ValueError as e:
        print("caught at depth", k, e)
    after()

def reraiser():
    try:
        thrower()
    except ValueError:
        raise KeyError("re")

def finally_user():
    try:
        return thrower()
    finally:
        after()

def c_raiser():
    return int("not a number")

def main():
    for k in range(4):
        catcher(k)
    try:
        reraiser()
    except KeyError as e:
        print("caught", repr(e), repr(e.__context__))
    try:
        finally_user()
    except ValueError:
        print("finally ran")
    try:
        [1][5]
    except IndexError as e:
        print("index", e)
    try:
        c_raiser()
    except ValueError as e:
        print("C raised", e)
    after()
    print("stderr line", file=sys.stderr)

main()
""" + FINAL + "final_marker()\n"})
def _(table, results, runner):
    ends_clean(table)
    g = table.get
    assert g("main", "catcher").count == 4
    assert g("main", "catcher", "mid").count == 4
    assert g("main", "catcher", "mid", "thrower").count == 1
    assert g("main", "catcher", "mid", "mid").count == 3
    assert g("main", "catcher", "mid", "mid", "thrower").count == 1
    assert g("main", "catcher", "mid", "mid", "mid", "mid", "thrower").count == 1
    assert g("main", "catcher", "after").count == 4
    assert g("main", "reraiser", "thrower").count == 1
    assert g("main", "finally_user", "thrower").count == 1
    assert g("main", "finally_user", "after").count == 1
    assert g("main", "c_raiser").count == 1
    assert g("main", "after").count == 1
    assert {r.name for r in table.roots(0)} >= {"main", "final_marker"}


@case("generators", argv=["gen.py"], files={"gen.py": """
def inner_leaf(x):
    return x

def gen(n):
    for i in range(n):
        yield inner_leaf(i)

def consume():
    return sum(gen(5))

def delegating():
    yield from gen(3)
    return "done"

def use_send():
    def acc():
        total = 0
        while True:
            x = yield total
            total += x
    g = acc()
    next(g)
    out = [g.send(i) for i in range(4)]
    g.close()
    return out

def thrower_gen():
    try:
        yield 1
    except ValueError:
        yield "handled"

def use_throw():
    g = thrower_gen()
    next(g)
    print(g.throw(ValueError))
    g.close()

def abandoned():
    g = gen(10)
    next(g)
    del g

def after():
    pass

def main():
    print(consume())
    print(list(delegating()))
    print(use_send())
    use_throw()
    abandoned()
    print(sum(x * x for x in range(10)))
    after()

main()
""" + FINAL + "final_marker()\n"})
def _(table, results, runner):
    ends_clean(table)
    assert table.get("main", "consume", "gen", "inner_leaf").count == 5
    assert table.get("main", "delegating", "gen", "inner_leaf").count == 3
    assert table.get("main", "after").count == 1
    assert table.get("main", "use_send") is not None


@case("asyncio", argv=["aio.py"], files={"aio.py": """
import asyncio

def leaf():
    pass

def blocking():
    return 42

async def sub(i):
    await asyncio.sleep(0)
    leaf()
    return i

async def failing():
    await asyncio.sleep(0)
    raise RuntimeError("task failed")

async def amain():
    print("gathered", await asyncio.gather(sub(1), sub(2), sub(3)))
    try:
        await failing()
    except RuntimeError as e:
        print("caught", e)
    res = await asyncio.gather(failing(), sub(4), return_exceptions=True)
    print([type(x).__name__ for x in res])
    print("executor", await asyncio.get_running_loop().run_in_executor(None, blocking))

def after():
    pass

def main():
    asyncio.run(amain())
    after()

main()
""" + FINAL + "final_marker()\n"})
def _(table, results, runner):
    ends_clean(table)
    leaves = [r for r in table.named("leaf") if r.parent is not None and r.parent.name == "sub"]
    assert sum(r.count for r in leaves) == 4, table.text
    assert table.get("main", "after").count == 1
    blocking = table.named("blocking")
    assert blocking and all(r.thread != 0 for r in blocking), table.text


@case("recursion_5000", argv=["deep.py"], timeout=120, files={"deep.py": """
import sys
sys.setrecursionlimit(20000)

def deep(n):
    return 0 if n == 0 else 1 + deep(n - 1)

def main():
    print(deep(4999))

main()
""" + FINAL + "final_marker()\n"})
def _(table, results, runner):
    ends_clean(table)
    # rows stop at depth 256; the 4,744 calls deeper are one folded row (formats.md)
    rows = table.named("deep")
    assert len(rows) == 256
    assert all(r.count == 1 for r in rows)
    assert max(r.depth for r in rows) == 256
    folded = [r for r in table.rows if r.name.startswith("... ")]
    assert len(folded) == 1 and folded[0].count == 5000 - 256 and folded[0].depth == 257, folded
    prof = load_profile(results)
    assert sum(n["label"] == "deep" for th in prof["threads"] for n in th["nodes"]) == 5000


@case("recursion_error_caught", argv=["rec.py"], files={"rec.py": """
def blow(n):
    return blow(n + 1)

def after():
    pass

def main():
    try:
        blow(0)
    except RecursionError:
        print("recursion error caught")
    after()

main()
""" + FINAL + "final_marker()\n"})
def _(table, results, runner):
    ends_clean(table)
    assert table.get("main", "after").count == 1
    assert table.get("main", "blow").count == 1


@case("threads", argv=["thr.py"], both_forms=True, files={"thr.py": """
import threading

def leaf():
    pass

def worker_a():
    for _ in range(3):
        leaf()
    print("worker_a done")

def worker_b():
    for _ in range(5):
        leaf()
    print("worker_b done")

def main():
    for target in (worker_a, worker_b):
        t = threading.Thread(target=target)
        t.start()
        t.join()
    leaf()
    print("threads done")

main()
""" + FINAL + "final_marker()\n"})
def _(table, results, runner):
    ends_clean(table)
    assert table.get("main", "leaf", thread=0).count == 1
    assert table.get("worker_a", thread=1).count == 1, table.text
    assert table.get("worker_a", "leaf", thread=1).count == 3
    assert table.get("worker_b", thread=2).count == 1
    assert table.get("worker_b", "leaf", thread=2).count == 5
    assert table.threads() == [0, 1, 2]
    assert not [r for r in table.rows if r.thread == 0 and r.name.startswith("worker_")]
    # threads are listed in order, each one's rows together
    order = [r.thread for r in table.rows]
    assert order == sorted(order), table.text


@case("daemon_thread_still_running", argv=["daemon.py"], files={"daemon.py": """
import threading

started = threading.Event()
never = threading.Event()

def blocked():
    never.wait()

def daemon_main():
    started.set()
    blocked()

t = threading.Thread(target=daemon_main, daemon=True)
t.start()
started.wait()
print("main done")
""" + FINAL + "final_marker()\n"})
def _(table, results, runner):
    ends_clean(table)
    assert table.get("daemon_main", thread=1).count == 1, table.text
    assert table.get("daemon_main", "blocked", thread=1).count == 1


@case("thread_uncaught_exception", argv=["thrash.py"], files={"thrash.py": """
import threading

def bad():
    raise ValueError("in thread")

t = threading.Thread(target=bad, name="worker")
t.start()
t.join()
print("main continues")
""" + FINAL + "final_marker()\n"})
def _(table, results, runner):
    ends_clean(table)
    assert table.get("bad", thread=1).count == 1


@case("sys_exit_3", argv=["ex3.py"], expect_rc=3, both_forms=True, files={"ex3.py": """
import sys

def cleanup():
    print("finally ran")

def leave():
    try:
        sys.exit(3)
    finally:
        cleanup()

print("start")
leave()
print("not reached")
"""})
def _(table, results, runner):
    assert table.get("leave", "cleanup").count == 1


@case("sys_exit_message", argv=["exmsg.py"], expect_rc=1, files={"exmsg.py": """
import sys

def fail():
    sys.exit("fatal: giving up")

fail()
"""})
def _(table, results, runner):
    assert table.get("fail").count == 1


@case("sys_exit_none", argv=["exnone.py"], expect_rc=0, files={"exnone.py": """
import sys
print("bye")
sys.exit()
"""})
def _(table, results, runner):
    pass


@case("uncaught_exception", argv=["unc.py"], expect_rc=1, both_forms=True, files={"unc.py": """
def inner():
    raise ValueError("bad value")

def middle():
    try:
        inner()
    except ValueError as e:
        raise RuntimeError("wrapped") from e

def outer():
    middle()

print("before")
outer()
"""})
def _(table, results, runner):
    assert table.get("outer", "middle", "inner").count == 1


@case("uncaught_simple", argv=["unc0.py"], expect_rc=1, files={"unc0.py": """
def fail():
    return 1 / 0

print("before")
fail()
"""})
def _(table, results, runner):
    assert table.get("fail").count == 1


@case("uncaught_implicit_chain", argv=["unc2.py"], expect_rc=1, files={"unc2.py": """
class Custom(Exception):
    pass

def handler():
    d = {}
    try:
        d["missing"]
    except KeyError:
        raise Custom("while handling")

handler()
"""})
def _(table, results, runner):
    assert table.get("handler").count == 1


@case("syntax_error", argv=["bad_syntax.py"], expect_rc=1, profiled=False, files={
    "bad_syntax.py": "print('x')\ndef broken(:\n    pass\n"})
def _(table, results, runner):
    pass


@case("keyboard_interrupt", argv=["kbi.py"], expect_rc=-2, both_forms=True, files={"kbi.py": """
def interrupted():
    raise KeyboardInterrupt

def main():
    print("about to interrupt", flush=True)
    interrupted()

main()
"""})
def _(table, results, runner):
    assert table.get("main", "interrupted").count == 1


@case("main_attributes", argv=["./attrs.py", "a b", "--flag", "-o", "x", "--"],
      both_forms=True, files={"attrs.py": '''
"""docstring of the script"""
import os
import pickle
import sys

import __main__

class Point:
    def __init__(self, x):
        self.x = x

print("__name__", __name__)
print("__file__", __file__)
print("__doc__", __doc__)
print("argv", sys.argv)
print("path0", sys.path[0])
print("main is me", __main__.__dict__ is globals())
print("main module file", getattr(sys.modules["__main__"], "__file__", None))
print("pickled", pickle.loads(pickle.dumps(Point(3))).x)
print("globals", sorted(k for k in globals() if not k.startswith("__")))
print("cwd", os.getcwd())
print("stdin closed", sys.stdin is None or sys.stdin.closed)
'''})
def _(table, results, runner):
    assert table.get("Point.__init__") is not None, table.text


@case("script_in_subfolder", argv=["sub/dir/attrs2.py", "x"], files={"sub/dir/attrs2.py": """
import sys
import helper_in_same_folder
print("__file__", __file__)
print("argv", sys.argv)
print("path0", sys.path[0])
print(helper_in_same_folder.value())
""", "sub/dir/helper_in_same_folder.py": """
def value():
    return "imported from the script's folder"
"""})
def _(table, results, runner):
    assert table.get("value") is not None


@case("stdin", argv=["stdin.py"], input="alice\nhello\nworld\n", both_forms=True,
      files={"stdin.py": """
import sys

def shout(line):
    return line.upper()

name = input("name? ")
print("hi", name)
data = sys.stdin.read()
for line in data.splitlines():
    print(shout(line))
print("lines", len(data.splitlines()))
"""})
def _(table, results, runner):
    assert table.get("shout").count == 2


@case("dash_m_module", argv=["-m", "pkg.mod", "x", "--y"], both_forms=True, files={
    "pkg/__init__.py": "print('pkg init', __name__)\n",
    "pkg/sibling.py": "def helper():\n    return 'helper'\n",
    "pkg/mod.py": """
import sys
from . import sibling
print("__name__", __name__)
print("__file__", __file__)
print("__package__", __package__)
print("__spec__.name", __spec__.name)
print("argv", sys.argv)
print("path0", sys.path[0])
print(sibling.helper())
"""})
def _(table, results, runner):
    assert table.get("helper").count == 1


@case("dash_m_package_main", argv=["-m", "pkg2", "arg"], files={
    "pkg2/__init__.py": "",
    "pkg2/__main__.py": """
import sys
def work():
    return sum(range(10))
print("__name__", __name__, "argv", sys.argv, "path0", sys.path[0])
print(work())
"""})
def _(table, results, runner):
    assert table.get("work").count == 1


# What the program can see of how it was started: __main__'s names and loader, the
# frames below it (sys._getframe, inspect, traceback, faulthandler, warnings'
# stacklevel) and the recursion depth it may use (issue 9 item 16).
INTROSPECT = """
import faulthandler
import inspect
import sys
import traceback
import warnings

def depth_reached(n=0):
    try:
        return depth_reached(n + 1)
    except RecursionError:
        return n

def work():
    return sum(range(10))

print("names", list(globals()))
print("loader", type(__loader__).__name__, getattr(__loader__, "name", None),
      getattr(__loader__, "path", None) == __file__)
print("spec", __spec__ and __spec__.name, "package", repr(__package__))
print("caller of the module", sys._getframe().f_back and sys._getframe().f_back.f_code.co_name)
print("inspect", [(f.function, f.lineno) for f in inspect.stack()])
traceback.print_stack(file=sys.stdout)
sys.stdout.flush()
faulthandler.dump_traceback(sys.stdout, all_threads=False)
warnings.warn("at module level", stacklevel=2)
print("recursion limit", sys.getrecursionlimit(), "depth reached", depth_reached())
sys.setrecursionlimit(60)
print("after a lower limit", depth_reached())
print(work())
"""


@case("main_module_like_plain", argv=["intro.py"], both_forms=True, files={"intro.py": INTROSPECT})
def _(table, results, runner):
    assert table.get("work").count == 1, table.text


@case("main_module_like_plain_dash_m", argv=["-m", "ipkg.intro"], both_forms=True,
      files={"ipkg/__init__.py": "", "ipkg/intro.py": INTROSPECT})
def _(table, results, runner):
    assert table.get("work").count == 1, table.text


# The script's frames lie where plain python puts them in the thread's frame memory
# (chunks of 16 KiB): not above the runner's, which would move them, and with them
# where a program's calls cross a chunk's end (a chunk mapped and unmapped each time).
FRAMES_MEMORY = """
from strata import _strata

def work(n):
    return _strata._datastack() if n == 0 else work(n - 1)

print("module", _strata._datastack())
print("nested", work(40))
print("deep", work(400))
"""


@case("frames_memory_like_plain", argv=["mem.py"], both_forms=True, files={"mem.py": FRAMES_MEMORY})
def _(table, results, runner):
    assert table.get("work").count == 2, table.text


# Arguments are bytes: any byte passes through to the script, as with plain python,
# the script's own name included (issue 9 item 13).
BYTES_ARGS = """
import os
import sys

def work():
    return 1

print([os.fsencode(a) for a in sys.argv])
print(os.fsencode(__file__).endswith(os.fsencode(sys.argv[0][-8:])))
work()
"""


@case("non_utf8_arguments", argv=["bytes.py", "\udcff\udcfe", "caf\udce9", "-o", "\udc80"],
      both_forms=True, files={"bytes.py": BYTES_ARGS})
def _(table, results, runner):
    assert table.get("work").count == 1, table.text


@case("non_utf8_script_name", argv=["sc\udcff.py", "x"], both_forms=True,
      files={"sc\udcff.py": BYTES_ARGS})
def _(table, results, runner):
    assert table.get("work").count == 1, table.text


# A strata.py or strata/ in the current directory (where `python -c` looks first)
# does not stand in for strata; the script's sys.path is plain python's (item 14).
SHADOW_MAIN = """
import sys

def work():
    return 2

print("path", sys.path)
print(work())
"""


@case("strata_py_in_current_directory", argv=["main.py"], files={
    "strata.py": "print('the wrong strata')\nraise SystemExit(3)\n", "main.py": SHADOW_MAIN})
def _(table, results, runner):
    assert table.get("work").count == 1, table.text


@case("strata_package_in_current_directory", argv=["main.py"], files={
    "strata/__init__.py": "print('the wrong strata')\nraise SystemExit(3)\n",
    "strata/_runner.py": "raise SystemExit(4)\n", "main.py": SHADOW_MAIN})
def _(table, results, runner):
    assert table.get("work").count == 1, table.text


@case("atexit_handlers", argv=["ae.py"], both_forms=False, files={"ae.py": """
import atexit
import sys

def handler(name):
    print("atexit", name)

def to_stderr():
    print("stderr from atexit", file=sys.stderr)

atexit.register(handler, "first")
atexit.register(handler, "second")
atexit.register(to_stderr)
print("main done")
"""})
def _(table, results, runner):
    pass


@case("fork", argv=["forker.py"], files={"forker.py": """
import os
import sys
import time

def child_work():
    print("child: working", flush=True)

def parent_work():
    print("parent: after child", flush=True)

def orphan_work():
    pass

def main():
    with open("parent.pid", "w") as f:
        f.write(str(os.getpid()))
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        child_work()
        sys.exit(7)  # a normal interpreter exit in the child
    _, status = os.waitpid(pid, 0)
    print("parent: child exit status", os.waitstatus_to_exitcode(status), flush=True)
    parent_work()
    parent = os.getpid()
    if os.fork() == 0:
        # outlive the parent, then exit normally: a profile written now would
        # replace the parent's
        deadline = time.monotonic() + 10
        while os.getppid() == parent and time.monotonic() < deadline:
            time.sleep(0.005)
        orphan_work()
        print("orphan: done", flush=True)
        sys.exit(0)

main()
"""})
def _(table, results, runner):
    names = table.names()
    assert "parent_work" in names and "main" in names
    assert "child_work" not in names and "orphan_work" not in names, table.text
    assert len(list((runner.dir).glob("strata-*-output/*"))) == 1


@case("large_unflushed_output", argv=["big.py"], files={"big.py": """
import sys
for i in range(20000):
    print("line", i)
sys.stderr.write("err without newline")
sys.stdout.write("out without newline")
"""})
def _(table, results, runner):
    pass


@case("warning", argv=["warn.py"], files={"warn.py": """
import warnings

def deprecated():
    warnings.warn("old api", DeprecationWarning, stacklevel=2)

def user():
    deprecated()

warnings.simplefilter("always")
user()
warnings.warn("plain warning")
"""})
def _(table, results, runner):
    assert table.get("user", "deprecated").count == 1


@case("os_exit", argv=["osexit.py"], expect_rc=5, files={"osexit.py": """
import os
def leaving():
    print("leaving", flush=True)
    print("unflushed, lost as without strata", end="")
    os._exit(5)
leaving()
"""})
def _(table, results, runner):
    # os._exit skips atexit: strata's wrapper writes first, the open call closed
    assert table.get("leaving").count == 1


@case("sigterm_self", argv=["term.py"], expect_rc=-15, files={"term.py": """
import os
import signal
import time
def terminate():
    print("terminating", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
terminate()
print("not reached")
"""})
def _(table, results, runner):
    # written on SIGTERM, then the process died by it (the status above)
    assert table.get("terminate").count == 1


@case("source_encoding", argv=["latin.py"], files={"latin.py": (
    b"# -*- coding: latin-1 -*-\n"
    b"def show():\n"
    b"    s = '\xe9t\xe9'\n"
    b"    print(len(s), ascii(s))\n"
    b"show()\n"
) + FINAL.encode() + b"final_marker()\n"})
def _(table, results, runner):
    # the script is compiled as python compiles it: its coding cookie is read
    assert table.get("show").count == 1
    ends_clean(table)


@case("byte_order_mark", argv=["bom.py"], files={"bom.py": (
    b"\xef\xbb\xbfdef show():\n    print('with a BOM')\nshow()\n"
)})
def _(table, results, runner):
    assert table.get("show").count == 1


@case("future_import", argv=["fut.py"], files={"fut.py": """
from __future__ import annotations

def typed(x: NotDefinedAnywhere) -> AlsoUndefined:
    return x

print(typed.__annotations__, typed(3))
"""})
def _(table, results, runner):
    # the script's own __future__ imports hold (its annotations stay strings)
    assert table.get("typed").count == 1


@case("null_byte", argv=["nul.py"], expect_rc=1, profiled=False, files={
    "nul.py": b"print('never')\nx = 1\0y\n"})
def _(table, results, runner):
    # python's own message: the line that holds the NUL byte, named
    pass


@case("modules_not_imported", argv=["mods.py"], files={"mods.py": """
import sys
names = ("threading", "ast", "collections", "functools", "runpy", "weakref")
print(sorted(m for m in names if m in sys.modules))
"""})
def _(table, results, runner):
    # strata imports none of them for the program: plain python's list, printed above
    pass


LATE_THREADS = """
import importlib

def work(n):
    return sum(range(n))

def main():
    {get}  # threading was not imported before: strata follows threads from here on
    ts = [threading.Thread(target=work, args=(1000,)) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("joined")

main()
"""


def three_workers(table, results, runner):
    """Each of the three threads started after threading's late import ran work()."""
    assert table.get("main").count == 1
    workers = [t for t in table.threads() if t != 0]
    assert len(workers) == 3, table.text
    for t in workers:
        assert table.get("work", thread=t).count == 1, table.text


# an import statement; importlib.import_module, which raises no "import" audit event
# (3.11's strata hears threading's module code run: "exec")
case("threads_after_late_import", argv=["late.py"],
     files={"late.py": LATE_THREADS.format(get="import threading")})(three_workers)
case("threads_after_import_module", argv=["late.py"], files={
    "late.py": LATE_THREADS.format(get='threading = importlib.import_module("threading")')
})(three_workers)


# ---------------------------------------------------------------------------- the tests

PARAMS = [pytest.param(name, "strata", id=f"{name}-strata") for name in CASES] + [
    pytest.param(name, "module", id=f"{name}-module") for name, c in CASES.items()
    if c.both_forms
]

QUIET = {"STRATA_PRINT_TABLES": "OFF", "STRATA_COMPONENTS": "trip_count"}


def compare(plain, prof, what=""):
    """Standard output, standard error and exit status are the same; reports every
    difference at once."""
    problems = []
    for stream in ("stdout", "stderr"):
        a, b = getattr(plain, stream), getattr(prof, stream)
        if a != b:
            problems.append(f"{stream} differs\n--- plain ---\n{a[-3000:]}\n--- strata ---\n"
                            f"{b[-3000:]}")
    if plain.returncode != prof.returncode:
        problems.append(f"exit status: plain {plain.returncode}, strata {prof.returncode}")
    if problems:
        raise AssertionError(f"{what} {prof.args}\n" + "\n".join(problems))


@pytest.mark.parametrize("name, form", PARAMS)
def test_same_as_plain_python(runner, name, form):
    c = CASES[name]
    for path, text in c.files.items():
        if isinstance(text, bytes):  # a source in another encoding, as it is
            (runner.dir / path).write_bytes(text)
        else:
            runner.write(path, text)
    kw = {"input": c.input}
    if c.timeout:
        kw["timeout"] = c.timeout
    plain = runner.plain(*c.argv, **kw)
    assert plain.returncode == c.expect_rc, plain.describe()
    prof = runner.front(form)("--", *c.argv, env=QUIET, **kw)
    # report both kinds of problem at once: the run differs, the profile is wrong
    problems = []
    try:
        compare(plain, prof)
    except AssertionError as e:
        problems.append(str(e))
    if c.profiled:
        try:
            results = find_results(runner.dir)
            load_profile(results)
            table = read_table(results, "trip_count")
            c.check(table, results, runner)
        except AssertionError as e:
            problems.append(f"profile: {e}")
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def test_script_arguments_without_double_dash(runner):
    """Without `--`, the words after the script are the script's, even when they look
    like strata's options."""
    runner.write("args.py", "import sys\nprint(sys.argv)\n")
    want = "['args.py', '-v', '3', '--bogus', '-E', '(', '-o', 'out', '--', 'x']\n"
    for i, run in enumerate((runner.strata, runner.module)):
        # each run gets its own results folder: two runs may start in the same second
        env = {**QUIET, "STRATA_OUTPUT_PATH": runner.dir / f"results{i}"}
        res = run("args.py", "-v", "3", "--bogus", "-E", "(", "-o", "out", "--", "x", env=env)
        assert res.returncode == 0 and res.stdout == want and res.stderr == "", res.describe()
        assert not (runner.dir / "out").exists()
        assert (runner.dir / f"results{i}" / "trip_count.txt").is_file()


def test_single_value_option_before_script(runner):
    """--components takes one value (a list is one word): the next word is the script."""
    runner.write("args.py", "import sys\nprint(sys.argv)\n")
    for i, run in enumerate((runner.strata, runner.module)):
        env = {"STRATA_PRINT_TABLES": "OFF", "STRATA_OUTPUT_PATH": runner.dir / f"results{i}"}
        res = run("--components", "trip_count", "args.py", "-o", "out", env=env)
        assert res.returncode == 0 and res.stdout == "['args.py', '-o', 'out']\n", res.describe()
        assert not (runner.dir / "out").exists()
        assert (runner.dir / f"results{i}" / "trip_count.txt").is_file()


@pytest.mark.parametrize("how", ["relative", "dot-slash", "absolute"])
def test_script_path_forms(runner, how):
    """__file__, sys.argv[0] and sys.path[0] follow the way the script was named."""
    runner.write("where.py", "import sys\nprint(__file__, sys.argv, sys.path[0])\n")
    arg = {"relative": "where.py", "dot-slash": "./where.py",
           "absolute": str(runner.dir / "where.py")}[how]
    plain = runner.plain(arg)
    for i, run in enumerate((runner.strata, runner.module)):
        env = {**QUIET, "STRATA_OUTPUT_PATH": runner.dir / f"results{i}"}
        compare(plain, run("--", arg, env=env), what=how)


def test_profile_off_runs_program_the_same(runner):
    runner.write("p.py", "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(4)\n")
    plain = runner.plain("p.py")
    compare(plain, runner.strata("--", "p.py", env={**QUIET, "STRATA_PROFILE": "OFF"}))
