"""The source-level API: `profile`, `noprofile` and `config`.

`profile` marks a function (its calls open a recording scope) or, used as a context
manager, opens a scope for a block. Under `strata python` without -b everything is
recorded anyway; under -b, and in a program run by plain `python`, only what runs
inside scopes is. Marks live on the code object in C: decorated functions are
returned as they are, with no wrapper.
"""
import atexit
import os
import sys

from . import _strata

__all__ = ["Profile", "config", "noprofile", "profile"]


def _finalize():
    _strata.finalize()


# IPython's %strata makes a session of each run (strata._magic): once the extension is
# loaded, @profile and `with profile:` only mark and scope, with no session of their own
# (the kernel's whole life) that would keep the magics from theirs.
sessions_by_magic = False


def _start_from_source():
    """Starts a session for a program that uses strata without `strata python`."""
    if sessions_by_magic or _strata.state()["live"]:
        return
    _strata.set("builtin", True)
    script = sys.argv[0] if sys.argv and sys.argv[0] else "python"
    name = os.path.splitext(os.path.basename(script))[0] or "python"
    _strata.begin(name, [sys.executable] + list(sys.argv))
    atexit.register(_finalize)
    os.register_at_fork(after_in_child=_strata.after_fork_child)
    try:
        _strata.start()
    except _strata.Error as e:  # never raised into the program: it runs unprofiled
        sys.stderr.write(f"strata: error: {e}; the program runs without profiling\n")
        sys.stderr.flush()


class Profile:
    """`@profile`, `@profile()`, `with profile:` and `with profile():`."""

    def __call__(self, func=None):
        if func is None:
            return self
        _start_from_source()
        _strata.mark_profile(func)
        return func

    def __enter__(self):
        _start_from_source()
        _strata.scope_enter()
        return self

    def __exit__(self, *exc):
        _strata.scope_exit()
        return False


profile = Profile()


def noprofile(func):
    """Never record calls of func, nor anything they call."""
    _strata.mark_noprofile(func)
    return func


class _SettingList(list):
    """A list setting: changing it in place changes the setting."""

    def __init__(self, name, items):
        super().__init__(items)
        self._name = name

    def _store(self):
        _strata.set(self._name, list(self))

    def _wrap(method):
        def changed(self, *args):
            result = method(self, *args)
            self._store()
            return result
        changed.__name__ = method.__name__
        return changed

    append = _wrap(list.append)
    extend = _wrap(list.extend)
    insert = _wrap(list.insert)
    remove = _wrap(list.remove)
    pop = _wrap(list.pop)
    clear = _wrap(list.clear)
    __setitem__ = _wrap(list.__setitem__)
    __delitem__ = _wrap(list.__delitem__)

    def __iadd__(self, other):
        self.extend(other)
        return self

    del _wrap


_LABEL_PARTS = {"include_args": "args", "include_filename": "file", "include_line": "line"}
_SETTINGS = {
    "full_filepath": "full_filepath",
    "include_internal": "include_internal",
    "trace_c": "trace_c",
    "verbosity": "verbose",
    "restrict_functions": "function_restrict",
    "include_functions": "function_include",
    "exclude_functions": "function_exclude",
    "restrict_modules": "module_restrict",
    "include_modules": "module_include",
    "exclude_modules": "module_exclude",
}


class _Config:
    """strata.profiler.config: the profiler's settings, read and changed live."""

    __slots__ = ()

    def __dir__(self):
        return sorted(list(_LABEL_PARTS) + list(_SETTINGS))

    def __getattr__(self, name):
        if name in _LABEL_PARTS:
            return _LABEL_PARTS[name] in _strata.get("label")
        if name in _SETTINGS:
            value = _strata.get(_SETTINGS[name])
            return _SettingList(_SETTINGS[name], value) if isinstance(value, list) else value
        raise AttributeError(f"strata.profiler.config has no field '{name}'")

    def __setattr__(self, name, value):
        if name in _LABEL_PARTS:
            parts = [p for p in _strata.get("label") if p != _LABEL_PARTS[name]]
            if value:
                parts.append(_LABEL_PARTS[name])
            _strata.set("label", parts)
        elif name in _SETTINGS:
            if isinstance(value, (list, tuple)):
                value = list(value)
            _strata.set(_SETTINGS[name], value)
        else:
            raise AttributeError(f"strata.profiler.config has no field '{name}'")

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in dir(self))
        return f"config({fields})"


config = _Config()
