"""Loading a kernel from numba's cache without building numba's compiler contexts.

numba's cache refreshes the whole target context before it loads a kernel
(``Cache.load_overload``): it imports numba's implementation modules and installs
every typing and lowering registry, about 0.2 s of CPU a process, all of it for a
compiler that a kernel found in the cache never runs.  What loaded machine code needs
is the symbols it links against: the helper C functions (registered when the target
context is made), the NRT's allocation functions (registered by ``rtsys.initialize``,
which the full refresh calls first; without them a kernel that allocates crashes) and
the hash secret (``numba.cpython.hashing``, registered on import).  A cache miss still
compiles as before: numba's compiler refreshes both contexts itself when it starts.
A loaded kernel's LLVM bitcode is parsed only when a compiled kernel links it in
(kernels/lazylink.py).

Only numba's own cache class is changed, and only where it has the methods this
relies on (private ones: else the kernel keeps numba's loader).
"""
from __future__ import annotations

_loader = None


def _load_only_class(caching):
    """FunctionCache whose load_overload makes ready only what loaded code links against."""
    from numba.core.runtime import rtsys

    from . import lazylink

    class LoadOnlyCache(caching.FunctionCache):
        def load_overload(self, sig, target_context):
            rtsys.initialize(target_context)
            lazylink.install(target_context.codegen())
            import numba.cpython.hashing    # noqa: F401  (its symbols: the hash secret)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)

    return LoadOnlyCache


def light_cache_loads(dispatcher) -> None:
    """Make ``dispatcher`` (numba's, ``cache=True``) load its kernels the light way, and
    save them under the index's lock (cachelock.py)."""
    global _loader
    from numba.core import caching

    from .cachelock import lock_saves
    cache = getattr(dispatcher, "_cache", None)
    lock_saves(cache)
    if type(cache) is not caching.FunctionCache:
        return
    if not all(hasattr(caching.FunctionCache, m)
               for m in ("_load_overload", "_guard_against_spurious_io_errors")):
        return
    if _loader is None:
        _loader = _load_only_class(caching)
    cache.__class__ = _loader
