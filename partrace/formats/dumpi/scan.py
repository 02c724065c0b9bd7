"""The one compiled loop: walk a rank's call stream once.

Records carry no length, so the walk interprets the function table (compiled
into small integer arrays by :func:`compile_table`).  A chunk is at most
``limit`` records from a byte offset, walked once into preallocated numpy arrays
(per call arrays for every record the bytes can hold; the side arrays grown and
the walk resumed at the record that found one full): per call the preamble and up to MAXARGS
scalar slots (array/string/status slots hold their element count, -1 = not
recorded), plus flat element, string, status and perf-counter arrays keyed by
(call, slot).  Nothing per call becomes a Python object.

Per-call arrays are slot-major ((slot, call): a slot no call of the chunk has is
never written, so its zeroed pages are never touched), and the side arrays are
made in the dtypes of the tables' columns (int32 indices, status fields), so
nothing is narrowed (copied and range-checked) afterwards.
"""
from __future__ import annotations

import numpy as np

from ...kernels.jit import njit   # lazy: numba only for inputs that are not small
from .functable import FUNCTIONS

KINDS = ("i32", "u16", "u8", "i64", "status", "a32", "a16", "a8", "aa32",
         "str", "str2", "str3", "argv")
K = {k: i for i, k in enumerate(KINDS)}
# byte layouts of older writers, as sst-dumpi's dumpiio.c reads them (compiled ops only:
# the tables keep the current kinds).  ONE_OF: one i32 where the array now is; it
# becomes the first of as many elements as the array slot named in the op holds (the
# rest 0), as dumpiio.c fills them.  ARGV_TWICE: argc written twice before the strings.
# STATUS_NO_TAG: statuses of 10 bytes, no tag (iodefs.h get_statuses before 0.6.3; the
# tag reads as MPI_ANY_TAG, -1).
ONE_OF, ARGV_TWICE, STATUS_NO_TAG = len(KINDS), len(KINDS) + 1, len(KINDS) + 2
STATUS_TAG_SINCE = (0, 6, 3)
ANY_TAG = -1
OLD_LAYOUTS = (   # (first version with today's layout, function, argument, old kind, size slot)
    ((0, 6, 9), "MPI_Type_struct", "indices", ONE_OF, "lengths"),
    ((0, 6, 8), "MPI_Cart_get", "coords", ONE_OF, "dims"),
    ((0, 6, 2), "MPI_Init", "argv", ARGV_TWICE, None))
MAXARGS = max(len(a) for _, _, a in FUNCTIONS if a)
NFUNC = len(FUNCTIONS)

# error codes returned by the kernel; E_BIG: more elements in one argument than the int32
# index columns (arrays/strings i0, i1, statuses index) hold.  E_FULL + g: output group g
# (calls, ints, strs, stats, perf) has no room for the record: the caller grows it and
# walks on from that record (not an error of the trace).  E_EOS: an end-of-stream label
# (293) before the stream's end, where libundumpi stops reading (offset: the label's)
OK, E_UNKNOWN, E_TRUNC, E_BIG, E_EOS, E_FULL = 0, 1, 2, 3, 4, 5
END_OF_STREAM = 293
INDEX_MAX = 2**31 - 1


def compile_table(version: tuple[int, int, int] = (13, 0, 0)):
    """(start, count) per function id and per-op (kind, cond_a, cond_b); count -1 = no record.
    For a ONE_OF op, cond_a is the slot whose element count it takes."""
    old = {(f, a): (k, size) for since, f, a, k, size in OLD_LAYOUTS if tuple(version) < since}
    start = np.zeros(NFUNC, np.int32)
    count = np.full(NFUNC, -1, np.int32)
    ops = []
    for fid, name, args in FUNCTIONS:
        if args is None:
            continue
        slot = {a[0]: i for i, a in enumerate(args)}
        start[fid], count[fid] = len(ops), len(args)
        for an, kind, _role, cond in args:
            if (name, an) in old:
                k, size = old[name, an]
                ops.append((k, slot[size] if size else -1, -1))
                continue
            if kind == "status" and tuple(version) < STATUS_TAG_SINCE:
                kind_id = STATUS_NO_TAG
            else:
                kind_id = K[kind]
            ops.append((kind_id, slot[cond[0]] if cond else -1, slot[cond[1]] if cond else -1))
    return start, count, np.array(ops, np.int32).reshape(-1, 3)


_TABLES: dict = {}


def table_for(version: tuple[int, int, int]):
    """The compiled table for a writer version (one per distinct layout, cached)."""
    key = tuple(since for since, *_ in OLD_LAYOUTS if tuple(version) < since) + (
        tuple(version) < STATUS_TAG_SINCE,)
    if key not in _TABLES:
        _TABLES[key] = compile_table(version)
    return _TABLES[key]


@njit(cache=True, inline="always")
def _u16(b, p):
    return (np.int64(b[p]) << 8) | np.int64(b[p + 1])


@njit(cache=True, inline="always")
def _u32(b, p):
    return ((np.int64(b[p]) << 24) | (np.int64(b[p + 1]) << 16)
            | (np.int64(b[p + 2]) << 8) | np.int64(b[p + 3]))


@njit(cache=True, inline="always")
def _i32(b, p):
    v = _u32(b, p)
    return v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v


@njit(cache=True, inline="always")
def _u64(b, p):
    return np.uint64((np.uint64(_u32(b, p)) << np.uint64(32)) | np.uint64(_u32(b, p + 4)))


# element bytes of the kinds whose count is followed by its elements
@njit(cache=True, inline="always")
def element_bytes(kind):
    if kind == 4:
        return 14
    if kind == STATUS_NO_TAG:
        return 10
    return 4 if (kind == 5 or kind == 8) else (2 if kind == 6 else 1)


@njit(cache=True, inline="always")
def read_length(b, pos, end, width):
    """A u32 count at ``pos`` followed by that many elements of ``width`` bytes: (error,
    the position after the count, the count); E_TRUNC when the count or its elements
    run past ``end``."""
    if pos + 4 > end:
        return E_TRUNC, pos, np.int64(0)
    m = _u32(b, pos)
    if pos + 4 + width * m > end:
        return E_TRUNC, pos + 4, m
    return OK, pos + 4, m


@njit(cache=True, inline="always")
def read_count(b, pos, end, width):
    """:func:`read_length` of elements the int32 index columns number (E_BIG: more)."""
    err, pos, m = read_length(b, pos, end, width)
    if err == OK and m > INDEX_MAX:
        return E_BIG, pos, m
    return err, pos, m


@njit(cache=True, inline="always")
def read_arg(b, pos, end, kind, mask):
    """One argument of a record at ``pos`` (of the compiled ``kind``, in a record of
    ``mask``): (error, position, value), as both walks read it.  Scalars: the value,
    the position after it.  Statuses, arrays of i32/u16/u8: the element count (checked:
    its elements fit before ``end``, the int32 indices number them; statuses -1 when
    the mask records none), the position of the first element.  ONE_OF: its one i32,
    the position after it.  Arrays of arrays, strings of 2 or 3 levels, argv: the outer
    count, the position after it (after argc's repeat for ARGV_TWICE); a string: its
    length, the position of that length (the string's own loop reads it)."""
    if kind <= 3:                            # i32, u16, u8, i64
        w = 4 if kind == 0 else (2 if kind == 1 else (1 if kind == 2 else 8))
        if pos + w > end:
            return E_TRUNC, pos, np.int64(0)
        if kind == 0:
            return OK, pos + w, _i32(b, pos)
        if kind == 1:
            return OK, pos + w, _u16(b, pos)
        if kind == 2:
            return OK, pos + w, np.int64(b[pos])
        return OK, pos + w, np.int64(_u64(b, pos))
    if kind == 4 or kind == STATUS_NO_TAG:   # status(es): only with mask bits 0x03
        if mask & 0x03:
            return read_count(b, pos, end, element_bytes(kind))
        return OK, pos, np.int64(-1)
    if kind == ONE_OF:
        if pos + 4 > end:
            return E_TRUNC, pos, np.int64(0)
        return OK, pos + 4, _i32(b, pos)
    if kind <= 7:                            # arrays of i32 / u16 / u8
        return read_count(b, pos, end, element_bytes(kind))
    if pos + 4 > end:                        # arrays of arrays, strings, argv
        return E_TRUNC, pos, np.int64(0)
    v = _u32(b, pos)
    if kind == 9:
        return OK, pos, v
    if kind == ARGV_TWICE:                   # the repeated argc
        if pos + 8 > end:
            return E_TRUNC, pos + 4, v
        return OK, pos + 8, v
    return OK, pos + 4, v


@njit(cache=True)
def walk(b, pos, end, limit, table, start, calls, ints, strs, stats, perf):
    """Walk at most ``limit`` records from pos.  Returns (error, offset, counts[5]); offset is
    where the walk stopped (the next record) or the bad record; counts: calls, int elements,
    strings, statuses, perf values.  `table`: (clock offsets, fstart, fcount, ops) (see
    compile_table).  `start`: the counts already in the arrays (0s, or where a walk that
    found a group full stopped: it returns E_FULL + group, the record's offset and the counts
    at its start).  The values go to
    `calls` (off, func, mask, thread, times[4, n], perfn, vals[MAXARGS, n]), `ints` (call,
    slot, i0, i1, value), `strs` (call, slot, i0, i1, start, length), `stats` (call, slot,
    index, bytes, source, cancelled, error, tag) and `perf` (call, index, entry, exit).
    times: cpu entry, cpu exit (0 when not
    recorded), then entry, exit on the wall clock, or the cpu clock when only that is
    recorded (0 when neither is).  Every element of the arrays up to the counts is
    written (they need not be zeroed), and of vals the slots of each call's function.

    One loop, its helpers inlined into it (``inline="always"``: numba's inliner, not LLVM's
    cost model): each argument's value or count is read by :func:`read_arg`, the code the
    plan's skim reads it with, so both stop at the same byte with the same error; the kinds'
    elements are the branches below.  Merges of DUMPI traces with the reader shared ran at
    the CPU of the branches it replaced (paired whole-process runs, A B alternating, median
    of pair ratios: 0.98 on sst-dumpi's test programs, 1.00 on 200 MB)."""
    offs, fstart, fcount, ops = table
    c_off, c_func, c_mask, c_thread, c_times, c_perfn, vals = calls
    e_call, e_slot, e_i0, e_i1, e_val = ints
    s_call, s_slot, s_i0, s_i1, s_start, s_len = strs
    t_call, t_slot, t_i0, t_bytes, t_source, t_cancelled, t_error, t_tag = stats
    p_call, p_i, p_entry, p_exit = perf
    n = start[0]
    ne = start[1]
    ns = start[2]
    nt = start[3]
    npf = start[4]
    counts = np.zeros(5, np.int64)
    while pos < end and n < limit:
        rec = pos
        counts[0] = n                    # at the record's start: where a full walk resumes
        counts[1] = ne
        counts[2] = ns
        counts[3] = nt
        counts[4] = npf
        if pos + 3 > end:
            return E_TRUNC, rec, counts
        fid = _u16(b, pos)
        if fid == END_OF_STREAM:
            return E_EOS, rec, counts
        if fid >= fstart.shape[0] or fcount[fid] < 0:
            return E_UNKNOWN, rec, counts
        mask = b[pos + 2]
        if n >= c_func.shape[0]:
            return E_FULL, rec, counts
        row = n
        pos += 3
        thread = 0
        if mask & 0x40:
            if pos + 2 > end:
                return E_TRUNC, rec, counts
            thread = _u16(b, pos)
            pos += 2
        c_off[n] = rec
        c_func[n] = fid
        c_mask[n] = mask
        c_thread[n] = thread
        c_perfn[n] = 0
        if not mask & 0x04:          # no cpu block: 0 unless the wall block follows
            for j in range(4):
                c_times[j, n] = 0
        for clock in range(2):           # cpu block, then wall block
            if mask & (0x04 << clock):
                if pos + 12 > end:
                    return E_TRUNC, rec, counts
                o = offs[clock]
                t0 = (_u16(b, pos) + o) * 1000000000 + _u32(b, pos + 2)
                t1 = (_u16(b, pos + 6) + o) * 1000000000 + _u32(b, pos + 8)
                c_times[2 * clock, n] = t0
                c_times[2 * clock + 1, n] = t1
                if clock == 0:               # the wall block, when present, overwrites
                    c_times[2, n] = t0
                    c_times[3, n] = t1
                pos += 12
        if mask & 0x80:
            if pos + 1 > end:
                return E_TRUNC, rec, counts
            np_ = b[pos]
            pos += 1
            if pos + 16 * np_ > end:
                return E_TRUNC, rec, counts
            if npf + np_ > p_call.shape[0]:
                return E_FULL + 4, rec, counts
            for i in range(np_):
                p_call[npf] = n
                p_i[npf] = i
                p_entry[npf] = _u64(b, pos)
                p_exit[npf] = _u64(b, pos + 8)
                npf += 1
                pos += 16
            c_perfn[n] = np_
        for k in range(fcount[fid]):
            kind = ops[fstart[fid] + k, 0]
            ca = ops[fstart[fid] + k, 1]
            if ca >= 0 and kind < 13 and vals[ca, row] != vals[ops[fstart[fid] + k, 2], row]:
                vals[k, row] = -1 if kind >= 4 else 0     # root-only field, absent here
                continue
            err, pos, v = read_arg(b, pos, end, kind, mask)
            if err != OK:
                return err, rec, counts
            if kind == 4 or kind == STATUS_NO_TAG:     # v statuses (-1: none recorded)
                if nt + v > t_call.shape[0]:
                    return E_FULL + 3, rec, counts
                width = element_bytes(kind)
                for i in range(v):
                    t_call[nt] = n
                    t_slot[nt] = k
                    t_i0[nt] = i
                    t_bytes[nt] = _i32(b, pos)
                    t_source[nt] = _i32(b, pos + 4)
                    t_cancelled[nt] = b[pos + 8]
                    t_error[nt] = b[pos + 9]
                    t_tag[nt] = _i32(b, pos + 10) if kind == 4 else ANY_TAG
                    nt += 1
                    pos += width
            elif kind == ONE_OF:                  # (older writers): one i32 ...
                first = v
                v = max(vals[ca, row], 1)         # ... as the first of the sized slot's
                if ne + v > e_call.shape[0]:
                    return E_FULL + 1, rec, counts
                for i in range(v):                # elements (already bounded by bytes)
                    e_call[ne] = n
                    e_slot[ne] = k
                    e_i0[ne] = i
                    e_i1[ne] = 0
                    e_val[ne] = first if i == 0 else 0
                    ne += 1
            elif kind >= 5 and kind <= 8:         # arrays of i32 / u16 / u8 / of i32 arrays
                outer = v if kind == 8 else 1
                w = element_bytes(kind)
                for i0 in range(outer):
                    if i0 >= INDEX_MAX:
                        return E_BIG, rec, counts
                    m = v
                    if kind == 8:
                        err, pos, m = read_count(b, pos, end, w)
                        if err != OK:
                            return err, rec, counts
                    if ne + m > e_call.shape[0]:
                        return E_FULL + 1, rec, counts
                    for i in range(m):
                        e_call[ne] = n
                        e_slot[ne] = k
                        e_i0[ne] = i0 if kind == 8 else i
                        e_i1[ne] = i if kind == 8 else 0
                        if w == 4:
                            e_val[ne] = _i32(b, pos)
                        elif w == 2:
                            e_val[ne] = _u16(b, pos)
                        else:
                            e_val[ne] = b[pos]
                        ne += 1
                        pos += w
            elif kind >= 9:                       # strings: 1, 2 or 3 levels; argv = 2 levels
                n0 = 1 if kind == 9 else v
                for i0 in range(n0):
                    if i0 >= INDEX_MAX:
                        return E_BIG, rec, counts
                    n1 = np.int64(1)
                    if kind == 11:
                        err, pos, n1 = read_length(b, pos, end, 0)
                        if err != OK:
                            return err, rec, counts
                    for i1 in range(n1):
                        if i1 >= INDEX_MAX:
                            return E_BIG, rec, counts
                        err, pos, m = read_length(b, pos, end, 1)
                        if err != OK:
                            return err, rec, counts
                        if ns >= s_call.shape[0]:
                            return E_FULL + 2, rec, counts
                        s_call[ns] = n
                        s_slot[ns] = k
                        s_i0[ns] = i0
                        s_i1[ns] = i1
                        s_start[ns] = pos
                        s_len[ns] = m
                        ns += 1
                        pos += m
            vals[k, row] = v
        n += 1
    counts[0] = n
    counts[1] = ne
    counts[2] = ns
    counts[3] = nt
    counts[4] = npf
    if pos > end or (n < limit and pos != end):
        return E_TRUNC, pos, counts
    return OK, pos, counts
