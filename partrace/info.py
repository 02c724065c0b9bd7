"""``partrace info``: what a trace holds, counted in parallel."""
from __future__ import annotations

import json

import numpy as np

from .engine.mpi import Comm
from .engine.pipeline import RunStats, decode_share, open_on_all_ranks, read_plan
from .engine.progress import Progress
from .model import Kind


class _Counts:
    """Counts rows chunk by chunk (a stand-in for the engine's run store)."""

    def __init__(self):
        self.rows: dict[str, int] = {}
        self.span: dict[str, tuple[int, int]] = {}
        self.events: dict[tuple[int, int], int] = {}
        self.regions: dict[int, int] = {}

    def add(self, name: str, t) -> None:
        self.rows[name] = self.rows.get(name, 0) + len(t)
        if not len(t):
            return
        lo, hi = int(t["time"].min()), int(t["time"].max())
        a, b = self.span.get(name, (lo, hi))
        self.span[name] = (min(a, lo), max(b, hi))
        if name == "events":
            pairs = np.stack([t["location"].astype(np.int64), t["kind"].astype(np.int64)], axis=1)
            uniq, counts = np.unique(pairs, axis=0, return_counts=True)
            for (loc, k), c in zip(uniq.tolist(), counts.tolist()):
                self.events[(loc, k)] = self.events.get((loc, k), 0) + c
            regs, counts = np.unique(t["region"], return_counts=True)
            for r, c in zip(regs.tolist(), counts.tolist()):
                self.regions[r] = self.regions.get(r, 0) + c


def gather_info(comm: Comm, path, format: str | None = None) -> dict | None:
    """The info report on rank 0 (None on other ranks); memory does not grow with the trace."""
    reader = open_on_all_ranks(comm, path, format)
    units, mine, defs = read_plan(comm, reader)
    schema = reader.schema(defs)
    counts = _Counts()
    for name in schema:
        counts.rows[name] = 0
    decode_share(comm, reader, mine, defs, schema, Progress(comm, mode="none"), RunStats(),
                 store=counts)
    parts = comm.gather({"rows": counts.rows, "span": counts.span, "events": counts.events,
                         "regions": counts.regions})
    if comm.rank != 0:
        return None
    rows, span, per, per_region = {}, {}, {}, {}
    for p in parts:
        for n, r in p["rows"].items():
            rows[n] = rows.get(n, 0) + r
        for n, (a, b) in p["span"].items():
            lo, hi = span.get(n, (a, b))
            span[n] = (min(lo, a), max(hi, b))
        for key, c in p["events"].items():
            per[key] = per.get(key, 0) + c
        for r, c in p["regions"].items():
            per_region[r] = per_region.get(r, 0) + c
    by_kind: dict[str, int] = {}
    by_loc: dict[int, dict[str, int]] = {}
    for (loc, k), c in sorted(per.items()):
        name = Kind(k).name if k in Kind._value2member_map_ else str(k)
        by_kind[name] = by_kind.get(name, 0) + c
        by_loc.setdefault(loc, {})[name] = c
    files = reader.source_files()
    return {
        "path": str(path),
        "format": defs.format,
        "size_bytes": int(sum(f.stat().st_size for f in files)),
        "files": len(files),
        "units": len(units),
        "locations": len(defs.tables["locations"]),
        "definitions": {n: len(t) for n, t in defs.tables.items()},
        "facts": defs.attrs,
        "rows": rows,
        "time_span_ns": {n: {"first": a, "last": b, "duration": b - a} for n, (a, b) in span.items()},
        "events_per_kind": by_kind,
        "events_per_region_group": _per_group(per_region, defs),
        "events_per_location": {str(k): v for k, v in by_loc.items()},
    }


def _per_group(per_region: dict[int, int], defs) -> dict[str, int]:
    """Event rows per region group (ovni: per model; DUMPI: MPI; ...); "none" = no region."""
    regions, groups = defs.tables.get("regions"), defs.tables.get("region_groups")
    group_of = dict(zip(regions["id"].tolist(), regions["group"].tolist())) if regions else {}
    name_of = dict(zip(groups["id"].tolist(), groups["name"].tolist())) if groups else {}
    out: dict[str, int] = {}
    for r, c in sorted(per_region.items()):
        g = group_of.get(r, 0) if r else 0
        name = "none" if not r else str(name_of.get(g, f"group {g}"))
        out[name] = out.get(name, 0) + c
    return out


def render(report: dict, as_json: bool = False) -> str:
    if as_json:
        return json.dumps(report, indent=1, default=str)
    lines = [
        f"trace:      {report['path']}",
        f"format:     {report['format']}",
        f"size:       {report['size_bytes']:,} bytes in {report['files']} files, "
        f"{report['units']} work units",
        f"locations:  {report['locations']}",
        "definitions: " + ", ".join(f"{n} {c}" for n, c in report["definitions"].items()),
    ]
    ev = report["time_span_ns"].get("events")
    if ev:
        lines.append(f"time span:  {ev['first']} .. {ev['last']} ns "
                     f"({ev['duration'] / 1e9:.6f} s)")
    lines.append("rows:       " + ", ".join(f"{n} {c:,}" for n, c in report["rows"].items()))
    lines.append("events per kind:")
    lines += [f"  {k:<20} {c:>12,}" for k, c in report["events_per_kind"].items()]
    if set(report["events_per_region_group"]) - {"none"}:
        lines.append("events per region group:")
        lines += [f"  {k:<20} {c:>12,}" for k, c in report["events_per_region_group"].items()]
    lines.append("events per location:")
    for loc, kinds in report["events_per_location"].items():
        lines.append(f"  {loc:>12}: " + ", ".join(f"{k} {c}" for k, c in kinds.items()))
    if report["facts"]:
        lines.append("facts:")
        for k, v in report["facts"].items():
            text = json.dumps(v, default=str)
            lines.append(f"  {k}: {text if len(text) < 200 else text[:197] + '...'}")
    return "\n".join(lines)
