"""Writing merged rows as Chrome's Trace Event Format (NAME.json), opened by chrome://tracing
and ui.perfetto.dev: for small traces (the viewers load the whole file).

What is written (decided from the definitions and the schema, never the source format):
- each location as a thread (tid = its id) of a process: its parent location where it
  has one (a thread's process, a ROSS LP's KP), else itself (pid = its id); metadata
  events name every process and thread;
- ENTER/LEAVE as B/E events named by the region (by the kind where the region is not
  defined); a COUNTER event of a defined counter as a counter event ("C") named by the
  counter, id the location, its one series named by the counter's unit ("value" where it
  has none) holding the value as the counters table's value_type reads it; every other
  event as an instant ("i", thread scope) named by its region or its kind; a message's
  instant carries peer, tag and size as args;
- a message as a flow ("s" at its SEND, "f" binding to the enclosing slice at its RECV):
  the k-th SEND from S to R with tag T and the k-th RECV on R from S with tag T (MPI's
  non-overtaking order, as the Perfetto output pairs them) share the flow id;
- each row of a sample table (Role.SAMPLES in the schema; its measure columns, as the
  Perfetto output draws them) as a counter event ("C") named by the table, id the
  location, one series per column.
- a counter of several values (the ``counter_members`` definitions) as a counter event per
  member, named by the member, its series the member's unit (the first member's is the
  COUNTER event's own; the others' values come from the member values table).
Times are µs with 3 decimals (exact ns); displayTimeUnit is ns.  Strings are UTF-8 (JSON's
rule): a name holding bytes of another character set is written with each such byte as
``\\xNN`` (model.utf8_name, as the OTF2 and Perfetto outputs).

Layout, identical whatever the rank count: a location's rows go to a fixed owner
(contiguous blocks of locations in id order), which turns each window's rows into lines
(formats/chrome/encode.py: numpy byte strings, a chunk at a time) grouped by (location,
table) and appends them to a part file, noting where each group's pieces are; at commit
every rank copies its groups into the output at offsets ordered by (location, table),
after the metadata events rank 0 writes.  No byte depends on windows or ranks.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
from ..engine.sink import Sink
from ..errors import PartraceError
from ..model import (COUNTER_VALUE_TYPES, Definitions, Kind, Schema, Table, counter_value_types,
                     counter_values, not_utf8_warning, utf8_names)
from .parts import count_within, place_parts
from .perfetto_sink import CounterMembers, counter_columns
from ..engine.leftovers import run_name
from .staging import Staging

EVENTS = "events"
KIND_NAMES = {int(k): k.name for k in Kind}
MAX_KIND = 256
HEADER = b'{"traceEvents":[\n'
FOOTER = b'\n],\n"displayTimeUnit":"ns"}\n'


class ChromeSink(Sink):
    mode = "destination"
    windows = True

    def __init__(self, path, overwrite: bool = False):
        self.final = Path(path)
        self.overwrite = overwrite
        self.staging: Staging | None = None
        self.part = None

    # -- definitions ---------------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        from ..formats.chrome import encode as C
        locs = defs.tables["locations"]
        order = np.argsort(np.asarray(locs["id"], dtype=np.int64), kind="stable")
        self.loc_ids = np.asarray(locs["id"], dtype=np.int64)[order]
        self.loc_names, changed = utf8_names(locs["name"][i] for i in order)
        parents = np.asarray(locs["parent"], dtype=np.int64)[order]
        n = len(self.loc_ids)
        # a thread of its parent location's process, or a process of its own
        self.pid = np.where(np.isin(parents, self.loc_ids), parents, self.loc_ids)
        self.where = C.join(b',"pid":', C.integers(self.pid), b',"tid":',
                            C.integers(self.loc_ids)) if n else np.zeros(0, "S1")
        self.owner = (np.arange(n, dtype=np.int64) * comm.size) // max(n, 1)
        self.counters = counter_columns(schema)
        self.tables = {name: 1 + k for k, (name, _) in enumerate(self.counters)}
        self.per_loc = 1 + len(self.counters)       # groups per location: events, sample tables
        regs = defs.tables["regions"]
        rorder = np.argsort(np.asarray(regs["id"], dtype=np.int64), kind="stable")
        self.reg_ids = np.asarray(regs["id"], dtype=np.int64)[rorder]
        names, c1 = utf8_names(regs["name"][i] for i in rorder)
        names += [KIND_NAMES.get(k, f"kind {k}") for k in range(MAX_KIND)]
        self.names = C.literals(names)          # regions in id order, then one per kind
        # defined counters in id order: their names, series (unit) and value types
        cnt = defs.tables.get("counters")
        cnt = cnt if cnt is not None and len(cnt) else None
        corder = np.argsort(np.asarray(cnt["id"], dtype=np.int64), kind="stable") \
            if cnt is not None else np.zeros(0, np.int64)
        self.cnt_ids = np.asarray(cnt["id"], dtype=np.int64)[corder] if cnt is not None \
            else np.zeros(0, np.int64)
        cnt_names, c2 = utf8_names(cnt["name"][i] for i in corder)
        series, c3 = utf8_names(cnt["unit"][i] if "unit" in cnt and str(cnt["unit"][i])
                                else "value" for i in corder)
        # counters of several values: member 0 is the counter event's own value (named by
        # the member, its series the member's unit); the others' come from the member values
        # table, a counter event each, grouped after the sample tables' lines
        self.members = CounterMembers(defs, schema, self.cnt_ids)
        for ci, (nm, un) in self.members.head.items():
            (cnt_names[ci], series[ci]), c4 = utf8_names([nm, un or "value"])
            changed += c4
        m_names, c5 = utf8_names(self.members.names)
        m_series, c6 = utf8_names(u or "value" for u in self.members.units)
        self.m_names, self.m_series = C.literals(m_names), C.literals(m_series)
        if self.members.table is not None:
            self.per_loc += 1
        self.cnt_names, self.cnt_series = C.literals(cnt_names), C.literals(series)
        changed += c1 + c2 + c3 + c5 + c6
        if changed and comm.rank == 0:
            warnings.warn(f"{self.final}: {not_utf8_warning(changed)} (JSON's strings are "
                          "UTF-8)")
        # each counter's value type as its place in COUNTER_VALUE_TYPES (numbers: compared
        # per row without Python objects)
        self.cnt_types = np.asarray([COUNTER_VALUE_TYPES.index(t) for t in
                                     counter_value_types(cnt)], np.int64)[corder] \
            if cnt is not None else np.zeros(0, np.int64)
        self.sent = (np.zeros(0, np.uint64), np.zeros(0, np.int64))    # message key -> count
        self.recvd = (np.zeros(0, np.uint64), np.zeros(0, np.int64))
        self.pieces: list[np.ndarray] = []
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
        if not len(self.loc_ids):
            raise PartraceError(f"{table}: the trace defines no location to make a thread of")
        i = np.minimum(np.searchsorted(self.loc_ids, locations), len(self.loc_ids) - 1)
        bad = self.loc_ids[i] != locations
        if bad.any():
            loc = int(locations[np.flatnonzero(bad)[0]])
            raise PartraceError(f"{table}: location {loc} is not in the trace's locations table")
        return i

    def destinations(self, comm: Comm, name: str, table: Table) -> np.ndarray:
        if name != EVENTS and name not in self.tables and name != self.members.table:
            return np.full(len(table), comm.rank, dtype=np.int64)     # not written
        return self.owner[self._index(np.asarray(table["location"]), name)]

    # -- windows --------------------------------------------------------------
    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        with comm.guard():
            ev = tables.get(EVENTS)
            if ev is not None and len(ev):
                self._write_events(ev)
            for name, cols in self.counters:
                t = tables.get(name)
                if t is not None and len(t):
                    self._write_counters(name, cols, t)
            t = tables.get(self.members.table) if self.members.table else None
            if t is not None and len(t):
                self._write_members(t)
        comm.check()

    def _append(self, keys: np.ndarray, buf: bytes, ends: np.ndarray) -> None:
        """A chunk's lines (grouped by key, in order): write them, note each key's piece."""
        last = np.r_[np.flatnonzero(keys[1:] != keys[:-1]), len(keys) - 1]
        stop = ends[last]
        start = np.r_[0, stop[:-1]]
        self.pieces.append(np.stack([keys[last], start + self.part_size, stop - start], axis=1))
        self.part.write(buf)
        self.part_size += len(buf)

    def _write_events(self, ev: Table) -> None:
        from ..formats.chrome import encode as C
        li = self._index(np.asarray(ev["location"]), EVENTS)
        g = np.argsort(li, kind="stable")             # grouped by location, in key order within
        li = li[g]
        n = len(g)
        zeros = np.zeros(n, np.int64)
        col = lambda c: np.asarray(ev[c])[g] if c in ev else zeros  # noqa: E731
        kind = np.asarray(ev["kind"]).astype(np.int64)[g]
        tm = np.asarray(ev["time"], dtype=np.int64)[g]
        region = col("region").astype(np.int64)
        r = np.minimum(np.searchsorted(self.reg_ids, region), max(len(self.reg_ids) - 1, 0))
        known = (self.reg_ids[r] == region) if len(self.reg_ids) else np.zeros(n, bool)
        iid = np.where(known, r, len(self.reg_ids) + np.minimum(kind, MAX_KIND - 1))
        ph = np.where(kind == Kind.ENTER, b'B"', np.where(kind == Kind.LEAVE, b'E"',
                                                          b'i","s":"t"'))
        flow_out, flow_in, message = self._flows(ev, g, kind)
        peer, tag, size = col("peer"), col("tag"), col("size")
        counted, cnt_line = self._counters(ev, g, kind)
        for a, b in C.chunks(n):
            at = self.where[li[a:b]]
            ts = C.micros(tm[a:b])
            m = message[a:b]
            args = np.where(m, C.join(b',"args":{"peer":', C.integers(peer[a:b].astype(np.int64)),
                                      b',"tag":', C.integers(tag[a:b].astype(np.int64)),
                                      b',"size":', C.numbers(size[a:b]), b'}'), b"")
            fo, fi = flow_out[a:b], flow_in[a:b]
            # a flow's start or end: an event of its own, on the same line group
            flow = np.where(fo != 0, C.join(b',\n{"ph":"s","cat":"message","name":"message","id":',
                                            C.quoted(fo), at, b',"ts":', ts, b'}'), b"")
            flow = np.where(fi != 0, C.join(b',\n{"ph":"f","bp":"e","cat":"message",'
                                            b'"name":"message","id":', C.quoted(fi), at,
                                            b',"ts":', ts, b'}'), flow)
            lines = C.join(b',\n{"ph":"', ph[a:b], at, b',"ts":', ts, b',"name":',
                           self.names[iid[a:b]], args, b'}', flow)
            c = counted[a:b]
            if c.any():         # a counter's value instead of an instant
                lines = np.where(c, C.join(b',\n{"ph":"C"', at, b',"ts":', ts, cnt_line[a:b]),
                                 lines)
            buf, ends = C.text(lines)
            self._append(li[a:b] * self.per_loc, buf, ends)

    def _counters(self, ev: Table, g: np.ndarray, kind: np.ndarray):
        """Which rows are COUNTER events of a defined counter, and for those the rest of
        their counter event (name, id, series and value; b"" elsewhere)."""
        from ..formats.chrome import encode as C
        n = len(g)
        counted = np.zeros(n, bool)
        rest = np.full(n, b"", dtype="S1")
        rows = np.flatnonzero(kind == Kind.COUNTER)
        if not len(rows) or not len(self.cnt_ids) or "counter" not in ev:
            return counted, rest
        c = np.asarray(ev["counter"], dtype=np.int64)[g[rows]]
        ci = np.minimum(np.searchsorted(self.cnt_ids, c), len(self.cnt_ids) - 1)
        ok = self.cnt_ids[ci] == c
        rows, ci = rows[ok], ci[ok]
        counted[rows] = True
        bits = np.asarray(ev["value"])[g[rows]].astype(np.uint64) if "value" in ev \
            else np.zeros(len(rows), np.uint64)
        value = np.zeros(len(rows), "S32")
        types = self.cnt_types[ci]
        for t in np.unique(types).tolist():         # a few value types
            of = types == t
            value[of] = C.numbers(counter_values(bits[of], COUNTER_VALUE_TYPES[t]))
        loc = np.asarray(ev["location"], dtype=np.int64)[g[rows]]
        rest = rest.astype(object)
        rest[rows] = C.join(b',"name":', self.cnt_names[ci], b',"id":', C.quoted(loc),
                            b',"args":{', self.cnt_series[ci], b':', value, b'}}')
        return counted, rest.astype("S")

    def _flows(self, ev: Table, g: np.ndarray, kind: np.ndarray):
        """Flow ids leaving each SEND and ending at each RECV (0: none), and which rows are
        messages (a SEND or RECV whose peer is a location)."""
        from ..formats.perfetto.encode import hash_of
        n = len(g)
        out, into = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
        if "peer" not in ev:
            return out, into, np.zeros(n, bool)
        loc = np.asarray(ev["location"], dtype=np.int64)[g]
        peer = np.asarray(ev["peer"], dtype=np.int64)[g]
        tag = np.asarray(ev["tag"], dtype=np.int64)[g] if "tag" in ev else np.zeros(n, np.int64)
        message = ((kind == Kind.SEND) | (kind == Kind.RECV)) & np.isin(peer, self.loc_ids)
        for side, target in ((Kind.SEND, out), (Kind.RECV, into)):
            rows = np.flatnonzero((kind == side) & message)
            if not len(rows):
                continue
            s, r = (loc[rows], peer[rows]) if side == Kind.SEND else (peer[rows], loc[rows])
            k, state = count_within(hash_of(s, r, tag[rows]),
                                     self.sent if side == Kind.SEND else self.recvd)
            if side == Kind.SEND:
                self.sent = state
            else:
                self.recvd = state
            fid = hash_of(s, r, tag[rows], k)
            target[rows] = np.where(fid == 0, np.uint64(1), fid)
        return out, into, message

    def _write_counters(self, name: str, cols: list, t: Table) -> None:
        from ..formats.chrome import encode as C
        li = self._index(np.asarray(t["location"]), name)
        g = np.argsort(li, kind="stable")
        li = li[g]
        tm = np.asarray(t["time"], dtype=np.int64)[g]
        values = [np.asarray(t[c.name])[g] for c in cols]
        head = b',\n{"ph":"C","name":' + C.literals([name])[0] + b',"id":'
        labels = [C.literals([c.name])[0] + b":" for c in cols]
        for a, b in C.chunks(len(g)):
            series = []
            for j, (lab, v) in enumerate(zip(labels, values)):
                series += [(b"," if j else b"") + lab, C.numbers(v[a:b])]
            lines = C.join(head, C.quoted(self.loc_ids[li[a:b]]), self.where[li[a:b]],
                           b',"ts":', C.micros(tm[a:b]), b',"args":{', *series, b'}}')
            buf, ends = C.text(lines)
            self._append(li[a:b] * self.per_loc + self.tables[name], buf, ends)

    def _write_members(self, t: Table) -> None:
        """The values after the first of records of counters of several values: each a
        counter event named by its member, id the location, its series the member's unit."""
        from ..formats.chrome import encode as C
        M = self.members
        rows, _, mi = M.rows(t, self.cnt_ids, "Chrome JSON")
        if not len(rows):
            return
        li = self._index(np.asarray(t["location"])[rows], M.table)
        g = np.argsort(li, kind="stable")
        rows, mi, li = rows[g], mi[g], li[g]
        bits = np.asarray(t["value"])[rows].astype(np.uint64)
        value = np.zeros(len(rows), "S32")
        types = M.types[mi]
        for ty in np.unique(types).tolist():        # a few value types
            of = types == ty
            value[of] = C.numbers(counter_values(bits[of], COUNTER_VALUE_TYPES[ty]))
        tm = np.asarray(t["time"], dtype=np.int64)[rows]
        for a, b in C.chunks(len(rows)):
            lines = C.join(b',\n{"ph":"C"', self.where[li[a:b]], b',"ts":', C.micros(tm[a:b]),
                           b',"name":', self.m_names[mi[a:b]], b',"id":',
                           C.quoted(self.loc_ids[li[a:b]]), b',"args":{',
                           self.m_series[mi[a:b]], b':', value[a:b], b'}}')
            buf, ends = C.text(lines)
            self._append(li[a:b] * self.per_loc + self.per_loc - 1, buf, ends)

    # -- end ------------------------------------------------------------------
    def _header(self) -> bytes:
        """The metadata events: each process's name (its location's), each thread's."""
        from ..formats.chrome import encode as C
        if not len(self.loc_ids):
            return HEADER
        names = C.literals(self.loc_names)
        procs = np.unique(self.pid)
        p = np.searchsorted(self.loc_ids, procs)
        lines = np.concatenate([
            C.join(b'{"ph":"M","name":"process_name","pid":', C.integers(procs),
                   b',"args":{"name":', names[p], b'}}'),
            C.join(b'{"ph":"M","name":"thread_name"', self.where, b',"args":{"name":',
                   names, b'}}')])
        # lines after the first begin with ",\n", as every event line does
        lines[1:] = C.join(b",\n", lines[1:])
        return HEADER + C.text(lines)[0]

    def commit(self, comm: Comm) -> None:
        with comm.guard():
            self.part.close()
            pieces = np.concatenate(self.pieces) if self.pieces else np.zeros((0, 3), np.int64)
            pieces = pieces[np.argsort(pieces[:, 0], kind="stable")]
            keys, first = np.unique(pieces[:, 0], return_index=True)
            totals = np.add.reduceat(pieces[:, 2], first) if len(keys) else np.zeros(0, np.int64)
            header = self._header() if comm.rank == 0 else b""
        comm.check()
        everything = comm.allgather((keys, totals))
        header_size = comm.bcast(len(header))
        with comm.guard():
            all_keys = np.concatenate([k for k, _ in everything])
            all_totals = np.concatenate([t for _, t in everything])
            o = np.argsort(all_keys, kind="stable")
            offsets = np.empty(len(o), np.int64)
            offsets[o] = header_size + np.r_[0, np.cumsum(all_totals[o])[:-1]]
            dest = offsets[o][np.searchsorted(all_keys[o], keys)]
            out = self.staging.path("out")
            if comm.rank == 0:
                body = header_size + int(all_totals.sum())
                with open(out, "wb") as f:
                    f.write(header)
                    f.seek(body)
                    f.write(FOOTER)
        comm.check()
        comm.barrier()
        place_parts(comm, self.staging, self.final.name, out, dest, keys, pieces)

    def discard(self, comm: Comm) -> None:
        if self.part is not None and not self.part.closed:
            self.part.close()
        comm.barrier()
        if comm.rank == 0 and self.staging is not None:
            self.staging.discard()
