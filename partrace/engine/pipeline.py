"""One run: open -> plan -> decode -> exchange -> merge -> sink.

Every step that can fail locally runs under ``comm.guard()`` and is followed
by ``comm.check()``, so a failure on any rank stops all ranks at the same
point; the sink then discards what it wrote and the error reaches the caller
as :class:`~partrace.engine.mpi.RankFailed` on every rank.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..kernels import collector
from ..kernels import jit
from ..formats.base import TraceReader
from ..model import Definitions, Schema, Table
from . import accounts, inputs
from .found import complete_definitions
from .leftovers import owner_token, run_name
from .mpi import Comm, RankFailed
from .plan import share_of
from .progress import Progress
from .sink import Sink

if TYPE_CHECKING:
    from .runs import RunStore

DEFAULT_MEMORY = 2 << 30      # bytes per rank
# Share of the budget for decoded rows kept in memory (the rest spills).  A sink
# that reads each merged column once (``columnwise``) holds only the window's
# order and one column besides them, so it leaves more of the budget to rows;
# then the process's measured resident memory must stay within that share too.
KEEP = 0.4
COLUMNWISE_KEEP = 0.7


@dataclass
class RunStats:
    """What a run did, for reports and benchmarks (rank-local unless noted)."""

    units: int = 0
    bytes_read: int = 0         # of the units decoded (a reader's measure: HDF5 rows in bytes)
    source_bytes: int = 0       # rank 0: the bytes of the input's files, as ``info`` counts them
    source_files: int = 0       # rank 0: how many files, ditto
    windows: int = 1
    spilled_bytes: int = 0
    rows_decoded: dict[str, int] = field(default_factory=dict)
    rows_written: dict[str, int] = field(default_factory=dict)


def open_on_all_ranks(comm: Comm, path: str | os.PathLike, format: str | None,
                      options: dict | None = None):
    """Rank 0 detects the format; every rank opens the trace with it (cheap)."""
    from ..formats import canonical, detect, get
    name = None
    with comm.guard():
        if comm.rank == 0:
            name = canonical(format) if format else detect(path)
    comm.check()
    name = comm.bcast(name)
    reader = None
    with comm.guard():
        reader = get(name).open(path, **(options or {}))
    comm.check()
    return reader


def read_plan(comm: Comm, reader, progress: Progress | None = None):
    """Units (listed on rank 0, or in parts on every rank), this rank's share of them
    (as the reader joins them: :meth:`~TraceReader.joined`), and the definitions.

    A reader with :meth:`~TraceReader.list_part` lists the units in parts, one per
    rank at once, which meet on every rank (an allgather).  A surveyed reader's units
    are surveyed by the ranks that own them, so no rank reads every file; the surveys
    meet on rank 0 (a reduction), and an ordered reader learns the survey of all
    units before its share (a scan).
    """
    units = defs = survey = part = None
    in_parts = type(reader).list_part is not TraceReader.list_part
    with comm.guard():
        if in_parts:
            part = reader.list_part(comm.rank, comm.size)
        elif comm.rank == 0:
            units = reader.units()
    comm.check()
    if in_parts:
        parts = comm.allgather(part)
        with comm.guard():
            units = reader.units_from(parts)
        comm.check()
    else:
        units = comm.bcast(units)
    jit.confirm(sum(u.size for u in units))     # before any unit is surveyed or decoded
    shares = share_of(reader, units, comm.size)
    mine = shares[comm.rank]
    if comm.size > 1 and type(reader).hand_over is not TraceReader.hand_over:
        handed = None
        with comm.guard():      # what listing learnt goes to the owners: no second read
            handed = [None if r == comm.rank else reader.hand_over(share)
                      for r, share in enumerate(shares)]
        comm.check()
        for got in comm.alltoall(handed):
            if got is not None:
                reader.take_over(got)
    if type(reader).joined is not TraceReader.joined:
        with comm.guard():
            mine = reader.joined(mine)
        comm.check()
    if reader.surveyed or reader.ordered:
        if progress is not None:
            progress.expect(sum(u.size for u in units))
        local = None
        with comm.guard():
            for unit in mine:
                s = reader.survey(unit)
                local = s if local is None else reader.combine(local, s)
                if progress is not None:
                    progress.advance(unit.size)
        comm.check()
        if reader.ordered:
            reader.start_after(comm.exscan(local, reader.combine))
        survey = comm.reduce(local, reader.combine)
    with comm.guard():
        if comm.rank == 0:
            defs = reader.read_definitions(survey) if survey is not None else reader.read_definitions()
    comm.check()
    return units, mine, comm.bcast(defs)


def decode_share(comm: Comm, reader, mine, defs: Definitions, schema: Schema,
                 progress: Progress, stats: RunStats, store: RunStore | None = None,
                 select=None, retime=None):
    """Decode this rank's units (in key order): into sorted runs of ``store``,
    or (no store) whole tables; ``select(name, table)``: a mask of the rows to keep
    (None: all); ``retime(name, table)``: the table with its times corrected, first."""
    parts: dict[str, list[Table]] = {name: [] for name in schema}
    rows = dict.fromkeys(schema, 0)
    with comm.guard():
        for unit in mine:
            for chunk in reader.decode(unit, defs):
                comm.poll()     # a stop signal here or on another rank ends the loop
                for name, table in chunk.items():
                    if name not in schema:
                        continue
                    if retime is not None:
                        table = retime(name, table)
                    if len(table.names) != len(schema[name]):
                        table = Table({c.name: table[c.name] for c in schema[name]})
                    if select is not None:
                        keep = select(name, table)
                        if keep is not None:
                            table = table.take(np.flatnonzero(keep))
                    rows[name] += len(table)
                    if store is not None:
                        store.add(name, table)
                    else:
                        parts[name].append(table)
                # nothing of this chunk held here while the reader decodes the next one
                chunk = table = None
            stats.units += 1
            stats.bytes_read += unit.size
            progress.advance(unit.size)
    comm.check()
    stats.rows_decoded = rows
    if store is not None:
        return store
    return {name: Table.concat(parts[name], schema[name]) for name in schema}


def _wanted(schema: Schema, tables: dict | None) -> Schema:
    """The part of the schema a sink asks for."""
    if tables is None:
        return schema
    return {name: [c for c in cols if tables[name] is None or c.name in tables[name]]
            for name, cols in schema.items() if name in tables}


def run(comm: Comm, path: str | os.PathLike, sink: Sink, format: str | None = None,
        progress: Progress | None = None, memory: int = DEFAULT_MEMORY,
        spill_dir: str | os.PathLike | None = None, reader_options: dict | None = None,
        retime=None) -> RunStats:
    """Decode the trace at ``path`` on all ranks, merge, and write through ``sink``.

    ``memory`` is the budget per rank in bytes: decoded rows beyond KEEP of it
    (COLUMNWISE_KEEP for a columnwise sink) are spilled to ``spill_dir``
    (default: the system's temporary folder), and
    the merge runs in as many windows of the global order as the budget needs.
    ``retime`` (a clock correction, as analysis.sync.ClockSync): ``retime.prepare(defs,
    schema)`` gives the schema it writes; ``retime(name, table)`` corrects each decoded
    table's times per location before any order is made.
    """
    # here, not at the top: these load numba's compiled merge kernels, which
    # ``info`` and the folds (open_on_all_ranks, read_plan) never use
    from .runs import RunStore, row_bytes
    from . import rank0_share
    from .windows import (by_destination, choose_cuts_kept, choose_shared_cuts,
                          location_bytes, next_window_keys, time_windows, window_count,
                          window_cuts, window_rows)
    stats = RunStats()
    progress = progress or Progress(comm, enabled=False)
    progress.phase("plan")
    accounts.phase("plan")
    reader = open_on_all_ranks(comm, path, format, reader_options)
    units, mine, defs = read_plan(comm, reader, progress)
    if comm.rank == 0:      # the output must never be written over one of these
        files = reader.source_files()
        inputs.protect(path, files, units)
        stats.source_bytes = sum(f.stat().st_size for f in files)
        stats.source_files = len(files)
    # names every rank's spill folder, so that a rank forced to leave first can remove all it sees
    # (and carries rank 0's owner token, each folder its maker's: leftovers.py)
    run_id = comm.bcast(run_name() if comm.rank == 0 else None)
    schema = _wanted(reader.schema(defs), sink.needs)
    if retime is not None:
        schema = retime.prepare(defs, schema)
    # a columnwise sink keeps 7/10 of the budget for rows and gives decoding and
    # each window 1/8 (else 2/5 for rows, 1/10 for chunks and 1/16 for windows: the
    # OTF sink holds exchange copies and formatted text besides a window)
    lean = sink.columnwise
    share = 8 if lean else 10
    # text decodes to ~10x its size in columns, sorted and narrowed into a run through a
    # copy: one chunk at a quarter of the share (2G: 6.4 MiB; merge of a 200 MB trace at
    # 1 rank, peak: OTF 679 -> 516 MiB, DUMPI 823 -> 688, ovni 612 -> 562, same CPU)
    reader.chunk_bytes = int(min(64 << 20, max(1 << 20, memory // (40 * share))))
    progress.phase("decode", sum(u.size for u in units))
    accounts.phase("decode")
    store = RunStore(schema, memory, spill_dir, tag=f"r{comm.rank}-{owner_token()}",
                     run_id=run_id,
                     keep_fraction=COLUMNWISE_KEEP if lean else KEEP,
                     resident_fraction=COLUMNWISE_KEEP if lean else KEEP)
    try:
        sink.memory = memory
        sink.start(comm, defs, schema)
        decode_share(comm, reader, mine, defs, schema, progress, stats, store,
                     select=sink.select, retime=retime)
        defs = complete_definitions(comm, reader, defs)
        # the windows' count and cut keys, chosen together; before them, what the sink
        # prepares from the decoded runs (its locations' bytes), which is not decoding
        accounts.phase("cuts")
        collector.settle()      # the plan, the readers' modules: alive to the end
        if sink.weighs_locations and comm.size > 1:
            sink.location_bytes = location_bytes(
                comm, store.runs, {name: row_bytes(schema[name]) for name in schema})
        sink.table_rows = dict(zip(schema, comm.allreduce_sum(
            np.array([store.rows[name] for name in schema], np.int64)).tolist()))
        sink.prepare(comm, defs, schema)
        # a row-wise sink (OTF text) holds about 2.5x a window's row bytes while it formats
        # it: windows of 1/16 of the budget, not 1/10 (merge->otf of the 200 MB traces at
        # 1 rank, peak: DUMPI 699 -> 634 MiB, ovni 674 -> 593, ROSS 631 -> 573; CPU, paired:
        # ROSS +3%, DUMPI -7%)
        windows = window_count(comm, store.total_bytes(), memory // (share if lean else 16))
        if windows > 1 and not sink.windows:
            windows = 1     # this sink must see all rows at once
        stats.windows = windows
        stats.spilled_bytes = store.spilled_bytes
        progress.phase("merge+write", windows, unit="windows")
        pieces = windows * comm.size if sink.mode == "time" else windows
        varies, rank0 = False, None     # rank 0's share of each window (rank0_share.py)
        if sink.mode == "time":     # each table balanced over the ranks on its own
            fixed = None
            with comm.guard():
                fixed = rank0_share.forced() if comm.rank == 0 else None
            comm.check()
            varies = comm.size > 1 and (
                comm.bcast(fixed is not None) or sink.serial_seconds is not None)
            cuts, kept = {}, {}     # kept: rank 0's samples of each table, to cut again
            for name in schema:
                cuts[name], kept[name] = choose_cuts_kept(comm, store.runs[name], pieces,
                                                          keep=varies)
            if varies:      # every rank measures its windows; rank 0 decides
                rank0 = rank0_share.Rank0Share(comm.size, fixed)
        else:                       # one window of the key space for all tables
            shared = choose_shared_cuts(comm, store.runs,
                                        {name: row_bytes(schema[name]) for name in schema}, pieces)
            cuts = dict.fromkeys(schema, shared)
        written = dict.fromkeys(schema, 0)
        for w in range(windows):
            if varies:      # rank 0's share of this window, its cuts from rank 0
                spent = comm.gather(rank0.spent()) if w else None
                inner = None
                with comm.guard():
                    if comm.rank == 0:
                        share = rank0.after(spent) if w else rank0.share
                        # an even share keeps the first cuts, taken from every sample
                        inner = {} if share == 1.0 else {
                            name: window_cuts(k, w, comm.size, windows, share)
                            for name, k in kept.items() if k is not None}
                comm.check()
                for name, keys in comm.bcast(inner).items():
                    cuts[name][w * comm.size:(w + 1) * comm.size - 1] = keys
            if rank0 is not None:
                rank0.begin()
                if comm.rank == 0:
                    accounts.note_window(w, rank0_share=round(rank0.share, 4))
            if sink.wants_next_keys:    # lets a sink write out rows no later window precedes
                sink.next_keys = next_window_keys(cuts, w, windows, pieces // windows)
            merged = {}
            if sink.mode == "time":     # every table's rows exchanged together
                accounts.phase("exchange", w)
                merged = time_windows(comm, store.runs, cuts, w, schema)
            else:                       # each table's rows sent where the sink says
                for name in schema:
                    accounts.phase("exchange", w)
                    rows = window_rows(store.runs[name], cuts[name], w, schema[name])
                    dest = None
                    with comm.guard():
                        dest = sink.destinations(comm, name, rows)
                    comm.check()
                    merged[name] = by_destination(comm, rows, dest, schema[name])
            for name in schema:
                written[name] += len(merged[name])
            comm.poll()     # notices of a stop are read between windows too
            accounts.phase("write", w)
            sink.write(comm, merged)
            del merged
            progress.advance(1)
        stats.rows_written = written
        accounts.phase("commit")
        sink.commit(comm)
    except RankFailed:
        sink.discard(comm)
        raise
    finally:
        store.close()
        progress.done()
    return stats
