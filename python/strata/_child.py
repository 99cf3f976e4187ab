"""A child process of a followed run (STRATA_FOLLOW_CHILDREN, docs/usage.md "Child
processes"). strata-children.pth, in site-packages, imports this module when the
interpreter starts with _STRATA_CHILD_OF in its environment, which a followed run
leaves there for its children: "<parent pid>:<the STRATA_* variables it set>:<the
top results folder>". The child then profiles itself with its parent's settings
into <top>/process-<pid>, and writes its results when it ends, as strata python
does. The variables are hidden from the child's os.environ (its own children
still inherit them). Nothing here may break the child: a failure is one warning.
"""
import os
import sys


def _hide(names):
    """Takes strata's variables out of os.environ without unsetenv: the program sees
    the environment it would have without strata, and its children inherit them."""
    data = getattr(os.environ, "_data", None)
    encode = getattr(os.environ, "encodekey", None)
    if data is None or encode is None:
        return
    for name in names:
        data.pop(encode(name), None)


def _start():
    value = os.environ.get("_STRATA_CHILD_OF", "")
    parent, _, rest = value.partition(":")
    names, _, top = rest.partition(":")
    _hide(["_STRATA_CHILD_OF"] + [n for n in names.split(",") if n])
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if not parent.isdigit() or not top or argv[1:3] == ["-m", "strata"]:
        return  # not a child of a followed run, or a strata run of its own
    import atexit

    from . import _strata

    if not _strata.begin_child(int(parent), top, argv):
        return
    # registered first, so it runs last: after the program's own atexit handlers
    atexit.register(_strata.finalize)
    os.register_at_fork(after_in_child=_strata.after_fork_child)
    _strata.start()
    _strata.follow_children()


try:
    _start()
except Exception as e:  # never into the child's program
    sys.stderr.write(f"strata: warning: child process {os.getpid()} is not profiled: {e}\n")
