"""numba's own ``njit`` and ``cfunc``, for the modules whose kernels need numba itself
(numba's types, C callbacks, external C functions: the OTF2 reader and writer, the
Perfetto encoder), with what jit.py's kernels get: numba imported, and each kernel loaded
or compiled, inside a make (the account's ``kernels`` phase), and a kernel found in
numba's cache loaded the light way (lightload.py)."""
from __future__ import annotations

from .lightload import light_cache_loads


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
