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
    """Consecutive units in key order per rank, balanced by bytes.

    For readers whose units continue from the ones before them: a rank then
    needs only what precedes its first unit.  A unit goes to the rank whose
    byte share holds the unit's middle byte (integer arithmetic: deterministic).
    """
    order = sorted(units, key=lambda u: u.key)
    total = sum(max(u.size, 1) for u in order)
    out: list[list[Unit]] = [[] for _ in range(nranks)]
    done = 0
    for u in order:
        size = max(u.size, 1)
        out[min(nranks - 1, (2 * done + size) * nranks // (2 * total))].append(u)
        done += size
    return out


def contiguous_owners(weights, nranks: int) -> np.ndarray:
    """The rank of each item (in their order): consecutive items per rank, balanced by
    weight.  An item goes to the rank whose share holds its middle, as units do in
    assign_contiguous (integer arithmetic: the same on every rank); a weight under 1
    counts as 1."""
    w = np.maximum(np.asarray(weights, dtype=np.int64), 1)
    if not len(w):
        return np.zeros(0, np.int64)
    done = np.cumsum(w) - w
    return np.minimum(nranks - 1, (2 * done + w) * nranks // (2 * int(w.sum())))


def share_of(reader, units: list[Unit], nranks: int) -> list[list[Unit]]:
    """The units of each rank: contiguous for ordered readers, else balanced."""
    return assign_contiguous(units, nranks) if reader.ordered else assign(units, nranks)
