"""The events table of one chunk: ENTER/LEAVE per call, plus message and collective rows.

Between a call's ENTER and LEAVE, in this order:
  COUNTER (entry)    each PAPI counter's value at entry (counters.py), in counter order;
  SEND (entry time)  Send/Bsend/Ssend/Rsend, Isend family, Sendrecv(_replace),
                     Start/Startall of a persistent send;
  COLLECTIVE (entry) the 16 MPI-2 collectives;
  RECV (exit time)   Recv, Sendrecv(_replace), and every receive completed by
                     Wait/Test*/Waitall/... (see requests.py), in element order;
  COUNTER (exit)     each PAPI counter's value at exit.
``peer``/``root`` are locations (world rank + 1; 0 = none or not known), the
comm-local ranks as recorded stay in ``peer_rank``/``root_rank`` (-1 = none).
"""
from __future__ import annotations

from functools import cache

import numpy as np

from ...model import Kind
from ..base import repeated
from .walk import locations, threads
from .functable import FUNCTIONS
from .requests import SEND_POSTS, slot

BLOCKING_SENDS = (0, 3, 4, 5)
COLL_TYPE = {52: 1, 53: 2, 56: 2, 57: 2, 54: 3, 55: 3, 62: 3,
             58: 4, 59: 4, 60: 4, 61: 4, 65: 4, 66: 4, 67: 4, 155: 4, 156: 4}
FILL = {"peer_rank": -1, "root_rank": -1}          # rank-valued own columns: -1 = none


@cache
def schema_columns(counters: bool = False) -> tuple:
    """The events table's columns (tables.events_columns; ``counters``: with the counter
    columns of a trace with perf labels)."""
    from .tables import events_columns
    return tuple(events_columns(counters))


@cache
def schema_dtypes() -> dict[str, np.dtype]:
    """The events table's dtypes (tables.events_columns), by column name."""
    return {c.name: c.element_dtype() for c in schema_columns(True)}


def nbytes(count, dtype, sizes: np.ndarray) -> np.ndarray:
    """count x datatype size; 0 when the size is not known (count stays in calls/)."""
    count = np.asarray(count, np.int64)
    dtype = np.asarray(dtype, np.int64)
    known = (dtype >= 0) & (dtype < len(sizes))
    sz = sizes[np.where(known, dtype, 0)] if len(sizes) else np.zeros(len(dtype), np.int64)
    known &= sz >= 0
    return np.where(known, np.maximum(count, 0) * sz, 0).astype(np.int64)


STATUS_FIELDS = {"bytes": 3, "source": 4, "cancelled": 5, "error": 6, "tag": 7}   # in w.t


def status_field(w, name: str, rows: np.ndarray) -> np.ndarray:
    """One field of the given status rows (zeros when the chunk has no statuses: callers
    then select none of them)."""
    column = w.t[STATUS_FIELDS[name]]
    return column[rows] if len(column) else np.zeros(len(rows), np.int64)


def array_rows(w, fid: int, name: str) -> np.ndarray:
    """Rows of w.e holding argument ``name`` of calls of ``fid`` (in call, index order)."""
    es = w.e[1]
    return np.nonzero((w.efunc == fid) & (es == slot(fid, name)))[0]


def array_sum(w, fid: int, name: str, weight=None) -> np.ndarray:
    """Per call of the chunk, the sum of the elements of an int array argument."""
    r = array_rows(w, fid, name)
    x = w.e[4][r] if weight is None else w.e[4][r] * weight
    return np.bincount(w.e[0][r], weights=x, minlength=len(w.func)).astype(np.int64)


class EventRows:
    """Collects the rows of one chunk, then places them call by call.

    ``want``: the columns to make (None = all).  Every row is placed whatever is wanted
    (the rows of a selected decode are a full decode's); a column value given as a
    callable is computed only when wanted (comm ids, byte counts)."""

    def __init__(self, w, t_in, t_out, c_in, c_out, want=None):
        self.w, self.t = w, (t_in, t_out, c_in, c_out)
        self.want = None if want is None else set(want)
        # ENTER/LEAVE: every call (no call column needed), their kind one value each
        self.parts = [self._part(None, 0, Kind.ENTER, time=t_in, cpu_time=c_in),
                      self._part(None, 3, Kind.LEAVE, time=t_out, cpu_time=c_out)]

    def wants(self, name: str) -> bool:
        return self.want is None or name in self.want

    def _part(self, calls, order, kind, **cols) -> dict:
        part = dict(call=calls, order=order)
        if self.wants("kind"):
            part["kind"] = np.full(1 if calls is None else len(calls), int(kind), np.uint8)
        for k, v in cols.items():
            if self.wants(k):
                part[k] = v() if callable(v) else v
        return part

    def add(self, calls, kind, at_exit: bool | None = None, **cols):
        """Rows for the given calls: SEND/COLLECTIVE at entry, RECV at exit (COUNTER: as
        ``at_exit`` says)."""
        t_in, t_out, c_in, c_out = self.t
        entry = kind != Kind.RECV if at_exit is None else not at_exit
        calls = np.asarray(calls, np.int64)
        self.parts.append(self._part(calls, 1 if entry else 2, kind,
                                     time=lambda: (t_in if entry else t_out)[calls],
                                     cpu_time=lambda: (c_in if entry else c_out)[calls],
                                     **cols))

    def place(self, base: int = 0) -> tuple[dict[str, np.ndarray], int]:
        """(columns, number of rows).  Per call: ENTER, extras (SEND, COLLECTIVE, RECV, each
        in added order), LEAVE; ``call`` counts from ``base``."""
        n = len(self.w.func)
        parts, extra = self.parts, self.parts[2:]
        ecall = np.concatenate([p["call"] for p in extra]) if extra else np.zeros(0, np.int64)
        cnt = np.bincount(ecall, minlength=n)
        per_call = 2 + cnt
        out = {}
        total = 2 * n + len(ecall)
        # a call's rows are contiguous: its own columns are repeats, not scatters
        if self.wants("call"):
            out["call"] = np.repeat(np.arange(base, base + n, dtype=np.int64), per_call)
        if self.wants("region"):     # in the schema's int32: nothing for conform to check
            out["region"] = np.repeat(self.w.func.astype(np.int32) + 1, per_call)
        if self.wants("thread"):
            out["thread"] = threads(self.w, total, lambda t: np.repeat(t, per_call))
        names = sorted(set().union(*parts) - {"order", "call"})
        if not names:
            return out, total
        from .kernels import extras_in_row_order, gather_rows
        eorder = np.repeat(np.array([p["order"] for p in extra], np.int8),
                           [len(p["call"]) for p in extra])
        # each column is written once, in row order, call by call (no zeroing pass and no
        # scatter over it: both touched the whole column)
        cnt = cnt.astype(np.int64, copy=False)
        eperm = extras_in_row_order(ecall.astype(np.int64, copy=False), eorder, cnt)
        for k in names:
            values = [np.asarray(p[k]) for p in parts if k in p]
            fill = None if len(values) == len(parts) else FILL.get(k, 0)
            dtype = _dtype(k, values, fill)
            ends = [_column_part(p, k, fill, dtype) for p in parts[:2]]
            rest = _extras(extra, k, fill, dtype, len(ecall))
            dst = np.empty(total, dtype)
            gather_rows(cnt, eperm, *(_bits(a) for a in (*ends, rest, dst)))
            out[k] = dst
            for p in parts:             # placed: its parts' values are not held any longer
                p.pop(k, None)
        return out, total


def _column_part(part: dict, name: str, fill, dtype, n: int = 1) -> np.ndarray:
    """One part's values of a column in ``dtype`` (as assigning them into it would cast),
    or its ``n`` fill values."""
    if name in part:
        return np.asarray(part[name]).astype(dtype, copy=False)
    return np.full(n, fill, dtype)


def _extras(extra: list[dict], name: str, fill, dtype, n: int) -> np.ndarray:
    """The extra parts' values of a column, one after the other, in ``dtype``: each part
    cast as it is copied in (one pass, no cast copy to concatenate), or its fill values."""
    out = np.empty(n, dtype)
    at = 0
    for p in extra:
        m = len(p["call"])
        out[at:at + m] = np.asarray(p[name]) if name in p else fill
        at += m
    return out


def _bits(a: np.ndarray) -> np.ndarray:
    """An integer array as the signed integers of its width (one compiled kernel per
    width, not per dtype: placing values copies their bits)."""
    return a.view(f"i{a.dtype.itemsize}") if a.dtype.kind in "iu" else a


def _dtype(name: str, values: list[np.ndarray], fill: int | None) -> np.dtype:
    """The dtype to place a column in: the schema's, so that conform has nothing to check
    or copy, where that gives the values conform would (ids that fit int32, int64 bits as
    uint64); else the values' own (and ``fill``'s: int64), which conform checks and, for a
    value that does not fit, refuses as before."""
    made = np.result_type(*[v.dtype for v in values], *([np.int64] if fill is not None else []))
    want = schema_dtypes().get(name)
    if want is None or want == made or made.kind not in "iu" or want.kind not in "iu":
        return made
    lo, hi = np.iinfo(want).min, np.iinfo(want).max
    if fill is not None and not lo <= fill <= hi:
        return made
    if want.itemsize < made.itemsize:       # narrowing: conform's range check, on the parts
        for v in values:
            if len(v) and not np.can_cast(v.dtype, want) and (v.min() < lo or v.max() > hi):
                return made
    return want


def chunk_events(w, base, location, sizes, comms, done, post, starts, status_first, want=None,
                 counter_ids=None):
    """(columns, number of rows) of the events of one chunk (``call`` global); see the
    module docstring.  ``want``: the columns to make (None = all; the rows are the same
    whatever it is).  ``counter_ids``: per counter index of the rank's perfinfo blocks, its
    counter id (counters.location_counter_ids; None or empty: no COUNTER rows)."""
    from .counters import add_counter_rows
    t_in, t_out, c_in, c_out = w.enter_leave()
    rows = EventRows(w, t_in, t_out, c_in, c_out, want)
    v = w.vals
    counter_ids = np.zeros(0, np.int64) if counter_ids is None else counter_ids
    add_counter_rows(w, rows, counter_ids, at_exit=False)

    def msg(calls, kind, handles, rank, **cols):
        if not len(calls):      # no rows: nothing to compute (a column no row sets is its fill)
            return
        handle = cache(handles if callable(handles) else lambda: handles)
        comm = cache(lambda: comms.comm(handle(), calls + base))
        rows.add(calls, kind, comm=comm, comm_handle=handle, peer_rank=rank,
                 peer=lambda: comms.location_of(comm(), rank), **cols)

    # sends, posted or blocking, in call order of their functions
    for fid, names in [(f, ("count", "datatype", "dest", "tag", "comm")) for f in
                       BLOCKING_SENDS + SEND_POSTS] + [
            (33, ("sendcount", "sendtype", "dest", "sendtag", "comm")),
            (34, ("count", "datatype", "dest", "sendtag", "comm"))]:
        s = [slot(fid, x) for x in names]
        c = w.calls_of(fid)
        if not len(c):
            continue
        c = c[v[s[2]][c] >= 0]
        req = v[slot(fid, "request")][c] if fid in SEND_POSTS else np.zeros(len(c), np.int64)
        msg(c, Kind.SEND, v[s[4]][c], v[s[2]][c], tag=v[s[3]][c],
            size=lambda: nbytes(v[s[0]][c], v[s[1]][c], sizes), request=req)
    sk = starts["recv"] == 0                      # persistent sends, at their Start
    sc = starts["call"][sk] - base
    ok = starts["peer"][sk] >= 0
    msg(sc[ok], Kind.SEND, starts["comm"][sk][ok], starts["peer"][sk][ok],
        tag=starts["tag"][sk][ok], size=lambda: nbytes(starts["count"][sk][ok],
                                                       starts["datatype"][sk][ok], sizes),
        request=starts["req"][sk][ok])
    _collectives(w, base, rows, sizes, comms)
    # blocking receives: the status when recorded, else the arguments
    for fid, names in [(1, ("count", "datatype", "source", "tag", "comm", "status")),
                       (33, ("recvcount", "recvtype", "source", "recvtag", "comm", "status")),
                       (34, ("count", "datatype", "source", "recvtag", "comm", "status"))]:
        s = [slot(fid, x) for x in names]
        c = w.calls_of(fid)
        if not len(c):
            continue
        has = (v[s[5]][c] >= 1) & (status_first[c] >= 0)
        srow = np.where(has, status_first[c], 0)
        peer = np.where(has, status_field(w, "source", srow), v[s[2]][c])
        keep = peer >= 0
        c, has, srow, peer = c[keep], has[keep], srow[keep], peer[keep]
        msg(c, Kind.RECV, v[s[4]][c], peer,
            tag=np.where(has, status_field(w, "tag", srow), v[s[3]][c]),
            size=lambda: np.where(has, status_field(w, "bytes", srow),
                                  nbytes(v[s[0]][c], v[s[1]][c], sizes)))
    # receives completed by Wait/Test*: status of the completion, else the post's arguments
    recv = (post["recv"] == 1)
    has = done["status"] >= 0
    srow = np.where(has, done["status"], 0)
    recv &= ~(has & (status_field(w, "cancelled", srow) != 0))     # cancelled: no message
    peer = np.where(has, status_field(w, "source", srow), post["peer"])
    recv &= peer >= 0
    msg(done["call"][recv], Kind.RECV, lambda: post["comm"][recv], peer[recv],
        tag=lambda: np.where(has, status_field(w, "tag", srow), post["tag"])[recv],
        size=lambda: np.where(has, status_field(w, "bytes", srow),
                              nbytes(post["count"], post["datatype"], sizes))[recv],
        request=done["req"][recv])
    add_counter_rows(w, rows, counter_ids, at_exit=True)
    out, total = rows.place(base)
    if rows.wants("location"):
        out["location"] = locations(location, total)
    # a column no row of this chunk sets (no collective, no message): its fill value on
    # every row, as one value (-1 for the ranks: conform's zeros would read as rank 0)
    for c in schema_columns(len(counter_ids) > 0):
        if c.name not in out and c.name != "seq" and rows.wants(c.name):
            out[c.name] = repeated(FILL.get(c.name, 0), total, c)
    return out, total


def _collectives(w, base, rows, sizes, comms) -> None:
    """COLLECTIVE rows: bytes sent/received by this rank, from scalars or count arrays."""
    t_in, t_out = rows.t[0], rows.t[1]
    for fid in COLL_TYPE:
        c = w.calls_of(fid)
        if not len(c):
            continue
        names = [a[0] for a in FUNCTIONS[fid][2]]

        def col(x, default=0):
            return w.vals[names.index(x)][c] if x in names else np.full(len(c), default)

        handle = col("comm")
        comm = cache(lambda: comms.comm(handle, c + base))
        root = col("root", -1) if "root" in names else np.full(len(c), -1)
        sent_recv = cache(lambda: _coll_bytes(w, fid, c, names, col, comm, sizes, comms))
        rows.add(c, Kind.COLLECTIVE, comm=comm, comm_handle=handle, root_rank=root,
                 root=lambda: comms.location_of(comm(), root), size=lambda: sent_recv()[0],
                 received=lambda: sent_recv()[1], collop=lambda: np.full(len(c), fid + 1),
                 duration=lambda: t_out[c] - t_in[c])


def _coll_bytes(w, fid, c, names, col, comm, sizes, comms):
    """(bytes sent, bytes received) per call of collective ``fid``."""
    sent = recv = nbytes(col("count"), col("datatype"), sizes)
    if "sendcount" in names:
        sent = nbytes(col("sendcount"), col("sendtype"), sizes)
    if "recvcount" in names:
        recv = nbytes(col("recvcount"), col("recvtype"), sizes)
    if "sendcounts" in names and fid != 155:
        sent = array_sum(w, fid, "sendcounts")[c] * nbytes(1, col("sendtype"), sizes)
    if "recvcounts" in names and fid not in (66, 155):
        recv = array_sum(w, fid, "recvcounts")[c] * nbytes(1, col("recvtype"), sizes)
    if fid == 155:                            # Alltoallw: a datatype per peer
        sent, recv = (_weighted(w, fid, cn, tn, sizes)[c] for cn, tn in
                      (("sendcounts", "sendtypes"), ("recvcounts", "recvtypes")))
    if fid == 66:                             # Reduce_scatter: all in, own block out
        one = nbytes(1, col("datatype"), sizes)
        sent = array_sum(w, fid, "recvcounts")[c] * one
        recv = _own_block(w, fid, c, comms.my_rank(comm())) * one
    return sent, recv


def _weighted(w, fid, counts, types, sizes) -> np.ndarray:
    """Per call: sum of counts[i] x size(types[i]) (the arrays pair up element by element)."""
    rc, rt = array_rows(w, fid, counts), array_rows(w, fid, types)
    ec, e0, ev = w.e[0], w.e[2], w.e[4]
    if len(rc) != len(rt) or not (np.array_equal(ec[rc], ec[rt])
                                  and np.array_equal(e0[rc], e0[rt])):
        return np.zeros(len(w.func), np.int64)
    b = nbytes(ev[rc], ev[rt], sizes)
    return np.bincount(ec[rc], weights=b, minlength=len(w.func)).astype(np.int64)


def _own_block(w, fid, calls, my_rank) -> np.ndarray:
    """recvcounts[my rank in comm] per call; 0 when the rank is not known."""
    r = array_rows(w, fid, "recvcounts")
    ec, e0, ev = w.e[0], w.e[2], w.e[4]
    want = np.full(len(w.func), -2, np.int64)
    want[calls] = my_rank
    hit = r[e0[r] == want[ec[r]]]
    out = np.zeros(len(w.func), np.int64)
    out[ec[hit]] = ev[hit]
    return out[calls]
