"""OTF v1 reader: units = streams (with their marker files) + NAME.0.marker, decode with the numba kernel."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import TraceError
from ...model import Definitions, Schema, Table, conform
from ..base import TraceReader, Unit
from .files import file_size, master_lines, parse_master, stream_file, stub_of, trace_files
from .tables import SCHEMA, Seq, kv_table, ticks_to_ns

STREAM_KINDS = ("events", "snaps", "stats")
MARKER_KEY = "marker"


class OTFReader(TraceReader):
    format_name = "otf"
    locations_in_one_unit = True     # a process's events are all in its stream's file
    surveyed = True         # each rank reads the local definitions of its streams

    def __init__(self, path):
        super().__init__(path)
        self.stub = stub_of(self.path)
        self.streams = parse_master(self.path)
        self.undefined = None       # undefined.Undefined, made with the first unit decoded

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
        # the decoding modules (and their kernels) load with the first unit decoded, not when
        # a trace is opened or sniffed
        from .checks import References
        from .stream import ROW_TABLES, Layout, decode_stream
        chunk = chunk or self.chunk_bytes
        tps = int(defs.attrs["ticks_per_second"])
        seqs = {t: Seq() for t in SCHEMA}
        refs = References(defs, self.path.name)
        if self.undefined is None:
            from .undefined import Undefined
            self.undefined = Undefined()
        self.undefined.tables = defs.tables
        refs.found, refs.unit_key = self.undefined, unit.key
        if unit.key == MARKER_KEY:
            yield self._markers(Path(unit.info["files"]["marker"]), tps, seqs, refs)
            return
        layout = Layout.of({t: self.selected(t, [c.name for c in SCHEMA[t]]) for t in SCHEMA}, tps)
        counts = np.zeros((len(ROW_TABLES), len(refs.processes)), np.int64)   # seq of the row tables
        for kind in STREAM_KINDS:
            p = unit.info["files"].get(kind)
            if p:
                yield from decode_stream(Path(p), kind, layout, counts, seqs, chunk, refs)
        p = unit.info["files"].get(MARKER_KEY)
        if p:
            yield self._markers(Path(p), tps, seqs, refs, first=int(defs.attrs.get("global_marker_spots", 0)))

    def found_definitions(self):
        """Stand-in definitions of the tokens this rank's decode met that no record defines
        (checks.py, undefined.py)."""
        return self.undefined.take() if self.undefined is not None else None

    def _markers(self, path: Path, tps: int, seqs, refs, first: int | None = None) -> dict[str, Table]:
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
        lines = [r["line"] for r in recs]
        kv_lines = [recs[i]["line"] for i, _ in kv]
        refs.check_marker_spots(path, loc, lines, [i for i, _ in kv], [k[1] for _, k in kv])
        _note_undefined(path, refs, "marker", marker.view(np.uint64), lines, "MarkerSpot")
        _note_undefined(path, refs, "key", np.array([k[0] for _, k in kv], np.uint64), kv_lines,
                        "KeyValue before the MarkerSpot here")
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
        kvt = kv_table([i for i, _ in kv], np.array([k[0] for _, k in kv], np.uint64),
                        np.array([k[1] for _, k in kv], np.uint64), "".join(hexes).encode("ascii"),
                        np.cumsum(slen) - slen, slen, np.array([k[3] for _, k in kv], np.uint64),
                        time, loc, seq, 3, seqs["keyvalues"])
        return {"markers": conform(markers, SCHEMA["markers"]), "keyvalues": kvt}


def _note_undefined(path: Path, refs, col: str, values: np.ndarray, lines: list[int], record: str):
    """The tokens of a marker file's column (`values`, a line each) that no record defines."""
    from .undefined import FILE_ORDER, warning
    bad = refs.undefined_in(col, values)
    if len(bad):
        def place():
            i = int(np.flatnonzero(np.isin(values, bad))[0])
            return ((refs.unit_key, FILE_ORDER["marker"], int(lines[i])),
                    warning(path, int(lines[i]), record, col, int(values[i])))
        refs.found.add(col, bad, place)
