"""One run: open -> plan -> decode -> exchange -> merge -> sink.

Every step that can fail locally runs under ``comm.guard()`` and is followed
by ``comm.check()``, so a failure on any rank stops all ranks at the same
point; the sink then discards what it wrote and the error reaches the caller
as :class:`~partrace.engine.mpi.RankFailed` on every rank.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..model import Definitions, Schema, Table
from .mpi import Comm, RankFailed
from .order import by_destination, global_time_order
from .plan import assign
from .progress import Progress


class Sink(Protocol):
    """Where merged rows go.  ``mode`` says how rows are distributed to ranks:

    ``prepare``, ``write``, ``commit`` and ``discard`` are called on every rank
    and may use collectives; they guard their own local work (``comm.guard``
    then ``comm.check``).  ``destinations`` is local only.

    * ``"time"``: rank r receives the r-th slice of the global time order;
    * ``"destination"``: rows go to the rank :meth:`destinations` names.
    """

    mode: str

    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None: ...
    def destinations(self, comm: Comm, name: str, table: Table) -> np.ndarray: ...
    def write(self, comm: Comm, tables: dict[str, Table]) -> None: ...
    def commit(self, comm: Comm) -> None: ...
    def discard(self, comm: Comm) -> None: ...


@dataclass
class RunStats:
    """What a run did, for reports and benchmarks (rank-local unless noted)."""

    units: int = 0
    bytes_read: int = 0
    rows_decoded: dict[str, int] = field(default_factory=dict)
    rows_written: dict[str, int] = field(default_factory=dict)


def open_on_all_ranks(comm: Comm, path: str | os.PathLike, format: str | None):
    """Rank 0 detects the format; every rank opens the trace with it (cheap)."""
    from ..formats import detect, get
    name = None
    with comm.guard():
        if comm.rank == 0:
            name = format or detect(path)
    comm.check()
    name = comm.bcast(name)
    reader = None
    with comm.guard():
        reader = get(name).open(path)
    comm.check()
    return reader


def read_plan(comm: Comm, reader):
    """Units and definitions, read once on rank 0 and broadcast."""
    units = defs = None
    with comm.guard():
        if comm.rank == 0:
            units = reader.units()
            defs = reader.read_definitions()
    comm.check()
    return comm.bcast((units, defs))


def decode_share(comm: Comm, reader, units, defs: Definitions, schema: Schema,
                 progress: Progress, stats: RunStats) -> dict[str, Table]:
    """Decode this rank's units into one table per schema table (unsorted)."""
    mine = assign(units, comm.size)[comm.rank]
    parts: dict[str, list[Table]] = {name: [] for name in schema}
    with comm.guard():
        for unit in mine:
            for chunk in reader.decode(unit, defs):
                for name, table in chunk.items():
                    parts[name].append(table)
            stats.units += 1
            stats.bytes_read += unit.size
            progress.advance(unit.size)
    comm.check()
    tables = {name: Table.concat(parts[name], schema[name]) for name in schema}
    stats.rows_decoded = {name: len(t) for name, t in tables.items()}
    return tables


def run(comm: Comm, path: str | os.PathLike, sink: Sink, format: str | None = None,
        progress: Progress | None = None) -> RunStats:
    """Decode the trace at ``path`` on all ranks, merge, and write through ``sink``."""
    stats = RunStats()
    reader = open_on_all_ranks(comm, path, format)
    units, defs = read_plan(comm, reader)
    schema = reader.schema(defs)
    progress = progress or Progress(comm, enabled=False)
    progress.start("decode", sum(u.size for u in units))
    try:
        sink.prepare(comm, defs, schema)
        tables = decode_share(comm, reader, units, defs, schema, progress, stats)
        progress.phase("merge")
        merged = {}
        for name, table in tables.items():
            if sink.mode == "time":
                merged[name] = global_time_order(comm, table, schema[name])
            else:
                dest = None
                with comm.guard():
                    dest = sink.destinations(comm, name, table)
                comm.check()
                merged[name] = by_destination(comm, table, dest, schema[name])
            tables[name] = None   # let the unsorted copy go
        progress.phase("write")
        sink.write(comm, merged)
        stats.rows_written = {name: len(t) for name, t in merged.items()}
        sink.commit(comm)
    except RankFailed:
        sink.discard(comm)
        raise
    finally:
        progress.done()
    return stats
