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
spots another, each of its sampled columns another, the values of its counter
members after the first (where the trace has such counters) another.  A rank appends
each window's packets, grouped by sequence, to its own part file and notes where
each sequence's pieces are; at commit every rank copies its sequences' bytes into
the output at offsets ordered by sequence (location, then events, markers, columns,
members),
after the track descriptors that rank 0 writes.  No byte depends on windows or on
which rank wrote it.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..engine.mpi import Comm
from ..errors import PartraceError, UsageError
from ..model import (COUNTER_VALUE_TYPES, Definitions, Kind, Role, Schema, Table, counter_values,
                     not_utf8_warning, tables_of_role, utf8_names)
from .counters import CounterMembers, DefinedCounters, counter_columns, sample_writers
from .flows import MessageFlows
from .owned import EVENTS
from .parts import PartFileSink

__all__ = ["PerfettoSink", "counter_bits", "counter_columns", "named_spots"]
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


class PerfettoSink(PartFileSink):
    location_role = "to make a track of"

    # -- definitions ---------------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        from ..formats.perfetto.encode import hash_of, string_table
        self.defs, self.schema = defs, schema
        locs = defs.tables["locations"]
        order = np.argsort(np.asarray(locs["id"], dtype=np.int64), kind="stable")
        self.counters = counter_columns(schema)
        self.tables = {name for name, _ in self.counters}
        # a table of named spots (a column naming a definition: OTF's markers) gives instants
        # named by their definition: (table, column, definitions table), or None
        self.spots = named_spots(schema, defs)
        self.markers = self.spots is not None
        # defined counters (COUNTER events), in id order; those of several values a track
        # per member, the others' values from the member values table
        self.defined = DefinedCounters(defs)
        self.members = CounterMembers(defs, schema, self.defined)
        self.own(comm, np.asarray(locs["id"], dtype=np.int64)[order],
                 routed=self.tables | self.members.routed
                 | ({self.spots[0]} if self.markers else set()))
        self.loc_names, changed = utf8_names(locs["name"][i] for i in order)
        self.loc_parents = np.asarray(locs["parent"], dtype=np.int64)[order]
        n = len(self.loc_ids)
        starts = np.cumsum([0] + [len(c) for _, c in self.counters])
        self.first_column = {name: int(a) for (name, _), a in zip(self.counters, starts)}
        ncol = int(starts[-1])
        self.first_counter = 2 if self.markers else 1
        # sequences (and part keys) per location: events, markers, one per sampled column,
        # then (counters of several values) one for the members after the first
        self.per_loc = self.first_counter + ncol + len(self.members.routed)
        if n * self.per_loc >= (1 << 32) - 1:
            raise UsageError(f"{n} locations x {self.per_loc} sequences exceed "
                             "Perfetto's 2^32 packet sequences")
        # counter track uuids: a hash of (location, counter number), top bit set so that they
        # never meet a location id
        grid = np.repeat(self.loc_ids, ncol), np.tile(np.arange(ncol, dtype=np.int64), n)
        self.counter_uuid = (hash_of(*grid) | np.uint64(1 << 63)).reshape(n, ncol) if ncol \
            else np.zeros((n, 0), np.uint64)
        # a track per (location, defined counter) that has values, whose uuid hashes
        # (location, counter id, 1): never a sampled column's; a counter of several values
        # named by its first member, a track per (location, member after the first) that has
        # values, whose uuid hashes (location, counter id, 1 + the member's index)
        M = self.members
        self.cnt_ids = self.defined.ids
        cnt_names, cnt_units = M.labels(self.defined.names(), self.defined.units(""), "")
        self.cnt_names, c1 = utf8_names(cnt_names)
        self.cnt_units, c2 = utf8_names(cnt_units)
        self.cnt_used: list[np.ndarray] = []        # location index * counters + counter index
        self.m_names, c5 = utf8_names(M.names)
        self.m_units, c6 = utf8_names(M.member_units(""))
        self.m_used: list[np.ndarray] = []          # location index * members + member index
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
        self.flows = MessageFlows()
        self.stage(comm)
        self.open_part(comm)

    # -- windows --------------------------------------------------------------
    def table_writers(self) -> list:
        spots = [(self.spots[0], self._write_markers)] if self.markers else []
        return [(EVENTS, self._write_events), *spots, *sample_writers(self)]

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
        rows, ci, bits = self.defined.rows(ev, g, kind)
        if not len(rows):
            return uuid, vkind, vbits
        etype[rows] = E.COUNTER
        iid[rows] = 0
        uuid[rows] = self._counter_track(li[rows], ci)
        types = self.defined.types[ci]
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
        li, ci, mi, bits, tm = M.take(t, self._index, "Perfetto")
        if not len(li):
            return
        vkind = np.zeros(len(li), np.uint8)
        vbits = np.zeros(len(li), np.uint64)
        types = M.types[mi]
        for ty in np.unique(types).tolist():        # a few value types
            of = types == ty
            vkind[of], vbits[of] = counter_bits(bits[of], COUNTER_VALUE_TYPES[ty])
        self.m_used.append(np.unique(li * len(M.names) + mi))
        none = np.zeros(len(li), np.uint64)
        self._write_points(li * self.per_loc + self.per_loc - 1, tm,
                           self._member_track(li, ci, mi - M.first[ci] + 1),
                           np.full(len(li), E.COUNTER, np.uint8), np.zeros(len(li), np.int64),
                           none, none, None, (vkind, vbits))

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
        self.append(key, buf[:int(ends[-1])], ends)

    def _flows(self, ev: Table, g: np.ndarray, loc: np.ndarray, kind: np.ndarray):
        """Flow ids leaving each SEND and ending at each RECV (0: none)."""
        if "peer" not in ev:
            return np.zeros(len(g), np.uint64), np.zeros(len(g), np.uint64)
        peer = np.asarray(ev["peer"], dtype=np.int64)[g]
        tag = np.asarray(ev["tag"], dtype=np.int64)[g] if "tag" in ev \
            else np.zeros(len(g), np.int64)
        return self.flows.ids(kind, loc, peer, tag, peer != 0)

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
            self.append(keys, buf[:int(ends[-1])], ends)

    # -- end ------------------------------------------------------------------
    def gathered(self) -> tuple[np.ndarray, np.ndarray]:
        """The counter tracks with values (location index * counters + counter index), and
        the member tracks with values (location index * members + member index)."""
        return tuple(np.unique(np.concatenate(u)) if u else np.zeros(0, np.int64)
                     for u in (self.cnt_used, self.m_used))

    def header(self, gathered: list) -> bytes:
        """The TrackDescriptors: every location's track (under its parent's, where the
        parent is a location), then each location's tracks of sampled columns, then the
        tracks of counters with values (``used``: location index * counters + counter
        index, sorted), then those of counter members after the first with values
        (``mused``: location index * members + member index), each with its unit."""
        from ..formats.perfetto import encode as E
        used, mused = (np.unique(np.concatenate([g[j] for g in gathered])) for j in (0, 1))
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
