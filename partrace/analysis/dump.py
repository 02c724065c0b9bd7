"""Events as text, one line each, in the global (time, location, seq) order, with names.

    TIME_NS  LOCATION  KIND  REGION  column=value ...

(non-zero columns only; peers, roots and origins by location name; communicators,
collective operations, counters and files by the names their definitions give; a counter's
value as its value type reads it: signed, a float).  Rows are
filtered while they are decoded (time range, locations, kinds, regions), merged
by the engine in windows under the memory budget, formatted on the rank that
holds them with numpy's vectorized string operations (no Python loop per row),
and written by rank 0 in rank order, window after window.
"""
from __future__ import annotations

import sys

import numpy as np

from ..engine.mpi import Comm
from ..engine.sink import Sink
from ..display import READABLE, register
from ..errors import UsageError
from ..model import (COUNTER_VALUE_TYPES, NAMED_IN, Definitions, Kind, Schema, Table,
                     counter_types_by_id, counter_values)
from ..timeunit import END_OF_TIME

BLOCK = 1 << 15            # rows formatted at once (fixed-width strings: bounded memory)
KEY = ("time", "location", "seq", "kind", "region")
LOCATION_COLUMNS = ("peer", "root", "origin")
KIND_NAMES = np.array([Kind(k).name if k in Kind._value2member_map_ else str(k) for k in range(256)],
                      dtype=object)


class Stop(Exception):
    """The reader of the output went away (a closed pipe): nothing more to write."""


class DumpSink(Sink):
    mode = "time"
    windows = True

    def __init__(self, out=None, *, time=None, locations=None, kinds=None, regions=None,
                 shown_time=None):
        self.out = out
        self.shown_time = shown_time    # the window in the trace's own unit: keys at prepare
        self.time, self.loc_filter, self.kind_filter, self.region_filter = time, locations, kinds, regions
        self.rows = 0
        self.unit = None

    # -- what the engine decodes -------------------------------------------------------
    needs = {"events": None}

    def select(self, name: str, table: Table):
        keep = None

        def both(mask):
            return mask if keep is None else keep & mask
        if self.time is not None:
            t = np.asarray(table["time"])
            keep = both((t >= self.time[0]) & (t < self.time[1]))
        if self.loc_filter is not None:
            keep = both(np.isin(np.asarray(table["location"]), self.loc_filter))
        if self.kind_filter is not None:
            keep = both(np.isin(np.asarray(table["kind"]), self.kind_filter))
        if self.region_filter is not None:
            keep = both(np.isin(np.asarray(table["region"]), self.region_filter))
        return keep

    # -- the sink ----------------------------------------------------------------------
    def start(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        """The filters as ids and the time window as keys: select needs them while decoding
        (names the decode adds to the definitions are not among them)."""
        if self.unit is not None:
            return
        register()
        from ..timeunit import of
        self.unit = of(defs.attrs)
        if self.shown_time is not None:
            self.time = self.unit.keys(self.shown_time)
        with comm.guard():  # the same refusal on every rank: said once, by rank 0
            self._resolve_filters(defs)
        comm.check()

    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        self.start(comm, defs, schema)
        self.defs, self.schema = defs, schema
        self.loc_names = _lookup(defs.tables["locations"])
        self.reg_names = _lookup(defs.tables["regions"])
        self.extra = [c for c in schema["events"] if c.name not in KEY and not c.is_object
                      and not np.dtype(c.dtype).subdtype]
        self.named = {col: _lookup(defs.tables[t]) for col, t in NAMED_IN.items()
                      if t in defs.tables and len(defs.tables[t])}
        ids, _, types = counter_types_by_id(defs.tables.get("counters"))
        self.counters = ids, types

    def _resolve_filters(self, defs: Definitions) -> None:
        """Names and ids of the filters as ids; an unknown one is refused, by name or id."""
        self.loc_filter = _ids(self.loc_filter, defs.tables["locations"], "location")
        self.region_filter = _ids(self.region_filter, defs.tables["regions"], "region")
        if self.kind_filter is not None:
            unknown = [k for k in self.kind_filter if k.upper() not in Kind.__members__]
            if unknown:
                raise UsageError(f"--kind: no kind {unknown[0]!r} (kinds: "
                                 f"{', '.join(k.name.lower() for k in Kind)})")
            self.kind_filter = [int(Kind[k.upper()]) for k in self.kind_filter]

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        text = b""
        with comm.guard():
            text = self.format(tables["events"])
        comm.check()
        everyone = comm.gather(text)
        stop = False
        if comm.rank == 0:
            try:
                out = self.out or sys.stdout.buffer
                for part in everyone:
                    out.write(part)
                out.flush()
            except BrokenPipeError:
                stop = True
        if comm.bcast(stop):
            raise Stop()

    def format(self, ev: Table) -> bytes:
        n = len(ev)
        self.rows += n
        parts = []
        for lo in range(0, n, BLOCK):
            hi = min(n, lo + BLOCK)
            parts.append(self._lines(ev, lo, hi))
        return b"".join(parts)

    def _lines(self, ev: Table, lo: int, hi: int) -> bytes:
        time = np.asarray(ev["time"][lo:hi])
        if self.unit.wall_ns:
            time = time.astype("U20")
        else:           # the trace's own unit (ROSS: virtual time), the end of time as inf
            shown = np.where(time >= END_OF_TIME, np.inf, time / self.unit.per_unit)
            time = np.char.mod("%.9g", shown)
        line = np.char.add(np.char.rjust(time, 15), "  ")
        line = np.char.add(line, np.char.ljust(self.loc_names(ev["location"][lo:hi]), 12))
        line = np.char.add(line, "  ")
        line = np.char.add(line, np.char.ljust(KIND_NAMES[np.asarray(ev["kind"][lo:hi])].astype("U"), 13))
        reg = np.asarray(ev["region"][lo:hi])
        line = np.char.add(line, np.where(reg != 0, np.char.add("  ", self.reg_names(reg)), ""))
        for c in self.extra:
            v = np.asarray(ev[c.name][lo:hi])
            if not v.any():
                continue
            if c.name in LOCATION_COLUMNS:
                shown = self.loc_names(v)
            elif c.name in self.named:
                shown = self.named[c.name](v)
            elif c.name == "value" and "counter" in ev:
                shown = self._values(np.asarray(ev["counter"][lo:hi]), v)
            else:
                shown = v.astype("U24")
            line = np.char.add(line, np.where(v != 0, np.char.add(f"  {c.name}=", shown), ""))
        return ("\n".join(line.tolist()) + "\n").encode("utf-8", READABLE)

    def _values(self, counter: np.ndarray, bits: np.ndarray) -> np.ndarray:
        """Counter values as text, each as its counter's value type reads its 64 bits
        (uint64 where the counter is not defined)."""
        shown = bits.astype("U24")
        ids, types = self.counters
        if not len(ids):
            return shown
        at = np.minimum(np.searchsorted(ids, counter), len(ids) - 1)
        kind = np.where(ids[at] == counter, types[at], 0)
        for t in np.unique(kind[kind > 0]).tolist():        # a few value types
            rows = kind == t
            shown[rows] = counter_values(bits[rows], COUNTER_VALUE_TYPES[t]).astype("U24")
        return shown

    def commit(self, comm: Comm) -> None:
        pass

    def discard(self, comm: Comm) -> None:
        pass


def _lookup(table: Table):
    """ids -> names, vectorized (ids not defined show as their number)."""
    ids = np.asarray(table["id"], np.int64)
    order = np.argsort(ids)
    ids = ids[order]
    names = np.array([str(x) for x in np.asarray(table["name"], dtype=object)[order]] or [""], dtype="U")

    def names_of(values):
        values = np.asarray(values, np.int64)
        pos = np.searchsorted(ids, values).clip(0, max(len(ids) - 1, 0))
        found = (ids[pos] == values) if len(ids) else np.zeros(len(values), bool)
        return np.where(found, names[pos] if len(ids) else "", values.astype("U20"))
    return names_of


def _ids(wanted, table: Table, what: str):
    """Ids of the names or ids in ``wanted`` (None: no filter); one the definitions do not
    hold is refused, whether named or numbered (an unknown id would select nothing)."""
    if wanted is None:
        return None
    by_name = {}
    ids = np.asarray(table["id"]).tolist()
    for i, n in zip(ids, np.asarray(table["name"], dtype=object)):
        by_name.setdefault(str(n), []).append(i)
    known = set(ids)
    out = []
    for w in wanted:
        if w in by_name:
            out.extend(by_name[w])
        elif w.lstrip("-").isdigit() and int(w) in known:
            out.append(int(w))
        elif w.lstrip("-").isdigit():
            raise UsageError(f"--{what}: no {what} with id {w} (ids {_span(ids)})")
        else:
            raise UsageError(f"--{what}: no {what} named {w!r}")
    return np.array(out, np.int64)


def _span(ids: list[int]) -> str:
    """The ids a table holds, short: '1..8' when they are consecutive."""
    if not ids:
        return "none"
    lo, hi = min(ids), max(ids)
    if hi - lo + 1 == len(set(ids)):
        return f"{lo}..{hi}"
    return ", ".join(map(str, sorted(ids)[:8])) + (", ..." if len(ids) > 8 else "")
