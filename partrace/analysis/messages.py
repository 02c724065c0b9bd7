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

from ..model import Definitions, Kind, Table

HIST_BINS = 65          # bin b holds sizes in [2^(b-1), 2^b); bin 0 holds size 0


@dataclass
class CommAcc:
    """Sparse sums, kept sorted by key so two combine by one merge."""

    pairs: np.ndarray       # (n, 2) int64 sender, receiver
    messages: np.ndarray    # int64
    nbytes: np.ndarray      # uint64
    hist: np.ndarray        # (HIST_BINS,) messages per size bin
    hist_bytes: np.ndarray  # (HIST_BINS,) bytes per size bin
    coll: np.ndarray        # (m, 2) int64 location, collective id (region, or -collop)
    coll_calls: np.ndarray
    coll_sent: np.ndarray
    coll_received: np.ndarray


def start(defs: Definitions) -> CommAcc:
    z = np.zeros(0, np.int64)
    return CommAcc(np.zeros((0, 2), np.int64), z, z.astype(np.uint64), np.zeros(HIST_BINS, np.int64),
                   np.zeros(HIST_BINS, np.uint64), np.zeros((0, 2), np.int64), z, z.astype(np.uint64),
                   z.astype(np.uint64))


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


def _column(t: Table, name: str, dtype) -> np.ndarray:
    return np.asarray(t[name], dtype) if name in t.names else np.zeros(len(t), dtype)


def step(acc: CommAcc, chunk: dict[str, Table]) -> CommAcc:
    ev = chunk.get("events")
    if ev is None or not len(ev):
        return acc
    kind = np.asarray(ev["kind"])
    send = np.flatnonzero((kind == Kind.SEND) & (_column(ev, "peer", np.int64) != 0))
    if len(send):
        loc = np.asarray(ev["location"])[send]
        peer = np.asarray(ev["peer"], np.int64)[send]
        size = _column(ev, "size", np.uint64)[send]
        pairs = np.concatenate([acc.pairs, np.stack([loc, peer], axis=1)])
        acc.pairs, acc.messages, acc.nbytes = _sum_by(
            pairs, np.concatenate([acc.messages, np.ones(len(send), np.int64)]),
            np.concatenate([acc.nbytes, size]))
        bins = size_bins(size)
        acc.hist += np.bincount(bins, minlength=HIST_BINS)
        order = np.argsort(bins, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(bins[order]) != 0])
        acc.hist_bytes[bins[order][starts]] += np.add.reduceat(size[order], starts)
    coll = np.flatnonzero((kind == Kind.COLLECTIVE) | (kind == Kind.COLLECTIVE_BEGIN))
    if len(coll):
        region = _column(ev, "region", np.int64)[coll]
        op = _column(ev, "collop", np.int64)[coll]
        ident = np.where(region != 0, region, -op)
        keys = np.concatenate([acc.coll, np.stack([np.asarray(ev["location"])[coll], ident], axis=1)])
        acc.coll, acc.coll_calls, acc.coll_sent, acc.coll_received = _sum_by(
            keys, np.concatenate([acc.coll_calls, np.ones(len(coll), np.int64)]),
            np.concatenate([acc.coll_sent, _column(ev, "size", np.uint64)[coll]]),
            np.concatenate([acc.coll_received, _column(ev, "received", np.uint64)[coll]]))
    return acc


def combine(a: CommAcc, b: CommAcc) -> CommAcc:
    out = CommAcc(*_sum_by(np.concatenate([a.pairs, b.pairs]), np.concatenate([a.messages, b.messages]),
                           np.concatenate([a.nbytes, b.nbytes])),
                  a.hist + b.hist, a.hist_bytes + b.hist_bytes,
                  *_sum_by(np.concatenate([a.coll, b.coll]), np.concatenate([a.coll_calls, b.coll_calls]),
                           np.concatenate([a.coll_sent, b.coll_sent]),
                           np.concatenate([a.coll_received, b.coll_received])))
    return out


def size_bins(size: np.ndarray) -> np.ndarray:
    """0 for 0 bytes, else b with 2^(b-1) <= size < 2^b."""
    size = np.asarray(size, np.uint64)
    out = np.zeros(len(size), np.int64)
    nz = size > 0
    out[nz] = np.floor(np.log2(size[nz].astype(np.float64))).astype(np.int64) + 1
    # float rounding just below a power of two
    fix = nz & (np.left_shift(np.uint64(1), (out - 1).clip(0).astype(np.uint64)) > size)
    out[fix] -= 1
    return out


def bin_range(b: int) -> tuple[int, int]:
    """[low, high) bytes of histogram bin b."""
    return (0, 1) if b == 0 else (1 << (b - 1), 1 << b)
