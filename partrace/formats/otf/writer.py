"""OTF v1 writer (short format, as the OTF 1.12 library writes it).

Knows no reader: it takes Definitions and Tables.  The global files
(NAME.otf, NAME.0.def, NAME.0.marker) and each stream's files (.events,
.snaps, .stats, .marker) are written by independent calls, so one rank can
write the globals while the owners of the streams write theirs.

An OTF input is written back as it was read: its own definitions (verbatim),
ticks, key-value and text rows, its marker spots in NAME.0.marker or in the
streams' marker files as it had them (local_markers); rows of kinds OTF has
no record for become NoOp records ('N').  Inline snapshots read from an
.events file are written to .snaps.

Any other input is written by the rules of ``generic`` (definitions
synthesized from the model's tables, process tokens >= 1, ns ticks, the
format's own columns as key-value pairs, sample tables as counters, point
events as markers); see its docstring for what goes where and what is left out.
"""
from __future__ import annotations

import os
import shutil
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...errors import PartraceError
from ...model import Definitions, Kind, Schema, Table
from . import grammar as G
from .generic import (definition_text, kv_prefix_arrays, layout, marker_defs, marker_spots,
                      stream_rows)
from .taken import take_rows

FILE_OF_TABLE = {"events": "events", "snapshots": "snaps", "statistics": "stats"}
ROWS_PER_PASS = 1 << 16     # records per block and pass (100-400 bytes of columns and text each)
ZLEVEL = 4                  # otfcompress's default level
ZBLOCK = 1 << 20            # text bytes between full flushes (OTF_WStream's buffer size)
COPY_BLOCK = 8 << 20


class OutFile:
    """One output file written piece by piece: plain, or one zlib stream.

    A compressed file is one zlib stream as the OTF library writes it: a
    full flush after every ZBLOCK bytes of text (OTF flushes its 1 MiB write
    buffer so; readers seek to these points), a last full flush at close and
    no end-of-stream block.  The flush points are counted in text bytes, so
    the file does not depend on how the text was cut into pieces.  The OS
    file is opened per piece (append), so a writer of thousands of streams
    holds no file handles between pieces (one compressobj each, ~260 KiB).
    """

    def __init__(self, path: str | Path, compress: bool = False):
        self.path = Path(f"{path}.z" if compress else path)
        self._z = zlib.compressobj(ZLEVEL) if compress else None
        self._room = ZBLOCK          # text bytes until the next flush point
        self._created = False

    def write(self, data: bytes) -> None:
        if self._z is None:
            return self._raw(data)
        out, view = [], memoryview(data)
        while len(view) >= self._room:
            out += [self._z.compress(view[:self._room]), self._z.flush(zlib.Z_FULL_FLUSH)]
            view, self._room = view[self._room:], ZBLOCK
        out.append(self._z.compress(view))
        self._room -= len(view)
        self._raw(b"".join(out))

    def _raw(self, data) -> None:
        if len(data) or not self._created:
            with open(self.path, "ab" if self._created else "wb") as fh:
                fh.write(data)
            self._created = True

    def write_file(self, path: Path) -> None:
        """Append the bytes of the file at `path` (plain output: copied by the kernel)."""
        with open(path, "rb") as src:
            if self._z is not None:
                while block := src.read(COPY_BLOCK):
                    self.write(block)
                return
            self._raw(b"")
            with open(self.path, "r+b") as dst:     # not "ab": copy_file_range refuses O_APPEND
                dst.seek(0, os.SEEK_END)
                try:                                # Linux: no copy through user space
                    while os.copy_file_range(src.fileno(), dst.fileno(), COPY_BLOCK):
                        pass
                except (AttributeError, OSError):
                    shutil.copyfileobj(src, dst, COPY_BLOCK)

    def close(self) -> Path:
        if self._z is not None:
            self._raw(self._z.flush(zlib.Z_FULL_FLUSH))
            self._z = None
        self._raw(b"")
        return self.path


def stream_map(process_order: list[int], m: int) -> dict[int, list[int]]:
    """otfmerge's assignment: contiguous blocks in master order; M = 0 or M > N: one process per stream."""
    n = len(process_order)
    if m <= 0 or m > n:
        m = n
    big, rest = divmod(n, m)
    out, k = {}, 0
    for s in range(m):
        size = big + (1 if s < rest else 0)
        out[s + 1] = list(process_order[k:k + size])
        k += size
    return out


def own_source(defs: Definitions) -> bool:
    """Whether `defs.source` holds OTF definition records, which are written back verbatim with
    the rows' own ticks, key-values and comments.  Definitions.source is each format's own form,
    so this is the one place that asks which format the definitions came from; every other
    choice follows from it or from the schema's roles."""
    return defs.format == "otf" and defs.source is not None


def source_streams(defs: Definitions) -> dict[int, list[int]] | None:
    """The input's own process -> stream map, kept when an OTF input is written back, else None."""
    if not own_source(defs) or not defs.attrs.get("streams"):
        return None
    return {int(s): [int(p) for p in procs] for s, procs in defs.attrs["streams"].items()}


def written_tables(defs: Definitions, schema: Schema) -> tuple[list[str], list[str]]:
    """The tables that reach the files, and those of them whose rows share a file with rows of
    another table (or re-sort at equal times): a sink appends the latter's rows only once no
    later rows can come before them."""
    if own_source(defs):
        used = [n for n in schema if n in (*FILE_OF_TABLE, "markers", "keyvalues", "text")]
        return used, used
    counters = list(layout(defs, {"events": [], **schema}).counters)
    return ["events"] + counters, (["events"] + counters if counters else [])


def write_master(stub: Path, streams: dict[int, list[int]]) -> Path:
    """NAME.otf: the process -> stream map."""
    path = Path(f"{stub}.otf")
    path.write_text("".join(f"{s:x}:" + ",".join(f"{p:x}" for p in ps) + "\n"
                            for s, ps in streams.items()))
    return path


def write_definitions(stub: Path, defs: Definitions, schema: Schema | None = None,
                      compress: bool = False) -> list[Path]:
    """NAME.0.def (and NAME.<s>.def for local definitions of the source), verbatim for OTF input."""
    by_file: dict[int, list[str]] = {}
    if not own_source(defs):    # the definitions synthesized from the model's tables
        by_file[0] = [definition_text(defs, schema or {"events": []})]
    else:
        for r in defs.source:
            if r.get("where") == "marker":
                continue
            lines = by_file.setdefault(int(r.get("where", 0)), [])
            lines += [G.kv_line(*kv) for kv in r.get("kv", [])]
            lines.append(G.format_record(G.BY_NAME[r["type"]], r["fields"]))
    paths = []
    for s, lines in sorted(by_file.items()):
        out = OutFile(f"{stub}.{s:x}.def", compress)
        out.write("".join(lines).encode("utf-8", "surrogateescape"))
        paths.append(out.close())
    return paths


class MarkerFile:
    """NAME.0.marker, appended window by window: marker definitions, then the spots in order.

    The OTF library keeps markers per stream (NAME.<s>.marker, see
    StreamWriter); its writer (OTF_Writer_writeDefMarker) puts every DefMarker
    into NAME.0.marker, and its reader (OTF_Reader_readMarkers) reads
    NAME.0.marker first, then the marker file of every stream in the master
    file.  This file holds the DefMarker lines (`regions`: the marker ids of
    a non-OTF input's point events, see ``generic``; an OTF input's own) and
    the spots of an OTF input that had them here (otfmerge's layout).  Those
    definitions are known only at the end, so the spots go to the side file
    `body` (in the output's folder) and close() copies them after the definitions.
    """

    def __init__(self, stub: str | Path, defs: Definitions, compress: bool = False,
                 body: str | Path | None = None):
        self.stub, self.defs, self.compress = Path(stub), defs, compress
        self.body = Path(body or f"{stub}.0.marker.body")
        self._spots = OutFile(self.body)
        self._any = False

    def append(self, markers: Table | None = None, keyvalues: Table | None = None) -> None:
        """Marker rows of one window (their key-values: `keyvalues` rows of ref_table G.MARKER_TABLE)."""
        if markers is not None and len(markers):
            self._spots.write(_marker_table_spots(markers, keyvalues))
            self._any = True

    def _head(self, regions) -> bytes:
        lines = []
        if len(regions):
            lines.append(marker_defs(self.defs, [int(r) for r in regions]))
        for r in self.defs.source if own_source(self.defs) else []:
            if r.get("where") == "marker":
                lines += [G.kv_line(*kv) for kv in r.get("kv", [])]
                lines.append(G.format_record(G.BY_NAME[r["type"]], r["fields"]))
        return "".join(lines).encode("utf-8", "surrogateescape")

    def close(self, regions=()) -> Path | None:
        """Write the file: DefMarker lines (`regions`: the point events' marker ids), then the spots."""
        head = self._head(regions)
        self._spots.close()
        try:
            if not head and not self._any:
                return None
            out = OutFile(f"{self.stub}.0.marker", self.compress)
            out.write(head)
            out.write_file(self.body)
            return out.close()
        finally:
            self.body.unlink()


def local_markers(defs: Definitions) -> bool:
    """Whether marker spots go to their process's stream (NAME.<s>.marker) rather than NAME.0.marker:
    always for a non-OTF input; for an OTF input, as it had them (otfmerge and OTF_Writer write
    NAME.0.marker only; an input with any stream marker file gets all its spots per stream)."""
    return not own_source(defs) or bool(defs.attrs.get("marker_streams"))


def _marker_table_spots(markers: Table, keyvalues: Table | None) -> bytes:
    """MarkerSpot lines of marker rows in (time, location, seq) order, each after its key-values."""
    kvs = _side(keyvalues, G.MARKER_TABLE)
    ticks = markers["ticks"] if "ticks" in markers else markers["time"]
    order = np.lexsort((markers["seq"], markers["location"], markers["time"]))
    mk = G.BY_NAME["MarkerSpot"]
    lines = []
    for i in order.tolist():
        loc, seq = int(markers["location"][i]), int(markers["seq"][i])
        lines += kvs.get((loc, seq), [])
        lines.append(G.format_record(mk, {"marker": int(markers["marker"][i]),
                                          "ticks": int(ticks[i]), "location": loc,
                                          "text": str(markers["text"][i])}))
    return "".join(lines).encode("utf-8", "surrogateescape")


def write_global(stub: str | Path, defs: Definitions, streams: dict[int, list[int]],
                 markers: Table | None = None, keyvalues: Table | None = None,
                 schema: Schema | None = None, compress: bool = False, regions=()) -> list[Path]:
    """Master file, definitions and NAME.0.marker (one rank).

    `streams` maps stream ids to location ids; `schema` (the trace's tables)
    is needed for a non-OTF input, whose definitions are synthesized;
    `regions`: the marker ids its streams' point events use (StreamWriter.regions).
    `markers` (and their key-values) go here only if not local_markers(defs).
    """
    stub = Path(stub)
    out = [write_master(stub, streams)] + write_definitions(stub, defs, schema, compress)
    mf = MarkerFile(stub, defs, compress)
    if not local_markers(defs):
        mf.append(markers, keyvalues)
    m = mf.close(regions)
    return out + ([m] if m else [])


def _kv_side(tab: Table | None, ref_table: int):
    """The key-value lines of the records of one table, rendered by a numba pass: (keys,
    blob, start, end) with keys the (location, ref_seq) of each record having some, its
    lines blob[start:end] (in the order _side lists them).  None if there are none."""
    if tab is None or not len(tab):
        return None
    sel = np.flatnonzero(tab["ref_table"] == ref_table)
    if not len(sel):
        return None
    from .writekernel import kv_lines
    order = sel[np.lexsort((tab["seq"][sel], tab["location"][sel]))]
    loc, ref = tab["location"][order].astype(np.int64), tab["ref_seq"][order].astype(np.int64)
    group = np.lexsort((ref, loc))            # stable: a record's lines keep their order
    order, loc, ref = order[group], loc[group], ref[group]
    typ = tab["type"][order].astype(np.uint64)
    is_bytes = typ == G.BYTE_ARRAY
    blobs = tab["bytes"][order[is_bytes]].tolist()
    nbytes = np.zeros(len(order), np.int64)
    nbytes[is_bytes] = np.fromiter(map(len, blobs), np.int64, len(blobs))
    rend = np.cumsum(nbytes)
    raw = np.frombuffer(b"".join(blobs), np.uint8) if blobs else np.zeros(0, np.uint8)
    out = np.empty(int(55 * len(order) + 2 * rend[-1]), np.uint8)
    ends = np.empty(len(order), np.int64)
    kv_lines(tab["key"][order].astype(np.uint64), typ, tab["value"][order].astype(np.uint64),
             tab["length"][order].astype(np.uint64), is_bytes, raw, rend - nbytes, rend, out, ends)
    first = np.flatnonzero(np.r_[True, (loc[1:] != loc[:-1]) | (ref[1:] != ref[:-1])])
    last = np.r_[first[1:], len(order)] - 1
    start = np.where(first > 0, ends[first - 1], 0)
    return np.stack([loc[first], ref[first]], axis=1), out[:ends[-1]], start, ends[last]


def _side(tab: Table | None, ref_table: int, kv: bool = True) -> dict[tuple[int, int], list[str]]:
    """{(location, ref_seq): [rendered KV lines or text]} for one referenced table (rare rows)."""
    out: dict[tuple[int, int], list] = {}
    if tab is None or not len(tab):
        return out
    sel = np.flatnonzero(tab["ref_table"] == ref_table)
    order = sel[np.lexsort((tab["seq"][sel], tab["location"][sel]))]
    for i in order.tolist():
        key = (int(tab["location"][i]), int(tab["ref_seq"][i]))
        if kv:
            out.setdefault(key, []).append(G.kv_line(int(tab["key"][i]), int(tab["type"][i]),
                                                    int(tab["value"][i]), int(tab["length"][i]),
                                                    tab["bytes"][i] or b""))
        else:
            out.setdefault(key, []).append(str(tab["text"][i]))
    return out


class StreamWriter:
    """NAME.<s>.events/.snaps/.stats/.marker of one stream, appended window by window.

    Each append's rows follow the previous append's in every file's order;
    the short format's current time and process carry over between appends,
    so the files are the same however the rows were cut into appends.
    A non-OTF input needs `schema` (see ``generic``); its point events are
    marker spots in the stream's .marker file (their DefMarker lines are
    NAME.0.marker's, see MarkerFile: `regions` lists the marker ids used).
    """

    def __init__(self, stub: str | Path, stream: int, defs: Definitions, schema: Schema | None = None,
                 compress: bool = False, shared: dict | None = None):
        self.stub, self.stream, self.defs, self.compress = Path(stub), stream, defs, compress
        self.schema = schema
        # what every stream of a run computes alike (the generic layout), made once per run:
        # a sink writing thousands of streams passes one dict to all of them
        self.shared = {} if shared is None else shared
        self.files: dict[str, _FileState] = {}
        self.marker: OutFile | None = None
        self._first_marker: tuple[int, int] | None = None     # (ticks, process) of the first spot
        self.regions = np.zeros(0, np.int64)
        self._layout = None

    @property
    def listed(self) -> bool:
        """Whether the master file lists the stream (it has events or markers)."""
        return "events" in self.files or self.marker is not None

    def _file(self, suffix: str) -> "_FileState":
        if suffix not in self.files:
            self.files[suffix] = _FileState(OutFile(f"{self.stub}.{self.stream:x}.{suffix}", self.compress))
        return self.files[suffix]

    def _write_marker(self, data, ticks: int, process: int) -> None:
        """Append spots (`ticks`, `process`: those of the first one)."""
        if self.marker is None:
            self.marker = OutFile(f"{self.stub}.{self.stream:x}.marker", self.compress)
            self._first_marker = (ticks, process)
        self.marker.write(data)

    def append(self, tables: dict[str, Table]) -> None:
        """Rows of the stream's processes, each table sorted by (time, location, seq);
        `keyvalues` and `text` rows refer to their records by (ref_table, location, ref_seq).
        `markers` rows (an OTF input's, if local_markers) go to the stream's marker file."""
        if not own_source(self.defs):
            return self._append_generic(tables)
        from .taken import column_into
        from .writekernel import field_columns
        mk = tables.get("markers")
        if mk is not None and len(mk):
            first = int(np.lexsort((mk["seq"], mk["location"], mk["time"]))[0])
            self._write_marker(_marker_table_spots(mk, tables.get("keyvalues")),
                               int(mk["ticks"][first] if "ticks" in mk else mk["time"][first]),
                               int(mk["location"][first]))
        for tname, suffix in FILE_OF_TABLE.items():
            tab = tables.get(tname)
            if tab is None or not len(tab):
                continue
            code = G.TABLE_CODE[tname]
            kvs = _kv_side(tables.get("keyvalues"), code)
            texts = _side(tables.get("text"), code, kv=False)
            ticks = (tab["ticks"] if "ticks" in tab else tab["time"]).astype(np.uint64, copy=False)
            order = None
            if "src_order" in tab:
                # OTF input: equal ticks keep their source order (reproduces the input layout byte
                # for byte); rows come in time order, so only groups of equal ticks are sorted
                order = source_order(ticks, tab["src_order"])
            elif np.any(ticks[1:] < ticks[:-1]):
                # clocks finer than 1 ns: equal ns, different ticks -> order by ticks (stable keeps the rest)
                order = np.argsort(ticks, kind="stable")
            if order is not None:
                tab, ticks = take_rows(tab, order), ticks[order]
            n = len(tab)
            rec = _record_codes(tab, tname)

            def put(col, out, tab=tab):
                column_into(tab, col, out)      # as astype(np.uint64), into the formatter's matrix

            fields, colof = field_columns(tname, rec, tab.__contains__, put)
            proc = tab["location"].astype(np.int64, copy=False)
            # rare side data: KV lines before the record, the record's string (spans of the blob;
            # none: every span empty, one array of zeros for all four)
            blob = bytearray()
            pre_a = pre_b = str_a = str_b = np.zeros(n, np.int64)
            if kvs is not None:
                keys, lines, start, end = kvs
                rows = _row_lookup(tab, keys, tname)
                pre_a, pre_b = np.zeros(n, np.int64), np.zeros(n, np.int64)
                pre_a[rows], pre_b[rows] = start, end
                blob += lines.tobytes()
            if texts:           # comments: rare
                rows = _row_lookup(tab, list(texts), tname)
                str_a, str_b = np.zeros(n, np.int64), np.zeros(n, np.int64)
                for i, items in zip(rows.tolist(), texts.values()):
                    data = _unquoted(items).encode("utf-8", "surrogateescape")
                    str_a[i] = len(blob); blob += data; str_b[i] = len(blob)
            self._file(suffix).format(rec, ticks, proc, fields, colof, pre_a, pre_b, str_a, str_b,
                                      np.frombuffer(bytes(blob), np.uint8))

    def _append_generic(self, tables: dict[str, Table]) -> None:
        """The .events file of a non-OTF input (events and sample counters)."""
        if self._layout is None:
            if "layout" not in self.shared:
                self.shared["layout"] = layout(self.defs, {"events": [], **(self.schema or {n: [] for n in tables})})
            self._layout = self.shared["layout"]
        lay = self._layout
        ev = tables.get("events")
        if ev is not None and len(ev):
            self._append_spots(ev)
        # in blocks of about ROWS_PER_PASS records, cut at a time (rows of any table at that
        # time follow in the next block): the formatter's input is ~200-400 bytes per
        # record, and a sample row is one counter record per column (a window may hold few
        # events and many samples)
        weight = {name: len(lay.counters.get(name, ())) or 1 for name in tables}
        present = [(t["time"], weight[name]) for name, t in tables.items() if t is not None and len(t)]
        cuts = np.zeros(0, np.int64)
        one = len(present) == 1
        if one and len(present[0][0]) * present[0][1] > ROWS_PER_PASS and _sorted(present[0][0]):
            # one table in time order (the usual case): record k * ROWS_PER_PASS is in row
            # ceil(k * ROWS_PER_PASS / weight) - 1 (what the sort below finds, without sorting)
            times, w = present[0]
            marks = np.arange(ROWS_PER_PASS, len(times) * w, ROWS_PER_PASS)
            cuts = np.unique(times[-(-marks // w) - 1])
        elif sum(len(t) * w for t, w in present) > ROWS_PER_PASS:
            times = np.concatenate([t for t, _ in present])
            order = np.argsort(times, kind="stable")
            records = np.cumsum(np.concatenate([np.full(len(t), w) for t, w in present])[order])
            at = np.searchsorted(records, np.arange(ROWS_PER_PASS, int(records[-1]), ROWS_PER_PASS))
            cuts = np.unique(times[order][at])
        if len(cuts) == 0:
            return self._format_generic(tables, lay)
        bounds = {name: np.concatenate([[0], np.searchsorted(t["time"], cuts), [len(t)]])
                  for name, t in tables.items() if t is not None}
        for k in range(len(cuts) + 1):
            # rows cut from the stream's rows: gathered once, from the sink's window (take_rows)
            cut = {name: slice(int(b[k]), int(b[k + 1])) for name, b in bounds.items()}
            self._format_generic({name: take_rows(t, cut[name])
                                  for name, t in tables.items() if t is not None}, lay)

    def _append_spots(self, events: Table) -> None:
        """The point events among `events` as marker spots (see ``generic``)."""
        spots = marker_spots(self.defs, self.schema or {"events": []}, events, self._layout)
        if len(spots.time):
            self.regions = np.union1d(self.regions, spots.regions)
            for block in spots.data:      # point events' ticks are their ns (generic: 1e9 ticks/s)
                self._write_marker(block, int(spots.time[0]), int(spots.location[0]))

    def _format_generic(self, tables: dict[str, Table], lay) -> None:
        rows, counters = stream_rows(tables, lay, _record_codes)
        if rows is None and counters is None:
            return
        kv_pre, kv_prel = kv_prefix_arrays(lay)
        if rows is None:
            m = sum(1 for c in lay.kv if not c.width)
            self._file("events").format(*_no_rows(m), kv_pre, kv_prel, counters=counters)
            return
        none = np.zeros(len(rows.rec), np.int64)
        self._file("events").format(rows.rec, rows.ticks, rows.proc, rows.fields, rows.colof,
                                    rows.pre_a, rows.pre_b, none, none, rows.blob, rows.kv_on,
                                    rows.kv_val, kv_pre, kv_prel, counters=counters)

    def close(self) -> list[Path]:
        """Finish every file; returns their paths (events, snaps, stats, marker order).
        A stream with markers only gets an events file of one time and one process line
        (the first spot's): the library's reader opens the events file of every stream listed
        (OTF_Heap_initEventHeap) and fails on an empty one (OTF_RBuffer_searchTime)."""
        if self.marker is not None and "events" not in self.files:
            events = self._file("events")
            events.t, events.p = np.uint64(self._first_marker[0]), self._first_marker[1]
        out = [self.files[s].close() for s in FILE_OF_TABLE.values() if s in self.files]
        return out + ([self.marker.close()] if self.marker is not None else [])


class _FileState:
    """One .events/.snaps/.stats file and the short format's state between appends."""

    def __init__(self, out: OutFile):
        self.out = out
        self.t, self.p = np.uint64(0), -1      # current time and process (-1: none yet)
        self.rows = 0

    def format(self, rec, ticks, proc, fields, colof, pre_a, pre_b, str_a, str_b, blob,
               kv_on=None, kv_val=None, kv_pre=None, kv_prel=None, counters=None) -> None:
        """Format rows in passes of ROWS_PER_PASS; `counters` (generic.Counters), merged in by
        the formatter, come in one pass with the rows (the generic writer cuts its blocks)."""
        from .writekernel import format_rows, scratch, wtables
        wt = wtables()
        n = len(rec)
        if kv_on is None:      # (keys, rows), as generic.Rows holds them
            kv_on, kv_val = np.zeros((0, n), bool), np.zeros((0, n), np.uint64)
            kv_pre, kv_prel = np.zeros((1, 32), np.uint8), np.zeros(1, np.int64)
        # the kernel's arguments of one type whatever the caller holds (a read-only blob, a
        # table cut in passes, a time the kernel gave back as int64): each other type is
        # one more numba compile of this large kernel, one `partrace warm` cannot foresee.
        # The fields go as (k, rows), C-contiguous: field_columns' own layout, no copy; each
        # pass reads its rows at an offset (a pass's slice of them is not C-contiguous)
        fields = np.ascontiguousarray(fields.T)
        blob = (blob if len(blob) else np.zeros(1, np.uint8)).view()
        blob.flags.writeable = False
        kv_line = int(kv_prel.max()) + 17 if kv_on.shape[0] else 0
        c = counters if counters is not None else _NO_COUNTERS
        step = ROWS_PER_PASS if counters is None else max(n, 1)
        for lo in range(0, max(n, 1 if counters is not None else 0), step):
            hi = min(n, lo + step)
            extra = int((pre_b[lo:hi] - pre_a[lo:hi]).sum() + (str_b[lo:hi] - str_a[lo:hi]).sum())
            extra += int(kv_on[:, lo:hi].sum()) * kv_line
            extra += len(c.ticks) * 40 + c.records * 45       # time and process lines, CNT<id>V<value>
            out = scratch("text", (hi - lo) * 400 + extra + 64)
            o, bad, self.t, self.p = format_rows(
                rec[lo:hi], ticks[lo:hi], proc[lo:hi], fields, lo, colof, pre_a[lo:hi],
                pre_b[lo:hi], str_a[lo:hi], str_b[lo:hi], blob, wt.kw, wt.kwl, wt.nf, wt.tag,
                wt.tagl, wt.ftype, wt.opt0, out, np.uint64(self.t),
                int(self.p), kv_on, kv_val, kv_pre, kv_prel,
                c.ticks, c.proc, c.first, c.count, c.id, c.val, _COUNTER)
            if bad >= 0:
                raise PartraceError(f"{self.out.path}: rows not sorted by time at row {self.rows + lo + bad}")
            self.out.write(memoryview(out)[:o])     # no copy of the text
        self.rows += n + len(c.ticks)

    def close(self) -> Path:
        if self.p >= 0:
            # OTF_WBuffer_close: the last time and process once more
            self.out.write(f"{int(self.t):x}\n*{int(self.p):x}\n".encode())
        return self.out.close()


def _sorted(a: np.ndarray) -> bool:
    return bool(np.all(a[1:] >= a[:-1]))


def source_order(ticks: np.ndarray, src_order: np.ndarray) -> np.ndarray | None:
    """np.lexsort((src_order, ticks)), or None when that leaves the rows where they are.

    Rows in ticks order (the usual case) are sorted only in the groups of equal ticks whose
    source order goes down (a trace whose key order of processes at one time is not its
    files' order has many such groups, but most rows are in none): one lexsort of all the
    rows cost 0.15 s a window of the suite's OTF trace."""
    if len(ticks) < 2:
        return None
    up, same = ticks[1:] > ticks[:-1], ticks[1:] == ticks[:-1]
    if not np.all(up | same):
        return np.lexsort((src_order, ticks))
    down = same & (src_order[1:] < src_order[:-1])
    if not down.any():
        return None
    group = np.concatenate(([0], np.cumsum(up)))     # each row's group of equal ticks
    rows = np.flatnonzero(np.isin(group, group[1:][down]))
    del group, up, same, down
    order = np.arange(len(ticks))
    # whole groups, laid out in ticks order: their own lexsort puts them back in their slots
    order[rows] = rows[np.lexsort((src_order[rows], ticks[rows]))]
    return order


def _unquoted(items: list[str]) -> str:
    return items[0].replace('"', " ").replace("\n", " ")


def _row_lookup(tab: Table, keys: list[tuple[int, int]], tname: str) -> np.ndarray:
    """Rows of tab holding the (location, seq) keys (vectorized search on a combined key)."""
    loc, seq = tab["location"].astype(np.int64), tab["seq"].astype(np.int64)
    k = np.array(keys, np.int64).reshape(-1, 2)
    lo = min(int(loc.min()), int(k[:, 0].min()))
    span = max(int(seq.max()), int(k[:, 1].max())) + 1
    if (max(int(loc.max()), int(k[:, 0].max())) - lo + 1) * span >= 2**63:
        raise PartraceError(f"{tname}: location/seq range too large to index")
    comb = (loc - lo) * span + seq
    order = np.argsort(comb, kind="stable")
    want = (k[:, 0] - lo) * span + k[:, 1]
    pos = np.searchsorted(comb[order], want)
    pos = np.minimum(pos, len(order) - 1)
    rows = order[pos]
    bad = np.flatnonzero(comb[rows] != want)
    if len(bad):
        raise PartraceError(f"{tname}: no record at location {keys[bad[0]][0]} seq {keys[bad[0]][1]} "
                            "for its key-value/text rows")
    return rows


def _no_rows(m: int) -> tuple:
    """format()'s row arguments for no event rows (m key-value columns)."""
    z = np.zeros(0, np.int64)
    no_fields = np.zeros((1, 0), np.uint64).T       # (0 rows, 1 column), as field_columns'
    return (z, z.astype(np.uint64), z, no_fields, np.full((len(G.STREAM_RECORDS), 8), -1),
            z, z, z, z, np.zeros(1, np.uint8),
            np.zeros((m, 0), bool), np.zeros((m, 0), np.uint64))


class _NoCounters:
    ticks = np.zeros(0, np.uint64)
    proc = first = count = np.zeros(0, np.int64)
    id = val = np.zeros(0, np.uint64)
    records = 0


_NO_COUNTERS = _NoCounters()
_COUNTER = G.STREAM_RECORDS.index(G.BY_NAME["Counter"])

_KIND_TO_REC = np.full(256, -1, np.int64)
for _r in G.BY_KIND.values():
    _KIND_TO_REC[int(_r.kind)] = G.STREAM_RECORDS.index(_r)
_NOOP = G.STREAM_RECORDS.index(G.BY_NAME["NoOp"])


def _record_codes(tab: Table, tname: str) -> np.ndarray:
    """Each row's record code (STREAM_RECORDS): its kind's record if that is one of the
    table's, else NoOp; one lookup a row (the kind column taken as it is)."""
    if "kind" not in tab:
        return np.full(len(tab), _codes_of(tname)[int(Kind.NOOP)])
    return np.take(_codes_of(tname), tab["kind"])


@lru_cache(maxsize=None)
def _codes_of(tname: str) -> np.ndarray:
    """The record code of each kind (0..255) in a row of table `tname`."""
    return np.array([r if r >= 0 and G.STREAM_RECORDS[r].table == tname else _NOOP
                     for r in _KIND_TO_REC.tolist()], np.int64)
