"""Writing merged rows as an OTF2 archive (NAME.otf2 anchor file, NAME.def global
definitions, NAME/<location>.evt event files), read by Vampir, Scalasca, Pipit, otf2-print.

What is written (formats/otf2/definitions.py says how definitions map):
- ENTER/LEAVE of a defined region as Enter/Leave;
- SEND/RECV with a defined peer as MpiSend/MpiRecv (peer as its rank in the
  communicator, tag as 32 bits, size);
- COLLECTIVE_BEGIN/END as MpiCollectiveBegin/End, a COLLECTIVE record as both at its
  time (operation, communicator, root's rank, bytes sent and received);
- COUNTER events of a defined counter, and every row of a sample table (ROSS
  engine and model samples), as Metric records.
Every other row (other event kinds, OTF's snapshots, statistics, markers,
key-values and comments, DUMPI's argument tables, ovni's raw events and jumbo
payloads) is not written: OTF2 has no record for most of them, or this sink does
not map them yet (README, "OTF2 output").

Layout, identical whatever the rank count: a location's rows go to a fixed owner
(contiguous blocks of locations in id order), which hands them, in (time, seq,
table) order, to the library's event writer of that location (a numba loop
calling the C functions: no Python per row).  Writers are independent, so rows go in the
window's key order; only rows of several tables are sorted together.  Each rank writes its locations'
event files in an archive of its own under the staging folder; at commit rank 0
writes the anchor file and the global definitions (with each location's record
count) and every rank moves its event files into the archive's folder.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
from ..engine.sink import Sink
from ..errors import PartraceError, UsageError
from ..model import Definitions, Kind, Schema, Table
from .perfetto_sink import counter_columns
from .staging import Staging

EVENTS = "events"
SUFFIX = ".otf2"
CREATOR = "partrace"
MAX_MEMBERS = 255           # values one OTF2 Metric record holds


class OTF2Sink(Sink):
    mode = "destination"
    windows = True
    wants_next_keys = True      # OTF2 input's replay holds rows a window cut splits
    replay = None               # OTF2 input: formats/otf2/replay.py writes it back

    def __init__(self, path, overwrite: bool = False):
        self.final = Path(path)
        if self.final.suffix != SUFFIX:
            raise UsageError(f"{path}: an OTF2 anchor file is named NAME.otf2")
        self.name = self.final.stem
        self.overwrite = overwrite
        self.staging: Staging | None = None
        self.archive = None

    def _check_chunks(self, comm: Comm, most: int) -> None:
        """The library holds one event chunk (OTF2's smallest, 256 KiB) per location a rank
        writes, for the whole run: refuse a run whose busiest rank's chunks would take more
        than half the memory budget (every rank computes the same answer)."""
        from ..formats.otf2.library import EVENT_CHUNK
        if self.memory is None or most * EVENT_CHUNK <= self.memory // 2:
            return
        ranks = -(-(most * comm.size * EVENT_CHUNK) // (self.memory // 2))
        def size(b):
            return f"{b / (1 << 30):.1f} GiB" if b >= 1 << 30 else f"{b / (1 << 20):.1f} MiB"
        raise UsageError(f"OTF2 output holds a 256 KiB event chunk per location a rank "
                         f"writes: {most:,} locations per rank need {size(most * EVENT_CHUNK)}, "
                         f"more than half of the --memory budget ({size(self.memory)}); run "
                         f"on {ranks:,} or more ranks, or raise --memory")

    # -- definitions ---------------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        from ..formats.otf2.definitions import plan
        with comm.guard():
            from ..formats.otf2.library import load
            load()          # one clear line on every rank if the otf2 package is missing
            samples = counter_columns(schema)
            wide = [t for t, cols in samples if len(cols) > MAX_MEMBERS]
            if wide:
                raise UsageError(f"{wide[0]}: more than {MAX_MEMBERS} sampled columns, more "
                                 "than one OTF2 metric record holds")
            self.layout = plan(defs, schema, samples)
            # -- hook: OTF2 input written back as it is (formats/otf2/replay.py) --
            from ..formats.otf2.replay import replay_of
            self.replay = replay_of(defs, self.layout)
            if self.replay is not None:
                self.layout = self.replay.layout
            # -- end hook --
        comm.check()
        L = self.layout
        n = len(L.loc_ids)
        self.owner = (np.arange(n, dtype=np.int64) * comm.size) // max(n, 1)
        self.mine = np.flatnonzero(self.owner == comm.rank)     # contiguous
        self._check_chunks(comm, int(np.bincount(self.owner, minlength=comm.size).max()))
        self.first_mine = int(self.mine[0]) if len(self.mine) else 0
        self.tables = {t for t, _, _ in L.sample_tables}
        if self.replay is not None:     # hook: its side tables go with their events
            self.tables |= self.replay.tables
        self.counts = np.zeros(len(self.mine), np.int64)
        self.span = [np.iinfo(np.int64).max, np.iinfo(np.int64).min]
        # metric value types, 256 bytes a class (OTF2_Type codes)
        self.types = np.zeros((max(len(L.metrics), 1), 256), np.uint8)
        for m, members in enumerate(L.metrics):
            self.types[m, :len(members)] = [typ for _, _, typ in members]
        self.nvalues = np.asarray([len(m) for m in L.metrics] or [0], np.uint8)
        self.width = max([len(m) for m in L.metrics] or [1])
        run_id = comm.bcast(f"{os.getpid()}-{int(time.time())}")
        self.staging = Staging(self.final, run_id)
        with comm.guard():
            if comm.rank == 0:
                self.staging.check_free([self.final, self.final.with_suffix(".def"),
                                         self.final.with_suffix("")], self.overwrite)
                self.staging.create()
        comm.check()
        comm.barrier()
        with comm.guard():
            from ..formats.otf2.library import EventArchive
            folder = self.staging.path(f"rank-{comm.rank}")
            folder.mkdir()
            self.archive = EventArchive(folder)
            self.writers = np.asarray([self.archive.writer(int(i)) for i in L.loc_ids[self.mine]],
                                      dtype=np.uint64)
        comm.check()

    def _index(self, locations: np.ndarray, table: str) -> np.ndarray:
        if not len(self.layout.loc_ids):
            raise PartraceError(f"{table}: the trace defines no location to write events of")
        i, ok = self.layout.location_index(locations)
        if not ok.all():
            loc = int(locations[np.flatnonzero(~ok)[0]])
            raise PartraceError(f"{table}: location {loc} is not in the trace's locations table")
        return i

    def destinations(self, comm: Comm, name: str, table: Table) -> np.ndarray:
        if name != EVENTS and name not in self.tables:
            return np.full(len(table), comm.rank, dtype=np.int64)     # not written
        return self.owner[self._index(np.asarray(table["location"]), name)]

    # -- windows --------------------------------------------------------------
    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        if self.replay is not None:     # hook: OTF2 input (formats/otf2/replay.py)
            with comm.guard():
                self.replay.write(tables, self.next_keys, self.writers, self.first_mine,
                                  self.counts)
            comm.check()
            return
        with comm.guard():
            parts = []
            ev = tables.get(EVENTS)
            if ev is not None and len(ev):
                parts.append(self._events(ev))
            for k, (name, cols, ref) in enumerate(self.layout.sample_tables):
                t = tables.get(name)
                if t is not None and len(t):
                    parts.append(self._samples(t, name, cols, ref, 1 + k))
            if parts:
                self._write(parts)
        comm.check()

    def _events(self, ev: Table) -> dict:
        """Each event row's record (op NONE: not written) and its fields."""
        from ..formats.otf2 import events as E
        from ..formats.otf2.definitions import UNDEFINED_U32
        L = self.layout
        n = len(ev)
        li = self._index(np.asarray(ev["location"]), EVENTS)
        kind = np.asarray(ev["kind"]).astype(np.int64)
        zeros = np.zeros(n, np.int64)
        col = lambda c: np.asarray(ev[c]).astype(np.int64) if c in ev else zeros  # noqa: E731
        op = np.zeros(n, np.uint8)
        ref = np.zeros(n, np.int64)
        region = col("region")
        r, known = L.lookup(L.reg_ids, region)
        for k, o in ((Kind.ENTER, E.ENTER), (Kind.LEAVE, E.LEAVE)):
            hit = (kind == k) & known
            op[hit] = o
            ref[hit] = r[hit]
        rank = np.zeros(n, np.int64)
        collop = np.zeros(n, np.uint8)
        col_at = lambda c, rows: np.asarray(ev[c])[rows].astype(np.int64) if c in ev \
            else np.zeros(len(rows), np.int64)  # noqa: E731
        # messages and collectives (their rows only): the communicator is a defined one with
        # members, else every location (ref 0); peer and root as ranks in it
        rows = np.flatnonzero((kind >= Kind.SEND) & (kind <= Kind.COLLECTIVE_END)
                              & (kind != Kind.COUNTER))
        if len(rows):
            k = kind[rows]
            c, cknown = L.lookup(L.comm_ids, col_at("comm", rows))
            cref = np.where(cknown, 1 + c, 0)
            peer_i, peer_ok = L.location_index(col_at("peer", rows))
            prank, member = L.ranks(cref, peer_i)
            msg = peer_ok & ((k == Kind.SEND) | (k == Kind.RECV))
            cref = np.where(msg & ~member, 0, cref)     # a peer outside it: on every location's
            prank = np.where(member, prank, peer_i)
            root_i, root_ok = L.location_index(col_at("root", rows))
            root, root_member = L.ranks(cref, root_i)
            # no root: OTF2_UNDEFINED_UINT32
            root = np.where(root_ok & root_member, root, UNDEFINED_U32)
            coll = k >= Kind.COLLECTIVE
            ops = np.select([msg & (k == Kind.SEND), msg & (k == Kind.RECV),
                             k == Kind.COLLECTIVE_BEGIN, k == Kind.COLLECTIVE_END,
                             k == Kind.COLLECTIVE],
                            [E.SEND, E.RECV, E.COLL_BEGIN, E.COLL_END, E.COLLECTIVE], E.NONE)
            op[rows] = ops
            ref[rows] = cref
            rank[rows] = np.where(coll, root, prank)
            ci, cok = L.lookup(L.coll_ids, col_at("collop", rows))
            collop[rows] = np.where(cok & coll, L.coll_ops[ci] if len(L.coll_ops) else 0, 0)
        # counters: a metric of one uint64 value
        values = np.zeros((n, 1), np.uint64)
        rows = np.flatnonzero(kind == Kind.COUNTER)
        if len(rows):
            m, mok = L.lookup(L.counter_ids, col_at("counter", rows))
            op[rows[mok]] = E.METRIC
            ref[rows[mok]] = m[mok]
            if "value" in ev:
                values[rows, 0] = np.asarray(ev["value"])[rows].astype(np.uint64)
        return dict(loc=li, time=np.asarray(ev["time"], dtype=np.int64), seq=col("seq"),
                    table=np.zeros(n, np.int64), op=op, ref=ref, rank=rank,
                    tag=col("tag") & 0xFFFFFFFF, size=np.asarray(ev["size"]).astype(np.uint64)
                    if "size" in ev else np.zeros(n, np.uint64),
                    received=np.asarray(ev["received"]).astype(np.uint64) if "received" in ev
                    else np.zeros(n, np.uint64), collop=collop, values=values)

    def _samples(self, t: Table, name: str, cols: list, ref: int, table: int) -> dict:
        """Every row of a sample table: one Metric record of all its measured columns."""
        from ..formats.otf2 import events as E
        n = len(t)
        values = np.empty((n, len(cols)), np.uint64)
        for j, c in enumerate(cols):
            v = np.asarray(t[c])
            # the value's 8 bytes: a double's, or an integer's (two's complement)
            values[:, j] = (v.astype(np.float64) if v.dtype.kind == "f"
                            else v.astype(np.int64)).view(np.uint64)
        zeros = np.zeros(n, np.int64)
        return dict(loc=self._index(np.asarray(t["location"]), name),
                    time=np.asarray(t["time"], dtype=np.int64),
                    seq=np.asarray(t["seq"], dtype=np.int64), table=np.full(n, table, np.int64),
                    op=np.full(n, E.METRIC, np.uint8), ref=np.full(n, ref, np.int64), rank=zeros,
                    tag=zeros, size=zeros.view(np.uint64), received=zeros.view(np.uint64),
                    collop=np.zeros(n, np.uint8), values=values)

    def _write(self, parts: list[dict]) -> None:
        from ..formats.otf2 import events as E
        from ..formats.otf2.library import error_name
        if len(parts) == 1:         # one table's rows come in key order: each location's in order
            cat, values = parts[0], np.ascontiguousarray(parts[0]["values"])
            order = np.arange(len(cat["time"]))
        else:
            cat = {k: np.concatenate([p[k] for p in parts]) for k in parts[0] if k != "values"}
            # the values of metric rows, one row of the widest class each
            values = np.zeros((len(cat["time"]), self.width), np.uint64)
            at = 0
            for p in parts:
                v = p["values"]
                values[at:at + len(v), :v.shape[1]] = v
                at += len(v)
            # a location's rows of several tables in (time, seq, table) order: the order any
            # window cut keeps (the engine cuts every table at the same (time, location, seq))
            order = np.lexsort((cat["table"], cat["seq"], cat["loc"], cat["time"]))
        written = cat["op"] != E.NONE
        if not written.any():
            return
        tm = cat["time"][written]
        if tm.min() < 0:
            bad = np.flatnonzero(written & (cat["time"] < 0))[0]
            raise PartraceError(f"location {int(self.layout.loc_ids[cat['loc'][bad]])}: time "
                                f"{int(cat['time'][bad])} ns is before 0, which OTF2's unsigned "
                                "timestamps cannot hold")
        self.span = [min(self.span[0], int(tm.min())), max(self.span[1], int(tm.max()))]
        rc, row = E.write_rows(order, self.writers, cat["loc"] - self.first_mine, cat["time"],
                               cat["op"], cat["ref"], cat["rank"], cat["ref"], cat["tag"],
                               cat["size"], cat["received"], cat["collop"], values.ctypes.data,
                               values.shape[1] * 8, self.nvalues, self.types.ctypes.data,
                               self.counts)
        if rc:
            raise PartraceError(f"location {int(self.layout.loc_ids[cat['loc'][row]])}, time "
                                f"{int(cat['time'][row])} ns: the OTF2 library refused the "
                                f"record ({error_name(rc)})")

    # -- end ------------------------------------------------------------------
    def commit(self, comm: Comm) -> None:
        from ..formats.otf2.definitions import write_global
        with comm.guard():
            self.archive.close()
            if self.replay is not None:     # hook: nothing held back at the end
                self.replay.finish()
        comm.check()
        counts = np.concatenate(comm.allgather(self.counts))
        spans = comm.allgather(self.span)
        first = min(s[0] for s in spans)
        last = max(s[1] for s in spans)
        if first > last:
            first = last = 0        # no record at all
        folder = self.staging.path(self.name)
        with comm.guard():
            if comm.rank == 0 and self.replay is not None:     # hook: OTF2 input's own
                self.replay.write_global(self.staging.dir, self.name, counts, CREATOR)
            elif comm.rank == 0:
                write_global(self.staging.dir, self.name, self.layout, counts, first, last,
                             CREATOR)
            if comm.rank == 0:
                folder.mkdir(exist_ok=True)
        comm.check()
        comm.barrier()
        with comm.guard():      # every rank moves its own locations' files into the archive
            events = self.staging.path(f"rank-{comm.rank}") / "events"
            for lid in self.layout.loc_ids[self.mine].tolist():
                for suffix in (".evt", ".def"):
                    os.replace(events / f"{lid}{suffix}", folder / f"{lid}{suffix}")
        comm.check()
        comm.barrier()
        with comm.guard():
            if comm.rank == 0:
                for r in range(comm.size):
                    shutil.rmtree(self.staging.path(f"rank-{r}"))
                self.staging.publish([self.final.name, self.final.with_suffix(".def").name,
                                      self.name])
        comm.check()

    def discard(self, comm: Comm) -> None:
        if self.archive is not None:
            try:
                self.archive.close()
            except OSError:
                pass            # the staging folder goes anyway
        comm.barrier()
        if comm.rank == 0 and self.staging is not None:
            self.staging.discard()
