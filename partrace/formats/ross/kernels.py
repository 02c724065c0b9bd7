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


@njit(cache=True, inline="always")
def _u32(buf, p):
    """The little-endian u32 at byte ``p`` of ``buf``: bytes, or the file viewed as u32 words
    (``p`` a multiple of 4 then; about 3x faster)."""
    if buf.itemsize == 4:
        return np.int64(buf[p >> 2])
    return (np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16)
            | (np.int64(buf[p + 3]) << 24))


@njit(cache=True, nogil=True)
def lp_facts(buf, sel, start, key_off, dst_off, size_off, count, first, pfirst, psize, sizes, odd,
             nodd):
    """One pass over the headers of the records ``sel[start:]`` whose raw key is a u32 LP (or PE)
    id, counting densely by id: ``count`` records per key, ``first`` record of each key,
    ``pfirst`` / ``psize`` first record and its size per size-LP, ``odd[:nodd[0]]`` records
    whose size differs from their size-LP's first.  The size-LP is the id at ``dst_off``
    (counted as a key too: event records) or else the key; ``size_off`` < 0: no model data
    size, else ``sizes`` per record.  Returns (the record it stopped at, the id it needs room
    for: -1 done, -2 ``odd`` full); the caller grows the arrays and calls again from there."""
    cap = count.shape[0]
    for i in range(start, sel.shape[0]):
        p = sel[i]
        k = _u32(buf, p + key_off)
        pk = _u32(buf, p + dst_off) if dst_off >= 0 else k
        if k >= cap or pk >= cap:
            return i, max(k, pk)
        if size_off >= 0:
            z = _u32(buf, p + size_off)
            if pfirst[pk] < 0:
                pfirst[pk] = i
                psize[pk] = z
            elif psize[pk] != z:
                if nodd[0] == odd.shape[0]:
                    return i, -2
                odd[nodd[0]] = i
                nodd[0] += 1
            sizes[i] = z
        count[k] += 1
        if first[k] < 0:
            first[k] = i
        if dst_off >= 0:
            count[pk] += 1
    return sel.shape[0], -1
