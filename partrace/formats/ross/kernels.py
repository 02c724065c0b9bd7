"""Compiled gathers of the decode (numba): fixed-size records, u32 words, seq numbers.

Each replaces numpy fancy indexing with a 2-D index array (n x record bytes of
int64 temporaries) or a sort, by one pass that writes its output once.
"""
from __future__ import annotations

import numpy as np

from ..jit import njit   # lazy: numba only for inputs that are not small


@njit(cache=True, nogil=True)
def copy_rows(buf, starts, width, keep, out):
    """out[i] = buf[starts[i]:starts[i] + width] where keep[i], else zeros.

    Any element type: on the file viewed as u32 words (``starts`` and
    ``width`` counting words) it copies about 3x faster than by bytes."""
    for i in range(starts.shape[0]):
        if keep[i]:
            s = starts[i]
            for k in range(width):
                out[i, k] = buf[s + k]
        else:
            for k in range(width):
                out[i, k] = 0


def copy_records(buf, starts, width, keep, out) -> None:
    """out[i] = the ``width`` bytes at starts[i] where keep[i], else zeros; by words when
    every start and the width are multiples of 4 (as ROSS's own records are)."""
    starts = np.ascontiguousarray(starts, np.int64)
    if width % 4 == 0 and len(buf) >= 4 and not (starts & 3).any():
        copy_rows(buf[:len(buf) // 4 * 4].view(np.uint32), starts >> 2, width // 4, keep,
                  out.view(np.uint32))
    else:
        copy_rows(buf, starts, width, keep, out)


@njit(cache=True, nogil=True)
def u32s(buf, offs, out):
    for i in range(offs.shape[0]):
        p = offs[i]
        out[i] = (np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16)
                  | (np.int64(buf[p + 3]) << 24))


@njit(cache=True, nogil=True)
def dense_seq(keys, prefix_keys, prefix_counts, size, out):
    """out[i] = records of keys[i] before the region (prefix) + earlier ones in it;
    keys are in [0, size)."""
    count = np.zeros(size, np.int64)
    for j in range(prefix_keys.shape[0]):
        k = prefix_keys[j]
        if 0 <= k < size:
            count[k] = prefix_counts[j]
    for i in range(keys.shape[0]):
        k = keys[i]
        out[i] = count[k]
        count[k] += 1


@njit(cache=True, nogil=True)
def to_ns(x, scale, out):
    """out = rint(x * scale) as int64; +-inf and |values| >= 9.2e18 clamp to int64
    max/min, NaN to max."""
    hi, lo = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    for i in range(x.shape[0]):
        v = np.float64(x[i]) * scale
        if np.isfinite(v) and abs(v) < 9.2e18:
            out[i] = np.int64(np.rint(v))
        else:
            out[i] = lo if v < 0 else hi
