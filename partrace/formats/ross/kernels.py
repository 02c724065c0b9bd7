"""Compiled gathers of the decode (numba): fixed-size records, u32 words, seq numbers.

Each replaces numpy fancy indexing with a 2-D index array (n x record bytes of
int64 temporaries) or a sort, by one pass that writes its output once.
"""
from __future__ import annotations

import sys

import numpy as np

from ...kernels.jit import njit   # lazy: numba only for inputs that are not small


def words(buf: np.ndarray) -> np.ndarray:
    """The file as little-endian u32 words (a view; empty on a big-endian machine), which the
    kernels below read where a value's byte offset is a multiple of 4 (as ROSS's records
    are): one word read instead of four byte reads, about 3x faster."""
    if sys.byteorder != "little" or len(buf) < 4:
        return np.empty(0, np.uint32)
    return buf[:len(buf) // 4 * 4].view(np.uint32)


@njit(cache=True, nogil=True)
def copy_rows(buf, buf_words, starts, skip, width, keep, out, out_words):
    """out[i] = buf[starts[i] + skip:...+ width] where keep[i] (``keep`` empty: all), else
    zeros; by words (``out_words``: ``out`` as u32) where the start and the width allow."""
    by_words = buf_words.shape[0] > 0 and width % 4 == 0
    for i in range(starts.shape[0]):
        if keep.shape[0] > 0 and not keep[i]:
            for k in range(width):
                out[i, k] = 0
            continue
        s = starts[i] + skip
        if by_words and s % 4 == 0:
            w = s // 4
            for k in range(width // 4):
                out_words[i, k] = buf_words[w + k]
        else:
            for k in range(width):
                out[i, k] = buf[s + k]


NO_KEEP = np.ones(0, np.bool_)


def copy_records(buf, starts, width, keep, out, skip: int = 0) -> None:
    """out[i] = the ``width`` bytes at starts[i] + skip where keep[i] (None: every row), else
    zeros; ``out``: (len(starts), width) uint8."""
    out_words = (out.view(np.uint32) if width % 4 == 0 and width
                 else np.empty((0, 0), np.uint32))
    copy_rows(buf, words(buf), np.ascontiguousarray(starts, np.int64), np.int64(skip),
              np.int64(width), NO_KEEP if keep is None else keep, out, out_words)


@njit(cache=True, nogil=True)
def u32s(buf, buf_words, offs, add, out):
    """out[i] = the little-endian u32 at byte offs[i] + add (by one word read where that is a
    multiple of 4: ``buf_words``, see words())."""
    for i in range(offs.shape[0]):
        p = offs[i] + add
        if p % 4 == 0 and p // 4 < buf_words.shape[0]:
            out[i] = np.int64(buf_words[p // 4])
        else:
            out[i] = (np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8)
                      | (np.int64(buf[p + 2]) << 16) | (np.int64(buf[p + 3]) << 24))


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


@njit(cache=True, nogil=True)
def spans(time, lp):
    """(min, max) of ``time`` and of ``lp`` (non-empty), in one pass."""
    t0 = t1 = np.int64(time[0])
    l0 = l1 = np.int64(lp[0])
    for i in range(1, time.shape[0]):
        t, k = np.int64(time[i]), np.int64(lp[i])
        t0, t1, l0, l1 = min(t0, t), max(t1, t), min(l0, k), max(l1, k)
    return t0, t1, l0, l1


@njit(cache=True, nogil=True)
def sort_keys(time, lp, t0, l0, width, out):
    """out[i] = (time[i] - t0) * width + lp[i] - l0 (the caller checked that it fits);
    returns how many keys are below the one before them (0: already in order)."""
    down = 0
    for i in range(time.shape[0]):
        out[i] = (np.int64(time[i]) - t0) * width + (np.int64(lp[i]) - l0)
        if i > 0 and out[i] < out[i - 1]:
            down += 1
    return down


@njit(cache=True, nogil=True)
def lookup(table, lo, values, out):
    """out[i] = table[values[i] - lo], -1 where that is outside ``table``; returns the first
    i whose out[i] is negative (absent), or -1."""
    first = -1
    for i in range(values.shape[0]):
        off = np.int64(values[i]) - lo
        out[i] = table[off] if 0 <= off < table.shape[0] else -1
        if out[i] < 0 and first < 0:
            first = i
    return first
