"""Communicators: global ids, membership, and each rank's handle -> id map over time.

DUMPI records a communicator as a per-process handle (libdumpi hashes the MPI
handle to a small index: 2 = MPI_COMM_WORLD, 3 = MPI_COMM_SELF, user handles
from 4, reused when MPI reuses the handle).  Events need one id per
communicator shared by all ranks, and peers as locations, so the definitions
rank replays the communicator-making calls of all ranks:

* ids: 1 = MPI_COMM_WORLD, 1 + location = MPI_COMM_SELF of that location
  (location = world rank + 1), then one id per created communicator.
* Comm_dup, Comm_split, Comm_create, Cart_create / Graph_create without
  reorder are collective over the parent: the k-th such call on a parent is
  the same call on every member (MPI orders collectives per communicator), so
  the calls are matched across ranks and the members derived (split: by color,
  then key, then parent rank; create: the group, tracked through Comm_group and
  the Group_* calls).  Other makers (intercommunicators, spawn, Cart_sub,
  reordered topologies) give a communicator per rank with no members listed.
* ``communicator_handles`` (location, handle, call, comm): from just after
  ``call`` on, ``handle`` on that location means ``comm`` (0 after Comm_free).

This needs the calls of all ranks: each rank's are read where that rank file
is surveyed (:func:`survey_stream`, which skims its stream and reads those calls'
records), and the replay runs on the definitions rank.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model import Table, conform, DEFINITION_TABLES
from .functable import FUNCTIONS
from . import scan
from .walk import Walk, slot_arrays

WORLD, SELF_HANDLE, NULL_HANDLE = 2, 3, 1
GROUP_EMPTY = 2
GROUP_OPS = {72, 73, 74, 75, 76, 77, 78, 79, 80}
MATCHED = {84, 85, 86, 99, 101}                     # derivable collective makers
OTHER_MAKERS = {91, 92, 111, 130, 131, 133, 134, 135, 136}
FREE = 87
TRIGGER = GROUP_OPS | MATCHED | OTHER_MAKERS | {FREE}
_TRIGGERS = np.isin(np.arange(len(FUNCTIONS)), sorted(TRIGGER))   # per function label
HANDLE_COLUMNS = ["location", "handle", "call", "comm"]


def self_id(location):
    return 1 + location


@dataclass
class Op:
    """One communicator/group call of one rank (few per trace: Python is fine)."""

    call: int
    fid: int
    args: dict


@dataclass
class StreamSurvey:
    """What the survey of a rank's stream gives the definitions: its communicator and group
    calls, and the number of records of each function with the offset of the first."""

    ops: list[Op]
    counts: np.ndarray      # records per function label
    first: np.ndarray       # byte offset of each function's first record (-1: none)
    early_end: int | None   # offset of an end-of-stream label before the stream's end


def survey_stream(rf) -> StreamSurvey:
    """A rank's stream at plan time: which functions it holds records of (libundumpi reads
    every record whatever the footer counts, so the stream, not the footer, says which
    functions have records and tables), and its TRIGGER calls in call order.  The skim
    (skim.py) reads record headers and argument lengths only; the full walk reads just the
    TRIGGER records, one each (few in a trace), so a stream without any costs one skim."""
    from .skim import skim, table_for
    counts = np.zeros(len(FUNCTIONS), np.int64)
    first = np.full(len(FUNCTIONS), -1, np.int64)
    if rf.stream_end <= rf.stream_start:
        return StreamSurvey([], counts, first, None)
    buf = np.memmap(rf.path, np.uint8, mode="r")
    table = table_for(rf.version)
    pos, call, nt = rf.stream_start, 0, 0
    t_off, t_call = np.empty(16, np.int64), np.empty(16, np.int64)
    while True:
        err, pos, call, nt = skim(buf, pos, rf.stream_end, call, table, _TRIGGERS, counts,
                                  first, t_off, t_call, nt)
        if err != scan.E_FULL:
            break
        t_off, t_call = (np.concatenate([a, np.empty(len(a), np.int64)]) for a in (t_off, t_call))
    Walk._check(err, pos, rf, buf)
    ops = [_op(Walk(buf, rf, int(at), 1), int(c)) for at, c in zip(t_off[:nt], t_call[:nt])]
    return StreamSurvey(ops, counts, first, int(pos) if err == scan.E_EOS else None)


def _op(w: Walk, call: int) -> Op:
    """The communicator or group call that ``w`` walked (one record) as an Op."""
    fid = int(w.func[0])
    args = {}
    for k, (name, kind, _r, _c) in enumerate(FUNCTIONS[fid][2]):
        if kind in ("a32", "aa32"):
            args[name] = slot_arrays(w, 0, k, nested=kind == "aa32")
        elif kind in ("i32", "u16", "u8", "i64"):
            args[name] = int(w.vals[k, 0])
    return Op(call, fid, args)


class Replay:
    """Replays the ops of all ranks, matching collective makers across ranks."""

    def __init__(self, locations: list[int]):
        self.names = {1: "MPI_COMM_WORLD"}
        self.members = {1: tuple(locations)}
        for loc in locations:
            self.names[self_id(loc)] = f"MPI_COMM_SELF (location {loc})"
            self.members[self_id(loc)] = (loc,)
        self.next = self_id(max(locations, default=0)) + 1
        self.cmap = {loc: {WORLD: 1, SELF_HANDLE: self_id(loc), NULL_HANDLE: 0}
                     for loc in locations}
        self.gmap = {loc: {GROUP_EMPTY: ()} for loc in locations}
        self.handles = [(loc, h, -1, g) for loc in locations for h, g in
                        ((WORLD, 1), (SELF_HANDLE, self_id(loc)))]

    def new(self, name: str, members) -> int:
        gid, self.next = self.next, self.next + 1
        self.names[gid] = name
        self.members[gid] = members
        return gid

    def bind(self, loc: int, handle: int, call: int, gid: int) -> None:
        if handle in (WORLD, SELF_HANDLE, NULL_HANDLE, 0):
            return                               # predefined / null results
        self.cmap[loc][handle] = gid
        self.handles.append((loc, handle, call, gid))

    # -- one rank's local calls ------------------------------------------------
    def local(self, loc: int, op: Op) -> None:
        a, f, g = op.args, op.fid, self.gmap[loc]
        if f == FREE:
            self.cmap[loc].pop(a["comm"], None)
            self.bind(loc, a["comm"], op.call, 0)
        elif f == 72:
            gid = self.cmap[loc].get(a["comm"])
            g[a["group"]] = self.members.get(gid)
        elif f == 80:
            g.pop(a["group"], None)
        elif f in (73, 74, 75):
            x, y = g.get(a["group1"]), g.get(a["group2"])
            g[a["newgroup"]] = None if x is None or y is None else _setop(f, x, y)
        elif f in (76, 77, 78, 79):
            g[a["newgroup"]] = _subgroup(f, g.get(a["group"]), a)
        else:                                    # a maker we cannot derive
            gid = self.new(f"{FUNCTIONS[f][1]} result on location {loc} (members unknown)",
                           None)
            self.bind(loc, a.get("newcomm", a.get("parent", 0)), op.call, gid)

    # -- collective makers -------------------------------------------------------
    def collective(self, parent: int, waiting: dict[int, Op]) -> None:
        """The same maker call on every member of ``parent``: derive the new ids."""
        ops = list(waiting.items())
        fids = {op.fid for _l, op in ops}
        if len(fids) != 1:                       # erroneous program: members disagree
            for loc, op in ops:
                self.local(loc, op)
            return
        fid = fids.pop()
        fname, pname = FUNCTIONS[fid][1], self.names[parent]
        pm = self.members[parent]
        if fid == 84:
            gid = self.new(f"{fname}({pname})", pm)
            for loc, op in ops:
                self.bind(loc, op.args["newcomm"], op.call, gid)
        elif fid == 86:
            colors = sorted({op.args["color"] for _l, op in ops if op.args["color"] >= 0})
            ids = {}
            for c in colors:
                mine = sorted((op.args["key"], pm.index(loc), loc) for loc, op in ops
                              if op.args["color"] == c)
                ids[c] = self.new(f"{fname}({pname}, color={c})", tuple(x[2] for x in mine))
            for loc, op in ops:
                self.bind(loc, op.args["newcomm"], op.call, ids.get(op.args["color"], 0))
        elif fid == 85:
            groups = {loc: self.gmap[loc].get(op.args["group"]) for loc, op in ops}
            ids = {}
            for loc, op in ops:
                grp = groups[loc]
                if grp is None:
                    self.local(loc, op)
                    continue
                if loc in grp:
                    if grp not in ids:
                        ids[grp] = self.new(f"{fname}({pname}, {len(ids) + 1})", grp)
                    self.bind(loc, op.args["newcomm"], op.call, ids[grp])
        else:                                    # Cart_create / Graph_create
            reorder = {op.args["reorder"] for _l, op in ops}
            if reorder != {0}:
                for loc, op in ops:
                    self.local(loc, op)
                return
            a = ops[0][1].args
            n = int(np.prod(a["dims"])) if fid == 99 else a["nodes"]
            gid = self.new(f"{fname}({pname})", pm[:n])
            for loc, op in ops:
                if loc in pm[:n]:
                    self.bind(loc, op.args["newcomm"], op.call, gid)

    def run(self, ops: dict[int, list[Op]]) -> None:
        heads = {loc: 0 for loc in ops}
        waiting: dict[int, dict[int, Op]] = {}
        stack = sorted(ops, reverse=True)
        while True:
            while stack:
                loc = stack.pop()
                while heads[loc] < len(ops[loc]):
                    op = ops[loc][heads[loc]]
                    parent = self.cmap[loc].get(op.args.get("oldcomm"))
                    if op.fid not in MATCHED or self.members.get(parent) is None:
                        self.local(loc, op)
                        heads[loc] += 1
                        continue
                    w = waiting.setdefault(parent, {})
                    w[loc] = op
                    if len(w) == len(self.members[parent]):
                        del waiting[parent]
                        self.collective(parent, w)
                        for x in w:
                            heads[x] += 1
                        stack.extend(sorted(w, reverse=True))
                    break
            if not waiting:
                return
            parent = min(waiting)                # stuck (ranks missing): no membership
            for loc, op in sorted(waiting.pop(parent).items()):
                self.local(loc, op)
                heads[loc] += 1
                stack.append(loc)

    def tables(self) -> dict[str, Table]:
        ids = sorted(self.names)
        comms = Table({"id": np.array(ids, np.int64),
                       "name": _obj(self.names[i] for i in ids)})
        mem = [(i, loc) for i in ids for loc in (self.members[i] or ())]
        members = Table({"comm": np.array([m[0] for m in mem], np.int64),
                         "location": np.array([m[1] for m in mem], np.int64)})
        h = sorted(self.handles)
        handles = Table({k: np.array([x[j] for x in h], np.int64)
                         for j, k in enumerate(HANDLE_COLUMNS)})
        return {"communicators": conform(comms, DEFINITION_TABLES["communicators"]),
                "communicator_members": conform(members, DEFINITION_TABLES["communicator_members"]),
                "communicator_handles": handles}


def _obj(xs) -> np.ndarray:
    xs = list(xs)
    out = np.empty(len(xs), object)
    out[:] = xs
    return out


def _setop(fid: int, x: tuple, y: tuple) -> tuple:
    if fid == 73:
        return x + tuple(v for v in y if v not in x)
    if fid == 74:
        return tuple(v for v in x if v in y)
    return tuple(v for v in x if v not in y)


def _subgroup(fid: int, g, a: dict):
    if g is None:
        return None
    if fid in (76, 77):
        idx = list(a["ranks"])
    else:
        idx = [i for first, last, stride in a["ranges"]
               for i in range(first, last + (1 if stride > 0 else -1), stride)]
    if any(not 0 <= i < len(g) for i in idx):
        return None
    if fid in (76, 78):
        return tuple(g[i] for i in idx)
    drop = set(idx)
    return tuple(v for i, v in enumerate(g) if i not in drop)


def communicator_tables(ops: dict[int, list[Op]]) -> dict[str, Table]:
    """The communicator tables from every location's ops (empty: world and selves)."""
    rp = Replay(sorted(ops))
    rp.run(ops)
    return rp.tables()


class CommMap:
    """Per location: (handle, call) -> communicator id; (id, comm rank) -> location."""

    def __init__(self, tables: dict[str, Table], location: int):
        h = tables["communicator_handles"]
        sel = h["location"] == location
        order = np.lexsort((h["call"][sel], h["handle"][sel]))
        self.h_handle = h["handle"][sel][order]
        self.h_call = h["call"][sel][order]
        self.h_comm = h["comm"][sel][order]
        m = tables["communicator_members"]
        ids = tables["communicators"]["id"]
        self.size = np.zeros(int(ids.max(initial=0)) + 1, np.int64)
        np.add.at(self.size, m["comm"], 1)
        self.start = np.concatenate([[0], np.cumsum(self.size)[:-1]])
        self.flat = m["location"]                # grouped by comm, in rank order
        self.location = location

    def comm(self, handle: np.ndarray, call: np.ndarray) -> np.ndarray:
        """Communicator id of each (handle, call); 0 = none / not known."""
        handle = np.asarray(handle, np.int64)
        call = np.asarray(call, np.int64)
        out = np.zeros(len(handle), np.int64)
        if not len(self.h_handle):
            return out
        big = np.int64(1) << 40                  # call indices stay far below 2**40
        pos = np.searchsorted(self.h_handle * big + self.h_call, handle * big + call, "left") - 1
        ok = pos >= 0
        ok[ok] = self.h_handle[pos[ok]] == handle[ok]
        out[ok] = self.h_comm[pos[ok]]
        return out

    def location_of(self, comm: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """Location of comm-local ``rank`` in ``comm``; 0 = none / not known."""
        comm = np.asarray(comm, np.int64)
        rank = np.asarray(rank, np.int64)
        c = np.clip(comm, 0, len(self.size) - 1)
        ok = (comm > 0) & (comm < len(self.size)) & (rank >= 0) & (rank < self.size[c])
        out = np.zeros(len(comm), np.int64)
        out[ok] = self.flat[self.start[c[ok]] + rank[ok]]
        return out

    def my_rank(self, comm: np.ndarray) -> np.ndarray:
        """This location's rank in each comm; -1 = not known."""
        comm = np.asarray(comm, np.int64)
        out = np.full(len(comm), -1, np.int64)
        for c in np.unique(comm[comm > 0]):
            if c < len(self.size) and self.size[c]:
                m = self.flat[self.start[c]:self.start[c] + self.size[c]]
                hit = np.nonzero(m == self.location)[0]
                if len(hit):
                    out[comm == c] = hit[0]
        return out
