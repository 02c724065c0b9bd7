"""Where a dataset's chunks lie among the ranks of the serial HDF5 join (hdf5_joined.py).

Numbers only, from a part's chunk index and the ranks' row spans: the chunks a part
holds whole (``whole_chunks``: their bytes go into the output as stored), the chunks
whose rows more than one rank wrote (``shared_chunks``: made whole once, at commit), and
a dataset's stored chunks as its chunk index lists them (``stored_chunks``).
"""
from __future__ import annotations

import numpy as np


def whole_chunks(src, ranges: list[tuple[int, int]]) -> np.ndarray:
    """(first row, filter mask, offset in the file, stored size) of each chunk of ``src``
    stored wholly inside row ``ranges``, in row order: where another process reads the
    chunk's bytes from (a chunk never written is all zero, the fill value, as in the
    final file: not listed)."""
    step = src.chunks[0]
    stored = sorted(stored_chunks(src))
    base = src.file.userblock_size     # chunk addresses are relative to it
    table = np.array([(c[0], mask, base + address, size) for c, mask, address, size in stored],
                     np.int64).reshape(-1, 4)
    picked = []
    for a, b in ranges:
        first, last = -(-a // step), min(b, src.shape[0]) // step   # whole chunks
        if b == src.shape[0] and b % step:
            last += 1   # the dataset's last, partial chunk is whole if the range ends it
        if first < last:
            lo, hi = np.searchsorted(table[:, 0], (first * step, last * step))
            picked.append(table[lo:hi])
    return np.concatenate(picked) if picked else table[:0]


def shared_chunks(spans: list[list[tuple[int, int]]], step: int, size: int):
    """The chunks of a ``size``-row dataset (``step`` rows each) that hold rows of more
    than one rank, given each rank's row ``spans``: ``[(first row, [(rank, a, b),
    ...])]`` in row order, the pieces in row order.  Only a span's ends can fall
    inside such a chunk (a chunk inside one span is that rank's alone), so the
    work is per span, never per chunk or row."""
    pieces: dict[int, set] = {}
    for r, mine in enumerate(spans):
        for a, b in mine:
            if a % step:            # starts inside a chunk another rank began
                c = a - a % step
                pieces.setdefault(c, set()).add((r, a, min(b, c + step)))
            if b % step and b != size:      # ends inside one another rank completes
                c = (b - 1) - (b - 1) % step
                pieces.setdefault(c, set()).add((r, max(a, c), b))
    out = []
    for c in sorted(pieces):
        parts = sorted(pieces[c], key=lambda p: p[1])
        if [p[1] for p in parts[1:]] != [p[2] for p in parts[:-1]] or parts[0][1] != c or (
                parts[-1][2] != min(c + step, size)):
            raise AssertionError(f"chunk at row {c}: pieces {parts} do not tile it")
        out.append((c, parts))
    return out


def stored_chunks(ds) -> list[tuple[tuple, int, int, int]]:
    """(coordinates, filter mask, file address, size) of each chunk ``ds`` stores: one
    walk of the chunk index (H5Dchunk_iter) where h5py has it (HDF5 >= 1.14)."""
    if not hasattr(ds.id, "chunk_iter"):
        return stored_chunks_by_lookup(ds)
    found = []
    ds.id.chunk_iter(lambda c: found.append((c.chunk_offset, c.filter_mask,
                                             c.byte_offset, c.size)))
    return found


def stored_chunks_by_lookup(ds) -> list[tuple[tuple, int, int, int]]:
    """stored_chunks for older HDF5: a lookup in the chunk index per chunk."""
    found = []
    step, tail = ds.chunks[0], (0,) * (ds.ndim - 1)
    for row in range(0, ds.shape[0], step):
        c = ds.id.get_chunk_info_by_coord((row,) + tail)
        if c.byte_offset is not None:
            found.append(((row,) + tail, c.filter_mask, c.byte_offset, c.size))
    return found
