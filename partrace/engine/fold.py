"""Reductions over decoded rows, with no global order: each rank folds the chunks of
its own units into an accumulator, and the accumulators meet on rank 0.

For answers that do not depend on the order of rows (message matrices, counts,
histograms) this runs at decode speed: nothing is sorted, spilled or exchanged
but the accumulators, whose size does not grow with the trace.  Answers that
need each location's rows in order but not the global order (a profile's
enter/leave stacks) fold each unit and keep what it leaves open at its edges
(``end_unit``), to be joined in unit order at the end.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from ..model import Definitions, Table
from .found import complete_definitions
from .mpi import Comm
from .pipeline import open_on_all_ranks, read_plan
from .progress import Progress


def fold(comm: Comm, path: str | os.PathLike, *, tables: set[str] | None,
         start: Callable[[Definitions], Any],
         step: Callable[[Any, dict[str, Table]], Any],
         combine: Callable[[Any, Any], Any],
         end_unit: Callable[[Any, int], Any] | None = None,
         format: str | None = None, progress: Progress | None = None,
         reader=None, reader_options: dict | None = None,
         reduce: bool = True) -> tuple[Definitions, Any, list]:
    """(definitions, the combined accumulator on rank 0 and None elsewhere, the units).
    ``reduce=False``: each rank's own accumulator, on every rank (for folds that route
    their records between ranks themselves, as message matching does).

    ``start(defs)`` makes an empty accumulator, ``step(acc, chunk)`` adds one
    decoded chunk (only the ``tables`` asked for; None: all) and returns the accumulator,
    ``combine(a, b)`` joins two (associative and commutative: any grouping of
    ranks gives the same result).  ``end_unit(acc, i)`` (optional) is called after the
    rows of ``units[i]`` (sorted by key; of units the reader joined, the first), for folds
    that keep what each unit leaves open at its edges and join the units in key order at
    the end (a profile).
    """
    reader = reader or open_on_all_ranks(comm, path, format, reader_options)
    units, mine, defs = read_plan(comm, reader)
    progress = progress or Progress(comm, enabled=False)
    index = {u.key: i for i, u in enumerate(units)}     # a joined unit keeps its first's key

    def fold_share(defs: Definitions):
        progress.start("decode", sum(u.size for u in units))
        acc = None
        with comm.guard():
            acc = start(defs)
            for unit in mine:
                for chunk in reader.decode(unit, defs):
                    comm.poll()     # a stop signal here or on another rank ends the loop
                    acc = step(acc, chunk if tables is None else
                               {n: t for n, t in chunk.items() if n in tables})
                if end_unit is not None:
                    acc = end_unit(acc, index[unit.key])
                progress.advance(unit.size)
        comm.check()
        return acc

    acc = fold_share(defs)
    complete = complete_definitions(comm, reader, defs)
    if complete is not defs:
        # the decode met ids the definitions lack (engine/found.py): the accumulators index
        # the definitions they started with, so the units are folded again with them all
        # (only a trace with such references pays the second pass)
        defs = complete
        acc = fold_share(defs)
    progress.done()
    return defs, comm.reduce(acc, combine) if reduce else acc, units
