"""The ``single`` HDF5 layout written collectively: no rank funnels the others' rows.

Where h5py is built against a parallel HDF5 (``h5py.get_config().mpi``) and the
job has more than one rank, the sink's ``single`` layout is ``CollectiveLayout``:
every rank writes its own rows of the window straight into the one output file, at
their global row (text: byte) offsets, through HDF5's ``mpio`` driver.  HDF5
compresses the chunks inside the collective write, each rank those it holds: a chunk
whose rows two ranks wrote is gathered to one of them by HDF5 and compressed there.
Nothing is joined at the end, so rank 0 carries no other rank's bytes (the serial
join, hdf5_joined.py, copies every other rank's chunks into the file on rank 0).

It is a layout of hdf5_layouts.py that writes the windows itself (``write_window``):
under mpio every dataset write is a call of every rank, so the sink's own path (each
numeric chunk compressed and stored by its owner alone, with ``write_direct_chunk``)
would leave the other ranks waiting; chunk allocation under mpio is collective.  And it
runs on a one-window merge only: at the first window (``settle``) a merge of several
windows hands over to ``SingleFileLayout``, on every rank alike, which is why this
layout has the join's parts folder made at prepare.

The steps, all ranks in the same order (HDF5's collective calls must match):

1. at the first window, rank 0 alone makes the file with the sink's own code (the
   header, the definitions, and every table's empty datasets with the serial path's
   dtypes, chunk shapes and filters); then every rank opens it with ``driver="mpio"``
   on the job's communicator;
2. per table with rows on any rank: every dataset written collectively, column
   by column, each rank its slice (a rank without rows selects none, but still
   calls); a dataset too short is first grown (``resize``, collective, the same
   size on every rank);
3. at commit the file is closed on every rank, and rank 0 sets the attributes
   the serial path sets while writing (``rows``, a text column's ``encoding``).

The data read back is the serial path's, value for value; the stored bytes are
not: HDF5's own filter pipeline compresses every chunk (the serial path packs
small-range integer chunks by scale-offset alone and skips all-zero chunks).

``PARTRACE_H5_COLLECTIVE=0`` keeps the serial join where this path could run
(tests compare the two); ``=1`` refuses to run without a parallel h5py.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
from ..errors import UsageError
from ..formats.hdf5 import text as hdf5_text
from ..model import Schema, Table
from .hdf5_joined import PARTS_DIR, SingleFileLayout
from .hdf5_layouts import HDF5Layout

ENV = "PARTRACE_H5_COLLECTIVE"      # "0": the serial join; "1": collective or refuse


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


def one_window(next_keys: dict | None) -> bool:
    """Whether the merge is one window (no table has later rows): the collective path's
    condition.  Datasets grown window after window under mpio (HDF5 1.10.8) left the
    ranks waiting in the second window's collective writes, so a merge of several
    windows keeps the serial join; the layout asks at the first window, the same answer
    on every rank (the engine's next keys are everyone's)."""
    return next_keys is not None and all(k is None for k in next_keys.values())


class CollectiveLayout(HDF5Layout):
    """The ``single`` layout with every rank writing the one file (mpio), on a one-window
    merge; a merge of several windows hands over to the serial join."""
    folder = PARTS_DIR      # the join's, made at prepare: the hand-over comes later

    def __init__(self, sink):
        super().__init__(sink)
        self.file: CollectiveFile | None = None

    def settle(self) -> HDF5Layout:
        return self if one_window(self.sink.next_keys) else SingleFileLayout(self.sink)

    def write_window(self, comm: Comm, tables: dict, encoded: dict, everyone: list[dict]) -> None:
        sink = self.sink
        if self.file is None:
            counts = {k: sum(e.get(k, 0) for e in everyone) for k in sink.rows}
            with comm.guard():
                if comm.rank == 0:  # the serial path's file: header, empty datasets
                    try:
                        sink._open(comm, counts)
                    finally:
                        sink._close()
            comm.check()
            self.file = CollectiveFile(sink.staging.path(sink.final.name), sink.schema)
            self.file.open(comm)
        self.file.write(comm, tables, encoded, everyone, sink.rows)

    def finish(self, comm: Comm) -> list[str]:
        self.file.finish(comm, self.sink.rows)
        return super().finish(comm)

    def written(self) -> dict:
        return dict(path="collective", summary="HDF5 written collectively (mpio)")

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

    # -- step 1 ------------------------------------------------------------------------
    def open(self, comm: Comm) -> None:
        """Collective: every rank opens the file rank 0 made."""
        import h5py
        from h5py import h5fd, h5p
        with comm.guard():
            self._file = h5py.File(self.path, "r+", driver="mpio", comm=comm.mpi)
            self._dxpl = h5p.create(h5p.DATASET_XFER)
            self._dxpl.set_dxpl_mpio(h5fd.MPIO_COLLECTIVE)
        comm.check()

    # -- step 2 ------------------------------------------------------------------------
    def write(self, comm: Comm, tables: dict[str, Table], encoded: dict,
              everyone: list[dict], before: dict) -> None:
        """Collective: one window.  ``encoded``: this rank's text columns as
        (bytes, per-row lengths, not UTF-8); ``everyone``: every rank's rows (text:
        bytes) per table (text column); ``before``: rows (bytes) of earlier windows."""
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
                                     start, end)
                    if any(e.get(("not utf-8",) + key) for e in everyone):
                        self.not_utf8.add(key)
                    continue
                mine = (np.asarray(table.column_once(col.name)) if table is not None
                        and len(table) else None)
                self._put(comm, group[col.name], mine, start, end)

    def _write_text(self, comm: Comm, pair, key, encoded, everyone, before, start, end):
        """A text column's ``ends`` at its rows, its ``data`` at its global bytes."""
        sizes = [e.get(key, 0) for e in everyone]
        base = before[key] + sum(sizes[:comm.rank])
        data, lengths, _ = encoded.get(key, (None, None, False))
        ends = (base + np.cumsum(lengths, dtype=np.uint64)) if lengths is not None and len(
            lengths) else None
        self._put(comm, pair[hdf5_text.ENDS], ends, start, end)
        if sum(sizes):
            self._put(comm, pair[hdf5_text.DATA], data if data is not None and len(data)
                      else None, base, before[key] + sum(sizes))

    def _put(self, comm: Comm, ds, values: np.ndarray | None, start: int, end: int) -> None:
        """Collective: grow ``ds`` to ``end`` rows, write this rank's ``values`` (None:
        none) at row ``start``.  Every rank calls, with or without rows."""
        if ds.shape[0] < end:       # the same on every rank: the window's counts are
            with comm.guard():      # everyone's
                ds.resize(end, axis=0)
            comm.check()
        buffer, memory, selected = None, None, None
        with comm.guard():          # this rank's own work: its error stops every rank here
            buffer, memory, selected = _selection(ds, values, start)
        comm.check()
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
        """Collective: close, then rank 0 sets the attributes the serial path sets as it
        writes: each table's ``rows``, ``encoding`` of text kept as bytes."""
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


def _selection(ds, values: np.ndarray | None, start: int):
    """(buffer, memory space, file space) of a collective write of ``values`` at row
    ``start`` of ``ds``; with no values, a selection of nothing (the rank still calls)."""
    from h5py import h5s
    tail = tuple(ds.shape[1:])
    space = ds.id.get_space()
    if values is None:
        buffer = np.zeros((1,) + tail, ds.dtype)
        memory = h5s.create_simple(buffer.shape)
        memory.select_none()
        space.select_none()
        return buffer, memory, space
    buffer = np.ascontiguousarray(values, dtype=ds.dtype)
    memory = h5s.create_simple(buffer.shape)
    space.select_hyperslab((start,) + (0,) * len(tail), buffer.shape)
    return buffer, memory, space
