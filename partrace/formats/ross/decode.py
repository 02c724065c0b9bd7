"""Decode one region of one ROSS file into tables (numpy gathers, no per-record Python)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import TraceError
from ...model import Definitions, Kind, Table, byte_rows, conform
from ..base import repeated
from . import kernels
from . import layouts as L
from .scan import _lookup, hop_region, key_counts, open_bytes, raw_keys, small_keys

NS = 1e9          # one second of real time, and one unit of virtual time, is 1e9 key ticks


def to_ns(x: np.ndarray) -> np.ndarray:
    """Seconds (or virtual-time units) -> int64 ordering key; inf/NaN/huge clamp to int64 max
    (-inf and huge negative values to int64 min)."""
    x = np.asarray(x)
    out = np.empty(len(x), np.int64)
    kernels.to_ns(x if x.dtype.kind == "f" else x.astype(np.float64), NS, out)
    return out


def gather(buf: np.ndarray, starts: np.ndarray, dtype: np.dtype, skip: int = 0,
           keep: np.ndarray | None = None) -> np.ndarray:
    """Fixed-size records at byte offsets starts+skip, viewed as a structured array
    (zeros where ``keep`` is False)."""
    out = np.empty((len(starts), dtype.itemsize), np.uint8)
    kernels.copy_records(buf, starts, dtype.itemsize, keep, out, skip)
    return out.view(dtype).ravel()


def seq_numbers(keys: np.ndarray, prefix_keys: np.ndarray, prefix_counts: np.ndarray,
                distinct: np.ndarray | None = None) -> np.ndarray:
    """Per record: records of its key before the region (prefix) + earlier in the region.
    ``distinct``: the sorted distinct ``keys`` if known (their range then costs no pass)."""
    if distinct is None:
        dense = small_keys(keys)
        top = int(keys.max()) if dense else 0
    else:
        dense = bool(len(distinct)) and distinct[0] >= 0 and distinct[-1] < 4 * len(keys) + 4096
        top = int(distinct[-1]) if dense else 0
    if dense:                          # LP ids: one counting pass, no sort
        out = np.empty(len(keys), np.int64)
        kernels.dense_seq(keys, prefix_keys, prefix_counts, top + 1, out)
        return out
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    first = np.r_[True, sk[1:] != sk[:-1]] if len(sk) else np.empty(0, bool)
    group_start = np.maximum.accumulate(np.where(first, np.arange(len(sk)), 0))
    rank = np.empty(len(keys), np.int64)
    rank[order] = np.arange(len(sk)) - group_start
    return _lookup(prefix_keys, prefix_counts, keys) + rank


def time_source(kind: str, code: int) -> str:
    """Which field is the ``time`` key of a table (see reader.TIME_MEANING)."""
    if code == L.EVTRACE:
        return "send_vts"
    if code == L.MODEL_GVT:
        return "gvt"
    if code == L.MODEL_RT or kind == "rt":
        return "real_time"
    return "virtual_time"


def model_dtype(defs: Definitions, table: str) -> np.dtype | None:
    descr = defs.attrs["model_dtypes"].get(table)
    if descr is None:
        return None
    return np.dtype([tuple(f[:2]) + ((tuple(f[2]),) if len(f) > 2 else ()) for f in descr])


def _model_columns(buf, sel, sizes, width, code, mdt, path) -> dict:
    cols = {}
    hsize = L.HEADER_DTYPES[code].itemsize
    n = len(sel)
    if width == "variable":
        starts = sel.astype(np.int64) + hsize
        cols["model_data"] = byte_rows(buf, starts, starts + sizes)
    elif width:
        bad = (sizes != width) & (sizes != 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise TraceError.at_byte(path, int(sel[i]), f"model data size {int(sizes[i])} but the "
                                     f"scan found only {width} (file changed since scan?)")
        data = np.empty((n, width), np.uint8)
        kernels.copy_records(buf, sel, width, sizes == width, data, hsize)
        cols["model_data"] = data
    if mdt is not None:
        rec = gather(buf, sel, mdt, hsize, keep=sizes == mdt.itemsize)
        for name in mdt.names:
            cols["model_" + name] = rec[name]
    return cols


# The fields of an event record that place its two rows: raw LP ids and times of both ends.
ENDS = np.dtype([("src_lp", "<u4"), ("dest_lp", "<u4"), ("send_vts", "<f4"), ("recv_vts", "<f4")])


def event_keys(ends: np.ndarray) -> np.ndarray:
    """scan.raw_keys of event records from their ENDS: source and destination LP of each
    record, interleaved (the file's bytes are read once, for both)."""
    keys = np.empty(2 * len(ends), np.int64)
    keys[0::2], keys[1::2] = ends["src_lp"], ends["dest_lp"]
    return keys


def message_sides(ends: np.ndarray, sel: np.ndarray, want: set, locate) -> list:
    """Each event-trace record is a message, two rows: a SEND row on the source LP at
    the send time (peer: the destination) and a RECV row on the destination LP at the
    receive time (peer: the source), each carrying every field of the record.

    ``ends``: the ENDS fields of the records at ``sel``.  Returns [(Kind.SEND, order,
    columns), (Kind.RECV, order, columns)]: the records at ``sel`` in the key order of
    their SEND rows and of their RECV rows, so that each side is decoded as one sorted
    run (gathered from the file in that order: no column is sorted after), and the
    side's time / location / peer columns (those ``want`` asks for) in that order.
    """
    times = to_ns(ends["send_vts"]), to_ns(ends["recv_vts"])
    lps = ends["src_lp"], ends["dest_lp"]
    locs = [locate.lp(ids, sel) for ids in lps] if want & {"location", "peer"} else None
    out = []
    for me, kind in enumerate((Kind.SEND, Kind.RECV)):
        order = key_order(times[me], lps[me])
        given = {"time": times[me][order]} if "time" in want else {}
        if locs is not None:
            given["location"], given["peer"] = locs[me][order], locs[1 - me][order]
        out.append((kind, order, given))
    return out


def key_order(time: np.ndarray, lp: np.ndarray) -> np.ndarray:
    """Permutation putting one side's rows in (time, location, seq) order.

    A location id grows with its raw LP id, and the rows of one location number their
    seq in file order, so this is the (time, raw LP id) order with ties kept in file
    order: the stable order of a combined key when time and id ranges fit an int64
    (they do unless a time is clamped to the int64 limits), else a lexsort.
    """
    if not len(time):
        return np.empty(0, np.int64)
    t0, t1, lp0, lp1 = kernels.spans(time, lp)
    width = int(lp1) - int(lp0) + 1
    if (int(t1) - int(t0) + 1) * width > np.iinfo(np.int64).max:
        return np.lexsort((lp, time))
    key = np.empty(len(time), np.int64)
    down = kernels.sort_keys(time, lp, t0, lp0, np.int64(width), key)
    if down == 0:
        return np.arange(len(key))
    if down * NEARLY_SORTED <= len(key):    # the SEND side: a stable merge sort is quickest
        return np.argsort(key, kind="stable")
    # the RECV side, in no order: an unstable sort (about 2x quicker) is the stable order
    # when no two keys are equal; else sorted again, stably
    order = np.argsort(key)
    ordered = key[order]
    return order if not (ordered[1:] == ordered[:-1]).any() else np.argsort(key, kind="stable")


# A side whose keys descend at most once in this many rows is sorted stably (the sort runs
# on the stretches already in order); else unstably, checked for equal keys.
NEARLY_SORTED = 64


class Locator:
    """Raw ids -> location ids, by search in the sorted ids that occur (defs tables
    pes / kps / lps; see layouts).  An id the scan did not see means the file
    changed since: an error at the record, never a wrong location."""

    def __init__(self, defs: Definitions, path: Path):
        t = defs.tables
        self.path = path
        self.pes, self.lps = t["pes"]["pe_id"], t["lps"]["lp_id"]
        self.kps = L.kp_key(t["kps"]["pe_id"], t["kps"]["kp_id"])
        self.kp_base, self.lp_base = 1 + len(self.pes), 1 + len(self.pes) + len(self.kps)

        self._tables: dict[int, tuple[int, np.ndarray]] = {}

    def _at(self, ids, values, base: int, sel: np.ndarray, what: str) -> np.ndarray:
        """base + index of each value in the sorted ``ids``: by a lookup table where the ids
        are dense (LP ids: a gather per record, not a binary search); a TraceError at the
        first value absent from them."""
        span = int(ids[-1]) - int(ids[0]) + 1 if len(ids) else 0
        if 0 < span <= 4 * len(ids) + 4096 and len(values):
            if id(ids) not in self._tables:
                table = np.full(span, -1, np.int64)
                table[ids - ids[0]] = np.arange(len(ids))
                self._tables[id(ids)] = int(ids[0]), table
            lo, table = self._tables[id(ids)]
            i = np.empty(len(values), np.int64)
            k = kernels.lookup(table, np.int64(lo), values, i)
        else:
            i = L.index_in(ids, values)
            k = int(np.argmax(i < 0)) if len(i) and i.min() < 0 else -1
        if k >= 0:
            raise TraceError.at_byte(self.path, int(sel[k]), f"{what} {int(values[k])} was not "
                                     "in the file when it was scanned (file changed?)")
        i += base
        return i

    def pe(self, pe, sel):
        return self._at(self.pes, pe, 1, sel, "PE id")

    def kp(self, pe, kp, sel):
        return self._at(self.kps, L.kp_key(pe, kp), self.kp_base, sel, "(PE, KP) key")

    def lp(self, lp, sel):
        return self._at(self.lps, lp, self.lp_base, sel, "LP id")


def decode_region(info: dict, defs: Definitions, schema: dict, prefix: dict | None,
                  wanted: dict | None = None, hop=None,
                  known: dict | None = None) -> tuple[list[dict[str, Table]], dict]:
    """Chunks of tables of one region, and its records per raw key ({code: (keys,
    counts)}); ``prefix``: the same for all of the file's regions before this one.
    ``wanted`` ({table: column names}; None: all of the schema) limits the work to those
    columns; ``prefix`` None: no seq column and no counts.  ``hop``: the region's
    (starts, codes) if this process has hopped it already; ``known``: the region's records
    per raw key if its survey here counted them ({code: (keys, counts)}, as returned).  An
    event trace region gives
    two chunks, its SEND rows and its RECV rows, each in key order (message_sides)."""
    path, kind = Path(info["path"]), info["kind"]
    buf = open_bytes(path)
    starts, codes = hop_region(path, buf, info["start"], info["end"], kind, hop)
    locate = Locator(defs, path)
    lp_code = L.LP_V1 if defs.attrs["files"].get(kind, {}).get("lp_sample_bytes") == 36 else L.LP
    chunks, counts = [{}], {}
    for code in L.CODES_OF_KIND[kind]:
        table = L.table_name(kind, code)
        sel = starts[codes == code]
        if code in (L.LP, L.LP_V1) and code != lp_code:
            if len(sel):
                raise TraceError.at_byte(path, int(sel[0]) + 4, "LP sample layout differs from "
                                         "the scan's (file changed since it was scanned?)")
            continue
        if table not in schema:
            continue
        want = set(c.name for c in schema[table]) if wanted is None else set(wanted.get(table, ()))
        skip = wanted is not None and table not in wanted
        # event records: their ENDS give both the raw keys and each side's order
        ends = None if code != L.EVTRACE or (skip and prefix is None) else gather(buf, sel, ENDS)
        if prefix is not None:      # every table's counts: the next region's carry
            keys = raw_keys(buf, sel, code) if ends is None else event_keys(ends)
            counts[code] = (known or {}).get(code) or key_counts(keys)
        if skip:
            continue
        if "seq" in want:       # in file order (the records' own)
            pk, pc = prefix.get(code, (np.empty(0, np.int64), np.empty(0, np.int64)))
            seq = seq_numbers(keys, pk, pc, counts[code][0])
        sides = (message_sides(ends, sel, want, locate) if code == L.EVTRACE
                 else ((None, None, {}),))
        columns = [c for c in schema[table] if c.name in want]
        for k, (side, order, given) in enumerate(sides):
            rows = sel if order is None else sel[order]
            cols = _columns(buf, rows, code, kind, table, want - set(given), defs, locate,
                            path, side, columns)
            cols.update(given)
            if "seq" in want:       # an event's SEND row counts first, then its RECV row
                cols["seq"] = seq if side is None else seq[k::2][order]
            if k == len(chunks):
                chunks.append({})
            chunks[k][table] = conform(Table({n: v for n, v in cols.items() if n in want}),
                                       columns)
    return chunks, counts


def _columns(buf, sel, code, kind, table, want: set, defs, locate, path, side,
             columns) -> dict:
    """The columns of the records at ``sel`` that ``want`` needs (and some others);
    event records (``side`` Kind.SEND or Kind.RECV) as the rows of that side, but for
    the columns message_sides gives."""
    hdr = gather(buf, sel, L.HEADER_DTYPES[code])
    cols = {name: hdr[name] for name in hdr.dtype.names}
    if "offset" in want:
        cols["offset"] = sel.view(np.uint64)     # byte offsets: never negative
    if "time" in want:
        cols["time"] = to_ns(hdr[time_source(kind, code)])
    if "location" in want:      # (event records: message_sides)
        if code == L.PE:
            cols["location"] = locate.pe(hdr["pe_id"], sel)
        elif code == L.KP:
            cols["location"] = locate.kp(hdr["pe_id"], hdr["kp_id"], sel)
        else:
            cols["location"] = locate.lp(hdr["lp_id"], sel)
    for c in columns:       # one value for the whole side: held as one (engine/narrow.py)
        if side is not None and c.name in ("kind", "region"):
            cols[c.name] = repeated(int(side) if c.name == "kind" else 0, len(sel), c)
    size_field = L.MODEL_SIZE_FIELD[code]
    if size_field is not None and any(c.startswith("model_") for c in want):
        cols.update(_model_columns(buf, sel, hdr[size_field].astype(np.int64),
                                   defs.attrs["model_data_width"].get(table, 0), code,
                                   model_dtype(defs, table), path))
    return cols
