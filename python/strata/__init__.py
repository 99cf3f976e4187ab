"""strata: a profiler for Python and native programs.

    import strata

    @strata.profile()          # record run() and what it calls
    def run(n): ...

    with strata.profile():     # or record a block
        run(20)

    with strata.region("solve"):   # a region of your own, timed (strata.timing,
        run(20)                    # strata.summary; a call of its own in the tree)

See docs/usage.md. The work is done in C (the `_strata` extension); this package
only connects it to Python.
"""
import os as _os

from . import _strata

_strata.set_internal_dir(_os.path.dirname(_os.path.abspath(__file__)))

from .profiler import Profile, config, noprofile, profile  # noqa: E402
from .regions import region, summary, timing  # noqa: E402

__version__ = _strata.__version__


def load_ipython_extension(ip):
    """`%load_ext strata`: the %strata and %%strata magics (strata._magic)."""
    from . import _magic

    _magic.load(ip)


__all__ = ["Profile", "config", "noprofile", "profile", "region", "summary", "timing",
           "__version__"]
