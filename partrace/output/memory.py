"""A sink that keeps the merged tables in memory (Python API, tests)."""
from __future__ import annotations

from ..engine.mpi import Comm
from ..engine.sink import Sink
from ..model import Definitions, Schema, Table


class MemorySink(Sink):
    mode = "time"
    windows = True      # write() appends window after window

    def __init__(self):
        self.defs: Definitions | None = None
        self.schema: Schema = {}
        self.tables: dict[str, Table] = {}

    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        self.defs, self.schema = defs, schema


    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        """Append one window (rank 0 keeps everything: for small traces)."""
        parts = comm.gather(tables) if comm.parallel else [tables]
        if comm.rank == 0:
            self.tables = {n: Table.concat([self.tables.get(n, Table({}))] + [g[n] for g in parts],
                                           self.schema[n]) for n in self.schema}

    def commit(self, comm: Comm) -> None:
        pass

    def discard(self, comm: Comm) -> None:
        self.tables = {}
