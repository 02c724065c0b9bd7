"""``partrace info``: what a trace holds, counted in parallel, shown by name.

Locations, regions, region groups and (ovni) event types are named as the
reader's definitions name them; counts are of rows of the decoded tables
("events" are the rows of the events table, "rows in all tables" every row).
"""
from __future__ import annotations

import json

import numpy as np

from .engine.fold import fold
from .engine.mpi import Comm
from .engine.pipeline import open_on_all_ranks
from .kernels.reduce import min_max
from .model import Kind
from .timeunit import described

# how the text names each input format
FORMAT_NAMES = {"otf": "OTF", "otf2": "OTF2", "dumpi": "DUMPI", "ovni": "ovni", "ross": "ROSS",
                "hdf5": "partrace HDF5"}
_MCV_COLUMNS = ("model", "category", "value")


def _tally(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, how many of each): one np.bincount pass when the values are
    small non-negative ids (the common case: no sort), else np.unique."""
    v = np.asarray(values)
    if v.size and v.dtype.kind in "iu":
        lo, hi = map(int, min_max(v.reshape(-1)))
        if lo >= 0 and hi < 4 * v.size + 65536:
            counts = np.bincount(v.astype(np.intp, copy=False), minlength=hi + 1)
            keys = np.flatnonzero(counts)
            return keys, counts[keys]
    return np.unique(v, return_counts=True)


def _add(into: dict, keys, counts: np.ndarray) -> None:
    for k, c in zip(keys.tolist() if isinstance(keys, np.ndarray) else keys, counts.tolist()):
        into[k] = into.get(k, 0) + c


class _Counts:
    """Counts rows chunk by chunk (a fold of the engine): per chunk a few
    ``np.unique``; the dicts grow with distinct keys, not rows."""

    def __init__(self):
        self.rows: dict[str, int] = {}
        self.span: dict[str, tuple[int, int]] = {}
        self.events: dict[tuple[int, int], int] = {}
        self.regions: dict[int, int] = {}
        self.enters: dict[int, int] = {}
        self.mcv: dict[int, int] = {}
        self.counters: dict[int, int] = {}                    # COUNTER rows per counter id
        self.per_location: dict[tuple[str, int], int] = {}    # (table, location): rows

    def step(self, chunk: dict) -> "_Counts":
        for name, t in chunk.items():
            self.add(name, t)
        return self

    @staticmethod
    def combine(a: "_Counts", b: "_Counts") -> "_Counts":
        for field in ("rows", "events", "regions", "enters", "mcv", "counters", "per_location"):
            into = getattr(a, field)
            for k, c in getattr(b, field).items():
                into[k] = into.get(k, 0) + c
        for n, (lo, hi) in b.span.items():
            x, y = a.span.get(n, (lo, hi))
            a.span[n] = (min(x, lo), max(y, hi))
        return a

    def add(self, name: str, t) -> None:
        self.rows[name] = self.rows.get(name, 0) + len(t)
        if not len(t):
            return
        lo, hi = map(int, min_max(t["time"]))
        a, b = self.span.get(name, (lo, hi))
        self.span[name] = (min(a, lo), max(b, hi))
        if name != "events":
            locs, counts = _tally(t["location"])
            _add(self.per_location, [(name, x) for x in locs.tolist()], counts)
            return
        # (location, kind) as one key: kinds are bytes
        pairs, counts = _tally((t["location"].astype(np.int64) << 8) | t["kind"])
        for key, c in zip(pairs.tolist(), counts.tolist()):
            self.events[(key >> 8, key & 255)] = self.events.get((key >> 8, key & 255), 0) + c
        if "region" in t:
            _add(self.regions, *_tally(t["region"]))
            enter = t["kind"] == Kind.ENTER
            _add(self.enters, *_tally(t["region"][enter]))
        if "counter" in t:
            _add(self.counters, *_tally(t["counter"][t["kind"] == Kind.COUNTER]))
        if all(c in t for c in _MCV_COLUMNS):     # ovni: the event's model, category, value
            # three bytes: one int32 code (half the memory traffic of int64 temporaries)
            code = ((t["model"].astype(np.int32) << 16) | (t["category"].astype(np.int32) << 8)
                    | t["value"].astype(np.int32))
            _add(self.mcv, *_tally(code))


def counted_columns(schema) -> dict[str, tuple[str, ...]]:
    """What _Counts reads of each table: time and location of every row; of events also
    kind and region, the counter of COUNTER rows where there is a counter column, and
    ovni's model, category and value when the table has all three (OTF's events have a
    counter's value, which info does not count)."""
    out = {t: ("time", "location") for t in schema}
    names = {c.name for c in schema.get("events", ())}
    if "events" in out:
        out["events"] += ("kind", "region") + (("counter",) if "counter" in names else ()) \
            + (_MCV_COLUMNS if names >= set(_MCV_COLUMNS) else ())
    return out


def _merge(parts: list[dict], field: str) -> dict:
    out: dict = {}
    for p in parts:
        for k, c in p[field].items():
            out[k] = out.get(k, 0) + c
    return out


def gather_info(comm: Comm, path, format: str | None = None,
                reader_options: dict | None = None) -> dict | None:
    """The info report on rank 0 (None on other ranks); memory does not grow with the trace."""
    reader = open_on_all_ranks(comm, path, format, reader_options)

    def start(defs):
        schema = reader.schema(defs)
        # the first moment the tables are known (the schema needs the definitions) and
        # before any decode: readers that honour a selection then skip every other column
        reader.selection = counted_columns(schema)
        counts = _Counts()
        counts.rows = dict.fromkeys(schema, 0)
        return counts
    defs, counts, units = fold(comm, path, tables=None, start=start,
                               step=lambda acc, chunk: acc.step(chunk), combine=_Counts.combine,
                               reader=reader)
    if comm.rank != 0:
        return None
    parts = [{"rows": counts.rows, "span": counts.span, "events": counts.events,
              "regions": counts.regions, "enters": counts.enters, "mcv": counts.mcv,
              "counters": counts.counters, "per_location": counts.per_location}]
    rows, span = _merge(parts, "rows"), {}
    for p in parts:
        for n, (a, b) in p["span"].items():
            lo, hi = span.get(n, (a, b))
            span[n] = (min(lo, a), max(hi, b))
    names = location_names(defs)
    by_kind: dict[str, int] = {}
    by_loc: dict[int, dict[str, int]] = {}
    for (loc, k), c in sorted(_merge(parts, "events").items()):
        kind = Kind(k).name if k in Kind._value2member_map_ else str(k)
        by_kind[kind] = by_kind.get(kind, 0) + c
        by_loc.setdefault(loc, {})[kind] = c
    per_region, enters = _merge(parts, "regions"), _merge(parts, "enters")
    others: dict[str, dict[str, int]] = {}
    for (table, loc), c in sorted(_merge(parts, "per_location").items()):
        others.setdefault(table, {})[str(loc)] = c
    shown = set(by_loc) | {loc for (_, loc) in _merge(parts, "per_location")}
    files = reader.source_files()
    fmt = getattr(reader, "format_name", defs.format)
    report = {
        "path": str(path),
        "format": fmt,
        "size_bytes": int(sum(f.stat().st_size for f in files)),
        "files": len(files),
        "units": len(units),
        "locations": len(defs.tables["locations"]),
        # parts nothing in the trace lists (a lost one is seen only here)
        "holds": reader.holdings(defs),
        "definitions": {n: len(t) for n, t in defs.tables.items()},
        "facts": defs.attrs,
        "outputs": _outputs(),
        "events": rows.get("events", 0),
        "rows_in_all_tables": sum(rows.values()),
        "rows": rows,
        "time_span_ns": {n: {"first": a, "last": b, "duration": b - a} for n, (a, b) in span.items()},
        "time_span": _spans_in_own_units(span, defs.attrs),
        "time_unit": described(defs.attrs),
        "events_per_kind": by_kind,
        "events_per_region_group": _per_group(per_region, defs),
        "regions": _regions(per_region, enters, defs),
        "counters": _counters(_merge(parts, "counters"), defs),
        "events_per_location": {str(k): v for k, v in by_loc.items()},
        "rows_per_location": others,
        "location_names": {str(k): names.get(k, f"location {k}") for k in sorted(shown)},
    }
    if fmt != defs.format:      # partrace's own HDF5: say what it was made from
        report["source_format"] = defs.format
    mcv = _merge(parts, "mcv")
    if mcv:
        report["event_types_per_model"] = _event_types(mcv, defs)
    return report


def location_names(defs) -> dict[int, str]:
    """Location id -> its name prefixed by its parents' (``PE 0/KP 0.3``), unless
    the name already starts with its parent's (ovni's ``loom/pid/tid``)."""
    locs = defs.tables["locations"]
    name = dict(zip(locs["id"].tolist(), [str(n) for n in locs["name"].tolist()]))
    parent = dict(zip(locs["id"].tolist(), locs["parent"].tolist())) if "parent" in locs else {}
    out = {}
    for loc in name:
        path, p, seen = name[loc], parent.get(loc, 0), {loc}
        while p in name and p not in seen:
            if not path.startswith(name[p] + "/"):
                path = f"{name[p]}/{path}"
            seen.add(p)
            p = parent.get(p, 0)
        out[loc] = path
    return out


def _group_names(defs) -> tuple[dict[int, int], dict[int, str]]:
    regions = defs.tables.get("regions")
    groups = defs.tables.get("region_groups") or defs.tables.get("function_groups")
    group_of = dict(zip(regions["id"].tolist(), regions["group"].tolist())) if regions else {}
    name_of = dict(zip(groups["id"].tolist(), [str(n) for n in groups["name"].tolist()])) \
        if groups else {}
    return group_of, name_of


def _per_group(per_region: dict[int, int], defs) -> dict[str, int]:
    """Event rows per region group (OTF: function groups; ovni: per model; DUMPI: MPI);
    "none" = rows with no region."""
    group_of, name_of = _group_names(defs)
    out: dict[str, int] = {}
    for r, c in sorted(per_region.items()):
        g = group_of.get(r, 0) if r else 0
        name = "none" if not r else name_of.get(g, f"group {g}")
        out[name] = out.get(name, 0) + c
    return out


def _regions(per_region: dict[int, int], enters: dict[int, int], defs) -> list[dict]:
    """Every region with events: name, group, entries and event rows, most rows first."""
    regions = defs.tables.get("regions")
    if not regions or not len(regions):
        return []
    group_of, name_of = _group_names(defs)
    name = dict(zip(regions["id"].tolist(), [str(n) for n in regions["name"].tolist()]))
    out = [{"id": r, "name": name.get(r, f"region {r}"),
            "group": name_of.get(group_of.get(r, 0), ""),
            "enters": enters.get(r, 0), "events": c}
           for r, c in per_region.items() if r]
    return sorted(out, key=lambda d: (-d["events"], d["name"]))


def _counters(per_counter: dict[int, int], defs) -> list[dict]:
    """Every defined counter in id order: name, unit, mode (what a value measures) and its
    COUNTER events."""
    from .model import counter_value_types
    cnt = defs.tables.get("counters")
    if cnt is None or not len(cnt):
        return []
    modes = [str(m) for m in cnt["mode"]] if "mode" in cnt else [""] * len(cnt)
    units = [str(u) for u in cnt["unit"]] if "unit" in cnt else [""] * len(cnt)
    rows = [{"id": int(i), "name": str(n), "unit": u, "mode": m or "absolute_point",
             "value_type": t, "events": per_counter.get(int(i), 0)}
            for i, n, u, m, t in zip(cnt["id"].tolist(), cnt["name"].tolist(), units, modes,
                                     counter_value_types(cnt))]
    return sorted(rows, key=lambda d: d["id"])


def _event_types(mcv: dict[int, int], defs) -> dict[str, dict[str, dict]]:
    """ovni: event rows per model and per MCV (``MUi``), with the MCV's description."""
    table = defs.tables.get("mcv")
    known = {}
    if table is not None:
        for code, model, desc in zip(table["code"].tolist(), table["model"].tolist(),
                                     table["description"].tolist()):
            known[code] = (str(model), str(desc))
    out: dict[str, dict[str, dict]] = {}
    for code, c in sorted(mcv.items(), key=lambda kv: -kv[1]):
        text = bytes([(code >> 16) & 255, (code >> 8) & 255, code & 255]).decode("latin-1")
        model, desc = known.get(code, (f"model {text[0]}", "unknown event type"))
        out.setdefault(model, {})[text] = {"count": c, "description": desc}
    return out


def _spans_in_own_units(span: dict[str, tuple[int, int]], attrs: dict) -> dict[str, dict]:
    """Time spans in the trace's own units where its clock is not a wall clock in ns
    (see partrace.timeunit); an infinite time (ROSS's last GVT) as inf."""
    from .timeunit import of
    if of(attrs).wall_ns:
        return {}
    meaning = attrs.get("time_meaning", {})
    out = {}
    for name, (a, b) in span.items():
        unit = of(attrs, name)
        family = name if name in meaning else name.split("_")[0]
        out[name] = {"first": unit.shown(a), "last": unit.shown(b), "unit": unit.name,
                     "meaning": str(meaning.get(family, ""))}
    return out


def render(report: dict, as_json: bool = False) -> str:
    if as_json:
        return json.dumps(report, indent=1, default=str)
    fmt = FORMAT_NAMES.get(report["format"], report["format"])
    if "source_format" in report:
        fmt += f" (from {FORMAT_NAMES.get(report['source_format'], report['source_format'])})"
    lines = [
        f"trace:      {report['path']}",
        f"format:     {fmt}",
        f"size:       {report['size_bytes']:,} bytes in {report['files']:,} "
        f"file{'' if report['files'] == 1 else 's'}, {report['units']:,} work "
        f"unit{'' if report['units'] == 1 else 's'}",
        f"locations:  {report['locations']}",
        *[f"{what}: " + ", ".join(f"{k} {v}" for k, v in counts.items())
          for what, counts in report.get("holds", {}).items()],
        "definitions: " + ", ".join(f"{n} {c}" for n, c in report["definitions"].items()),
        f"time unit:  {report['time_unit']}",
    ]
    own = report["time_span"]
    ev = report["time_span_ns"].get("events")
    if own:
        for name, s in own.items():
            lines.append(f"time span:  {name}: {s['first']:.9g} .. {s['last']:.9g} {s['unit']}")
    elif ev:
        lines.append(f"time span:  {ev['first']} .. {ev['last']} ns "
                     f"({ev['duration'] / 1e9:.6f} s)")
    lines.append(f"events:     {report['events']:,}")
    lines.append(f"rows:       {report['rows_in_all_tables']:,} in all tables ("
                 + ", ".join(f"{n} {c:,}" for n, c in report["rows"].items()) + ")")
    lines.append("events per kind:")
    lines += [f"  {k:<20} {c:>12,}" for k, c in report["events_per_kind"].items()]
    if set(report["events_per_region_group"]) - {"none"}:
        lines.append("events per region group:")
        lines += [f"  {k:<20} {c:>12,}" for k, c in report["events_per_region_group"].items()]
    if report["regions"]:
        lines.append(f"regions with events ({len(report['regions'])}): enters, events, group")
        width = max(len(r["name"]) for r in report["regions"])
        lines += [f"  {r['name']:<{width}} {r['enters']:>12,} {r['events']:>12,}  {r['group']}"
                  for r in report["regions"]]
    if report.get("counters"):
        lines.append(f"counters ({len(report['counters'])}): events, unit, what a value is, "
                     "value type")
        width = max(len(c["name"]) for c in report["counters"])
        lines += [f"  {c['name']:<{width}} {c['events']:>12,}  {c['unit'] or '-'}  {c['mode']}"
                  f"  {c['value_type']}" for c in report["counters"]]
    for model, types in report.get("event_types_per_model", {}).items():
        lines.append(f"{model} events: {sum(t['count'] for t in types.values()):,}")
        lines += [f"  {code}  {t['count']:>10,}  {t['description']}" for code, t in types.items()]
    lines.append("events per location:")
    names = report["location_names"]
    width = max((len(n) for n in names.values()), default=0)
    for loc, kinds in report["events_per_location"].items():
        lines.append(f"  {names[loc]:>{width}}: " + ", ".join(f"{k} {c:,}" for k, c in kinds.items()))
    per_loc: dict[str, dict[str, int]] = {}
    for table, counts in report["rows_per_location"].items():
        for loc, c in counts.items():
            per_loc.setdefault(loc, {})[table] = c
    if per_loc:
        lines.append("rows per location in other tables:")
        width = max(len(names[loc]) for loc in per_loc)
        for loc in sorted(per_loc, key=int):
            lines.append(f"  {names[loc]:>{width}}: "
                         + ", ".join(f"{t} {c:,}" for t, c in per_loc[loc].items()))
    if report["facts"]:
        lines.append("facts:")
        for k, v in report["facts"].items():
            lines += _fact_lines(k, v)
    if report.get("outputs"):
        lines.append("written by `partrace merge TRACE -o OUT.<suffix>`, and what opens each:")
        width = max(len(o["output"]) for o in report["outputs"].values())
        lines += [f"  {o['output']:<{width}}  {o['title']}: {o['opens_in']}"
                  for o in report["outputs"].values()]
    return "\n".join(lines)


def _outputs() -> dict:
    """What `partrace merge TRACE -o OUT` can write, and what opens each (the registry)."""
    from .output import OUTPUTS
    return {o.name: {"output": f"OUT{o.suffixes[0]}", "title": o.title, "opens_in": o.opens_in}
            for o in OUTPUTS.values()}


def _fact_lines(key: str, value, indent: str = "  ") -> list[str]:
    """A fact in full: a mapping one entry a line (DUMPI's calls per function ...)."""
    if isinstance(value, dict) and value:
        out = [f"{indent}{key}:"]
        for k, v in value.items():
            out += _fact_lines(str(k), v, indent + "  ")
        return out
    return [f"{indent}{key}: {json.dumps(value, default=str)}"]
