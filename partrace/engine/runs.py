"""Sorted runs: each decoded chunk, sorted by key, kept in memory or spilled to disk.

A rank's decoded rows are a list of runs per table.  While the rank's runs
fit in its in-memory share of the budget they stay as numpy arrays; after
that each new run is written to the spill folder (one .npy per column) and
read back through memory maps, so a rank's memory does not grow with the
trace.  Reading a window later touches only the rows it needs.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ..model import Column, Table
from .order import lower_bound, sort_by_key

OBJECT_ROW_BYTES = 48   # estimate for a str/bytes cell (pointer + small object)


def row_bytes(columns: list[Column]) -> int:
    total = 0
    for c in columns:
        total += OBJECT_ROW_BYTES if c.is_object else c.numpy_dtype().itemsize
    return max(total, 1)


class Run:
    """One sorted run of one table (arrays in memory, or memory maps of spilled files)."""

    __slots__ = ("columns", "n")

    def __init__(self, columns: dict[str, np.ndarray]):
        self.columns = columns
        self.n = len(columns["time"])

    def rows(self, a: int, b: int) -> Table:
        return Table({k: np.asarray(v[a:b]) for k, v in self.columns.items()})

    def keys(self, idx: np.ndarray) -> list[tuple[int, int, int]]:
        c = self.columns
        return list(zip(np.asarray(c["time"][idx]).tolist(), np.asarray(c["location"][idx]).tolist(),
                        np.asarray(c["seq"][idx]).tolist()))

    def lower_bound(self, key) -> int:
        return lower_bound(self.columns["time"], self.columns["location"], self.columns["seq"], key)


class RunStore:
    """The sorted runs of every table on this rank, within a memory budget."""

    def __init__(self, schema: dict[str, list[Column]], memory_bytes: int,
                 spill_root: str | os.PathLike | None = None, tag: str = ""):
        self.schema = schema
        self.keep_bytes = memory_bytes // 2     # the rest is for windows, exchange, output
        self.in_memory = 0
        self.spill_root = spill_root
        self.tag = tag
        self.spill_dir: Path | None = None
        self.runs: dict[str, list[Run]] = {name: [] for name in schema}
        self.rows: dict[str, int] = {name: 0 for name in schema}
        self.spilled_bytes = 0

    def add(self, name: str, table: Table) -> None:
        if not len(table):
            return
        table = sort_by_key(table)
        size = len(table) * row_bytes(self.schema[name])
        self.rows[name] += len(table)
        if self.in_memory + size <= self.keep_bytes:
            self.in_memory += size
            self.runs[name].append(Run(dict(table.columns)))
        else:
            self.runs[name].append(self._spill(name, table))
            self.spilled_bytes += size

    def _spill(self, name: str, table: Table) -> Run:
        if self.spill_dir is None:
            self.spill_dir = Path(tempfile.mkdtemp(prefix=f"partrace-spill-{self.tag}-",
                                                   dir=self.spill_root))
        d = self.spill_dir / f"{name.replace('/', '__')}-{len(self.runs[name]):06d}"
        d.mkdir()
        cols = {}
        for col, values in table.columns.items():
            path = d / f"{col}.npy"
            if values.dtype == object:      # str/bytes cells cannot be memory-mapped
                np.save(path, values, allow_pickle=True)
                cols[col] = values          # kept: object columns live in small side tables
            else:
                np.save(path, values)
                cols[col] = np.load(path, mmap_mode="r")
        return Run(cols)

    def total_bytes(self) -> int:
        return sum(self.rows[n] * row_bytes(self.schema[n]) for n in self.schema)

    def close(self) -> None:
        self.runs = {name: [] for name in self.schema}
        if self.spill_dir is not None:
            shutil.rmtree(self.spill_dir, ignore_errors=True)
            self.spill_dir = None
