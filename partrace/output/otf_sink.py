"""Writing merged rows as an OTF trace whose processes sit on M streams.

Rows go to the rank that owns their output stream (streams are dealt to
ranks in contiguous blocks, balanced by the bytes of their rows); each rank
writes its streams' files, marker files included: the OTF library keeps
markers per stream (NAME.<s>.marker) and its reader reads every listed
stream's marker file after NAME.0.marker.
The point events of a non-OTF input (formats.otf.generic.point_events) are
such per-stream marker spots.  Rank 0 writes the master file, the
definitions and NAME.0.marker: the DefMarker lines (the marker ids used are
gathered at commit) and, for an OTF input that had its spots there
(otfmerge's layout, see writer.local_markers), those spots too, so then it
also receives the marker table and its key-values.  The OTF writer itself
(partrace.formats.otf.writer) knows no MPI.

Rows arrive window by window of the global order and are appended to the
files (the writer carries each file's state across windows, so the bytes do
not depend on the windows).  Where one file takes rows of several tables
(events with their key-values, a non-OTF input's events with its sample
counters), rows are appended only up to the horizon: the earliest time a
later window can still bring in any of those tables (told by the pipeline
through ``next_keys``, else the latest time seen of each table).  Rows at or
after it wait for the next window.  The master file and the definitions are
written at commit, once the streams that got events or markers are known.

A stream that receives neither is left out of the master file: the OTF
library's reader wants an events file for every stream listed (its own
writer lists only the streams it wrote); one with markers only gets an
events file of one time and one process line (writer.StreamWriter.close).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
from ..errors import PartraceError, UsageError
from ..model import Definitions, Schema, Table, take
from ..engine.merged import MergedTable
from ..dealing import contiguous_owners
from ..formats.otf.grammar import MARKER_TABLE     # keyvalues.ref_table of a marker's key-values
from ..kernels.jit import njit
from .owned import weights_of
from .staged import StagedSink

MARKERS, KEYVALUES = "markers", "keyvalues"
NEVER = -(1 << 63)      # a horizon before every row: hold them all
# Without --streams, a non-OTF input gets one stream per location up to this many
# locations, and this many streams beyond (otfmerge's contiguous blocks): a ROSS run
# has a location per LP, and a file per LP (or millions) serves nobody.
DEFAULT_MAX_STREAMS = 1024


class OTFSink(StagedSink):
    mode = "destination"
    weighs_locations = True
    windows = True      # write() appends window after window
    wants_next_keys = True

    def __init__(self, path, streams: int | None = None, overwrite: bool = False, compress: bool = False,
                 compression: str | None = None):
        super().__init__(path, overwrite)
        if self.final.suffix != ".otf":
            raise UsageError(f"{path}: an OTF output is named NAME.otf")
        self.streams_wanted = streams
        if streams is not None and streams < 0:
            raise UsageError("--streams must be 0 (one per process) or more")
        self.compress = compress or compression == "zlib"   # every file but the master is NAME....z
        self.next_keys: dict | None = None    # optional: set by the pipeline before each write()
        self.name = self.final.name[:-len(".otf")]

    def outputs(self) -> list[Path]:
        """The files of this name's OTF trace that exist (an OTF output has no fixed set)."""
        pattern = re.compile(re.escape(self.name) + r"\.([0-9a-f]+\.(def|events|snaps|stats|marker)"
                             r"(\.z)?|otf)$")
        if not self.final.parent.is_dir():
            return []       # Staging.check_free says so
        return [p for p in self.final.parent.iterdir() if pattern.match(p.name)]

    def _stream_map(self, defs: Definitions) -> dict[int, list[int]]:
        from ..formats.otf.writer import source_streams, stream_map
        order = defs.attrs.get("process_order")
        if order is None:
            order = [int(x) for x in defs.tables["locations"]["id"]]
        kept = source_streams(defs) if self.streams_wanted is None else None
        if kept:
            return kept
        wanted = self.streams_wanted
        if wanted is None:
            wanted = 0 if len(order) <= DEFAULT_MAX_STREAMS else DEFAULT_MAX_STREAMS
        return stream_map([int(p) for p in order], wanted)

    # -- collective steps --------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        from ..formats.otf import writer
        self.defs, self.schema = defs, schema
        self.local_markers = writer.local_markers(defs)     # marker spots in their stream's marker file
        self.map = self._stream_map(defs)
        if comm.rank == 0 and self.streams_wanted and self.streams_wanted > len(self.map):
            import warnings     # a stream holds one process at least: say so, not in silence
            warnings.warn(f"{self.final}: --streams {self.streams_wanted}: the trace has "
                          f"{len(self.map)} processes, so {len(self.map)} streams "
                          f"(one per process)")
        self.used, self.hold = [], []
        with comm.guard():
            self.used, self.hold = writer.written_tables(defs, schema)
        comm.check()
        self.held: dict[str, Table | None] = {}
        self.seen: dict[str, int] = {}
        self.writers = {}
        self.shared: dict = {}      # what all stream writers of the run share (the layout)
        self.markers = None
        streams = sorted(self.map)
        locs = np.asarray([p for s in streams for p in self.map[s]], dtype=np.int64)
        idx = np.repeat(np.arange(len(streams), dtype=np.int64), [len(self.map[s]) for s in streams])
        # contiguous blocks of streams per rank, so that a rank writes neighbours, balanced
        # by the bytes of their processes' rows where the engine weighed them, else by count
        weights = (np.ones(len(streams), np.int64) if self.location_bytes is None
                   else np.bincount(idx, weights=weights_of(locs, self.location_bytes),
                                    minlength=len(streams)))
        owner = contiguous_owners(weights, comm.size)
        self.owner = dict(zip(streams, owner.tolist()))
        ranks = owner[idx]
        order = np.argsort(locs, kind="stable")
        self._locs = locs[order]
        self._rank_of = ranks[order]
        # each location's stream as its index in self._streams (ascending stream numbers)
        self._streams = np.asarray(streams, dtype=np.int64)
        self._slot_of = idx[order]
        # location ids are small and dense (ranks, threads, LPs): a row's entry is then read
        # from a table indexed by id (-1: no such location) instead of a binary search
        self._dense = None
        if len(self._locs) and int(self._locs[-1]) - int(self._locs[0]) < 8 * len(self._locs) + 4096:
            self._dense = np.full(int(self._locs[-1]) - int(self._locs[0]) + 1, -1, np.int64)
            self._dense[self._locs - self._locs[0]] = np.arange(len(self._locs))
        self.stage(comm)

    def _lookup(self, locations: np.ndarray, what: np.ndarray, table: str) -> np.ndarray:
        """`what` (owner rank or stream) of each row's location."""
        if not len(self._locs):
            raise PartraceError(f"{table}: the trace defines no location to make an OTF process of")
        if self._dense is not None:
            at = locations.astype(np.int64) - self._locs[0]
            inside = (at >= 0) & (at < len(self._dense))
            if inside.all():
                i = self._dense[at]
            else:
                i = np.where(inside, self._dense[np.where(inside, at, 0)], -1)
            bad = i < 0
        else:
            i = np.minimum(np.searchsorted(self._locs, locations), len(self._locs) - 1)
            bad = self._locs[i] != locations
        if bad.any():   # a reader must define every location its rows name
            loc = int(locations[np.flatnonzero(bad)[0]])
            raise PartraceError(f"{table}: location {loc} is not in the trace's locations table")
        return what[i]

    def destinations(self, comm: Comm, name: str, table: Table) -> np.ndarray:
        if name not in self.used or comm.size == 1:
            # not written: stays where it is; one rank: every row is its own (_rows_of_streams
            # finds each row's stream, and says which location no stream has)
            return np.full(len(table), comm.rank, dtype=np.int64)
        if name == MARKERS and not self.local_markers:
            return np.zeros(len(table), dtype=np.int64)
        dest = np.zeros(len(table), dtype=np.int64)
        sel = np.ones(len(table), dtype=bool)
        if name == KEYVALUES and "ref_table" in table and not self.local_markers:
            sel = table["ref_table"] != MARKER_TABLE
        if sel.any():
            dest[sel] = self._lookup(table["location"][sel], self._rank_of, name)
        return dest

    # -- windows -----------------------------------------------------------
    def _horizon(self, comm: Comm, tables: dict[str, Table]) -> int | None:
        """Rows before this time can be written now (None: every row)."""
        if not self.hold:
            return None
        if self.next_keys is not None:       # the pipeline says where each table's next window starts
            times = [k[0] for n, k in self.next_keys.items() if n in self.hold and k not in (None, ...)]
            return min(times) if times else None
        # else: a later window holds no row of a table before the latest time seen of that table
        local = {n: int(tables[n]["time"].max()) for n in self.hold if n in tables and len(tables[n])}
        for seen in comm.allgather(local):
            for n, t in seen.items():
                self.seen[n] = max(self.seen.get(n, t), t)
        if len(self.seen) < len(self.hold):
            return NEVER
        return min(self.seen.values())

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        """One window: append the rows no later window can precede, keep the others.

        The rows held from earlier windows and the window's own are not joined
        into one table (a copy of the window): both are cut at the horizon and
        go on as pieces, copied only per stream (see _append)."""
        tables = {name: t for name, t in tables.items() if name in self.used}
        for name in tables:
            self.held.setdefault(name, None)
        horizon = self._horizon(comm, tables)
        now: dict[str, list[Table]] = {}
        with comm.guard():
            for name, old in self.held.items():
                pieces = [t for t in (old, tables.get(name)) if t is not None and len(t)]
                if horizon is None or name not in self.hold:
                    now[name], self.held[name] = pieces, None
                    continue
                # rows are in key order, the held ones before the window's: cut each piece
                cuts = [int(np.searchsorted(t["time"], horizon, side="left")) for t in pieces]
                now[name] = [_lazy_rows(t, 0, c) for t, c in zip(pieces, cuts)]
                # held rows are copied: a view would keep the whole window alive
                self.held[name] = Table.concat([_lazy_rows(t, c, len(t)) for t, c in zip(pieces, cuts)],
                                               self.schema[name])
        comm.check()
        self._append(comm, now)

    def _append(self, comm: Comm, tables: dict[str, list[Table] | Table | None]) -> None:
        """Append rows (per table: pieces laid end to end) to this rank's streams, one stream at
        a time, so only that stream's rows are copied at once; NAME.0.marker (rank 0) gets the
        marker rows that are not local_markers."""
        from ..formats.otf import writer
        stub = self.staging.path(self.name)
        with comm.guard():
            tables = {name: _pieces(t) for name, t in tables.items()}
            per_stream: dict[int, dict[str, np.ndarray]] = {}    # stream -> table -> its rows
            for name, pieces in tables.items():
                if pieces and (name != MARKERS or self.local_markers):
                    for s, idx in self._rows_of_streams(name, pieces).items():
                        per_stream.setdefault(s, {})[name] = idx
            for s in sorted(per_stream):
                if s not in self.writers:
                    self.writers[s] = writer.StreamWriter(stub, s, self.defs, self.schema, self.compress,
                                                          shared=self.shared)
                self.writers[s].append({name: _take(tables[name], idx, self.schema[name])
                                        for name, idx in per_stream.pop(s).items()})
            if comm.rank == 0:
                if self.markers is None:
                    self.markers = writer.MarkerFile(stub, self.defs, self.compress,
                                                     body=self.staging.path(f".{self.name}.marker-body"))
                if not self.local_markers:
                    markers, kv = (_joined(tables.get(n), self.schema.get(n)) for n in (MARKERS, KEYVALUES))
                    if kv is not None and "ref_table" in kv:
                        kv = kv.take(np.flatnonzero(kv["ref_table"] == MARKER_TABLE))
                    self.markers.append(markers, kv)
        comm.check()

    def _rows_of_streams(self, name: str, pieces: list[Table]) -> dict[int, np.ndarray]:
        """{stream: its rows (ascending indices into the pieces laid end to end)}."""
        rows = None                     # the rows that go to the streams (None: all)
        loc = _column(pieces, "location")
        if name == KEYVALUES and "ref_table" in pieces[0] and not self.local_markers:
            rows = np.flatnonzero(_column(pieces, "ref_table") != MARKER_TABLE)
            loc = loc[rows]
        if not len(loc):
            return {}
        # stable: each stream's rows keep their (time, location, seq) order
        order, starts = _grouped(self._lookup(loc, self._slot_of, name), len(self._streams))
        if rows is not None:
            order = rows[order]
        return {int(self._streams[k]): order[starts[k]:starts[k + 1]]
                for k in np.flatnonzero(starts[1:] > starts[:-1]).tolist()}

    def commit(self, comm: Comm) -> None:
        from ..formats.otf import writer
        self._append(comm, self.held)       # the rows held after the last window
        self.held = {}
        written, regions = set(), np.zeros(0, np.int64)
        with comm.guard():
            for s, w in sorted(self.writers.items()):
                if w.listed:
                    written.add(s)
                regions = np.union1d(regions, w.regions)
                w.close()
        comm.check()
        gathered = comm.gather((sorted(written), regions))
        names = []
        with comm.guard():
            if comm.rank == 0:
                written = {s for w, _ in gathered for s in w}
                regions = np.unique(np.concatenate([r for _, r in gathered]))
                streams = self.map
                if written:     # a trace with no events at all keeps every stream listed
                    streams = {s: ps for s, ps in streams.items() if s in written}
                stub = self.staging.path(self.name)
                writer.write_master(stub, streams)
                writer.write_definitions(stub, self.defs, self.schema, self.compress)
                self.markers.close(regions)
                if self.overwrite:
                    for old in self.outputs():
                        old.unlink()
                names = sorted(p.name for p in self.staging.dir.iterdir())
        comm.check()
        self.publish(comm, names)


@njit(cache=True)
def _grouped(slot, count):
    """The rows grouped by slot (0..count-1), each group in row order (a counting sort: two
    passes, where a stable argsort of the slots cost 4x as much), and where each group
    starts (count + 1 offsets)."""
    starts = np.zeros(count + 1, np.int64)
    for i in range(slot.shape[0]):
        starts[slot[i] + 1] += 1
    for k in range(count):
        starts[k + 1] += starts[k]
    at = starts[:-1].copy()
    order = np.empty(slot.shape[0], np.int64)
    for i in range(slot.shape[0]):
        order[at[slot[i]]] = i
        at[slot[i]] += 1
    return order, starts


def _pieces(tables: list[Table] | Table | None) -> list[Table]:
    """A table's rows as non-empty pieces (laid end to end)."""
    if tables is None:
        return []
    return [t for t in ([tables] if isinstance(tables, Table) else tables) if t is not None and len(t)]


def _column(pieces: list[Table], name: str) -> np.ndarray:
    return pieces[0][name] if len(pieces) == 1 else np.concatenate([t[name] for t in pieces])


def _lazy_rows(t: Table, a: int, b: int) -> Table:
    """Rows a..b of t, each column sliced when read (Table.rows would build every column of
    a lazily built window, read or not)."""
    if a == 0 and b == len(t):
        return t
    return MergedTable(b - a, t.names, lambda name: t[name][a:b])


def _take(pieces: list[Table], idx: np.ndarray, schema) -> Table:
    """Rows `idx` (ascending) of the pieces laid end to end, as a _StreamRows: of the one piece
    that holds them if so, a slice (views) where they are consecutive."""
    spans, lo = [], 0
    for t in pieces:
        a, b = np.searchsorted(idx, [lo, lo + len(t)])
        if b > a:
            spans.append((t, lo))
        lo += len(t)
    if len(spans) == 1:
        pieces, idx = [spans[0][0]], idx - spans[0][1]
    first, last = int(idx[0]), int(idx[-1])
    if last - first + 1 == len(idx):
        idx = slice(first, last + 1)
    return _StreamRows(pieces, idx, schema)


class _StreamRows(MergedTable):
    """Rows `idx` (index array, or a slice) of table pieces laid end to end (the rows held from
    earlier windows, the window's), each column gathered from the pieces when the writer reads
    it: a column it does not write is never copied.  take_rows composes the indices, so a writer
    that keeps some of a stream's rows, or reorders or cuts them into blocks, gathers each column
    once, straight from the pieces into the order it formats (from this table's own copy if it
    was read here already)."""

    __slots__ = ("pieces", "idx", "schema", "_parent", "_sel", "_parts")

    def __init__(self, pieces: list[Table], idx, schema, parent: "_StreamRows | None" = None, sel=None):
        n = len(range(*idx.indices(sum(map(len, pieces))))) if isinstance(idx, slice) else len(idx)
        names = pieces[0].names if len(pieces) == 1 else [c.name for c in schema]
        # columns come from _gather via __getitem__: a bound method kept as the build function
        # would be a reference cycle, which holds the built columns until the cyclic collector runs
        super().__init__(n, names, None)
        self.pieces, self.idx, self.schema = pieces, idx, schema
        self._parent, self._sel = parent, sel
        self._parts = None          # several pieces: [(rows here, their rows in the piece)] per piece

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._built:
            self._built[name] = self._gather(name)
        return self._built[name]

    def column_once(self, name: str) -> np.ndarray:
        return self._built[name] if name in self._built else self._gather(name)

    def column_into(self, name: str, out: np.ndarray) -> None:
        """column_once(name) into `out` (the writer's uint64 field row), gathered straight
        into it from the pieces (formats.otf.taken.column_into)."""
        from ..formats.otf.taken import take_into
        if name in self._built:
            out[:] = self._built[name]
        elif self._parent is not None and name in self._parent._built:
            take_into(out, self._parent._built[name], self._sel)
        elif len(self.pieces) == 1:
            take_into(out, self.pieces[0][name], self.idx)
        else:
            out[:] = self._gather(name)

    def take_rows(self, sel) -> "_StreamRows":
        """Rows `sel` (index array or slice) of these, gathered when read."""
        from ..formats.otf.taken import compose_rows
        return _StreamRows(self.pieces, compose_rows(self.idx, sel, len(self)), self.schema, self, sel)

    def _gather(self, name: str) -> np.ndarray:
        if self._parent is not None and name in self._parent._built:
            return take(self._parent._built[name], self._sel)
        if len(self.pieces) == 1:
            return take(self.pieces[0][name], self.idx)
        if self._parts is None:
            self._parts = _split_by_piece(self.idx, [len(t) for t in self.pieces])
        dtype = next(c for c in self.schema if c.name == name).element_dtype()
        out = None
        for t, (mine, rows, count) in zip(self.pieces, self._parts):
            if count:
                values = take(t[name], rows)
                if out is None:
                    out = np.empty((len(self),) + values.shape[1:], dtype)
                out[mine] = values
        return out


def _split_by_piece(idx, lengths: list[int]) -> list[tuple]:
    """[(rows here, their rows in the piece, how many)] per piece, for rows `idx` (index
    array or slice) of pieces of these lengths laid end to end.  Ascending rows (a
    stream's rows, cut into blocks: the usual case) of a piece are one run here: a
    slice, and a slice of `idx`; other rows are found per piece by a mask."""
    ends = np.cumsum(lengths)
    starts = ends - np.asarray(lengths)
    if isinstance(idx, slice):
        out = []
        for lo, hi in zip(starts.tolist(), ends.tolist()):
            a, b = max(idx.start, lo), min(idx.stop, hi)
            b = max(a, b)
            out.append((slice(a - idx.start, b - idx.start), slice(a - lo, b - lo), b - a))
        return out
    if len(idx) < 2 or bool(np.all(idx[1:] >= idx[:-1])):
        at = np.searchsorted(idx, np.r_[starts, ends[-1:]]).tolist()
        return [(slice(a, b), idx[a:b] - lo, b - a)
                for a, b, lo in zip(at[:-1], at[1:], starts.tolist())]
    out = []
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        mine = np.flatnonzero((idx >= lo) & (idx < hi))
        out.append((mine, idx[mine] - lo, len(mine)))
    return out


def _joined(pieces: list[Table], schema) -> Table | None:
    if not pieces:
        return None
    return pieces[0] if len(pieces) == 1 else Table.concat(pieces, schema)
