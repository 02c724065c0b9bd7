"""Compiled kernels that cost nothing to import: ``@njit`` that imports numba only when needed.

Importing numba and loading a command's kernels from its cache costs about half a
second of CPU, more than decoding a small trace takes in plain Python.  So a kernel
decorated with this module's :func:`njit` stays the Python function it is until it is
called, and then

- in *small* mode (a job's :class:`Scope`: its input is at most ``SMALL_BYTES``),
  runs as Python, on the same numpy arrays: kernels are numba-compatible Python, so
  the result is the same, only slower per element (or, for a kernel declared with a
  numpy ``twin``, runs that: see :func:`njit`);
- otherwise imports numba, compiles the function (or loads it from numba's cache,
  ``cache=True`` as before) and calls the compiled dispatcher from then on.  A kernel
  found in the cache is loaded without numba's refresh of its compiler contexts
  (kernels/lightload.py: about 0.2 s of CPU a process); a miss compiles as numba does.
  That making (numba's import, the dispatcher, each overload loaded or compiled, with the
  kernels it calls) is told to the rank's account while one is kept (:func:`account_makes`),
  which counts it as a phase of its own: a fixed cost of the process, not work on the trace.

``PARTRACE_JIT=python`` or ``=numba`` forces either mode (tests; ``auto``, the default,
chooses by size).  Kernels that need numba itself (types, ``cfunc``, external C
functions: the OTF2 writer) take numba from ``import_numba`` and their decorators from
kernels/cacheload.py (made inside a make too), and never run as Python.

Python differs from numba in one way that matters here: numba widens every integer it
reads from an array to 64 bits before doing arithmetic, numpy keeps the element type
(``pos + np.uint8(5)`` is a uint8, or an OverflowError).  A kernel run as Python
therefore gets its narrow integer and bool arrays (and those in tuples) as
memoryviews: indexing one gives a Python int, as wide as numba's, and writing a
value that does not fit raises instead of wrapping silently.  Arrays of 64-bit
integers and floats stay numpy arrays: their scalars wrap as numba's do (in silence
here too).  Left different, and reached by no kernel on the fixtures
(tests/test_small_mode.py compares every table of every one): Python ints do not wrap
at 64 bits (masks and shifts keep the same low bits; an int that does not fit an
array raises), and a float divided by zero is inf with a warning, not numba's
ZeroDivisionError.

Which kernels use this: the decoders of DUMPI, OTF, ovni and ROSS, the analysis folds
(profile, comm, timeline), the merge's order and gather kernels (engine/order.py,
engine/gather.py), the HDF5 chunk kernels (formats/hdf5/shuffle.py) and the OTF writer's
formatting, so ``info``, ``profile``, ``comm`` and a merge to HDF5 or OTF of a small
trace never import numba (a merge of a small sample: 0.33-0.70x the CPU).  The Perfetto
and OTF2 writers import numba themselves.
"""
from __future__ import annotations

import functools
import glob
import os
import sys
import threading
import types
from pathlib import Path

# Inputs up to this many bytes run their kernels as Python: where that costs about what
# importing numba and loading a command's kernels from its cache does (~0.5 s of CPU).
# Measured per 100 KB of input, Python kernels against compiled ones (CPU, in process,
# on every fixture of tests/data): OTF text 0.13-0.20 s, ovni and ROSS 0.03-0.19 s,
# DUMPI 0.01 s; zlib-compressed OTF streams (``.z``) ~3x their size as text, so they
# count 3x.  See scripts/bench_startup.py for the whole command.
SMALL_BYTES = 256 * 1024
COMPRESSED_WEIGHT = 3
ENV = "PARTRACE_JIT"


class _Depth(threading.local):
    """How deep this thread is in kernels run as Python: inside one, the kernels it calls run
    as plain Python.  Per thread, as kernels may run on several at once (the HDF5 writer
    compresses chunks on a pool): a count shared by all would make one thread's top-level
    call skip the conversion its narrow integers need (see the module doc)."""
    inside = 0


_depth = _Depth()
_kernels: list["LazyKernel"] = []
_hold = _compiled = None     # engine/stop.py's held and after_compile (hold_signals)


_on_make = None     # engine/accounts.py's (begin, end) of a make, while it keeps an account


class _Making(threading.local):
    """How deep this thread is in making kernels: a kernel numba compiles makes the kernels
    it calls inside its own make, and only the outermost make is reported."""
    depth = 0
    hooks = None        # the (begin, end) told of the outermost make, to be told its end


_making = _Making()


class _Make:
    """A kernel being made: numba imported, its dispatcher built, or an overload loaded
    from numba's cache or compiled.  The account (engine/accounts.py) keeps that time as
    its own phase: a fixed cost of each process, not work on the trace."""

    def __enter__(self):
        _making.depth += 1
        if _making.depth == 1 and _on_make is not None:
            _making.hooks = _on_make
            _on_make[0]()

    def __exit__(self, *exc):
        _making.depth -= 1
        if _making.depth == 0 and _making.hooks is not None:
            hooks, _making.hooks = _making.hooks, None
            hooks[1]()


_MAKE = _Make()


def account_makes(begin, end) -> None:
    """Call ``begin()`` when this thread starts making a kernel and ``end()`` when it is
    made (the outermost make only); None, None: stop.  Injected by engine/accounts.py, as
    :func:`hold_signals` is, so that this module imports nothing of the engine."""
    global _on_make
    _on_make = None if begin is None else (begin, end)


def _made_here(compile_):
    """A dispatcher's ``compile`` (numba calls it on the first call with new argument types,
    and for the kernels a compiled kernel calls) inside a make."""
    @functools.wraps(compile_)
    def compile(sig):
        with _MAKE:
            return compile_(sig)
    return compile


def hold_signals(context, compiled) -> None:
    """Run every call into numba inside ``context()``, and call ``compiled()`` after one
    in which numba compiled or loaded a kernel (engine/stop.py's ``held``: a stop signal
    waits until the call returns, as numba compiles or loads in Python at the first call
    with new types; ``after_compile``: seconds passed, another rank may have stopped).
    Injected, so that this module imports nothing of the engine."""
    global _hold, _compiled
    _hold, _compiled = context, compiled


def is_small() -> bool:
    """Whether kernels run as Python now (the mode of the job running, see :class:`Scope`)."""
    return _small


def forced() -> str | None:
    """'python' or 'numba' when PARTRACE_JIT forces a mode, else None."""
    mode = os.environ.get(ENV, "auto").strip().lower()
    if mode in ("python", "py", "small"):
        return "python"
    if mode in ("numba", "compiled", "jit"):
        return "numba"
    return None


# the mode outside any job: compiled unless forced (a job chooses by its input's size)
_small = forced() == "python"
_scopes: list["Scope"] = []


class Scope:
    """The mode of one job, set on entering and restored on leaving: the only writer of the
    mode, so that one job's choice never outlives it (a Python session running a small
    merge and then a large one, a warm-up inside a run).

    ``mode``: "python" or "numba" as the job requires (warming compiles whatever the
    size); None: chosen from ``input_bytes`` (None: unknown, compiled), PARTRACE_JIT
    winning.  Kernels on other threads read the mode too (the HDF5 writer's pool), so it
    is one value of the process, not of a context."""

    def __init__(self, input_bytes: int | None = None, mode: str | None = None):
        if mode not in (None, "python", "numba"):
            raise ValueError(f"kernel mode {mode!r}: expected 'python' or 'numba'")
        mode = mode or forced()
        if mode is None and _scopes and _scopes[-1].chosen:
            mode = "python" if _scopes[-1].small else "numba"   # a job inside a fixed one
        if mode is not None:
            self.small = mode == "python"
        else:
            self.small = input_bytes is not None and input_bytes <= SMALL_BYTES
        self.chosen = mode is not None
        self._before: bool | None = None

    def __enter__(self) -> "Scope":
        global _small
        self._before = _small
        _scopes.append(self)
        _small = self.small
        return self

    def __exit__(self, *exc) -> None:
        global _small
        _scopes.remove(self)
        _small = self._before

    def confirm(self, plan_bytes: int) -> None:
        """The plan's count of the input's bytes (its units'): where the guess from file
        names (:func:`input_bytes`) was too small, kernels are compiled from now on.  Python
        kernels on a large input would run a hundred times slower, so the guess may err only
        on the large side."""
        global _small
        if self.small and not self.chosen and plan_bytes > SMALL_BYTES:
            self.small = _small = False


def confirm(plan_bytes: int) -> None:
    """The engine's plan tells the job running (its :class:`Scope`) how many bytes its units
    hold; outside a job the mode is fixed and this does nothing."""
    if _scopes:
        _scopes[-1].confirm(plan_bytes)


def input_bytes(path) -> int | None:
    """Bytes of a trace without opening it: a folder's files, or a file and its siblings
    whose names start with its ``STEM`` (the part before the first dot: an OTF master
    file's ``STEM.*`` streams, a DUMPI metafile's ``STEM-0000.bin`` rank files), zlib
    files (``.z``) counted COMPRESSED_WEIGHT times; None if unreadable.  Unrelated files
    of the same prefix count too: too many bytes only costs a small input numba's start."""
    def weighed(files) -> int:
        return sum(f.stat().st_size * (COMPRESSED_WEIGHT if f.suffix == ".z" else 1)
                   for f in files if f.is_file())
    try:
        p = Path(path)
        if p.is_dir():
            return weighed(p.rglob("*"))
        stem = glob.escape(p.name.split(".")[0])
        near = list(p.parent.glob(f"{stem}*"))      # and an OTF2 anchor's STEM/ folder
        return max(weighed(near + [f for d in near if d.is_dir() for f in d.rglob("*")]),
                   p.stat().st_size)
    except OSError:
        return None


class LazyKernel:
    """A kernel: Python until first called, then as the mode says (see the module doc)."""

    def __init__(self, func, options: dict, twin=None):
        self.py_func = func
        self.options = options
        self.twin = twin
        self._dispatcher = None
        self._python = None
        functools.update_wrapper(self, func)
        _kernels.append(self)

    def __call__(self, *args, **kwargs):
        if _depth.inside:
            return self.python()(*args, **kwargs)
        if _small:
            if self.twin is not None:
                return self.twin(*args, **kwargs)
            return _as_python(self.python(), args, kwargs)
        if _hold is None:
            return (self._dispatcher or self.compiled())(*args, **kwargs)
        with _hold():
            d = self._dispatcher or self.compiled()
            known = len(d.overloads)
            result = d(*args, **kwargs)
        if len(d.overloads) != known:
            _compiled()
        return result

    def python(self):
        """The function to run as Python: the kernel's code over a copy of its module's
        globals in which the kernels it calls are their own Python functions (a call
        through this object per element costs as much as the element).  Globals are
        read once, at the first call, as numba freezes them when it compiles."""
        if self._python is None:
            f = self.py_func
            names = dict(f.__globals__)
            self._python = types.FunctionType(f.__code__, names, f.__name__, f.__defaults__,
                                              f.__closure__)
            self._python.__kwdefaults__ = f.__kwdefaults__
            for k, v in names.items():      # after self._python is set: recursion ends
                if isinstance(v, LazyKernel):
                    names[k] = v.python()
        return self._python

    def compiled(self):
        """numba's dispatcher of this kernel (importing numba the first time)."""
        if self._dispatcher is None:
            with _MAKE:
                numba = _numba()
                # nogil: a kernel touches no Python object, and the HDF5 writer's threads
                # compress chunks meanwhile (formats/hdf5/chunks.py); holding the GIL
                # through a kernel stalled them and cost GIL hand-offs
                d = numba.njit(**{"nogil": True, **self.options})(self.py_func)
                if self.options.get("cache"):
                    from .lightload import light_cache_loads
                    light_cache_loads(d)
                d.compile = _made_here(d.compile)   # numba looks it up on the instance
                self._dispatcher = d
        return self._dispatcher

    @property
    def targetoptions(self) -> dict:
        """The options as numba's dispatchers hold them: numba's inliner looks for
        ``inline`` here on a called global, so a kernel calling one of ``inline="always"``
        has it inlined (it would otherwise be a call per use, through its own dispatcher)."""
        return self.options

    @property
    def dispatcher(self):
        """The dispatcher if this process compiled or loaded the kernel, else None."""
        return self._dispatcher

    def __repr__(self) -> str:
        return f"<partrace kernel {self.__module__}.{self.__qualname__}>"


def njit(*args, twin=None, **options):
    """``@njit`` or ``@njit(cache=True, ...)``, as numba's.

    ``twin``: a numpy function of the same arguments and effect that small mode calls
    instead of the kernel's Python, for a kernel whose every call walks rows a Python loop
    cannot afford even on a small input (the HDF5 chunk kernels: a chunk is 65,536 rows
    however few the trace has).  Each twin is compared with its compiled kernel in the
    tests; a kernel called from another kernel run as Python still runs as Python."""
    if args and callable(args[0]) and not options and twin is None:
        return LazyKernel(args[0], {})
    if args:
        raise TypeError("partrace.kernels.jit.njit takes keyword options only (no signatures)")
    return lambda func: LazyKernel(func, options, twin)


def kernels() -> list[LazyKernel]:
    """Every kernel defined so far (of the modules imported)."""
    return list(_kernels)


def making() -> _Make:
    """A context in which what runs is making kernels, as a kernel's own make (the account's
    ``kernels`` phase): warm.py's runs that compile the kernels before a parallel run."""
    return _MAKE


def import_numba():
    """numba, imported as a kernel's make imports it (the account's ``kernels`` phase): for
    code that needs numba before any kernel does (warm.py's check of the cache)."""
    with _MAKE:
        return _numba()


_REGISTERED = False


def _numba():
    """numba, taught once that a kernel named in a compiled function is its dispatcher
    (kernels call each other by their module-level names)."""
    global _REGISTERED
    if "numba" in sys.modules:
        import numba
    else:
        from . import collector
        with collector.quiet():     # its import makes no garbage, and many objects
            import numba
    if not _REGISTERED:
        from numba.core import types as nb_types
        from numba.core.typing.typeof import typeof_impl

        @typeof_impl.register(LazyKernel)
        def _typeof_kernel(val, c):
            return nb_types.Dispatcher(val.compiled())
        _REGISTERED = True
    return numba


def _narrow(a):
    """A narrow integer or bool array as a memoryview (Python ints, as wide as numba's)."""
    if a.dtype.kind in "iub" and a.dtype.itemsize < 8 and a.dtype.byteorder in "=|" and a.ndim:
        return memoryview(a)
    return a


def _convert(x):
    import numpy as np
    if isinstance(x, np.ndarray):
        return _narrow(x)
    if isinstance(x, tuple):
        return tuple(_convert(v) for v in x)
    return x


def _back(x):
    """A result as numba returns it: memoryviews (of arguments) back to arrays."""
    if isinstance(x, memoryview):
        import numpy as np
        return np.asarray(x)
    if isinstance(x, tuple):
        return tuple(_back(v) for v in x)
    return x


def _as_python(func, args, kwargs):
    """Run one kernel call as Python."""
    import numpy as np
    _depth.inside += 1
    try:   # numba's integers wrap in silence (hashes rely on it), numpy's scalars warn
        with np.errstate(over="ignore"):
            return _back(func(*(_convert(a) for a in args),
                              **{k: _convert(v) for k, v in kwargs.items()}))
    finally:
        _depth.inside -= 1
