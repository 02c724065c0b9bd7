"""Owned chunks written once, straight into the one HDF5 file, window by window.

In the serial join (hdf5_joined.py) rank 0 alone writes the output's HDF5, but a chunk's
place needs only its stored size.  So a rank r > 0 does not store the whole chunks it
owns (chunk_owners.py) in its part: it keeps them, encoded, in a ``ChunkLog`` for the
window (a ``LoggedDataset`` stands for the part's dataset to the writer, which stores a
chunk with ``write_direct_chunk`` as ever).  During the next window rank 0 places every
rank's logged chunks in the file it writes, as holes of their stored sizes
(hdf5_holes.py), and at its end sends each rank the places of its own; each rank writes
its chunks' bytes there and forgets them.  Every byte of an owned chunk is then written
once, by its own rank, and no part holds it to be copied again at commit.  A rank holds
at most two windows' chunks, and no more than its log's bound (LOG_BYTES, or a
sixteenth of the memory budget) of both: past it a chunk is stored in the part as
before.  What is left for the
join at commit is those, the text columns' chunks (their bytes follow no row chunk) and
the chunks a rank stores after its last window.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import WriteFailed
LOG_BYTES = 256 << 20   # the most a rank's log holds (with at most 1/16 of its budget)


class ChunkLog:
    """A rank's encoded chunks of owned tables not yet in the output: (dataset index,
    first row, filter mask, stored size) and the bytes of each, in the order stored."""

    def __init__(self, limit: int = LOG_BYTES):
        self.limit = limit
        self.held = 0
        self._waiting: list = []    # bytes taken out, not yet written: in the bound too
        self._waiting_bytes = 0
        self._meta: list[tuple[int, int, int, int]] = []
        self._data: list = []
        self._seen: set[tuple[int, int]] = set()    # every chunk ever logged

    @property
    def full(self) -> bool:
        """The log holds its bound: a chunk stored now goes to the part instead."""
        return self.held + self._waiting_bytes >= self.limit

    def add(self, d: int, row: int, mask: int, data) -> None:
        if (d, row) in self._seen:      # an owner writes each chunk once (chunk_owners.py)
            raise RuntimeError(f"HDF5 join: the chunk at row {row} of owned dataset {d} "
                               f"was stored twice")
        self._seen.add((d, row))
        self._meta.append((d, row, mask, len(data)))
        self._data.append(data)
        self.held += len(data)

    def was_stored(self, d: int, row: int) -> bool:
        return (d, row) in self._seen

    def take(self) -> np.ndarray:
        """The chunks logged since the last take, as (n, 4) int64 rows; their bytes wait
        in the log (in its bound) for :meth:`release`, after those of earlier takes."""
        meta = np.array(self._meta, np.int64).reshape(-1, 4)
        self._waiting += self._data
        self._waiting_bytes += self.held
        self._meta, self._data, self.held = [], [], 0
        return meta

    def release(self) -> list:
        """The bytes of every chunk taken and not yet released, in the order taken."""
        data, self._waiting, self._waiting_bytes = self._waiting, [], 0
        return data


class _LoggedId:
    """The part of h5py's DatasetID a writer of whole chunks calls: a chunk to the log
    while it has room, else to the part's dataset, as a chunk the log never had is
    looked up and read there."""

    def __init__(self, owner: "LoggedDataset"):
        self._owner = owner

    def write_direct_chunk(self, offsets, data, filter_mask: int = 0) -> None:
        o = self._owner
        if o.log.full:      # kept in the part, joined at commit
            self._unlogged(offsets).write_direct_chunk(offsets, data, filter_mask)
        else:
            o.log.add(o.index, int(offsets[0]), int(filter_mask), data)

    def get_chunk_info_by_coord(self, offsets):
        return self._unlogged(offsets).get_chunk_info_by_coord(offsets)

    def read_direct_chunk(self, offsets, *args, **kwargs):
        return self._unlogged(offsets).read_direct_chunk(offsets, *args, **kwargs)

    def _unlogged(self, offsets):
        """The part's dataset, for a chunk the log never had."""
        o = self._owner
        if o.log.was_stored(o.index, int(offsets[0])):
            raise RuntimeError(f"HDF5 join: {o.name}: a logged chunk (row {offsets[0]}) "
                               f"was to be written again or read back")
        return o._ds.id


class LoggedDataset:
    """Stands for a part's dataset of an owned table to the chunk writer
    (formats/hdf5/chunks.py): its shape, type and chunks are the part's; a chunk
    stored goes to ``log`` as dataset ``index``."""

    def __init__(self, ds, index: int, log: ChunkLog):
        self._ds, self.index, self.log = ds, index, log
        self.id = _LoggedId(self)

    @property
    def dtype(self):
        return self._ds.dtype

    @property
    def chunks(self):
        return self._ds.chunks

    @property
    def shape(self):
        return self._ds.shape

    @property
    def ndim(self) -> int:
        return self._ds.ndim

    @property
    def name(self) -> str:
        return self._ds.name


def write_logged(path: Path, offsets: np.ndarray, data: list) -> int:
    """A rank's logged chunks' bytes written at ``offsets`` of the output ``path``;
    returns the bytes written."""
    if not len(data):
        return 0
    total = 0
    fd = os.open(path, os.O_WRONLY)
    try:
        for at, chunk in zip(offsets.tolist(), data):
            view = memoryview(chunk)
            done = 0
            while done < view.nbytes:
                try:
                    done += os.pwrite(fd, view[done:], at + done)
                except OSError as exc:
                    raise WriteFailed.of(path, exc) from exc
            total += done
    finally:
        os.close(fd)
    return total
