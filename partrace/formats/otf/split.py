"""Parsed record lines -> the columns of each stream table (numba; no numpy pass per field).

The parse kernel gives, per line, its record code and up to NV raw field
values.  A table's 8-byte numeric columns (int64 or uint64) are the rows of
one (columns x rows) uint64 matrix, its 32-bit id columns the rows of one
int32 matrix, both filled in a single pass; each column is then a view of its
row (int64 columns hold the same bits, as astype would).
"""
from __future__ import annotations

import numpy as np

from ..jit import njit   # lazy: numba only for inputs that are not small
from . import grammar as G
from .kernel import NV, _hexval


@njit(cache=True)
def fill_columns(rows, rec, colmap, vals, wide, narrow, key_in, key_out, kind_of, base):
    """For the fields j of row k's record r: wide[c, k] = vals[rows[k], j] where
    c = colmap[r, j] >= 0; narrow[-c - 2, k] = the same where c <= -2 (32-bit ids).
    In the same pass the row's key columns: key_in = (time, location, ticks) of all
    parsed rows, key_out = (time, location, ticks, kind, src_order) of the table's rows
    (kind = kind_of[r], src_order = base + rows[k]).

    Returns the first k whose id does not fit 31 bits, or -1 (the caller raises:
    an id is never wrapped)."""
    time, loc, ticks = key_in
    o_time, o_loc, o_ticks, o_kind, o_order = key_out
    bad = -1
    for k in range(rows.shape[0]):
        i = rows[k]
        r = rec[i]
        o_time[k] = time[i]
        o_loc[k] = loc[i]
        o_ticks[k] = ticks[i]
        o_kind[k] = kind_of[r]
        o_order[k] = base + i
        for j in range(colmap.shape[1]):
            c = colmap[r, j]
            if c >= 0:
                wide[c, k] = vals[i, j]
            elif c <= -2:
                v = vals[i, j]
                if v > 2147483647:      # reported (the first such row), never stored: it
                    if bad < 0:         # would wrap in numba and raise as plain Python
                        bad = k
                else:
                    narrow[-c - 2, k] = v
    return bad


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


def column_map(table: str, wide: list[str], narrow: list[str]) -> np.ndarray:
    """(record code, field) -> row of ``wide`` its value goes to (>= 0), row r of
    ``narrow`` as -r - 2, or -1 (none)."""
    where = {n: i for i, n in enumerate(wide)} | {n: -i - 2 for i, n in enumerate(narrow)}
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
