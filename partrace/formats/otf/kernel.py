"""The numba decoder of .events/.snaps/.stats text (short and long format).

One pass over a byte chunk: time lines, '*process' lines and records; records
are matched against the grammar tables (grammar.py) compiled into arrays, their
references to definitions checked (checks.py), and their fields written straight
into the columns of their table (stream.py lays those out).  Key-value and
comment lines, which carry text, become rows of a small side matrix whose text
is read in Python (they are rare).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...kernels.jit import njit   # lazy: numba only for inputs that are not small
from .grammar import FILE_RECORDS, HEX, HEXSTR, REQ, STREAM_RECORDS, STRING

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
        # the first field from which on every field is optional (a line may end there)
        self.opt_from = np.array([max([j + 1 for j, f in enumerate(r.fields) if f.opt == REQ],
                                      default=0)
                                  for r in recs], np.int64)
        # records parsed by the short form's fast path (decode_lines): all fields HEX numbers
        # and every tag's short spelling one byte, tag1[code, j] (0 for the untagged first)
        self.tag1 = np.zeros((n, NV), np.uint8)
        self.simple = np.zeros(n, np.bool_)
        for i, r in enumerate(recs):
            self.simple[i] = all(f.ftype == HEX and (j == 0 or len(f.short) == 1)
                                 for j, f in enumerate(r.fields))
            for j, f in enumerate(r.fields):
                if j and len(f.short) == 1:
                    self.tag1[i, j] = ord(f.short)
        # what decode_lines takes
        self.arrays = (self.kwb, self.kwrec, self.kwspan, self.nf, self.opt_from, self.ftype,
                       self.fopt, self.ftag, self.ftagl, HEX_VALUE, UPPER, self.simple, self.tag1)


@njit(cache=True)
def _hexval(c):
    if c >= 48 and c <= 57:
        return c - 48
    if c >= 97 and c <= 102:
        return c - 87
    return -1


@njit(cache=True)
def _find(ids, lo, hi, v):
    """Position of v in the sorted ids[lo:hi], or -1."""
    end = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if ids[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and ids[lo] == v:
        return lo
    return -1


# decode_lines' state: st (int64) and tp (uint64) slots, kept across calls and chunks
(S_POS, S_LINE, S_HAVE_T, S_HAVE_P, S_N, S_NSIDE, S_M, S_KV_SIDE, S_KV_N, S_KV_POS, S_KV_LINE, S_KV_LAST,
 S_BASE, S_REF_LINE, S_REF_WHAT, S_REF_REC, S_BIG, S_FULL, S_DROPPED, S_DROP_LINE) = (
    0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 21, 22, 23)
NST = 24                                # S_M and S_BIG: three slots, one per table
T_T, T_P, T_KV_T, T_KV_P, T_REF_P, T_REF_V, T_MAXP, T_DROP_P = range(8)
NTP = 8
# side matrix columns (key-value and comment lines)
(SD_REC, SD_LINE, SD_SOFF, SD_SLEN, SD_KEY, SD_TYPE, SD_LEN, SD_TICKS, SD_LOC, SD_SEQ, SD_TAB) = range(11)
NSD = 11
# keyrow columns: wide rows of time, seq, ticks, src_order; narrow row of location; kind (>= 0: write it)
K_TIME, K_SEQ, K_TICKS, K_ORDER, K_LOC, K_KIND = range(6)
# decode_lines' status; what a record's first undefined reference is (else its field position)
DONE, FULL, BAD = 0, 1, 2
BAD_PROCESS, BAD_KV_TYPE, NO_REF = -1, -2, -3
# OTF tokens are unsigned 32-bit numbers (OTF_Definitions.h: uint32_t everywhere)
ID_MAX = np.uint64(4294967295)


@njit(cache=True, inline="always")
def _hex_at(buf, i, hexv):
    """The hex number at buf[i] (its first 16 digits: the caller checks the length) and
    where its digits end."""
    s = i
    v = np.uint64(0)
    while True:
        d = hexv[buf[i]]
        if d < 0:
            break
        if i - s < 16:
            v = (v << np.uint64(4)) | np.uint64(d)
        i += 1
    return v, i


@njit(cache=True, inline="always")
def _keep(st, tp, full, pos, line, have_t, have_p, n, nside, kv_side, t, p, maxp):
    """The parser's state where decode_lines stops (a full buffer, or the chunk's end):
    the next call on the same file resumes from it."""
    st[S_FULL] = full
    st[S_POS] = pos
    st[S_LINE] = line
    st[S_HAVE_T] = have_t
    st[S_HAVE_P] = have_p
    st[S_N] = n
    st[S_NSIDE] = nside
    st[S_KV_SIDE] = kv_side
    tp[T_T] = t
    tp[T_P] = p
    tp[T_MAXP] = maxp


@njit(cache=True)
def decode_lines(buf, limit, final, grammar, checks, layout, out, st, tp):
    """Decode the lines of buf[st[S_POS]:limit] (buf[limit - 1] is a newline) into columns.

    `grammar`: Tables.arrays.  `checks`: References.kernel_args(): a row naming something
    undefined is remembered (the first, at st[S_REF_*], tp[T_REF_*]) and decoding goes on,
    so that a syntax error further in the chunk still wins, as when the checks ran after
    parsing.  `layout`: (table of each
    record code (0..2, -1 key-value), kind of each code, is a comment, colmap (code, field)
    -> wide row >= 0 / narrow row -r - 2 / -1, keyrow (table, K_*), row capacity of each
    table, side capacity, time numerator and denominator (0: time left to the caller)).
    `out`: (wide (rows x capacity uint64) per table, narrow (uint32) per table, kind per
    table, per-location seq counts (table, process index), side matrix).

    A record's row: time (ns), seq (per location and table), ticks, src_order (base + its
    line among all record lines), location, kind and its fields; ids that do not fit 31
    bits are not stored, the first line of each table is at st[S_BIG + table].  Key-value
    lines are side rows that take the time, location, seq and table of the next record
    (their owner); comments are rows of their table and side rows.

    Returns (status, error code, line, record code, field, byte): DONE; FULL (table
    st[S_FULL], 3 the side matrix, has no room: grow it and call again, state kept); BAD,
    a syntax error (E_*).  When not final, decoding stops before a trailing run of
    key-value lines (they belong to a record of the next chunk), state at its start."""
    kwb, kwrec, kwspan, nf, opt_from, ftype, fopt, ftag, ftagl, hexv, upper, simple, tag1 = grammar
    processes, process_index, refmap, flat, offsets, defined, max_kv_type = checks
    n_dense = np.uint64(defined.shape[1])
    n_pdense = np.uint64(process_index.shape[0])
    tab_of, kind_of, is_text, colmap, keyrow, caps, side_cap, time_a, time_b = layout
    wide, narrow, kinds, counts, side = out
    vals = np.zeros(NV, np.uint64)
    pos = st[S_POS]
    line = st[S_LINE]
    have_t = st[S_HAVE_T] != 0
    have_p = st[S_HAVE_P] != 0
    n = st[S_N]
    nside = st[S_NSIDE]
    kv_side = st[S_KV_SIDE]
    t = tp[T_T]
    p = tp[T_P]
    maxp = tp[T_MAXP]
    pidx = process_index[p] if p < n_pdense else _find(processes, 0, processes.shape[0], p)
    pidx_of = p
    tm = np.uint64(0)
    tm_of = t
    have_tm = False
    # the arrays of the table written last: taken from the tuples only when the table
    # changes (each take is a reference count update; records of one table come in runs)
    wT = 0
    w = wide[0]
    nw = narrow[0]
    kd = kinds[0]
    # and where its key columns go (held here: a load through keyrow per record and column
    # cost more than the record's own fields), the first source order of this call
    r_time, r_seq, r_ticks = keyrow[0, K_TIME], keyrow[0, K_SEQ], keyrow[0, K_TICKS]
    r_order, r_loc, r_kind = keyrow[0, K_ORDER], keyrow[0, K_LOC], keyrow[0, K_KIND]
    base = st[S_BASE]
    while pos < limit:
        line += 1
        lstart = pos
        i = pos
        while buf[i] == 32:
            i += 1
        c = buf[i]
        if c == 10:              # empty line
            pos = i + 1
            continue
        star = c == 42
        if star or hexv[c] >= 0:    # a time line (hex number) or a process line ('*' hex number)
            if star:
                i += 1
            s = i
            v, i = _hex_at(buf, i, hexv)
            k = i - s
            while buf[i] == 32:
                i += 1
            if star:
                if buf[i] != 10 or k == 0 or k > 16:
                    return BAD, E_PROCESS_LINE, line, -1, -1, i
                p = v
                have_p = True
            else:
                if buf[i] != 10:
                    return BAD, E_TIME_LINE, line, -1, -1, i
                if k > 16:
                    return BAD, E_LONG_NUMBER, line, -1, -1, i
                t = v
                have_t = True
            pos = i + 1
            continue
        # keyword: maximal run of A-Z / '#'
        ks = i
        while upper[buf[i]]:
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
            return BAD, E_KEYWORD, line, -1, -1, ks
        if not (have_t and have_p):
            return BAD, E_NO_TIME_OR_PROCESS, line, rec, -1, ks
        T = tab_of[rec]
        if T >= 0 and st[S_M + T] >= caps[T]:
            full = T
        elif (T < 0 or is_text[rec]) and nside >= side_cap:
            full = 3
        else:
            full = -1
        if full >= 0:           # no room: stop before this line, all state kept
            _keep(st, tp, full, pos, line - 1, have_t, have_p, n, nside, kv_side, t, p, maxp)
            return FULL, 0, 0, -1, -1, 0
        for j in range(NV):
            vals[j] = 0
        soff = 0
        slen = 0
        # the short form as writers emit it (numbers, one-byte tags, no spaces, no optional
        # field left out but at the end): parsed here; any other line, by the general loop
        # below from the keyword's end, as if this had not run (it wrote vals only)
        nfr = nf[rec] if simple[rec] else 0
        j = 0
        ke = i
        while j < nfr:
            c = buf[i]
            if j > 0:           # its one-byte tag (a longer tag: no digits follow, A-Z is no hex)
                if c != tag1[rec, j]:
                    break
                i += 1
            s = i
            v, i = _hex_at(buf, i, hexv)
            if i == s or i - s > 16:
                break
            vals[j] = v
            j += 1
            if buf[i] == 10 and j >= opt_from[rec]:
                break
        fast = nfr > 0 and buf[i] == 10 and (j == nfr or j >= opt_from[rec])
        if not fast:
            i = ke
            for j in range(NV):
                vals[j] = 0
        for j in range(nf[rec] if fast else 0, nf[rec]):
            while buf[i] == 32:
                i += 1
            if buf[i] == 10 and j >= opt_from[rec]:     # line ends; the fields left are optional
                break
            if j > 0:
                ts = i
                while upper[buf[i]]:
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
                    return BAD, E_TAG, line, rec, j, ts
                while buf[i] == 32:
                    i += 1
            elif fopt[rec, j] != REQ and hexv[buf[i]] < 0:
                continue
            ft = ftype[rec, j]
            if ft == STRING:
                if buf[i] != 34:
                    return BAD, E_STRING, line, rec, j, i
                s = i + 1
                i = s
                while buf[i] != 34 and buf[i] != 10:
                    i += 1
                if buf[i] == 10:
                    return BAD, E_STRING, line, rec, j, s - 1
                soff = s
                slen = i - s
                i += 1
            else:
                s = i
                v, i = _hex_at(buf, i, hexv)
                k = i - s
                if k == 0:
                    return BAD, E_HEX, line, rec, j, i
                if ft == HEX and k > 16:
                    return BAD, E_LONG_NUMBER, line, rec, j, s
                if ft == HEXSTR:
                    soff = s
                    slen = k
                vals[j] = v
        while buf[i] == 32:
            i += 1
        if buf[i] != 10:
            return BAD, E_END_OF_LINE, line, rec, -1, i
        pos = i + 1
        # references: the process (its runs are long), a key-value's type, then each field
        if p != pidx_of:
            pidx = process_index[p] if p < n_pdense else _find(processes, 0, processes.shape[0], p)
            pidx_of = p
        if p > maxp:
            maxp = p
        if st[S_REF_LINE] == 0 and pidx >= 0:      # a record of another process is dropped
            what = NO_REF
            if T < 0 and vals[1] > max_kv_type:
                what = BAD_KV_TYPE
            else:
                for j in range(nf[rec]):
                    cr = refmap[j, rec]
                    if cr < 0 or vals[j] == 0:      # 0: OTF's "none"
                        continue
                    v = vals[j]
                    if v < n_dense:
                        if not defined[cr, v]:
                            what = j
                            break
                    elif _find(flat, offsets[cr], offsets[cr + 1], v) < 0:
                        what = j
                        break
            if what != NO_REF:
                st[S_REF_LINE] = line
                st[S_REF_WHAT] = what
                st[S_REF_REC] = rec
                tp[T_REF_P] = p
                if what == BAD_KV_TYPE:
                    tp[T_REF_V] = vals[1]
                elif what >= 0:
                    tp[T_REF_V] = vals[what]
        if T < 0:               # key-value line: a side row, owner still to come
            if kv_side < 0:
                kv_side = nside
                st[S_KV_N] = n
                st[S_KV_POS] = lstart
                st[S_KV_LINE] = line - 1
                tp[T_KV_T] = t
                tp[T_KV_P] = p
            side[nside, SD_REC] = rec
            side[nside, SD_LINE] = line
            side[nside, SD_SOFF] = soff
            side[nside, SD_SLEN] = slen
            side[nside, SD_KEY] = vals[0]
            side[nside, SD_TYPE] = vals[1]
            side[nside, SD_LEN] = vals[3]
            nside += 1
            st[S_KV_LAST] = line
            n += 1
            continue
        if pidx < 0:
            # a process the master file does not list: OTF_Reader_readEvents skips its
            # records (and the key-value lines they own); counted, for one warning
            if st[S_DROPPED] == 0:
                st[S_DROP_LINE] = line
                tp[T_DROP_P] = p
            st[S_DROPPED] += 1
            if kv_side >= 0:
                nside = kv_side
                kv_side = -1
            n += 1
            continue
        k = st[S_M + T]
        seq = counts[T, pidx]
        counts[T, pidx] = seq + 1
        if T != wT:
            w = wide[T]
            nw = narrow[T]
            kd = kinds[T]
            wT = T
            r_time, r_seq, r_ticks = keyrow[T, K_TIME], keyrow[T, K_SEQ], keyrow[T, K_TICKS]
            r_order, r_loc, r_kind = keyrow[T, K_ORDER], keyrow[T, K_LOC], keyrow[T, K_KIND]
        if r_time >= 0:
            if not (have_tm and tm_of == t):
                if time_b == 1:
                    tm = t * time_a
                elif time_b > 1:
                    q = t // time_b
                    tm = q * time_a + ((t - q * time_b) * time_a) // time_b
                tm_of = t
                have_tm = True
            w[r_time, k] = tm
        if r_seq >= 0:
            w[r_seq, k] = seq
        if r_ticks >= 0:
            w[r_ticks, k] = t
        if r_order >= 0:
            w[r_order, k] = base + n
        if r_loc >= 0 and p <= ID_MAX:
            nw[r_loc, k] = p
        if r_kind >= 0:
            kd[k] = kind_of[rec]
        for j in range(nf[rec]):
            cc = colmap[rec, j]
            if cc >= 0:
                w[cc, k] = vals[j]
            elif cc <= -2:
                if vals[j] > ID_MAX:     # reported (the first such line), never stored
                    if st[S_BIG + T] == 0:
                        st[S_BIG + T] = line
                elif -cc - 2 < nw.shape[0]:     # else a column not asked for: checked only
                    nw[-cc - 2, k] = vals[j]
        if kv_side >= 0:        # this record owns the key-value lines before it
            for q2 in range(kv_side, nside):
                side[q2, SD_TICKS] = t
                side[q2, SD_LOC] = p
                side[q2, SD_SEQ] = seq
                side[q2, SD_TAB] = T
            kv_side = -1
        if is_text[rec]:
            side[nside, SD_REC] = rec
            side[nside, SD_LINE] = line
            side[nside, SD_SOFF] = soff
            side[nside, SD_SLEN] = slen
            side[nside, SD_TICKS] = t
            side[nside, SD_LOC] = p
            side[nside, SD_SEQ] = seq
            side[nside, SD_TAB] = T
            nside += 1
        st[S_M + T] = k + 1
        n += 1
    if kv_side >= 0 and not final:     # the trailing key-value lines wait for their record
        pos = st[S_KV_POS]
        line = st[S_KV_LINE]
        t = tp[T_KV_T]
        p = tp[T_KV_P]
        have_t = True
        have_p = True
        n = st[S_KV_N]
        nside = kv_side
        kv_side = -1
        if st[S_REF_LINE] > line:       # found in those lines: they are checked again
            st[S_REF_LINE] = 0
    _keep(st, tp, -1, pos, line, have_t, have_p, n, nside, kv_side, t, p, maxp)
    return DONE, 0, 0, -1, -1, 0
