"""A window's column put in key order from its spans' narrow forms.

Merging a window decides, for every row of the key order, the span it comes
from (``span_of``: one byte a row for up to 256 spans).  Rows of one span keep
their order (a span is a sorted run and the merge is stable), so a compiled
gather walks the output once, taking each row from the next unread row of
its span: no permutation of 8 bytes a row is read per column.

The spans' rows are first laid end to end in a buffer at the narrowest form
they share: the offsets alone (u1/u2/u4, each span's base added as the row is
written) when every span holds the column as a constant or a base plus
offsets of the output's type; else the values at the output's width.  Writing
each row once, sequentially, costs less than scattering them to their places
span by span (each span's scatter would touch every cache line of the output).

Values are copied as unsigned integers of their width (floats bit for bit, a
sub-array row as a few words), so one kernel serves every dtype.
"""
from __future__ import annotations

import numpy as np

from ..kernels.jit import njit
from ..model import row_words as _words
from .narrow import Constant, Offsets, Words, as_words, put


def span_of(spans, order: np.ndarray) -> np.ndarray:
    """The span each row of ``order`` (a permutation of the spans' concatenation) comes from."""
    return run_of([b - a for _, a, b in spans], order)


def run_of(lengths, order: np.ndarray) -> np.ndarray:
    """The run each row of ``order`` comes from, of runs of ``lengths`` rows end to end."""
    kind = np.uint8 if len(lengths) <= 1 << 8 else np.uint16 if len(lengths) <= 1 << 16 else np.int64
    return np.take(np.repeat(np.arange(len(lengths), dtype=kind), lengths), order)


def merged_column(values: np.ndarray, source: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """A column of sorted runs end to end (run r: rows starts[r]..starts[r+1]) in the
    order whose row i is the next unread row of run source[i] (a stable merge's)."""
    values = np.ascontiguousarray(values)
    out = np.empty_like(values)
    if out.dtype == object:     # str/bytes cells: each row's place, numpy's own scatter
        out[_placed(source)] = values
        return out
    words = _words(values)
    (_gather if words.ndim == 1 else _gather_rows)(_words(out), source, starts, words)
    return out


def ordered_column(spans, name: str, dtype: np.dtype, source: np.ndarray,
                   rows: np.ndarray | None = None) -> np.ndarray:
    """Column ``name`` of the spans' rows in an order whose row i comes from span
    source[i], as ``dtype`` (a sub-array dtype gives (n, k) arrays).  Row i is the
    next unread row of its span (``rows`` None: every span's rows keep their order)
    or row rows[i] of the spans' concatenation."""
    out = np.empty(len(source), dtype)
    _put_ordered(out, spans, lambda run, a, b: run.piece(name, a, b), source, rows)
    return out


def _put_ordered(out: np.ndarray, spans, piece, source, rows) -> None:
    """out (a column, or one word of a sub-array column) from the spans' ``piece(run, a, b)``."""
    starts = np.cumsum([0] + [b - a for _, a, b in spans], dtype=np.int64)
    forms = [piece(run, a, a) for run, a, _ in spans]      # no rows: the forms alone
    if out.ndim == 2 and forms and all(isinstance(f, Words) and f.unit == forms[0].unit
                                       for f in forms):
        words = as_words(out, forms[0].unit)        # each word column on its own
        for j in range(words.shape[1]):
            _put_ordered(words[:, j], spans, lambda run, a, b, j=j: piece(run, a, b).parts[j],
                         source, rows)
    elif out.dtype == object or (rows is not None and not out.ndim == 1):
        values = _laid_out(spans, piece, out, starts)
        if rows is None:    # str/bytes cells: each row's place, numpy's own scatter
            out[_placed(source)] = values
        else:
            np.take(values, rows, axis=0, out=out)
    elif out.ndim == 1 and all(_offsets_of(f, out.dtype) for f in forms):
        _from_offsets(spans, piece, out, source, rows, starts, forms)
    elif rows is not None:
        _take(_words(out), rows, _words(_laid_out(spans, piece, out, starts)))
    else:
        values = _words(_laid_out(spans, piece, out, starts))
        (_gather if values.ndim == 1 else _gather_rows)(_words(out), source, starts, values)


def _offsets_of(form, dtype: np.dtype) -> bool:
    """The form is a constant, or a base of ``dtype`` plus offsets: its rows are that
    base plus narrow offsets (a constant's offsets are zeros)."""
    return isinstance(form, Constant) or (isinstance(form, Offsets) and form.base.dtype == dtype)


def _from_offsets(spans, piece, out: np.ndarray, source, rows, starts, forms) -> None:
    base = np.empty(len(forms), out.dtype)
    for k, f in enumerate(forms):       # cast as put would
        base[k] = f.value if isinstance(f, Constant) else f.base
    widths = [f.offsets.dtype.itemsize for f in forms if isinstance(f, Offsets)]
    if not widths:      # constant in every span: a lookup of each row's span
        _lookup(_words(out), source, _words(base))
        return
    offsets = np.empty(starts[-1], f"u{max(widths)}")
    for (run, a, b), at, form in zip(spans, starts.tolist(), forms):
        if isinstance(form, Constant):
            offsets[at:at + b - a] = 0
        else:
            offsets[at:at + b - a] = piece(run, a, b).offsets
    # as unsigned words: base + offset keeps the same bits in either signedness, so one
    # kernel per width serves both (half the compiles: `partrace warm` makes them all)
    if rows is None:
        _gather_offsets(_words(out), source, starts, _words(base), offsets)
    else:
        _take_offsets(_words(out), source, rows, _words(base), offsets)


def _laid_out(spans, piece, out: np.ndarray, starts) -> np.ndarray:
    """The spans' rows end to end, as out's dtype (each span widened straight in)."""
    values = np.empty((starts[-1],) + out.shape[1:], out.dtype)
    for (run, a, b), at in zip(spans, starts.tolist()):
        put(piece(run, a, b), 0, b - a, values[at:at + b - a])
    return values


# numpy twins of the kernels below, which small mode runs (kernels/jit.py), and the
# text columns' gather: a span's rows are those whose source is the span, in order, so a
# stable sort of ``source`` places them (the rows of span s are starts[s]..starts[s+1],
# one per such row)
def _placed(source):
    return np.argsort(source, kind="stable")


def _gather_numpy(out, source, starts, values):
    out[_placed(source)] = values[:len(out)]


def _gather_offsets_numpy(out, source, starts, base, offsets):
    at = _placed(source)
    out[at] = base[source[at]] + offsets[:len(out)]


def _lookup_numpy(out, source, values):
    out[:] = values[source]


def _take_numpy(out, rows, values):
    out[:] = values[rows]


def _take_offsets_numpy(out, source, rows, base, offsets):
    out[:] = base[source] + offsets[rows]


@njit(cache=True, twin=_gather_numpy)
def _gather(out, source, starts, values):
    next_row = starts[:-1].copy()
    for i in range(len(out)):
        s = source[i]
        out[i] = values[next_row[s]]
        next_row[s] += 1


@njit(cache=True, twin=_gather_numpy)
def _gather_rows(out, source, starts, values):
    next_row = starts[:-1].copy()
    for i in range(len(out)):
        s = source[i]
        r = next_row[s]
        for j in range(out.shape[1]):
            out[i, j] = values[r, j]
        next_row[s] = r + 1


@njit(cache=True, twin=_gather_offsets_numpy)
def _gather_offsets(out, source, starts, base, offsets):
    # base + offset is a value of the column, so it fits base's type (out's)
    next_row = starts[:-1].copy()
    for i in range(len(out)):
        s = source[i]
        out[i] = base[s] + offsets[next_row[s]]
        next_row[s] += 1


@njit(cache=True, twin=_lookup_numpy)
def _lookup(out, source, values):
    for i in range(len(out)):
        out[i] = values[source[i]]


@njit(cache=True, twin=_take_numpy)
def _take(out, rows, values):
    # np.take's work, on words: one kernel for every width
    for i in range(len(out)):
        out[i] = values[rows[i]]


@njit(cache=True, twin=_take_offsets_numpy)
def _take_offsets(out, source, rows, base, offsets):
    for i in range(len(out)):
        out[i] = base[source[i]] + offsets[rows[i]]
