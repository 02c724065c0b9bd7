"""The numba formatter of one .events/.snaps/.stats file in OTF short format.

Rows are already in output order.  Per row: the record's grammar code, ticks,
process, its numeric fields, optional pre-rendered bytes (key-value lines,
the one quoted string) taken from a side blob -- those are rare -- and
numeric key-value pairs (kv_on/kv_val, one row per key over the rows, with the rendered
'K<key>Y<type>V' prefix of each) written in front of the record.

The helpers that write a few bytes each (a value, a tag, a line) are inlined
into the kernels (inline="always"): a call per value, passing arrays, cost
more than the bytes it wrote (the formatters ran at about half the speed),
and so does a view of a table's row made per call (kw[r]): the helpers take
the table and the row's index.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from ...kernels.jit import njit

from .grammar import HEX, OPT0, STREAM_RECORDS, STRING
from .kernel import NV, TAGW, _pad

HEXD = np.frombuffer(b"0123456789abcdef", np.uint8).copy()
# the two hex digits of every byte value b, laid end to end: at [2b], [2b + 1]
HEX2 = np.frombuffer("".join(f"{b:02x}" for b in range(256)).encode(), np.uint8).copy()
ARRAY_LINE = 100     # bytes per byte-array key-value line (generic.MAX_ARRAY)


class WTables:
    def __init__(self):
        n = len(STREAM_RECORDS)
        self.kw = np.array([_pad(r.short) for r in STREAM_RECORDS])
        self.kwl = np.array([len(r.short) for r in STREAM_RECORDS], np.int64)
        self.nf = np.array([len(r.fields) for r in STREAM_RECORDS], np.int64)
        self.tag = np.zeros((n, NV, TAGW), np.uint8)
        self.tagl = np.zeros((n, NV), np.int64)
        self.ftype = np.zeros((n, NV), np.int64)
        self.opt0 = np.zeros((n, NV), np.bool_)
        for i, r in enumerate(STREAM_RECORDS):
            for j, f in enumerate(r.fields):
                self.tag[i, j] = _pad(f.short)
                self.tagl[i, j] = len(f.short)
                self.ftype[i, j] = f.ftype
                self.opt0[i, j] = f.opt == OPT0


_SCRATCH: dict[str, np.ndarray] = {}


def scratch(name: str, nbytes: int) -> np.ndarray:
    """A reused byte buffer of at least nbytes (one per name and process, grown as needed):
    text formatted into it is written out before the next use, and a fresh array per block
    costs the kernel a page fault per 4 KiB written (the sys time of the writer)."""
    buf = _SCRATCH.get(name)
    if buf is None or len(buf) < nbytes:
        buf = _SCRATCH[name] = np.empty(max(nbytes, 1 << 16, int(1.25 * len(buf)) if buf is not None else 0),
                                        np.uint8)
    return buf[:nbytes]


@lru_cache(maxsize=1)
def wtables() -> WTables:
    """The grammar tables (constant: made once per process)."""
    return WTables()


@lru_cache(maxsize=None)
def field_positions(table: str) -> dict[str, np.ndarray]:
    """{column: position of its (hex) field in each record code's line, or -1}, for the
    records of one table (and NoOp, which has no fields)."""
    out: dict[str, np.ndarray] = {}
    for r, rec in enumerate(STREAM_RECORDS):
        if rec.table != table:
            continue
        for j, f in enumerate(rec.fields):
            if f.ftype == HEX:
                out.setdefault(f.col, np.full(len(STREAM_RECORDS), -1, np.int64))[r] = j
    return out


def field_columns(table: str, rec: np.ndarray, has, put) -> tuple[np.ndarray, np.ndarray]:
    """The numeric fields of rows of one table, as format_rows reads them: (columns, colof),
    `columns` (rows, k) uint64 and colof[r, j] the column of field j of record code r (-1: the
    table has no such column, the field is 0).  Only the columns some record in `rec` has a
    field for; has(name): whether the table has the column, put(name, out): its values into the
    uint64 row `out`.  Laid out (k, rows) and read through the transpose: each column is one
    contiguous write (a (rows, NV) matrix filled by a pass per column wrote every row's line
    once per column: the writer's costliest pass on a large window).  `columns` is valid
    until the next call (a buffer reused by every call of the process)."""
    present = np.bincount(rec, minlength=len(STREAM_RECORDS)) > 0
    used = [(col, pos_of) for col, pos_of in field_positions(table).items()
            if has(col) and np.any(present & (pos_of >= 0))]
    # a reused buffer (scratch), valid until the next call: the writer formats these rows
    # before it asks for the next; a fresh matrix per window cost a page fault per 4 KiB
    # written, most of the cost of filling it
    k, n = max(len(used), 1), rec.shape[0]
    columns = scratch("fields", k * n * 8).view(np.uint64).reshape(k, n)
    colof = np.full((len(STREAM_RECORDS), NV), -1, np.int64)
    for c, (col, pos_of) in enumerate(used):
        put(col, columns[c])
        r = np.flatnonzero(pos_of >= 0)
        colof[r, pos_of[r]] = c
    return columns.T, colof


@njit(cache=True)
def kv_lines(key, typ, value, length, is_bytes, raw, rstart, rend, out, ends):
    """Key-value lines 'K<key>Y<type>V<value>' ('...V<bytes in hex>L<length>' for byte
    arrays: raw[rstart:rend]) into out, as grammar.kv_line renders one; ends[i]: end of line i."""
    o = 0
    for i in range(key.shape[0]):
        out[o] = 75                  # 'K'
        o = _hex(out, o + 1, key[i])
        out[o] = 89                  # 'Y'
        o = _hex(out, o + 1, typ[i])
        out[o] = 86                  # 'V'
        o += 1
        if is_bytes[i]:
            for b in range(rstart[i], rend[i]):
                out[o] = HEXD[raw[b] >> 4]
                out[o + 1] = HEXD[raw[b] & 15]
                o += 2
            out[o] = 76              # 'L'
            o = _hex(out, o + 1, length[i])
        else:
            o = _hex(out, o, value[i])
        out[o] = 10
        o += 1
        ends[i] = o
    return o


@njit(cache=True, inline="always")
def _hex(out, o, v):
    # lowercase hex without leading zeros, as OTF_WBuffer_writeUint64.  Most values are
    # keys, types, record ids (one or two digits: written at once); longer ones (ticks,
    # values) are written two digits (a byte) per step from the last one back, after
    # counting their digits by halving the width (a few compares, not a step a digit)
    if v < np.uint64(16):
        out[o] = HEXD[v]
        return o + 1
    if v < np.uint64(256):
        out[o] = HEX2[2 * v]
        out[o + 1] = HEX2[2 * v + 1]
        return o + 2
    n = 3
    x = v >> np.uint64(12)
    if x >= np.uint64(1 << 20):
        n += 5
        x >>= np.uint64(20)
    if x >= np.uint64(1 << 16):
        n += 4
        x >>= np.uint64(16)
    if x >= np.uint64(1 << 8):
        n += 2
        x >>= np.uint64(8)
    while x != np.uint64(0):
        n += 1
        x >>= np.uint64(4)
    e = o + n
    j = e
    while v >= np.uint64(256):
        b = 2 * (v & np.uint64(255))
        out[j - 2] = HEX2[b]
        out[j - 1] = HEX2[b + 1]
        j -= 2
        v >>= np.uint64(8)
    if v >= np.uint64(16):
        out[j - 2] = HEX2[2 * v]
        out[j - 1] = HEX2[2 * v + 1]
    else:
        out[j - 1] = HEXD[v]
    return e


@njit(cache=True, inline="always")
def _put(out, o, src, a, b):
    for k in range(a, b):
        out[o] = src[k]
        o += 1
    return o


@njit(cache=True, inline="always")
def _put_row(out, o, rows, r, n):
    # rows[r, :n] into out at o (a view rows[r] made per call costs more than the copy)
    for q in range(n):
        out[o + q] = rows[r, q]
    return o + n


@njit(cache=True, inline="always")
def _put_tag(out, o, tag, r, j, n):
    # tag[r, j, :n] into out at o (a field's tag of a record)
    for q in range(n):
        out[o + q] = tag[r, j, q]
    return o + n


@njit(cache=True, inline="always")
def _process_line(out, o, p):
    out[o] = 42                      # '*'
    o = _hex(out, o + 1, np.uint64(p))
    out[o] = 10
    return o + 1


@njit(cache=True, inline="always")
def _time_line(out, o, t):
    o = _hex(out, o, t)
    out[o] = 10
    return o + 1


@njit(cache=True, inline="always")
def _head(out, o, ti, pi, t, p):
    """The time and process lines a record at (ti, pi) needs after state (t, p); ok False:
    the record is earlier than the state (rows not sorted by time)."""
    if ti == t and ti > np.uint64(0):
        if pi != p:
            o = _process_line(out, o, pi)
        return o, True
    if ti > t or ti == np.uint64(0):    # the library writes the process again after a time
        return _process_line(out, _time_line(out, o, ti), pi), True
    return o, False


@njit(cache=True)
def format_rows(rec, ticks, proc, fields, f0, colof, pre_a, pre_b, str_a, str_b, blob,
                kw, kwl, nf, tag, tagl, ftype, opt0, out, t0, p0,
                kv_on, kv_val, kv_pre, kv_prel,
                c_ticks, c_proc, c_first, c_count, c_id, c_val, cnt):
    """Write the rows into out, starting from state (t0, p0; p0 = -1: none yet).

    Numeric field j of row i (record code r) is fields[colof[r, j], f0 + i], 0 where
    colof[r, j] < 0 (see field_columns); key-value pair j of row i is kv_val[j, f0 + i],
    written where kv_on[j, f0 + i]: `fields`, `kv_on` and `kv_val` hold every row of the
    append, the call formats those from f0 on (a slice of each for the pass would not be
    C-contiguous, and each other layout is one more compile of this large kernel).

    Counter rows (c_*: a sample row's time, process and its c_count[k] counters
    c_id/c_val[c_first[k]:...], record code `cnt`) are merged in: before the
    event rows of a later (time, process), after those of the same.

    Returns (bytes written, index of an out-of-order row or -1, time, process):
    the state to carry to the next call on the same file; an out-of-order counter
    row is reported as rec.shape[0] + its index.
    """
    o = 0
    t = np.uint64(t0)
    p = np.int64(p0)
    n = rec.shape[0]
    nc = c_ticks.shape[0]
    i = 0
    k = 0
    while i < n or k < nc:
        if k < nc and (i >= n or c_ticks[k] < ticks[i] or (c_ticks[k] == ticks[i] and c_proc[k] < proc[i])):
            ti = c_ticks[k]
            pi = c_proc[k]
            o, ok = _head(out, o, ti, pi, t, p)
            if not ok:
                return o, n + k, t, p
            t = ti
            p = pi
            for c in range(c_first[k], c_first[k] + c_count[k]):
                o = _put_row(out, o, kw, cnt, kwl[cnt])
                o = _hex(out, o, c_id[c])
                o = _put_tag(out, o, tag, cnt, 1, tagl[cnt, 1])
                o = _hex(out, o, c_val[c])
                out[o] = 10
                o += 1
            k += 1
            continue
        ti = ticks[i]
        pi = proc[i]
        o, ok = _head(out, o, ti, pi, t, p)
        if not ok:
            return o, i, t, p
        t = ti
        p = pi
        o = _put(out, o, blob, pre_a[i], pre_b[i])
        for j in range(kv_on.shape[0]):
            if kv_on[j, f0 + i]:
                o = _put_row(out, o, kv_pre, j, kv_prel[j])
                o = _hex(out, o, kv_val[j, f0 + i])
                out[o] = 10
                o += 1
        r = rec[i]
        o = _put_row(out, o, kw, r, kwl[r])
        for j in range(nf[r]):
            if ftype[r, j] == STRING:
                out[o] = 34
                o = _put(out, o + 1, blob, str_a[i], str_b[i])
                out[o] = 34
                o += 1
                continue
            c = colof[r, j]
            v = fields[c, f0 + i] if c >= 0 else np.uint64(0)
            if opt0[r, j] and v == np.uint64(0):
                continue
            o = _put_tag(out, o, tag, r, j, tagl[r, j])
            o = _hex(out, o, v)
        out[o] = 10
        o += 1
        i += 1
    return o, -1, t, p


@njit(cache=True, inline="always")
def _array_lines(out, o, arrays, i, c, w, pre, j, prel):
    """Row i's key-value lines of the byte array arrays[i, c:c + w] (prefix pre[j, :prel]):
    nothing if all its bytes are zero, else one line per ARRAY_LINE bytes
    '<prefix><bytes in hex>L<bytes left>'; returns the end of what was written."""
    on = False
    for b in range(w):
        if arrays[i, c + b] != 0:
            on = True
            break
    if not on:
        return o
    for lo in range(0, w, ARRAY_LINE):
        o = _put_row(out, o, pre, j, prel)
        for b in range(lo, min(w, lo + ARRAY_LINE)):
            v = arrays[i, c + b]
            out[o] = HEXD[v >> 4]
            out[o + 1] = HEXD[v & 15]
            o += 2
        out[o] = 76          # 'L'
        o = _hex(out, o + 1, np.uint64(w - lo))
        out[o] = 10
        o += 1
    return o


@njit(cache=True)
def byte_array_lines(arrays, col, width, kv_pre, kv_prel, out, start, end):
    """The byte-array key-value lines of each row (columns j: arrays[:, col[j]:col[j] + width[j]],
    'K<key>YbV' prefix kv_pre[j]), as generic writes them: nothing for a column of zero bytes,
    else one line per MAX_ARRAY (100) bytes '<prefix><bytes in hex>L<bytes left>'.
    Row i's lines: out[start[i]:end[i]]; returns the bytes written."""
    o = 0
    for i in range(arrays.shape[0]):
        start[i] = o
        for j in range(col.shape[0]):
            o = _array_lines(out, o, arrays, i, col[j], width[j], kv_pre, j, kv_prel[j])
        end[i] = o
    return o


@njit(cache=True, inline="always")
def _decimal(out, o, v, signed):
    # as numpy's str() of the integer; digits written from the last one back (no buffer:
    # an array made per call would be a heap allocation per value).  Two digits per
    # division by 100 from a table, as _hex does, made format_spots slower (ovni's values)
    if signed and np.int64(v) < 0:
        out[o] = 45                  # '-'
        o += 1
        v = ~v + np.uint64(1)        # the magnitude (two's complement)
    k = 1
    rest = v // np.uint64(10)
    while rest != np.uint64(0):     # uint64 against uint64: numba compares mixed ints as floats
        k += 1
        rest //= np.uint64(10)
    for j in range(o + k - 1, o - 1, -1):
        out[j] = 48 + np.int64(v % np.uint64(10))
        v //= np.uint64(10)
    return o + k


@njit(cache=True)
def format_spots(region, time, loc, kind, col, scalars, values, signed, arrays, width, kv_pre, kv_prel,
                 name_pre, name_prel, out, ends):
    """Marker spots of point events (see generic.marker_spots), one per row, into out.

    Column j (in key-value order) is scalar column col[j] of `scalars` (raw
    bits, the key-value; `values`: the value for the text, int64 bits where
    `signed`) when kind[j] == 0, else a byte array of width[j] bytes from
    column col[j] of `arrays`.  ends[i]: end of row i.
    """
    o = 0
    for i in range(region.shape[0]):
        for j in range(kind.shape[0]):
            c = col[j]
            if kind[j] == 0:
                if scalars[i, c] != np.uint64(0):
                    o = _put_row(out, o, kv_pre, j, kv_prel[j])
                    o = _hex(out, o, scalars[i, c])
                    out[o] = 10
                    o += 1
            else:
                o = _array_lines(out, o, arrays, i, c, width[j], kv_pre, j, kv_prel[j])
        out[o] = 77                  # 'M'
        out[o + 1] = 83              # 'S'
        o = _hex(out, o + 2, np.uint64(region[i]))
        out[o] = 84                  # 'T'
        o = _hex(out, o + 1, np.uint64(time[i]))
        out[o] = 80                  # 'P'
        o = _hex(out, o + 1, np.uint64(loc[i]))
        out[o] = 86                  # 'V'
        out[o + 1] = 34
        o += 2
        first = True
        for j in range(kind.shape[0]):
            c = col[j]
            if kind[j] == 0:
                if scalars[i, c] == np.uint64(0):
                    continue
                if not first:
                    out[o] = 32
                    o += 1
                o = _put_row(out, o, name_pre, j, name_prel[j])
                o = _decimal(out, o, values[i, c], signed[c])
            else:
                last = 0
                for b in range(width[j]):
                    if arrays[i, c + b] != 0:
                        last = b + 1
                if last == 0:
                    continue
                if not first:
                    out[o] = 32
                    o += 1
                o = _put_row(out, o, name_pre, j, name_prel[j])
                for b in range(last):
                    v = arrays[i, c + b]
                    out[o] = HEXD[v >> 4]
                    out[o + 1] = HEXD[v & 15]
                    o += 2
            first = False
        out[o] = 34
        out[o + 1] = 10
        o += 2
        ends[i] = o
    return o

