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
    return {int(i): (str(n), str(u), str(ty) or "uint64")
            for i, n, u, ty in zip(t["id"], t["name"], t["unit"], types)}


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
