"""Kernels for the rarer parts of a decode: seq numbers of key-value, comment and
marker rows, the values of key-value lines."""
from __future__ import annotations

import numpy as np

from ...kernels.jit import njit   # lazy: numba only for inputs that are not small
from .kernel import _hexval


@njit(cache=True)
def running_counts(index, counts, out):
    """out[i] = counts[index[i]], then that count goes up by one (seq numbers)."""
    for i in range(index.shape[0]):
        out[i] = counts[index[i]]
        counts[index[i]] += 1


@njit(cache=True)
def kv_values(buf, soff, slen, is_bytes, bstart, value, raw):
    """The values of key-value lines from their hex text buf[soff:soff+slen].

    Numbers: the last 16 hex digits (as the OTF library, which shifts digits into a
    uint64).  Byte arrays (is_bytes): 0, their bytes written to raw[bstart:], two digits
    a byte, an odd count of digits read with a leading 0 (bytes.fromhex("0" + text)).
    """
    for i in range(soff.shape[0]):
        s, e = soff[i], soff[i] + slen[i]
        if is_bytes[i]:
            o = bstart[i]
            if slen[i] & 1:
                raw[o] = _hexval(buf[s])
                o += 1
                s += 1
            for p in range(s, e, 2):
                raw[o] = _hexval(buf[p]) * 16 + _hexval(buf[p + 1])
                o += 1
            value[i] = 0
        else:
            v = np.uint64(0)
            for p in range(max(s, e - 16), e):
                v = v * np.uint64(16) + np.uint64(_hexval(buf[p]))
            value[i] = v


def location_index(loc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct locations, index of each row's location among them)."""
    if len(loc) and loc.min() >= 0 and loc.max() < 4 * len(loc) + 4096:   # dense ids: count
        seen = np.zeros(int(loc.max()) + 1, np.int64)
        seen[loc] = 1
        distinct = np.flatnonzero(seen)
        seen[distinct] = np.arange(len(distinct))
        return distinct, seen[loc]
    return np.unique(loc, return_inverse=True)
