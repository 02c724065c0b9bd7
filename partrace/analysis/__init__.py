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
from .rows import Rows


def _names(defs, table: str) -> dict[int, str]:
    t = defs.tables.get(table)
    if t is None:
        return {}
    return {int(i): str(n) for i, n in zip(t["id"], t["name"])}


def profile(path: str | os.PathLike, *, comm: Comm | None = None, format: str | None = None,
            memory: int | None = None, tmpdir=None, progress=None, per_location: bool = False,
            reader_options: dict | None = None, exchange: bool = False) -> dict:
    """{"regions": [per region record], "locations": [per (location, region)] or None,
    "unmatched": {"leave": n, "enter": n}} on rank 0 (None on other ranks).

    Folded from each rank's units with no exchange and no global order (see
    :mod:`partrace.analysis.regions`).  ``exchange=True`` takes the reference path instead:
    each location's rows routed to one rank in global time order (``memory``, ``tmpdir``:
    its budget and spill folder)."""
    from .regions import ProfileFold, ProfileSink
    comm = comm or serial()
    if exchange:
        from ..engine.pipeline import DEFAULT_MEMORY, run
        sink = ProfileSink()
        run(comm, path, sink, format=format, progress=progress, memory=memory or DEFAULT_MEMORY,
            spill_dir=tmpdir, reader_options=reader_options)
        return _profile_records(sink.defs, sink.result, per_location) if comm.rank == 0 else None
    from ..engine.fold import fold
    from .regions import WALKED
    defs, acc, _ = fold(comm, path, tables={"events"}, start=ProfileFold, step=ProfileFold.step,
                        combine=ProfileFold.combine, end_unit=ProfileFold.end_unit, format=format,
                        progress=progress,
                        reader=_reader(comm, path, format, reader_options, {"events": WALKED}))
    return _profile_records(defs, acc.figures(defs), per_location) if comm.rank == 0 else None


def _reader(comm: Comm, path, format, reader_options, selection: dict):
    """The trace opened on every rank, asked to decode only ``selection`` (readers that
    ignore it decode everything; the folds take what they need)."""
    from ..engine.pipeline import open_on_all_ranks
    reader = open_on_all_ranks(comm, path, format, reader_options)
    reader.selection = selection
    return reader


def _region_name(regions: dict[int, str], rid: int) -> str:
    return regions.get(rid, f"region {rid}") if rid else "(undefined region)"


def _profile_records(defs, fig: dict, per_location: bool) -> dict:
    """Records from the sparse per (location, region) figures (sorted by location, region
    index): per region sums, and min / mean / max of the inclusive time over the locations
    that called it."""
    regions = _names(defs, "regions")
    locations = _names(defs, "locations")
    ridx, calls, incl, excl = fig["region_index"], fig["calls"], fig["inclusive"], fig["exclusive"]
    order = np.argsort(ridx, kind="stable")
    out = []
    if len(order):
        r = ridx[order]
        starts = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
        nloc = np.diff(np.r_[starts, len(r)])
        sums = [np.add.reduceat(a[order], starts) for a in (calls, incl, excl)]
        lo, hi = (f.reduceat(incl[order], starts) for f in (np.minimum, np.maximum))
        rid = fig["region"][order][starts]
        for j in range(len(starts)):
            mean = float(sums[1][j]) / int(nloc[j])
            out.append({"region": _region_name(regions, int(rid[j])), "region_id": int(rid[j]),
                        "calls": int(sums[0][j]), "inclusive_ns": int(sums[1][j]),
                        "exclusive_ns": int(sums[2][j]), "locations": int(nloc[j]),
                        "inclusive_min_ns": int(lo[j]), "inclusive_mean_ns": mean,
                        "inclusive_max_ns": int(hi[j]),
                        "imbalance": float(int(hi[j]) / mean) if mean else 1.0})
    rows = None
    if per_location:
        rows = [{"location": locations.get(lid, str(lid)), "location_id": lid,
                 "region": _region_name(regions, rid), "region_id": rid, "calls": c,
                 "inclusive_ns": i, "exclusive_ns": e}
                for lid, rid, c, i, e in zip(fig["location"].tolist(), fig["region"].tolist(),
                                             calls.tolist(), incl.tolist(), excl.tolist())]
    return {"regions": out, "locations": rows,
            "unmatched": {"leave": int(fig["unmatched_leave"]), "enter": int(fig["unmatched_enter"])}}


def _name_columns(columns: list[np.ndarray], names: dict[int, str]) -> list[np.ndarray]:
    """The name of each id of each column (its decimal form where the definitions have
    none), vectorized over the distinct ids: pairs number up to locations squared.  One
    table of names serves every column (senders and receivers are the same locations)."""
    ids = [c for c in columns if len(c)]
    if not ids:
        return [np.empty(0, object) for _ in columns]
    lo, hi = min(int(c.min()) for c in ids), max(int(c.max()) for c in ids)
    if hi - lo < 4 * len(names) + 4096:     # dense ids (as they are): a table, no sort
        table = np.array([names.get(i, str(i)) for i in range(lo, hi + 1)], object)
        return [table[c - lo] for c in columns]
    uniq, inv = np.unique(np.concatenate(columns), return_inverse=True)
    named = np.array([names.get(i, str(i)) for i in uniq.tolist()], object)[inv.ravel()]
    return np.split(named, np.cumsum([len(c) for c in columns[:-1]]))


def _pair_rows(keys: np.ndarray, sums: np.ndarray, locations: dict[int, str]) -> Rows:
    # columns, not a dict per pair: pairs can number millions (rows.py)
    sender, receiver = _name_columns([keys[:, 0], keys[:, 1]], locations)
    return Rows({"sender_id": keys[:, 0], "receiver_id": keys[:, 1],
                 "sender": sender, "receiver": receiver,
                 "messages": sums[:, 0], "bytes": sums[:, 1].view(np.uint64)})


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
    """{"pairs": Rows, "histogram": [...], "collectives": [...]} on rank 0 (None elsewhere);
    ``pairs`` iterates as dict rows and keeps its numpy columns in ``.columns``.
    ``by="process"`` sums the pairs of locations under the same outermost location (the
    threads of a process, the LPs of a PE)."""
    from ..engine.fold import fold
    from . import messages as C
    if by not in ("location", "process"):
        raise ValueError(f"by must be 'location' or 'process', not {by!r}")
    comm = comm or serial()
    defs, acc, _ = fold(comm, path, tables={"events"}, start=C.start, step=C.step, combine=C.combine,
                        format=format, progress=progress,
                        reader=_reader(comm, path, format, reader_options, {"events": C.COLUMNS}))
    if comm.rank != 0:
        return None
    locations = _names(defs, "locations")
    regions = _names(defs, "regions")
    collops = _names(defs, "collectives")
    keys, sums = acc.pairs.items()
    if by == "process" and len(keys):
        top = roots(defs)
        ids = np.array(sorted(top), np.int64)
        tops = np.array([top[i] for i in ids.tolist()], np.int64)

        def mapped(x):      # an id the definitions lack stays itself
            at = np.minimum(np.searchsorted(ids, x), len(ids) - 1)
            return np.where(ids[at] == x, tops[at], x)
        keys, sums = C._sum_by(np.stack([mapped(keys[:, 0]), mapped(keys[:, 1])], axis=1), sums)
    pairs = _pair_rows(keys, sums, locations)
    hist_bytes = acc.hist_bytes.view(np.uint64)
    hist = [{"low": C.bin_range(b)[0], "high": C.bin_range(b)[1], "messages": int(acc.hist[b]),
             "bytes": int(hist_bytes[b])} for b in np.flatnonzero(acc.hist).tolist()]
    ckeys, csums = acc.coll.items()
    per_op: dict[int, list[int]] = {}
    for (_, ident), n, s, r in zip(ckeys.tolist(), csums[:, 0].tolist(),
                                   csums[:, 1].view(np.uint64).tolist(), csums[:, 2].view(np.uint64).tolist()):
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
