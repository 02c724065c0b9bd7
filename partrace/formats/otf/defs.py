"""Definitions of an OTF trace (.0.def, local .<s>.def, marker definitions).

Strings (names, units, creator, comments, version name; also marker texts and
the comment records of the streams) are ``str`` decoded with
``bytes.decode("utf-8", "surrogateescape")``: OTF stores bytes with no declared
encoding and VampirTrace-era traces hold Latin-1 or KOI8-R names.  Valid UTF-8
reads as text; each byte that is not part of valid UTF-8 becomes the lone
surrogate U+DC00 + byte (0xe9 -> "\\udce9"), so ``s.encode("utf-8", "surrogateescape")``
gives back the file's bytes exactly (the OTF writer encodes that way).
Key-value byte arrays are ``bytes``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import TraceError
from ...model import LOCATION_COLUMNS, REGION_COLUMNS, STR, Column, Definitions, Table
from ..names import told_apart
from .files import parse_master, read_all, stream_file, stub_of
from .grammar import DEF_RECORDS, KEYVALUE, MARKER_RECORDS, MAX_KV_TYPE
from .textline import keyword_index, parse_line

_DEF_INDEX = keyword_index(DEF_RECORDS + (KEYVALUE,))
_MARKER_INDEX = keyword_index(MARKER_RECORDS + (KEYVALUE,))


def parse_records(path: Path, index, where) -> list[dict]:
    """Records of a small file as dicts {type, where, fields, kv}; KV lines attach to the next record."""
    out, kv = [], []
    for no, line in enumerate(read_all(path).split(b"\n"), 1):
        if not line.strip():
            continue
        rec, vals = parse_line(line, index, path, no)
        if rec is KEYVALUE:
            kv.append([vals["key"], vals["type"], vals["value"], vals["length"]])
            continue
        out.append({"type": rec.name, "where": where, "fields": vals, "kv": kv, "line": no})
        kv = []
    if kv:
        raise TraceError(path, "end of file", "expected a record after the key-value lines")
    return out


def _table(cols: list[Column], rows: list[tuple]) -> Table:
    data = {}
    for k, c in enumerate(cols):
        vals = [r[k] for r in rows]
        data[c.name] = np.array(vals, dtype=object) if c.is_object else np.array(vals, dtype=c.numpy_dtype())
    return Table(data)


def _cols(*spec) -> list[Column]:
    return [Column(n, t) for n, t in spec]


TABLE_SPECS = {
    # table: (record type, columns [(name, dtype, field)])
    "function_groups": ("DefFunctionGroup", [("id", "int64", "token"), ("name", STR, "name")]),
    "counters": ("DefCounter", [("id", "int64", "token"), ("name", STR, "name"), ("group", "int64", "group"),
                                ("properties", "uint32", "properties"), ("unit", STR, "unit")]),
    "counter_groups": ("DefCounterGroup", [("id", "int64", "token"), ("name", STR, "name")]),
    "communicators": ("DefProcessGroup", [("id", "int64", "token"), ("name", STR, "name")]),
    "collectives": ("DefCollectiveOperation", [("id", "int64", "token"), ("name", STR, "name"),
                                               ("type", "uint32", "type")]),
    "files": ("DefFile", [("id", "int64", "token"), ("name", STR, "name"), ("group", "int64", "group")]),
    "file_groups": ("DefFileGroup", [("id", "int64", "token"), ("name", STR, "name")]),
    "scl": ("DefScl", [("id", "int64", "token"), ("file", "int64", "file"), ("line", "int64", "line")]),
    "scl_files": ("DefSclFile", [("id", "int64", "token"), ("name", STR, "name")]),
    "keys": ("DefKeyValue", [("id", "int64", "key"), ("type", "uint8", "type"), ("name", STR, "name"),
                             ("description", STR, "description")]),
    "marker_defs": ("DefMarker", [("id", "int64", "token"), ("name", STR, "name"), ("type", "uint8", "type")]),
    "sample_points": ("DefAuxSamplePoint", [("ticks", "uint64", "ticks"), ("type", "uint8", "type")]),
}


# DefCounter properties (OTF_Definitions.h): bits 0-1 the type (accumulated / absolute), bits
# 2-3 the scope, bits 5-8 the value type; signed values of any width are stored as int64
# (OTF_Signed2Counter), a float in the low 32 bits (OTF_Float2Counter)
_COUNTER_KIND = {0: "accumulated", 1: "absolute"}
_COUNTER_SCOPE = {0: "start", 4: "point", 8: "last", 12: "next"}
_COUNTER_VARTYPE = {0: "uint64", 32: "int64", 64: "uint64", 96: "int64", 128: "uint64",
                    160: "int64", 256: "float32", 288: "float64"}


def with_counter_meaning(counters: Table) -> Table:
    """The counters table with the model's value_type and mode, read from the properties."""
    props = np.asarray(counters["properties"], dtype=np.int64)
    cols = dict(counters.columns)
    cols["value_type"] = np.asarray([_COUNTER_VARTYPE.get(p & 480, "uint64")
                                     for p in props.tolist()], dtype=object)
    cols["mode"] = np.asarray([f"{_COUNTER_KIND.get(p & 3, 'absolute')}_{_COUNTER_SCOPE[p & 12]}"
                               for p in props.tolist()], dtype=object)
    return Table(cols)


def _ranges() -> dict[str, list[tuple[str, np.dtype]]]:
    """record type -> [(field, dtype of the column it fills)] for the numeric columns."""
    out = {"DefProcess": [("token", np.dtype("int64")), ("parent", np.dtype("int64"))],
           "DefFunction": [("token", np.dtype("int64")), ("group", np.dtype("int64"))]}
    for rtype, spec in TABLE_SPECS.values():
        out[rtype] = [(key, np.dtype(t)) for _, t, key in spec if t != STR]
    return out


_RANGES = _ranges()


def _check_ranges(records: list[dict], paths: dict, stub: Path) -> None:
    """Every number of a definition must fit its column (e.g. a key type Y106 does not fit uint8);
    key types must be OTF types (0 char .. b byte array).  Definitions are few: a plain loop."""
    for r in records:
        fields = r["fields"]
        bad = [("type", None)] if r["type"] == "DefKeyValue" and fields["type"] > MAX_KV_TYPE else []
        bad += [(k, dt) for k, dt in _RANGES.get(r["type"], ()) if not 0 <= fields[k] <= np.iinfo(dt).max]
        if bad:
            k, dt = bad[0]
            where = r["where"]
            path = paths.get(where) or stream_file(stub, where, "def")
            limit = f"an OTF value type 0..{MAX_KV_TYPE:x}" if dt is None else f"at most {np.iinfo(dt).max:x}"
            raise TraceError.at_line(path, r["line"], f"expected {k} of {r['type']} to be {limit}, "
                                     f"got {fields[k]:x}")


def local_definitions(stub: Path, stream: int) -> list[dict]:
    """The records of a stream's own NAME.<s>.def (most traces have none)."""
    local = stream_file(stub, stream, "def")
    return parse_records(local, _DEF_INDEX, stream) if local is not None else []


def _undefined_listed(master: Path, streams: dict, procs: list[dict]) -> list[dict]:
    """A process the master file lists and no DP record defines: the OTF library reads its
    records (OTF_Reader_readEvents skips only processes its process list, made from the
    master file, does not hold) and hands its token on as is.  Kept the same way, as a
    location named after its token (``Process 0x<token>``, no parent), with one warning."""
    defined = {p["token"] for p in procs}
    missing = sorted({q for ps in streams.values() for q in ps} - defined)
    if missing:
        import warnings
        warnings.warn(f"{master}: {len(missing)} process(es) it lists have no DP record "
                      f"(first: {missing[0]:x}); their records are read, each process named "
                      f"after its token")
    return [{"token": q, "name": f"Process 0x{q:x}", "parent": 0} for q in missing]


def read_definitions(master: Path, local: dict[int, list[dict]] | None = None) -> Definitions:
    """``local``: local_definitions of (some) streams, already read elsewhere."""
    streams = parse_master(master)
    stub = stub_of(master)
    glob = stream_file(stub, 0, "def")
    if glob is None:
        raise TraceError(f"{stub}.0.def", None, "expected the global definition file")
    records = parse_records(glob, _DEF_INDEX, 0)
    glob_lines = max([r["line"] for r in records], default=0)
    dtr_lines = [r["line"] for r in records if r["type"] == "DefTimerResolution"]
    local = local or {}
    for s in streams:
        records += local[s] if s in local else local_definitions(stub, s)
    marker = stream_file(stub, 0, "marker")
    global_spots = 0
    if marker is not None:
        recs = parse_records(marker, _MARKER_INDEX, "marker")
        records += [r for r in recs if r["type"] == "DefMarker"]
        global_spots = sum(r["type"] == "MarkerSpot" for r in recs)
    by_type: dict[str, list[dict]] = {}
    for r in records:
        by_type.setdefault(r["type"], []).append(r["fields"])

    def one(t, key, default=None):
        v = by_type.get(t)
        return v[-1][key] if v else default

    tps = one("DefTimerResolution", "ticks_per_second")
    if not tps:         # at the record's line, or past the last record when there is none
        raise TraceError.at_line(glob, dtr_lines[-1] if dtr_lines else glob_lines + 1,
                                 "expected a timer resolution record (DTR) with a value > 0")
    procs = by_type.get("DefProcess", [])
    groups = by_type.get("DefFunction", [])
    _check_ranges(records, {0: glob, "marker": marker}, stub)
    procs = procs + _undefined_listed(master, streams, procs)     # once the file is whole
    tables = {
        "locations": _table(LOCATION_COLUMNS, list(zip(
            [p["token"] for p in procs],
            told_apart([p["token"] for p in procs], [p["name"] for p in procs],
                          [p["parent"] for p in procs], "process"),
            [p["parent"] for p in procs]))),
        "regions": _table(REGION_COLUMNS, [(f["token"], f["name"], f["group"]) for f in groups]),
    }
    for name, (rtype, spec) in TABLE_SPECS.items():
        tables[name] = _table(_cols(*[(n, t) for n, t, _ in spec]),
                              [tuple(f[k] for _, _, k in spec) for f in by_type.get(rtype, [])])
    tables["counters"] = with_counter_meaning(tables["counters"])
    ver = one("DefVersion", "version")
    attrs = {
        "ticks_per_second": int(tps),
        "time_range": [one("DefTimeRange", "min"), one("DefTimeRange", "max")],
        "creator": one("DefCreator", "creator"),
        "version": f"{ver[0]}.{ver[1]}.{ver[2]} {ver[3]}" if ver else None,
        "unique_id": one("DefUniqueId", "uid"),
        "comments": [f["comment"] for f in by_type.get("DefinitionComment", [])],
        "streams": streams,
        # the library keeps markers per stream too (NAME.<s>.marker, read after NAME.0.marker)
        "marker_streams": [s for s in streams if stream_file(stub, s, "marker") is not None],
        "global_marker_spots": global_spots,
        "process_order": [p for ps in streams.values() for p in ps],
        "local_definitions": sorted({r["where"] for r in records if isinstance(r["where"], int) and r["where"]}),
    }
    for r in records:
        r.pop("line", None)
    return Definitions(format="otf", tables=tables, attrs=attrs, source=records)
