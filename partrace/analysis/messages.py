"""Who talks to whom: the message matrix, the message size histogram and the
collectives, folded from decoded rows with no global order.

A message is a SEND row (the send call or record): sender = its location,
receiver = its ``peer``, bytes = its ``size`` (0 where the format records no
size, as ROSS).  Rows whose peer is 0 (no peer: MPI_PROC_NULL in DUMPI) are not
messages.  A collective is a COLLECTIVE or COLLECTIVE_BEGIN row, named by its
region (the MPI call) or else its collective operation; bytes are its ``size``
(sent) and ``received`` columns.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.jit import njit   # lazy: numba only for inputs that are not small
from ..model import Definitions, Kind, Table
from .sparse import KeyedSums, slot_of

# the columns of events the fold reads (absent ones are zeros)
COLUMNS = ("kind", "location", "peer", "size", "region", "collop", "received")
HIST_BINS = 65          # bin b holds sizes in [2^(b-1), 2^b); bin 0 holds size 0
SEND, COLLECTIVE, COLLECTIVE_BEGIN = int(Kind.SEND), int(Kind.COLLECTIVE), int(Kind.COLLECTIVE_BEGIN)


@dataclass
class CommAcc:
    """Sparse sums (hash tables: memory grows with the pairs that occur) and the histogram."""

    pairs: KeyedSums        # (sender, receiver) -> messages, bytes (uint64 as int64 bits)
    hist: np.ndarray        # (HIST_BINS,) messages per size bin
    hist_bytes: np.ndarray  # (HIST_BINS,) bytes per size bin (uint64 as int64 bits)
    coll: KeyedSums         # (location, collective id: region, or -collop) -> calls, sent, received


def start(defs: Definitions) -> CommAcc:
    return CommAcc(KeyedSums(2, 2), np.zeros(HIST_BINS, np.int64), np.zeros(HIST_BINS, np.int64),
                   KeyedSums(2, 3))


@njit(cache=True)
def _bit_length(v):     # pragma: no cover - compiled
    """Bits of the uint64 whose int64 view is ``v`` (0 for 0)."""
    x = np.uint64(v)
    n = 0
    for w in (32, 16, 8, 4, 2, 1):
        if x >= (np.uint64(1) << np.uint64(w)):
            x = x >> np.uint64(w)
            n += w
    return n + np.int64(x)


@njit(cache=True)
def _fold_rows(kind, loc, peer, size, region, collop, received, pairs, npairs, coll, ncoll,
               hist, hist_bytes):   # pragma: no cover - compiled
    """One pass over a chunk's rows.  Returns (rows done, 0) or (row, 1 | 2): the pair or
    collective table is half full; the caller grows it and calls again from that row.
    Absent columns come as one zero (``size[0]``...): read through ``_at``.  The sums are
    the last columns of a slot's row (after its one or two key words)."""
    pv, cv = pairs.shape[1] - 2, coll.shape[1] - 3
    for i in range(len(kind)):
        k = kind[i]
        if k == SEND and _at(peer, i) != 0:
            s = slot_of(pairs, npairs, loc[i], _at(peer, i))
            if s < 0:
                return i, 1
            n = np.int64(_at(size, i))
            pairs[s, pv] += 1
            pairs[s, pv + 1] += n
            b = _bit_length(n)
            hist[b] += 1
            hist_bytes[b] += n
        elif k == COLLECTIVE or k == COLLECTIVE_BEGIN:
            r = np.int64(_at(region, i))
            s = slot_of(coll, ncoll, loc[i], r if r != 0 else -np.int64(_at(collop, i)))
            if s < 0:
                return i, 2
            coll[s, cv] += 1
            coll[s, cv + 1] += np.int64(_at(size, i))
            coll[s, cv + 2] += np.int64(_at(received, i))
    return len(kind), 0


@njit(cache=True, inline="always")
def _at(column, i):      # pragma: no cover - compiled
    """Row i of a column, or its one value (an absent column: zero)."""
    return column[i] if len(column) > 1 else column[0]


ZERO = np.zeros(1, np.int64)


def _column(t: Table, name: str) -> np.ndarray:
    """A column as decoded (unsigned 64-bit ones as their int64 view: the same bits); one
    zero if absent (no column of zeros is made)."""
    if name not in t.names:
        return ZERO
    v = _dense(t[name])
    return v.view(np.int64) if v.dtype == np.uint64 else v


def _dense(values) -> np.ndarray:
    """A column as a contiguous array: a reader's column of one repeated value (a
    read-only stride-0 view, formats.base.repeated) is written out here, so the kernel
    is compiled for contiguous arrays only."""
    return np.ascontiguousarray(values)


def step(acc: CommAcc, chunk: dict[str, Table]) -> CommAcc:
    ev = chunk.get("events")
    if ev is None or not len(ev):
        return acc
    n = len(ev)
    cols = [np.asarray(ev["kind"]), _dense(ev["location"])] + \
        [_column(ev, c) for c in COLUMNS[2:]]
    at = 0
    while at < n:
        p, c = acc.pairs, acc.coll
        done, full = _fold_rows(*(a[at:] if len(a) == n else a for a in cols), p.slots, p.count,
                                c.slots, c.count, acc.hist, acc.hist_bytes)
        at += done
        if full == 1:
            p.grow()
        elif full == 2:
            c.grow()
    return acc


def combine(a: CommAcc, b: CommAcc) -> CommAcc:
    a.pairs.merge(b.pairs)
    a.coll.merge(b.coll)
    a.hist += b.hist
    a.hist_bytes += b.hist_bytes
    return a


def _sum_by(keys: np.ndarray, *values: np.ndarray):
    """Rows of ``keys`` (n, 2) made unique (sorted), each value summed per key: one sort
    of the rows and integer sums over runs (``np.add.reduceat``: exact, no per-row Python)."""
    if not len(keys):
        return (keys,) + values
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    k = keys[order]
    starts = np.flatnonzero(np.r_[True, (k[1:] != k[:-1]).any(axis=1)])
    return (k[starts], *(np.add.reduceat(v[order], starts).astype(v.dtype, copy=False)
                         for v in values))


def bin_range(b: int) -> tuple[int, int]:
    """[low, high) bytes of histogram bin b."""
    return (0, 1) if b == 0 else (1 << (b - 1), 1 << b)
