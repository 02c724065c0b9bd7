"""A self-trace's slices as begin and end records in time order: what every self-trace
writer (self_trace.py's Perfetto and Chrome JSON, self_trace_otf2.py's OTF2) walks."""
from __future__ import annotations

# order of the records at one instant: what ends before what begins, outer around inner
END_CALL, END_PHASE, BEGIN_PHASE, BEGIN_CALL = range(4)


def records(slices) -> list[tuple[int, int, str, dict | None]]:
    """(time, order, name, arguments) of every slice's begin and end, in time order."""
    out = []
    for name, is_call, t0, t1, args in slices:
        out.append((t0, BEGIN_CALL if is_call else BEGIN_PHASE, name, args))
        out.append((t1, END_CALL if is_call else END_PHASE, name, None))
    out.sort(key=lambda r: (r[0], r[1]))
    return out
