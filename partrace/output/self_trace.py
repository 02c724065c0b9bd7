"""The run itself as a trace (``--self-trace``): a track per rank, a slice per phase and,
inside it, a slice per MPI call.  Written on rank 0 from the accounts the ranks sent at
the end (engine/account_report.py): partrace traced by partrace.

``.pftrace``: Perfetto protobuf, the TracePacket fields formats/perfetto/encode.py
writes (a TrackDescriptor per rank, TrackEvent slice begin / end) plus the event's
plain ``name`` (TrackEvent field 23), encoded here in Python: a run has thousands of
slices, not millions, and this keeps numba out of a run that did not load it.
``.json``: Chrome's Trace Event Format, complete events ("X") on one thread per rank.
``.otf2``: an OTF2 archive (self_trace_otf2.py), a location per rank, for Vampir.
A phase's slice carries its account (busy_s, mpi_wait_s, sent_bytes, ...) as arguments.
"""
from __future__ import annotations

import json
import os
import struct

from ..engine.account_report import write_whole
from .self_trace_slices import BEGIN_CALL, BEGIN_PHASE, records

# TrackEvent.Type and TracePacket.SequenceFlags values, as formats/perfetto/encode.py has
# them (importing it loads numba); the tests read them back with perfetto's protos
SLICE_BEGIN, SLICE_END = 1, 2
STATE_CLEARED = 1

def write_self_trace(path: str | os.PathLike, reports: list[dict]) -> None:
    """The ranks' slices (each report's ``slices``) as a trace at ``path``."""
    start = min((s[2] for r in reports for s in r.get("slices", ())), default=0)
    if str(path).endswith(".otf2"):
        from .self_trace_otf2 import write_otf2     # the otf2 package: only when asked for
        write_otf2(path, reports)
        return
    data = (_chrome if str(path).endswith(".json") else _perfetto)(reports, start)
    write_whole(path, data)


def track_name(rank: int, ranks: int) -> str:
    """'rank 007' of 256: names that sort as the ranks do."""
    return f"rank {rank:0{len(str(max(ranks - 1, 0)))}d}"


# --- Perfetto -----------------------------------------------------------------------------
def _varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _field(number: int, value) -> bytes:
    """A varint (int) or length-delimited (bytes, str) field."""
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    if isinstance(value, str):
        value = value.encode("utf-8", "replace")
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _annotation(name: str, value) -> bytes:
    """TrackEvent.debug_annotations (4): {name (10), uint_value (3) or double_value (5)}."""
    if isinstance(value, float):
        body = _varint(5 << 3 | 1) + struct.pack("<d", value)
    else:
        body = _field(3, int(value))
    return _field(4, _field(10, name) + body)


def _packet(*fields: bytes) -> bytes:
    body = b"".join(fields)
    return _field(1, body)          # Trace.packet


def _perfetto(reports: list[dict], start: int) -> bytes:
    out = []
    for r in reports:
        rank, uuid, seq = r["rank"], r["rank"] + 1, r["rank"] + 1
        track = _field(1, uuid) + _field(2, track_name(rank, len(reports)))
        out.append(_packet(_field(10, seq), _field(13, STATE_CLEARED), _field(60, track)))
        for t, order, name, args in records(r.get("slices", ())):
            begin = order in (BEGIN_PHASE, BEGIN_CALL)
            event = b"".join(_annotation(k, v) for k, v in (args or {}).items())
            event += _field(9, SLICE_BEGIN if begin else SLICE_END) + _field(11, uuid)
            if begin:
                event += _field(23, name)
            out.append(_packet(_field(8, t - start), _field(10, seq), _field(11, event)))
    return b"".join(out)


# --- Chrome JSON --------------------------------------------------------------------------
def _chrome(reports: list[dict], start: int) -> bytes:
    events = []
    for r in reports:
        rank = r["rank"]
        events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": rank,
                       "args": {"name": track_name(rank, len(reports))}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": rank,
                       "args": {"sort_index": rank}})
        for name, is_call, t0, t1, args in r.get("slices", ()):
            events.append({"ph": "X", "name": name, "cat": "mpi" if is_call else "phase",
                           "pid": 0, "tid": rank, "ts": (t0 - start) / 1000,
                           "dur": (t1 - t0) / 1000, **({"args": args} if args else {})})
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}).encode()
