"""Dividing work units among ranks, balanced by bytes, deterministically."""
from __future__ import annotations

import heapq

import numpy as np

from ..formats.base import Unit


def assign(units: list[Unit], nranks: int) -> list[list[Unit]]:
    """Units per rank: largest first onto the least-loaded rank (ties: lower rank).

    Depends only on the unit list and the rank count.  Ranks beyond the
    number of units get nothing, which the engine handles like any rank.
    """
    order = sorted(units, key=lambda u: (-u.size, u.key))
    heap = [(0, r) for r in range(nranks)]
    out: list[list[Unit]] = [[] for _ in range(nranks)]
    for u in order:
        load, r = heapq.heappop(heap)
        out[r].append(u)
        heapq.heappush(heap, (load + max(u.size, 1), r))
    for lst in out:
        lst.sort(key=lambda u: u.key)
    return out


def assign_contiguous(units: list[Unit], nranks: int) -> list[list[Unit]]:
    """Consecutive units in key order per rank, balanced by bytes (``contiguous_owners``).

    For readers whose units continue from the ones before them: a rank then
    needs only what precedes its first unit.
    """
    order = sorted(units, key=lambda u: u.key)
    out: list[list[Unit]] = [[] for _ in range(nranks)]
    for u, r in zip(order, contiguous_owners([u.size for u in order], nranks).tolist()):
        out[r].append(u)
    return out


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


def share_of(reader, units: list[Unit], nranks: int) -> list[list[Unit]]:
    """The units of each rank: contiguous for ordered readers, else balanced."""
    return assign_contiguous(units, nranks) if reader.ordered else assign(units, nranks)
