"""The order key (time, location, seq): sorting and searching by it.

The key is unique by construction (see partrace.model), so sorting by it is
a total order that no rank count, chunking or window choice can change.
"""
from __future__ import annotations

import numpy as np
from ..kernels.jit import njit
from ..kernels.reduce import min_max

from ..model import Table

Key = tuple[int, int, int]

# A heap merge costs O(n log k) in compiled but branchy code: beyond HEAP_MAX_RUNS
# runs a stable C sort on time alone (then ties by location, seq) is faster.
HEAP_MAX_RUNS = 3
# Rows in ascending runs of this many rows or more on average are sorted by numpy's stable
# sort (timsort for 64-bit words: it finds the runs and merges them, 0.05 s for 6 M rows in
# 4 runs), fewer by its quicksort (faster on rows in random order, but 0.7 s on those 4 runs).
LONG_RUN = 256
# Ties on time in groups of more rows than this are ordered by one lexsort.
SMALL_TIE = 32


def key_order(table: Table) -> np.ndarray:
    """Permutation sorting the table by (time, location, seq), stable for equal keys."""
    order = merge_order(table)
    return np.arange(len(table)) if order is None else order


def merge_order(table: Table, starts: np.ndarray | None = None) -> np.ndarray | None:
    """key_order, or None when the rows are already in key order.

    Readers emit rows sorted per location and windows are concatenations of
    sorted runs, so the rows are cut into their ascending runs: a few runs are
    merged by a heap, more (or rows in random order) sorted by time_order.
    """
    t, loc, seq = table["time"], table["location"], table["seq"]
    starts = run_starts(t, loc, seq) if starts is None else _descents(t, loc, seq, starts)
    if len(starts) <= 2:
        return None
    t, seq = (np.ascontiguousarray(a, np.int64) for a in (t, seq))
    loc = _compared(loc)
    if len(starts) - 1 > HEAP_MAX_RUNS:
        return time_order(t, loc, seq, len(starts) - 1)
    return merge_runs(t, loc, seq, starts)


def _compared(loc: np.ndarray) -> np.ndarray:
    """The location column as the kernels compare it: a 32-bit one as it is (an int64 copy
    would cost a pass and add to a window's peak), any other as int64."""
    return np.ascontiguousarray(loc, loc.dtype if loc.dtype in (np.int32, np.uint32)
                                else np.int64)


def time_order(t, loc, seq, runs: int | None = None) -> np.ndarray:
    """The key order as one sort on time (equal times kept in row order), then equal
    times put in (location, seq) order.  ``runs``: how many ascending runs of the key
    the rows are (None: not known).

    Equal to np.lexsort((seq, loc, t)) (rows with equal keys keep their input
    order) at about a third of its cost: lexsort sorts once per key column.
    """
    n = len(t)
    bits = max(int(n - 1).bit_length(), 1)
    lo, hi = map(int, min_max(t)) if n else (0, 0)
    span = hi - lo
    # rows in (location, time, seq) order (a window of one-location runs laid out in
    # location order, as DUMPI's rank files are): equal times are then in key order already
    settled = n < 2 or _location_major(t, loc, seq)
    if n < 2 or span.bit_length() + bits > 64:
        order = np.argsort(t, kind="stable")
        big = np.zeros(0, np.int64) if settled else _order_ties(order, t, loc, seq, SMALL_TIE)
    else:
        # time above the row in one unsigned word: a plain sort of the words is a stable
        # sort by time, at about half the CPU of a stable argsort, and needs no index
        # array beside them (each word becomes its row).  The words are unique, so any
        # sort gives the same order; within an ascending run of the key they ascend
        order = _packed(t, np.int64(lo), np.uint64(bits))
        order.sort(kind="stable" if runs is not None and runs * LONG_RUN <= n else None)
        order = order.view(np.int64)
        if settled:
            np.bitwise_and(order, (1 << bits) - 1, out=order)
            big = np.zeros(0, np.int64)
        else:
            big = _unpack_ties(order, np.uint64(bits), loc, seq, SMALL_TIE)
    if len(big):
        # whole groups of equal time, in place: sorting them by key keeps each group's slots
        rows = order[big]
        order[big] = rows[np.lexsort((seq[rows], loc[rows], t[rows]))]
    return order


@njit(cache=True)
def _packed(t, lo, bits):
    """Row i's time above ``lo`` shifted up by ``bits``, then i in the low bits."""
    out = np.empty(t.shape[0], np.uint64)
    for i in range(t.shape[0]):
        out[i] = (np.uint64(t[i] - lo) << bits) | np.uint64(i)
    return out


@njit(cache=True)
def _unpack_ties(words, bits, loc, seq, small):
    """Sorted _packed words, in place, as their rows (words is int64 here, its bit
    pattern the unsigned word's): each group of equal time sorted by (location, seq, row)
    when it has at most ``small`` rows (they come in row order); returns the positions
    of the larger groups."""
    n = words.shape[0]
    shift = np.int64(bits)
    mask = (np.int64(1) << shift) - 1
    big = np.empty(n, np.int64)
    nbig = 0
    i = 0
    while i < n:
        # the time part: the word shifted down.  An arithmetic shift of the int64 is equal
        # for two words exactly when the logical one is, and it stays in int64: shifting
        # uint64 casts of the words made this loop 12x slower (0.20 s for 5 M rows)
        time = words[i] >> shift
        words[i] = words[i] & mask
        j = i + 1
        while j < n and (words[j] >> shift) == time:
            words[j] = words[j] & mask
            j += 1
        if j - i > 1:
            nbig = _settle(words, i, j, loc, seq, small, big, nbig)
        i = j
    return big[:nbig].copy()


@njit(cache=True, inline="always")
def _settle(order, i, j, loc, seq, small, big, nbig):
    """A group of equal time, order[i:j]: sorted here when it has at most ``small``
    rows, else its positions added to ``big`` (lexsorted by the caller's caller);
    returns how many positions ``big`` holds."""
    if j - i > small:
        for p in range(i, j):
            big[nbig] = p
            nbig += 1
    else:
        _sort_group(order, i, j, loc, seq)
    return nbig


@njit(cache=True, inline="always")
def _sort_group(order, i, j, loc, seq):
    """Insertion sort of order[i:j] (rows of equal time) by (location, seq, row)."""
    for p in range(i + 1, j):       # groups are tiny
        r = order[p]
        q = p - 1
        while q >= i and (loc[order[q]] > loc[r] or (loc[order[q]] == loc[r] and (
                seq[order[q]] > seq[r] or (seq[order[q]] == seq[r] and order[q] > r)))):
            order[q + 1] = order[q]
            q -= 1
        order[q + 1] = r


@njit(cache=True)
def _location_major(t, loc, seq):
    """Whether the rows are in (location, time, seq) order (stops at the first that
    is not: one compare a row when they are)."""
    for i in range(1, t.shape[0]):
        if loc[i] == loc[i - 1]:
            if t[i] < t[i - 1] or (t[i] == t[i - 1] and seq[i] < seq[i - 1]):
                return False
        elif loc[i] < loc[i - 1]:
            return False
    return True


@njit(cache=True)
def _order_ties(order, t, loc, seq, small):
    """Sort each group of equal time in ``order`` by (location, seq, row) when it
    has at most ``small`` rows; returns the positions of the larger groups."""
    n = len(order)
    big = np.empty(n, np.int64)
    nbig = 0
    i = 0
    while i < n:
        j = i + 1
        while j < n and t[order[j]] == t[order[i]]:
            j += 1
        nbig = _settle(order, i, j, loc, seq, small, big, nbig)
        i = j
    return big[:nbig].copy()


def run_starts(t, loc, seq) -> np.ndarray:
    """Offsets of the ascending runs of the key, and the row count at the end."""
    n = len(t)
    if n < 2:
        return np.array([0, n], np.int64)
    loc = _compared(loc)
    return _run_starts(np.ascontiguousarray(t, np.int64), loc, np.ascontiguousarray(seq, np.int64))


def _descents(t, loc, seq, starts: np.ndarray) -> np.ndarray:
    """Of the given run offsets, those where the key goes down (runs that need merging)."""
    inner = starts[1:-1]
    inner = inner[(inner > 0) & (inner < len(t))]
    a, b = inner - 1, inner
    down = (t[b] < t[a]) | ((t[b] == t[a]) & ((loc[b] < loc[a])
                                             | ((loc[b] == loc[a]) & (seq[b] < seq[a]))))
    return np.concatenate(([0], inner[down], [len(t)])).astype(np.int64)


@njit(cache=True)
def _run_starts(t, loc, seq):
    # one pass, no temporaries: this runs on every decoded chunk
    n = len(t)
    out = np.empty(n + 1, np.int64)
    out[0] = 0
    k = 1
    for i in range(1, n):
        if t[i] > t[i - 1]:
            continue
        if t[i] == t[i - 1] and (loc[i] > loc[i - 1]
                                 or (loc[i] == loc[i - 1] and seq[i] >= seq[i - 1])):
            continue
        out[k] = i
        k += 1
    out[k] = n
    return out[:k + 1].copy()


def sort_by_key(table: Table, starts: np.ndarray | None = None) -> Table:
    """The table in key order; ``starts``: known offsets of sorted runs (and the length)."""
    order = merge_order(table, starts)
    return table if order is None else table.take(order)


@njit(cache=True)
def _before(t, loc, seq, i, j):
    """Row i comes before row j: by key, then by position (a stable merge)."""
    if t[i] != t[j]:
        return t[i] < t[j]
    if loc[i] != loc[j]:
        return loc[i] < loc[j]
    if seq[i] != seq[j]:
        return seq[i] < seq[j]
    return i < j


@njit(cache=True)
def _sift_down(heap, size, at, pos, t, loc, seq):
    while True:
        child = 2 * at + 1
        if child >= size:
            return
        if child + 1 < size and _before(t, loc, seq, pos[heap[child + 1]], pos[heap[child]]):
            child += 1
        if not _before(t, loc, seq, pos[heap[child]], pos[heap[at]]):
            return
        heap[at], heap[child] = heap[child], heap[at]
        at = child


@njit(cache=True)
def merge_runs(t, loc, seq, starts):
    """Permutation merging the ascending runs rows[starts[r]:starts[r+1]] by key.

    A binary heap of runs, ordered by each run's current row; equal keys keep
    their input order, so the result equals np.lexsort((seq, loc, t)).
    """
    k = len(starts) - 1
    pos = starts[:-1].copy()
    heap = np.empty(k, np.int64)
    size = 0
    for r in range(k):
        if starts[r] < starts[r + 1]:
            heap[size] = r
            size += 1
    for at in range(size // 2 - 1, -1, -1):
        _sift_down(heap, size, at, pos, t, loc, seq)
    out = np.empty(len(t), np.int64)
    for i in range(len(t)):
        r = heap[0]
        out[i] = pos[r]
        pos[r] += 1
        if pos[r] == starts[r + 1]:
            size -= 1
            heap[0] = heap[size]
        _sift_down(heap, size, 0, pos, t, loc, seq)
    return out


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
