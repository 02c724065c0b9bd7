"""Writing merged rows as an OTF2 archive (NAME.otf2 anchor file, NAME.def global
definitions, NAME/<location>.evt event files), read by Vampir, Scalasca, Pipit, otf2-print.

What is written (formats/otf2/definitions.py says how definitions map):
- ENTER/LEAVE of a defined region as Enter/Leave; a LEAVE that names no defined region
  (OTF's function 0: "leave the innermost open region") as a Leave of its location's
  innermost open region (profile's rule), from a stack of open regions per location kept
  across windows by the rank that writes the location; with none open it is not written
  (one warning says how many);
- SEND/RECV with a defined peer as MpiSend/MpiRecv (peer as its rank in the
  communicator, tag as 32 bits, size);
- COLLECTIVE_BEGIN/END as MpiCollectiveBegin/End, a COLLECTIVE record as both at its
  time (operation, communicator, root's rank, bytes sent and received);
- COUNTER events of a defined counter, and every row of a sample table (ROSS
  engine and model samples), as Metric records: the counters of a group sampled at one
  time on one location as one record of the group's class (definitions.py); at one time
  on a location, Metric records come before the other records (Score-P's order: a
  synchronous metric before the event it goes with); those that do not stand before a
  record of their time, or are not of the synchronous class, go to the location's metric
  location.
Every other row (other event kinds, OTF's snapshots, statistics, markers,
key-values and comments, DUMPI's argument tables, ovni's raw events and jumbo
payloads) is not written: OTF2 has no record for most of them, or this sink does
not map them yet (docs/outputs.md, "OTF2").

Layout, identical whatever the rank count: a location's rows go to a fixed owner
(contiguous blocks of locations in id order).  The library holds an event chunk (256 KiB)
per open location writer, so the owner does not keep a writer open per location for the
whole run (a ROSS run has a location per LP): each window's records, grouped by location
in (time, seq, table) order, are appended to two spill files (fixed-size records, and the
metric values), with where each location's run starts.  At commit the owner reads them
back, a group of locations at a time (at most a share of --memory; a busy location's runs
window by window in slices), and hands them to the library's event writer of each
location in turn, opened for it and closed after it (a numba loop calling the C
functions: no Python per row), so one writer is open at a time.  Each rank writes its
locations' event files in an archive of its own under the staging folder; then rank 0
writes the anchor file and the global definitions (with each location's record count)
and every rank moves its event files into the archive's folder.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
from ..errors import PartraceError
from ..model import Definitions, Kind, Schema, Table, counter_values
from .otf2_archive import CREATOR, OTF2ArchiveSink
from .owned import EVENTS

# a record as spilled until commit (its metric values go to a file of their own)
SPILLED = np.dtype([("time", "<i8"), ("ref", "<u4"), ("rank", "<u4"), ("tag", "<u4"),
                    ("size", "<u8"), ("received", "<u8"), ("op", "u1"), ("collop", "u1")])
PIECE_SHARE = 16            # records read back at once: at most this fraction of --memory
SPILL_ROWS = 1 << 20        # records copied into spill form at once
DEFAULT_MEMORY = 2 << 30    # when no budget is given (the CLI's default)
MIN_PIECE = 64 << 10
STACK_DEPTH = 8             # open regions per location at first (doubled when a stack is full)


class OTF2Sink(OTF2ArchiveSink):
    """OTF2 output of any input.  An OTF2 input (its definitions OTF2's own) is written
    back as it is by OTF2ReplaySink (otf2_replay_sink.py), which this sink becomes at
    prepare: only the definitions tell, and they come after the sink is made."""
    wants_next_keys = True      # OTF2 input's replay holds rows a window cut splits

    def __init__(self, path, overwrite: bool = False):
        super().__init__(path, overwrite)
        self.spill_rows = self.spill_values = None
        self.depth = self.stack = None      # open regions per location, made on first use

    # -- definitions ---------------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        from ..formats.otf2.sourcedefs import is_own_source
        if is_own_source(defs):     # the same on every rank: the definitions are
            from .otf2_replay_sink import OTF2ReplaySink
            self.__class__ = OTF2ReplaySink
            self.prepare(comm, defs, schema)
            return
        super().prepare(comm, defs, schema)
        L = self.layout
        # spilled records: per location the bytes of its records and values (all windows)
        self.loc_bytes = np.zeros(len(self.mine), np.int64)
        self.spilled: list[tuple] = []      # per window: (rows at, values at, locations, ends)
        # metric value types, 256 bytes a class (OTF2_Type codes)
        self.types = np.zeros((max(len(L.metrics), 1), 256), np.uint8)
        for m, members in enumerate(L.metrics):
            self.types[m, :len(members)] = [typ for _, _, typ, _ in members]
        self.nvalues = np.asarray([len(m) for m in L.metrics] or [0], np.uint8)
        # per class: the group class a class of one member joins (-1: none), at which place
        self.join_group = np.full(max(len(L.metrics), 1), -1, np.int64)
        self.join_place = np.zeros(max(len(L.metrics), 1), np.int64)
        multi = L.counter_single != L.counter_class
        self.join_group[L.counter_single[multi]] = L.counter_class[multi]
        self.join_place[L.counter_single[multi]] = L.counter_member[multi]
        self.width = max([len(m) for m in L.metrics] or [1])

    def open_writers(self, folder: Path) -> None:
        """The spill files of this rank's records, and the locations whose local
        definition files the archive makes at close (their event writers are opened and
        closed by the commit's loop, one location at a time)."""
        self.archive.locations = self._writer_ids().tolist()
        self.spill_rows = open(folder / "records.spill", "w+b")
        self.spill_values = open(folder / "values.spill", "w+b")

    # -- windows --------------------------------------------------------------
    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        with comm.guard():
            parts = []
            ev = tables.get(EVENTS)
            if ev is not None and len(ev):
                parts.append(self._events(ev))
            for k, (name, cols, ref) in enumerate(self.layout.sample_tables):
                t = tables.get(name)
                if t is not None and len(t):
                    parts.append(self._samples(t, name, cols, ref, 1 + k))
            if parts:
                self._write(parts)
        comm.check()

    def _events(self, ev: Table) -> dict:
        """Each event row's record (op NONE: not written) and its fields."""
        from ..formats.otf2 import events as E
        from ..formats.otf2.definitions import UNDEFINED_U32
        L = self.layout
        n = len(ev)
        li = self._index(np.asarray(ev["location"]), EVENTS)
        kind = np.asarray(ev["kind"]).astype(np.int64)
        zeros = np.zeros(n, np.int64)
        col = lambda c: np.asarray(ev[c]).astype(np.int64) if c in ev else zeros  # noqa: E731
        op = np.zeros(n, np.uint8)
        ref = np.zeros(n, np.int64)
        region = col("region")
        r, known = L.lookup(L.reg_ids, region)
        for k, o in ((Kind.ENTER, E.ENTER), (Kind.LEAVE, E.LEAVE)):
            hit = (kind == k) & known
            op[hit] = o
            ref[hit] = r[hit]
        if ((kind == Kind.ENTER) | (kind == Kind.LEAVE)).any():
            self._close_innermost(li - self.first_mine, kind, r, known, op, ref)
        rank = np.zeros(n, np.int64)
        collop = np.zeros(n, np.uint8)
        col_at = lambda c, rows: np.asarray(ev[c])[rows].astype(np.int64) if c in ev \
            else np.zeros(len(rows), np.int64)  # noqa: E731
        # messages and collectives (their rows only): the communicator is a defined one with
        # members, else every location (ref 0); peer and root as ranks in it
        rows = np.flatnonzero((kind >= Kind.SEND) & (kind <= Kind.COLLECTIVE_END)
                              & (kind != Kind.COUNTER))
        if len(rows):
            k = kind[rows]
            c, cknown = L.lookup(L.comm_ids, col_at("comm", rows))
            cref = np.where(cknown, 1 + c, 0)
            peer_i, peer_ok = L.location_index(col_at("peer", rows))
            prank, member = L.ranks(cref, peer_i)
            msg = peer_ok & ((k == Kind.SEND) | (k == Kind.RECV))
            cref = np.where(msg & ~member, 0, cref)     # a peer outside it: on every location's
            prank = np.where(member, prank, peer_i)
            root_i, root_ok = L.location_index(col_at("root", rows))
            root, root_member = L.ranks(cref, root_i)
            # no root: OTF2_UNDEFINED_UINT32
            root = np.where(root_ok & root_member, root, UNDEFINED_U32)
            coll = k >= Kind.COLLECTIVE
            ops = np.select([msg & (k == Kind.SEND), msg & (k == Kind.RECV),
                             k == Kind.COLLECTIVE_BEGIN, k == Kind.COLLECTIVE_END,
                             k == Kind.COLLECTIVE],
                            [E.SEND, E.RECV, E.COLL_BEGIN, E.COLL_END, E.COLLECTIVE], E.NONE)
            op[rows] = ops
            ref[rows] = cref
            rank[rows] = np.where(coll, root, prank)
            ci, cok = L.lookup(L.coll_ids, col_at("collop", rows))
            collop[rows] = np.where(cok & coll, L.coll_ops[ci] if len(L.coll_ops) else 0, 0)
        values = self._counters(ev, kind, li, op, ref)
        return dict(loc=li, time=np.asarray(ev["time"], dtype=np.int64), seq=col("seq"),
                    table=np.zeros(n, np.int64), op=op, ref=ref, rank=rank,
                    tag=col("tag") & 0xFFFFFFFF, size=np.asarray(ev["size"]).astype(np.uint64)
                    if "size" in ev else np.zeros(n, np.uint64),
                    received=np.asarray(ev["received"]).astype(np.uint64) if "received" in ev
                    else np.zeros(n, np.uint64), collop=collop, values=values)

    def _close_innermost(self, loc, kind, region, known, op, ref) -> None:
        """LEAVE rows of no defined region as Leaves of the innermost open region of their
        location (events.close_innermost; ``op``, ``ref`` set in place); the stacks of open
        regions of this rank's locations carry over to the next window."""
        from ..formats.otf2.events import close_innermost
        if self.stack is None:
            self.depth = np.zeros(len(self.mine), np.int64)
            self.stack = np.zeros((len(self.mine), STACK_DEPTH), np.int32)
        at = 0
        while True:
            at, lost = close_innermost(loc, kind, region, known, op, ref, self.depth,
                                       self.stack, at)
            self.lost += lost
            if at == len(loc):
                return
            grown = np.zeros((len(self.mine), 2 * self.stack.shape[1]), np.int32)
            grown[:, :self.stack.shape[1]] = self.stack
            self.stack = grown

    def _counters(self, ev: Table, kind, li, op, ref) -> np.ndarray:
        """COUNTER events of defined counters as Metric records of their counter's class of
        one member (``op``, ``ref`` set in place); the drain joins a group's sample into one
        record (``_joined``).  Returns the records' values."""
        from ..formats.otf2 import events as E
        L = self.layout
        values = np.zeros((len(kind), 1), np.uint64)
        rows = np.flatnonzero(kind == Kind.COUNTER)
        if not len(rows) or not len(L.counter_ids) or "counter" not in ev:
            return values
        ci, ok = L.lookup(L.counter_ids, np.asarray(ev["counter"])[rows].astype(np.int64))
        rows, ci = rows[ok], ci[ok]
        bits = np.asarray(ev["value"])[rows].astype(np.uint64) if "value" in ev \
            else np.zeros(len(rows), np.uint64)
        f32 = L.counter_float32[ci]         # OTF2 has no float: as doubles
        bits[f32] = counter_values(bits[f32], "float32").view(np.uint64)
        op[rows] = E.METRIC
        ref[rows] = L.counter_single[ci]
        values[rows, 0] = bits
        return values

    def _joined(self, rec, vals, loc, order):
        """The records with each whole sample of a counter group (its members' records of
        one member, at one time on one location, each member once) joined into one record
        of the group's class at its first member's place; the others' op set to NONE and
        left out of ``order``.  Done on read-back, where a location's records of one time
        are together whatever the windows were."""
        from ..formats.otf2 import events as E
        group, place = self.join_group, self.join_place
        op, ref = rec["op"], rec["ref"].astype(np.int64)
        nv = self._nvalues(rec)
        cand = np.flatnonzero(op == E.METRIC)
        cand = cand[group[ref[cand]] >= 0]
        if not len(cand):
            return rec, vals, order
        at = np.empty(len(rec), np.int64)
        at[order] = np.arange(len(order))               # each row's place in the stream
        g, p = group[ref[cand]], place[ref[cand]]
        o = np.lexsort((at[cand], p, g, rec["time"][cand], loc[cand]))
        cand, g, p = cand[o], g[o], p[o]
        key = np.stack([loc[cand], rec["time"][cand], g])
        start = np.r_[0, np.flatnonzero((key[:, 1:] != key[:, :-1]).any(axis=0)) + 1]
        length = np.diff(np.r_[start, len(cand)])
        run = np.repeat(np.arange(len(start)), length)
        whole = (length == self.nvalues[g[start]]) & np.logical_and.reduceat(
            p == np.arange(len(cand)) - start[run], start)
        if not whole.any():
            return rec, vals, order
        w = whole[run]
        # a whole run's record: the member first in the stream
        head_at = np.minimum.reduceat(at[cand], start)[whole]
        head = order[head_at]
        old_off = np.cumsum(nv) - nv
        member_vals = vals[old_off[cand[w]]]
        rec = rec.copy()
        rec["op"][cand[w]] = E.NONE
        rec["op"][head] = E.METRIC
        rec["ref"][head] = g[start[whole]]
        new_nv = self._nvalues(rec)
        new_off = np.cumsum(new_nv) - new_nv
        out = np.zeros(int(new_nv.sum()), np.uint64)
        kept = np.flatnonzero((rec["op"] != E.NONE) & ~np.isin(np.arange(len(rec)), head))
        k = np.repeat(kept, nv[kept])
        j = np.arange(len(k)) - np.repeat(np.cumsum(nv[kept]) - nv[kept], nv[kept])
        out[new_off[k] + j] = vals[old_off[k] + j]
        out[np.repeat(new_off[head], length[whole]) + p[w]] = member_vals
        return rec, out, order[rec["op"][order] != E.NONE]

    def _samples(self, t: Table, name: str, cols: list, ref: int, table: int) -> dict:
        """Every row of a sample table: one Metric record of all its measured columns."""
        from ..formats.otf2 import events as E
        n = len(t)
        values = np.empty((n, len(cols)), np.uint64)
        for j, c in enumerate(cols):
            v = np.asarray(t[c])
            # the value's 8 bytes: a double's, or an integer's (two's complement)
            values[:, j] = (v.astype(np.float64) if v.dtype.kind == "f"
                            else v.astype(np.int64)).view(np.uint64)
        zeros = np.zeros(n, np.int64)
        return dict(loc=self._index(np.asarray(t["location"]), name),
                    time=np.asarray(t["time"], dtype=np.int64),
                    seq=np.asarray(t["seq"], dtype=np.int64), table=np.full(n, table, np.int64),
                    op=np.full(n, E.METRIC, np.uint8), ref=np.full(n, ref, np.int64), rank=zeros,
                    tag=zeros, size=zeros.view(np.uint64), received=zeros.view(np.uint64),
                    collop=np.zeros(n, np.uint8), values=values)

    def _write(self, parts: list[dict]) -> None:
        from ..formats.otf2 import events as E
        if len(parts) == 1:         # one table's rows come in key order: each location's in order
            cat, values = parts[0], np.ascontiguousarray(parts[0]["values"])
            order = np.arange(len(cat["time"]))
        else:
            cat = {k: np.concatenate([p[k] for p in parts]) for k in parts[0] if k != "values"}
            # the values of metric rows, one row of the widest class each
            values = np.zeros((len(cat["time"]), self.width), np.uint64)
            at = 0
            for p in parts:
                v = p["values"]
                values[at:at + len(v), :v.shape[1]] = v
                at += len(v)
            # a location's rows of several tables in (time, seq, table) order: the order any
            # window cut keeps (the engine cuts every table at the same (time, location, seq))
            order = np.lexsort((cat["table"], cat["seq"], cat["loc"], cat["time"]))
        written = cat["op"] != E.NONE
        if not written.any():
            return
        tm = cat["time"][written]
        if tm.min() < 0:
            bad = np.flatnonzero(written & (cat["time"] < 0))[0]
            raise PartraceError(f"location {int(self.layout.loc_ids[cat['loc'][bad]])}: time "
                                f"{int(cat['time'][bad])} ns is before 0, which OTF2's unsigned "
                                "timestamps cannot hold")
        self.span = [min(self.span[0], int(tm.min())), max(self.span[1], int(tm.max()))]
        self._spill(cat, order[written[order]], values)

    def _spill(self, cat: dict, rows: np.ndarray, values: np.ndarray) -> None:
        """Append a window's records (``rows``, in order) grouped by location to the spill
        files and note where each location's run is; the library writes them at commit."""
        from ..formats.otf2 import events as E
        loc = cat["loc"][rows] - self.first_mine
        g = rows[np.argsort(loc, kind="stable")]       # by location, in order within
        loc = cat["loc"][g] - self.first_mine
        nv = np.zeros(len(g), np.int64)
        metric = cat["op"][g] == E.METRIC
        nv[metric] = self.nvalues[cat["ref"][g][metric]]
        locs, first = np.unique(loc, return_index=True)
        ends = np.stack([np.r_[0, np.cumsum(np.diff(np.r_[first, len(g)]))],
                         np.r_[0, np.cumsum(np.add.reduceat(nv, first))]], axis=1)
        self.loc_bytes[locs] += np.diff(ends[:, 0]) * SPILLED.itemsize + np.diff(ends[:, 1]) * 8
        self.spilled.append((self.spill_rows.tell(), self.spill_values.tell(), locs, ends))
        for a in range(0, len(g), SPILL_ROWS):      # in slices: a copy of a slice at a time
            part = g[a:a + SPILL_ROWS]
            rec = np.empty(len(part), SPILLED)
            for f in SPILLED.names:
                rec[f] = cat[f][part]
            v = values[part]
            self.spill_rows.write(rec.tobytes())
            self.spill_values.write(v[np.arange(v.shape[1]) < nv[a:a + SPILL_ROWS, None]]
                                    .astype(np.uint64).tobytes())      # row by row

    def _drain(self) -> None:
        """Every location's records through the library, location after location, one event
        writer open at a time, in pieces of at most a share of --memory (groups of whole
        locations, or a busy location's runs cut by window and by rows)."""
        budget = max((self.memory or DEFAULT_MEMORY) // PIECE_SHARE, MIN_PIECE)
        self.state = np.array([-1, 0], np.int64)     # no location's writer open yet
        self.my_ids = self._writer_ids()
        n = len(self.mine)
        total = np.cumsum(self.loc_bytes)
        a = 0
        while a < n:
            before = int(total[a - 1]) if a else 0
            b = max(a + 1, int(np.searchsorted(total, before + budget, "right")))
            if b > a + 1 or self.loc_bytes[a] <= budget:
                self._drain_group(a, b)
            else:
                self._drain_one(a, budget)
            a = b
        self._emit(np.empty(0, SPILLED), np.empty(0, np.uint64), np.empty(0, np.int64),
                   np.empty(0, np.int64), n * self.stride)

    def _bounds(self, w: int, a: int, b: int):
        """(first row, first value), (end row, end value) of locations [a, b) in window w's
        spill, the locations there and their rows' bounds."""
        _, _, locs, ends = self.spilled[w]
        j0, j1 = np.searchsorted(locs, [a, b])
        return ends[j0], ends[j1], locs[j0:j1], ends[j0:j1 + 1, 0]

    def _drain_group(self, a: int, b: int) -> None:
        """Locations [a, b): their runs of every window read into one buffer, then written
        location by location."""
        spans = [self._bounds(w, a, b) for w in range(len(self.spilled))]
        nrec = sum(int(e[0] - s[0]) for s, e, _, _ in spans)
        nval = sum(int(e[1] - s[1]) for s, e, _, _ in spans)
        rec, vals = np.empty(nrec, SPILLED), np.empty(nval, np.uint64)
        loc = np.empty(nrec, np.int64)
        at = vat = 0
        for (rows_at, values_at, _, _), ((r0, v0), (r1, v1), locs, ends) in zip(self.spilled, spans):
            r0, r1, v0, v1 = int(r0), int(r1), int(v0), int(v1)
            _read_into(self.spill_rows, rows_at + r0 * SPILLED.itemsize, rec[at:at + r1 - r0])
            _read_into(self.spill_values, values_at + v0 * 8, vals[vat:vat + v1 - v0])
            loc[at:at + r1 - r0] = np.repeat(locs, np.diff(ends))
            at += r1 - r0
            vat += v1 - v0
        # windows one after another, each by location: a stable sort gives each location's
        # records of every window in window order
        self._emit(rec, vals, loc, np.argsort(loc, kind="stable"), (b - 1) * self.stride)

    def _drain_one(self, a: int, budget: int) -> None:
        """A location bigger than a piece: its runs of every window as one stream, in
        slices of rows that end where its time changes (so that a time's records are read
        together, whatever the windows: only a single time of more records than a slice is
        cut), its own records first, then (metrics) its metric location's in a second
        pass over the same slices."""
        step = max(1, budget // (SPILLED.itemsize + 8 * self.width))
        for side in range(self.stride):
            for rec, vals in self._slices(a, step):
                self._emit(rec, vals, np.full(len(rec), a, np.int64), np.arange(len(rec)),
                           a * self.stride + (side if self.stride == 2 else 0),
                           bool(side) if self.stride == 2 else None)

    def _slices(self, a: int, step: int):
        """(records, values) of location ``a``, window after window, in slices of about
        ``step`` records cut where the time changes."""
        held = (np.empty(0, SPILLED), np.empty(0, np.uint64))
        for w, (rows_at, values_at, _, _) in enumerate(self.spilled):
            (r0, v0), (r1, _), _, _ = self._bounds(w, a, a + 1)
            v0 = int(v0)
            for r in range(int(r0), int(r1), step):
                rec = np.empty(min(step, int(r1) - r), SPILLED)
                _read_into(self.spill_rows, rows_at + r * SPILLED.itemsize, rec)
                vals = np.empty(int(self._nvalues(rec).sum()), np.uint64)
                _read_into(self.spill_values, values_at + v0 * 8, vals)
                v0 += len(vals)
                rec, vals = np.concatenate([held[0], rec]), np.concatenate([held[1], vals])
                # the last time's records wait for the next slice (unless they are all)
                cut = int(np.searchsorted(rec["time"], rec["time"][-1])) or len(rec)
                vcut = int(self._nvalues(rec[:cut]).sum())
                held = (rec[cut:], vals[vcut:])
                yield rec[:cut], vals[:vcut]
        if len(held[0]):
            yield held

    def _nvalues(self, rec: np.ndarray) -> np.ndarray:
        """How many values each record carries (a metric's, else none)."""
        from ..formats.otf2 import events as E
        nv = np.zeros(len(rec), np.int64)
        metric = rec["op"] == E.METRIC
        nv[metric] = self.nvalues[rec["ref"][metric]]
        return nv

    def _placed(self, rec, loc, order):
        """``order`` with the Metric records of a time before that time's other records of
        their location, and each record's event file (location index * stride, + 1: the
        metric location, for every Metric record but one of the synchronous class that
        stands before a record of its time; no reader takes it as that record's metrics)."""
        from ..formats.otf2 import events as E
        metric = rec["op"] == E.METRIC
        # at one time: the other classes' records, the synchronous class's, then the rest
        rank = np.where(metric, (rec["ref"] == self.layout.sync_class).astype(np.int64), 2)
        lo, tm = loc[order], rec["time"][order]
        order = order[np.lexsort((np.arange(len(order)), rank[order], tm, lo))]
        lo, tm, m = loc[order], rec["time"][order], metric[order]
        where = loc * self.stride
        if self.stride == 1:
            return order, where, np.zeros(len(rec), bool)
        before = np.r_[(lo[1:] == lo[:-1]) & (tm[1:] == tm[:-1]) & ~m[1:], False]
        aside = m & ~(before & (rec["ref"][order] == self.layout.sync_class))
        side = np.zeros(len(rec), bool)
        side[order[aside]] = True
        where = where + side
        return order[np.argsort(where[order], kind="stable")], where, side

    def _emit(self, rec, vals, loc, order, end: int, side=None) -> None:
        """Records (grouped by location in ``order``) through the library's writers, into
        the event files before ``end`` (``side``: only those of the locations themselves,
        False, or of their metric locations, True)."""
        from ..formats.otf2 import events as E
        from ..formats.otf2.library import error_name
        rec, vals, order = self._joined(rec, np.ascontiguousarray(vals, np.uint64), loc, order)
        nv = self._nvalues(rec)
        voff = np.cumsum(nv) - nv
        vals = np.ascontiguousarray(vals, np.uint64)
        order, loc, aside = self._placed(rec, loc, order)
        if side is not None:
            order = order[aside[order] == side]
        rc, row = E.write_locations(
            np.uint64(self.archive.handle), self.my_ids, self.state, end,
            order, loc, rec["time"], rec["op"], rec["ref"], rec["rank"], rec["tag"], rec["size"],
            rec["received"], rec["collop"], vals.ctypes.data, voff, self.nvalues,
            self.types.ctypes.data, self.counts)
        if rc == E.NO_WRITER or (rc and row < 0):
            at = min(int(self.state[0]) // self.stride, len(self.mine) - 1)
            lid = int(self.layout.loc_ids[self.first_mine + at])
            raise PartraceError(f"location {lid}: the OTF2 library could not "
                                f"{'open' if rc == E.NO_WRITER else 'close'} its event writer"
                                + ("" if rc == E.NO_WRITER else f" ({error_name(rc)})"))
        if rc:
            at = self.first_mine + int(loc[row]) // self.stride
            raise PartraceError(f"location {int(self.layout.loc_ids[at])}, "
                                f"time {int(rec['time'][row])} ns: the OTF2 library refused "
                                f"the record ({error_name(rc)})")

    # -- end ------------------------------------------------------------------
    def finish_events(self) -> None:
        """Local: every spilled record through the library, then the archive closed."""
        self._drain()
        for f in (self.spill_rows, self.spill_values):
            f.close()
            os.unlink(f.name)
        self.archive.close()

    def write_global(self, counts: np.ndarray, first: int, last: int) -> None:
        from ..formats.otf2.definitions import write_global
        write_global(self.staging.dir, self.name, self.layout, counts, first, last, CREATOR)

    def release(self) -> None:
        for f in (self.spill_rows, self.spill_values):
            if f is not None:
                f.close()
        super().release()


def _read_into(f, offset: int, out: np.ndarray) -> None:
    """Fill ``out`` with the spilled bytes at ``offset``."""
    f.seek(int(offset))
    if out.nbytes and f.readinto(out.view(np.uint8)) != out.nbytes:
        raise OSError(f"{f.name}: spilled OTF2 records end early")
