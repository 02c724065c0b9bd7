"""OTF v1 reader: units = streams (with their marker files) + NAME.0.marker, decode with the numba kernel."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import TraceError
from ...model import (BYTES, ROW_TABLE, STR, Column, Definitions, Schema, Table, column, conform,
                      unsigned_ids)
from ..base import TraceReader, Unit
from . import grammar as G
from .files import file_size, master_lines, parse_master, stream_file, stub_of, trace_files

STREAM_KINDS = ("events", "snaps", "stats")
MARKER_KEY = "marker"


def _own(name, dtype, desc="", unit=None, refers=None) -> Column:
    return Column(name, dtype, desc, unit, refers=refers)


_KEY = [column("time"), column("location"), column("seq")]
_ORDER = Column("src_order", "int64", "position of the record in its source file (keeps the tie order "
                "of records of different processes with equal time)")
SCHEMA: Schema = {
    "events": _KEY + [column("kind"), column("region")] + [column(c) for c in (
        "ticks", "scl", "peer", "origin", "comm", "tag", "size", "received", "root", "collop", "duration",
        "match_id", "handle", "operation", "file", "counter", "value")] + [_ORDER],
    "snapshots": _KEY + [column("kind"), column("region"), column("ticks"),
                         _own("otime", "uint64", "original time of the state", "ticks")] + [column(c) for c in (
        "scl", "peer", "comm", "tag", "size", "received", "root", "collop", "match_id", "handle", "file",
        "counter", "value")] + [_own("count", "uint64", "collective operations count (CollopCountSnapshot)"), _ORDER],
    "statistics": _KEY + [column("kind"), column("region"), column("ticks"),
                          _own("function_group", "int64", "function group id"),
                          column("peer"), column("comm"), column("tag"), column("collop"), column("file"),
                          _own("file_group", "int64", "file group id"),
                          _own("count", "uint64", "number of invocations"),
                          _own("excl_time", "uint64", "exclusive time", "ticks"),
                          _own("incl_time", "uint64", "inclusive time", "ticks"),
                          _own("n_sent", "uint64", "messages sent"), _own("n_recv", "uint64", "messages received"),
                          column("size", description="bytes sent"), column("received")] + [
        _own(n, "uint64", d) for n, d in (
            ("n_open", "open calls"), ("n_close", "close calls"), ("n_read", "read calls"),
            ("n_write", "write calls"), ("n_seek", "seek calls"), ("bytes_read", "bytes read"),
            ("bytes_written", "bytes written"))] + [_ORDER],
    "markers": _KEY + [column("ticks"), _own("marker", "int64", "marker definition id (marker_defs/id)", refers="marker_defs"),
                       _own("text", STR, "marker text")],
    "keyvalues": _KEY + [_own("ref_table", "uint8", "table of the record (0 events 1 snapshots 2 statistics 3 markers)"),
                         _own("ref_seq", "int64", "seq of the record in that table", refers=ROW_TABLE),
                         _own("key", "int64", "key id (keys/id)"), _own("type", "uint8", "OTF value type code"),
                         _own("value", "uint64", "raw 64-bit value"),
                         _own("length", "uint64", "byte-array length field"),
                         _own("bytes", BYTES, "byte-array value")],
    "text": _KEY + [_own("ref_table", "uint8", "table of the record (0 events 1 snapshots 2 statistics)"),
                    _own("ref_seq", "int64", "seq of the record in that table", refers=ROW_TABLE),
                    _own("text", STR, "comment text")],
}
# OTF tokens (processes, functions, groups, counters, ...) are unsigned 32-bit numbers, and
# producers use the whole range (VampirTrace numbers threads 0x80000001, 0x80010001, ...): the
# id columns keep that width.
SCHEMA = unsigned_ids(SCHEMA)
KIND_OF = np.array([int(r.kind) for r in G.STREAM_RECORDS], np.uint8)


def ticks_to_ns(ticks: np.ndarray, tps: int) -> np.ndarray:
    """floor(ticks * 1e9 / tps), exactly, as int64."""
    from math import gcd
    t = np.asarray(ticks, np.uint64)
    g = gcd(10**9, tps)
    a, b = 10**9 // g, tps // g
    if b * a < 2**64:
        q, r = np.divmod(t, np.uint64(b))
        return (q * np.uint64(a) + (r * np.uint64(a)) // np.uint64(b)).astype(np.int64)
    # very fine clocks: exact Python integers (rare)
    return np.array([int(x) * a // b for x in t.tolist()], np.int64)


class _Seq:
    """Per-location counters of one table, continued across chunks."""

    def __init__(self):
        self.next: dict[int, int] = {}

    def assign(self, loc: np.ndarray) -> np.ndarray:
        from .split import location_index, running_counts
        loc = np.asarray(loc, np.int64)
        seq = np.empty(len(loc), np.int64)
        if not len(loc):
            return seq
        distinct, index = location_index(loc)
        keys = distinct.tolist()
        counts = np.array([self.next.get(u, 0) for u in keys], np.int64)
        running_counts(index, counts, seq)
        self.next.update(zip(keys, counts.tolist()))
        return seq


class OTFReader(TraceReader):
    format_name = "otf"
    locations_in_one_unit = True     # a process's events are all in its stream's file
    surveyed = True         # each rank reads the local definitions of its streams

    def __init__(self, path):
        super().__init__(path)
        self.stub = stub_of(self.path)
        self.streams = parse_master(self.path)

    def units(self) -> list[Unit]:
        units = []
        for s in sorted(self.streams):
            files = {k: stream_file(self.stub, s, k) for k in STREAM_KINDS + (MARKER_KEY,)}
            if not any(files.values()):
                no = master_lines(self.path)[s]
                raise TraceError.at_line(self.path, no, f"expected {self.stub.name}.{s:x}.events "
                                         f"(or .snaps/.stats/.marker, plain or .z) for stream {s:x} listed here")
            if files.get("events") is None and (files.get("snaps") or files.get("stats")):
                # snapshots and statistics sum up a stream's events: without the events
                # file they were lost, not absent
                have = files.get("snaps") or files.get("stats")
                raise TraceError(f"{self.stub}.{s:x}.events", None,
                                 f"missing: the events of stream {s:x}, whose {have.name} is here")
            units.append(Unit(f"{s:08x}", sum(file_size(p) for p in files.values()),
                              {"stream": s, "files": {k: str(p) for k, p in files.items() if p}}))
        marker = stream_file(self.stub, 0, "marker")
        if marker is not None:
            units.append(Unit(MARKER_KEY, file_size(marker), {"stream": 0, "files": {"marker": str(marker)}}))
        return sorted(units, key=lambda u: u.key)

    def survey(self, unit: Unit) -> dict[int, list[dict]]:
        """The stream's local definitions (NAME.<s>.def), read by the rank decoding it."""
        if unit.key == MARKER_KEY:
            return {}
        from .defs import local_definitions
        return {unit.info["stream"]: local_definitions(self.stub, unit.info["stream"])}

    @staticmethod
    def combine(a: dict, b: dict) -> dict:
        return {**a, **b}       # one entry per stream: order-free

    def read_definitions(self, survey=None) -> Definitions:
        from .defs import read_definitions
        return read_definitions(self.path, local=survey)

    def schema(self, defs: Definitions) -> Schema:
        return SCHEMA

    def source_files(self) -> list[Path]:
        return trace_files(self.path)

    def decode(self, unit: Unit, defs: Definitions, chunk: int | None = None) -> Iterator[dict[str, Table]]:
        from .checks import References
        from .stream import ROW_TABLES, Layout, decode_stream
        chunk = chunk or self.chunk_bytes
        tps = int(defs.attrs["ticks_per_second"])
        seqs = {t: _Seq() for t in SCHEMA}
        refs = References(defs, self.path.name)
        if unit.key == MARKER_KEY:
            yield self._markers(Path(unit.info["files"]["marker"]), tps, seqs, refs, defs)
            return
        layout = Layout.of({t: self.selected(t, [c.name for c in SCHEMA[t]]) for t in SCHEMA}, tps)
        counts = np.zeros((len(ROW_TABLES), len(refs.processes)), np.int64)   # seq of the row tables
        for kind in STREAM_KINDS:
            p = unit.info["files"].get(kind)
            if p:
                yield from decode_stream(Path(p), kind, layout, counts, seqs, chunk, refs)
        p = unit.info["files"].get(MARKER_KEY)
        if p:
            yield self._markers(Path(p), tps, seqs, refs, defs, first=int(defs.attrs.get("global_marker_spots", 0)))

    def _markers(self, path: Path, tps: int, seqs, refs, defs, first: int | None = None) -> dict[str, Table]:
        """The spots of NAME.0.marker (seq: the order in the file), or of a stream's marker file
        (`first`: seq per location from the number of spots in NAME.0.marker, so none repeats)."""
        from .defs import _MARKER_INDEX, parse_records
        recs = parse_records(path, _MARKER_INDEX, "marker")
        if first is not None:
            local = next((r for r in recs if r["type"] != "MarkerSpot"), None)
            if local is not None:    # otfmerge refuses these too ("local markers")
                raise TraceError.at_line(path, local["line"], f"expected marker spots only, got {local['type']} "
                                         f"(marker definitions belong in {self.stub.name}.0.marker)")
        recs = [r for r in recs if r["type"] == "MarkerSpot"]
        n = len(recs)
        ticks = np.array([r["fields"]["ticks"] for r in recs], np.uint64)
        loc = np.array([r["fields"]["location"] for r in recs], np.uint64).view(np.int64)
        marker = np.array([r["fields"]["marker"] for r in recs], np.uint64).view(np.int64)
        kv = [(i, k) for i, r in enumerate(recs) for k in r["kv"]]
        refs.check_marker_spots(path, marker, loc, [r["line"] for r in recs], defs.tables["marker_defs"]["id"],
                                [i for i, _ in kv], [k[0] for _, k in kv], [k[1] for _, k in kv])
        if first is None:
            seq = np.arange(n, dtype=np.int64)       # order in the marker file
        else:
            seq = first + seqs["markers"].assign(loc)
        time = ticks_to_ns(ticks, tps)
        markers = Table({"time": time, "location": loc, "seq": seq, "ticks": ticks,
                         "marker": marker,
                         "text": np.array([r["fields"]["text"] for r in recs], dtype=object)})
        hexes = [k[2] for _, k in kv]          # marker files are small and parsed line by line anyway
        slen = np.array([len(h) for h in hexes], np.int64)
        kvt = _kv_table([i for i, _ in kv], np.array([k[0] for _, k in kv], np.uint64),
                        np.array([k[1] for _, k in kv], np.uint64), "".join(hexes).encode("ascii"),
                        np.cumsum(slen) - slen, slen, np.array([k[3] for _, k in kv], np.uint64),
                        time, loc, seq, 3, seqs["keyvalues"])
        return {"markers": conform(markers, SCHEMA["markers"]), "keyvalues": kvt}


def _kv_table(owner, key, vtype, text, soff, slen, length, time, loc, seq, ref_table, seqc: _Seq) -> Table:
    """keyvalues rows: the row index of each key-value's record (owner), its key, type, length,
    and its value's hex text text[soff:soff+slen] (bytes).  Array work only: the values come from
    the split.kv_values kernel, the byte-array objects from C-level map/slice calls."""
    from .split import kv_values
    owner = np.asarray(owner, np.int64)
    soff, slen = np.asarray(soff, np.int64), np.asarray(slen, np.int64)
    is_bytes = np.asarray(vtype, np.uint64) == G.BYTE_ARRAY
    nbytes = np.where(is_bytes, (slen + 1) // 2, 0)
    bstart = np.cumsum(nbytes) - nbytes
    value = np.zeros(len(owner), np.uint64)
    raw = np.zeros(int(nbytes.sum()), np.uint8)
    if len(owner):        # else no kernel to load (a few ms)
        kv_values(np.frombuffer(text, np.uint8), soff, slen, is_bytes, bstart, value, raw)
    blobs = np.full(len(owner), b"", dtype=object)
    ba = np.flatnonzero(is_bytes)
    if len(ba):
        raw = raw.tobytes()
        starts = bstart[ba].tolist()
        ends = (bstart[ba] + nbytes[ba]).tolist()
        blobs[ba] = np.fromiter(map(raw.__getitem__, map(slice, starts, ends)), dtype=object, count=len(ba))
    l = loc[owner]
    tab = Table({
        "time": time[owner], "location": l, "seq": seqc.assign(l),
        "ref_table": np.broadcast_to(np.asarray(ref_table, np.uint8), (len(owner),)).copy(),
        "ref_seq": seq[owner],
        "key": np.asarray(key, np.uint64).view(np.int64), "type": np.asarray(vtype, np.uint64).astype(np.uint8),
        "value": value, "length": np.asarray(length, np.uint64), "bytes": blobs})
    return conform(tab, SCHEMA["keyvalues"])


TYPES = {t: {c.name: c.numpy_dtype() for c in cols} for t, cols in SCHEMA.items()}
