"""python -m strata [options] [--] script.py [args]: the same as `strata python`."""
import sys

from strata._runner import main

if __name__ == "__main__":
    # python put the current directory first for this module: the runner puts the
    # target's own entry there instead.
    if not sys.flags.safe_path:
        del sys.path[0]
    sys.exit(main(sys.argv[1:]))
