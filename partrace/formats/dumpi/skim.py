"""The plan's light walk of a rank's call stream: record headers and argument lengths only.

The plan needs of each stream which functions have records (libundumpi reads records of
functions a footer counts no call of, so the stream, not the footer, says which tables
exist), where each one's first record is (for the warning that names it), where an
end-of-stream label stops the stream early, and where the communicator and group calls
are (comms.TRIGGER: their arguments are read by the full walk, one record each).  The
full walk (scan.walk) writes every argument value into arrays; this one reads only what
it takes to find the next record, and stops at the same bad record with the same error,
so a stream the plan accepts is one the decode reads.
"""
from __future__ import annotations

import numpy as np

from ...kernels.jit import njit   # lazy: numba only for inputs that are not small
from . import scan
from .scan import (E_BIG, E_EOS, E_FULL, E_TRUNC, E_UNKNOWN, END_OF_STREAM, INDEX_MAX,
                   MAXARGS, OK, ONE_OF, STATUS_NO_TAG, _u16, element_bytes, read_arg,
                   read_count, read_length)


_SCALAR_BYTES = {0: 4, 1: 2, 2: 1, 3: 8}     # i32, u16, u8, i64 (scan.KINDS)
_TABLES: dict = {}


def table_for(version: tuple[int, int, int]):
    """scan.table_for's (start, count, ops), and per function the bytes of its arguments
    when they are scalars of no condition only (-1: not so), that the skim steps over at
    once: most records of a trace (Send, Irecv, Barrier, Allreduce ...)."""
    start, count, ops = table = scan.table_for(version)
    if id(table) not in _TABLES:
        plain = np.full(len(start), -1, np.int64)
        for fid in np.flatnonzero(count >= 0):
            fops = ops[start[fid]:start[fid] + count[fid]]
            if all(int(k) in _SCALAR_BYTES and a < 0 for k, a, _b in fops):
                plain[fid] = sum(_SCALAR_BYTES[int(k)] for k, _a, _b in fops)
        _TABLES[id(table)] = (table, (start, count, ops, plain))
    return _TABLES[id(table)][1]


@njit(cache=True)
def skim(b, pos, end, call, table, trigger, counts, first, t_off, t_call, nt):
    """Walk the records from ``pos`` (call index ``call``) to ``end``.  Returns (error,
    offset, call, nt): error and offset as scan.walk's (E_EOS: the label's offset); call:
    the index of the record at offset; nt: trigger records stored.  Per function, adds
    its records to ``counts`` and sets ``first`` (-1: none yet) to its first record's
    offset.  Each record whose function has ``trigger`` set goes to ``t_off`` (offset),
    ``t_call`` (call index); when they are full: E_FULL, and the caller grows them and
    skims on from the offset returned (that record not yet counted).  ``table``:
    :func:`table_for` the writer's version."""
    fstart, fcount, ops, plain = table
    vals = np.zeros(MAXARGS, np.int64)    # the record's scalars: conditions read them
    while pos < end:
        rec = pos
        if pos + 3 > end:
            return E_TRUNC, rec, call, nt
        fid = _u16(b, pos)
        if fid == END_OF_STREAM:
            return E_EOS, rec, call, nt
        if fid >= fstart.shape[0] or fcount[fid] < 0:
            return E_UNKNOWN, rec, call, nt
        if trigger[fid] and nt >= t_off.shape[0]:
            return E_FULL, rec, call, nt
        mask = b[pos + 2]
        pos += 3
        if mask & 0x40:
            if pos + 2 > end:
                return E_TRUNC, rec, call, nt
            pos += 2
        for clock in range(2):               # cpu block, then wall block
            if mask & (0x04 << clock):
                if pos + 12 > end:
                    return E_TRUNC, rec, call, nt
                pos += 12
        if mask & 0x80:
            if pos + 1 > end:
                return E_TRUNC, rec, call, nt
            np_ = np.int64(b[pos])
            pos += 1
            if pos + 16 * np_ > end:
                return E_TRUNC, rec, call, nt
            pos += 16 * np_
        if plain[fid] >= 0:                  # scalars only: their bytes at once
            if pos + plain[fid] > end:
                return E_TRUNC, rec, call, nt
            pos += plain[fid]
        for k in range(fcount[fid] if plain[fid] < 0 else 0):
            kind = ops[fstart[fid] + k, 0]
            ca = ops[fstart[fid] + k, 1]
            if ca >= 0 and kind < 13 and vals[ca] != vals[ops[fstart[fid] + k, 2]]:
                vals[k] = -1 if kind >= 4 else 0     # root-only field, absent here
                continue
            err, pos, v = read_arg(b, pos, end, kind, mask)   # conditions compare scalars
            if err != OK:
                return err, rec, call, nt
            if kind == 4 or kind == STATUS_NO_TAG or (kind >= 5 and kind <= 7):
                if v > 0:                         # -1: no statuses recorded
                    pos += element_bytes(kind) * v
            elif kind == ONE_OF:                  # older writers: one i32 as an array
                v = max(vals[ca], 1)
            elif kind == 8:                       # arrays of i32 arrays
                for i0 in range(v):
                    if i0 >= INDEX_MAX:
                        return E_BIG, rec, call, nt
                    err, pos, m = read_count(b, pos, end, 4)
                    if err != OK:
                        return err, rec, call, nt
                    pos += 4 * m
            elif kind >= 9:                       # strings: 1, 2 or 3 levels; argv = 2 levels
                n0 = 1 if kind == 9 else v
                for i0 in range(n0):
                    if i0 >= INDEX_MAX:
                        return E_BIG, rec, call, nt
                    n1 = np.int64(1)
                    if kind == 11:
                        err, pos, n1 = read_length(b, pos, end, 0)
                        if err != OK:
                            return err, rec, call, nt
                    for i1 in range(n1):
                        if i1 >= INDEX_MAX:
                            return E_BIG, rec, call, nt
                        err, pos, m = read_length(b, pos, end, 1)
                        if err != OK:
                            return err, rec, call, nt
                        pos += m
            vals[k] = v
        if first[fid] < 0:
            first[fid] = rec
        counts[fid] += 1
        if trigger[fid]:
            t_off[nt] = rec
            t_call[nt] = call
            nt += 1
        call += 1
    if pos > end:
        return E_TRUNC, pos, call, nt
    return OK, pos, call, nt
