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


EMPTY = np.iinfo(np.int64).min     # first key word of a free slot (no id is this)
KEYS = 2        # key width: (location, region), (sender, receiver), (location, collective)


@njit(cache=True)
def slot_of(slots, count, k0, k1):      # pragma: no cover - compiled
    """The slot holding key (k0, k1), claiming a free one if absent; -1 when the table is
    half full (the caller grows it and asks again).  A slot is one row of ``slots``: the
    two key words then the sums, so a lookup touches one cache line, not three arrays."""
    mask = slots.shape[0] - 1
    h = (np.uint64(np.int64(k0)) * np.uint64(0x9E3779B97F4A7C15)) ^ np.uint64(np.int64(k1))
    h *= np.uint64(0xC2B2AE3D27D4EB4F)
    h ^= h >> np.uint64(29)
    s = np.int64(h & np.uint64(mask))
    while slots[s, 0] != EMPTY:
        if slots[s, 0] == k0 and slots[s, 1] == k1:
            return s
        s = (s + 1) & mask
    if 2 * (count[0] + 1) > slots.shape[0]:
        return -1
    slots[s, 0] = k0
    slots[s, 1] = k1
    count[0] += 1
    return s


@njit(cache=True)
def _add_rows(slots, count, new_keys, new_values):     # pragma: no cover - compiled
    for i in range(new_keys.shape[0]):
        s = slot_of(slots, count, new_keys[i, 0], new_keys[i, 1])
        if s < 0:
            return i
        for j in range(new_values.shape[1]):
            slots[s, KEYS + j] += new_values[i, j]
    return new_keys.shape[0]


class KeyedSums:
    """Sums of ``nvalues`` int64 columns per key of two int64s (``slots``: one row per
    slot, key then sums; ``count``: the keys held)."""

    def __init__(self, width: int, nvalues: int, capacity: int = 1024):
        if width != KEYS:
            raise ValueError(f"keys are {KEYS} integers wide, not {width}")
        self.nvalues = nvalues
        cap = 1 << max(4, int(capacity - 1).bit_length())
        self.slots = self._free(cap)
        self.count = np.zeros(1, np.int64)

    def _free(self, cap: int) -> np.ndarray:
        slots = np.zeros((cap, KEYS + self.nvalues), np.int64)
        slots[:, 0] = EMPTY
        return slots

    def __len__(self) -> int:
        return int(self.count[0])

    def grow(self) -> None:
        """Four times the slots (a table that fills once tends to keep filling), the entries
        re-inserted."""
        held = self.slots[self.slots[:, 0] != EMPTY]
        keys, values = held[:, :KEYS], held[:, KEYS:]
        self.slots = self._free(4 * len(self.slots))
        self.count[0] = 0
        self.add(keys, values)

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Add ``values`` (n, nvalues) at ``keys`` (n, 2)."""
        keys = np.ascontiguousarray(keys, np.int64)
        if len(keys) and (keys[:, 0] == EMPTY).any():
            raise ValueError(f"key {EMPTY} marks a free slot")
        values = np.ascontiguousarray(values).view(np.int64) if values.dtype == np.uint64 else \
            np.ascontiguousarray(values, np.int64)
        start = 0
        while start < len(keys):
            start += _add_rows(self.slots, self.count, keys[start:], values[start:])
            if start < len(keys):
                self.grow()

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys (n, 2) in ascending lexicographic order, their sums (n, nvalues))."""
        held = self.slots[self.slots[:, 0] != EMPTY]
        k0, k1 = held[:, 0], held[:, 1]
        if len(held) and min(k0.min(), k1.min()) >= 0 and max(k0.max(), k1.max()) < (1 << 31):
            order = np.argsort((k0 << 32) | k1)     # one int64 sort: faster than lexsort
        else:
            order = np.lexsort((k1, k0))
        held = held[order]
        return held[:, :KEYS], held[:, KEYS:]

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
        self.__init__(KEYS, values.shape[1], 2 * len(keys) + 1)
        self.add(keys, values)
