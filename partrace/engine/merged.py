"""A merged window as a table whose columns are built when read.

Merging decides an order from the key columns alone; each other column is
then gathered from the sorted runs and put in that order only when a sink
reads it.  A sink that writes column by column (HDF5) reads every column
once through :meth:`Table.column_once` and so never holds more than one
output column of the window; other sinks read columns as from any table
(each is kept once built).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..model import Table


class MergedTable(Table):
    """``n`` rows with columns ``names``; ``build(name)`` makes a column."""

    __slots__ = ("_n", "_names", "_build", "_built")

    def __init__(self, n: int, names: list[str], build: Callable[[str], np.ndarray]):
        self._n, self._names, self._build, self._built = n, list(names), build, {}

    @property
    def columns(self) -> dict[str, np.ndarray]:
        return {name: self[name] for name in self._names}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._built:
            self._built[name] = self._build(name)
        return self._built[name]

    def __contains__(self, name: str) -> bool:
        return name in self._names

    @property
    def names(self) -> list[str]:
        return list(self._names)

    def __reduce__(self):       # sent to another rank as a plain table
        return Table, (self.columns,)

    def column_once(self, name: str) -> np.ndarray:
        if name in self._built:
            return self._built[name]
        if name not in self._names:
            raise KeyError(name)
        return self._build(name)


def ordered(n: int, names: list[str], column: Callable[[str], np.ndarray],
            order: np.ndarray | None) -> MergedTable:
    """The rows ``column(name)[order]`` (``order`` None: as they are), built on read."""
    if order is None:
        return MergedTable(n, names, column)
    return MergedTable(n, names, lambda name: np.take(column(name), order, axis=0))
