"""What the outputs draw as counters, asked of the schema and the definitions alone.

Two sources: the sample tables (Role.SAMPLES: their numeric measure columns, see
``counter_columns``) and the COUNTER events of a counter the definitions name
(``DefinedCounters``: the counters table in id order, each value read as its
value_type says).  A defined counter whose records hold several values (the
``counter_members`` definitions: an OTF2 metric class of several members) has each
value drawn as a counter of its own (``CounterMembers``): the first is the COUNTER
event's own value, the others rows of the member values table
(model.member_values_table).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..errors import PartraceError
from ..model import (COUNTER_VALUE_TYPES, KEY_COLUMNS, Definitions, Kind, Role, Schema, Table,
                     counter_types_by_id, counter_value_types, member_values_table,
                     tables_of_role)


def sample_writers(sink) -> list:
    """The (table, writer) pairs of a sink that draws counters: one per counter table
    (``sink.counters``, written by ``sink._write_counters``) and the metric members' table
    where there is one (``sink.members``, ``sink._write_members``): the part-file base's
    ``table_writers`` after the sink's own events."""
    members = [(sink.members.table, sink._write_members)] if sink.members.routed else []
    return [(name, partial(sink._write_counters, name, cols))
            for name, cols in sink.counters] + members


def counter_columns(schema: Schema) -> list[tuple[str, list]]:
    """[(table, [its numeric measure columns])] of the sample tables, in schema order."""
    out = []
    for name in tables_of_role(schema, Role.SAMPLES):
        cols = schema[name]
        measures = [c for c in cols if c.name not in KEY_COLUMNS and c.measure and not c.is_object
                    and not c.numpy_dtype().subdtype and c.numpy_dtype().kind in "iuf"]
        if measures:
            out.append((name, measures))
    return out


class DefinedCounters:
    """The trace's defined counters in id order (none where it has no counters table)."""

    def __init__(self, defs: Definitions):
        cnt = defs.tables.get("counters")
        self.table = cnt if cnt is not None and len(cnt) else None
        self.ids, self.order, self.types = counter_types_by_id(self.table)

    def __len__(self) -> int:
        return len(self.ids)

    def names(self) -> list:
        return [self.table["name"][i] for i in self.order.tolist()]

    def units(self, default: str) -> list:
        """Each counter's unit, ``default`` where it has none."""
        has = self.table is not None and "unit" in self.table
        return [self.table["unit"][i] if has and str(self.table["unit"][i]) else default
                for i in self.order.tolist()]

    def rows(self, ev: Table, g: np.ndarray, kind: np.ndarray):
        """The events (of ``ev`` taken in order ``g``, ``kind`` theirs) that are COUNTER
        events of a defined counter: their places in ``g``, their counters' indices, and
        their raw 64-bit values."""
        rows = np.flatnonzero(kind == Kind.COUNTER)
        if not len(rows) or not len(self.ids) or "counter" not in ev:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64)
        c = np.asarray(ev["counter"], dtype=np.int64)[g[rows]]
        ci = np.minimum(np.searchsorted(self.ids, c), len(self.ids) - 1)
        ok = self.ids[ci] == c
        rows, ci = rows[ok], ci[ok]
        bits = np.asarray(ev["value"])[g[rows]].astype(np.uint64) if "value" in ev \
            else np.zeros(len(rows), np.uint64)
        return rows, ci, bits


class CounterMembers:
    """The defined counters whose records hold several values (the ``counter_members``
    definitions, read from the schema's member values table): member 0 is the COUNTER
    event's own value, the others (``flat``: in counter order, then member order) rows of
    that table.  None of this where the trace has no such counter (``table`` None)."""

    def __init__(self, defs: Definitions, schema: Schema, defined: DefinedCounters):
        mem = defs.tables.get("counter_members")
        self.table = member_values_table(schema) if mem is not None and len(mem) else None
        self.ids = cnt_ids = defined.ids
        ncnt = len(cnt_ids)
        self.count = np.zeros(ncnt, np.int64)       # members after the first, per counter
        self.first = np.zeros(ncnt, np.int64)       # the first of those in the flat lists
        self.names: list = []                       # per flat member
        self.units: list = []
        self.types = np.zeros(0, np.int64)          # as places in COUNTER_VALUE_TYPES
        self.head: dict[int, tuple] = {}            # counter index: member 0's (name, unit)
        if self.table is None:
            return
        c = np.asarray(mem["counter"], dtype=np.int64)
        k = np.asarray(mem["index"], dtype=np.int64)
        o = np.lexsort((k, c))
        ci = np.searchsorted(cnt_ids, c[o])
        ok = (ci < ncnt) & (cnt_ids[np.minimum(ci, max(ncnt - 1, 0))] == c[o]) if ncnt \
            else np.zeros(len(o), bool)
        o, ci, k = o[ok], ci[ok], k[o][ok]
        names, units = list(mem["name"]), list(mem["unit"])
        types = counter_value_types(mem)
        rest = k > 0
        self.count = np.bincount(ci[rest], minlength=ncnt).astype(np.int64)
        self.first = np.r_[0, np.cumsum(self.count)[:-1]].astype(np.int64)
        self.names = [names[i] for i in o[rest]]
        self.units = [units[i] for i in o[rest]]
        self.types = np.asarray([COUNTER_VALUE_TYPES.index(types[i]) for i in o[rest]],
                                np.int64)
        self.head = {int(a): (names[i], units[i]) for a, i in zip(ci[~rest], o[~rest])}

    @property
    def routed(self) -> set[str]:
        """The member values table, where there is one: its rows go to their location's
        owner."""
        return {self.table} if self.table is not None else set()

    def labels(self, names: list, units: list, default: str) -> tuple[list, list]:
        """The defined counters' ``names`` and ``units`` (in id order), a counter of several
        values named by its first member, with that member's unit (``default`` where it
        has none)."""
        names, units = list(names), list(units)
        for ci, (nm, un) in self.head.items():
            names[ci], units[ci] = nm, un if str(un) else default
        return names, units

    def member_units(self, default: str) -> list:
        """Each flat member's unit, ``default`` where it has none."""
        return [u if str(u) else default for u in self.units]

    def take(self, t: Table, index, what: str):
        """The rows of the member values table ``t`` holding a member after the first,
        grouped by location (``index``: the sink's location index of each row's location):
        their location indices, counter indices, flat member indices, raw 64-bit values
        and times.  A value the counter_members definitions do not name fails the run."""
        c = np.asarray(t["counter"], dtype=np.int64)
        k = np.asarray(t["index"], dtype=np.int64)
        rows = np.flatnonzero((c != 0) & (k > 0))
        ids = self.ids
        ci = np.minimum(np.searchsorted(ids, c[rows]), max(len(ids) - 1, 0))
        bad = (ids[ci] != c[rows]) | (k[rows] > self.count[ci]) if len(ids) \
            else np.ones(len(rows), bool)
        if bad.any():
            r = rows[np.flatnonzero(bad)[0]]
            raise PartraceError(f"{self.table}: value {int(k[r])} of counter {int(c[r])}, "
                                f"which the counter_members definitions do not name ({what} "
                                "would not show it)")
        if not len(rows):
            return (np.zeros(0, np.int64),) * 3 + (np.zeros(0, np.uint64),
                                                   np.zeros(0, np.int64))
        mi = self.first[ci] + k[rows] - 1
        li = index(np.asarray(t["location"])[rows], self.table)
        g = np.argsort(li, kind="stable")
        rows = rows[g]
        return (li[g], ci[g], mi[g], np.asarray(t["value"])[rows].astype(np.uint64),
                np.asarray(t["time"], dtype=np.int64)[rows])
