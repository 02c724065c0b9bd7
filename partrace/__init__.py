"""partrace: MPI-parallel trace processing (OTF, OTF2, DUMPI, ovni, ROSS -> HDF5, OTF, OTF2,
Perfetto, Chrome JSON).

``partrace.open(path)`` and ``partrace.merge(trace, output)`` are the Python
API (see partrace.api); they are imported on first use so that importing the
package (at every rank of a large job) stays cheap.
"""
import os as _os

from .version import __version__
__all__ = ["open", "merge", "__version__"]


def _numba_cache_fallback() -> None:
    """Compiled kernels go beside their modules (numba's ``__pycache__``); when the
    package folder is read-only (a cluster's site-packages), into a user folder,
    ``$XDG_CACHE_HOME/partrace/numba`` (default ``~/.cache``; if that cannot be
    written either, ``$TMPDIR/partrace-UID/numba``), set here as NUMBA_CACHE_DIR
    before numba is imported (numba would refuse to cache with no writable
    folder).  A NUMBA_CACHE_DIR set by the user is kept."""
    if "NUMBA_CACHE_DIR" in _os.environ:
        return
    here = _os.path.dirname(_os.path.abspath(__file__))
    cache = _os.path.join(here, "__pycache__")
    if _os.access(here, _os.W_OK) and (not _os.path.isdir(cache) or _os.access(cache, _os.W_OK)):
        return
    base = _os.environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"), ".cache")
    folder = _os.path.join(base, "partrace", "numba")
    if not _usable(folder):     # a read-only home too: the temporary folder, per user
        import tempfile
        folder = _os.path.join(tempfile.gettempdir(), f"partrace-{_os.getuid()}", "numba")
    _os.environ["NUMBA_CACHE_DIR"] = folder
    import sys
    config = getattr(sys.modules.get("numba.core.config"), "CACHE_DIR", None)
    if config is not None:      # numba came first (a notebook): it read its settings already
        sys.modules["numba.core.config"].CACHE_DIR = _os.environ["NUMBA_CACHE_DIR"]


def _usable(folder: str) -> bool:
    try:
        _os.makedirs(folder, exist_ok=True)
    except OSError:
        return False
    return _os.access(folder, _os.W_OK)


_numba_cache_fallback()


def __getattr__(name):
    if name in ("open", "merge", "TraceData"):
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'partrace' has no attribute {name!r}")
