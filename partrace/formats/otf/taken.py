"""Rows of a table taken lazily: the OTF writer reads a few of a table's columns, so a
column is gathered when first read, and rows taken from rows taken are gathered once,
straight from the source (the OTF sink's rows of a stream compose their own the same way)."""
from __future__ import annotations

import numpy as np

from ...model import take


def take_rows(tab, sel):
    """Rows `sel` (index array or slice) of `tab`, each column gathered when first read.  A table
    that composes its own rows (take_rows: _Taken, the OTF sink's rows of a stream) does so here:
    rows picked from rows picked are gathered once, straight from the source into this order."""
    return tab.take_rows(sel) if hasattr(tab, "take_rows") else _Taken(tab, sel)


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

    def take_rows(self, sel) -> "_Taken":
        return _Taken(self.tab, compose_rows(self.order, sel, self.n), self, sel)
