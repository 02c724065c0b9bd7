"""Answers from a trace, on any number of ranks: a profile of regions and the
communication between locations.  Both read any format partrace reads (or its
HDF5 output) and give the same figures whatever the rank count.

Results are plain records (lists of dicts, one per region or pair: their number
grows with the definitions, not with the events), rendered as text, CSV or JSON
by :mod:`partrace.analysis.render`, or as pandas DataFrames by the Python API.
"""
from __future__ import annotations

import os

import numpy as np

from ..engine.mpi import Comm, serial


def _names(defs, table: str) -> dict[int, str]:
    t = defs.tables.get(table)
    if t is None:
        return {}
    return {int(i): str(n) for i, n in zip(t["id"], t["name"])}


def profile(path: str | os.PathLike, *, comm: Comm | None = None, format: str | None = None,
            memory: int | None = None, tmpdir=None, progress=None, per_location: bool = False,
            reader_options: dict | None = None) -> dict:
    """{"regions": [per region record], "locations": [per (location, region)] or None,
    "unmatched": {"leave": n, "enter": n}} on rank 0 (None on other ranks)."""
    from ..engine.pipeline import DEFAULT_MEMORY, open_on_all_ranks, run
    from .regions import ProfileSink, _assemble
    comm = comm or serial()
    sink = ProfileSink()
    reader = open_on_all_ranks(comm, path, format, reader_options)
    if reader.locations_in_one_unit:    # no exchange: fold each rank's chunks, sum on rank 0
        from ..engine.fold import fold
        defs, acc, _ = fold(comm, path, tables={"events"}, start=sink.fold_start, step=sink.fold_step,
                         combine=ProfileSink.fold_combine, progress=progress, reader=reader)
        if comm.rank != 0:
            return None
        result = _assemble(acc.reg_ids, [(acc.my_locs, acc.calls, acc.incl, acc.excl,
                                          acc.unmatched_leave, acc.depth)])
        return _profile_records(defs, result, per_location)
    run(comm, path, sink, format=format, progress=progress, memory=memory or DEFAULT_MEMORY,
        spill_dir=tmpdir, reader_options=reader_options)
    if comm.rank != 0:
        return None
    return _profile_records(sink.defs, sink.result, per_location)


def _profile_records(defs, res: dict, per_location: bool) -> dict:
    regions = _names(defs, "regions")
    locations = _names(defs, "locations")
    calls, incl, excl = res["calls"], res["inclusive"], res["exclusive"]
    out = []
    for j in np.flatnonzero(calls.sum(axis=0)):
        c = calls[:, j]
        who = c > 0
        per_loc = incl[who, j]
        mean = float(per_loc.mean())
        rid = int(res["regions"][j])
        out.append({"region": regions.get(rid, f"region {rid}") if rid else "(undefined region)",
                    "region_id": rid, "calls": int(c.sum()),
                    "inclusive_ns": int(incl[:, j].sum()), "exclusive_ns": int(excl[:, j].sum()),
                    "locations": int(who.sum()),
                    "inclusive_min_ns": int(per_loc.min()), "inclusive_mean_ns": mean,
                    "inclusive_max_ns": int(per_loc.max()),
                    "imbalance": float(per_loc.max() / mean) if mean else 1.0})
    rows = None
    if per_location:
        rows = []
        li, ri = np.nonzero(calls)
        for a, j in zip(li.tolist(), ri.tolist()):
            lid, rid = int(res["locations"][a]), int(res["regions"][j])
            rows.append({"location": locations.get(lid, str(lid)), "location_id": lid,
                         "region": regions.get(rid, f"region {rid}") if rid else "(undefined region)",
                         "region_id": rid, "calls": int(calls[a, j]),
                         "inclusive_ns": int(incl[a, j]), "exclusive_ns": int(excl[a, j])})
    return {"regions": out, "locations": rows,
            "unmatched": {"leave": int(res["unmatched_leave"].sum()),
                          "enter": int(res["unmatched_enter"].sum())}}


def roots(defs) -> dict[int, int]:
    """Each location's outermost ancestor (its process, rank or PE): parents followed to 0."""
    t = defs.tables["locations"]
    parent = {int(i): int(p) for i, p in zip(t["id"], t["parent"])}
    out = {}
    for loc in parent:
        seen, r = set(), loc
        while parent.get(r, 0) and r not in seen:      # a cycle ends the walk, never loops
            seen.add(r)
            r = parent[r]
        out[loc] = r
    return out


def communication(path: str | os.PathLike, *, comm: Comm | None = None, format: str | None = None,
                  progress=None, with_names: bool = False, by: str = "location",
                  reader_options: dict | None = None) -> dict:
    """{"pairs": [...], "histogram": [...], "collectives": [...]} on rank 0 (None elsewhere).
    ``by="process"`` sums the pairs of locations under the same outermost location (the
    threads of a process, the LPs of a PE)."""
    from ..engine.fold import fold
    from . import messages as C
    comm = comm or serial()
    defs, acc, _ = fold(comm, path, tables={"events"}, start=C.start, step=C.step, combine=C.combine,
                     format=format, progress=progress, reader_options=reader_options)
    if comm.rank != 0:
        return None
    locations = _names(defs, "locations")
    regions = _names(defs, "regions")
    collops = _names(defs, "collectives")
    if by == "process" and len(acc.pairs):
        top = roots(defs)
        mapped = np.array([[top.get(s, s), top.get(r, r)] for s, r in acc.pairs.tolist()], np.int64)
        acc.pairs, acc.messages, acc.nbytes = C._sum_by(mapped, acc.messages, acc.nbytes)
    elif by != "location":
        raise ValueError(f"by must be 'location' or 'process', not {by!r}")
    pairs = [{"sender_id": int(s), "receiver_id": int(r), "sender": locations.get(int(s), str(s)),
              "receiver": locations.get(int(r), str(r)), "messages": int(m), "bytes": int(b)}
             for (s, r), m, b in zip(acc.pairs.tolist(), acc.messages.tolist(), acc.nbytes.tolist())]
    hist = [{"low": C.bin_range(b)[0], "high": C.bin_range(b)[1], "messages": int(acc.hist[b]),
             "bytes": int(acc.hist_bytes[b])} for b in np.flatnonzero(acc.hist).tolist()]
    per_op: dict[int, list[int]] = {}
    for (_, ident), n, s, r in zip(acc.coll.tolist(), acc.coll_calls.tolist(), acc.coll_sent.tolist(),
                                   acc.coll_received.tolist()):
        v = per_op.setdefault(ident, [0, 0, 0, 0])
        v[0] += n
        v[1] += s
        v[2] += r
        v[3] += 1
    colls = [{"collective": regions.get(i, f"region {i}") if i > 0 else collops.get(-i, f"collective {-i}"),
              "calls": v[0], "bytes_sent": v[1], "bytes_received": v[2], "locations": v[3]}
             for i, v in sorted(per_op.items())]
    out = {"pairs": pairs, "histogram": hist, "collectives": colls}
    if with_names:
        out["location_names"] = locations
    return out
