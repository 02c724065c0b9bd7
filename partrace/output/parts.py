"""Outputs that ranks write as pieces of part files, then copy into one file.

The base of the Perfetto and Chrome JSON sinks.  Each rank appends its sequences' pieces
(a location's packets or events, window by window) to its own part file, noting each
piece's sequence key, offset and length (``append``); at commit every rank copies its
pieces into the output at offsets that depend only on the sequences, after the header
rank 0 writes and before the footer, so no byte depends on windows or on which rank
wrote it.  A sink on this base says which tables it writes and how (``table_writers``),
what a sequence is (its keys), what the header holds (``header``) and what it needs
gathered from every rank for it (``gathered``).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
from .owned import LocationOwnedSink
from .staging import Staging

COPY_BLOCK = 16 << 20       # bytes read at once when the parts are copied into the output


def place_parts(comm: Comm, staging: Staging, name: str, out: Path, dest: np.ndarray,
                keys: np.ndarray, pieces: np.ndarray) -> None:
    """Copy this rank's part file into ``out`` (sized by rank 0) at each sequence's place,
    then (rank 0) move ``out`` to ``name`` and publish it.  ``keys``: this rank's sequences,
    sorted, each starting at ``dest`` in the output; ``pieces``: (key, offset in the part,
    length) of the part's pieces in the order written."""
    with comm.guard():
        fd = os.open(out, os.O_WRONLY)
        src = os.open(staging.path(f"part-{comm.rank}"), os.O_RDONLY)
        try:
            at = dest[np.searchsorted(keys, pieces[:, 0])] + _within(pieces[:, 0], pieces[:, 2])
            # pieces next to each other in the part and in the output are copied as one
            # (one window: the whole part in one run), in blocks of COPY_BLOCK bytes
            for off, length, to in _runs(pieces[:, 1], pieces[:, 2], at).tolist():
                for done in range(0, length, COPY_BLOCK):
                    n = min(COPY_BLOCK, length - done)
                    os.pwrite(fd, os.pread(src, n, off + done), to + done)
        finally:
            os.close(fd)
            os.close(src)
    comm.check()
    comm.barrier()
    with comm.guard():
        if comm.rank == 0:
            os.replace(out, staging.path(name))
            for r in range(comm.size):
                staging.path(f"part-{r}").unlink()
            staging.publish([name])
    comm.check()


class PartFileSink(LocationOwnedSink):
    windows = True
    #: the bytes after the last sequence
    footer = b""

    def __init__(self, path, overwrite: bool = False):
        super().__init__(path, overwrite)
        self.part = None

    def open_part(self, comm: Comm) -> None:
        """Collective, once staged: this rank's part file."""
        self.pieces: list[np.ndarray] = []      # (key, offset in part, length) per chunk
        self.part_size = 0
        with comm.guard():
            self.part = open(self.staging.path(f"part-{comm.rank}"), "wb")
        comm.check()

    def append(self, keys: np.ndarray, buf, ends: np.ndarray) -> None:
        """A chunk's bytes (rows grouped by sequence key, in order; ``ends``: where each
        row's end): write them and note each key's piece."""
        last = np.r_[np.flatnonzero(keys[1:] != keys[:-1]), len(keys) - 1]
        stop = ends[last]
        start = np.r_[0, stop[:-1]]
        self.pieces.append(np.stack([keys[last], start + self.part_size, stop - start], axis=1))
        self.part.write(buf)
        self.part_size += int(stop[-1])

    def table_writers(self) -> list:
        """[(table, the method writing a window's rows of it)], in the order they are written."""
        raise NotImplementedError

    def write(self, comm: Comm, tables: dict) -> None:
        with comm.guard():
            for name, write in self.table_writers():
                t = tables.get(name)
                if t is not None and len(t):
                    write(t)
        comm.check()

    def gathered(self):
        """What the header needs from this rank (commit gathers it from every rank)."""
        return None

    def header(self, gathered: list) -> bytes:
        """Rank 0: the bytes before the first sequence, from every rank's ``gathered``."""
        raise NotImplementedError

    def commit(self, comm: Comm) -> None:
        with comm.guard():
            self.part.close()
            pieces = np.concatenate(self.pieces) if self.pieces else np.zeros((0, 3), np.int64)
            # pieces of a key in window order; keys in sequence order
            pieces = pieces[np.argsort(pieces[:, 0], kind="stable")]
            keys, first = np.unique(pieces[:, 0], return_index=True)
            totals = np.add.reduceat(pieces[:, 2], first) if len(keys) else np.zeros(0, np.int64)
            mine = self.gathered()
        comm.check()
        everything = comm.allgather((keys, totals, mine))
        header = b""
        with comm.guard():
            if comm.rank == 0:
                header = self.header([g for *_, g in everything])
        comm.check()
        header_size = comm.bcast(len(header))
        with comm.guard():
            all_keys = np.concatenate([k for k, _, _ in everything])
            all_totals = np.concatenate([t for _, t, _ in everything])
            o = np.argsort(all_keys, kind="stable")
            offsets = np.empty(len(o), np.int64)
            offsets[o] = header_size + np.r_[0, np.cumsum(all_totals[o])[:-1]]
            # where each of this rank's sequences starts (every key is written by one rank)
            dest = offsets[o][np.searchsorted(all_keys[o], keys)]
            out = self.staging.path("out")
            if comm.rank == 0:
                body = header_size + int(all_totals.sum())
                with open(out, "wb") as f:
                    f.write(header)
                    f.truncate(body)
                    f.seek(body)
                    f.write(self.footer)
        comm.check()
        comm.barrier()
        place_parts(comm, self.staging, self.final.name, out, dest, keys, pieces)

    def release(self) -> None:
        if self.part is not None and not self.part.closed:
            self.part.close()


def _within(keys: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """For pieces grouped by key: each piece's offset from its key's first piece."""
    if not len(keys):
        return np.zeros(0, np.int64)
    before = np.cumsum(lengths) - lengths
    first = np.r_[0, np.flatnonzero(keys[1:] != keys[:-1]) + 1]
    group = np.cumsum(np.r_[0, (keys[1:] != keys[:-1]).astype(np.int64)])
    return before - before[first][group]


def _runs(offsets: np.ndarray, lengths: np.ndarray, at: np.ndarray) -> np.ndarray:
    """(offset, length, destination) of the maximal runs of pieces that follow each other
    both where they are and where they go."""
    if not len(offsets):
        return np.zeros((0, 3), np.int64)
    joined = (offsets[1:] == offsets[:-1] + lengths[:-1]) & (at[1:] == at[:-1] + lengths[:-1])
    first = np.r_[0, np.flatnonzero(~joined) + 1]
    return np.stack([offsets[first], np.add.reduceat(lengths, first), at[first]], axis=1)
