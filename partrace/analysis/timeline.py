"""The rows of a time window, gathered on rank 0 for a timeline picture: region visits
(enter..leave, with their nesting depth) and messages (a send joined to its receive).

Visits cut by the window's edges are drawn to the edge: the regions open when the
window starts are found by walking each location's earlier enter/leave rows on the
rank that owns the location (only its stack is kept).  A send is joined to a
receive by order: the k-th message from S to R with tag T is the k-th receive on
R from S with tag T (MPI's non-overtaking rule), within the window.
"""
from __future__ import annotations

import numpy as np

from ..kernels.jit import njit   # lazy: numba only for inputs that are not small
from ..engine.mpi import Comm
from ..engine.sink import Sink
from ..errors import UsageError
from ..model import Definitions, Kind, Schema, Table

MAX_ROWS = 2_000_000
COLUMNS = ("time", "location", "seq", "kind", "region", "peer", "tag")


@njit(cache=True)
def _visits(loc, time, kind, region, t0, t1, nloc):    # pragma: no cover - compiled
    """(location index, start, end, region, depth) of every visit, rows in order per location."""
    n = len(loc)
    out_loc = np.empty(n, np.int64)
    out_start = np.empty(n, np.int64)
    out_end = np.empty(n, np.int64)
    out_reg = np.empty(n, np.int64)
    out_depth = np.empty(n, np.int64)
    cap = 64
    st_reg = np.zeros((nloc, cap), np.int64)
    st_t = np.zeros((nloc, cap), np.int64)
    depth = np.zeros(nloc, np.int64)
    m = 0
    for i in range(n):
        l = loc[i]
        if kind[i] == 1:
            d = depth[l]
            if d < cap:
                st_reg[l, d] = region[i]
                st_t[l, d] = time[i]
            depth[l] = d + 1
        elif kind[i] == 2:
            d = depth[l]
            if d == 0:          # entered before the window
                out_loc[m], out_start[m], out_end[m], out_reg[m], out_depth[m] = l, t0, time[i], region[i], 0
                m += 1
                continue
            d -= 1
            depth[l] = d
            if d < cap:
                out_loc[m], out_start[m], out_end[m], out_reg[m], out_depth[m] = l, st_t[l, d], time[i], st_reg[l, d], d
                m += 1
    for l in range(nloc):       # still open at the window's end
        for d in range(min(depth[l], cap)):
            if m == n:
                break
            out_loc[m], out_start[m], out_end[m], out_reg[m], out_depth[m] = l, st_t[l, d], t1, st_reg[l, d], d
            m += 1
    return out_loc[:m], out_start[:m], out_end[:m], out_reg[:m], out_depth[:m]


@njit(cache=True)
def _open_stacks(loc, kind, region, time, depth, st_reg, st_t):    # pragma: no cover - compiled
    """Push/pop only: the regions open on each location after these rows.  Returns the
    number of rows done (less than all when a stack needs more room)."""
    cap = st_reg.shape[1]
    for i in range(len(loc)):
        l = loc[i]
        if kind[i] == 1:
            d = depth[l]
            if d == cap:
                return i
            st_reg[l, d] = region[i]
            st_t[l, d] = time[i]
            depth[l] = d + 1
        elif kind[i] == 2 and depth[l] > 0:
            depth[l] -= 1
    return len(loc)


class CollectSink(Sink):
    """The rows of the window [t0, t1), gathered on rank 0, and for each location the
    regions already open at t0 (walked on the rank that owns the location from the
    enter/leave rows before t0, which are not kept)."""

    mode = "destination"
    windows = True

    def __init__(self, time=None, shown_time=None):
        # shown_time: the window in the trace's own time unit, made keys once it is known
        self.shown_time = shown_time
        self.t0, self.t1 = time if time is not None else (-(1 << 63), (1 << 63) - 1)
        self.parts: list[Table] = []
        self.rows = 0

    needs = {"events": COLUMNS}

    def select(self, name, table):
        k, t = np.asarray(table["kind"]), np.asarray(table["time"])
        stack = (k == Kind.ENTER) | (k == Kind.LEAVE)
        message = (k == Kind.SEND) | (k == Kind.RECV)
        return (t < self.t1) & (stack | (message & (t >= self.t0)))

    def start(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        """The window as keys: select needs it while decoding."""
        if self.shown_time is not None:
            from ..timeunit import of
            self.t0, self.t1 = of(defs.attrs).keys(self.shown_time)

    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        self.start(comm, defs, schema)
        self.defs, self.schema = defs, schema
        self.loc_ids = np.sort(np.asarray(defs.tables["locations"]["id"], np.int64))
        self.my_locs = self.loc_ids[comm.rank::comm.size]
        n = len(self.my_locs)
        self.depth = np.zeros(n, np.int64)
        self.st_reg = np.zeros((n, 16), np.int64)
        self.st_t = np.zeros((n, 16), np.int64)

    def destinations(self, comm: Comm, name: str, table: Table) -> np.ndarray:
        return (np.searchsorted(self.loc_ids, np.asarray(table["location"])) % comm.size).astype(np.int64)

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        with comm.guard():
            ev = tables["events"]
            t = np.asarray(ev["time"])
            before = int(np.searchsorted(t, self.t0))      # rows are in time order
            if before:
                self._walk(ev, before)
            if before < len(ev):
                self.rows += len(ev) - before
                if self.rows > MAX_ROWS:
                    raise UsageError(f"more than {MAX_ROWS:,} events to draw: choose a shorter "
                                     f"--time window")
                self.parts.append(Table({c: np.asarray(ev[c])[before:] for c in ev.names}))
        comm.check()

    def _walk(self, ev: Table, n: int) -> None:
        loc = np.searchsorted(self.my_locs, np.asarray(ev["location"])[:n])
        order = np.argsort(loc, kind="stable")
        loc = loc[order]
        kind, region, time = (np.asarray(ev[c])[:n][order] for c in ("kind", "region", "time"))
        done = 0
        while done < n:
            done += _open_stacks(loc[done:], kind[done:], region[done:], time[done:],
                                 self.depth, self.st_reg, self.st_t)
            if done < n:
                self.st_reg, self.st_t = (np.concatenate([a, np.zeros_like(a)], axis=1)
                                          for a in (self.st_reg, self.st_t))

    def commit(self, comm: Comm) -> None:
        # the regions open at t0 as ENTER rows at their own (earlier) times
        li, d = np.nonzero(np.arange(self.st_reg.shape[1])[None, :] < self.depth[:, None])
        cols = [c.name for c in self.schema["events"]]
        opened = Table({c: np.zeros(len(li), np.int64) for c in cols})
        opened.columns.update(time=self.st_t[li, d], location=self.my_locs[li], seq=d - 1_000_000,
                              kind=np.full(len(li), Kind.ENTER, np.uint8), region=self.st_reg[li, d])
        mine = Table.concat([opened] + self.parts, self.schema["events"])
        everyone = comm.gather(mine)
        if comm.rank == 0:
            self.parts = everyone

    def discard(self, comm: Comm) -> None:
        pass


def timeline_data(comm: Comm, path, *, format=None, time=None, memory=None, tmpdir=None,
                  reader_options: dict | None = None, shown_time=None) -> dict | None:
    """The window ``time`` (time-column values) or ``shown_time`` (in the trace's own unit,
    as ``info`` shows it; None for an open end) on rank 0: visits, messages, names."""
    from ..engine.pipeline import DEFAULT_MEMORY, run
    sink = CollectSink(time, shown_time)
    run(comm, path, sink, format=format, memory=memory or DEFAULT_MEMORY, spill_dir=tmpdir,
        reader_options=reader_options)
    if comm.rank != 0:
        return None
    defs = sink.defs
    ev = Table.concat(sink.parts, sink.schema["events"])
    if not len(ev):
        raise UsageError("no events in this window")
    if shown_time is not None:
        time = (sink.t0, sink.t1)
    return assemble(ev, defs, time)


def assemble(ev: Table, defs: Definitions, time=None) -> dict:
    locs = defs.tables["locations"]
    loc_ids = np.sort(np.asarray(locs["id"], np.int64))
    t = np.asarray(ev["time"])
    inside = t[t >= (time[0] if time is not None else t.min())]
    t0 = int(inside.min()) if time is None or time[0] <= -(1 << 62) else int(time[0])
    t1 = int(t.max()) if time is None or time[1] >= (1 << 62) else int(time[1])
    li = np.searchsorted(loc_ids, np.asarray(ev["location"]))
    order = np.lexsort((np.asarray(ev["seq"]), t, li))
    vl, vs, ve, vr, vd = _visits(li[order], t[order], np.asarray(ev["kind"])[order],
                                 np.asarray(ev["region"])[order], t0, t1, len(loc_ids))
    # regions entered before the window are drawn from its start
    intervals = {"location": loc_ids[vl], "start": np.maximum(vs, t0), "end": ve, "region": vr,
                 "depth": vd}
    messages = _messages(ev)
    names = {int(i): str(n) for i, n in zip(locs["id"], locs["name"])}
    regs = defs.tables["regions"]
    used = np.unique(np.concatenate([np.asarray(ev["location"]), messages["sender"], messages["receiver"]]))
    from ..timeunit import of
    return {"t0": t0, "t1": max(t1, t0 + 1), "intervals": intervals, "messages": messages,
            "time_unit": of(defs.attrs),
            "location_ids": used[np.isin(used, loc_ids)], "location_names": names,
            "region_names": {int(i): str(n) for i, n in zip(regs["id"], regs["name"])}}


def _messages(ev: Table) -> dict:
    kind = np.asarray(ev["kind"])
    peer = np.asarray(ev["peer"]) if "peer" in ev.names else np.zeros(len(ev), np.int64)
    tag = np.asarray(ev["tag"]) if "tag" in ev.names else np.zeros(len(ev), np.int64)
    loc, t, seq = np.asarray(ev["location"]), np.asarray(ev["time"]), np.asarray(ev["seq"])
    s = np.flatnonzero((kind == Kind.SEND) & (peer != 0))
    r = np.flatnonzero((kind == Kind.RECV) & (peer != 0))
    # key (sender, receiver, tag); k-th of each key on both sides
    ks = np.stack([loc[s], peer[s], tag[s]], axis=1)
    kr = np.stack([peer[r], loc[r], tag[r]], axis=1)
    s = s[np.lexsort((seq[s], t[s], ks[:, 2], ks[:, 1], ks[:, 0]))]
    r = r[np.lexsort((seq[r], t[r], kr[:, 2], kr[:, 1], kr[:, 0]))]
    ks = np.stack([loc[s], peer[s], tag[s]], axis=1)
    kr = np.stack([peer[r], loc[r], tag[r]], axis=1)

    def rank_within(keys):
        if not len(keys):
            return np.zeros(0, np.int64)
        new = np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)]
        start = np.maximum.accumulate(np.where(new, np.arange(len(keys)), 0))
        return np.arange(len(keys)) - start
    fs = np.concatenate([ks, rank_within(ks)[:, None]], axis=1)
    fr = np.concatenate([kr, rank_within(kr)[:, None]], axis=1)
    if not len(fs) or not len(fr):
        z = np.zeros(0, np.int64)
        return {"sender": z, "receiver": z, "send_time": z, "recv_time": z}
    # join the two sorted lists of (sender, receiver, tag, k)
    both = np.concatenate([fs, fr])
    side = np.r_[np.zeros(len(fs), np.int8), np.ones(len(fr), np.int8)]
    idx = np.r_[s, r]
    o = np.lexsort((side, both[:, 3], both[:, 2], both[:, 1], both[:, 0]))
    both, side, idx = both[o], side[o], idx[o]
    pair = (side[:-1] == 0) & (side[1:] == 1) & (both[:-1] == both[1:]).all(axis=1)
    si, ri = idx[:-1][pair], idx[1:][pair]
    return {"sender": loc[si], "receiver": loc[ri], "send_time": t[si], "recv_time": t[ri]}
