"""The global order, one window at a time.

Every rank offers weighted samples of its sorted runs; all ranks pick the
same cut keys from them.  In time mode the key space is cut into W x P
pieces: window w is pieces w*P .. w*P+P-1 and rank r receives piece w*P+r,
so rank r's rows of window w follow rank r-1's and precede rank r+1's.  In
destination mode the key space is cut into W windows and each window's rows
go to the rank the sink names.  W is chosen so that one window fits the
memory budget; with W = 1 this is the classic sample sort.
"""
from __future__ import annotations

import math

import numpy as np

from ..model import Column, Table
from .mpi import Comm
from .order import Key, sort_by_key
from .runs import Run

SAMPLES_PER_RANK = 4096
BEFORE_ALL = None       # stands for the key before every key
AFTER_ALL = ...         # stands for the key after every key


def _weighted_samples(runs: list[Run]) -> list[tuple[Key, int]]:
    total = sum(r.n for r in runs)
    if not total:
        return []
    stride = max(1, math.ceil(total / SAMPLES_PER_RANK))
    return [s for run in runs for s in run.samples(stride)]


def choose_cuts(comm: Comm, runs: list[Run], pieces: int) -> list[Key]:
    """pieces-1 keys cutting all ranks' rows into pieces of nearly equal size."""
    if pieces <= 1:
        return []
    everyone = comm.allgather(_weighted_samples(runs))
    samples = sorted(s for mine in everyone for s in mine)
    if not samples:
        return []
    total = sum(w for _, w in samples)
    cuts, acc, j = [], 0, 1
    for key, w in samples:
        acc += w
        while j < pieces and acc >= total * j / pieces:
            cuts.append(key)
            j += 1
    while len(cuts) < pieces - 1:
        cuts.append(cuts[-1] if cuts else samples[-1][0])
    return cuts


def _bound(run: Run, key) -> int:
    if key is BEFORE_ALL:
        return 0
    if key is AFTER_ALL:
        return run.n
    return run.lower_bound(key)


def _cut(cuts: list[Key], j: int):
    """Cut j-1 / j boundary: j <= 0 is the very start, j > len(cuts) the very end."""
    if j <= 0:
        return BEFORE_ALL
    if j > len(cuts):
        return AFTER_ALL
    return cuts[j - 1]


def _column(run, name: str, a: int, b: int) -> np.ndarray:
    return run.columns[name][a:b] if isinstance(run, Run) else run.column(name, a, b)


def _gather(runs: list[Run], bounds: list, schema: list[Column]
            ) -> tuple[Table, np.ndarray, np.ndarray]:
    """Rows between consecutive bounds, grouped by bound interval (= destination).

    Also returns where each run's part starts in the result (and the row
    count): every part is sorted, so the parts of one interval merge cheaply.
    """
    pos = [[_bound(run, b) for b in bounds] for run in runs]
    counts = np.array([sum(p[i + 1] - p[i] for p in pos) for i in range(len(bounds) - 1)],
                      dtype=np.int64)
    spans = [(run, p[i], p[i + 1]) for i in range(len(bounds) - 1)
             for run, p in zip(runs, pos) if p[i + 1] > p[i]]
    starts = np.cumsum([0] + [b - a for _, a, b in spans], dtype=np.int64)
    cols = {}
    for c in schema:
        parts = [_column(run, c.name, a, b) for run, a, b in spans]
        if not parts:
            cols[c.name] = np.empty(0, c.numpy_dtype())
            continue
        # one part stays a view of its run: no copy
        values = parts[0] if len(parts) == 1 else np.concatenate(parts)
        cols[c.name] = values.astype(c.element_dtype(), copy=False)
    return Table(cols), counts, starts


def exchange_rows(comm: Comm, table: Table, counts: np.ndarray, schema: list[Column]) -> Table:
    """Send contiguous row blocks (counts[r] rows to rank r); returns received rows."""
    if comm.size == 1:
        return table
    return Table({c.name: comm.alltoallv(table[c.name], counts) for c in schema})


def time_window(comm: Comm, runs: list[Run], cuts: list[Key], w: int,
                schema: list[Column]) -> Table:
    """Rank r's rows of window w in time mode, sorted by key."""
    p = comm.size
    bounds = [_cut(cuts, w * p + r) for r in range(p + 1)]
    table, counts, starts = _gather(runs, bounds, schema)
    if comm.size == 1:
        return sort_by_key(table, starts)
    return sort_by_key(exchange_rows(comm, table, counts, schema))


def window_rows(runs: list[Run], cuts: list[Key], w: int, schema: list[Column]) -> Table:
    """This rank's rows of window w in destination mode (not exchanged yet)."""
    table, _, _ = _gather(runs, [_cut(cuts, w), _cut(cuts, w + 1)], schema)
    return table


def by_destination(comm: Comm, table: Table, dest: np.ndarray, schema: list[Column]) -> Table:
    """Send every row to rank dest[i]; each rank's rows come back sorted by key."""
    if comm.size > 1:
        perm = np.argsort(dest, kind="stable")
        table = table.take(perm)
        counts = np.bincount(dest, minlength=comm.size).astype(np.int64)
        table = exchange_rows(comm, table, counts, schema)
    return sort_by_key(table)


def window_count(comm: Comm, local_bytes: int, memory_bytes: int) -> int:
    """Windows needed so that one window's rows on a rank take about a quarter of the budget."""
    total = comm.allreduce_sum(int(local_bytes))
    per_window = max(1, memory_bytes // 4) * comm.size
    return max(1, math.ceil(total / per_window))
