"""What the outputs draw as counters, asked of the schema and the definitions alone.

Two sources: the sample tables (Role.SAMPLES: their numeric measure columns, see
``counter_columns``) and the COUNTER events of a counter the definitions name
(``DefinedCounters``: the counters table in id order, each value read as its
value_type says).
"""
from __future__ import annotations

import numpy as np

from ..model import (COUNTER_VALUE_TYPES, KEY_COLUMNS, Definitions, Kind, Role, Schema, Table,
                     counter_value_types, tables_of_role)


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
        if self.table is None:
            self.order = np.zeros(0, np.int64)
            self.ids = np.zeros(0, np.int64)
            self.types = np.zeros(0, np.int64)
            return
        ids = np.asarray(cnt["id"], dtype=np.int64)
        self.order = np.argsort(ids, kind="stable")
        self.ids = ids[self.order]
        # each counter's value type as its place in COUNTER_VALUE_TYPES (numbers: compared
        # per row without Python objects)
        self.types = np.asarray([COUNTER_VALUE_TYPES.index(t)
                                 for t in counter_value_types(cnt)], np.int64)[self.order]

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
