"""Dealing items in order to ranks, each rank a run of them, balanced by weight.

The engine deals an ordered reader's units so (engine/plan.py), and the output sinks
their locations; a reader that lists its units in parts on every rank deals them alike
beforehand (formats/ross/listing.py), so that what a rank lists is mostly its own."""
from __future__ import annotations

import numpy as np


def contiguous_owners(weights, nranks: int) -> np.ndarray:
    """The rank of each item (in their order): consecutive items per rank, the heaviest
    rank as light as a contiguous split allows (a weight under 1 counts as 1; integer
    arithmetic: the same on every rank).

    The bound is found by bisection: the smallest load with which the ranks, the last
    first, each taking as many items from the end as fit, take them all.  Filled from
    the last rank, rank 0 (which also plans, cuts and commits) gets what is left, and a
    split that needs fewer ranks leaves the first ones idle.  (Each item to the rank
    whose share holds its middle, as units are dealt, can put three near-equal items
    where two would do: the max, not the fit, sets the run's time.)  Units of ordered
    readers and the locations of destination sinks are both dealt so."""
    w = np.maximum(np.asarray(weights, dtype=np.int64), 1)
    n = len(w)
    if n == 0 or nranks <= 1:
        return np.zeros(n, np.int64)
    tail = np.cumsum(w[::-1])       # tail[k]: the last k + 1 items

    def starts(bound: int) -> list[int] | None:
        """Per rank from the last, how many items from the end it and those after it
        take, or None if some are left over."""
        out, taken = [], 0
        for _ in range(nranks):
            if taken == n:
                break
            before = int(tail[taken - 1]) if taken else 0
            taken = int(np.searchsorted(tail, before + bound, side="right"))
            out.append(taken)
        return out if taken == n else None

    total = int(tail[-1])
    lo, hi = max(int(w.max()), -(-total // nranks)), total
    while lo < hi:
        mid = (lo + hi) // 2
        if starts(mid) is None:
            lo = mid + 1
        else:
            hi = mid
    owner = np.zeros(n, np.int64)
    done = 0
    for k, taken in enumerate(starts(lo)):
        owner[n - taken:n - done] = nranks - 1 - k
        done = taken
    return owner
