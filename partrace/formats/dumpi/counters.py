"""PAPI counters of a DUMPI trace: definitions from the rank files' perf labels, and the
COUNTER rows of a chunk's perfinfo blocks.

libdumpi writes, in each call record whose config mask has the perfinfo bit, a counter
count and per counter its value at the call's entry and at its exit (int64, as
``dumpi2ascii`` prints them, ``%lld``); the counters' names are the rank file's perf label
record (``dumpi_write_perfctr_labels``), in the order of the values.  A counter is defined
per distinct label (ids from 1, in order of first appearance over the ranks in rank order,
so a rank that lists its labels in another order still maps each to its own); all of them
form one counter group (1), sampled together, as Score-P's PAPI metrics are.
"""
from __future__ import annotations

import numpy as np

from ...model import DEFINITION_TABLES, Kind, Table, conform
from .layout import RankFile

GROUP = 1                    # the counter group of every PAPI counter: sampled together
# what a PAPI value is: the count since the counters were started, read at one point
MODE = "accumulated_start"
UNIT = "#"                   # events counted (Score-P's unit of PAPI metrics)


def counter_tables(rfs: dict[int, RankFile], ranks: list[int]) -> dict[str, Table]:
    """``perf_labels`` (location, counter index in the rank's perfinfo blocks, name, and the
    counter id it is drawn as) and, where there are labels, ``counters`` (one per distinct
    label)."""
    ids: dict[str, int] = {}
    rows = []
    for r in ranks:
        for i, name in enumerate(rfs[r].perf_labels):
            rows.append((r + 1, i, name, ids.setdefault(name, len(ids) + 1)))
    names = _objects(ids)
    counters = conform(Table({
        "id": np.arange(1, len(ids) + 1, dtype=np.int64), "name": names,
        "unit": _objects([UNIT] * len(ids)), "group": np.full(len(ids), GROUP, np.int64),
        "value_type": _objects(["int64"] * len(ids)), "mode": _objects([MODE] * len(ids)),
    }), DEFINITION_TABLES["counters"])
    labels = Table({"location": np.array([x[0] for x in rows], np.int64),
                    "counter": np.array([x[1] for x in rows], np.int64),
                    "name": _objects(x[2] for x in rows),
                    "id": np.array([x[3] for x in rows], np.int64)})
    return {"counters": counters, "perf_labels": labels} if ids else {"perf_labels": labels}


def _objects(xs) -> np.ndarray:
    return np.array(list(xs) + [None], object)[:-1]


def location_counter_ids(tables: dict, location: int) -> np.ndarray:
    """Per counter index of ``location``'s perfinfo blocks, the counter id it is drawn as
    (empty: the rank file has no perf labels)."""
    labels = tables.get("perf_labels")
    if labels is None or not len(labels) or "id" not in labels:
        return np.zeros(0, np.int64)
    mine = np.asarray(labels["location"]) == location
    out = np.zeros(int(mine.sum()), np.int64)
    out[np.asarray(labels["counter"])[mine]] = np.asarray(labels["id"])[mine]
    return out


def add_counter_rows(w, rows, counter_ids: np.ndarray, at_exit: bool) -> None:
    """COUNTER rows of the chunk's perf values: per call and counter, its value at entry
    (at the call's entry time) or at exit (exit time), in counter order.  A value past the
    rank's labels has no counter to be drawn as: it stays in the ``perf`` table only."""
    pc, pi, entry, exit_ = w.p
    if not len(pc) or not len(counter_ids):
        return
    keep = pi < len(counter_ids)
    calls, index = (pc, pi) if keep.all() else (pc[keep], pi[keep])
    values = exit_ if at_exit else entry
    rows.add(calls, Kind.COUNTER, at_exit=at_exit, counter=counter_ids[index],
             value=values if keep.all() else values[keep])
