"""The signal-safe Python frame walker (src/python/frames.h, issue 11): on the running
interpreter its load check passes, and the frames it copies (code object, instruction
index) are exactly the interpreter's own, through C -> Python re-entries, generators,
coroutines, threads and deep recursion; in a signal handler it walks the interrupted
thread's frames.
"""

from __future__ import annotations

# Prints "ok" when every check in the script holds, else the first difference.
COMPARE = """
    import sys
    import strata._strata as s

    def chain():
        \"\"\"(code, index) of the interpreter's frames, innermost first, from the caller.\"\"\"
        f = sys._getframe(1)
        out = []
        while f is not None:
            out.append((f.f_code, f.f_lasti // 2 if f.f_lasti >= 0 else -1))
            f = f.f_back
        return out

    def check(label):
        walked = s._pyframes()
        api = chain()
        # the innermost frame ran on between the two calls: compare its code only
        if [c for c, _ in walked] != [c for c, _ in api] or walked[1:] != api[1:]:
            print(label, "differs:", walked, api)
            raise SystemExit(1)
        return len(walked)
"""


def run_script(runner, body: str):
    runner.write("w.py", COMPARE + body)
    res = runner.plain("w.py")
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.describe()
    return res


def test_walk_matches_the_interpreter(runner):
    """Plain calls, C -> Python re-entry (sorted's key), a generator, a coroutine, a
    class body and __init__, a lambda and a comprehension."""
    run_script(runner, """
    def plain():
        return check("plain")

    def reenter():
        return sorted([2, 1], key=lambda x: check("key") + x)

    def gen():
        yield check("generator")

    async def coro():
        return check("coroutine")

    class K:
        def __init__(self):
            self.n = check("__init__")
        depth = check("class body")

    assert plain() >= 2
    reenter()
    next(gen())
    try:
        coro().send(None)
    except StopIteration:
        pass
    K()
    [check("comprehension") for _ in range(1)]
    print("ok")
    """)


def test_walk_in_threads_and_deep(runner):
    """Another thread walks its own frames; a recursion 200 deep is walked whole."""
    run_script(runner, """
    import threading

    def deep(n):
        return deep(n - 1) if n else check("deep")

    assert deep(200) > 200
    errors = []

    def body():
        try:
            deep(20)
        except SystemExit:
            errors.append(1)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert not errors
    print("ok")
    """)


def test_walk_in_a_signal_handler(runner):
    """A walk in a Python-level signal handler sees the handler over the interrupted
    frames, as the interpreter does."""
    run_script(runner, """
    import signal

    seen = []

    def handler(signum, frame):
        seen.append(check("handler"))

    signal.signal(signal.SIGALRM, handler)

    def busy():
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        while not seen:
            pass

    busy()
    assert seen and seen[0] >= 3
    print("ok")
    """)


def test_walk_is_cut_at_the_array(runner):
    """A recursion deeper than the walker's array: the innermost 256 frames, no error."""
    runner.write("w.py", """
    import sys
    import strata._strata as s
    sys.setrecursionlimit(5000)

    def deep(n):
        return deep(n - 1) if n else s._pyframes()

    got = deep(1000)
    assert len(got) == 256 and all(c is deep.__code__ for c, _ in got), len(got)
    print("ok")
    """)
    res = runner.plain("w.py")
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.describe()


def test_walk_after_fork(runner):
    """A forked child walks its own frames (the walker reads the child's memory)."""
    run_script(runner, """
    import os

    def child():
        return check("child")

    check("parent")
    pid = os.fork()
    if pid == 0:
        child()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0, status
    print("ok")
    """)


def test_walk_from_a_sigprof_handler(runner):
    """The walker in a C SIGPROF handler interrupting calls, returns, generators,
    exceptions and C -> Python re-entries: no crash, and nearly every walk passes its
    checks (a walk may fail one only in the few instructions where the interpreter
    enters its eval loop)."""
    runner.write("w.py", """
    import time
    import strata._strata as s

    def f(n):
        return n if n < 2 else f(n - 1) + f(n - 2)

    def gen(n):
        for i in range(n):
            yield f(i % 8)

    def boom(n):
        try:
            raise ValueError(n)
        except ValueError:
            return n

    s._pyframes_sigtest(1000)
    end = time.process_time() + 1.0
    while time.process_time() < end:
        sum(gen(50))
        sorted(range(50), key=lambda x: boom(x) % 7)
        f(12)
    ok, bad = s._pyframes_sigtest(0)
    assert ok >= 50 and bad * 20 <= ok, (ok, bad)
    print("ok", ok, bad)
    """)
    res = runner.plain("w.py")
    assert res.returncode == 0 and res.stdout.startswith("ok"), res.describe()


def test_code_check_wants_the_whole_object(runner):
    """The sampler takes a reference to a code object found by its address only where
    the memory is one. On 3.11 a sampled code object can die before the sampler holds
    it, and its memory be reused: a block whose first two words read as a code
    object's (a small count, the code type) but whose fields are not the objects a
    code object holds passes the header's check, not the whole object's. (A pytest
    run sampled under callgrind held such a block and crashed naming it.)"""
    runner.write("w.py", """
    import ctypes, struct, types
    import strata._strata as s

    def f(a, b=2):
        return a + b

    code = f.__code__
    assert s._pycode_check(id(code)) == (1, 1), s._pycode_check(id(code))
    assert s._pycode_check(id(f)) == (0, 0)

    size = type(code).__basicsize__
    image = bytearray(ctypes.string_at(id(code), size))
    image[0:8] = struct.pack("<Q", 1)  # a small count over the first word

    def judged(img):
        buf = ctypes.create_string_buffer(bytes(img), len(img))
        return s._pycode_check(ctypes.addressof(buf))

    def with_word(img, old, new):
        out = bytearray(img)
        at = out.find(struct.pack("<Q", old))
        assert at > 0 and at % 8 == 0, at
        out[at:at + 8] = struct.pack("<Q", new)
        return out

    # its name not an object, or an object of another type: the header alone passes
    assert judged(with_word(image, id(code.co_name), 0x4141414141414140)) == (1, 0)
    assert judged(with_word(image, id(code.co_name), id([]))) == (1, 0)
    assert judged(with_word(image, id(code.co_consts), id(code.co_name))) == (1, 0)
    # nothing past the header
    assert judged(image[:16] + bytes(size - 16)) == (1, 0)
    # not a code object's header at all
    assert judged(bytes(size)) == (0, 0)
    print("ok")
    """)
    res = runner.plain("w.py")
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.describe()
