"""--memory and numpy: strata counts numpy's array data (which numpy allocates itself,
not through Python's allocators) once numpy's C core has loaded.

`watch()` puts a finder at the front of sys.meta_path that asks the other finders
for numpy's C core and, when it has been executed, calls _strata.numpy_hook on it;
it then takes itself out of sys.meta_path. A core loaded already is hooked at once.
Nothing else is imported or changed."""
import sys

from . import _strata

CORES = ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath")


class _Loader:
    """The core's own loader, then the hook."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        _strata.numpy_hook(module)


class _Finder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in CORES:
            return None
        for finder in sys.meta_path:
            if finder is _Finder:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        _unwatch()
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader)
        return spec


def _unwatch():
    try:
        sys.meta_path.remove(_Finder)
    except ValueError:
        pass


def watch():
    for name in CORES:
        core = sys.modules.get(name)
        if core is not None:
            _strata.numpy_hook(core)
            return
    sys.meta_path.insert(0, _Finder)
