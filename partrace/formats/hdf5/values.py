"""Writing a numeric column's rows: compressed here (chunks.py) where the dataset's filters
allow, else through h5py; chunks whose rows are all zero are not written at all.  Below the
layout and the text columns, which both write through it."""
from __future__ import annotations

import numpy as np

from ...model import Column
from . import chunks as hdf5_chunks

UNREAD = object()   # write_values' ``how`` not given: read from the dataset


def write_values(ds, col: Column | None, values: np.ndarray, start: int,
                 pending: hdf5_chunks.Pending | None = None, how=UNREAD) -> None:
    """Write numeric ``values`` at rows start.. of ``ds`` (which must be long enough);
    with ``pending`` (a writer's, drained before its file closes) chunks may still be
    compressing when this returns.

    Chunks whose rows are all zero are not written: the dataset's fill value (0)
    reads back for them, they take no bytes and no compression time.  Columns that
    do not apply to most records (an OTF trace's file, RMA and collective fields,
    a DUMPI rank's root) are zero for whole chunks; writing skips them.

    ``how``: the dataset's ``chunks.codec``, where the caller keeps it (reading the
    filters back costs more than writing a near-empty column's chunk).
    """
    n = len(values)
    if not n:
        return
    if how is UNREAD:
        how = hdf5_chunks.codec(ds)
    if how is not None:     # compressed here (chunks.py); h5py's pipeline for the rest
        hdf5_chunks.write(ds, values, start, how, pending)
        return
    step = ds.chunks[0] if ds.chunks else n
    first = -(-start // step) * step - start          # the first chunk boundary inside
    bounds = np.concatenate(([0], np.arange(first if first > 0 else step, n, step), [n]))
    flags = values.reshape(n, -1).any(axis=1) if values.ndim > 1 else values != 0
    used = np.logical_or.reduceat(flags, bounds[:-1])
    if used.all():
        ds[start:start + n] = values
        return
    # runs of chunks with something in them, written one slice each
    edges = np.flatnonzero(np.diff(np.concatenate(([False], used, [False])).astype(np.int8)))
    for a, b in zip(bounds[edges[0::2]], bounds[edges[1::2]]):
        ds[start + a:start + b] = values[a:b]
