"""Writing merged rows as a Perfetto protobuf trace (NAME.pftrace, opened by ui.perfetto.dev).

What a Perfetto user expects to see:
- one track per location (uuid = location id, named as the location, under its
  parent location's track), all TrackDescriptors first;
- ENTER/LEAVE as SLICE_BEGIN/SLICE_END named by the region; a COUNTER event of a defined
  counter as a COUNTER value on the counter's track of its location (a track per location and
  counter that has values, named by the counter, with its unit; the value as the counters
  table's value_type reads it, see ``counter_bits``); every other event as an
  INSTANT named by its region, or by its kind where it has none;
- a message as a flow from its SEND to its RECV: the k-th SEND from S to R with tag
  T and the k-th RECV on R from S with tag T (MPI's non-overtaking order, as
  analysis/timeline.py pairs them) carry the flow id hash(S, R, T, k), which each
  side computes from its own location's rows;
  both carry peer, tag and size as debug annotations;
- named spots (a records table with a column that ``refers`` to a definitions
  table of names: OTF's markers, whose ``marker`` names a ``marker_defs`` row) as
  INSTANTs named by their definition;
- sample tables (Role.SAMPLES in the schema: measures, not records nor parts of
  records; see ``counter_columns``) as counter tracks, one per (location, table.column).
- a counter of several values (the ``counter_members`` definitions: an OTF2 metric class of
  several members) as a counter track per location and member: the first member's is the
  counter's own, the others' values come from the member values table
  (model.member_values_table), on a packet sequence of their own per location.
Strings are UTF-8 (protobuf's rule): a name holding bytes of another character set is
written with each such byte as ``\\xNN`` (model.utf8_name, as the OTF2 and Chrome outputs).

Layout, identical whatever the rank count: a location's rows go to a fixed owner
(contiguous blocks of locations in id order).  Event rows of a location form one
packet sequence (names interned per sequence: a name's first packet on the
sequence carries it, its first packet clears the sequence's state), its marker
spots another, each of its sampled columns another.  A rank appends
each window's packets, grouped by sequence, to its own part file and notes where
each sequence's pieces are; at commit every rank copies its sequences' bytes into
the output at offsets ordered by sequence (location, then events, markers, columns),
after the track descriptors that rank 0 writes.  No byte depends on windows or on
which rank wrote it.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
from ..engine.sink import Sink
from ..errors import PartraceError, UsageError
from ..model import (COUNTER_VALUE_TYPES, KEY_COLUMNS, Definitions, Kind, Role, Schema, Table,
                     counter_value_types, counter_values, member_values_table, not_utf8_warning,
                     tables_of_role, utf8_names)
from .parts import count_within, place_parts
from ..engine.leftovers import run_name
from .staging import Staging

EVENTS = "events"
# columns of a sample table that identify or locate the record rather than measure anything
KIND_NAMES = {int(k): k.name for k in Kind}
MAX_KIND = 256


def named_spots(schema: Schema, defs: Definitions) -> tuple[str, str, str] | None:
    """(table, column, definitions table) of the first records table whose rows are spots
    named by a definition (a column that ``refers`` to a definitions table with names)."""
    for name in tables_of_role(schema, Role.RECORDS):
        for c in schema[name]:
            named = defs.tables.get(c.refers) if c.refers else None
            if named is not None and "name" in named and "id" in named:
                return name, c.name, c.refers
    return None


def counter_bits(bits: np.ndarray, value_type: str) -> tuple[np.ndarray, np.ndarray]:
    """Raw 64-bit counter values of one value type as (kind, bits) of TrackEvent values:
    integers as int64 (counter_value), floats as doubles; a uint64 beyond int64 as a double
    (the trace processor keeps every counter value as a double anyway)."""
    from ..formats.perfetto import encode as E
    v = counter_values(bits, value_type)
    kind = np.full(len(v), E.VALUE_DOUBLE if v.dtype.kind == "f" else E.VALUE_INT, np.uint8)
    if v.dtype.kind == "f":
        return kind, v.astype(np.float64).view(np.uint64)
    out = v.view(np.uint64).copy()
    if v.dtype.kind == "u":
        big = v >= np.uint64(1 << 63)
        kind[big] = E.VALUE_DOUBLE
        out[big] = v[big].astype(np.float64).view(np.uint64)
    return kind, out


class CounterMembers:
    """The counters whose records hold several values (the ``counter_members`` definitions,
    read from the schema's member values table): member 0 is the COUNTER event's own value,
    the others (``flat``: in counter order, then member order) rows of that table."""

    def __init__(self, defs: Definitions, schema: Schema, cnt_ids: np.ndarray):
        mem = defs.tables.get("counter_members")
        self.table = member_values_table(schema) if mem is not None and len(mem) else None
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

    def rows(self, t: Table, cnt_ids: np.ndarray, what: str):
        """The rows of the member values table ``t`` that hold a member after the first:
        (rows, counter index, flat member index)."""
        c = np.asarray(t["counter"], dtype=np.int64)
        k = np.asarray(t["index"], dtype=np.int64)
        rows = np.flatnonzero((c != 0) & (k > 0))
        ci = np.minimum(np.searchsorted(cnt_ids, c[rows]), max(len(cnt_ids) - 1, 0))
        bad = (cnt_ids[ci] != c[rows]) | (k[rows] > self.count[ci]) if len(cnt_ids) \
            else np.ones(len(rows), bool)
        if bad.any():
            r = rows[np.flatnonzero(bad)[0]]
            raise PartraceError(f"{self.table}: value {int(k[r])} of counter {int(c[r])}, "
                                f"which the counter_members definitions do not name ({what} "
                                "would not show it)")
        return rows, ci, self.first[ci] + k[rows] - 1


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


class PerfettoSink(Sink):
    mode = "destination"
    windows = True

    def __init__(self, path, overwrite: bool = False):
        self.final = Path(path)
        self.overwrite = overwrite
        self.staging: Staging | None = None
        self.part = None

    # -- definitions ---------------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        from ..formats.perfetto.encode import hash_of, string_table
        self.defs, self.schema = defs, schema
        locs = defs.tables["locations"]
        order = np.argsort(np.asarray(locs["id"], dtype=np.int64), kind="stable")
        self.loc_ids = np.asarray(locs["id"], dtype=np.int64)[order]
        self.loc_names, changed = utf8_names(locs["name"][i] for i in order)
        self.loc_parents = np.asarray(locs["parent"], dtype=np.int64)[order]
        # each location's owner: contiguous blocks in id order
        n = len(self.loc_ids)
        self.owner = (np.arange(n, dtype=np.int64) * comm.size) // max(n, 1)
        self.counters = counter_columns(schema)
        self.tables = {name for name, _ in self.counters}
        starts = np.cumsum([0] + [len(c) for _, c in self.counters])
        self.first_column = {name: int(a) for (name, _), a in zip(self.counters, starts)}
        ncol = int(starts[-1])
        # a table of named spots (a column naming a definition: OTF's markers) gives instants
        # named by their definition: (table, column, definitions table), or None
        self.spots = named_spots(schema, defs)
        self.markers = self.spots is not None
        self.first_counter = 2 if self.markers else 1
        # sequences (and part keys) per location: events, markers, one per sampled column
        self.per_loc = self.first_counter + ncol
        if n * self.per_loc >= (1 << 32) - 1:
            raise UsageError(f"{n} locations x {self.per_loc} sequences exceed "
                             "Perfetto's 2^32 packet sequences")
        # counter track uuids: a hash of (location, counter number), top bit set so that they
        # never meet a location id
        grid = np.repeat(self.loc_ids, ncol), np.tile(np.arange(ncol, dtype=np.int64), n)
        self.counter_uuid = (hash_of(*grid) | np.uint64(1 << 63)).reshape(n, ncol) if ncol \
            else np.zeros((n, 0), np.uint64)
        # defined counters (COUNTER events), in id order; a track per (location, counter) that
        # has values, whose uuid hashes (location, counter id, 1): never a sampled column's
        cnt = defs.tables.get("counters")
        cnt = cnt if cnt is not None and len(cnt) else None
        corder = np.argsort(np.asarray(cnt["id"], dtype=np.int64), kind="stable") \
            if cnt is not None else np.zeros(0, np.int64)
        self.cnt_ids = np.asarray(cnt["id"], dtype=np.int64)[corder] if cnt is not None \
            else np.zeros(0, np.int64)
        self.cnt_names, c1 = utf8_names(cnt["name"][i] for i in corder)
        self.cnt_units, c2 = utf8_names(cnt["unit"][i] if "unit" in cnt else "" for i in corder)
        # each counter's value type as its place in COUNTER_VALUE_TYPES (numbers: compared
        # per row without Python objects)
        self.cnt_types = np.asarray([COUNTER_VALUE_TYPES.index(t) for t in
                                     counter_value_types(cnt)], np.int64)[corder] \
            if cnt is not None else np.zeros(0, np.int64)
        self.cnt_used: list[np.ndarray] = []        # location index * counters + counter index
        # counters of several values: a track per member (member 0's: the counter's own,
        # named by the member), the others' values from the member values table, on a
        # sequence of their own per location (after the sampled columns')
        self.members = CounterMembers(defs, schema, self.cnt_ids)
        for ci, (nm, un) in self.members.head.items():
            self.cnt_names[ci], self.cnt_units[ci] = utf8_names([nm, un])[0]
        self.m_names, c5 = utf8_names(self.members.names)
        self.m_units, c6 = utf8_names(self.members.units)
        self.m_used: list[np.ndarray] = []          # location index * members + member index
        if self.members.table is not None:
            self.per_loc += 1
        # interned names: iid 1.. for regions (in id order), then one per kind
        regs = defs.tables["regions"]
        rorder = np.argsort(np.asarray(regs["id"], dtype=np.int64), kind="stable")
        self.reg_ids = np.asarray(regs["id"], dtype=np.int64)[rorder]
        names, c3 = utf8_names(regs["name"][i] for i in rorder)
        names += [KIND_NAMES.get(k, f"kind {k}") for k in range(MAX_KIND)]
        self.marker_ids = np.zeros(0, np.int64)
        changed += c1 + c2 + c3 + c5 + c6
        if self.markers:        # then one per marker definition (in id order)
            mdefs = defs.tables[self.spots[2]]
            morder = np.argsort(np.asarray(mdefs["id"], dtype=np.int64), kind="stable")
            self.marker_ids = np.asarray(mdefs["id"], dtype=np.int64)[morder]
            self.first_marker_iid = len(names) + 1
            marks, c4 = utf8_names(mdefs["name"][i] for i in morder)
            names += marks
            changed += c4
        if changed and comm.rank == 0:
            warnings.warn(f"{self.final}: {not_utf8_warning(changed)} (Perfetto's strings are "
                          "UTF-8)")
        self.names, self.name_off = string_table([""] + names)      # iid 0: no name
        self.niids = len(names) + 1
        # per-location state carried across windows
        self.interned = np.zeros(0, np.int64)       # sequence key * niids + iid already sent
        self.started = np.zeros(0, np.int64)        # sequence keys begun (state cleared)
        self.sent = (np.zeros(0, np.uint64), np.zeros(0, np.int64))    # message key -> count
        self.recvd = (np.zeros(0, np.uint64), np.zeros(0, np.int64))
        self.pieces: list[np.ndarray] = []          # (key, offset in part, length) per window
        self.part_size = 0
        run_id = comm.bcast(run_name())
        self.staging = Staging(self.final, run_id)
        with comm.guard():
            if comm.rank == 0:
                self.staging.check_free([self.final], self.overwrite)
                self.staging.create()
        comm.check()
        comm.barrier()
        with comm.guard():
            self.part = open(self.staging.path(f"part-{comm.rank}"), "wb")
        comm.check()

    def _index(self, locations: np.ndarray, table: str) -> np.ndarray:
        """Each row's location index (into loc_ids)."""
        if not len(self.loc_ids):
            raise PartraceError(f"{table}: the trace defines no location to make a track of")
        i = np.minimum(np.searchsorted(self.loc_ids, locations), len(self.loc_ids) - 1)
        bad = self.loc_ids[i] != locations
        if bad.any():
            loc = int(locations[np.flatnonzero(bad)[0]])
            raise PartraceError(f"{table}: location {loc} is not in the trace's locations table")
        return i

    def destinations(self, comm: Comm, name: str, table: Table) -> np.ndarray:
        if name != EVENTS and name not in self.tables and name != self.members.table \
                and not (self.markers and name == self.spots[0]):
            return np.full(len(table), comm.rank, dtype=np.int64)     # not written
        return self.owner[self._index(np.asarray(table["location"]), name)]

    # -- windows --------------------------------------------------------------
    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        with comm.guard():
            ev = tables.get(EVENTS)
            if ev is not None and len(ev):
                self._write_events(ev)
            mk = tables.get(self.spots[0]) if self.markers else None
            if mk is not None and len(mk):
                self._write_markers(mk)
            for name, cols in self.counters:
                t = tables.get(name)
                if t is not None and len(t):
                    self._write_counters(name, cols, t)
            t = tables.get(self.members.table) if self.members.table else None
            if t is not None and len(t):
                self._write_members(t)
        comm.check()

    def _append(self, keys: np.ndarray, buf: np.ndarray, ends: np.ndarray) -> None:
        """Write a window's packets (rows grouped by key, in order) and note each key's piece."""
        last = np.r_[np.flatnonzero(keys[1:] != keys[:-1]), len(keys) - 1]
        stop = ends[last]
        start = np.r_[0, stop[:-1]]
        self.pieces.append(np.stack([keys[last], start + self.part_size, stop - start], axis=1))
        self.part.write(buf[:int(stop[-1])].tobytes())
        self.part_size += int(stop[-1])

    def _write_events(self, ev: Table) -> None:
        from ..formats.perfetto import encode as E
        li = self._index(np.asarray(ev["location"]), EVENTS)
        g = np.argsort(li, kind="stable")             # grouped by location, in key order within
        li = li[g]
        loc = self.loc_ids[li]
        kind = np.asarray(ev["kind"]).astype(np.int64)[g]
        region = np.asarray(ev["region"], dtype=np.int64)[g] if "region" in ev \
            else np.zeros(len(g), np.int64)
        etype = np.full(len(g), E.INSTANT, np.uint8)
        etype[kind == Kind.ENTER] = E.SLICE_BEGIN
        etype[kind == Kind.LEAVE] = E.SLICE_END
        # name: the region where there is one (and is defined), else the kind
        r = np.minimum(np.searchsorted(self.reg_ids, region), max(len(self.reg_ids) - 1, 0))
        known = (region != 0) & (self.reg_ids[r] == region) if len(self.reg_ids) else region != 0
        iid = np.where(known, r + 1, len(self.reg_ids) + 1 + np.minimum(kind, MAX_KIND - 1))
        iid[etype == E.SLICE_END] = 0                 # an end needs no name
        uuid, vkind, vbits = self._counter_values(ev, g, li, kind, etype, iid)
        flow_out, flow_in = self._flows(ev, g, loc, kind)
        # a message carries its peer, tag and size as debug annotations (the args pane)
        message = ((kind == Kind.SEND) | (kind == Kind.RECV)) & (flow_out | flow_in != 0)
        zeros = np.zeros(len(g), np.int64)
        peer, tag, size = (np.asarray(ev[c])[g] if c in ev else zeros
                           for c in ("peer", "tag", "size"))
        args = np.where(message, 1 | (2 if "tag" in ev else 0) | (4 if "size" in ev else 0), 0)
        self._write_points(li * self.per_loc, np.asarray(ev["time"], dtype=np.int64)[g], uuid,
                           etype, iid, flow_out, flow_in,
                           (args.astype(np.uint8), peer.astype(np.int64), tag.astype(np.int64),
                            size.astype(np.uint64)), (vkind, vbits))

    def _counter_values(self, ev: Table, g, li, kind, etype, iid):
        """Each row's track (its location's, or its counter's there) and counter value: a
        COUNTER row of a defined counter becomes a value on that counter's track (etype and
        iid changed in place)."""
        from ..formats.perfetto import encode as E
        uuid = self.loc_ids[li].view(np.uint64).copy()
        vkind = np.zeros(len(g), np.uint8)
        vbits = np.zeros(len(g), np.uint64)
        rows = np.flatnonzero(kind == Kind.COUNTER)
        if not len(rows) or not len(self.cnt_ids) or "counter" not in ev:
            return uuid, vkind, vbits
        c = np.asarray(ev["counter"], dtype=np.int64)[g[rows]]
        ci = np.minimum(np.searchsorted(self.cnt_ids, c), len(self.cnt_ids) - 1)
        ok = self.cnt_ids[ci] == c
        rows, ci = rows[ok], ci[ok]
        etype[rows] = E.COUNTER
        iid[rows] = 0
        uuid[rows] = self._counter_track(li[rows], ci)
        bits = np.asarray(ev["value"])[g[rows]].astype(np.uint64) if "value" in ev \
            else np.zeros(len(rows), np.uint64)
        types = self.cnt_types[ci]
        for t in np.unique(types).tolist():         # a few value types
            of = types == t
            vkind[rows[of]], vbits[rows[of]] = counter_bits(bits[of], COUNTER_VALUE_TYPES[t])
        self.cnt_used.append(np.unique(li[rows] * len(self.cnt_ids) + ci))
        return uuid, vkind, vbits

    def _counter_track(self, li: np.ndarray, ci: np.ndarray) -> np.ndarray:
        """The uuid of counter ``ci``'s track on location ``li`` (indices)."""
        from ..formats.perfetto.encode import hash_of
        return hash_of(self.loc_ids[li], self.cnt_ids[ci], np.ones(len(li), np.int64)) \
            | np.uint64(1 << 63)

    def _member_track(self, li: np.ndarray, ci: np.ndarray, k: np.ndarray) -> np.ndarray:
        """The uuid of member ``k`` (from 1) of counter ``ci``'s track on location ``li``
        (member 0's is the counter's own: hash of (location, counter id, 1))."""
        from ..formats.perfetto.encode import hash_of
        return hash_of(self.loc_ids[li], self.cnt_ids[ci], 1 + k) | np.uint64(1 << 63)

    def _write_members(self, t: Table) -> None:
        """The values after the first of records of counters of several values: each a
        COUNTER value on its member's track of its location."""
        from ..formats.perfetto import encode as E
        M = self.members
        rows, ci, mi = M.rows(t, self.cnt_ids, "Perfetto")
        if not len(rows):
            return
        li = self._index(np.asarray(t["location"])[rows], M.table)
        g = np.argsort(li, kind="stable")
        rows, ci, mi, li = rows[g], ci[g], mi[g], li[g]
        k = mi - M.first[ci] + 1
        bits = np.asarray(t["value"])[rows].astype(np.uint64)
        vkind = np.zeros(len(rows), np.uint8)
        vbits = np.zeros(len(rows), np.uint64)
        types = M.types[mi]
        for ty in np.unique(types).tolist():        # a few value types
            of = types == ty
            vkind[of], vbits[of] = counter_bits(bits[of], COUNTER_VALUE_TYPES[ty])
        self.m_used.append(np.unique(li * len(M.names) + mi))
        none = np.zeros(len(rows), np.uint64)
        self._write_points(li * self.per_loc + self.per_loc - 1,
                           np.asarray(t["time"], dtype=np.int64)[rows],
                           self._member_track(li, ci, k), np.full(len(rows), E.COUNTER, np.uint8),
                           np.zeros(len(rows), np.int64), none, none, None, (vkind, vbits))

    def _write_markers(self, mk: Table) -> None:
        """Marker spots: instants named by their marker's definition."""
        from ..formats.perfetto import encode as E
        table, column, definitions = self.spots
        li = self._index(np.asarray(mk["location"]), table)
        g = np.argsort(li, kind="stable")
        li = li[g]
        marker = np.asarray(mk[column], dtype=np.int64)[g]
        m = np.minimum(np.searchsorted(self.marker_ids, marker), max(len(self.marker_ids) - 1, 0))
        if not len(self.marker_ids) or (self.marker_ids[m] != marker).any():
            bad = marker[~np.isin(marker, self.marker_ids)][0]
            raise PartraceError(f"{table}: {column} {int(bad)} is not in the trace's "
                                f"{definitions}")
        none = np.zeros(len(g), np.uint64)
        self._write_points(li * self.per_loc + 1, np.asarray(mk["time"], dtype=np.int64)[g],
                           self.loc_ids[li], np.full(len(g), E.INSTANT, np.uint8),
                           self.first_marker_iid + m, none, none)

    @staticmethod
    def _no_args(n: int):
        return (np.zeros(n, np.uint8), np.zeros(n, np.int64), np.zeros(n, np.int64),
                np.zeros(n, np.uint64))

    def _write_points(self, key, tm, track, etype, iid, flow_out, flow_in, args=None,
                      values=None) -> None:
        """Rows grouped by sequence ``key`` (in key order within) as track events on
        ``track`` (args: per row, which of peer, tag, size to annotate, and those; values:
        per row, the kind and bits of a counter value)."""
        from ..formats.perfetto import encode as E
        # a name's first packet on its sequence carries it
        pair = key * self.niids + iid
        _, first = np.unique(pair, return_index=True)
        intern = np.zeros(len(key), bool)
        intern[first] = True
        intern &= (iid != 0) & ~np.isin(pair, self.interned)
        self.interned = np.union1d(self.interned, pair[intern])
        # and the first packet of a sequence clears its state
        flags = np.full(len(key), E.NEEDS_STATE, np.uint8)
        starts = np.r_[0, np.flatnonzero(key[1:] != key[:-1]) + 1]
        fresh = ~np.isin(key[starts], self.started)
        flags[starts[fresh]] = E.STATE_CLEARED
        self.started = np.union1d(self.started, key[starts])
        args = args if args is not None else self._no_args(len(key))
        vkind, vbits = values if values is not None else (np.zeros(len(key), np.uint8),
                                                          np.zeros(len(key), np.uint64))
        # at most 112 bytes a packet (a counter value included), 64 more with annotations,
        # and 32 more with a name (whose bytes come on top)
        named = iid[intern]
        size = len(key) * 112 + int((self.name_off[named + 1] - self.name_off[named]).sum()) \
            + 32 * len(named) + 64 * int((args[0] != 0).sum())
        buf = np.empty(size, np.uint8)
        ends = np.empty(len(key), np.int64)
        E.encode_events(tm, etype, track.view(np.uint64), iid.astype(np.uint64), flow_out,
                        flow_in, intern, flags, (1 + key).astype(np.uint32), self.names,
                        self.name_off, *args, vkind, vbits, buf, ends)
        self._append(key, buf, ends)

    def _flows(self, ev: Table, g: np.ndarray, loc: np.ndarray, kind: np.ndarray):
        """Flow ids leaving each SEND and ending at each RECV (0: none)."""
        from ..formats.perfetto.encode import hash_of
        out = np.zeros(len(g), np.uint64)
        into = np.zeros(len(g), np.uint64)
        if "peer" not in ev:
            return out, into
        peer = np.asarray(ev["peer"], dtype=np.int64)[g]
        tag = np.asarray(ev["tag"], dtype=np.int64)[g] if "tag" in ev \
            else np.zeros(len(g), np.int64)
        for side, target in ((Kind.SEND, out), (Kind.RECV, into)):
            rows = np.flatnonzero((kind == side) & (peer != 0))
            if not len(rows):
                continue
            s, r = (loc[rows], peer[rows]) if side == Kind.SEND else (peer[rows], loc[rows])
            key = hash_of(s, r, tag[rows])
            k, state = count_within(key, self.sent if side == Kind.SEND else self.recvd)
            if side == Kind.SEND:
                self.sent = state
            else:
                self.recvd = state
            fid = hash_of(s, r, tag[rows], k)
            target[rows] = np.where(fid == 0, np.uint64(1), fid)
        return out, into

    def _write_counters(self, name: str, cols: list, t: Table) -> None:
        """Each (location, column) is a sequence of its own: its packets never interleave
        with another's, so no window cut can reorder them."""
        from ..formats.perfetto import encode as E
        li = self._index(np.asarray(t["location"]), name)
        g = np.argsort(li, kind="stable")
        li = li[g]
        tm = np.asarray(t["time"], dtype=np.int64)[g]
        for j, c in enumerate(cols):
            col = self.first_column[name] + j
            keys = li * self.per_loc + self.first_counter + col
            v = np.asarray(t[c.name])[g]
            is_double = v.dtype.kind == "f"
            # the value's bits: a double's, or an integer's as int64 (two's complement)
            bits = (v.astype(np.float64) if is_double else v.astype(np.int64)).view(np.uint64)
            buf = np.empty(len(g) * 64, np.uint8)
            ends = np.empty(len(g), np.int64)
            E.encode_counters(tm, self.counter_uuid[li, col], bits, is_double,
                              (1 + keys).astype(np.uint32), buf, ends)
            self._append(keys, buf, ends)

    # -- end ------------------------------------------------------------------
    def _header(self, used: np.ndarray, mused: np.ndarray) -> bytes:
        """The TrackDescriptors: every location's track (under its parent's, where the
        parent is a location), then each location's tracks of sampled columns, then the
        tracks of counters with values (``used``: location index * counters + counter
        index, sorted), then those of counter members after the first with values
        (``mused``: location index * members + member index), each with its unit."""
        from ..formats.perfetto import encode as E
        n = len(self.loc_ids)
        columns = [f"{t}.{c.name}" for t, cols in self.counters for c in cols]
        col_units = [c.unit or "" for _, cols in self.counters for c in cols]
        ncol, ncnt = len(columns), len(self.cnt_ids)
        cl, ci = used // max(ncnt, 1), used % max(ncnt, 1)
        M, nm = self.members, len(self.m_names)
        ml, mi = mused // max(nm, 1), mused % max(nm, 1)
        mci = np.searchsorted(M.first + M.count, mi, "right")   # the member's counter
        known = np.isin(self.loc_parents, self.loc_ids)
        uuid = np.concatenate([self.loc_ids.view(np.uint64), self.counter_uuid.reshape(-1),
                               self._counter_track(cl, ci),
                               self._member_track(ml, mci, mi - M.first[mci] + 1)])
        parent = np.concatenate([np.where(known, self.loc_parents, 0),
                                 np.repeat(self.loc_ids, ncol), self.loc_ids[cl],
                                 self.loc_ids[ml]])
        # names: locations', sampled columns', counters', members', then the units (-1: none)
        units = sorted(set(col_units + self.cnt_units + self.m_units) - {""})
        unit_at = {u: n + ncol + ncnt + nm + k for k, u in enumerate(units)}
        name = np.concatenate([np.arange(n), n + np.tile(np.arange(ncol), n),
                               n + ncol + ci, n + ncol + ncnt + mi]).astype(np.int64)
        unit = np.concatenate([np.full(n, -1), np.tile([unit_at.get(u, -1) for u in col_units]
                                                       or np.zeros(0, np.int64), n),
                               np.asarray([unit_at.get(u, -1) for u in self.cnt_units]
                                          or [-1], np.int64)[ci],
                               np.asarray([unit_at.get(u, -1) for u in self.m_units]
                                          or [-1], np.int64)[mi]]).astype(np.int64)
        is_counter = np.r_[np.zeros(n, bool), np.ones(n * ncol + len(used) + len(mused), bool)]
        names, off = E.string_table(self.loc_names + columns + self.cnt_names + self.m_names
                                    + units)
        # framing and ids take at most 64 bytes a track, then its name and unit
        lengths = np.diff(off)
        out = np.empty(len(uuid) * 64 + int(lengths[name].sum())
                       + int(np.where(unit >= 0, lengths[np.maximum(unit, 0)], 0).sum()),
                       np.uint8)
        used_bytes = E.encode_tracks(uuid, parent.astype(np.int64), name, is_counter, unit,
                                     names, off, out)
        return out[:used_bytes].tobytes()

    def commit(self, comm: Comm) -> None:
        with comm.guard():
            self.part.close()
            pieces = np.concatenate(self.pieces) if self.pieces else np.zeros((0, 3), np.int64)
            # pieces of a key in window order; keys in (location, table) order
            pieces = pieces[np.argsort(pieces[:, 0], kind="stable")]
            keys, first = np.unique(pieces[:, 0], return_index=True)
            totals = np.add.reduceat(pieces[:, 2], first) if len(keys) else np.zeros(0, np.int64)
            used, mused = (np.unique(np.concatenate(u)) if u else np.zeros(0, np.int64)
                           for u in (self.cnt_used, self.m_used))
        comm.check()
        everything = comm.allgather((keys, totals, used, mused))
        with comm.guard():
            header = self._header(*(np.unique(np.concatenate([e[j] for e in everything]))
                                    for j in (2, 3))) if comm.rank == 0 else b""
        comm.check()
        header_size = comm.bcast(len(header))
        with comm.guard():
            all_keys = np.concatenate([e[0] for e in everything])
            all_totals = np.concatenate([e[1] for e in everything])
            o = np.argsort(all_keys, kind="stable")
            offsets = np.empty(len(o), np.int64)
            offsets[o] = header_size + np.r_[0, np.cumsum(all_totals[o])[:-1]]
            # where each of this rank's sequences starts (every key is written by one rank)
            dest = offsets[o][np.searchsorted(all_keys[o], keys)]
            out = self.staging.path("out")
            if comm.rank == 0:
                with open(out, "wb") as f:
                    f.write(header)
                    f.truncate(header_size + int(all_totals.sum()))
        comm.check()
        comm.barrier()
        place_parts(comm, self.staging, self.final.name, out, dest, keys, pieces)

    def discard(self, comm: Comm) -> None:
        if self.part is not None and not self.part.closed:
            self.part.close()
        comm.barrier()
        if comm.rank == 0 and self.staging is not None:
            self.staging.discard()
