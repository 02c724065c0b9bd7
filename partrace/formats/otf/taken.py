"""Rows of a table taken lazily: the OTF writer reads a few of a table's columns, so a
column is gathered when first read, and rows taken from rows taken are gathered once,
straight from the source (the OTF sink's rows of a stream compose their own the same way)."""
from __future__ import annotations

import numpy as np

from ...kernels.jit import njit
from ...model import take


def take_rows(tab, sel):
    """Rows `sel` (index array or slice) of `tab`, each column gathered when first read.  A table
    that composes its own rows (take_rows: _Taken, the OTF sink's rows of a stream) does so here:
    rows picked from rows picked are gathered once, straight from the source into this order."""
    return tab.take_rows(sel) if hasattr(tab, "take_rows") else _Taken(tab, sel)


def column_into(tab, name: str, out: np.ndarray) -> None:
    """Column `name` of `tab` into `out` (cast as astype casts): a table of rows taken lazily
    gathers it straight into `out`, one pass instead of a take into a new array (fresh
    pages, each faulted in) and a cast copy."""
    if hasattr(tab, "column_into"):
        tab.column_into(name, out)
    else:
        out[:] = tab[name]


def take_into(out: np.ndarray, values: np.ndarray, rows) -> None:
    """``out[:] = values[rows]`` (rows: index array or slice), integers in one pass."""
    if (isinstance(rows, slice) or values.ndim != 1 or values.dtype.kind not in "iu"
            or out.dtype.kind not in "iu"):
        out[:] = take(values, rows)
        return
    _take_into(out, np.ascontiguousarray(values), np.ascontiguousarray(rows, np.int64))


@njit(cache=True)
def _take_into(out, values, rows):
    # an integer stored into out's integer type: numba casts as numpy's astype does
    # (wider: sign- or zero-extended by the source's sign; same width: the same bits)
    for i in range(len(out)):
        out[i] = values[rows[i]]


def compose_rows(order, sel, n: int):
    """The source rows of rows `sel` of the rows `order` (index arrays or slices; n: len of
    the rows `order`): a slice where both are (views, no index array)."""
    if isinstance(order, slice):
        if isinstance(sel, slice):
            a, b, step = sel.indices(n)
            if step == 1:
                return slice(order.start + a, order.start + max(a, b))
            sel = np.arange(a, b, step)
        return np.asarray(sel, np.int64) + order.start
    return order[sel]


class _Taken:
    """Rows `order` (index array or slice) of a table, each column taken when first read: the
    writer reads a few of an OTF table's columns (Table.take would copy all, and build every
    column of a lazily built window).  A column already read here is what rows taken from
    these (take_rows) are taken from."""

    def __init__(self, tab, order, parent: "_Taken | None" = None, sel=None):
        if isinstance(order, slice):        # as compose_rows wants them: start..stop, step 1
            a, b, step = order.indices(len(tab))
            order = slice(a, max(a, b)) if step == 1 else np.arange(a, b, step)
        self.tab, self.order, self.cols = tab, order, {}
        self.n = order.stop - order.start if isinstance(order, slice) else len(order)
        self._parent, self._sel = parent, sel

    def __len__(self) -> int:
        return self.n

    def __contains__(self, name: str) -> bool:
        return name in self.tab

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.cols:
            self.cols[name] = self.column_once(name)
        return self.cols[name]

    def column_once(self, name: str) -> np.ndarray:
        if name in self.cols:
            return self.cols[name]
        if self._parent is not None and name in self._parent.cols:
            return take(self._parent.cols[name], self._sel)
        return take(self.tab[name], self.order)

    def column_into(self, name: str, out: np.ndarray) -> None:
        """column_once(name) into `out`, gathered straight into it (see column_into)."""
        if name in self.cols:
            out[:] = self.cols[name]
        elif self._parent is not None and name in self._parent.cols:
            take_into(out, self._parent.cols[name], self._sel)
        else:
            take_into(out, self.tab[name], self.order)

    def take_rows(self, sel) -> "_Taken":
        return _Taken(self.tab, compose_rows(self.order, sel, self.n), self, sel)
