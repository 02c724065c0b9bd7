"""Where the time goes: calls, inclusive and exclusive time per region and location.

Enter/leave pairs need each location's rows in order, so the events are routed
to the rank owning their location (the engine's destination mode: one exchange
of the few columns needed, in windows under the memory budget) and walked there
with a stack per location.  The stack lives across windows.

Rules (as otfprofile counts):
- a LEAVE closes the innermost open region, whatever region it names;
- inclusive time = leave time - enter time; exclusive = inclusive minus the
  inclusive time of the regions called from it; a recursive call is counted
  in full at each level;
- a LEAVE with no open region (the trace starts inside a region) and regions
  still open at the location's last row (the trace ends inside them) are not
  calls: they are counted as unmatched and reported.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..engine.mpi import Comm
from ..engine.sink import Sink
from ..model import Definitions, Kind, Schema, Table

COLUMNS = ("time", "location", "seq", "kind", "region")


@njit(cache=True)
def _walk(loc, time, kind, region, depth, st_region, st_start, st_child,
          calls, incl, excl, unmatched):     # pragma: no cover - compiled
    """Rows of one window, grouped by local location index and in order within each."""
    cap = st_region.shape[1]
    for i in range(len(loc)):
        l = loc[i]
        k = kind[i]
        if k == 1:          # ENTER
            d = depth[l]
            if d == cap:
                return i    # the caller grows the stacks and calls again from here
            st_region[l, d] = region[i]
            st_start[l, d] = time[i]
            st_child[l, d] = 0
            depth[l] = d + 1
        elif k == 2:        # LEAVE
            d = depth[l]
            if d == 0:
                unmatched[l] += 1
                continue
            d -= 1
            depth[l] = d
            r = st_region[l, d]
            inc = time[i] - st_start[l, d]
            calls[l, r] += 1
            incl[l, r] += inc
            excl[l, r] += inc - st_child[l, d]
            if d > 0:
                st_child[l, d - 1] += inc
    return len(loc)


class ProfileSink(Sink):
    """A sink of the engine: events of each location end on one rank and are walked there."""

    mode = "destination"
    windows = True
    needs = {"events": COLUMNS}

    def __init__(self):
        self.result: dict | None = None

    def prepare(self, comm: Comm, defs: Definitions, schema: Schema, every_location: bool = False
                ) -> None:
        self.defs = defs
        self.loc_ids = np.sort(np.asarray(defs.tables["locations"]["id"], np.int64))
        self.reg_ids = np.sort(np.asarray(defs.tables["regions"]["id"], np.int64))
        # location index i belongs to rank i % size: spread evenly, fixed by the definitions
        # (every_location: the rows of a location all come to this rank, whichever it is)
        mine = np.arange(len(self.loc_ids)) if every_location else \
            np.arange(comm.rank, len(self.loc_ids), comm.size)
        self.my_locs = self.loc_ids[mine]
        n, r = len(mine), len(self.reg_ids) + 1     # region index 0: a region id not defined
        self.depth = np.zeros(n, np.int64)
        self.st_region = np.zeros((n, 16), np.int64)
        self.st_start = np.zeros((n, 16), np.int64)
        self.st_child = np.zeros((n, 16), np.int64)
        self.calls = np.zeros((n, r), np.int64)
        self.incl = np.zeros((n, r), np.int64)
        self.excl = np.zeros((n, r), np.int64)
        self.unmatched_leave = np.zeros(n, np.int64)

    def destinations(self, comm: Comm, name: str, table: Table) -> np.ndarray:
        idx = np.searchsorted(self.loc_ids, np.asarray(table["location"]))
        return (idx % comm.size).astype(np.int64)

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        with comm.guard():
            ev = tables.get("events")
            if ev is not None and len(ev):
                self._walk(ev)
        comm.check()

    def _walk(self, ev: Table) -> None:
        kind = np.asarray(ev["kind"])
        sel = np.flatnonzero((kind == Kind.ENTER) | (kind == Kind.LEAVE))
        loc = np.searchsorted(self.my_locs, np.asarray(ev["location"])[sel])
        order = np.argsort(loc, kind="stable")      # rows arrive in (time, location, seq) order
        sel, loc = sel[order], loc[order]
        reg = np.asarray(ev["region"])[sel]
        ridx = np.searchsorted(self.reg_ids, reg) + 1
        ridx[(ridx > len(self.reg_ids)) | (self.reg_ids[np.minimum(ridx - 1, len(self.reg_ids) - 1)] != reg)] = 0
        time, kind = np.asarray(ev["time"])[sel], kind[sel]
        start = 0
        while start < len(sel):
            done = _walk(loc[start:], time[start:], kind[start:], ridx[start:], self.depth,
                         self.st_region, self.st_start, self.st_child,
                         self.calls, self.incl, self.excl, self.unmatched_leave)
            start += done
            if start < len(sel):        # a deeper stack than ever before
                grow = self.st_region.shape[1]
                self.st_region, self.st_start, self.st_child = (
                    np.concatenate([a, np.zeros_like(a)], axis=1) for a in
                    (self.st_region, self.st_start, self.st_child))
                assert self.st_region.shape[1] == 2 * grow

    def commit(self, comm: Comm) -> None:
        mine = (self.my_locs, self.calls, self.incl, self.excl, self.unmatched_leave, self.depth.copy())
        everyone = comm.gather(mine)
        if comm.rank == 0:
            self.result = _assemble(self.reg_ids, everyone)

    # -- the same walk as a fold over decoded chunks (readers whose locations each sit in
    # one unit: a location's rows are all on the rank decoding its unit, in order) --------
    def fold_start(self, defs: Definitions):
        from ..engine.mpi import serial
        self.prepare(serial(), defs, {}, every_location=True)
        return self

    def fold_step(self, acc, chunk: dict[str, Table]):
        ev = chunk.get("events")
        if ev is not None and len(ev):
            self._walk(ev)
        return acc

    @staticmethod
    def fold_combine(a: "ProfileSink", b: "ProfileSink") -> "ProfileSink":
        """Sums; the same locations on both (each location's rows are on one rank only)."""
        a.calls += b.calls
        a.incl += b.incl
        a.excl += b.excl
        a.unmatched_leave += b.unmatched_leave
        a.depth += b.depth
        return a

    def __getstate__(self):     # what a reduction sends: the sums, not the stacks
        return {k: v for k, v in self.__dict__.items() if k not in ("st_region", "st_start", "st_child")}

    def discard(self, comm: Comm) -> None:
        pass


def _assemble(reg_ids: np.ndarray, everyone) -> dict:
    """Per (location, region) figures of every rank, in location order."""
    locs = np.concatenate([e[0] for e in everyone])
    order = np.argsort(locs)
    stack = [np.concatenate([e[i] for e in everyone])[order] for i in range(1, 6)]
    calls, incl, excl, unmatched_leave, open_at_end = stack
    return {"locations": locs[order], "regions": np.concatenate([[0], reg_ids]),
            "calls": calls, "inclusive": incl, "exclusive": excl,
            "unmatched_leave": unmatched_leave, "unmatched_enter": open_at_end}
