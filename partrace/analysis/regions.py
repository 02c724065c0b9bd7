"""Where the time goes: calls, inclusive and exclusive time per region and location.

Enter/leave pairs need each location's rows in order, but not the global time
order: each rank walks the rows of its own units, unit by unit, with a stack per
location, and what a unit leaves unresolved at its edges is kept as a short
*fragment* per location:

- the LEAVEs that found no open region in the unit (with the time of the calls
  completed before each at the unit's outermost level: they are its children),
- the time of the calls completed at the outermost level after the last of them,
- the regions still open at the unit's end (region, start, child time).

Fragments are rows of the same walk (a CHILD pseudo-row adds child time), so
joining units is walking their fragments in unit order: on rank 0, once, over
rows that number (units x locations x depth), never the events.  Completed calls
are summed where they close.  Readers whose locations each sit in one unit have
trivial fragments; readers that cut a location's rows across units (ROSS byte
regions, a partrace HDF5 file's row ranges) are joined exactly the same way.
Within a unit a location's rows are walked in decode order (its source order;
(time, location, seq) order in a partrace HDF5 file).

The same walker also serves the engine's destination mode (:class:`ProfileSink`:
each location's rows routed to one rank in global (time, location, seq) order),
kept as the reference the fold is checked against.

Sums are sparse (:class:`~partrace.analysis.sparse.KeyedSums` keyed by (location,
region)): memory grows with the pairs that occur, not locations x regions.

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

from ..kernels.jit import njit   # lazy: numba only for inputs that are not small
from ..engine.mpi import Comm
from ..engine.sink import Sink
from ..model import Definitions, Kind, Schema, Table
from .sparse import KeyedSums, slot_of

COLUMNS = ("time", "location", "seq", "kind", "region")     # what the reference path routes
WALKED = ("time", "location", "kind", "region")              # what the walk reads
ENTER, LEAVE, CHILD = int(Kind.ENTER), int(Kind.LEAVE), 255    # CHILD: fragments only
FULL_STACK, FULL_PENDING, FULL_SUMS, UNKNOWN_LOCATION = 1, 2, 3, 4


@njit(cache=True)
def _walk(loc, time, kind, region, ltab, lbase, rtab, rbase, depth, st_region, st_start,
          st_child, base_child, pend_loc, pend_time, pend_child, npend,
          sums, count):  # pragma: no cover - compiled
    """Rows of any locations, each location's in order.  ``loc`` and ``region`` are ids
    looked up in ``ltab`` / ``rtab`` (position of id - base, -1: none), or, where a table is
    empty, already indices (location index; region index + 1, 0: not defined).  Returns
    (rows done, why it stopped): the caller grows what is full and calls again from there."""
    cap = st_region.shape[1]
    v = sums.shape[1] - 3       # calls, inclusive, exclusive: the last columns of a slot
    for i in range(len(loc)):
        k = kind[i]
        if k != ENTER and k != LEAVE and k != CHILD:
            continue
        l = loc[i]
        if len(ltab):
            o = l - lbase
            if o < 0 or o >= len(ltab) or ltab[o] < 0:
                return i, UNKNOWN_LOCATION
            l = ltab[o]
        if k == ENTER:
            d = depth[l]
            if d == cap:
                return i, FULL_STACK
            r = region[i]
            if len(rtab):
                o = r - rbase
                r = rtab[o] + 1 if 0 <= o < len(rtab) else 0
            st_region[l, d] = r
            st_start[l, d] = time[i]
            st_child[l, d] = 0
            depth[l] = d + 1
        elif k == LEAVE:
            d = depth[l]
            if d == 0:          # closes a region opened before this unit (or the trace)
                p = npend[0]
                if p == len(pend_loc):
                    return i, FULL_PENDING
                pend_loc[p] = l
                pend_time[p] = time[i]
                pend_child[p] = base_child[l]
                base_child[l] = 0
                npend[0] = p + 1
                continue
            d -= 1
            s = slot_of(sums, count, l, st_region[l, d])
            if s < 0:
                return i, FULL_SUMS
            depth[l] = d
            inc = time[i] - st_start[l, d]
            sums[s, v] += 1
            sums[s, v + 1] += inc
            sums[s, v + 2] += inc - st_child[l, d]
            if d > 0:
                st_child[l, d - 1] += inc
            else:
                base_child[l] += inc
        elif k == CHILD:        # child time carried by a fragment
            d = depth[l]
            if d > 0:
                st_child[l, d - 1] += time[i]
            else:
                base_child[l] += time[i]
    return len(loc), 0


DENSE = 8      # a lookup table when the id span is at most DENSE x the ids (+ 4096)


class IdIndex:
    """Position of each id in a sorted array of ids, -1 for an id not there: a lookup table
    when the ids are dense enough (a gather per row), else a binary search."""

    def __init__(self, ids: np.ndarray):
        self.ids = ids
        self.base = int(ids[0]) if len(ids) else 0
        span = int(ids[-1]) - self.base + 1 if len(ids) else 0
        self.table = None
        if 0 < span <= DENSE * len(ids) + 4096:
            self.table = np.full(span, -1, np.int64)
            self.table[ids - self.base] = np.arange(len(ids))

    def of(self, x: np.ndarray) -> np.ndarray:
        if not len(self.ids):
            return np.full(len(x), -1, np.int64)
        if self.table is not None:
            off = x.astype(np.int64) - self.base
            inside = (off >= 0) & (off < len(self.table))
            if inside.all():
                return self.table[off]
            return np.where(inside, self.table[np.where(inside, off, 0)], -1)
        at = np.minimum(np.searchsorted(self.ids, x), len(self.ids) - 1)
        return np.where(self.ids[at] == x, at, -1)

    def __getstate__(self):     # rebuilt where needed, not sent
        return {"ids": self.ids}

    def __setstate__(self, state):
        self.__init__(state["ids"])


class Walker:
    """Stacks per location (indexed as the sorted location ids of the definitions), the
    sparse sums per (location index, region index) and the pending LEAVEs of the current
    unit.  Region index 0: a region id the definitions do not have."""

    def __init__(self, defs: Definitions):
        self.loc_ids = np.sort(np.asarray(defs.tables["locations"]["id"], np.int64))
        self.reg_ids = np.sort(np.asarray(defs.tables["regions"]["id"], np.int64))
        self.locations, self.regions = IdIndex(self.loc_ids), IdIndex(self.reg_ids)
        n = len(self.loc_ids)
        self.depth = np.zeros(n, np.int64)
        self.base_child = np.zeros(n, np.int64)
        self.st_region = np.zeros((n, 4), np.int64)
        self.st_start = np.zeros((n, 4), np.int64)
        self.st_child = np.zeros((n, 4), np.int64)
        self.pend_loc = np.zeros(64, np.int64)
        self.pend_time = np.zeros(64, np.int64)
        self.pend_child = np.zeros(64, np.int64)
        self.npend = np.zeros(1, np.int64)
        self.sums = KeyedSums(2, 3)

    def events(self, ev: Table) -> None:
        """Walk the ENTER/LEAVE rows of a table (each location's rows in table order; the
        kernel skips the other rows, and rows of different locations may interleave)."""
        # contiguous: a reader's one repeated value (a stride-0 view) is written out, so
        # the kernel is compiled for contiguous arrays only
        loc, reg = np.ascontiguousarray(ev["location"]), np.ascontiguousarray(ev["region"])
        ltab, rtab = self.locations.table, self.regions.table
        if ltab is None:
            loc = self.locations.of(loc)
            if len(loc) and loc.min() < 0:
                self._unknown(np.asarray(ev["location"])[np.argmin(loc)])
        if rtab is None:
            reg = self.regions.of(reg) + 1      # 0: not defined
        self.rows(loc, np.ascontiguousarray(ev["time"]), np.ascontiguousarray(ev["kind"]), reg,
                  self.locations, self.regions)

    @staticmethod
    def _unknown(loc_id) -> None:     # a reader's bug: never index past the stacks
        raise ValueError(f"events of location {int(loc_id)}, which the definitions do not have")

    _NONE = np.zeros(0, np.int64)

    def rows(self, loc, time, kind, ridx, locations=None, regions=None) -> None:
        """Rows with location / region indices, or ids where ``locations`` / ``regions``
        (IdIndex with a table) are given."""
        lt = locations.table if locations is not None and locations.table is not None else self._NONE
        rt = regions.table if regions is not None and regions.table is not None else self._NONE
        lb = locations.base if len(lt) else 0
        rb = regions.base if len(rt) else 0
        start = 0
        while start < len(loc):
            s = self.sums
            done, why = _walk(loc[start:], time[start:], kind[start:], ridx[start:], lt, lb, rt, rb,
                              self.depth, self.st_region, self.st_start, self.st_child,
                              self.base_child, self.pend_loc, self.pend_time, self.pend_child,
                              self.npend, s.slots, s.count)
            start += done
            if why == UNKNOWN_LOCATION:
                self._unknown(loc[start])
            if why == FULL_STACK:           # a deeper stack than ever before
                self.st_region, self.st_start, self.st_child = (
                    np.concatenate([a, np.zeros_like(a)], axis=1) for a in
                    (self.st_region, self.st_start, self.st_child))
            elif why == FULL_PENDING:
                self.pend_loc, self.pend_time, self.pend_child = (
                    np.concatenate([a, np.zeros_like(a)]) for a in
                    (self.pend_loc, self.pend_time, self.pend_child))
            elif why == FULL_SUMS:
                s.grow()

    def fragment(self) -> tuple[np.ndarray, ...]:
        """What the rows walked since the last call leave unresolved, as rows (loc, time,
        kind, region index) of the walk, in order per location; the state is then reset."""
        n = int(self.npend[0])
        tail = np.flatnonzero(self.base_child)
        if not n and not len(tail) and not self.depth.any():     # nothing left open (no
            return (np.zeros(0, np.int64),) * 4                  # stacks: ROSS, most units)
        ploc = self.pend_loc[:n]
        parts = [  # (loc, phase, position, time, kind, region)
            (ploc, 0, 2 * np.arange(n), self.pend_child[:n], CHILD, 0),
            (ploc, 0, 2 * np.arange(n) + 1, self.pend_time[:n], LEAVE, 0)]
        parts.append((tail, 1, np.zeros(len(tail), np.int64), self.base_child[tail], CHILD, 0))
        lo, d = np.nonzero(np.arange(self.st_region.shape[1]) < self.depth[:, None])
        parts.append((lo, 2, 2 * d, self.st_start[lo, d], ENTER, self.st_region[lo, d]))
        parts.append((lo, 2, 2 * d + 1, self.st_child[lo, d], CHILD, 0))
        cols = [np.concatenate([np.broadcast_to(np.asarray(p[j], np.int64), len(p[0])) for p in parts])
                for j in range(6)]
        order = np.lexsort((cols[2], cols[1], cols[0]))
        self.npend[0] = 0
        self.base_child[:] = 0
        self.depth[:] = 0
        return tuple(cols[j][order] for j in (0, 3, 4, 5))

    def figures(self) -> dict:
        """The sums and the unmatched counts (call :meth:`fragment` rows first for the last
        pieces): per (location id, region id) calls, inclusive, exclusive."""
        keys, vals = self.sums.items()
        regions = np.concatenate([[0], self.reg_ids])
        n = int(self.npend[0])
        return {"location": self.loc_ids[keys[:, 0]], "region": regions[keys[:, 1]],
                "region_index": keys[:, 1],
                "calls": vals[:, 0], "inclusive": vals[:, 1], "exclusive": vals[:, 2],
                "unmatched_leave": n, "unmatched_enter": int(self.depth.sum())}

    def __getstate__(self):     # what a reduction sends: the sums, not the stacks
        return {"loc_ids": self.loc_ids, "reg_ids": self.reg_ids, "sums": self.sums}


class ProfileFold:
    """The fold of :func:`partrace.engine.fold.fold`: a Walker per rank, a fragment per unit."""

    def __init__(self, defs: Definitions):
        self.walker = Walker(defs)
        self.fragments: list[tuple[int, tuple]] = []

    def step(self, chunk: dict[str, Table]) -> "ProfileFold":
        ev = chunk.get("events")
        if ev is not None and len(ev):
            self.walker.events(ev)
        return self

    def end_unit(self, index: int) -> "ProfileFold":
        frag = self.walker.fragment()
        if len(frag[0]):
            self.fragments.append((index, frag))
        return self

    @staticmethod
    def combine(a: "ProfileFold", b: "ProfileFold") -> "ProfileFold":
        a.walker.sums.merge(b.walker.sums)
        a.fragments += b.fragments
        return a

    def figures(self, defs: Definitions) -> dict:
        """(rank 0, after the reduction) the units joined in key order."""
        w = Walker(defs)
        w.sums = self.walker.sums
        self.fragments.sort(key=lambda f: f[0])
        if self.fragments:
            loc, time, kind, ridx = (np.concatenate([f[1][j] for f in self.fragments]) for j in range(4))
            w.rows(loc, time, kind, ridx)
        return w.figures()

    def __getstate__(self):
        return {"walker": self.walker, "fragments": self.fragments}

    def __setstate__(self, state):
        self.__dict__.update(state)


class ProfileSink(Sink):
    """The reference path, a sink of the engine: each location's rows are routed to one rank
    in global (time, location, seq) order and walked there."""

    mode = "destination"
    windows = True
    needs = {"events": COLUMNS}

    def __init__(self):
        self.result: dict | None = None

    def prepare(self, comm: Comm, defs: Definitions, schema: Schema, every_location: bool = False
                ) -> None:
        self.defs = defs
        self.walker = Walker(defs)

    def destinations(self, comm: Comm, name: str, table: Table) -> np.ndarray:
        # location index i belongs to rank i % size: spread evenly, fixed by the definitions
        idx = np.searchsorted(self.walker.loc_ids, np.asarray(table["location"]))
        return (idx % comm.size).astype(np.int64)

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        with comm.guard():
            ev = tables.get("events")
            if ev is not None and len(ev):
                self.walker.events(ev)
        comm.check()

    def commit(self, comm: Comm) -> None:
        w = self.walker
        mine = (w.sums, int(w.npend[0]), int(w.depth.sum()))
        everyone = comm.gather(mine)
        if comm.rank == 0:
            for sums, _, _ in everyone[1:]:
                w.sums.merge(sums)
            self.result = w.figures()
            self.result["unmatched_leave"] = sum(e[1] for e in everyone)
            self.result["unmatched_enter"] = sum(e[2] for e in everyone)

    def discard(self, comm: Comm) -> None:
        pass
