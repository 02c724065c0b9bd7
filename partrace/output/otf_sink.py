"""Writing merged rows as an OTF trace whose processes sit on M streams.

Rows go to the rank that owns their output stream (streams are dealt to
ranks in contiguous blocks); each rank writes its streams' files; rank 0
writes the master file, the definitions and the marker file, so it also
receives the rows that are markers: the marker table, its key-values, and
the point events of a non-OTF input (formats.otf.generic.point_events).  The OTF
writer itself (partrace.formats.otf.writer) knows no MPI.

A stream that receives no events is left out of the master file: the
OTF library's reader wants an events file for every stream listed (its own
writer lists only the streams it wrote).
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
from ..errors import PartraceError, UsageError
from ..model import Definitions, Schema, Table
from .staging import Staging

EVENTS, MARKERS, KEYVALUES = "events", "markers", "keyvalues"
MARKER_REF = 3          # keyvalues.ref_table of a marker's key-values


class OTFSink:
    mode = "destination"
    windows = False     # the OTF writer writes a stream's files in one go

    def __init__(self, path, streams: int | None = None, overwrite: bool = False):
        self.final = Path(path)
        if self.final.suffix != ".otf":
            raise UsageError(f"{path}: an OTF output is named NAME.otf")
        self.streams_wanted = streams
        if streams is not None and streams < 0:
            raise UsageError("--streams must be 0 (one per process) or more")
        self.overwrite = overwrite
        self.name = self.final.name[:-len(".otf")]
        self.staging: Staging | None = None

    def _existing_outputs(self) -> list[Path]:
        pattern = re.compile(re.escape(self.name) + r"\.([0-9a-f]+\.(def|events|snaps|stats|marker)"
                             r"(\.z)?|otf)$")
        return [p for p in self.final.parent.iterdir() if pattern.match(p.name)]

    def _stream_map(self, defs: Definitions) -> dict[int, list[int]]:
        from ..formats.otf.writer import stream_map
        order = defs.attrs.get("process_order")
        if order is None:
            order = [int(x) for x in defs.tables["locations"]["id"]]
        if self.streams_wanted is None and defs.format == "otf" and defs.attrs.get("streams"):
            return {int(s): [int(p) for p in procs] for s, procs in defs.attrs["streams"].items()}
        return stream_map([int(p) for p in order], self.streams_wanted or 0)

    # -- collective steps --------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        from ..formats.otf.writer import is_otf
        self.defs, self.schema = defs, schema
        self.points = not is_otf(defs)      # point events of a non-OTF input are markers
        self.map = self._stream_map(defs)
        streams = sorted(self.map)
        # contiguous blocks of streams per rank, so that a rank writes neighbours
        self.owner = {s: i * comm.size // len(streams) for i, s in enumerate(streams)}
        locs, ranks, idx = [], [], []
        for s in streams:
            for p in self.map[s]:
                locs.append(p)
                ranks.append(self.owner[s])
                idx.append(s)
        order = np.argsort(np.asarray(locs, dtype=np.int64), kind="stable")
        self._locs = np.asarray(locs, dtype=np.int64)[order]
        self._rank_of = np.asarray(ranks, dtype=np.int64)[order]
        self._stream_of = np.asarray(idx, dtype=np.int64)[order]
        run_id = comm.bcast(f"{os.getpid()}-{int(time.time())}")
        self.staging = Staging(self.final, run_id)
        with comm.guard():
            if comm.rank == 0:
                self.staging.check_free(self._existing_outputs(), self.overwrite)
                self.staging.create()
        comm.check()

    def _lookup(self, locations: np.ndarray, what: np.ndarray, table: str) -> np.ndarray:
        """`what` (owner rank or stream) of each row's location."""
        if not len(self._locs):
            raise PartraceError(f"{table}: the trace defines no location to make an OTF process of")
        i = np.minimum(np.searchsorted(self._locs, locations), len(self._locs) - 1)
        bad = self._locs[i] != locations
        if bad.any():   # a reader must define every location its rows name
            loc = int(locations[np.flatnonzero(bad)[0]])
            raise PartraceError(f"{table}: location {loc} is not in the trace's locations table")
        return what[i]

    def destinations(self, comm: Comm, name: str, table: Table) -> np.ndarray:
        if name == MARKERS:
            return np.zeros(len(table), dtype=np.int64)
        dest = np.zeros(len(table), dtype=np.int64)
        sel = np.ones(len(table), dtype=bool)
        if name == KEYVALUES and "ref_table" in table:
            sel = table["ref_table"] != MARKER_REF
        if name == EVENTS and self.points:
            sel = ~self._point_events(table)
        if sel.any():
            dest[sel] = self._lookup(table["location"][sel], self._rank_of, name)
        return dest

    @staticmethod
    def _point_events(table: Table) -> np.ndarray:
        from ..formats.otf.generic import point_events
        return point_events(table)

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        from ..formats.otf import writer
        stub = self.staging.path(self.name)
        written = set()
        points = None
        with comm.guard():
            per_stream: dict[int, dict[str, Table]] = {}
            for name, table in tables.items():
                if name == MARKERS or not len(table):
                    continue
                rows = table
                if name == KEYVALUES and "ref_table" in table:
                    rows = table.take(np.flatnonzero(table["ref_table"] != MARKER_REF))
                if name == EVENTS and self.points:
                    point = self._point_events(table)
                    points = table.take(np.flatnonzero(point))      # only rank 0 receives any
                    rows = table.take(np.flatnonzero(~point))
                if not len(rows):
                    continue
                stream = self._lookup(rows["location"], self._stream_of, name)
                order = np.argsort(stream, kind="stable")    # keeps (time, location, seq) order
                bounds = np.flatnonzero(np.diff(stream[order])) + 1
                for part in np.split(order, bounds):
                    per_stream.setdefault(int(stream[part[0]]), {})[name] = rows.take(part)
            for s in sorted(per_stream):
                paths = writer.write_stream(stub, s, per_stream[s], self.defs, self.schema)
                if any(p.name.endswith(".events") for p in paths):
                    written.add(s)
        comm.check()
        gathered = comm.gather(sorted(written))
        with comm.guard():
            if comm.rank == 0:
                written = {s for w in gathered for s in w}
                streams = self.map
                if written:     # a trace with no events at all keeps every stream listed
                    streams = {s: ps for s, ps in streams.items() if s in written}
                kv = tables.get(KEYVALUES)
                if kv is not None and "ref_table" in kv:
                    kv = kv.take(np.flatnonzero(kv["ref_table"] == MARKER_REF))
                writer.write_global(stub, self.defs, streams, markers=tables.get(MARKERS),
                                    keyvalues=kv, schema=self.schema, points=points)
        comm.check()

    def commit(self, comm: Comm) -> None:
        comm.barrier()
        with comm.guard():
            if comm.rank == 0:
                if self.overwrite:
                    for old in self._existing_outputs():
                        old.unlink()
                self.staging.publish(sorted(p.name for p in self.staging.dir.iterdir()))
        comm.check()

    def discard(self, comm: Comm) -> None:
        comm.barrier()
        if comm.rank == 0 and self.staging is not None:
            self.staging.discard()
