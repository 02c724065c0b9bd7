"""The ``single`` HDF5 layout written collectively: no rank funnels the others' rows.

Where h5py is built against a parallel HDF5 (``h5py.get_config().mpi``) and the
job has more than one rank, the sink's ``single`` layout is ``CollectiveLayout``:
every rank writes its own rows of each window straight into the one output file, at
their global row (text: byte) offsets, through HDF5's ``mpio`` driver.  HDF5
compresses the chunks inside the collective write, each rank those it holds: a chunk
whose rows two ranks wrote is gathered to one of them by HDF5 and compressed there.
Nothing is joined at the end, so rank 0 carries no other rank's bytes (the serial
join, hdf5_joined.py, copies every other rank's chunks into the file on rank 0) and
its work at commit is metadata (the closing attributes).

It is a layout of hdf5_layouts.py that writes the windows itself (``write_window``):
under mpio every dataset write is a call of every rank, so the sink's own path (each
numeric chunk compressed and stored by its owner alone, with ``write_direct_chunk``)
would leave the other ranks waiting; chunk allocation under mpio is collective.

The tables' datasets are created under mpio, by every rank alike, so that HDF5 gives
them early allocation: a chunk's file space is allocated (collectively) when the
dataset is created or grown, never inside a write.  HDF5 1.10.8 (Debian's
libhdf5-mpich) needs that for its collective writes of filtered chunks, but gives it
only to datasets created in parallel: datasets created by one rank with the serial
library's default (incremental) allocation, grown under mpio and then written, left
the ranks waiting in that write (every write after a grow, even one by a single rank:
one rank waits for chunk data from another that sends none); the same datasets
created with early allocation are written at once.  Only the header and the
definitions are written by rank 0 alone, before every rank opens the file.

Every chunk is written once, whole (or as the dataset's last, partial chunk).  A
window's rows rarely end on a chunk boundary; writing the part-filled chunk and then
completing it in the next window would make HDF5 read, decompress and recompress it
(and leave its first version's space behind in the file).  So each write goes up to
the last chunk boundary only (the ``cut``); the rows after it stay with the ranks that
hold them (``carry``) and go into a later write, at their global offsets, with that
window's rows, in one selection (HDF5 gathers a chunk's rows from the ranks that hold
them).  A dataset is written only once the cut is a chunk per rank past its stored
rows: HDF5 compresses each chunk on one rank, inside the collective write, so a write
of fewer chunks leaves ranks idle (waiting in MPI) while one compresses, and every
write and grow is a round of collective metadata work whatever its size.  Windows
smaller than that (a small ``--memory``) are carried on, whole.  Where the budget
allows, a table waits for more chunks per rank (at most ``MOST_CHUNKS_PER_RANK``):
fewer, larger writes.  The rows held over are counted against a share of the budget
(``HOLD_SHARE``): a table's chunks per rank are that share over the bytes of one chunk
of every dataset of the tables with rows in the first window (at least 1; a table
whose rows start later waits for 1).  The carry stays under that many chunks per
rank, and one more, per dataset (all ranks together).  A table's last window (the
engine's next keys say no rows follow) and commit write the rest.

The steps, all ranks in the same order (HDF5's collective calls must match):

1. at the first window, rank 0 alone makes the file with the sink's own code (the
   header and the definitions); then every rank opens it with ``driver="mpio"`` on
   the job's communicator and creates every table's empty datasets with the sink's
   code (the serial path's dtypes, chunk shapes and compression; no scale-offset, and
   chunks filled with zeros when allocated: layout.filters' ``piped``);
2. per window, per table with rows on any rank: every dataset grown to its cut
   (``resize``, collective, the same size on every rank: the cut comes from the
   window's counts, which are everyone's) and written collectively, each rank its
   rows before the cut (a rank without any selects none, but still calls), unless
   those rows are zeros on every rank (the allocated chunks hold them already);
3. at commit the rows still carried are written, the file is closed on every rank,
   and rank 0 sets the attributes the serial path sets while writing (``rows``, a
   text column's ``encoding``).

The data read back is the serial path's, value for value; the stored bytes are
not: HDF5's own filter pipeline compresses every chunk (the serial path packs
small-range integer chunks by scale-offset alone and skips all-zero chunks), and
the tables declare no scale-offset, which the pipeline would apply to every chunk.

``PARTRACE_H5_COLLECTIVE=0`` keeps the serial join where this path could run
(tests compare the two); ``=1`` refuses to run without a parallel h5py.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
from ..errors import UsageError
from ..formats.hdf5 import layout as hdf5_layout
from ..formats.hdf5 import text as hdf5_text
from ..model import Schema, Table
from .hdf5_layouts import HDF5Layout

ENV = "PARTRACE_H5_COLLECTIVE"      # "0": the serial join; "1": collective or refuse
# Rows held over until a write is due: at most this fraction of the budget per rank.  The
# engine gives a columnwise sink 7/10 for rows and 1/8 for a window; the sink's pending
# chunks (1/16) are unused here, where HDF5 compresses inside the write.
HOLD_SHARE = 8
# Waiting for 4 chunks per rank instead of 1: 0.69x the wall time of a many-window merge
# (800k-event OTF trace, 2 ranks, --memory 48M), 24 MiB more peak per rank.
MOST_CHUNKS_PER_RANK = 4


def h5py_has_mpi() -> bool:
    import h5py
    return bool(h5py.get_config().mpi)


def chosen(comm: Comm) -> bool:
    """Whether the ``single`` layout is written collectively in this job: on more than
    one rank where h5py has MPI, unless ``PARTRACE_H5_COLLECTIVE=0``.  The same answer
    on every rank (the environment and the h5py build are the job's)."""
    wanted = os.environ.get(ENV, "").strip()
    if wanted not in ("", "0", "1"):
        raise UsageError(f"{ENV}={wanted}: 0 (the serial join) or 1 (collective)")
    if wanted == "0" or not comm.parallel:
        return False
    if not h5py_has_mpi():
        if wanted == "1":
            raise UsageError(f"{ENV}=1: this h5py has no MPI support (scripts/parallel_hdf5 "
                             f"builds one)")
        return False
    return True


class CollectiveLayout(HDF5Layout):
    """The ``single`` layout with every rank writing the one file (mpio)."""

    def __init__(self, sink):
        super().__init__(sink)
        self.file: CollectiveFile | None = None

    def write_window(self, comm: Comm, tables: dict, encoded: dict, everyone: list[dict]) -> None:
        sink = self.sink
        if self.file is None:
            with comm.guard():
                if comm.rank == 0:  # the header and the definitions, by rank 0 alone
                    sink.new_file(0).close()
            comm.check()
            self.file = CollectiveFile(sink.staging.path(sink.final.name), sink.schema)
            self.file.open(comm)
            counts = {k: sum(e.get(k, 0) for e in everyone) for k in sink.rows}
            with comm.guard():      # metadata: every rank alike, into the mpio file
                # HDF5's pipeline compresses these chunks (layout.filters: no scale-offset,
                # chunks filled with zeros when allocated)
                sink.create_tables(self.file.h5, counts, piped=True)
                self.file.hold_within(sink.memory, counts)
            comm.check()
        later = sink.next_keys
        last = {name: later is not None and later.get(name) is None for name in sink.schema}
        self.file.write(comm, tables, encoded, everyone, sink.rows, last)

    def finish(self, comm: Comm) -> list[str]:
        self.file.finish(comm, self.sink.rows)
        return super().finish(comm)

    def written(self) -> dict:
        return dict(path="collective", through_rank0_bytes=0,
                    chunks_per_rank=max(self.file.chunks_per_rank.values(), default=1)
                    if self.file is not None else 1,
                    summary="HDF5 written collectively (mpio): no join through rank 0")

    def release(self) -> None:
        """Collective under mpio (H5Fclose): every rank discards, so every rank closes."""
        if self.file is not None:
            self.file.close()


class CollectiveFile:
    """The one output file, made by rank 0, written by every rank through the mpio driver."""

    def __init__(self, path: Path, schema: Schema):
        self.path = Path(path)
        self.schema = schema
        self._file = None
        self._dxpl = None
        self.not_utf8: set[tuple[str, str]] = set()     # text columns kept as bytes
        # per dataset (its path): rows (bytes) in the file, the same on every rank, and
        # this rank's rows after the last cut as [(global first row, values)]
        self.stored: dict[str, int] = {}
        self.carry: dict[str, list[tuple[int, np.ndarray]]] = {}
        # per table: chunks per rank a write waits for (``hold_within``; absent: 1)
        self.chunks_per_rank: dict[str, int] = {}

    # -- step 1 ------------------------------------------------------------------------
    def open(self, comm: Comm) -> None:
        """Collective: every rank opens the file rank 0 made."""
        import h5py
        from h5py import h5fd, h5p
        with comm.guard():
            self._file = h5py.File(self.path, "r+", driver="mpio", comm=comm.mpi,
                                   libver=hdf5_layout.LIBVER)
            self._dxpl = h5p.create(h5p.DATASET_XFER)
            self._dxpl.set_dxpl_mpio(h5fd.MPIO_COLLECTIVE)
        comm.check()

    def hold_within(self, memory: int | None, counts: dict) -> None:
        """Each table with rows in the first window (``counts``: every rank's) waits for
        as many chunks per rank as ``HOLD_SHARE`` of ``memory`` (the budget per rank;
        None: none given, the most) holds of one chunk of each of their datasets: a
        rank holds about that many chunks of each.  The same on every rank."""
        tables = [name for name in self.schema if counts.get(name, 0)]
        row_set = sum(_chunk_bytes(ds) for name in tables for ds in _datasets(self._file[name]))
        share = memory // HOLD_SHARE if memory else None
        most = MOST_CHUNKS_PER_RANK if share is None else min(
            MOST_CHUNKS_PER_RANK, max(1, share // max(1, row_set)))
        self.chunks_per_rank = dict.fromkeys(tables, most)

    @property
    def h5(self):
        """The open mpio file (every rank's handle)."""
        return self._file

    # -- step 2 ------------------------------------------------------------------------
    def write(self, comm: Comm, tables: dict[str, Table], encoded: dict,
              everyone: list[dict], before: dict, last: dict[str, bool]) -> None:
        """Collective: one window.  ``encoded``: this rank's text columns as
        (bytes, per-row lengths, not UTF-8); ``everyone``: every rank's rows (text:
        bytes) per table (text column); ``before``: rows (bytes) of earlier windows;
        ``last``: per table, whether no rows follow this window."""
        for name, columns in self.schema.items():
            counts = [e.get(name, 0) for e in everyone]
            if not sum(counts):
                continue
            start = before[name] + sum(counts[:comm.rank])
            end = before[name] + sum(counts)
            table = tables.get(name)
            group = self._file[name]
            for col in columns:
                if col.is_object:
                    key = (name, col.name)
                    self._write_text(comm, group[col.name], key, encoded, everyone, before,
                                     start, end, last[name], self.chunks_per_rank.get(name, 1))
                    if any(e.get(("not utf-8",) + key) for e in everyone):
                        self.not_utf8.add(key)
                    continue
                mine = (np.asarray(table.column_once(col.name)) if table is not None
                        and len(table) else None)
                self._put(comm, group[col.name], mine, start, end, last[name],
                          self.chunks_per_rank.get(name, 1))

    def _write_text(self, comm: Comm, pair, key, encoded, everyone, before, start, end,
                    last: bool, wait: int) -> None:
        """A text column's ``ends`` at its rows, its ``data`` at its global bytes."""
        sizes = [e.get(key, 0) for e in everyone]
        base = before[key] + sum(sizes[:comm.rank])
        data, lengths, _ = encoded.get(key, (None, None, False))
        ends = (base + np.cumsum(lengths, dtype=np.uint64)) if lengths is not None and len(
            lengths) else None
        self._put(comm, pair[hdf5_text.ENDS], ends, start, end, last, wait)
        if sum(sizes):
            self._put(comm, pair[hdf5_text.DATA], data if data is not None and len(data)
                      else None, base, before[key] + sum(sizes), last, wait)

    def _put(self, comm: Comm, ds, values: np.ndarray | None, start: int, end: int,
             last: bool, wait: int = 1) -> None:
        """Collective: this rank's ``values`` (None: none) at row ``start`` of ``ds``,
        whose rows now end at ``end`` (every rank's): written up to the cut, the last
        chunk boundary before ``end`` (``end`` itself when no rows follow), the rest
        carried to the next write.  Every rank calls, with or without rows.

        Nothing is written before the cut is ``wait`` chunks per rank past the rows stored:
        HDF5 compresses each chunk on one rank inside the collective write, so a write
        of fewer chunks than ranks leaves ranks idle in it, and each write (and the
        grow before it) is a round of collective metadata work whatever its size."""
        step = ds.chunks[0] if ds.chunks else end
        stored = self.stored.get(ds.name, 0)
        cut = end if last else end - end % step
        if not last and cut - stored < wait * comm.size * step:
            cut = stored        # the same on every rank: carried on, whole
        now: list[tuple[int, np.ndarray]] = []
        with comm.guard():      # this rank's own work: an error is every rank's at the next check
            pieces = self.carry.pop(ds.name, [])
            if values is not None and len(values):
                pieces.append((start, values))
            now = [(a, v[:cut - a]) for a, v in pieces if a < cut]
            # the window's values copied (they may live in buffers the engine reuses),
            # a carried piece only where its rows before the cut are let go
            self.carry[ds.name] = [
                (max(a, cut), np.array(v[max(cut - a, 0):]) if v is values or a < cut else v)
                for a, v in pieces if a + len(v) > cut]
        if cut > stored:        # the same on every rank
            self._write(comm, ds, now, cut)
            self.stored[ds.name] = cut

    def _write(self, comm: Comm, ds, pieces: list[tuple[int, np.ndarray]], end: int) -> None:
        """Collective: grow ``ds`` to ``end`` rows, write this rank's ``pieces`` (global
        first row, values) in one call.  The selection (this rank's own work) is made
        first, for the grown shape, so that one check after the grow reports an error
        of either: every check is a meeting of all ranks."""
        buffer, memory, selected, zeros = None, None, None, True
        with comm.guard():          # this rank's own work: its error stops every rank below
            buffer, memory, selected = _selection(ds, pieces, end)
            zeros = all(_zeros(v) for _, v in pieces)
        if ds.shape[0] < end:       # the same on every rank: ``end`` is everyone's
            with comm.guard():
                ds.resize(end, axis=0)
        comm.check()
        # rows of zeros on every rank (a column no record of the window uses): the chunks
        # already hold them (filled when allocated), and HDF5 would compress each again
        if _filled(ds) and comm.allreduce_sum(int(not zeros)) == 0:
            return
        with comm.guard():          # collective: an error inside it is HDF5's on every rank
            ds.id.write(memory, selected, buffer, mtype=ds.id.get_type(), dxpl=self._dxpl)
        comm.check()

    # -- step 3 ------------------------------------------------------------------------
    def close(self) -> None:
        """Collective (H5Fclose under mpio): every rank, also after a failure."""
        if self._file is not None:
            f, self._file = self._file, None
            f.close()

    def finish(self, comm: Comm, rows: dict) -> None:
        """Collective: the rows still carried (a table whose last window the engine
        did not name) written, the file closed; then rank 0 sets the attributes the
        serial path sets as it writes: each table's ``rows``, ``encoding`` of text
        kept as bytes."""
        for name, columns in self.schema.items():
            group = self._file[name]
            for col in columns:
                if col.is_object:
                    self._flush(comm, group[col.name][hdf5_text.ENDS], rows[name])
                    self._flush(comm, group[col.name][hdf5_text.DATA], rows[name, col.name])
                else:
                    self._flush(comm, group[col.name], rows[name])
        with comm.guard():
            self.close()
        comm.check()
        import h5py
        with comm.guard():
            if comm.rank == 0:
                with h5py.File(self.path, "r+") as f:
                    for name in self.schema:
                        f[name].attrs["rows"] = max(rows[name], int(f[name].attrs["rows"]))
                    for name, col in sorted(self.not_utf8):
                        hdf5_text.mark_not_utf8(f[name][col])
        comm.check()

    def _flush(self, comm: Comm, ds, total: int) -> None:
        """Collective: the carried rows of ``ds`` up to its ``total`` (every rank's)."""
        if self.stored.get(ds.name, 0) < total:
            self._put(comm, ds, None, total, total, True)


def _zeros(values: np.ndarray) -> bool:
    """Every byte of ``values`` is 0 (what a chunk filled with the fill value 0 holds)."""
    return not np.ascontiguousarray(values).view(np.uint8).any()


def _filled(ds) -> bool:
    """Its chunks hold zeros from their allocation on (layout.filters' piped datasets)."""
    import h5py
    dcpl = ds.id.get_create_plist()
    if dcpl.get_fill_time() != h5py.h5d.FILL_TIME_ALLOC:
        return False
    fill = np.zeros(1, ds.dtype)
    dcpl.get_fill_value(fill)
    return _zeros(fill)


def _datasets(group) -> list:
    """The datasets of a table's group, a text column's pair (data, ends) included."""
    import h5py
    out = []
    group.visititems(lambda _, obj: out.append(obj) if isinstance(obj, h5py.Dataset) else None)
    return out


def _chunk_bytes(ds) -> int:
    """Bytes of one chunk of ``ds`` as rows in memory (a contiguous dataset: all of it)."""
    return int(np.prod(ds.chunks or ds.shape or (1,))) * ds.dtype.itemsize


def _selection(ds, pieces: list[tuple[int, np.ndarray]], rows: int):
    """(buffer, memory space, file space) of a collective write of ``pieces`` (global
    first row, values) into ``ds`` once it holds ``rows`` rows; with none, a selection
    of nothing (the rank still calls)."""
    from h5py import h5s
    tail = tuple(ds.shape[1:])
    space = h5s.create_simple((rows,) + tail)
    if not pieces:
        buffer = np.zeros((1,) + tail, ds.dtype)
        memory = h5s.create_simple(buffer.shape)
        memory.select_none()
        space.select_none()
        return buffer, memory, space
    buffer = np.ascontiguousarray(np.concatenate([v for _, v in pieces]) if len(pieces) > 1
                                  else pieces[0][1], dtype=ds.dtype)
    memory = h5s.create_simple(buffer.shape)
    space.select_none()
    for a, v in pieces:     # the pieces lie in row order, apart: their union, in order
        space.select_hyperslab((a,) + (0,) * len(tail), (len(v),) + tail, op=h5s.SELECT_OR)
    return buffer, memory, space
