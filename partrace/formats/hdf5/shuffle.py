"""HDF5's shuffle (byte j of every element, then byte j + 1, ...) and scale-offset's
bit packing, each one compiled loop with a numpy twin for small inputs.

A chunk is 65,536 rows however few a trace has (the dataset's chunk shape), so these run
over whole chunks even on a small input; as Python loops they took about half the CPU of
a small merge to HDF5 and most of one in many windows.  Small mode (kernels/jit.py) runs
the twins instead: vectorised, no numba import, the same bytes."""
from __future__ import annotations

import numpy as np
from ...kernels.jit import njit

# elements a twin unpacks to bits at a time: 64 bytes each, 4 MiB of bits
TWIN_BLOCK = 1 << 16


def _planes_numpy(words, keep, out):
    """:func:`planes` as numpy: the words' little-endian bytes, transposed."""
    n = words.shape[0]
    size = words.dtype.itemsize
    raw = words.astype(words.dtype.newbyteorder("<"), copy=False).view(np.uint8)
    out[:keep * n].reshape(keep, n)[...] = raw.reshape(n, size)[:, :keep].T


def _pack_bits_numpy(words, base, bits, out):
    """:func:`pack_bits` as numpy: each code's low ``bits`` of its big-endian bits, end to
    end; blocks of a multiple of 8 codes end on a byte."""
    mask = np.uint64((1 << int(bits)) - 1)
    low = np.uint64(base)
    at = 0
    for first in range(0, words.shape[0], TWIN_BLOCK):
        codes = (words[first:first + TWIN_BLOCK].astype(np.uint64) - low) & mask
        big = codes.astype(">u8").view(np.uint8).reshape(-1, 8)
        packed = np.packbits(np.unpackbits(big, axis=1)[:, 64 - bits:].reshape(-1))
        out[at:at + packed.shape[0]] = packed
        at += packed.shape[0]


def _unpack_bits_numpy(packed, bits, out):
    """:func:`unpack_bits` as numpy."""
    n = out.shape[0]
    for first in range(0, n, TWIN_BLOCK):
        count = min(TWIN_BLOCK, n - first)
        start = first * bits // 8       # a block starts on a byte: first is a multiple of 8
        got = np.unpackbits(np.asarray(packed[start:start + (count * bits + 7) // 8]))
        wide = np.zeros((count, 64), np.uint8)
        wide[:, 64 - bits:] = got[:count * bits].reshape(count, bits)
        out[first:first + count] = np.packbits(wide, axis=1).view(">u8").reshape(count)


@njit(cache=True, nogil=True, twin=_planes_numpy)
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


@njit(cache=True, nogil=True, twin=_pack_bits_numpy)
def pack_bits(words, base, bits, out):
    """HDF5 scale-offset's packing: each element of ``words`` (unsigned) less ``base``,
    modulo 2**bits, in ``bits`` bits, most significant first, end to end from out[0]
    (``out`` zeroed: the last byte's spare bits stay 0)."""
    mask = np.uint64((1 << bits) - 1)
    low = np.uint64(base)
    acc = np.uint64(0)
    held = 0
    j = 0
    for i in range(words.shape[0]):
        acc = (acc << np.uint64(bits)) | ((np.uint64(words[i]) - low) & mask)
        held += bits
        if held >= 8:
            held -= 8
            out[j] = np.uint8((acc >> np.uint64(held)) & np.uint64(0xFF))
            j += 1
    if held:
        out[j] = np.uint8((acc << np.uint64(8 - held)) & np.uint64(0xFF))


@njit(cache=True, nogil=True, twin=_unpack_bits_numpy)
def unpack_bits(packed, bits, out):
    """The inverse of pack_bits: ``out.shape[0]`` codes of ``bits`` bits from ``packed``."""
    acc = np.uint64(0)
    held = 0
    j = 0
    mask = np.uint64((1 << bits) - 1)
    for i in range(out.shape[0]):
        while held < bits:
            acc = (acc << np.uint64(8)) | np.uint64(packed[j])
            j += 1
            held += 8
        held -= bits
        out[i] = (acc >> np.uint64(held)) & mask
