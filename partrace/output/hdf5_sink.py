"""Writing merged rows to one HDF5 file from many ranks (h5py need not have MPI).

Every rank writes its slice of each window of the global order (time mode) into a file
of its own in the staging folder; where that file is and what commit makes of the files
is the layout's (``layout=``, hdf5_layouts.py):

* ``"single"`` (default): one self-contained file at the output path, whatever the
  rank count: at one rank the file itself, at more the ranks' files joined into it at
  commit by copying their chunks as stored bytes (hdf5_joined.py);
* ``"parts"``: rank r keeps ``OUT.parts/rank-<r>.h5`` and rank 0 writes ``OUT`` whose
  datasets are HDF5 virtual datasets over the parts (relative paths: move ``OUT`` and
  ``OUT.parts`` together).  No copy at commit; ``OUT`` alone is unreadable (partrace
  says which part is missing).

Where h5py has MPI and the job more than one rank, the ``single`` layout is written
collectively instead: every rank writes its rows into the one file through HDF5's
mpio driver, window after window, and nothing is joined (hdf5_collective.py:
``CollectiveLayout``, which writes the windows itself; PARTRACE_H5_COLLECTIVE=0 keeps
the join).

What every layout shares is here.  Each rank compresses its own chunks
(formats/hdf5/chunks.py: on a pool of threads, while the engine builds the next column
or window), so the costly part runs in parallel.  Every chunk of a numeric table has one
owner that writes it whole where the layout's files have the output's shape
(chunk_owners.py: the rows at a slice's edge go to the rank that owns their chunk, once
per window).  Text columns are data/ends pairs of plain numbers (formats/hdf5/text.py)
whose global byte offsets come from one allgather of byte counts per window.
"""
from __future__ import annotations

import time
from pathlib import Path

import h5py
import numpy as np

from ..engine import accounts
from ..engine.mpi import Comm
from ..errors import UsageError
from ..model import Definitions, Schema, Table
from ..formats.hdf5 import chunks as hdf5_chunks
from ..formats.hdf5 import layout as hdf5
from ..formats.hdf5 import text as hdf5_text
from .chunk_owners import OwnedWriter
from .hdf5_collective import CollectiveLayout, chosen as collective_chosen
from .hdf5_joined import SingleFileLayout
from .hdf5_layouts import HDF5Layout, PartsLayout
from .staged import StagedSink

# the join's chunk listing is named here too, where the tests of one file find it
__all__ = ["HDF5Sink", "LAYOUTS"]
LAYOUTS = ("single", "parts")


class HDF5Sink(StagedSink):
    mode = "time"
    windows = True      # write() appends window after window
    columnwise = True   # write() reads each column of a window once (Table.column_once)
    wants_next_keys = True  # the engine sets next_keys before each write: None per table = no later rows

    def __init__(self, path, source: str = "", overwrite: bool = False,
                 compression: str | None = None, layout: str | None = None):
        layout = layout or "single"
        if layout not in LAYOUTS:
            raise UsageError(f"--layout {layout}: HDF5 layouts are {', '.join(LAYOUTS)}")
        super().__init__(path, overwrite)
        self.source = source
        self.compression = compression
        self.layout = layout
        self.parts_name = self.final.name + ".parts"
        self._file: h5py.File | None = None
        # the open file's datasets by (table, column): h5py's path look-up costs more than
        # writing a near-empty table's window, and a trace has a table per MPI function
        self._datasets: dict[tuple[str, str], h5py.Dataset] = {}
        self._groups: dict[str, h5py.Group] = {}       # its table groups, by name
        self._codecs: dict[tuple[str, str], object] = {}   # per dataset: chunks.codec's
        # per table, the rows its file holds (its ``rows`` attribute, set once at commit)
        self._table_rows: dict[str, int] = {}
        self.files: HDF5Layout | None = None              # chosen at prepare
        self._pending: hdf5_chunks.Pending | None = None   # chunks still compressing
        # per window, per rank: rows per table (key: table name), bytes per text
        # column (key: (table, column)), and ("not utf-8", table, column): True
        self.blocks: list[list[dict]] = []
        self.rows: dict = {}                           # rows (bytes) written so far, all ranks
        self.commit_seconds = 0.0                      # rank 0: joining the parts
        # rank 0, joining: per "text"/"numbers", chunks placed as stored (their ranks
        # fill their bytes in), those bytes, and elements (text: bytes) of shared edge
        # chunks copied as values
        self.join_counts = {k: dict(chunks=0, stored_bytes=0, value_items=0)
                            for k in ("text", "numbers")}

    @property
    def serial_seconds(self) -> float | None:
        """Rank 0's placing of the other ranks' chunks, in the serial join's layout."""
        return getattr(self.files, "serial_seconds", None)

    # -- collective steps --------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        self.defs, self.schema = defs, schema
        collective = False
        with comm.guard():      # a bad PARTRACE_H5_COLLECTIVE fails every rank alike
            collective = self.layout == "single" and collective_chosen(comm)
        comm.check()
        # one rank writes the output itself, whatever the layout asked
        self.files = (HDF5Layout if not comm.parallel else
                      PartsLayout if self.layout == "parts" else
                      CollectiveLayout if collective else SingleFileLayout)(self)
        chosen = None
        with comm.guard():      # a bad PARTRACE_H5_CHUNK_ROWS fails every rank alike
            chosen = hdf5.long_chunk_rows()
        comm.check()
        chosen = comm.bcast(chosen)     # rank 0's: every part's chunks must match
        # rows per chunk of each long table: chosen, or grown with the table's rows
        totals = self.table_rows or {}
        self.chunk_rows = {name: chosen or hdf5.grown_chunk_rows(totals.get(name, 0))
                           for name in schema}
        hdf5_chunks.set_threads(hdf5_chunks.default_threads(comm.size))
        # rows held by chunks compressing while the engine builds the next column or
        # window: a small share of the budget (None: no budget given)
        self._pending = hdf5_chunks.Pending(min(hdf5_chunks.PENDING_BYTES,
                                                (self.memory or 1 << 40) // 16))
        self.text_keys = [(name, c.name) for name, cols in schema.items() for c in cols
                          if c.is_object]
        self.rows = dict.fromkeys([*schema, *self.text_keys], 0)
        # tables each of whose chunks one rank writes whole (chunk_owners.py): all but
        # those with text (its bytes' chunks do not follow rows), where the layout lets
        self._owned_tables = set() if not self.files.owns_chunks else {
            name for name, cols in schema.items() if not any(c.is_object for c in cols)}
        self._steps: dict[str, int] = {}       # their rows per chunk
        self._owner = OwnedWriter(self._put_owned)
        self.stage(comm)
        with comm.guard():
            if comm.rank == 0 and self.files.folder:
                self.staging.path(self.files.folder).mkdir()
        comm.check()

    def outputs(self) -> list[Path]:
        return [self.final, self.final.parent / self.parts_name]

    def _shapes(self, counts: dict) -> dict:
        """Per table and text column, (rows or bytes per chunk, final size or None),
        the same on every rank: fitted and fixed when the first window is the only
        one (the engine says no table has later rows), else the largest chunks and
        resizable datasets."""
        later = self.next_keys
        only = later is not None and all(k is None for k in later.values())
        out = {name: (hdf5.chunk_rows(counts[name], self.chunk_rows[name]), counts[name])
               if only else (self.chunk_rows[name], None) for name in self.schema}
        for key in self.text_keys:
            out[key] = ((hdf5_text.data_chunk(counts[key]), counts[key]) if only
                        else (hdf5_text.CHUNK_BYTES, None))
        return out

    def create_file(self, comm: Comm, counts: dict) -> None:
        """This rank's file of the layout, left open for the windows: ``new_file``
        and its tables (``create_tables``)."""
        f = self.new_file(comm.rank)
        self._datasets, self._codecs = {}, {}
        self.create_tables(f, counts, self._datasets)
        for name in self._owned_tables:
            first = self._dataset(name, self.schema[name][0].name) if self.schema[name] else None
            if first is not None and first.chunks:
                self._steps[name] = first.chunks[0]
        self._file = f
        self._groups = {}
        self._table_rows = dict.fromkeys(self.schema, 0)

    def _dataset(self, table: str, column: str) -> h5py.Dataset:
        """The open file's dataset of ``table``'s ``column``, looked up once."""
        ds = self._datasets.get((table, column))
        if ds is None:
            ds = self._datasets[table, column] = self._file[table][column]
        return ds

    def _group(self, table: str) -> h5py.Group:
        """The open file's group of ``table``, looked up once."""
        group = self._groups.get(table)
        if group is None:
            group = self._groups[table] = self._file[table]
        return group

    def _codec(self, table: str, column: str):
        """The open file's ``chunks.codec`` of a numeric column: its filters, read once."""
        how = self._codecs.get((table, column), False)
        if how is False:
            how = self._codecs[table, column] = hdf5_chunks.codec(self._dataset(table, column))
        return how

    def _count(self, table: str, end: int) -> None:
        """The file's rows of ``table``, now that a window's end in it is ``end``."""
        self._table_rows[table] = max(end, self._table_rows[table])

    def new_file(self, rank: int) -> h5py.File:
        """``rank``'s file of the layout (``open_file``), open: the header where it is
        the output, else a shard's mark."""
        f = self.files.open_file(rank)
        try:
            if self.files.is_output(rank):
                hdf5.write_header(f, self.defs, self.source, self.schema)
            else:
                f.attrs["layout"] = hdf5.LAYOUT + "-shard"
        except BaseException:
            f.close()
            raise
        return f

    def create_tables(self, f: h5py.File, counts: dict, made: dict | None = None,
                      piped: bool = False) -> None:
        """Every table's empty datasets in ``f``, their chunks and sizes from ``counts``
        (the first window's rows and bytes, all ranks) and the layout's ``shapes``:
        the same on every rank.  ``made``: given, gets the numeric datasets by
        (table, column).  ``piped``: HDF5's pipeline compresses the chunks (layout.filters)."""
        shapes = self.files.shapes(self._shapes(counts), counts)
        known = {}      # the file's enum types, found once for all its tables
        for name, columns in self.schema.items():
            chunk, rows = shapes[name]
            text = {c.name: (shapes[name, c.name][1], shapes[name, c.name][0])
                    for c in columns if c.is_object}
            table = {} if made is not None else None
            hdf5.create_table(f, name, columns, chunk, self.compression, rows, text,
                              known=known, made=table, piped=piped)
            if made is not None:
                made.update(((name, col), ds) for col, ds in table.items())

    def _encode_text(self, tables: dict[str, Table]) -> dict:
        """Per (table, text column): (bytes, per-row lengths, not UTF-8), this rank's."""
        out = {}
        for name, col in self.text_keys:
            if name in tables:
                spec = next(c for c in self.schema[name] if c.name == col)
                out[name, col] = hdf5_text.encode(spec, tables[name].column_once(col))
        return out

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        """Append one window: every rank its slice of the global order."""
        encoded = {}
        with comm.guard():      # a value that cannot be encoded fails every rank, no hang
            encoded = self._encode_text(tables)
        comm.check()
        mine = {name: len(t) for name, t in tables.items()}
        for key, (data, _, bad) in encoded.items():
            mine[key] = len(data)
            if bad:
                mine[("not utf-8",) + key] = True
        everyone = comm.allgather(mine)
        self.blocks.append(everyone)
        self.files.write_window(comm, tables, encoded, everyone)
        for key in self.rows:
            self.rows[key] += sum(e.get(key, 0) for e in everyone)

    def write_files(self, comm: Comm, tables: dict[str, Table], encoded: dict,
                    everyone: list[dict]) -> None:
        """One window, each rank its slice into its own file (the layout's): ``encoded``,
        this rank's text columns; ``everyone``, every rank's counts."""
        def plan() -> dict:
            if self._file is None:
                self.create_file(comm, {k: sum(e.get(k, 0) for e in everyone) for k in self.rows})
            self.files.before_chunks(comm)
            return self._owned_windows(tables, everyone)

        self._owner.write(comm, plan, lambda owned: self._write_unowned(
            comm.rank, tables, encoded, everyone, owned))

    def _write_unowned(self, rank: int, tables: dict[str, Table], encoded: dict,
                       everyone: list[dict], owned: dict) -> None:
        """The tables not written in owned chunks (the layout's places for this rank's
        rows; text columns), local: inside the owners' second guard."""
        for name, table in tables.items():
            if name in owned:
                continue
            group, text = self._group(name), {}
            for col in (c.name for c in self.schema[name] if c.is_object):
                data, lengths, _ = encoded[name, col]
                # the bytes where the layout puts them; the ends say the global offsets
                base = self.span((name, col), everyone, rank)[0]
                pair = self._dataset(name, col)
                at, end = self.files.place((name, col), pair[hdf5_text.DATA].shape[0],
                                           everyone, rank, len(data))
                text[col] = (data, lengths, base, at, end)
                if any(e.get(("not utf-8", name, col)) for e in everyone) and (
                        self.files.is_output(rank)):
                    hdf5_text.mark_not_utf8(pair)
            at, end = self.files.place(name, self._table_rows[name], everyone, rank,
                                       len(table))
            hdf5.write_rows(group, table, self.schema[name], at, end, text, self._pending,
                            count=False, objects=lambda c, t=name: self._dataset(t, c),
                            codecs=lambda c, t=name: self._codec(t, c))
            self._count(name, end)

    def _owned_windows(self, tables: dict[str, Table], everyone: list[dict]) -> dict:
        """The tables written in whole chunks by their owners (chunk_owners.py): each
        one's (slices, this rank's rows, column names, rows come later), its datasets
        grown to the window's end on every rank (every part has the final shape)."""
        out = {}
        for name, table in tables.items():
            step = self._steps.get(name)
            if step is None:
                continue
            counts = [e.get(name, 0) for e in everyone]
            end = self.rows[name] + sum(counts)
            if end > self._table_rows[name]:   # the datasets are as long as the rows so far
                for col in self.schema[name]:
                    ds = self._dataset(name, col.name)
                    if ds.shape[0] < end:
                        ds.resize(end, axis=0)
            self._count(name, end)
            later = self.next_keys is None or self.next_keys.get(name) is not None
            out[name] = (self._owner.slices(name, self.rows[name], counts, step, later), table,
                         [c.name for c in self.schema[name]], later)
        return out

    def _put_owned(self, name: str, column: str, values: np.ndarray, row: int) -> None:
        col = next(c for c in self.schema[name] if c.name == column)
        how = self._codec(name, column)
        ds = self.files.owned_target(name, column, self._dataset(name, column), how)
        hdf5.write_values(ds, col, values, row, self._pending, how)

    def span(self, key, everyone: list[dict], rank: int) -> tuple[int, int, int]:
        """Global (first row or byte of ``rank``'s share, its end, the window's end)."""
        start = self.rows[key] + sum(e.get(key, 0) for e in everyone[:rank])
        return (start, start + everyone[rank].get(key, 0),
                self.rows[key] + sum(e.get(key, 0) for e in everyone))

    def _set_rows(self) -> None:
        """The open file's tables' ``rows`` attributes (made 0), once their rows are in."""
        if self._file is not None:
            for name, rows in self._table_rows.items():
                if rows:
                    hdf5.set_rows(self._group(name), rows)

    def close_file(self) -> None:
        """The file ``create_file`` opened, closed once its pending chunks are stored."""
        if self._file is not None:
            try:
                if self._pending is not None:
                    self._pending.drain()
            finally:
                self._file.close()
            self._file = None
            self._datasets, self._groups, self._codecs = {}, {}, {}

    def commit(self, comm: Comm) -> None:
        if not self.blocks:     # no window at all: still an (empty) file
            self.write(comm, {name: Table.empty(cols) for name, cols in self.schema.items()})
        with comm.guard():
            self._owner.flush()     # chunks that end a table held for rows that never came
            self._set_rows()
            self.close_file()
        comm.check()
        began = time.perf_counter()
        names = self.files.finish(comm)
        self.commit_seconds = time.perf_counter() - began
        accounts.note_output(**self.files.written())
        self.publish(comm, names)

    def release(self) -> None:
        try:
            self.close_file()
        except Exception:  # noqa: BLE001 - the file is being thrown away
            self._file = None
            self._datasets = {}
        if self.files is not None:
            try:
                self.files.release()
            except Exception:  # noqa: BLE001 - the file is being thrown away
                pass
