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

import numpy as np

from ..engine.mpi import Comm
from ..model import (COUNTER_VALUE_TYPES, Definitions, Kind, Schema, Table, counter_values,
                     not_utf8_warning, utf8_names)
from .counters import CounterMembers, DefinedCounters, counter_columns, sample_writers
from .flows import MessageFlows
from .owned import EVENTS
from .parts import PartFileSink

KIND_NAMES = {int(k): k.name for k in Kind}
MAX_KIND = 256
HEADER = b'{"traceEvents":[\n'
FOOTER = b'\n],\n"displayTimeUnit":"ns"}\n'


class ChromeSink(PartFileSink):
    location_role = "to make a thread of"
    footer = FOOTER

    # -- definitions ---------------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        from ..formats.chrome import encode as C
        locs = defs.tables["locations"]
        order = np.argsort(np.asarray(locs["id"], dtype=np.int64), kind="stable")
        self.counters = counter_columns(schema)
        self.tables = {name: 1 + k for k, (name, _) in enumerate(self.counters)}
        # defined counters in id order; those of several values a counter event per member
        self.defined = DefinedCounters(defs)
        self.members = CounterMembers(defs, schema, self.defined)
        self.own(comm, np.asarray(locs["id"], dtype=np.int64)[order],
                 routed=self.tables.keys() | self.members.routed)
        self.loc_names, changed = utf8_names(locs["name"][i] for i in order)
        parents = np.asarray(locs["parent"], dtype=np.int64)[order]
        n = len(self.loc_ids)
        # a thread of its parent location's process, or a process of its own
        self.pid = np.where(np.isin(parents, self.loc_ids), parents, self.loc_ids)
        self.where = C.join(b',"pid":', C.integers(self.pid), b',"tid":',
                            C.integers(self.loc_ids)) if n else np.zeros(0, "S1")
        # groups per location: events, sample tables, (counters of several values) the
        # members after the first
        self.per_loc = 1 + len(self.counters) + len(self.members.routed)
        regs = defs.tables["regions"]
        rorder = np.argsort(np.asarray(regs["id"], dtype=np.int64), kind="stable")
        self.reg_ids = np.asarray(regs["id"], dtype=np.int64)[rorder]
        names, c1 = utf8_names(regs["name"][i] for i in rorder)
        names += [KIND_NAMES.get(k, f"kind {k}") for k in range(MAX_KIND)]
        self.names = C.literals(names)          # regions in id order, then one per kind
        # defined counters in id order: their names, series (unit) and value types; a
        # counter of several values named by its first member, its series that member's unit
        M = self.members
        cnt_names, series = M.labels(self.defined.names(), self.defined.units("value"), "value")
        cnt_names, c2 = utf8_names(cnt_names)
        series, c3 = utf8_names(series)
        self.cnt_names, self.cnt_series = C.literals(cnt_names), C.literals(series)
        m_names, c5 = utf8_names(M.names)
        m_series, c6 = utf8_names(M.member_units("value"))
        self.m_names, self.m_series = C.literals(m_names), C.literals(m_series)
        changed += c1 + c2 + c3 + c5 + c6
        if changed and comm.rank == 0:
            warnings.warn(f"{self.final}: {not_utf8_warning(changed)} (JSON's strings are "
                          "UTF-8)")
        self.flows = MessageFlows()
        self.stage(comm)
        self.open_part(comm)

    # -- windows --------------------------------------------------------------
    def table_writers(self) -> list:
        return [(EVENTS, self._write_events), *sample_writers(self)]

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
            self.append(li[a:b] * self.per_loc, buf, ends)

    def _counters(self, ev: Table, g: np.ndarray, kind: np.ndarray):
        """Which rows are COUNTER events of a defined counter, and for those the rest of
        their counter event (name, id, series and value; b"" elsewhere)."""
        from ..formats.chrome import encode as C
        n = len(g)
        counted = np.zeros(n, bool)
        rest = np.full(n, b"", dtype="S1")
        rows, ci, bits = self.defined.rows(ev, g, kind)
        if not len(rows):
            return counted, rest
        counted[rows] = True
        value = np.zeros(len(rows), "S32")
        types = self.defined.types[ci]
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
        n = len(g)
        if "peer" not in ev:
            return np.zeros(n, np.uint64), np.zeros(n, np.uint64), np.zeros(n, bool)
        loc = np.asarray(ev["location"], dtype=np.int64)[g]
        peer = np.asarray(ev["peer"], dtype=np.int64)[g]
        tag = np.asarray(ev["tag"], dtype=np.int64)[g] if "tag" in ev else np.zeros(n, np.int64)
        message = ((kind == Kind.SEND) | (kind == Kind.RECV)) & np.isin(peer, self.loc_ids)
        return (*self.flows.ids(kind, loc, peer, tag, message), message)

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
            self.append(li[a:b] * self.per_loc + self.tables[name], buf, ends)

    def _write_members(self, t: Table) -> None:
        """The values after the first of records of counters of several values: each a
        counter event named by its member, id the location, its series the member's unit."""
        from ..formats.chrome import encode as C
        M = self.members
        li, _, mi, bits, tm = M.take(t, self._index, "Chrome JSON")
        if not len(li):
            return
        value = np.zeros(len(li), "S32")
        types = M.types[mi]
        for ty in np.unique(types).tolist():        # a few value types
            of = types == ty
            value[of] = C.numbers(counter_values(bits[of], COUNTER_VALUE_TYPES[ty]))
        for a, b in C.chunks(len(li)):
            lines = C.join(b',\n{"ph":"C"', self.where[li[a:b]], b',"ts":', C.micros(tm[a:b]),
                           b',"name":', self.m_names[mi[a:b]], b',"id":',
                           C.quoted(self.loc_ids[li[a:b]]), b',"args":{',
                           self.m_series[mi[a:b]], b':', value[a:b], b'}}')
            buf, ends = C.text(lines)
            self.append(li[a:b] * self.per_loc + self.per_loc - 1, buf, ends)

    # -- end ------------------------------------------------------------------
    def header(self, gathered: list) -> bytes:
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
