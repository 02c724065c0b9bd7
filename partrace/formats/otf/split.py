"""Parsed record lines -> the columns of each stream table (numba; no numpy pass per field).

The parse kernel gives, per line, its record code and up to NV raw field
values.  Every numeric column of the events, snapshots and statistics tables
is 8 bytes wide (int64 or uint64), so a table's numeric columns are the rows
of one (columns x rows) uint64 matrix filled in a single pass; each column is
then a view of its row (int64 columns hold the same bits, as astype would).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import grammar as G
from .kernel import NV, _hexval


@njit(cache=True)
def fill_columns(rows, rec, colmap, vals, out):
    """out[colmap[r, j], k] = vals[rows[k], j] for the fields j of row k's record r."""
    for k in range(rows.shape[0]):
        i = rows[k]
        r = rec[i]
        for j in range(colmap.shape[1]):
            c = colmap[r, j]
            if c >= 0:
                out[c, k] = vals[i, j]


@njit(cache=True)
def running_counts(index, counts, out):
    """out[i] = counts[index[i]], then that count goes up by one (seq numbers)."""
    for i in range(index.shape[0]):
        out[i] = counts[index[i]]
        counts[index[i]] += 1


@njit(cache=True)
def kv_values(buf, soff, slen, is_bytes, bstart, value, raw):
    """The values of key-value lines from their hex text buf[soff:soff+slen].

    Numbers: the last 16 hex digits (as the OTF library, which shifts digits into a
    uint64).  Byte arrays (is_bytes): 0, their bytes written to raw[bstart:], two digits
    a byte, an odd count of digits read with a leading 0 (bytes.fromhex("0" + text)).
    """
    for i in range(soff.shape[0]):
        s, e = soff[i], soff[i] + slen[i]
        if is_bytes[i]:
            o = bstart[i]
            if slen[i] & 1:
                raw[o] = _hexval(buf[s])
                o += 1
                s += 1
            for p in range(s, e, 2):
                raw[o] = _hexval(buf[p]) * 16 + _hexval(buf[p + 1])
                o += 1
            value[i] = 0
        else:
            v = np.uint64(0)
            for p in range(max(s, e - 16), e):
                v = v * np.uint64(16) + np.uint64(_hexval(buf[p]))
            value[i] = v


def column_map(table: str, names: list[str]) -> np.ndarray:
    """(record code, field) -> row of ``names`` its numeric value goes to, or -1."""
    where = {n: i for i, n in enumerate(names)}
    out = np.full((len(G.STREAM_RECORDS), NV), -1, np.int64)
    for r, rec in enumerate(G.STREAM_RECORDS):
        if rec.table != table:
            continue
        for j, f in enumerate(rec.fields):
            if f.ftype != G.STRING and f.col in where:
                out[r, j] = where[f.col]
    return out


def location_index(loc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct locations, index of each row's location among them)."""
    if len(loc) and loc.min() >= 0 and loc.max() < 4 * len(loc) + 4096:   # dense ids: count
        seen = np.zeros(int(loc.max()) + 1, np.int64)
        seen[loc] = 1
        distinct = np.flatnonzero(seen)
        seen[distinct] = np.arange(len(distinct))
        return distinct, seen[loc]
    return np.unique(loc, return_inverse=True)
