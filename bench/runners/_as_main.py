"""Runs a script as `python script.py` would run it, for the floors' runners
(floor.py, sample_floor.py): `__name__ == "__main__"`, its own `sys.argv`, its folder
first on `sys.path`, with a floor installed around it. No imports beyond what
start-up has loaded, so that what a runner adds to plain python is its floor alone.
The code runs through the floor's run_main (bench/floor/asmain.h), which puts its
frames where plain python puts them, not above the runner's."""

import os
import sys


def run_as_main(script, argv, install, uninstall, run):
    with open(script, "rb") as f:
        code = compile(f.read(), script, "exec")
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    module = type(sys)("__main__")
    module.__file__ = script
    sys.modules["__main__"] = module
    install()
    try:
        run(code, module.__dict__)
    finally:
        uninstall()
