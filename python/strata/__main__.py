"""python -m strata [options] [--] script.py [args]: the same as `strata python`."""
import sys

from strata._runner import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
