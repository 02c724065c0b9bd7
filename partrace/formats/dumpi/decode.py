"""Decode one rank file into tables (numba walk + numpy assembly)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import TraceError
from ...model import Kind, Table, conform
from . import scan
from .functable import FUNCTIONS
from .layout import RankFile, read_rank_file
from .tables import COLLECTIVES, SCALAR_DTYPES, SIDE_ARG_ID, table_name

_TABLE = scan.compile_table()
SENDS = {0: 0, 3: 0, 4: 0, 5: 0, 8: 0, 9: 0, 10: 0, 11: 0}   # count, datatype, dest, tag, comm


class Walk:
    """Raw result of walking one rank's stream (numpy arrays only)."""

    def __init__(self, data, rf: RankFile):
        buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8)
        start, count, ops = _TABLE
        offs = np.array([rf.cpu_offset, rf.wall_offset], np.int64)
        args = (buf, rf.stream_start, rf.stream_end, offs, start, count, ops)
        z = lambda *shape, dt=np.int64: np.zeros(shape, dt)     # noqa: E731
        empty = [z(0), z(0, dt=np.int16), z(0, dt=np.uint8), z(0, dt=np.uint16), z(0, 4),
                 z(0, dt=np.uint8), z(1, scan.MAXARGS)] + [z(0)] * 5 + [z(0)] * 6 + [
                 z(0), z(0), z(0), z(0, 5), z(0), z(0), z(0, 2, dt=np.uint64)]
        err, at, n = scan.walk(*args, False, *empty)
        self._check(err, at, rf, buf)
        nc, ne, ns, nt, npf = (int(x) for x in n)
        self.off, self.func = z(nc), z(nc, dt=np.int16)
        self.mask, self.thread = z(nc, dt=np.uint8), z(nc, dt=np.uint16)
        self.times, self.perfn, self.vals = z(nc, 4), z(nc, dt=np.uint8), z(nc, scan.MAXARGS)
        self.e = [z(ne), z(ne), z(ne), z(ne), z(ne)]
        self.s = [z(ns) for _ in range(6)]
        self.t = [z(nt), z(nt), z(nt), z(nt, 5)]
        self.p = [z(npf), z(npf), z(npf, 2, dt=np.uint64)]
        err, at, _ = scan.walk(*args, True, self.off, self.func, self.mask, self.thread,
                               self.times, self.perfn, self.vals, *self.e, *self.s, *self.t, *self.p)
        self._check(err, at, rf, buf)
        self.buf = buf

    @staticmethod
    def _check(err, at, rf, buf):
        if err == scan.E_UNKNOWN:
            fid = (int(buf[at]) << 8) | int(buf[at + 1])
            raise TraceError.at_byte(rf.path, at, f"unknown DUMPI function id {fid} "
                                     f"(expected a call label 0-289, 291 or 292)")
        if err == scan.E_TRUNC:
            raise TraceError.at_byte(rf.path, at, f"call record runs past the end of the call "
                                     f"stream at byte {rf.stream_end} (truncated or corrupt)")

    def enter_leave(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(wall enter, wall leave, cpu enter, cpu leave) ns; wall falls back to cpu, then 0."""
        wall = (self.mask & 0x08) != 0
        cpu = (self.mask & 0x04) != 0
        t = self.times
        t_in = np.where(wall, t[:, 2], np.where(cpu, t[:, 0], 0))
        t_out = np.where(wall, t[:, 3], np.where(cpu, t[:, 1], 0))
        return t_in, t_out, np.where(cpu, t[:, 0], 0), np.where(cpu, t[:, 1], 0)


def _bytes(count, dtype, sizes: np.ndarray):
    """count x datatype size; the count itself when the size is unknown."""
    known = (dtype >= 0) & (dtype < len(sizes))
    sz = sizes[np.where(known, dtype, 0)] if len(sizes) else np.zeros(len(dtype), np.int64)
    return np.where(known, count * sz, count).astype(np.int64)


def _slot(fid: int, name: str) -> int:
    return [a[0] for a in FUNCTIONS[fid][2]].index(name)


def events(w: Walk, rank: int, sizes: np.ndarray) -> dict[str, np.ndarray]:
    """ENTER/LEAVE per call plus SEND, RECV and COLLECTIVE rows."""
    n = len(w.func)
    t_in, t_out, c_in, c_out = w.enter_leave()
    calls = np.arange(n)
    parts = [dict(call=calls, order=np.zeros(n, np.int8), kind=np.full(n, int(Kind.ENTER), np.uint8),
                  time=t_in, cpu_time=c_in),
             dict(call=calls, order=np.full(n, 3, np.int8), kind=np.full(n, int(Kind.LEAVE), np.uint8),
                  time=t_out, cpu_time=c_out)]
    stat_first = _first_status(w)

    def add(sel, kind, order, **cols):
        idx = calls[sel]
        at_in = order == 1
        parts.append(dict(call=idx, order=np.full(len(idx), order, np.int8),
                          kind=np.full(len(idx), int(kind), np.uint8), time=(t_in if at_in else t_out)[idx],
                          cpu_time=(c_in if at_in else c_out)[idx],
                          **{k: c(idx) if callable(c) else c[idx] for k, c in cols.items()}))

    v = w.vals
    # sends: (count, datatype, dest, tag, comm) slots by name, per function
    for fid, names in [(f, ("count", "datatype", "dest", "tag", "comm")) for f in SENDS] + [
            (33, ("sendcount", "sendtype", "dest", "sendtag", "comm")),
            (34, ("count", "datatype", "dest", "sendtag", "comm"))]:
        s = [_slot(fid, x) for x in names]
        sel = (w.func == fid) & (v[:, s[2]] >= 0)
        add(sel, Kind.SEND, 1, peer=v[:, s[2]], tag=v[:, s[3]], comm=v[:, s[4]],
            size=lambda i, s=s: _bytes(v[i, s[0]], v[i, s[1]], sizes))
    for fid, names in [(1, ("count", "datatype", "source", "tag", "comm", "status")),
                       (33, ("recvcount", "recvtype", "source", "recvtag", "comm", "status")),
                       (34, ("count", "datatype", "source", "recvtag", "comm", "status"))]:
        s = [_slot(fid, x) for x in names]
        has = (v[:, s[5]] >= 1) & (stat_first >= 0)
        st = w.t[3][np.where(has, stat_first, 0)] if len(w.t[3]) else np.zeros((n, 5), np.int64)
        peer = np.where(has, st[:, 1], v[:, s[2]])
        sel = (w.func == fid) & (peer >= 0)
        add(sel, Kind.RECV, 2, peer=peer, tag=np.where(has, st[:, 4], v[:, s[3]]),
            comm=v[:, s[4]], size=lambda i, s=s, has=has, st=st: np.where(
                has[i], st[i, 0], _bytes(v[i, s[0]], v[i, s[1]], sizes)))
    for fid in COLLECTIVES:
        sel = w.func == fid
        if not sel.any():
            continue
        names = [a[0] for a in FUNCTIONS[fid][2]]
        col = lambda x: v[sel, names.index(x)] if x in names else None   # noqa: E731
        m = int(sel.sum())
        sent = recv = np.zeros(m, np.int64)
        if col("count") is not None:
            sent = recv = _bytes(col("count"), col("datatype"), sizes)
        if col("sendcount") is not None:
            sent = _bytes(col("sendcount"), col("sendtype"), sizes)
        if col("recvcount") is not None:
            recv = _bytes(col("recvcount"), col("recvtype"), sizes)
        root = col("root") if col("root") is not None else np.full(m, -1)
        full = lambda a: (lambda i: a)                                  # noqa: E731
        add(sel, Kind.COLLECTIVE, 1, comm=full(col("comm")), root=full(root), size=full(sent),
            received=full(recv), collop=full(np.full(m, fid + 1)),
            duration=lambda i: t_out[i] - t_in[i])
    # place rows without a sort: per call ENTER, extras (by order), LEAVE
    extra = parts[2:]
    ecall = np.concatenate([p["call"] for p in extra]) if extra else np.zeros(0, np.int64)
    eorder = np.concatenate([p["order"] for p in extra]) if extra else np.zeros(0, np.int8)
    cnt = np.bincount(ecall, minlength=n)
    start = np.concatenate([[0], np.cumsum(2 + cnt)[:-1]]).astype(np.int64)
    srt = np.argsort(ecall * 4 + eorder, kind="stable")
    first = np.searchsorted(ecall[srt], ecall[srt])
    epos = np.empty(len(ecall), np.int64)
    epos[srt] = start[ecall[srt]] + 1 + (np.arange(len(srt)) - first)
    pos = [start, start + 1 + cnt, epos]
    total = 2 * n + len(ecall)
    out = {}
    for k in set().union(*parts) - {"order"}:
        fill = -1 if k in ("peer", "root") else 0     # -1 = none for rank-valued columns
        vals = [p[k] if k in p else np.full(len(p["call"]), fill) for p in parts]
        dst = np.full(total, fill, np.result_type(*vals))
        dst[pos[0]], dst[pos[1]] = vals[0], vals[1]
        if extra:
            dst[pos[2]] = np.concatenate(vals[2:])
        out[k] = dst
    out["region"] = w.func[out["call"]].astype(np.int64) + 1
    out["thread"] = w.thread[out["call"]]
    out["location"] = np.full(total, rank, np.int64)
    return out


def _first_status(w: Walk) -> np.ndarray:
    """Per call, the index of its first status row (-1 = none)."""
    first = np.full(len(w.func), -1, np.int64)
    tc = w.t[0]
    if len(tc):
        head = np.ones(len(tc), bool)
        head[1:] = (tc[1:] != tc[:-1]) | (w.t[1][1:] != w.t[1][:-1])
        first[tc[head][::-1]] = np.nonzero(head)[0][::-1]
    return first


def function_tables(w: Walk, rank: int, t_in: np.ndarray) -> dict[str, dict]:
    """One column dict per MPI function present."""
    out = {}
    order = np.argsort(w.func, kind="stable")
    fids, starts = np.unique(w.func[order], return_index=True)
    bounds = list(starts[1:]) + [len(order)]
    for fid, a, b in zip(fids, starts, bounds):
        idx = order[a:b]
        _id, name, args = FUNCTIONS[fid]
        cols = dict(time=t_in[idx], location=np.full(len(idx), rank, np.int64),
                    seq=np.arange(len(idx), dtype=np.int64), call=idx, thread=w.thread[idx])
        for k, (an, kind, _role, _cond) in enumerate(args):
            if kind in SCALAR_DTYPES:
                cols[an] = w.vals[idx, k].astype(SCALAR_DTYPES[kind])
            elif kind == "str":
                cols[an] = _strings_for(w, idx, k)
            elif kind == "argv":
                cols["argc"] = w.vals[idx, k].astype(np.int32)
            else:
                cols[f"{an}_count"] = w.vals[idx, k].astype(np.int32)
        out[table_name(name)] = cols
    return out


def _strings_for(w: Walk, idx: np.ndarray, slot: int) -> np.ndarray:
    """Inline single-string column (one string per call; '' when not recorded)."""
    res = np.full(len(idx), "", dtype=object)
    pos = np.full(len(w.func), -1, np.int64)
    sc, ss = w.s[0], w.s[1]
    sel = np.nonzero(ss == slot)[0]
    sel = sel[np.isin(sc[sel], idx)]
    pos[sc[sel]] = sel
    for j, c in enumerate(idx):         # rare: file names, info keys
        r = pos[c]
        if r >= 0:
            res[j] = _text(w, r)
    return res


def _text(w: Walk, r: int) -> str:
    st, ln = int(w.s[4][r]), int(w.s[5][r])
    return w.buf[st:st + ln].tobytes().decode("utf-8", "surrogateescape")


def side_tables(w: Walk, rank: int, t_in: np.ndarray) -> dict[str, dict]:
    """arrays, statuses, strings (multi-level only) and perf rows."""
    func = w.func
    names = {fid: [SIDE_ARG_ID.get(n, -1) for n, _k, _r, _c in a]
             for fid, _n, a in FUNCTIONS if a}
    lut = np.full((len(FUNCTIONS), max(map(len, names.values()))), -1, np.int16)
    for fid, ids in names.items():
        lut[fid, :len(ids)] = ids

    def head(call, slot):
        return dict(time=t_in[call], location=np.full(len(call), rank, np.int64),
                    seq=np.arange(len(call), dtype=np.int64), call=call,
                    region=func[call].astype(np.int64) + 1, arg=lut[func[call], slot])

    ec, es, e0, e1, ev = w.e
    tc, ts, t0, tv = w.t
    out = {"arrays": dict(head(ec, es), i0=e0, i1=e1, value=ev),
           "statuses": dict(head(tc, ts), index=t0, bytes=tv[:, 0], source=tv[:, 1],
                            cancelled=tv[:, 2], error=tv[:, 3], tag=tv[:, 4])}
    # single strings live inline in the function table; the rest (argv ...) here
    single = np.zeros(lut.shape, bool)
    for fid, _n, a in FUNCTIONS:
        for k, (_x, kd, _r, _c) in enumerate(a or ()):
            single[fid, k] = kd == "str"
    sc, ss = w.s[0], w.s[1]
    sel = np.nonzero(~single[func[sc], ss])[0]
    out["strings"] = dict(head(sc[sel], ss[sel]), i0=w.s[2][sel], i1=w.s[3][sel],
                          text=np.array([_text(w, r) for r in sel] + [None], object)[:-1])
    pc, pi, pv = w.p
    out["perf"] = dict(time=t_in[pc], location=np.full(len(pc), rank, np.int64),
                       seq=np.arange(len(pc), dtype=np.int64), call=pc, counter=pi,
                       entry=pv[:, 0], exit=pv[:, 1])
    return out


def decode_rank(path: Path, rank: int, schema: dict) -> Iterator[dict[str, Table]]:
    """All tables of one rank file, as one chunk."""
    rf = read_rank_file(path)                      # small records, read by seeking
    if rf.version < (0, 6, 9):
        # older writers had other layouts (Init argc twice, statuses without tag,
        # Type_struct / Cart_get arrays); the table holds the current ones only
        raise TraceError.at_byte(path, rf.index["header"], f"DUMPI version "
                                 f"{'.'.join(map(str, rf.version))} predates 0.6.9; not supported")
    w = Walk(np.memmap(path, np.uint8, mode="r"), rf)
    sizes = np.array(rf.datatype_sizes, np.int64)
    t_in = w.enter_leave()[0]
    ev = events(w, rank, sizes)
    ev["seq"] = np.arange(len(ev["time"]), dtype=np.int64)
    chunk = {"events": ev}
    chunk.update(function_tables(w, rank, t_in))
    chunk.update(side_tables(w, rank, t_in))
    for name in chunk:
        if name not in schema:
            fname = name.split("/", 1)[1]
            raise TraceError(path, None, f"{fname} records found, but the footers of all "
                             f"ranks count no recorded {fname} calls")
    yield {name: conform(Table(cols), schema[name]) for name, cols in chunk.items()}
