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
from .kernel import NV


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
