"""Run a script under the bare C profile hook (bench/floor/benchfloor.c; with
FLOOR_MODULE=benchfloortsc, the hook that reads the TSC once an event).

    python bench/runners/floor.py EXT_DIR script.py [args...]

EXT_DIR holds the built `benchfloor` extension.  The script runs as `python
script.py` would run it (`__name__ == "__main__"`, its own `sys.argv`, its
folder first on `sys.path`), with the empty hook installed on this thread and
on every thread started through `threading`.  Kept to the minimum (no runpy,
no imports beyond what start-up has loaded) so that what it adds to plain
python is the hook alone.
"""

import sys

from _as_main import run_as_main


def main():
    ext_dir, script = sys.argv[1], sys.argv[2]
    sys.path.insert(0, ext_dir)
    # benchfloor, or benchfloortsc (one TSC read an event): os is loaded at start-up
    floor = __import__(sys.modules["os"].environ.get("FLOOR_MODULE", "benchfloor"))
    del sys.path[0]
    run_as_main(script, sys.argv[2:], floor.install, floor.uninstall, floor.run_main)


main()
