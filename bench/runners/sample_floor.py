"""Run a script under the sampling floor (bench/floor/samplefloor.c).

    python bench/runners/sample_floor.py EXT_DIR HZ script.py [args...]

EXT_DIR holds the built `samplefloor` extension.  The script runs as `python
script.py` would run it (as bench/runners/floor.py runs it), with a timer on
this thread's CPU clock at HZ, and on every thread started through `threading`,
whose signal handler reads one clock.  Kept to the minimum so that what it adds
to plain python is the timer signals alone.
"""

import os
import sys

from _as_main import run_as_main


def main():
    ext_dir, hz, script = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    sys.path.insert(0, ext_dir)
    import samplefloor
    del sys.path[0]

    def uninstall():
        samplefloor.uninstall()
        if os.environ.get("SAMPLEFLOOR_REPORT"):
            sys.stderr.write(f"samplefloor: {samplefloor.signals()} signals\n")

    run_as_main(script, sys.argv[3:], lambda: samplefloor.install(hz), uninstall,
                samplefloor.run_main)


main()
