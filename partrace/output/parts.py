"""Pieces of a sink's output that ranks write into part files and then copy into one file.

Shared by the Perfetto and Chrome JSON sinks: each rank appends its sequences' pieces
(a location's packets or events, window by window) to its own part file; at commit
every rank copies its pieces into the output at offsets that depend only on the
sequences, so no byte depends on windows or on which rank wrote it.  Messages are
paired by counting, per (sender, receiver, tag) key, the messages before each one
(``count_within``), across windows.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
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


def count_within(key: np.ndarray, state: tuple[np.ndarray, np.ndarray]):
    """For rows of message keys (in order): how many earlier rows (this window's and
    every earlier window's) had the same key; and the updated key -> count state."""
    known, counts = state
    uniq, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
    order = np.argsort(inv, kind="stable")
    group_start = np.r_[0, np.cumsum(cnt)[:-1]]
    within = np.empty(len(key), np.int64)
    within[order] = np.arange(len(key)) - group_start[inv[order]]
    pos = np.minimum(np.searchsorted(known, uniq), max(len(known) - 1, 0))
    found = (known[pos] == uniq) if len(known) else np.zeros(len(uniq), bool)
    base = np.where(found, counts[pos] if len(known) else 0, 0)
    k = base[inv] + within
    allk = np.concatenate([known, uniq[~found]])
    allc = np.concatenate([counts, cnt[~found]])
    if len(known):
        allc[pos[found]] += cnt[found]
    o = np.argsort(allk, kind="stable")
    return k, (allk[o], allc[o])


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
