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

One object alltoall tells each rank what it will get: per span its row count
and each column's form without its rows (a layout).  Then the rows of every
column go in one Alltoallv of bytes (one call a window for all its tables: a call a
column, or a table, made the ranks meet once for each), every leaf array (offsets, values)
padded to 8 bytes so that the receiver views them in place, aligned.  A rank
keeps its spans to itself: they are not sent, not copied.
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
        return ("constant", _plain(form.value))
    if isinstance(form, Offsets):
        return ("offsets", _plain(form.base), form.offsets.dtype)
    if isinstance(form, Words):
        return ("words", form.dtype, form.shape[1:], form.unit, [layout_of(p) for p in form.parts])
    return ("array", form.dtype, form.shape[1:])


def _plain(value) -> tuple:
    """A numpy scalar or small array (a constant, a base) as its type, shape and bytes:
    what pickles in a fraction of the time numpy's own reduce takes, and a window's
    layouts hold one or two for every span and column (a rank's runs times the ranks)."""
    return (value.dtype, value.shape, value.tobytes(), isinstance(value, np.ndarray))


def _numpy(plain: tuple):
    """The scalar or array ``_plain`` gave."""
    dtype, shape, raw, array = plain
    value = np.frombuffer(raw, dtype).reshape(shape)
    return value.copy() if array else value[()]


def leaves(form) -> list[np.ndarray]:
    """The arrays holding a form's rows, in the order ``rebuilt`` reads them."""
    if isinstance(form, Constant):
        return []
    if isinstance(form, Offsets):
        return [form.offsets]
    if isinstance(form, Words):
        return [leaf for p in form.parts for leaf in leaves(p)]
    return [form]


def rebuilt(layout: tuple, n: int, buf: np.ndarray, at: int):
    """The form of ``n`` rows of ``layout`` whose leaves start at buf[at] (views of buf),
    and the offset after them."""
    kind = layout[0]
    if kind == "constant":
        return Constant(_numpy(layout[1]), n), at
    if kind == "offsets":
        dtype = layout[2]
        return Offsets(_numpy(layout[1]), buf[at:at + n * dtype.itemsize].view(dtype)), \
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


def exchange_spans(comm: Comm, spans_to: list[list], schema: list[Column]) -> list:
    """Send ``spans_to[r]`` (spans (run, first, end)) to rank r; returns the spans every
    rank sent here, senders in rank order, this rank's own spans as they are."""
    return exchange_tables(comm, {"": spans_to}, {"": schema})[""]


def exchange_tables(comm: Comm, spans_to: dict[str, list[list]],
                    schemas: dict[str, list[Column]]) -> dict[str, list]:
    """``exchange_spans`` of several tables at once (``spans_to`` and ``schemas`` per
    table): the ranks meet once for them all (one object alltoall, one Alltoallv), not
    once a table, so a rank's local work between tables is not waited for table by
    table; per table the spans every rank sent here, senders in rank order."""
    me = comm.rank
    numeric = {t: [c.name for c in schemas[t] if not c.is_object] for t in spans_to}
    objects = {t: [c.name for c in schemas[t] if c.is_object] for t in spans_to}
    # every span's columns to every other rank in their forms (a spilled run's rows read
    # here), packed before the ranks meet: what one rank sends is ready when all are
    sent = {t: [[] if r == me else [[run.piece(name, a, b) for name in numeric[t]]
                                    for run, a, b in spans]
                for r, spans in enumerate(to)] for t, to in spans_to.items()}
    buf, counts = pack([[f for t in spans_to for forms in sent[t][r] for f in forms]
                        for r in range(comm.size)])
    # what each rank gets besides those bytes: per table and span its rows, each column's
    # layout and its str/bytes columns (small side tables: pickled)
    told = [None if r == me else
            {t: [(b - a, [layout_of(f) for f in forms], [run.piece(name, a, b)
                                                          for name in objects[t]])
                 for (run, a, b), forms in zip(spans_to[t][r], sent[t][r])]
             for t in spans_to} for r in range(comm.size)]
    del sent
    comm.wait_for_all()     # the ranks that finished their local work first wait asleep
    told = comm.alltoall(told)
    buf, at = comm.alltoallv(buf, counts), 0
    out: dict[str, list] = {t: [] for t in spans_to}
    for s, tables in enumerate(told):
        if s == me:
            for t in spans_to:
                out[t].extend(spans_to[t][me])
            continue
        for t in spans_to:      # in the order they were packed: table, then span
            for n, layouts, cells in tables[t]:
                forms = {}
                for name, layout in zip(numeric[t], layouts):
                    forms[name], at = rebuilt(layout, n, buf, at)
                forms.update(zip(objects[t], cells))
                out[t].append((Run.of_forms({c.name: forms[c.name] for c in schemas[t]}, n),
                               0, n))
    return out
