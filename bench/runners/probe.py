"""Prints, as one JSON line, which interpreter runs it; the harness runs it under every tool."""

import json
import sys

info = {"version": sys.version, "executable": sys.executable, "prefix": sys.prefix,
        "base_prefix": sys.base_prefix, "hexversion": sys.hexversion}
try:
    import yappi  # noqa: F401  (importable only in the yappi configuration)
    from importlib.metadata import version
    info["yappi"] = version("yappi")
except Exception:
    pass
print("PROBE " + json.dumps(info))
