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
    """Make ``dispatcher`` (numba's, ``cache=True``) load its kernels the light way."""
    global _loader
    from numba.core import caching
    cache = getattr(dispatcher, "_cache", None)
    if type(cache) is not caching.FunctionCache:
        return
    if not all(hasattr(caching.FunctionCache, m)
               for m in ("_load_overload", "_guard_against_spurious_io_errors")):
        return
    if _loader is None:
        _loader = _load_only_class(caching)
    cache.__class__ = _loader


def njit(*args, **options):
    """numba's ``njit`` whose kernel, found in numba's cache, is loaded the light way (for
    the modules that decorate with numba directly: the OTF2 and Perfetto writers' kernels,
    which need numba's types).  Used as numba's, with options: ``@njit(cache=True)``.
    numba's import and each overload's load or compile are a kernel's make (the account's
    kernels phase), as for jit.njit's kernels."""
    from .jit import _made_here, import_numba
    numba = import_numba()
    if args:
        raise TypeError("use njit(option=...), not bare @njit or a signature")

    def wrap(func):
        d = numba.njit(**options)(func)
        if options.get("cache"):
            light_cache_loads(d)
        d.compile = _made_here(d.compile)   # numba looks it up on the instance
        return d
    return wrap


def cfunc(sig, locals=None, cache=False, **options):
    """numba's ``cfunc`` (a C callback, compiled or loaded at decoration) whose code, found
    in numba's cache, is loaded the light way: numba's own ``cfunc`` loads each through the
    full context refresh, ~0.6 s of CPU in every process that reads or writes OTF2."""
    from .jit import import_numba, making
    numba = import_numba()
    if not cache:
        return numba.cfunc(sig, locals=locals or {}, **options)

    def wrap(func):
        from numba.core import sigutils
        from numba.core.ccallback import CFunc
        with making():      # loaded (or compiled) now: the account's kernels phase
            res = CFunc(func, sigutils.normalize_signature(sig), locals=dict(locals or {}),
                        options=options)
            res.enable_caching()
            light_cache_loads(res)
            res.compile()
        return res
    return wrap
