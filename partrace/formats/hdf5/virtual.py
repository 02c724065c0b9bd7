"""A virtual dataset over per-rank shard files, one mapping per shard.

Layout "parts" keeps each rank's rows in a file of its own, and the index file's
datasets put them in global order, which takes each rank's rows window by window:
W windows x P ranks blocks.  A mapping per block (h5py's ``VirtualLayout``) cost
rank 0 about 0.1 ms of Python each, W x P x columns in all, and every reader as
many mappings to parse when it opens the file.

HDF5 maps a mapping's source selection onto its virtual selection element by
element, each taken in its own (row-major) order.  A shard's blocks come in the
same order in the index and in the shard, so they make one mapping: the union of
the blocks in the index, mapped from the union of their rows in the shard.  HDF5
1.10 reads such irregular selections (the files are written as ``v110``).
"""
from __future__ import annotations

import h5py
import numpy as np
from h5py import h5d, h5p, h5s, h5t


def _increasing(pieces: list[tuple[int, int, int]]) -> list[list[tuple[int, int, int]]]:
    """The pieces (place in the index, first row in the shard, rows), index order kept,
    cut where a piece's shard rows come before the previous one's: each group then maps
    as one (our layouts never cut; a guard, not a case)."""
    groups: list[list[tuple[int, int, int]]] = []
    end = None
    for piece in pieces:
        if end is None or piece[1] < end:
            groups.append([])
        groups[-1].append(piece)
        end = piece[1] + piece[2]
    return groups


def create(parent: h5py.Group, name: str, dtype, tail: tuple, blocks, shard_rows: dict,
           source: str) -> h5py.Dataset:
    """``parent[name]``: the ``blocks`` (shard file, first row in it, rows), in global
    order, of the datasets ``source`` in the shards (``shard_rows[file]`` rows each,
    each row of shape ``tail``)."""
    total = sum(rows for _, _, rows in blocks)
    pieces: dict[str, list[tuple[int, int, int]]] = {}
    at = 0
    for fname, first, rows in blocks:
        if rows:
            pieces.setdefault(fname, []).append((at, first, rows))
            at += rows
    whole = (0,) * len(tail)
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_layout(h5d.VIRTUAL)
    for fname, mine in pieces.items():
        for group in _increasing(mine):
            here = h5s.create_simple((total,) + tail)
            there = h5s.create_simple((shard_rows[fname],) + tail)
            here.select_none()
            there.select_none()
            for at, first, rows in group:
                here.select_hyperslab((at,) + whole, (rows,) + tail, op=h5s.SELECT_OR)
                there.select_hyperslab((first,) + whole, (rows,) + tail, op=h5s.SELECT_OR)
            dcpl.set_virtual(here, fname.encode(), source.encode(), there)
    h5d.create(parent.id, name.encode(), h5t.py_create(np.dtype(dtype), logical=1),
               h5s.create_simple((total,) + tail), dcpl=dcpl)
    return parent[name]
