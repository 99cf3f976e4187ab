"""Runs a script or module under the profiler as `python script.py` would run it.

The options are parsed in C (the same parser as the `strata` command). What is left
here is what only Python can do: make the __main__ module, set sys.argv and
sys.path, run the code, and give the program's own exit status, traceback and
signals back unchanged.
"""
import atexit
import builtins
import os
import sys
from _frozen_importlib_external import SourceFileLoader as _SourceFileLoader

from . import _strata
from .profiler import noprofile, profile

_HERE = os.path.dirname(os.path.abspath(__file__))
_interrupted = False
# The script's code object, kept until the results are written: the stack sampler
# names the code objects it sampled then, and the script's may be the last one.
_main_code = None


def _error(text):
    sys.stderr.write(f"strata: error: {text}\n")
    sys.stderr.flush()
    return 2


def _finalize():
    _strata.finalize()
    if _interrupted:
        # Plain Python ends by SIGINT after an uncaught KeyboardInterrupt.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        import signal

        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)


class _CannotStart(Exception):
    """The profiler cannot start (on 3.12+: no free sys.monitoring tool id)."""


def _start():
    try:
        _strata.start()
    except _strata.Error as e:
        raise _CannotStart(str(e)) from None


def _strip(tb):
    """The traceback without strata's own frames (the target's frames are cut off
    them: run_main)."""
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith(_HERE + os.sep):
            tb = tb.tb_next
        else:
            break
    return tb


class _SetupError(Exception):
    """The setup file cannot be run (a usage error)."""


def _compile(source, filename):
    """compile(source, filename, "exec") for a file's bytes, in C without the ast
    module's types, which the builtin makes first (about 1 ms that plain python does
    not spend on a script). A NUL byte is python's error for a file: the builtin's
    for a string names no line ("source code string cannot ..."), python's tokenizer
    stops at the line that holds it."""
    nul = source.find(b"\0")
    if nul >= 0:
        start = source.rfind(b"\n", 0, nul) + 1
        raise SyntaxError("source code cannot contain null bytes",
                          (filename, source.count(b"\n", 0, nul) + 1, None,
                           source[start:nul].decode("utf-8", "replace")))
    return _strata.compile_source(source, filename)


def _read_setup(path):
    """The setup file's code; a file that cannot be read or compiled is a usage
    error, found before anything runs or is written."""
    try:
        with open(path, "rb") as f:
            return _compile(f.read(), path)
    except OSError as e:
        raise _SetupError(f"cannot read setup file '{path}': {e.strerror}") from None
    except (SyntaxError, ValueError) as e:
        where = f" line {e.lineno}" if getattr(e, "lineno", None) else ""
        msg = getattr(e, "msg", None) or str(e)
        raise _SetupError(f"setup file '{path}'{where}: {type(e).__name__}: {msg}") from None


def _main_module():
    """A fresh __main__, with the names plain python gives one, in its order."""
    module = type(sys)("__main__")
    if sys.version_info < (3, 14):  # 3.14 makes module annotations lazily (PEP 649)
        module.__dict__["__annotations__"] = {}
    module.__dict__["__builtins__"] = builtins
    return module


def main(argv):
    """Runs `strata python` / `python -m strata` with argv, the words after it.

    The caller has taken the slot python gives the target at sys.path[0] off the
    path (unless -P or PYTHONSAFEPATH: then there is none); it is put back here, as
    plain python would fill it for the target."""
    global _interrupted, _main_code
    try:
        parsed = _strata.parse_cli(list(argv))
    except _strata.Error as e:
        return _error(e)
    if parsed is None:  # --help
        return 0
    target, args = parsed["target"], parsed["args"]
    safe_path = sys.flags.safe_path

    if parsed["is_module"]:
        # Found (and its parent packages imported) before profiling starts, as
        # `python -m` does before running the module.
        if not safe_path:
            sys.path.insert(0, os.getcwd())
        import runpy
        try:
            details = runpy._get_module_details(target)
        except Exception as e:  # runpy's ImportError, or a parent package failing
            return _error(f"cannot run module '{target}': {e}")
        spec = details[1]
        name = target.rsplit(".", 1)[-1]
    else:
        name = os.path.splitext(os.path.basename(target))[0] or "script"
        # As python does: __file__ and the code's file name are the path joined to
        # the current directory, unnormalised; sys.path[0] is the real folder.
        filename = target if target.startswith("/") else os.getcwd() + "/" + target
        try:
            with open(target, "rb") as f:
                source = f.read()
            code = _compile(source, filename)
        except OSError as e:
            return _error(f"cannot read script '{target}': {e.strerror}")
        except (SyntaxError, ValueError):
            code = None  # let Python report it as it would, below
        if not safe_path:
            sys.path.insert(0, os.path.dirname(os.path.realpath(target)))

    try:
        setup = _read_setup(parsed["setup"]) if parsed["setup"] else None
    except _SetupError as e:
        return _error(e)

    try:
        _strata.begin(name, ["strata", "python"] + list(argv))
    except _strata.Error as e:
        return _error(e)
    _strata.follow_children()  # STRATA_FOLLOW_CHILDREN: the children's settings and folder

    # Registered first, so it runs last: after threading's shutdown (non-daemon
    # threads have finished) and after the program's own atexit handlers.
    atexit.register(_finalize)
    os.register_at_fork(after_in_child=_strata.after_fork_child)
    builtins.profile = profile
    builtins.noprofile = noprofile

    main_module = _main_module()
    try:
        if setup is not None:
            exec(setup, {"__name__": "__strata_setup__", "__file__": parsed["setup"],
                         "__builtins__": builtins})
        sys.modules["__main__"] = main_module
        if parsed["is_module"]:
            import runpy
            sys.argv = [spec.origin] + args
            # runpy runs the module, its frames under the module's as under
            # `python -m`; what it would look up again (and the finders it would
            # run, profiled) is what was found above: its lookup gives that back
            # once, and is itself again.
            found = runpy._get_module_details

            def found_already(mod_name, error=ImportError):
                runpy._get_module_details = found
                return details

            runpy._get_module_details = found_already
            _start()
            try:
                _strata.run_main(runpy._run_module_as_main, target)
            finally:
                if runpy._get_module_details is found_already:
                    runpy._get_module_details = found
        else:
            main_module.__file__ = filename
            if sys.version_info < (3, 15):  # 3.15 sets no __cached__ on modules
                main_module.__cached__ = None
            main_module.__loader__ = _SourceFileLoader("__main__", filename)
            sys.argv = [target] + args
            if code is None:
                code = _compile(source, filename)  # raises the error, as python would
            _main_code = code
            _start()
            _strata.run_main(code, main_module.__dict__)
    except _CannotStart as e:
        return _error(e)
    except SystemExit:
        raise
    except BaseException as e:
        _interrupted = isinstance(e, KeyboardInterrupt)
        tb = _strip(e.__traceback__)
        e.__traceback__ = tb  # the default hook prints the exception's own traceback
        sys.excepthook(type(e), e, tb)
        return 1
    return 0
