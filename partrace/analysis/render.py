"""Records as an aligned text table, CSV or JSON (for people, spreadsheets, scripts)."""
from __future__ import annotations

import csv
import io
import json

import numpy as np

from ..display import readable


def as_csv(records, columns: list[str] | None = None) -> str:
    """``records``: dict rows, or :class:`~partrace.analysis.rows.Rows` (columns: written
    a column at a time, no Python per row)."""
    columns = columns or (list(records[0]) if records else [])
    from .rows import Rows
    if isinstance(records, Rows):
        return records.to_csv(columns)
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(records)
    return out.getvalue().rstrip("\n")


def heaviest_pairs(pairs, top: int | None):
    """The ``top`` pairs (all: None) with the most bytes, then messages, then by sender and
    receiver: one sort of the columns, however many pairs there are."""
    from .rows import Rows
    c = pairs.columns
    order = np.lexsort((c["receiver_id"], c["sender_id"], -c["messages"].astype(np.int64),
                        c["bytes"].max(initial=0) - c["bytes"]))[:top]
    return Rows({k: v[order] for k, v in c.items()})


def as_json(obj) -> str:
    return json.dumps(obj, indent=1, default=_rows_as_list)


def _rows_as_list(o):
    from .rows import Rows
    if isinstance(o, Rows):
        return o.to_records()
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return readable(str(v))     # non-UTF-8 bytes as \xNN: widths are then right


def as_text(records: list[dict], columns: list[tuple[str, str]]) -> str:
    """columns: (key, heading); numbers right-aligned."""
    rows = [[h for _, h in columns]] + [[_cell(r[k]) for k, _ in columns] for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = []
    for n, row in enumerate(rows):
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ms(ns) -> float:
    return ns / 1e6


PROFILE_SORTS = {"exclusive": "exclusive_ns", "inclusive": "inclusive_ns", "calls": "calls",
                 "name": "region", "imbalance": "imbalance"}


NO_REGIONS = "no region visits: this trace records no enter/leave events"
NO_MESSAGES = "no messages: this trace records no send/receive events"


def profile_text(result: dict, top: int | None) -> str:
    regions = result["regions"]
    if not regions:
        return f"({NO_REGIONS})"
    total = sum(r["exclusive_ns"] for r in regions) or 1
    recs = [{**r, "incl": ms(r["inclusive_ns"]), "excl": ms(r["exclusive_ns"]),
             "excl_pct": 100.0 * r["exclusive_ns"] / total, "mean": ms(r["inclusive_mean_ns"]),
             "max": ms(r["inclusive_max_ns"])} for r in regions[:top]]
    text = as_text(recs, [("region", "region"), ("calls", "calls"), ("excl", "excl ms"),
                          ("excl_pct", "excl %"), ("incl", "incl ms"), ("mean", "incl ms mean/loc"),
                          ("max", "incl ms max/loc"), ("imbalance", "max/mean"),
                          ("locations", "locations")])
    u = result["unmatched"]
    if u["leave"] or u["enter"]:
        text += (f"\nnot counted: {u['leave']:,} leave(s) with no open region (the trace starts "
                 f"inside them), {u['enter']:,} region(s) still open at the end")
    if top is not None and len(regions) > top:
        text += f"\n({len(regions) - top:,} more regions: --top 0 for all)"
    return text


def _offset_text(r: dict) -> str:
    """b's clock minus a's: the estimate and its bound, or the one-sided limit."""
    if r["offset_ns"] is not None and r["offset_bound_ns"] < 0:     # no constant offset fits
        return f"~{r['offset_ns']:,.1f} (drifting)"
    if r["offset_ns"] is not None:
        return f"{r['offset_ns']:,.1f} ± {r['offset_bound_ns']:,.1f}"
    if r["offset_max_ns"] is not None:
        return f"<= {r['offset_max_ns']:,}"
    if r["offset_min_ns"] is not None:
        return f">= {r['offset_min_ns']:,}"
    return "-"


def clocks_text(result: dict, top: int | None) -> str:
    """Totals, then the pairs with the largest violations (then the most messages)."""
    lines = [f"messages: {result['messages']:,} matched, {result['violations']:,} of them "
             f"received before they were sent (by the trace's clocks)"]
    if result.get("time_unit", "ns") != "ns":      # ROSS: virtual time, no clock
        lines.append(f"(times below are {result['time_unit']}, not ns)")
    lost = result["unmatched_sends"], result["unmatched_receives"]
    if any(lost):
        lines.append(f"unmatched: {lost[0]:,} send(s), {lost[1]:,} receive(s)")
    if result["violations"]:
        a, b = result["largest_violation_pair"]
        lines.append(f"largest violation: {result['largest_violation_ns']:,} ns ({a} - {b})")
    c = result.get("collectives")
    if c and c["instances"]:
        lines.append(f"collectives: {c['instances']:,} instances, {c['checked']:,} checked, "
                     f"{c['violations']:,} with a member that left before the data it waits "
                     f"for was entered")
        if c["largest_violation"]:
            w = c["largest_violation"]
            lines.append(f"largest: {c['largest_violation_ns']:,} ns (communicator "
                         f"{w['communicator']}, call {w['call']}: {w['entered_last']} entered "
                         f"after {w['left_first']} left)")
        if c["unpaired_rows"]:
            lines.append(f"({c['unpaired_rows']:,} collective begin/end rows without their pair)")
    pairs = sorted(result["pairs"], key=lambda r: (-r["largest_violation_ns"], -r["violations"],
                                                   -(r["messages_ab"] + r["messages_ba"]),
                                                   r["a_id"], r["b_id"]))
    shown = pairs[:top]
    if shown:
        def delay(d):
            return "-" if d is None else d
        def drift(r):       # where the trace shows one (beyond its bound)
            d, bound = r["drift_ppm"], r["drift_bound_ppm"]
            return f"{d:,.1f} ± {bound:,.1f}" if d is not None and 0 <= bound < abs(d) else "-"
        recs = [{**r, "ab": delay(r["least_delay_ab_ns"]), "ba": delay(r["least_delay_ba_ns"]),
                 "offset": _offset_text(r), "drift": drift(r)} for r in shown]
        lines += ["", f"pairs of {result['groups']}es (offset: b's clock minus a's, ns):"
                  if result["groups"] == "process" else
                  f"pairs of {result['groups']}s (offset: b's clock minus a's, ns):",
                  as_text(recs, [("a", "a"), ("b", "b"), ("messages_ab", "a->b"),
                                 ("messages_ba", "b->a"), ("violations", "violations"),
                                 ("largest_violation_ns", "largest ns"),
                                 ("ab", "least delay a->b ns"), ("ba", "least delay b->a ns"),
                                 ("offset", "offset"), ("drift", "drift ppm")])]
        if len(shown) < len(pairs):
            lines.append(f"({len(pairs) - len(shown):,} more pairs: --top 0 for all)")
    return "\n".join(lines)
def per_location_text(result: dict, top: int | None) -> str:
    """One row per location and region, the most exclusive time first."""
    rows = sorted(result["locations"] or [], key=lambda r: (-r["exclusive_ns"], r["location_id"],
                                                          r["region"]))
    if not rows:
        return f"({NO_REGIONS})"
    recs = [{**r, "incl": ms(r["inclusive_ns"]), "excl": ms(r["exclusive_ns"])}
            for r in rows[:top]]
    text = as_text(recs, [("location", "location"), ("region", "region"), ("calls", "calls"),
                          ("excl", "excl ms"), ("incl", "incl ms")])
    if top is not None and len(rows) > top:
        text += f"\n({len(rows) - top:,} more rows: --top 0 for all)"
    return text
