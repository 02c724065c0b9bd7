"""Sums keyed by small integer tuples, held sparse: memory grows with the keys that occur
(the (location, region) pairs that were called, the sender/receiver pairs that sent),
never with the product of the key ranges (thousands of locations x thousands of regions).

A :class:`KeyedSums` is an open-addressing hash table in numpy arrays that compiled
kernels add to row by row (O(1) a row, no sort per chunk); :meth:`KeyedSums.items`
gives the keys sorted and their sums.  Values are int64; unsigned columns are summed
as their int64 view (the same bits modulo 2^64, so exact).
"""
from __future__ import annotations

import numpy as np

from ..formats.jit import njit   # lazy: numba only for inputs that are not small


@njit(cache=True)
def slot_of(keys, used, count, key):      # pragma: no cover - compiled
    """The slot holding ``key`` (a row of ints), claiming a free one if absent; -1 when the
    table is half full (the caller grows it and asks again)."""
    mask = keys.shape[0] - 1
    h = np.uint64(0)
    for j in range(keys.shape[1]):
        h = (h ^ np.uint64(key[j])) * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(29)
    s = np.int64(h & np.uint64(mask))
    while used[s]:
        same = True
        for j in range(keys.shape[1]):
            if keys[s, j] != key[j]:
                same = False
                break
        if same:
            return s
        s = (s + 1) & mask
    if 2 * (count[0] + 1) > keys.shape[0]:
        return -1
    used[s] = True
    for j in range(keys.shape[1]):
        keys[s, j] = key[j]
    count[0] += 1
    return s


@njit(cache=True)
def _add_rows(keys, used, values, count, new_keys, new_values):     # pragma: no cover - compiled
    for i in range(new_keys.shape[0]):
        s = slot_of(keys, used, count, new_keys[i])
        if s < 0:
            return i
        for j in range(values.shape[1]):
            values[s, j] += new_values[i, j]
    return new_keys.shape[0]


class KeyedSums:
    """Sums of ``nvalues`` int64 columns per key of ``width`` int64s."""

    def __init__(self, width: int, nvalues: int, capacity: int = 1024):
        cap = 1 << max(4, int(capacity - 1).bit_length())
        self.keys = np.zeros((cap, width), np.int64)
        self.used = np.zeros(cap, np.bool_)
        self.values = np.zeros((cap, nvalues), np.int64)
        self.count = np.zeros(1, np.int64)

    def __len__(self) -> int:
        return int(self.count[0])

    def grow(self) -> None:
        """Twice the slots, the entries re-inserted."""
        keys, values = self.keys[self.used], self.values[self.used]
        cap = 2 * len(self.used)
        self.keys = np.zeros((cap, keys.shape[1]), np.int64)
        self.used = np.zeros(cap, np.bool_)
        self.values = np.zeros((cap, values.shape[1]), np.int64)
        self.count[0] = 0
        self.add(keys, values)

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Add ``values`` (n, nvalues) at ``keys`` (n, width)."""
        keys = np.ascontiguousarray(keys, np.int64)
        values = np.ascontiguousarray(values).view(np.int64) if values.dtype == np.uint64 else \
            np.ascontiguousarray(values, np.int64)
        start = 0
        while start < len(keys):
            start += _add_rows(self.keys, self.used, self.values, self.count, keys[start:],
                               values[start:])
            if start < len(keys):
                self.grow()

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys (n, width) in ascending lexicographic order, their sums (n, nvalues))."""
        keys, values = self.keys[self.used], self.values[self.used]
        if keys.shape[1] == 2 and len(keys) and keys.min() >= 0 and keys.max() < (1 << 31):
            order = np.argsort((keys[:, 0] << 32) | keys[:, 1])    # one int64 sort: faster
        else:
            order = np.lexsort(keys.T[::-1])
        return keys[order], values[order]

    def merge(self, other: "KeyedSums") -> "KeyedSums":
        keys, values = other.items()
        self.add(keys, values)
        return self

    # a reduction sends the entries, not the empty slots
    def __getstate__(self):
        keys, values = self.items()
        return {"keys": keys, "values": values}

    def __setstate__(self, state):
        keys, values = state["keys"], state["values"]
        self.__init__(keys.shape[1], values.shape[1], 2 * len(keys) + 1)
        self.add(keys, values)
