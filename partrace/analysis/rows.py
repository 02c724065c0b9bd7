"""Result rows kept as columns.

A communication matrix has up to locations squared sender/receiver pairs (380,000
on the suite's ROSS trace): building a dict per pair cost as much as the fold
that found them.  ``Rows`` keeps the numpy columns the fold produced and makes a
row's dict only when someone asks for that row, so ``communication()`` costs
nothing per pair, DataFrames are built from the columns, and code that iterates
dict rows (CSV, JSON, tests, scripts) still can.
"""
from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import numpy as np

BATCH = 1 << 14     # rows turned into Python values at a time while iterating


class Rows(Sequence):
    """A read-only sequence of dict rows over equal-length columns (numpy arrays)."""

    def __init__(self, columns: dict[str, np.ndarray]):
        self.columns = {k: np.asarray(v) for k, v in columns.items()}
        sizes = {len(v) for v in self.columns.values()}
        if len(sizes) > 1:
            raise ValueError(f"columns of different lengths: {sorted(sizes)}")
        self._n = sizes.pop() if sizes else 0

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Rows({k: v[i] for k, v in self.columns.items()})
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return {k: v[i].item() if hasattr(v[i], "item") else v[i] for k, v in self.columns.items()}

    def __iter__(self):
        names = list(self.columns)
        for a in range(0, self._n, BATCH):
            cols = [self.columns[k][a:a + BATCH].tolist() for k in names]
            for values in zip(*cols):
                yield dict(zip(names, values))

    def to_csv(self, columns: list[str]) -> str:
        """The rows as CSV text, header first, exactly as ``csv.DictWriter`` writes the dict
        rows, but fed tuples of the columns' Python values: no dict and no Python-level
        step per row (the csv writer and ``zip`` run in C)."""
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(columns)
        for a in range(0, self._n, BATCH):
            w.writerows(zip(*(self.columns[c][a:a + BATCH].tolist() for c in columns)))
        return out.getvalue().rstrip("\n")

    def to_records(self) -> list[dict]:
        return list(self)

    def __eq__(self, other) -> bool:
        if isinstance(other, Rows):
            other = list(other)
        return isinstance(other, list) and list(self) == other

    __hash__ = None

    def __repr__(self) -> str:
        return f"Rows({self._n} rows: {', '.join(self.columns)})"

