"""Merge a trace in windows and keep every rank's rows of every window: the engine's
exchange seen from outside, without a sink's formatting in between.

Run under mpiexec (tests/engine/test_exchange.py):

    python -m tests.support.collect_windows TRACE OUT_FOLDER MEMORY_BYTES [MODE]

saves rank r's windows to OUT_FOLDER/rank<r>.npz ("<window>/<table>/<column>").  MODE
``time`` (the default) or ``destination``: every row to rank location % ranks, so that
runs of one location travel whole and runs of many are cut row by row.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from partrace.engine.mpi import Comm, world
from partrace.engine.pipeline import run
from partrace.engine.sink import Sink


class CollectWindows(Sink):
    """Keeps each window's rows of every table and column, as the engine gave them."""

    mode = "time"
    windows = True
    columnwise = True

    def prepare(self, comm: Comm, defs, schema) -> None:
        self.schema, self.got = schema, []

    def write(self, comm: Comm, tables) -> None:
        self.got.append({name: {c.name: t.column_once(c.name) for c in self.schema[name]}
                         for name, t in tables.items()})

    def commit(self, comm: Comm) -> None:
        pass

    def discard(self, comm: Comm) -> None:
        pass


class CollectByLocation(CollectWindows):
    """Keeps the rows of the locations ``location % ranks == rank``, window by window."""

    mode = "destination"

    def destinations(self, comm: Comm, name: str, rows) -> np.ndarray:
        return np.asarray(rows["location"], np.int64) % comm.size


def collect(comm: Comm, trace, memory: int, spill_dir, mode: str = "time"
            ) -> tuple[list[dict], object]:
    """Every window's rows of this rank ({table: {column: array}}) and the run's stats."""
    sink = CollectByLocation() if mode == "destination" else CollectWindows()
    stats = run(comm, trace, sink, memory=memory, spill_dir=spill_dir)
    return sink.got, stats


def main(trace: str, out: str, memory: str, mode: str = "time") -> None:
    comm = world()
    folder = Path(out)
    windows, stats = collect(comm, trace, int(memory), folder, mode)
    arrays = {f"{w}/{name}/{col}": values for w, tables in enumerate(windows)
              for name, cols in tables.items() for col, values in cols.items()}
    arrays["windows"] = np.array(stats.windows)
    arrays["spilled"] = np.array(stats.spilled_bytes)
    np.savez(folder / f"rank{comm.rank}.npz", **arrays)


if __name__ == "__main__":
    main(*sys.argv[1:])
