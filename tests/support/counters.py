"""What the counter events of a merged trace hold, from the HDF5 merge: the test's own reading
of the counters definitions' value types (the writers read them through partrace.model)."""
from __future__ import annotations

import json
from collections import defaultdict

import h5py
import numpy as np

from partrace.formats.hdf5.layout import read_table
from partrace.model import Kind


def counter_defs(h5) -> dict[int, tuple[str, str, str]] | None:
    """counter id -> (name, unit, value type) of the merge's counters definitions, or None."""
    with h5py.File(h5, "r") as f:
        if "counters" not in f["definitions"]:
            return None
        t = read_table(f["definitions"]["counters"])
    types = t["value_type"] if "value_type" in t else ["uint64"] * len(t)
    out = {int(i): (str(n), str(u), str(ty) or "uint64")
           for i, n, u, ty in zip(t["id"], t["name"], t["unit"], types)}
    # a counter of several values: its event's value is its first member's, drawn as that
    out.update({c: m for (c, k), m in member_defs(h5).items() if k == 0})
    return out


def member_defs(h5) -> dict[tuple[int, int], tuple[str, str, str]]:
    """(counter id, member index) -> (name, unit, value type) of the counters of several
    values (the counter_members definitions), or {}."""
    with h5py.File(h5, "r") as f:
        if "counter_members" not in f["definitions"]:
            return {}
        t = read_table(f["definitions"]["counter_members"])
    return {(int(c), int(k)): (str(n), str(u), str(ty) or "uint64")
            for c, k, n, u, ty in zip(t["counter"], t["index"], t["name"], t["unit"],
                                      t["value_type"])}


def member_rows(h5) -> dict[tuple[int, int, int], list]:
    """(location, counter id, member index) -> [(time, value)] of the members after the
    first of counters of several values: the rows of the merge's values table (the OTF2
    reader's: each Metric record's array) that name a counter, in key order."""
    members = member_defs(h5)
    out = defaultdict(list)
    with h5py.File(h5, "r") as f:
        if not members or "values" not in json.loads(f.attrs["tables"]):
            return out
        t = read_table(f["values"])
    o = np.lexsort((np.asarray(t["index"]), np.asarray(t["seq"]), np.asarray(t["location"]),
                    np.asarray(t["time"])))
    for r in o:         # small fixtures: row by row, independently of the sinks
        c, k = int(t["counter"][r]), int(t["index"][r])
        if c and k:
            out[(int(t["location"][r]), c, k)].append(
                (int(t["time"][r]), as_number(int(t["value"][r]), members[(c, k)][2])))
    return out


def as_number(bits: int, value_type: str):
    """A raw 64-bit counter value as its type says (OTF_Counter2Float: the low 32 bits)."""
    raw = np.array([bits], dtype=np.uint64)
    if value_type == "int64":
        return int(raw.view(np.int64)[0])
    if value_type == "float64":
        return float(raw.view(np.float64)[0])
    if value_type == "float32":
        return float(raw.astype(np.uint32).view(np.float32)[0])
    return int(bits)


def counter_rows(h5):
    """(location, counter id) -> [(time, value)] of the COUNTER events of defined counters,
    in key order, and a mask of those rows in the events table."""
    defs = counter_defs(h5) or {}
    with h5py.File(h5, "r") as f:
        names = json.loads(f.attrs["tables"])
        ev = read_table(f["events"]) if "events" in names else None
    out = defaultdict(list)
    if ev is None or "counter" not in ev:
        return out, np.zeros(0 if ev is None else len(ev["time"]), bool)
    kind = np.asarray(ev["kind"]).astype(np.int64)
    counter = np.asarray(ev["counter"]).astype(np.int64)
    mask = (kind == Kind.COUNTER) & np.isin(counter, list(defs))
    for r in np.flatnonzero(mask):      # small fixtures: row by row, independently of the sinks
        c = int(counter[r])
        out[(int(ev["location"][r]), c)].append(
            (int(ev["time"][r]), as_number(int(ev["value"][r]), defs[c][2])))
    return out, mask
