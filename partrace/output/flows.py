"""Messages drawn as flows from their SEND to their RECV (the Perfetto and Chrome outputs).

The k-th SEND from S to R with tag T and the k-th RECV on R from S with tag T (MPI's
non-overtaking order, as analysis/timeline.py pairs them) carry the flow id
hash(S, R, T, k), which each side computes from its own location's rows: the owner of
a location counts, per (sender, receiver, tag) key, the messages before each one
(``count_within``), across windows.
"""
from __future__ import annotations

import numpy as np

from ..model import Kind


class MessageFlows:
    """Flow ids of a rank's messages, window after window."""

    def __init__(self):
        self.sent = (np.zeros(0, np.uint64), np.zeros(0, np.int64))    # message key -> count
        self.recvd = (np.zeros(0, np.uint64), np.zeros(0, np.int64))

    def ids(self, kind: np.ndarray, loc: np.ndarray, peer: np.ndarray, tag: np.ndarray,
            message: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flow ids leaving each SEND and ending at each RECV of the rows (in key order)
        that ``message`` selects (0: none; never 0 otherwise)."""
        from ..formats.perfetto.encode import hash_of
        out = np.zeros(len(kind), np.uint64)
        into = np.zeros(len(kind), np.uint64)
        for side, target in ((Kind.SEND, out), (Kind.RECV, into)):
            rows = np.flatnonzero((kind == side) & message)
            if not len(rows):
                continue
            s, r = (loc[rows], peer[rows]) if side == Kind.SEND else (peer[rows], loc[rows])
            k, state = count_within(hash_of(s, r, tag[rows]),
                                    self.sent if side == Kind.SEND else self.recvd)
            if side == Kind.SEND:
                self.sent = state
            else:
                self.recvd = state
            fid = hash_of(s, r, tag[rows], k)
            target[rows] = np.where(fid == 0, np.uint64(1), fid)
        return out, into


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
