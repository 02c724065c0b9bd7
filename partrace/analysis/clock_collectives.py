"""Collective calls against the clock condition, as Scalasca checks them: a collective is
a many-to-many message, so no member may leave it before the data it waits for was
entered.  Per instance (the k-th call of each member location on a communicator, as MPI
requires every member to call a communicator's collectives in one order):

* barrier, all-to-all (collective types 1, 4): every member leaves after every member
  entered: ``max(start) - min(end)`` > 0 is a violation of that size;
* one-to-all (2): every member leaves after the root entered: ``root start - min(end)``;
* all-to-one (3): the root leaves after every member entered: ``max(start) - root end``;
* unknown types (0), scans (each rank waits for the lower ranks alone), instances
  whose root did not call and instances with other callers than their communicator's
  members are not checked (where the definitions list members, a communicator they do
  not list is not checked either: see :func:`complete`).

A call is a COLLECTIVE row (its time the start, ``duration`` after it the end, in the
column's unit) or a COLLECTIVE_BEGIN row and the COLLECTIVE_END row after it on its
location.  Calls are routed twice between ranks, by location (to pair begin and end rows
and count each location's calls) and then by instance; only the totals meet on rank 0.
"""
from __future__ import annotations

import numpy as np

from ..engine.mpi import Comm
from ..model import Definitions, Kind, Table

COLUMNS = ("kind", "time", "location", "seq", "comm", "root", "collop", "duration")
COLLECTIVE, BEGIN, END = int(Kind.COLLECTIVE), int(Kind.COLLECTIVE_BEGIN), int(Kind.COLLECTIVE_END)
# fields of a row record, then of a call record
LOC, SEQ, KIND, TIME, COMM, ROOT, OP, DUR = range(8)
C_LOC, C_SEQ, C_COMM, C_START, C_END, C_ROOT, C_OP, C_K, C_END_SEQ = range(9)
CALL_WIDTH = 9
NO_ROW = -1     # the end seq of a one-record collective: its end is no row (rows at or after
                # its end time come after it)
BARRIER, ONE_TO_ALL, ALL_TO_ONE, ALL_TO_ALL = 1, 2, 3, 4


def rows(ev: Table) -> np.ndarray | None:
    """The collective rows of a decoded events table, (n, 8) int64 (duration as decoded)."""
    kind = np.asarray(ev["kind"])
    at = np.flatnonzero((kind == COLLECTIVE) | (kind == BEGIN) | (kind == END))
    if not len(at):
        return None
    out = np.zeros((len(at), 8), np.int64)
    for field, name in ((LOC, "location"), (SEQ, "seq"), (KIND, "kind"), (TIME, "time"),
                        (COMM, "comm"), (ROOT, "root"), (OP, "collop")):
        if name in ev.names:
            out[:, field] = np.asarray(ev[name])[at]
    if "duration" in ev.names:
        out[:, DUR] = np.asarray(ev["duration"])[at].astype(np.int64)
    return out


def ns_per_duration(defs: Definitions, schema) -> float:
    """What one unit of the ``duration`` column is in ns: its unit says ns or ticks (of
    ``ticks_per_second``, a nanosecond where the definitions do not say)."""
    col = next((c for c in schema.get("events", []) if c.name == "duration"), None)
    if col is None or col.unit != "ticks":
        return 1.0
    return 1e9 / float(defs.attrs.get("ticks_per_second", 1e9))


def _hashed(keys: list[np.ndarray], size: int) -> np.ndarray:
    h = np.zeros(len(keys[0]), np.uint64)
    for k in keys:
        h = (h ^ k.astype(np.uint64)) * np.uint64(0x9E3779B97F4A7C15)
    return ((h >> np.uint64(33)) % np.uint64(size)).astype(np.int64)


def _send(comm: Comm, recs: np.ndarray, dest: np.ndarray) -> np.ndarray:
    if comm.size == 1:
        return recs
    order = np.argsort(dest, kind="stable")
    return comm.alltoallv(recs[order], np.bincount(dest, minlength=comm.size))


def calls(recs: np.ndarray) -> tuple[np.ndarray, int]:
    """(call records (n, CALL_WIDTH) with each call's k on its location and communicator,
    rows left unpaired) from all the collective rows of some locations."""
    recs = recs[np.lexsort((recs[:, SEQ], recs[:, LOC]))]
    single = recs[:, KIND] == COLLECTIVE
    s = recs[single]
    # a begin row and the next begin or end row of its location (a one-record collective
    # may lie between them: OTF writes them so)
    edges = recs[~single]
    kind = edges[:, KIND]
    nxt = np.r_[edges[1:], np.zeros((1, 8), np.int64)]
    paired = (kind == BEGIN) & (nxt[:, KIND] == END) & (nxt[:, LOC] == edges[:, LOC])
    unpaired = len(edges) - 2 * int(paired.sum())
    begin, end = edges[paired], nxt[paired]
    # a begin row names the call (OTF); where it does not, its end row does (OTF2 names both)
    named = begin[:, COMM] != 0
    out = np.zeros((len(s) + len(begin), CALL_WIDTH), np.int64)
    n = len(s)
    out[:n, C_END_SEQ], out[n:, C_END_SEQ] = NO_ROW, end[:, SEQ]
    out[:n, C_LOC], out[:n, C_SEQ], out[:n, C_COMM] = s[:, LOC], s[:, SEQ], s[:, COMM]
    out[:n, C_START], out[:n, C_END] = s[:, TIME], s[:, TIME] + s[:, DUR]
    out[:n, C_ROOT], out[:n, C_OP] = s[:, ROOT], s[:, OP]
    out[n:, C_LOC], out[n:, C_SEQ] = begin[:, LOC], begin[:, SEQ]
    out[n:, C_START], out[n:, C_END] = begin[:, TIME], end[:, TIME]
    for f, g in ((C_COMM, COMM), (C_ROOT, ROOT), (C_OP, OP)):
        out[n:, f] = np.where(named, begin[:, g], end[:, g])
    out = out[np.lexsort((out[:, C_SEQ], out[:, C_COMM], out[:, C_LOC]))]
    keys = out[:, [C_LOC, C_COMM]]
    first = np.zeros(len(out), np.int64)
    if len(out):
        starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])
        first[starts] = starts
        out[:, C_K] = np.arange(len(out)) - np.maximum.accumulate(first)
    return out, unpaired


def complete(comm_ids: np.ndarray, callers: np.ndarray, sizes: dict[int, int]) -> np.ndarray:
    """Per instance: as many callers as its communicator has members.  Where the definitions
    list members for some communicators, one they do not list is not trusted either: its
    id may name a group of its own on every rank (OTF2's self-like communicators, as
    SST/macro writes them), whose calls the (comm, k) rule would mix.  A format that lists
    none (OTF) is trusted whole."""
    if not sizes:
        return np.ones(len(comm_ids), bool)
    ids = np.array(sorted(sizes), np.int64)
    n = np.array([sizes[i] for i in ids.tolist()], np.int64)
    at = np.minimum(np.searchsorted(ids, comm_ids), len(ids) - 1)
    return (ids[at] == comm_ids) & (n[at] == callers)


def sizes_of(defs: Definitions) -> dict[int, int]:
    """Each communicator's member count, where the definitions list its members."""
    t = defs.tables.get("communicator_members")
    if t is None or not len(t):
        return {}
    comms, counts = np.unique(np.asarray(t["comm"], np.int64), return_counts=True)
    return dict(zip(comms.tolist(), counts.tolist()))


def instances(calls: np.ndarray, types: dict[int, int], sizes: dict[int, int]) -> dict:
    """Per instance (comm, k) of the calls (every member's call on this rank): the
    violation, as the module says; totals and the largest (amount, comm, k, from, to).
    Instances with fewer or more callers than their communicator's listed members are not
    checked."""
    c = calls[np.lexsort((calls[:, C_LOC], calls[:, C_K], calls[:, C_COMM]))]
    out = {"instances": 0, "checked": 0, "violations": 0, "largest": None}
    if not len(c):
        return out
    key = c[:, [C_COMM, C_K]]
    starts = np.flatnonzero(np.r_[True, (key[1:] != key[:-1]).any(axis=1)])
    run = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(c)]))
    whole = complete(c[starts, C_COMM], np.diff(np.r_[starts, len(c)]), sizes)
    ctype = np.where(whole, type_of(c[starts, C_OP], types), 0)
    big = np.iinfo(np.int64).max
    latest = np.maximum.reduceat(c[:, C_START], starts)
    earliest_end = np.minimum.reduceat(c[:, C_END], starts)
    is_root = c[:, C_LOC] == c[starts, C_ROOT][run]
    root_start = np.minimum.reduceat(np.where(is_root, c[:, C_START], big), starts)
    root_end = np.minimum.reduceat(np.where(is_root, c[:, C_END], big), starts)
    has_root = root_start != big
    amount = np.select([(ctype == BARRIER) | (ctype == ALL_TO_ALL),
                        (ctype == ONE_TO_ALL) & has_root, (ctype == ALL_TO_ONE) & has_root],
                       [latest - earliest_end, root_start - earliest_end, latest - root_end],
                       -big)
    checked = amount != -big
    late = checked & (amount > 0)
    out.update(instances=len(starts), checked=int(checked.sum()), violations=int(late.sum()))
    if late.any():
        # the worst instance (ties: the first by communicator and k), and who waited on whom
        j = int(np.flatnonzero(late)[np.argmax(amount[late])])
        members = c[starts[j]:starts[j] + np.diff(np.r_[starts, len(c)])[j]]
        root = int(c[starts[j], C_ROOT])
        last_in = int(members[np.argmax(members[:, C_START]), C_LOC])
        first_out = int(members[np.argmin(members[:, C_END]), C_LOC])
        src = root if ctype[j] == ONE_TO_ALL else last_in
        dst = root if ctype[j] == ALL_TO_ONE else first_out
        out["largest"] = (int(amount[j]), int(c[starts[j], C_COMM]), int(c[starts[j], C_K]),
                          src, dst)
    return out


def check(comm: Comm, recs: np.ndarray, defs: Definitions, schema) -> tuple[dict, int]:
    """(this rank's totals of the instances it was given, rows left unpaired here): collective."""
    scale = ns_per_duration(defs, schema)
    if scale != 1.0:
        recs = recs.copy()
        recs[:, DUR] = np.rint(recs[:, DUR] * scale).astype(np.int64)
    recs = _send(comm, recs, _hashed([recs[:, LOC]], comm.size) if comm.size > 1 else None)
    mine, unpaired = calls(recs)
    if comm.size > 1:
        mine = _send(comm, mine, _hashed([mine[:, C_COMM], mine[:, C_K]], comm.size))
    return instances(mine, types_of(defs), sizes_of(defs)), unpaired


def types_of(defs: Definitions) -> dict[int, int]:
    """Each collective operation's type (the definitions' ``collectives`` table)."""
    t = defs.tables.get("collectives")
    # a scan waits for the lower ranks only, whatever type the format gives it: not checked
    return {} if t is None else {int(i): 0 if "scan" in str(n).lower() else int(k)
                                 for i, n, k in zip(t["id"], t["name"], t["type"])}


def type_of(ops: np.ndarray, types: dict[int, int]) -> np.ndarray:
    """The type of each operation id (0: unknown)."""
    ids = np.array(sorted(types), np.int64)
    if not len(ids):
        return np.zeros(len(ops), np.int64)
    kinds = np.array([types[i] for i in ids.tolist()], np.int64)
    at = np.minimum(np.searchsorted(ids, ops), len(ids) - 1)
    return np.where(ids[at] == ops, kinds[at], 0)


def combine(parts: list[dict]) -> dict:
    """The totals of every rank, the largest violation of all (ties: lowest comm, k)."""
    out = {"instances": 0, "checked": 0, "violations": 0, "largest": None}
    for p in parts:
        for k in ("instances", "checked", "violations"):
            out[k] += p[k]
        if p["largest"] is not None and (out["largest"] is None or
                                         (-p["largest"][0], p["largest"][1:3]) <
                                         (-out["largest"][0], out["largest"][1:3])):
            out["largest"] = p["largest"]
    return out
