"""The numba line parser for .events/.snaps/.stats text (short and long format).

One pass over a byte chunk: time lines, '*process' lines and records; records
are matched against the grammar tables (grammar.py) compiled into arrays, and
their numeric fields land in a (n, NV) uint64 matrix.  Strings are returned as
byte offsets (they are rare and decoded in Python).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..jit import njit   # lazy: numba only for inputs that are not small
from .grammar import FILE_RECORDS, HEX, HEXSTR, KV_CODE, REQ, STREAM_RECORDS, STRING

NV = 8          # most fields of any record (BeginCollopSnapshot, FileOperationSummary)
NALT = 3        # tag spellings: short, long, deprecated alias
TAGW = 24       # longest keyword / tag

# what parse stopped at (0 = nothing wrong)
(E_KEYWORD, E_TAG, E_HEX, E_STRING, E_END_OF_LINE, E_TIME_LINE, E_PROCESS_LINE, E_NO_TIME_OR_PROCESS,
 E_LONG_NUMBER) = range(1, 10)
ERRORS = {
    E_KEYWORD: "expected a known record keyword",
    E_TAG: "expected field tag",
    E_HEX: "expected a hexadecimal number",
    E_STRING: "expected a quoted string",
    E_END_OF_LINE: "expected end of line",
    E_TIME_LINE: "expected a time line (hex number only)",
    E_PROCESS_LINE: "expected a process line ('*' and a hex number)",
    E_NO_TIME_OR_PROCESS: "expected a time line and a process line before the first record",
    E_LONG_NUMBER: "number longer than 16 hex digits",
}


# byte -> its hex digit value or -1; byte -> keyword/tag character (A-Z, '#'): tables, not
# branches (the digits of time lines mix 0-9 and a-f: branches on them are mispredicted)
HEX_VALUE = np.full(256, -1, np.int64)
HEX_VALUE[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16)
UPPER = np.zeros(256, np.bool_)
UPPER[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ#", np.uint8)] = True


def _pad(s: str) -> np.ndarray:
    a = np.zeros(TAGW, np.uint8)
    b = s.encode()
    a[:len(b)] = np.frombuffer(b, np.uint8)
    return a


@lru_cache(maxsize=None)
def tables(file_kind: str) -> "Tables":
    """Tables(file_kind), built once per process (each stream file uses them)."""
    return Tables(file_kind)


class Tables:
    """The grammar as arrays for one file kind (events / snaps / stats)."""

    def __init__(self, file_kind: str):
        recs = STREAM_RECORDS
        allowed = {r.name for r in FILE_RECORDS[file_kind]}
        kws, kwrec = [], []
        for i, r in enumerate(recs):
            if r.name in allowed:
                for k in (r.short, r.long):
                    kws.append(k)
                    kwrec.append(i)
        order = sorted(range(len(kws)), key=lambda q: (len(kws[q]), kws[q]))
        kws, kwrec = [kws[q] for q in order], [kwrec[q] for q in order]
        self.kwb = np.array([_pad(k) for k in kws])
        self.kwl = np.array([len(k) for k in kws], np.int64)
        self.kwrec = np.array(kwrec, np.int64)
        # keywords of length L starting with byte c: kwb[kwspan[L, c, 0]:kwspan[L, c, 1]]
        self.kwspan = np.zeros((TAGW + 1, 256, 2), np.int64)
        for q, k in enumerate(kws):
            span = self.kwspan[len(k), ord(k[0])]
            span[0] = q if span[1] == 0 else span[0]
            span[1] = q + 1
        n = len(recs)
        self.nf = np.zeros(n, np.int64)
        self.ftype = np.zeros((n, NV), np.int64)
        self.fopt = np.zeros((n, NV), np.int64)
        self.ftag = np.zeros((n, NV, NALT, TAGW), np.uint8)
        self.ftagl = np.zeros((n, NV, NALT), np.int64)
        for i, r in enumerate(recs):
            self.nf[i] = len(r.fields)
            for j, f in enumerate(r.fields):
                self.ftype[i, j] = f.ftype
                self.fopt[i, j] = f.opt
                if j:
                    for a, t in enumerate((f.short,) + f.long):
                        self.ftag[i, j, a] = _pad(t)
                        self.ftagl[i, j, a] = len(t)
        # what parse takes
        self.arrays = (self.kwb, self.kwrec, self.kwspan, self.nf, self.ftype, self.fopt, self.ftag, self.ftagl,
                       HEX_VALUE, UPPER)


@njit(cache=True)
def _hexval(c):
    if c >= 48 and c <= 57:
        return c - 48
    if c >= 97 and c <= 102:
        return c - 87
    return -1


@njit(cache=True)
def _hex_run(buf, i, end, hexv):
    """Value of the hex digits from i (the first 16 of them) and where they stop."""
    v = np.uint64(0)
    s = i
    while i < end:
        d = hexv[buf[i]]
        if d < 0:
            break
        if i - s < 16:
            v = (v << np.uint64(4)) | np.uint64(d)
        i += 1
    return v, i


@njit(cache=True)
def parse(buf, final, grammar, state, out):
    """Parse complete lines of buf.

    `grammar`: Tables.arrays; `state`: (time, process, line, have time, have process) where
    the previous chunk stopped; `out`: (record code, ticks, process, line, (n, NV) field
    values, string offset, string length) per record, as many rows as buf has lines.
    Returns (n records, bytes consumed, state at the end, error) with error =
    (code: 0 or E_*, line, record code or -1, field or -1, byte).  When not final, parsing
    stops before an incomplete last line, and before a trailing run of key-value lines (they
    belong to a record in the next chunk), with the state at that point.
    """
    kwb, kwrec, kwspan, nf, ftype, fopt, ftag, ftagl, hexv, upper = grammar
    o_rec, o_ticks, o_proc, o_line, o_vals, o_soff, o_slen = out
    t, p, line, have_t, have_p = state
    n = 0
    pos = 0
    size = buf.shape[0]
    # state at the start of a pending run of KV lines
    kv_start_n = -1
    kv_pos = 0
    kv_t = t
    kv_p = p
    kv_line = line
    while pos < size:
        end = pos
        while end < size and buf[end] != 10:
            end += 1
        if end == size and not final:
            break
        line += 1
        i = pos
        while i < end and buf[i] == 32:
            i += 1
        if i == end:             # empty line
            pos = end + 1
            continue
        c = buf[i]
        if hexv[c] >= 0:      # time line
            s = i
            v, i = _hex_run(buf, i, end, hexv)
            k = i - s
            while i < end and buf[i] == 32:
                i += 1
            if i != end:
                return n, pos, (t, p, line, have_t, have_p), (E_TIME_LINE, line, -1, -1, i)
            if k > 16:
                return n, pos, (t, p, line, have_t, have_p), (E_LONG_NUMBER, line, -1, -1, i)
            t = v
            have_t = True
            pos = end + 1
            continue
        if c == 42:              # '*' process line
            s = i + 1
            v, i = _hex_run(buf, s, end, hexv)
            k = i - s
            while i < end and buf[i] == 32:
                i += 1
            if i != end or k == 0 or k > 16:
                return n, pos, (t, p, line, have_t, have_p), (E_PROCESS_LINE, line, -1, -1, i)
            p = v
            have_p = True
            pos = end + 1
            continue
        # keyword: maximal run of A-Z / '#'
        ks = i
        while i < end and upper[buf[i]]:
            i += 1
        klen = i - ks
        rec = -1
        first, stop = 0, 0
        if 0 < klen <= TAGW:
            first, stop = kwspan[klen, buf[ks], 0], kwspan[klen, buf[ks], 1]
        for q in range(first, stop):
            ok = True
            for m in range(1, klen):
                if kwb[q, m] != buf[ks + m]:
                    ok = False
                    break
            if ok:
                rec = kwrec[q]
                break
        if rec < 0:
            return n, pos, (t, p, line, have_t, have_p), (E_KEYWORD, line, -1, -1, ks)
        if not (have_t and have_p):
            return n, pos, (t, p, line, have_t, have_p), (E_NO_TIME_OR_PROCESS, line, rec, -1, ks)
        for j in range(NV):
            o_vals[n, j] = 0
        o_soff[n] = 0
        o_slen[n] = 0
        for j in range(nf[rec]):
            while i < end and buf[i] == 32:
                i += 1
            if j > 0:
                ts = i
                while i < end and upper[buf[i]]:
                    i += 1
                tl = i - ts
                hit = False
                for a in range(ftagl.shape[2]):
                    L = ftagl[rec, j, a]
                    if L == tl and L > 0:
                        same = True
                        for m in range(L):
                            if ftag[rec, j, a, m] != buf[ts + m]:
                                same = False
                                break
                        if same:
                            hit = True
                            break
                if not hit:
                    i = ts
                    if fopt[rec, j] != REQ:
                        continue
                    return n, pos, (t, p, line, have_t, have_p), (E_TAG, line, rec, j, ts)
                while i < end and buf[i] == 32:
                    i += 1
            elif fopt[rec, j] != REQ and (i == end or hexv[buf[i]] < 0):
                continue
            ft = ftype[rec, j]
            if ft == STRING:
                if i >= end or buf[i] != 34:
                    return n, pos, (t, p, line, have_t, have_p), (E_STRING, line, rec, j, i)
                s = i + 1
                i = s
                while i < end and buf[i] != 34:
                    i += 1
                if i >= end:
                    return n, pos, (t, p, line, have_t, have_p), (E_STRING, line, rec, j, s - 1)
                o_soff[n] = s
                o_slen[n] = i - s
                i += 1
            else:
                s = i
                v, i = _hex_run(buf, i, end, hexv)
                k = i - s
                if k == 0:
                    return n, pos, (t, p, line, have_t, have_p), (E_HEX, line, rec, j, i)
                if ft == HEX and k > 16:
                    return n, pos, (t, p, line, have_t, have_p), (E_LONG_NUMBER, line, rec, j, s)
                if ft == HEXSTR:
                    o_soff[n] = s
                    o_slen[n] = k
                o_vals[n, j] = v
        while i < end and buf[i] == 32:
            i += 1
        if i != end:
            return n, pos, (t, p, line, have_t, have_p), (E_END_OF_LINE, line, rec, -1, i)
        if rec == KV_CODE:
            if kv_start_n < 0:
                kv_start_n = n
                kv_pos = pos
                kv_t = t
                kv_p = p
                kv_line = line - 1
        else:
            kv_start_n = -1
        o_rec[n] = rec
        o_ticks[n] = t
        o_proc[n] = p
        o_line[n] = line
        n += 1
        pos = end + 1
    if kv_start_n >= 0 and not final:
        return kv_start_n, kv_pos, (kv_t, kv_p, kv_line, True, True), (0, 0, -1, -1, 0)
    return n, min(pos, size), (t, p, line, have_t, have_p), (0, 0, -1, -1, 0)
