"""Sums keyed by small integer pairs, held sparse: memory grows with the keys that occur
(the (location, region) pairs that were called, the sender/receiver pairs that sent),
never with the product of the key ranges (thousands of locations x thousands of regions).

A :class:`KeyedSums` is an open-addressing hash table in numpy arrays that compiled
kernels add to row by row (O(1) a row, no sort per chunk); :meth:`KeyedSums.items`
gives the keys sorted and their sums.  Values are int64; unsigned columns are summed
as their int64 view (the same bits modulo 2^64, so exact).

A slot is one row of ``slots``: the key, then the sums (a lookup touches one cache
line).  Keys whose two words fit 32 bits (ids are int32 columns: all of them, in
practice) are packed into one int64 in the order of the pairs: a slot is 8 bytes
smaller, a probe one compare, and the sorted keys one int64 sort.  The first key that
does not fit turns the table wide (two key words a slot) for good.
"""
from __future__ import annotations

import numpy as np

from ..kernels.jit import njit   # lazy: numba only for inputs that are not small


EMPTY = np.iinfo(np.int64).min     # first key word of a free slot (no key packs to this)
KEYS = 2        # key width: (location, region), (sender, receiver), (location, collective)
HALF = 1 << 31
# count[...] of a table: keys held, key words a slot (PACKED or WIDE), 1 when a key
# did not pack (the caller's grow() then widens the table)
HELD, WORDS, UNPACKED = 0, 1, 2
PACKED, WIDE = 1, 2


@njit(cache=True, inline="always")
def _packs(k0, k1):     # pragma: no cover - compiled
    """(k0, k1) fits one int64 key other than EMPTY (k0 = -2^31 is left out for that)."""
    return -HALF < k0 < HALF and -HALF <= k1 < HALF


@njit(cache=True, inline="always")
def _packed(k0, k1):    # pragma: no cover - compiled
    """k0 * 2^32 + (k1 + 2^31): ordered as the pairs are (k0 first, both signed)."""
    return (np.int64(k0) << np.int64(32)) + (np.int64(k1) + np.int64(HALF))


@njit(cache=True, inline="always")
def _mix(h):    # pragma: no cover - compiled
    """Slot hash of a uint64 (the low bits a table uses depend on all of its bits)."""
    h *= np.uint64(0x9E3779B97F4A7C15)
    h ^= h >> np.uint64(32)
    h *= np.uint64(0xC2B2AE3D27D4EB4F)
    h ^= h >> np.uint64(29)
    return h


@njit(cache=True)
def slot_of(slots, count, k0, k1):      # pragma: no cover - compiled
    """The slot holding key (k0, k1), claiming a free one if absent; -1 when the table is
    half full or the key does not pack into a packed table (the caller calls ``grow()``
    and asks again).  The sums are the last columns of the slot's row."""
    mask = slots.shape[0] - 1
    if count[WORDS] == PACKED:
        if not _packs(k0, k1):
            count[UNPACKED] = 1
            return -1
        key = _packed(k0, k1)
        s = np.int64(_mix(np.uint64(key)) & np.uint64(mask))
        while slots[s, 0] != EMPTY:
            if slots[s, 0] == key:
                return s
            s = (s + 1) & mask
        if 2 * (count[HELD] + 1) > slots.shape[0]:
            return -1
        slots[s, 0] = key
        count[HELD] += 1
        return s
    h = _mix(np.uint64(np.int64(k0)) ^ (np.uint64(np.int64(k1)) * np.uint64(0xD6E8FEB86659FD93)))
    s = np.int64(h & np.uint64(mask))
    while slots[s, 0] != EMPTY:
        if slots[s, 0] == k0 and slots[s, 1] == k1:
            return s
        s = (s + 1) & mask
    if 2 * (count[HELD] + 1) > slots.shape[0]:
        return -1
    slots[s, 0] = k0
    slots[s, 1] = k1
    count[HELD] += 1
    return s


@njit(cache=True)
def _add_rows(slots, count, new_keys, new_values):     # pragma: no cover - compiled
    v = slots.shape[1] - new_values.shape[1]
    for i in range(new_keys.shape[0]):
        s = slot_of(slots, count, new_keys[i, 0], new_keys[i, 1])
        if s < 0:
            return i
        for j in range(new_values.shape[1]):
            slots[s, v + j] += new_values[i, j]
    return new_keys.shape[0]


@njit(cache=True)
def _rehash(old, slots, count):     # pragma: no cover - compiled
    """The held slots of ``old`` into the free, larger table ``slots`` (same layout)."""
    mask = slots.shape[0] - 1
    wide = count[WORDS] == WIDE
    for i in range(old.shape[0]):
        k0 = old[i, 0]
        if k0 == EMPTY:
            continue
        h = _mix(np.uint64(k0) ^ (np.uint64(old[i, 1]) * np.uint64(0xD6E8FEB86659FD93))) if wide \
            else _mix(np.uint64(k0))
        s = np.int64(h & np.uint64(mask))
        while slots[s, 0] != EMPTY:
            s = (s + 1) & mask
        for j in range(old.shape[1]):
            slots[s, j] = old[i, j]
        count[HELD] += 1


@njit(cache=True)
def _sums_of(slots, keys, out):     # pragma: no cover - compiled
    """out[i] = the sums of packed key keys[i] (each held)."""
    mask = slots.shape[0] - 1
    v = slots.shape[1] - out.shape[1]
    for i in range(keys.shape[0]):
        key = keys[i]
        s = np.int64(_mix(np.uint64(key)) & np.uint64(mask))
        while slots[s, 0] != key:
            s = (s + 1) & mask
        for j in range(out.shape[1]):
            out[i, j] = slots[s, v + j]


class KeyedSums:
    """Sums of ``nvalues`` int64 columns per key of two int64s (``slots``: one row per
    slot, key then sums; ``count``: keys held, key words a slot, a key that did not pack)."""

    def __init__(self, width: int, nvalues: int, capacity: int = 1024):
        if width != KEYS:
            raise ValueError(f"keys are {KEYS} integers wide, not {width}")
        self.nvalues = nvalues
        cap = 1 << max(4, int(capacity - 1).bit_length())
        self.count = np.array([0, PACKED, 0], np.int64)
        self.slots = self._free(cap)

    @property
    def wide(self) -> bool:
        return int(self.count[WORDS]) == WIDE

    def _free(self, cap: int) -> np.ndarray:
        slots = np.zeros((cap, int(self.count[WORDS]) + self.nvalues), np.int64)
        slots[:, 0] = EMPTY
        return slots

    def __len__(self) -> int:
        return int(self.count[HELD])

    def grow(self) -> None:
        """Room for the key a kernel could not place: the wide layout if it did not pack,
        else four times the slots (a table that fills once tends to keep filling)."""
        if self.count[UNPACKED]:
            keys, values = self.items()
            self.count[:] = (0, WIDE, 0)
            self.slots = self._free(len(self.slots))
            self.add(keys, values)
            return
        old = self.slots
        self.count[HELD] = 0
        self.slots = self._free(4 * len(old))
        _rehash(old, self.slots, self.count)

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
        if self.wide:
            held = self.slots[self.slots[:, 0] != EMPTY]
            order = np.lexsort((held[:, 1], held[:, 0]))
            held = held[order]
            return held[:, :KEYS], held[:, KEYS:]
        packed = self.slots[:, 0]
        packed = packed[packed != EMPTY]
        packed.sort()       # one int64 sort of the keys alone; the sums looked up in order
        sums = np.empty((len(packed), self.nvalues), np.int64)
        _sums_of(self.slots, packed, sums)
        keys = np.empty((len(packed), KEYS), np.int64)
        keys[:, 0] = packed >> 32
        keys[:, 1] = (packed & 0xFFFFFFFF) - HALF
        return keys, sums

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
