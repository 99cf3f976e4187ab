"""Run a script under the bare C profile hook (bench/floor/benchfloor.c).

    python bench/runners/floor.py EXT_DIR script.py [args...]

EXT_DIR holds the built `benchfloor` extension.  The script runs as `python
script.py` would run it (`__name__ == "__main__"`, its own `sys.argv`, its
folder first on `sys.path`), with the empty hook installed on this thread and
on every thread started through `threading`.  Kept to the minimum (no runpy,
no imports beyond what start-up has loaded) so that what it adds to plain
python is the hook alone.
"""

import os
import sys


def main():
    ext_dir, script = sys.argv[1], sys.argv[2]
    sys.path.insert(0, ext_dir)
    import benchfloor
    del sys.path[0]

    with open(script, "rb") as f:
        code = compile(f.read(), script, "exec")
    sys.argv = sys.argv[2:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    module = type(sys)("__main__")
    module.__file__ = script
    sys.modules["__main__"] = module
    benchfloor.install()
    try:
        exec(code, module.__dict__)
    finally:
        benchfloor.uninstall()


main()
