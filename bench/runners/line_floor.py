"""Run a script under the line-timing floor (bench/floor/linefloor.c).

    python bench/runners/line_floor.py EXT_DIR script.py [args...]

`profile` is put in the builtins, as kernprof and strata do: on 3.12+ it switches
LINE events on for the decorated function's code (3.11's trace function hears every
line anyway) and returns the function itself."""

import builtins
import sys

from _as_main import run_as_main


def main():
    ext_dir, script = sys.argv[1], sys.argv[2]
    sys.path.insert(0, ext_dir)
    import linefloor
    del sys.path[0]

    def profile(fn):
        linefloor.watch(fn.__code__)
        return fn

    builtins.profile = profile
    run_as_main(script, sys.argv[2:], linefloor.install, linefloor.uninstall,
                linefloor.run_main)


main()
