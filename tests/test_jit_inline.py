"""A kernel calling one of ``inline="always"`` gets its body, not a call.

numba's inliner looks for ``inline`` in a called global's ``targetoptions``; the
lazy kernels of kernels/jit.py hold their options there too.  Without it a helper
was compiled apart and linked in, inlined by LLVM only where its cost model
chose to (the OTF writer's formatting helpers, one call per value written)."""
from __future__ import annotations

import numpy as np

from partrace.kernels import jit
from partrace.kernels.jit import njit


@njit(inline="always")
def _triple_plus_one(a, i):
    return a[i] * 3 + 1


@njit
def _sum_of_triples(a):
    s = 0
    for i in range(len(a)):
        s += _triple_plus_one(a, i)
    return s


def _names(kernel, helper: str) -> bool:
    """The kernel's compiled module names ``helper`` (mangled: its length, then it): a
    function numba compiled apart and linked in, which LLVM may or may not inline."""
    return f"{len(helper)}{helper}" in _llvm(kernel)


def _llvm(kernel) -> str:
    return "\n".join(kernel.compiled().inspect_llvm().values())


def test_an_inline_kernel_is_inlined_into_its_caller(monkeypatch):
    monkeypatch.setattr(jit, "_small", False)
    a = np.arange(1000, dtype=np.int64)
    assert _sum_of_triples(a) == int((a * 3 + 1).sum())
    assert not _names(_sum_of_triples, "_triple_plus_one")
