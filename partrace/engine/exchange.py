"""Spans of sorted runs sent to other ranks in the narrow forms the runs hold.

A time window gives every rank the rows of each local run between two cut
keys: one span (run, first, end) per run and destination.  A span's column
goes over the wire as the run holds it (engine/narrow.py): a constant as its
value, a base plus offsets as the base and the offsets, a Words column as its
word columns, any other column as its values.  A column so costs its narrow
bytes on the wire (29-46 B a row on the suite traces, against 82-137 widened
to the schema).  The receiver rebuilds each span as a run of those forms and
merges the window from the spans as one rank does (windows._merged_spans):
every value is the one the sender holds, whatever the rank count.

First, one object alltoall tells each rank what it will get: per span its row
count and each column's form without its rows (a layout).  Then each column's
rows go in one Alltoallv of bytes, every leaf array (offsets, values) padded
to 8 bytes so that the receiver views them in place, aligned.  A rank keeps
its spans to itself: they are not sent, not copied.
"""
from __future__ import annotations

import numpy as np

from ..model import Column
from .mpi import Comm
from .narrow import Constant, Offsets, Words
from .runs import Run

ALIGN = 8       # bytes each leaf array of a span's column is padded to on the wire


def _padded(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


def layout_of(form) -> tuple:
    """A column form without its rows: what rebuilds it from its leaves' bytes."""
    if isinstance(form, Constant):
        return ("constant", form.value)
    if isinstance(form, Offsets):
        return ("offsets", form.base, form.offsets.dtype)
    if isinstance(form, Words):
        return ("words", form.dtype, form.shape[1:], form.unit, [layout_of(p) for p in form.parts])
    return ("array", form.dtype, form.shape[1:])


def leaves(form) -> list[np.ndarray]:
    """The arrays holding a form's rows, in the order ``rebuilt`` reads them."""
    if isinstance(form, Constant):
        return []
    if isinstance(form, Offsets):
        return [form.offsets]
    if isinstance(form, Words):
        return [leaf for p in form.parts for leaf in leaves(p)]
    return [form]


def wire_bytes(layout: tuple, n: int) -> int:
    """Bytes ``n`` rows of a form of ``layout`` take on the wire (leaves padded)."""
    kind = layout[0]
    if kind == "constant":
        return 0
    if kind == "offsets":
        return _padded(n * layout[2].itemsize)
    if kind == "words":
        return sum(wire_bytes(p, n) for p in layout[4])
    return _padded(n * layout[1].itemsize * int(np.prod(layout[2], dtype=np.int64)))


def rebuilt(layout: tuple, n: int, buf: np.ndarray, at: int):
    """The form of ``n`` rows of ``layout`` whose leaves start at buf[at] (views of buf),
    and the offset after them."""
    kind = layout[0]
    if kind == "constant":
        return Constant(layout[1], n), at
    if kind == "offsets":
        dtype = layout[2]
        return Offsets(layout[1], buf[at:at + n * dtype.itemsize].view(dtype)), \
            at + _padded(n * dtype.itemsize)
    if kind == "words":
        _, dtype, tail, unit, parts = layout
        forms = []
        for part in parts:
            form, at = rebuilt(part, n, buf, at)
            forms.append(form)
        return Words(forms, dtype, (n,) + tuple(tail), unit), at
    _, dtype, tail = layout
    size = n * dtype.itemsize * int(np.prod(tail, dtype=np.int64))
    return buf[at:at + size].view(dtype).reshape((n,) + tuple(tail)), at + _padded(size)


def pack(forms_to: list[list]) -> tuple[np.ndarray, np.ndarray]:
    """The leaves of ``forms_to[r]`` (column forms for rank r) end to end, each padded to
    ALIGN bytes, as one byte buffer; and the bytes for each rank."""
    counts = np.array([sum(_padded(leaf.nbytes) for f in forms for leaf in leaves(f))
                       for forms in forms_to], np.int64)
    buf = np.empty(int(counts.sum()), np.uint8)
    at = 0
    for forms in forms_to:
        for form in forms:
            for leaf in leaves(form):
                raw = np.ascontiguousarray(leaf).reshape(-1).view(np.uint8)
                buf[at:at + raw.size] = raw
                at += _padded(raw.size)
    return buf, counts


def _column_bytes(comm: Comm, name: str, spans_to: list[list]) -> np.ndarray:
    """Column ``name`` of the spans to every other rank, sent as their leaves' bytes;
    returns the bytes received (senders in rank order, spans in their order)."""
    buf, counts = pack([[] if r == comm.rank else [run.piece(name, a, b) for run, a, b in spans]
                        for r, spans in enumerate(spans_to)])
    return comm.alltoallv(buf, counts)


def _column_objects(comm: Comm, name: str, spans_to: list[list]) -> list[list[np.ndarray]]:
    """A str/bytes column of the spans to every rank, pickled (small side tables)."""
    return comm.alltoall([[] if r == comm.rank else [run.piece(name, a, b) for run, a, b in spans]
                          for r, spans in enumerate(spans_to)])


def exchange_spans(comm: Comm, spans_to: list[list], schema: list[Column]) -> list:
    """Send ``spans_to[r]`` (spans (run, first, end)) to rank r; returns the spans every
    rank sent here, senders in rank order, this rank's own spans as they are."""
    me = comm.rank
    comm.wait_for_all()     # the ranks that finished their local work first wait asleep
    # what each rank gets: per span its rows and each column's layout (a zero-row piece
    # gives it without reading a spilled run's rows)
    told = comm.alltoall([None if r == me else
                          [(b - a, [layout_of(run.piece(c.name, a, a)) for c in schema])
                           for run, a, b in spans] for r, spans in enumerate(spans_to)])
    forms = [[{} for _ in (spans or [])] for spans in told]     # [sender][span] -> column forms
    for j, col in enumerate(schema):
        if col.is_object:
            got = _column_objects(comm, col.name, spans_to)
            for s, spans in enumerate(told):
                for k in range(len(spans or [])):
                    forms[s][k][col.name] = got[s][k]
            continue
        buf, at = _column_bytes(comm, col.name, spans_to), 0
        for s, spans in enumerate(told):
            for k, (n, layouts) in enumerate(spans or []):
                forms[s][k][col.name], at = rebuilt(layouts[j], n, buf, at)
    out = []
    for s, spans in enumerate(told):
        if s == me:
            out.extend(spans_to[me])
        else:
            out.extend((Run.of_forms(f, n), 0, n) for f, (n, _) in zip(forms[s], spans))
    return out
