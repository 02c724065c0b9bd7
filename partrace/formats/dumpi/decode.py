"""Decode one rank file into tables, chunk by chunk (numba walk + numpy assembly)."""
from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import TraceError
from ...model import Table, conform
from .comms import CommMap
from .counters import location_counter_ids
from .events import chunk_events
from .functable import FUNCTIONS
from .layout import RankFile, read_rank_file
from .tables import SCALAR_DTYPES, SIDE_ARG_ID, table_name
from .walk import CHUNK_CALLS, Walk, locations, threads

def _first_status(w: Walk) -> np.ndarray:
    """Per call, the index of its first status row (-1 = none)."""
    first = np.full(len(w.func), -1, np.int64)
    tc = w.t[0]
    if len(tc):
        head = np.ones(len(tc), bool)
        head[1:] = (tc[1:] != tc[:-1]) | (w.t[1][1:] != w.t[1][:-1])
        first[tc[head][::-1]] = np.nonzero(head)[0][::-1]
    return first


def function_tables(w: Walk, rank: int, t_in: np.ndarray, want=None) -> dict[str, dict]:
    """One column dict per MPI function present (``want``: {table: columns, or None when
    not asked for}; no ``want``: all of them, whole)."""
    out = {}
    for fid in w.present():
        _id, name, args = FUNCTIONS[fid]
        cols_wanted = want.get(table_name(name)) if want is not None else None
        if want is not None and cols_wanted is None:
            continue
        keep = (lambda c: True) if cols_wanted is None else set(cols_wanted).__contains__
        idx = w.calls_of(fid)
        head = dict(time=lambda: t_in[idx], location=lambda: locations(rank, len(idx)),
                    call=lambda: idx,                             # seq: decode_rank's
                    thread=lambda: threads(w, len(idx), lambda t: t[idx]))
        cols = {k: f() for k, f in head.items() if keep(k) or k in ("time", "call")}
        for k, (an, kind, _role, _cond) in enumerate(args):
            if kind in SCALAR_DTYPES:
                if keep(an):
                    cols[an] = w.vals[k][idx].astype(SCALAR_DTYPES[kind], copy=False)
            elif kind == "str":
                if keep(an):
                    cols[an] = _strings_for(w, idx, k)
            elif kind == "argv":
                if keep("argc"):
                    cols["argc"] = w.vals[k][idx].astype(np.int32)
            elif keep(f"{an}_count"):
                cols[f"{an}_count"] = w.vals[k][idx].astype(np.int32)
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


SIDE_TABLES = ("arrays", "statuses", "strings", "perf")


def side_tables(w: Walk, rank: int, t_in: np.ndarray, want=None) -> dict[str, dict]:
    """arrays, statuses, strings (multi-level only) and perf rows (``want``: as in
    function_tables; a table not asked for is not made)."""
    func = w.func
    lut, single = _slot_tables()
    asked = SIDE_TABLES if want is None else [t for t in SIDE_TABLES if want.get(t) is not None]

    def head(call, slot):      # seq: decode_rank numbers the rows of the whole rank file
        return dict(time=t_in[call], location=locations(rank, len(call)), call=call,
                    region=func[call].astype(np.int32) + 1, arg=lut[func[call], slot])

    out = {}
    if "arrays" in asked:
        ec, es, e0, e1, ev = w.e
        out["arrays"] = dict(head(ec, es), i0=e0, i1=e1, value=ev)
    if "statuses" in asked:
        tc, ts, t0, nbytes, source, cancelled, error, tag = w.t
        out["statuses"] = dict(head(tc, ts), index=t0, bytes=nbytes, source=source,
                               cancelled=cancelled, error=error, tag=tag)
    if "strings" in asked:
        # single strings live inline in the function table; the rest (argv ...) here
        sc, ss = w.s[0], w.s[1]
        sel = np.nonzero(~single[func[sc], ss])[0]
        out["strings"] = dict(head(sc[sel], ss[sel]), i0=w.s[2][sel], i1=w.s[3][sel],
                              text=np.array([_text(w, r) for r in sel] + [None], object)[:-1])
    if "perf" in asked:
        pc, pi, entry, exit_ = w.p
        out["perf"] = dict(time=t_in[pc], location=locations(rank, len(pc)), call=pc,
                           counter=pi, entry=entry, exit=exit_)
    return out


@cache
def _slot_tables() -> tuple[np.ndarray, np.ndarray]:
    """Per (function, slot): the side tables' ``arg`` id (-1: none) and whether it is a
    single string (inline in the function's table), made once, not per chunk."""
    names = {fid: [SIDE_ARG_ID.get(n, -1) for n, _k, _r, _c in a]
             for fid, _n, a in FUNCTIONS if a}
    lut = np.full((len(FUNCTIONS), max(map(len, names.values()))), -1, np.int16)
    single = np.zeros(lut.shape, bool)
    for fid, _n, a in FUNCTIONS:
        for k, (name, kind, _r, _c) in enumerate(a or ()):
            lut[fid, k] = SIDE_ARG_ID.get(name, -1)
            single[fid, k] = kind == "str"
    return lut, single


def decode_rank(path: Path, rank: int, schema: dict, defs, chunk_calls: int | None = None,
                chunk_bytes: int | None = None,
                want: dict | None = None) -> Iterator[dict[str, Table]]:
    """All tables of one rank file, in chunks of at most ``chunk_calls`` calls (default:
    about ``chunk_bytes`` of the stream, at most CHUNK_CALLS).

    ``call`` and every table's ``seq`` continue across chunks; requests posted
    in one chunk and completed in a later one are carried by the tracker.
    ``want`` ({table: column names, or None = not asked for}; None = every table whole):
    only those tables and columns are made (TraceReader.selected).  Every call is walked
    and checked whatever is asked for, so errors do not depend on it.
    """
    from .requests import RequestTracker
    rf = read_rank_file(path)                      # small records, read by seeking
    location = rank + 1
    if not chunk_calls:
        recorded = rf.calls[290] - rf.ignored[290]          # footer totals: an estimate
        per_call = (rf.stream_end - rf.stream_start) / recorded if recorded > 0 else 40
        chunk_calls = int(min(CHUNK_CALLS, max(1024, (chunk_bytes or 32 << 20) // per_call)))
    buf = np.memmap(path, np.uint8, mode="r") if rf.size else np.zeros(0, np.uint8)
    sizes = np.array(rf.datatype_sizes, np.int64)
    columns = {t: [c for c in cols if want is None or c.name in want[t]]
               for t, cols in schema.items() if want is None or want.get(t) is not None}
    tracking = "events" in columns or "requests" in columns
    comms = CommMap(defs.tables, location) if "events" in columns else None
    counter_ids = location_counter_ids(defs.tables, location)
    tracker = RequestTracker() if tracking else None
    seq: dict[str, int] = {}
    pos, base = rf.stream_start, 0
    room = None
    while True:
        room = _room(rf, base, chunk_calls, room)
        w = Walk(buf, rf, pos, chunk_calls, room)
        room = (len(w.func), len(w.e[0]), len(w.s[0]), len(w.t[0]), len(w.p[0]))
        _check_recorded(w, schema, path)
        made = [_chunk_tables(w, base, location, sizes, comms, tracker, columns, want, seq,
                              counter_ids)]
        pos, base = w.end, base + len(w.func)
        # the walk's arrays (per-call slots, times) are not held while the chunk is used:
        # its tables keep only what they show (views of the side arrays), and neither this
        # frame nor the list keeps the tables once they are handed over
        del w
        yield made.pop()
        if pos >= rf.stream_end:
            return


def _chunk_tables(w: Walk, base: int, location: int, sizes, comms, tracker, columns: dict,
                  want: dict | None, seq: dict[str, int],
                  counter_ids: np.ndarray) -> dict[str, Table]:
    """The tables of one walked chunk (``columns``: those asked for, by table); ``seq``
    (rows per table so far) is advanced.  Its temporaries end with the call."""
    ev_want = None if want is None else want.get("events")
    tracking = tracker is not None
    t_in = w.enter_leave()[0]
    chunk, rows = {}, {}
    if tracking:
        status_first = _first_status(w)
        done, post, starts = tracker.chunk(w, base, status_first)
    if "events" in columns:
        chunk["events"], rows["events"] = chunk_events(
            w, base, location, sizes, comms, done, post, starts, status_first, ev_want,
            counter_ids)
    chunk.update(function_tables(w, location, t_in, want))
    chunk.update(side_tables(w, location, t_in, want))
    if "requests" in columns:
        chunk["requests"] = _requests(w, base, location, done, post)
    for name, cols in chunk.items():
        n = rows[name] if name in rows else len(cols["time"])
        if want is None or "seq" in want[name]:
            cols["seq"] = np.arange(seq.get(name, 0), seq.get(name, 0) + n, dtype=np.int64)
        seq[name] = seq.get(name, 0) + n
        if name != "events":                  # events made theirs global already
            cols["call"] = cols["call"] + base
    return {name: conform(Table({c.name: cols[c.name] for c in columns[name]
                                 if c.name in cols} if want is not None else cols),
                          columns[name]) for name, cols in chunk.items()}


def _room(rf: RankFile, base: int, limit: int, last: tuple | None) -> tuple[int, ...]:
    """Room to walk the next chunk in one pass (Walk grows what runs full): calls, the
    footer's count of what is left (a little more), at most ``limit``; side arrays, as
    many per call as the last chunk had, a quarter more, or guesses for the first."""
    left = rf.calls[290] - rf.ignored[290] - base + 1024
    nc = int(min(limit, max(left, 1024)))
    if last is None or not last[0]:
        return (nc, nc // 2 + 64, 64, nc // 2 + 64, 64)
    return (nc, *(int(x * nc * 5 // (4 * last[0])) + 64 for x in last[1:]))


def _check_recorded(w: Walk, schema: dict, path: Path) -> None:
    """A function whose calls are in the stream has a table: the survey walked every
    stream and found them (a rank file changed since the survey breaks this)."""
    for fid in w.present():
        fname = FUNCTIONS[fid][1]
        if table_name(fname) not in schema:
            raise TraceError(path, None, f"{fname} records found, but the survey of the "
                             f"rank files found none (changed since it was read?)")


def _requests(w: Walk, base: int, location: int, done: dict, post: dict) -> dict:
    """One row per completed request element, linked to its post (global post/init calls;
    ``call`` still chunk-local here)."""
    t_out = w.enter_leave()[1]
    c = done["call"]
    return dict(time=t_out[c], location=locations(location, len(c)), call=c,
                region=w.func[c].astype(np.int32) + 1, index=done["elem"],
                request=done["req"], post_call=post["call"],
                post_region=np.where(post["call"] >= 0, post["fid"] + 1, 0),
                init_call=post["init"],
                receive=post["recv"].astype(np.uint8))
