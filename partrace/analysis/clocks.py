"""The clock condition: does every message's receive end after its send starts?

Each node of a cluster keeps its own clock; a trace merged from them can show a
receive before its send.  This fold finds the messages, checks them and says
what clock offsets they imply, on any number of ranks:

1. Each rank takes from its decoded rows the message records: a SEND row is
   (its location -> its peer), a RECV row is (its peer -> its location); rows
   whose peer is 0 are no messages.
2. The records are routed by the pair of groups (processes, or locations) they
   join, smaller first, with one alltoallv: both directions between two groups
   meet on one rank, and no rank holds more than its share of the pairs.
3. MPI's non-overtaking rule pairs them: the k-th send from S to R with tag T on
   communicator C (in S's order) meets the k-th such receive (in R's order).
4. Per pair of groups: messages each way, violations (receive time < send time),
   the largest one, the least delay each way (receive time - send time) and the
   offset they imply, as NTP and ovnisync estimate it: if B's clock runs ``o``
   ahead of A's, a message A->B shows delay ``d + o`` and B->A shows ``d' - o``
   (d, d' >= 0 the true delays), so ``o = (min d_ab - min d_ba) / 2`` within
   ``(min d_ab + min d_ba) / 2`` (half the least round trip).  With messages in
   one direction only, the least delay bounds the offset on one side.
   The same estimate from the first and the last tenth of the pair's time span
   gives the drift, where both have messages both ways.  A negative bound says the
   messages cannot come from clocks a constant offset apart: they drifted (by more
   than the least round trip) within the span the estimate covers.
5. The rows of the pairs (their number grows with the groups, not the events)
   meet on rank 0, sorted: the same answer at any rank count.

A row's time is the one its format gives the record: DUMPI puts a send at the
start of its call and a receive at the end of the call that completes it (the
clock condition as Scalasca checks it), OTF and OTF2 at the record's time.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..engine.mpi import Comm, serial
from ..model import Definitions, Kind, Table

# the columns of events the fold reads (comm and tag are zeros where a format lacks them),
# with those of collective calls
COLUMNS = ("kind", "time", "location", "seq", "peer", "comm", "tag", "root", "collop", "duration")
SEND, RECV = int(Kind.SEND), int(Kind.RECV)
# a record's fields, as the columns of one int64 array
SENDER, RECEIVER, COMM, TAG, SIDE, TIME, SEQ = range(7)
WIDTH = 7
# fields of a matched message
M_SENDER, M_RECEIVER, M_SEND_TIME, M_RECV_TIME, M_SEND_SEQ, M_RECV_SEQ = range(6)


@dataclass
class MessageRecords:
    """This rank's message records, chunk by chunk ((n, WIDTH) int64 arrays), and its
    collective rows (clock_collectives.rows)."""

    parts: list = field(default_factory=list)
    collective_rows: list = field(default_factory=list)

    def collectives(self) -> np.ndarray:
        return np.concatenate(self.collective_rows) if self.collective_rows else \
            np.zeros((0, 8), np.int64)

    def array(self) -> np.ndarray:
        return np.concatenate(self.parts) if self.parts else np.zeros((0, WIDTH), np.int64)


def start(defs: Definitions) -> MessageRecords:
    return MessageRecords()


def _column(ev: Table, name: str, rows: np.ndarray) -> np.ndarray:
    """``ev[name]`` at ``rows`` as int64 (zeros if the format has no such column)."""
    if name not in ev.names:
        return np.zeros(len(rows), np.int64)
    return np.asarray(ev[name])[rows].astype(np.int64)


def step(acc: MessageRecords, chunk: dict[str, Table]) -> MessageRecords:
    """The messages of a chunk (for merge --sync: those alone)."""
    ev = chunk.get("events")
    if ev is None or not len(ev) or "peer" not in ev.names:
        return acc
    kind = np.asarray(ev["kind"])
    rows = np.flatnonzero(((kind == SEND) | (kind == RECV)) & (np.asarray(ev["peer"]) != 0))
    if not len(rows):
        return acc
    rec = np.empty((len(rows), WIDTH), np.int64)
    loc, peer = _column(ev, "location", rows), _column(ev, "peer", rows)
    recv = kind[rows] == RECV
    rec[:, SENDER] = np.where(recv, peer, loc)
    rec[:, RECEIVER] = np.where(recv, loc, peer)
    rec[:, COMM] = _column(ev, "comm", rows)
    rec[:, TAG] = _column(ev, "tag", rows)
    rec[:, SIDE] = recv
    rec[:, TIME] = _column(ev, "time", rows)
    rec[:, SEQ] = _column(ev, "seq", rows)
    acc.parts.append(rec)
    return acc


def step_all(acc: MessageRecords, chunk: dict[str, Table]) -> MessageRecords:
    """The messages and the collective rows of a chunk."""
    from .clock_collectives import rows
    ev = chunk.get("events")
    if ev is not None and len(ev):
        found = rows(ev)
        if found is not None:
            acc.collective_rows.append(found)
    return step(acc, chunk)


class Groups:
    """Each location's group (its outermost ancestor, or itself), as sorted arrays."""

    def __init__(self, defs: Definitions, by: str):
        from . import roots
        t = defs.tables["locations"]
        ids = np.asarray(t["id"], np.int64)
        top = roots(defs) if by == "process" else {int(i): int(i) for i in ids}
        self.ids = np.sort(ids)
        self.tops = np.array([top[i] for i in self.ids.tolist()], np.int64)

    def of(self, loc: np.ndarray) -> np.ndarray:
        """The group of each location (an id the definitions lack is its own group)."""
        if not len(self.ids):
            return loc
        at = np.minimum(np.searchsorted(self.ids, loc), len(self.ids) - 1)
        return np.where(self.ids[at] == loc, self.tops[at], loc)


def route(comm: Comm, rec: np.ndarray, groups: Groups) -> np.ndarray:
    """The records of the pairs of groups this rank owns, from every rank."""
    if comm.size == 1:
        return rec
    gs, gr = groups.of(rec[:, SENDER]), groups.of(rec[:, RECEIVER])
    lo, hi = np.minimum(gs, gr), np.maximum(gs, gr)
    # a multiplicative hash of the pair: neighbouring pairs go to different ranks
    h = (lo.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ hi.astype(np.uint64)
    h *= np.uint64(0xC2B2AE3D27D4EB4F)
    dest = ((h >> np.uint64(33)) % np.uint64(comm.size)).astype(np.int64)
    order = np.argsort(dest, kind="stable")
    return comm.alltoallv(rec[order], np.bincount(dest, minlength=comm.size))


def _run_starts(keys: np.ndarray) -> np.ndarray:
    """Where each run of equal rows of sorted ``keys`` (n, k) starts."""
    if not len(keys):
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])


def _packed_key(rec: np.ndarray) -> np.ndarray | None:
    """(sender, receiver, comm, tag, side) of each record as one int64 that sorts as the five
    do (side the lowest bit), or None when their ranges together need more than 62 bits."""
    span, bounds = 1, []
    for col in (SENDER, RECEIVER, COMM, TAG):
        lo, hi = int(rec[:, col].min()), int(rec[:, col].max())
        bounds.append((col, lo, hi - lo + 1))
        span *= hi - lo + 1
    if span * 2 > 1 << 62:
        return None
    key = np.zeros(len(rec), np.int64)
    for col, lo, width in bounds:
        key *= width
        key += rec[:, col] - lo
    return key * 2 + rec[:, SIDE]


def _in_group_order(rec: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The records' order by (packed ``key``, time, seq), equal ones in input order: where
    the key and the time fit one int64 too, one stable sort of that (quick on records that
    come mostly in order, as they do), its ties then checked to be in seq order (else, or
    where they do not fit, a lexsort of the three)."""
    time, seq = rec[:, TIME], rec[:, SEQ]
    t0 = int(time.min())
    span = int(time.max()) - t0 + 1
    if (int(key.max()) + 1) * span < 1 << 63:
        joint = key * span + (time - t0)
        order = np.argsort(joint, kind="stable")
        j, q = joint[order], seq[order]
        if not ((j[1:] == j[:-1]) & (q[1:] < q[:-1])).any():
            return order
    return np.lexsort((seq, time, key))


def _sorted_groups(rec: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The records' order by (sender, receiver, comm, tag, side, time, seq), where each run of
    one (sender, receiver, comm, tag) starts in it, and whether each record in it is a
    receive.  Where the first five fit one word (ids and tags of a few bits each), a sort of
    that word with the time (:func:`_in_group_order`); else a lexsort of all seven.  The
    order is the same either way."""
    key = _packed_key(rec)
    if key is not None:
        order = _in_group_order(rec, key)
        key = key[order]
        group = key >> 1
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        return order, starts, (key & 1).astype(bool)
    c = rec.T
    order = np.lexsort((c[SEQ], c[TIME], c[SIDE], c[TAG], c[COMM], c[RECEIVER], c[SENDER]))
    return order, _run_starts(rec[order, :SIDE]), rec[order, SIDE] != 0


def match(rec: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(messages (n, 6): sender, receiver, send time, receive time, send seq, receive seq;
    unmatched sends; unmatched receives).  The k-th send of (sender, receiver, comm, tag) in
    the sender's (time, seq) order meets the k-th receive of it in the receiver's order."""
    if not len(rec):
        return np.zeros((0, 6), np.int64), 0, 0
    order, starts, recv = _sorted_groups(rec)
    # per (sender, receiver, comm, tag): its sends in order, then its receives in order
    sent = np.add.reduceat((~recv).astype(np.int64), starts)
    got = np.diff(np.r_[starts, len(rec)]) - sent
    run = np.repeat(np.arange(len(starts)), sent)       # the run of each send (sends lead)
    k = np.arange(len(run)) - np.repeat(np.cumsum(sent) - sent, sent)
    send = np.repeat(starts, sent) + k
    keep = k < got[run]
    send, recv = order[send[keep]], order[(starts[run] + sent[run] + k)[keep]]
    out = np.stack([rec[send, SENDER], rec[send, RECEIVER], rec[send, TIME], rec[recv, TIME],
                    rec[send, SEQ], rec[recv, SEQ]], axis=1)
    return out, int(sent.sum()) - len(out), int(got.sum()) - len(out)


NONE = np.iinfo(np.int64).max     # "no message" in a least delay
EDGE = 10       # the drift compares the first and the last 1/EDGE of a pair's time span


def _least(values: np.ndarray, starts: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """Per run (``starts`` of runs of sorted rows), the least of ``values`` over the rows
    where ``chosen``; NONE where no row of the run is chosen."""
    if not len(starts):
        return np.zeros(0, np.int64)
    return np.minimum.reduceat(np.where(chosen, values, NONE), starts)


def pair_figures(msgs: np.ndarray, groups: Groups) -> dict[str, np.ndarray]:
    """Per unordered pair of groups (a <= b), sorted: the figures of the module's step 4
    as columns.  Least delays are NONE where no message went that way."""
    gs, gr = groups.of(msgs[:, M_SENDER]), groups.of(msgs[:, M_RECEIVER])
    a, b = np.minimum(gs, gr), np.maximum(gs, gr)
    back = gs > gr      # b -> a
    ts, tr = msgs[:, M_SEND_TIME], msgs[:, M_RECV_TIME]
    order = np.lexsort((ts, b, a))
    a, b, back, ts, tr = a[order], b[order], back[order], ts[order], tr[order]
    starts = _run_starts(np.stack([a, b], axis=1))
    delay = tr - ts
    n_ab = np.add.reduceat((~back).astype(np.int64), starts) if len(starts) else starts
    n_ba = np.add.reduceat(back.astype(np.int64), starts) if len(starts) else starts
    late = np.maximum(ts - tr, 0)
    out = {"a": a[starts], "b": b[starts], "messages_ab": n_ab, "messages_ba": n_ba,
           "violations": np.add.reduceat((tr < ts).astype(np.int64), starts) if len(starts)
           else starts,
           "largest_violation": np.maximum.reduceat(late, starts) if len(starts) else starts,
           "least_ab": _least(delay, starts, ~back), "least_ba": _least(delay, starts, back)}
    # the first and the last tenth of each pair's time span (by send time): the drift
    # between them shows against their bounds, while within each the offset moves little
    if len(starts):
        first = ts[starts]
        last = np.maximum.reduceat(ts, starts)
        run = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(ts)]))
        tenth = (last[run] - first[run]) // EDGE
        ends = {}
        for name, part in (("early", ts <= first[run] + tenth),
                           ("late", ts >= last[run] - tenth)):
            ab, ba = part & ~back, part & back
            ends[name] = (_least(delay, starts, ab), _least(delay, starts, ba),
                          _at_least(delay, ts, starts, ab), _at_least(delay, ts, starts, ba))
        out.update(_drift(ends))
    else:
        out.update({k: np.zeros(0, np.int64) for k in ("drift_t0", "drift_t1")})
        out.update({k: np.zeros(0, float) for k in ("offset_t0", "offset_t1", "bound_t0",
                                                     "bound_t1")})
    return out


def _at_least(delay, ts, starts, chosen) -> np.ndarray:
    """Per run, the send time of the chosen message with the least delay (the first such)."""
    if not len(starts):
        return np.zeros(0, np.int64)
    n = len(delay)
    run = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    least = _least(delay, starts, chosen)
    hit = chosen & (delay == least[run])
    first = np.full(len(starts), n, np.int64)
    np.minimum.at(first, run[hit], np.flatnonzero(hit))
    return np.where(first < n, ts[np.minimum(first, n - 1)], 0)


def _drift(ends: dict) -> dict[str, np.ndarray]:
    """The offset (and its bound) each end of the span implies, at its time (``drift_t``:
    the mean send time of its two least delayed messages); NaN where it lacks a direction."""
    out = {}
    for i, name in enumerate(("early", "late")):
        ab, ba, t_ab, t_ba = ends[name]
        ok = (ab != NONE) & (ba != NONE)
        out[f"offset_t{i}"] = np.where(ok, (ab.astype(float) - ba) / 2, np.nan)
        out[f"bound_t{i}"] = np.where(ok, (ab.astype(float) + ba) / 2, np.nan)
        out[f"drift_t{i}"] = np.where(ok, t_ab // 2 + t_ba // 2 + (t_ab % 2 + t_ba % 2) // 2, 0)
    return out


def _concat(parts: list[dict]) -> dict[str, np.ndarray]:
    parts = [p for p in parts if p]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {}


def check(path: str | os.PathLike, *, comm: Comm | None = None, format: str | None = None,
          by: str = "process", progress=None, reader_options: dict | None = None,
          with_defs: bool = False) -> dict | None:
    """The clock condition of the trace's messages: a dict on rank 0 (None elsewhere),
    see :func:`report`; ``with_defs``: (that dict, the definitions) on rank 0."""
    from ..engine.fold import fold
    from . import _reader
    from . import clock_collectives as CC
    if by not in ("location", "process"):
        raise ValueError(f"by must be 'location' or 'process', not {by!r}")
    comm = comm or serial()
    reader = _reader(comm, path, format, reader_options, {"events": COLUMNS})
    defs, acc, _ = fold(comm, path, tables={"events"}, start=start, step=step_all, combine=None,
                        format=format, progress=progress, reduce=False, reader=reader)
    groups = Groups(defs, by)
    figures = unmatched = colls = None
    # the exchanges run outside comm.guard (a rank failing before one would leave the others
    # waiting in it): an error there reaches the CLI, which ends the whole job
    mine = route(comm, acc.array(), groups)
    with comm.guard():
        msgs, lost_sends, lost_recvs = match(mine)
        figures = pair_figures(msgs, groups) if len(msgs) else {}
        unmatched = (lost_sends, lost_recvs)
    comm.check()
    colls = CC.check(comm, acc.collectives(), defs, reader.schema(defs))
    everyone = comm.gather((figures, unmatched, colls))
    if comm.rank != 0:
        return None
    pairs = _concat([f for f, _, _ in everyone])
    if pairs:
        order = np.lexsort((pairs["b"], pairs["a"]))
        pairs = {k: v[order] for k, v in pairs.items()}
    lost = np.sum([u for _, u, _ in everyone], axis=0)
    result = report(defs, by, pairs, int(lost[0]), int(lost[1]))
    from ..timeunit import of
    # the figures are time-column values: ns of a wall clock but where the trace says not
    result["time_unit"] = "ns" if of(defs.attrs).wall_ns else \
        f"time column ({of(defs.attrs).name} x {of(defs.attrs).per_unit:g})"
    result["collectives"] = _collectives_record(
        defs, groups, CC.combine([c for _, _, (c, _) in everyone]),
        sum(u for _, _, (_, u) in everyone))
    return (result, defs) if with_defs else result


def report(defs: Definitions, by: str, pairs: dict, unmatched_sends: int,
           unmatched_receives: int) -> dict:
    """The answer as plain values: totals, and one record per pair of groups (a, b), a <= b,
    with its messages each way, violations, the largest violation, the least delay each way
    (None: no message that way), the offset of b's clock from a's with its bound, and,
    where the first and last tenth of the pair's time span carried messages both ways,
    its drift."""
    names = distinct_names(defs)
    records = []
    cols = {k: v.tolist() for k, v in pairs.items()}
    for i in range(len(cols.get("a", ()))):
        a, b = cols["a"][i], cols["b"][i]
        ab, ba = cols["least_ab"][i], cols["least_ba"][i]
        ab, ba = (None if d == NONE else d for d in (ab, ba))
        r = {"a": names.get(a, str(a)), "b": names.get(b, str(b)), "a_id": a, "b_id": b,
             "messages_ab": cols["messages_ab"][i], "messages_ba": cols["messages_ba"][i],
             "violations": cols["violations"][i],
             "largest_violation_ns": cols["largest_violation"][i],
             "least_delay_ab_ns": ab, "least_delay_ba_ns": ba}
        r.update(_offset(a, b, ab, ba))
        r.update(_drift_record(cols, i, a == b))
        records.append(r)
    worst = max(records, key=lambda r: r["largest_violation_ns"], default=None)
    return {"groups": by, "messages": sum(r["messages_ab"] + r["messages_ba"] for r in records),
            "unmatched_sends": unmatched_sends, "unmatched_receives": unmatched_receives,
            "violations": sum(r["violations"] for r in records),
            "largest_violation_ns": worst["largest_violation_ns"] if worst else 0,
            "largest_violation_pair": [worst["a"], worst["b"]]
            if worst and worst["largest_violation_ns"] else None,
            "pairs": records}


def _offset(a: int, b: int, ab, ba) -> dict:
    """b's clock minus a's, from the least delays each way: the estimate and its bound when
    both ways carried messages, else the one-sided limit (offset <= least a->b delay,
    offset >= -least b->a delay); None within one group."""
    if a == b:
        return {"offset_ns": None, "offset_bound_ns": None, "offset_min_ns": None,
                "offset_max_ns": None}
    return {"offset_ns": (ab - ba) / 2 if ab is not None and ba is not None else None,
            "offset_bound_ns": (ab + ba) / 2 if ab is not None and ba is not None else None,
            "offset_min_ns": -ba if ba is not None else None,
            "offset_max_ns": ab if ab is not None else None}


def _drift_record(cols: dict, i: int, same: bool) -> dict:
    """The offsets of the first and last tenth and the drift between them (ns of offset per
    ms, i.e. ppm), with its bound: the trace shows a drift only where it exceeds the bound."""
    o0, o1 = cols["offset_t0"][i], cols["offset_t1"][i]
    b0, b1 = cols["bound_t0"][i], cols["bound_t1"][i]
    t0, t1 = cols["drift_t0"][i], cols["drift_t1"][i]
    if same or o0 != o0 or o1 != o1 or t1 <= t0:       # NaN: an end lacks a direction
        return {"drift_ppm": None, "drift_bound_ppm": None, "drift_from": None}
    return {"drift_ppm": (o1 - o0) / (t1 - t0) * 1e6,
            "drift_bound_ppm": (b0 + b1) / (t1 - t0) * 1e6,
            "drift_from": [{"time_ns": t0, "offset_ns": o0, "bound_ns": b0},
                           {"time_ns": t1, "offset_ns": o1, "bound_ns": b1}]}


def _collectives_record(defs: Definitions, groups: Groups, totals: dict, unpaired: int) -> dict:
    """The collective instances as plain values; the worst violation's communicator, k and
    the two processes (or locations) it runs between: who entered last (or the root it
    waited for) and who left first."""
    names = distinct_names(defs)
    out = {"instances": totals["instances"], "checked": totals["checked"],
           "violations": totals["violations"], "unpaired_rows": unpaired,
           "largest_violation_ns": 0, "largest_violation": None}
    if totals["largest"] is not None:
        amount, comm, k, src, dst = totals["largest"]
        a, b = groups.of(np.array([src, dst], np.int64)).tolist()
        out["largest_violation_ns"] = amount
        out["largest_violation"] = {"communicator": comm, "call": k,
                                    "entered_last": names.get(a, str(a)),
                                    "left_first": names.get(b, str(b))}
    return out


def distinct_names(defs: Definitions) -> dict[int, str]:
    """Each location's name, with its id where another location has the same name (every
    OTF2 process's "Master thread")."""
    from collections import Counter

    from . import _names
    names = _names(defs, "locations")
    shared = Counter(names.values())
    return {i: f"{n} ({i})" if shared[n] > 1 else n for i, n in names.items()}
