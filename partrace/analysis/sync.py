"""Clock correction for ``merge --sync``: each process's clock moved onto one reference
clock before the global order is made.

``offsets``: the pairwise offsets (and drifts) that ``partrace clocks`` estimates from
the least message delays are joined into one clock per process: over the pairs that
carried messages both ways, the spanning forest with the least summed bounds (the
tightest estimates) links every process to the lowest process id of its component,
whose clock is the reference; a process's offset from it is the sum of the pair
offsets along the path (each a line in time where the pair's messages show a drift;
zero where the offset's bound holds zero: the messages cannot tell the clocks apart).
Every row of a location then reads ``time - offset(time)``, rounded: a shift that
keeps each location's own order, so the engine's (time, location, seq) order stays
a total order.  The decoded time is kept in ``time_original``.

``clc``: the offsets, then a logical clock that moves the receives still before their
sends forward, with the rest of their location (:mod:`partrace.analysis.clc`).

``none`` changes nothing; with any, the merge counts the violations its output
holds from the message rows it decodes anyway (matched as ``partrace clocks`` does),
while their records fit the budget it is given (merging.CLOCK_SHARE: 1/40 of ``--memory``;
matching them at the end takes about four times that, outside the engine's budget).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..engine.mpi import Comm
from ..model import Column, Definitions, Schema, Table
from . import clocks as C

METHODS = ("none", "offsets", "clc")
ORIGINAL = Column("time_original", "int64", "time as the trace recorded it, before the clock "
                  "correction (merge --sync)", "ns")


def group_clocks(pairs: list[dict]) -> dict[int, tuple[float, float]]:
    """Each linked process's clock minus its reference's, as (at time 0, per ns of time):
    from the pair records of :func:`partrace.analysis.clocks.report`.  Processes with no
    estimate (messages one way only, or none) are absent: they keep their clocks."""
    edges = []
    for p in pairs:
        line = _pair_line(p)
        if line is not None:
            edges.append((line[0], p["a_id"], p["b_id"], line[1], line[2]))
    edges.sort()       # tightest first; ties by ids: the same forest at any rank count
    parent: dict[int, int] = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    links: dict[int, list] = {}
    for _, a, b, at0, slope in edges:
        ra, rb = root(a), root(b)
        if ra == rb:
            continue
        parent[max(ra, rb)] = min(ra, rb)
        links.setdefault(a, []).append((b, at0, slope))
        links.setdefault(b, []).append((a, -at0, -slope))
    out: dict[int, tuple[float, float]] = {}
    for start in sorted(links):
        if start in out:
            continue
        out[start] = (0.0, 0.0)     # the lowest id of its component: the reference
        todo = [start]
        while todo:
            a = todo.pop()
            for b, at0, slope in links[a]:
                if b not in out:
                    out[b] = (out[a][0] + at0, out[a][1] + slope)
                    todo.append(b)
    return out


def _pair_line(p: dict):
    """(bound, b's clock minus a's at time 0, per ns) of a pair with an estimate, else None:
    the line through both ends' offsets where the pair shows a drift beyond its bound,
    else the constant offset of all its messages (when they are consistent with one)."""
    if p["a_id"] == p["b_id"]:
        return None
    ends = p.get("drift_from")
    if ends and p["drift_bound_ppm"] >= 0 and abs(p["drift_ppm"]) > p["drift_bound_ppm"] \
            and min(e["bound_ns"] for e in ends) >= 0:
        (e0, e1) = ends
        slope = (e1["offset_ns"] - e0["offset_ns"]) / (e1["time_ns"] - e0["time_ns"])
        return ((e0["bound_ns"] + e1["bound_ns"]) / 2, e0["offset_ns"] - slope * e0["time_ns"],
                slope)
    if p["offset_ns"] is not None and p["offset_bound_ns"] >= 0:
        # clocks the messages cannot tell apart stay as they are (an exact trace is unchanged)
        off = 0.0 if abs(p["offset_ns"]) <= p["offset_bound_ns"] else float(p["offset_ns"])
        return (p["offset_bound_ns"], off, 0.0)
    return None


@dataclass
class ClockSync:
    """The per-location time correction the engine applies to each decoded table (a
    callable: ``sync(name, table) -> table``), and the message records it keeps from
    the corrected events to count the violations the output holds."""

    method: str
    locations: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    at0: np.ndarray = field(default_factory=lambda: np.zeros(0))
    slope: np.ndarray = field(default_factory=lambda: np.zeros(0))
    records: C.MessageRecords = field(default_factory=C.MessageRecords)
    groups: C.Groups | None = None      # the processes (set by prepare)
    # bytes of message records kept for the count: beyond them the merge does not count
    # (the records are outside the budget the engine spills by); -1: no count at all
    budget: int = 1 << 62
    held: int = 0
    # clc: the steps of each location's logical shift, after the offsets (clc.steps)
    steps: tuple | None = None

    @property
    def shifts(self) -> bool:
        return self.method != "none"

    def prepare(self, defs: Definitions, schema: Schema) -> Schema:
        """The schema with ``time_original`` after ``time`` in every timed table (when the
        times move); the definitions say which correction ran."""
        self.groups = C.Groups(defs, "process")
        self.defs, self.schema = defs, schema
        if not self.shifts:
            return schema
        defs.attrs["clock_sync"] = self.method
        return {name: _with_original(cols) for name, cols in schema.items()}

    def __call__(self, name: str, table: Table) -> Table:
        if self.shifts and "time" in table.names and "location" in table.names:
            table = self._moved(table)
        if name == "events" and self.held <= self.budget:
            had = len(self.records.parts), len(self.records.collective_rows)
            C.step_all(self.records, {"events": table})
            self.held += sum(p.nbytes for p in self.records.parts[had[0]:]) + \
                sum(p.nbytes for p in self.records.collective_rows[had[1]:])
            if self.held > self.budget:
                self.records = C.MessageRecords()
        return table

    def _moved(self, table: Table) -> Table:
        time = np.asarray(table["time"])
        loc = np.asarray(table["location"]).astype(np.int64)
        at = np.minimum(np.searchsorted(self.locations, loc), max(len(self.locations) - 1, 0))
        known = self.locations[at] == loc if len(self.locations) else np.zeros(len(loc), bool)
        offset = np.where(known, self.at0[at] + self.slope[at] * time, 0.0) if len(at) else at
        cols = {}
        # a trace corrected before (partrace's HDF5 output) keeps the time it was decoded with
        original = table[ORIGINAL.name] if ORIGINAL.name in table.names else time
        moved = time - np.rint(offset).astype(np.int64)
        if self.steps is not None and len(self.steps[0]):
            from .clc import last_step
            at = last_step(*self.steps[:3], np.ascontiguousarray(loc), moved,
                           np.asarray(table["seq"]).astype(np.int64))
            moved = moved + np.where(at >= 0, self.steps[3][np.maximum(at, 0)], 0)
        for c in table.names:
            if c == "time":
                cols["time"] = moved
                cols[ORIGINAL.name] = original
            elif c != ORIGINAL.name:
                cols[c] = table[c]
        return Table(cols)

    def violations(self, comm: Comm) -> tuple[int, int, int, int] | None:
        """(messages, those received before they were sent, collective instances checked,
        those a member left before the data it waits for was entered) in the output, or
        None when a rank had more records than its budget: collective."""
        from . import clock_collectives as CC
        if comm.allreduce_max(int(self.held > self.budget)):
            self.records = C.MessageRecords()
            return None
        records, self.records = self.records, C.MessageRecords()
        rec = records.array()
        records.parts = []      # no second copy held while they are matched
        mine = C.route(comm, rec, self.groups)
        del rec
        counts = (0, 0)
        with comm.guard():
            msgs, _, _ = C.match(mine)
            late = msgs[:, C.M_RECV_TIME] < msgs[:, C.M_SEND_TIME]
            counts = (len(msgs), int(late.sum()))
        comm.check()
        colls, _ = CC.check(comm, records.collectives(), self.defs, self.schema)
        return tuple(comm.allreduce_sum(np.array(
            [*counts, colls["checked"], colls["violations"]], np.int64)).tolist())


def _with_original(cols: list[Column]) -> list[Column]:
    names = [c.name for c in cols]
    if "time" not in names or "location" not in names or ORIGINAL.name in names:
        return cols
    i = names.index("time") + 1
    return cols[:i] + [ORIGINAL] + cols[i:]


def clock_sync(comm: Comm, method: str, path, *, format=None, reader_options=None,
               budget: int = 1 << 62) -> ClockSync:
    """The correction ``method`` for the trace at ``path`` (collective): ``offsets`` reads
    the messages first (a pass over their columns, as ``partrace clocks``).  ``budget``:
    bytes of message records a rank keeps to count the output's violations."""
    if method not in METHODS:
        raise ValueError(f"--sync must be one of {', '.join(METHODS)}, not {method!r}")
    if method == "none":
        return ClockSync(method, budget=budget)
    _refuse_logical_time(comm, path, format, reader_options)
    res = C.check(path, comm=comm, format=format, reader_options=reader_options,
                  with_defs=True)
    table = None
    if comm.rank == 0:
        result, defs = res
        per_group = group_clocks(result["pairs"])
        groups = C.Groups(defs, "process")
        loc = groups.ids
        line = [per_group.get(g, (0.0, 0.0)) for g in groups.tops.tolist()]
        table = (loc, np.array([x[0] for x in line]), np.array([x[1] for x in line]))
    loc, at0, slope = comm.bcast(table)
    if method == "offsets":
        return ClockSync(method, loc, at0, slope, budget=budget)
    return _with_logical_clock(comm, ClockSync("offsets", loc, at0, slope), path, format,
                               reader_options, budget)


def _refuse_logical_time(comm: Comm, path, format, reader_options) -> None:
    """A trace whose time is no clock (ROSS's virtual time) has no clock to correct."""
    from ..engine.pipeline import open_on_all_ranks, read_plan
    from ..errors import UsageError
    from ..timeunit import of
    defs = read_plan(comm, open_on_all_ranks(comm, path, format, reader_options))[2]
    unit = of(defs.attrs)
    if not unit.wall_ns:
        raise UsageError(f"{path}: --sync corrects clocks; this trace's time is {unit.name}")


def _with_logical_clock(comm: Comm, offsets: ClockSync, path, format, reader_options,
                        budget: int) -> ClockSync:
    """``offsets`` and then the logical clock's steps: the messages read again, their times
    moved by the offsets, matched and replayed (analysis.clc)."""
    from ..engine.fold import fold
    from . import _reader
    from . import clock_collectives as CC
    from .clc import steps
    collective_rows = []

    def start(defs):
        offsets.groups = C.Groups(defs, "process")
        return offsets

    def step(acc, chunk):
        if "events" in chunk:
            found = CC.rows(acc("events", chunk["events"]))
            if found is not None:
                collective_rows.append(found)
        return acc
    reader = _reader(comm, path, format, reader_options, {"events": C.COLUMNS})
    defs, _, _ = fold(comm, path, tables={"events"}, start=start, step=step, combine=None,
                      format=format, reduce=False, reader=reader)
    mine = C.route(comm, offsets.records.array(), offsets.groups)     # outside any guard
    msgs = rows = None
    with comm.guard():
        msgs, _, _ = C.match(mine)
        rows = np.concatenate(collective_rows) if collective_rows else np.zeros((0, 8), np.int64)
        rows[:, CC.DUR] = np.rint(rows[:, CC.DUR] * CC.ns_per_duration(
            defs, reader.schema(defs))).astype(np.int64)
    comm.check()
    found = steps(comm, msgs, rows, CC.types_of(defs), CC.sizes_of(defs))
    return ClockSync("clc", offsets.locations, offsets.at0, offsets.slope, budget=budget,
                     steps=found)
