"""The tables an OTF trace decodes into (SCHEMA), and what building their rows shares: ticks
to nanoseconds, seq per location across chunks, keyvalue rows from their hex text.  Below
both the reader (markers) and stream.py (stream files)."""
from __future__ import annotations

import numpy as np

from ...model import BYTES, ROW_TABLE, STR, Column, Schema, Table, column, conform, unsigned_ids
from . import grammar as G


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


class Seq:
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


def kv_table(owner, key, vtype, text, soff, slen, length, time, loc, seq, ref_table, seqc: Seq) -> Table:
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
