"""Global time order: local sort, splitters from samples, exchange, k-way merge.

The order key of every row is (time, location, seq), unique by construction
(see partrace.model), so the result is the same whatever the rank count.
"""
from __future__ import annotations

import numpy as np

from ..model import Column, Table
from .mpi import Comm

SAMPLES_PER_RANK = 256


def key_order(table: Table) -> np.ndarray:
    """Permutation sorting the table by (time, location, seq)."""
    if len(table) == 0:
        return np.empty(0, dtype=np.int64)
    t = table["time"]
    # Fast path: already sorted (one location, or merged earlier).
    if _is_key_sorted(table):
        return np.arange(len(table))
    return np.lexsort((table["seq"], table["location"], t))


def _is_key_sorted(table: Table) -> bool:
    t, loc, seq = table["time"], table["location"], table["seq"]
    if len(t) < 2:
        return True
    dt = np.diff(t)
    if (dt < 0).any():
        return False
    tie = dt == 0
    if not tie.any():
        return True
    dl = np.diff(loc)[tie]
    if (dl < 0).any():
        return False
    return not (np.diff(seq)[tie][dl == 0] <= 0).any()


def sort_by_key(table: Table) -> Table:
    perm = key_order(table)
    if len(perm) and (perm[0] == 0) and np.array_equal(perm, np.arange(len(perm))):
        return table
    return table.take(perm)


def _key_rows(table: Table, idx: np.ndarray) -> list[tuple[int, int, int]]:
    return list(zip(table["time"][idx].tolist(), table["location"][idx].tolist(),
                    table["seq"][idx].tolist()))


def choose_splitters(comm: Comm, table: Table) -> list[tuple[int, int, int]]:
    """p-1 keys cutting the global key space into nearly equal slices.

    Each rank offers regular samples of its sorted rows, weighted by its row
    count; every rank picks the same splitters from the gathered samples.
    """
    n = len(table)
    k = min(n, SAMPLES_PER_RANK)
    idx = np.linspace(0, n - 1, k).astype(np.int64) if k else np.empty(0, np.int64)
    mine = (n, _key_rows(table, idx))
    everyone = comm.allgather(mine)
    weighted = []
    for count, samples in everyone:
        w = count / max(len(samples), 1)
        weighted += [(s, w) for s in samples]
    weighted.sort()
    total = sum(w for _, w in weighted)
    splitters, acc, target_i = [], 0.0, 1
    for s, w in weighted:
        acc += w
        while target_i < comm.size and acc >= total * target_i / comm.size:
            splitters.append(s)
            target_i += 1
    while len(splitters) < comm.size - 1:
        splitters.append(splitters[-1] if splitters else (np.iinfo(np.int64).max, 0, 0))
    return splitters[: comm.size - 1]


def _lower_bound(table: Table, key: tuple[int, int, int]) -> int:
    """First row whose key is >= key (rows sorted by key)."""
    t, loc, seq = table["time"], table["location"], table["seq"]
    lo = int(np.searchsorted(t, key[0], side="left"))
    hi = int(np.searchsorted(t, key[0], side="right"))
    if lo == hi:
        return lo
    l2 = lo + int(np.searchsorted(loc[lo:hi], key[1], side="left"))
    h2 = lo + int(np.searchsorted(loc[lo:hi], key[1], side="right"))
    if l2 == h2:
        return l2
    return l2 + int(np.searchsorted(seq[l2:h2], key[2], side="left"))


def exchange_rows(comm: Comm, table: Table, counts: np.ndarray, schema: list[Column]) -> Table:
    """Send contiguous row blocks (counts[r] rows to rank r); returns received rows."""
    if comm.size == 1:
        return table
    return Table({c.name: comm.alltoallv(table[c.name], counts) for c in schema})


def global_time_order(comm: Comm, table: Table, schema: list[Column]) -> Table:
    """Redistribute rows so that rank r holds the r-th slice of the global order, sorted."""
    table = sort_by_key(table)
    if comm.size == 1:
        return table
    splitters = choose_splitters(comm, table)
    cuts = [0] + [_lower_bound(table, s) for s in splitters] + [len(table)]
    counts = np.diff(np.asarray(cuts, dtype=np.int64))
    got = exchange_rows(comm, table, counts, schema)
    # The received rows are p sorted runs; lexsort's stable passes merge them.
    return sort_by_key(got)


def by_destination(comm: Comm, table: Table, dest: np.ndarray, schema: list[Column]) -> Table:
    """Send every row to rank dest[i]; each rank's rows come back sorted by key."""
    if comm.size > 1:
        perm = np.argsort(dest, kind="stable")
        table = table.take(perm)
        counts = np.bincount(dest, minlength=comm.size).astype(np.int64)
        table = exchange_rows(comm, table, counts, schema)
    return sort_by_key(table)
