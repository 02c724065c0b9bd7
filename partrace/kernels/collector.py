"""Python's cyclic garbage collector in partrace's own processes (the command line).

partrace's work is numpy arrays and compiled kernels: the Python objects it makes are a
few per call, not per event, and almost none of them form cycles.  The collector's
defaults suit programs of many small objects instead.  A full collection walks every
object alive, and importing numba leaves tens of thousands of them (its typing tables),
so one full collection during that import, and each later one, cost every rank the
same fixed time again; rank 0, which holds more objects, paid one more.  So, in a
process the command line runs (:func:`own_process`):

- the young generation is collected after ``YOUNG`` allocations, not 700;
- no collection runs while numba is imported (:func:`quiet`): an import makes no garbage;
- objects alive at two points are frozen out of the collector's way (:func:`settle`,
  ``gc.freeze``): after numba's import, and after a run's decoding (its plan and the
  modules its readers imported).  They live until the process ends anyway; a frozen
  object that became cyclic garbage would stay, which such objects do not.

A program calling partrace's Python API keeps its collector as it set it: these are
no-ops there.
"""
from __future__ import annotations

import contextlib
import gc

YOUNG = 10_000      # allocations between collections of the young generation (CPython: 700)

_own = False


def own_process() -> None:
    """This process is partrace's own (the command line): tune its collector."""
    global _own
    _own = True
    gc.set_threshold(YOUNG, *gc.get_threshold()[1:])


@contextlib.contextmanager
def quiet():
    """No collection inside (in partrace's own process): for a large import."""
    if not _own or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        settle()


def settle() -> None:
    """The objects alive now are long-lived: out of the collector's way (own process)."""
    if _own:
        gc.freeze()
