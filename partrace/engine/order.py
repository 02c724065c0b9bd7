"""The order key (time, location, seq): sorting and searching by it.

The key is unique by construction (see partrace.model), so sorting by it is
a total order that no rank count, chunking or window choice can change.
"""
from __future__ import annotations

import numpy as np

from ..model import Table

Key = tuple[int, int, int]


def key_order(table: Table) -> np.ndarray:
    """Permutation sorting the table by (time, location, seq)."""
    if _is_key_sorted(table):
        return np.arange(len(table))
    return np.lexsort((table["seq"], table["location"], table["time"]))


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
    if _is_key_sorted(table):
        return table
    return table.take(np.lexsort((table["seq"], table["location"], table["time"])))


def lower_bound(time, location, seq, key: Key) -> int:
    """First row whose key is >= key, in rows sorted by key (arrays or memory maps)."""
    lo = int(np.searchsorted(time, key[0], side="left"))
    hi = int(np.searchsorted(time, key[0], side="right"))
    if lo == hi:
        return lo
    loc = np.asarray(location[lo:hi])
    l2 = lo + int(np.searchsorted(loc, key[1], side="left"))
    h2 = lo + int(np.searchsorted(loc, key[1], side="right"))
    if l2 == h2:
        return l2
    return l2 + int(np.searchsorted(np.asarray(seq[l2:h2]), key[2], side="left"))
