"""Dividing work units among ranks, balanced by bytes, deterministically."""
from __future__ import annotations

import heapq

from ..dealing import contiguous_owners
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


def share_of(reader, units: list[Unit], nranks: int) -> list[list[Unit]]:
    """The units of each rank: contiguous for ordered readers, else balanced."""
    return assign_contiguous(units, nranks) if reader.ordered else assign(units, nranks)
