"""How the ranks of the HDF5 sink make its output: one class per layout, chosen at prepare.

The sink (hdf5_sink.py) does what every layout shares: the text columns encoded, each
window's counts gathered, the numeric chunks given to their owners (chunk_owners.py),
the rows written through formats/hdf5.  A layout answers the rest:

- ``folder``: the staging subfolder rank 0 makes for the ranks' files (None: none);
- ``owns_chunks``: whether a rank's file has the output's shape, so that each numeric
  chunk can be written whole by one owner;
- ``file_name(rank)`` and ``open_file(rank)``: the file a rank writes, in the staging
  folder (``is_output``: the output file itself, which gets the header);
- ``shapes(shapes, counts)``: its datasets' chunks and sizes;
- ``owned_target(table, column, ds, how)``: where the whole chunks a rank owns of that
  dataset are stored (``ds``, the file's, unless the layout takes them elsewhere);
- ``place(key, here, everyone, rank, n)``: where a rank's ``n`` rows (bytes) of a table
  (text column) ``key`` go in its file this window: (first, size the dataset then has);
- ``finish(comm)``: collective, once every rank closed its file: the output made of
  the files; rank 0 returns the names to publish;
- ``write_window(comm, tables, encoded, everyone)``: collective, one window: here each
  rank writes its slice into its own file, through the sink;
- ``written()``: how the output was written, for the accounts (``path``, ``summary``);
- ``release()``: local, on a failure: close what the layout itself holds open.

This base is one rank writing the output file itself.  ``SingleFileLayout``
(hdf5_joined.py) joins the files of several ranks into one; ``PartsLayout`` leaves them
beside an index of virtual datasets; ``CollectiveLayout`` (hdf5_collective.py) has every
rank write the one file together through a parallel h5py (MPI-IO).  That one needs more
than ``open_file``: under MPI-IO every write is a call of every rank (the sink's chunks,
compressed and stored by one rank each, would leave the others waiting), so it writes
the windows itself (``write_window``).
"""
from __future__ import annotations

import shutil

import h5py

from ..engine.mpi import Comm
from ..formats.hdf5 import layout as hdf5
from ..formats.hdf5 import text as hdf5_text


class HDF5Layout:
    folder: str | None = None
    owns_chunks = True

    def __init__(self, sink):
        self.sink = sink

    def file_name(self, rank: int) -> str:
        return self.sink.final.name

    def is_output(self, rank: int) -> bool:
        return self.file_name(rank) == self.sink.final.name

    def open_file(self, rank: int) -> h5py.File:
        # no chunk cache: whole chunks go straight to the file instead of
        # being copied through a 1 MiB cache per dataset (2-4x faster)
        return h5py.File(self.sink.staging.path(self.file_name(rank)), "w", rdcc_nbytes=0,
                         libver=hdf5.LIBVER)

    def shapes(self, shapes: dict, counts: dict) -> dict:
        return shapes

    def owned_target(self, name: str, column: str, ds, how):
        """What an owned table's chunks are stored to: here the file's own dataset."""
        return ds

    def place(self, key, here: int, everyone: list[dict], rank: int, n: int) -> tuple[int, int]:
        """At the rank's place in the global order; the dataset grown to the window's end."""
        start, _, end = self.sink.span(key, everyone, rank)
        return start, end

    def write_window(self, comm: Comm, tables: dict, encoded: dict, everyone: list[dict]) -> None:
        self.sink.write_files(comm, tables, encoded, everyone)

    def before_chunks(self, comm: Comm) -> None:
        """Local work of a window's first step, before this rank writes its whole chunks
        (inside the guard of the step in which every rank writes theirs)."""

    def written(self) -> dict:
        return dict(path="one rank", summary="HDF5 written by one rank")

    def release(self) -> None:
        pass

    def finish(self, comm: Comm) -> list[str]:
        names = []
        with comm.guard():
            if comm.rank == 0:
                old = self.sink.final.parent / self.sink.parts_name
                if old.exists() and self.sink.overwrite:
                    # an old run's parts would otherwise sit beside the new file
                    shutil.rmtree(old)
                names = [self.sink.final.name]
        comm.check()
        return names


class PartsLayout(HDF5Layout):
    """Rank r keeps ``OUT.parts/rank-<r>.h5``, its rows one after another; rank 0 writes
    ``OUT``, whose datasets are virtual datasets over the parts."""
    owns_chunks = False     # a part holds its own rows only

    @property
    def folder(self) -> str:
        return self.sink.parts_name

    def file_name(self, rank: int) -> str:
        return f"{self.sink.parts_name}/rank-{rank:05d}.h5"

    def shapes(self, shapes: dict, counts: dict) -> dict:
        """Chunks fitted to the whole output, sizes growing: a part's size is its own."""
        for name, columns in self.sink.schema.items():
            shapes[name] = (hdf5.chunk_rows(counts[name], self.sink.chunk_rows[name]), None)
            for c in columns:
                if c.is_object:
                    shapes[name, c.name] = (hdf5_text.data_chunk(counts[name, c.name]), None)
        return shapes

    def place(self, key, here: int, everyone: list[dict], rank: int, n: int) -> tuple[int, int]:
        """After the part's rows (bytes) so far; the index says their global places."""
        return here, here + n

    def written(self) -> dict:
        return dict(path="parts", summary="HDF5 parts: no join")

    def finish(self, comm: Comm) -> list[str]:
        names = []
        with comm.guard():
            if comm.rank == 0:
                self._write_index(comm)
                names = [self.sink.parts_name, self.sink.final.name]
        comm.check()
        return names

    def _write_index(self, comm: Comm) -> None:
        """Rank 0: the top file, of virtual datasets over the parts."""
        sink = self.sink
        shard = [f"./{sink.parts_name}/rank-{r:05d}.h5" for r in range(comm.size)]

        def blocks_of(key):
            blocks, done = [], [0] * comm.size
            for window in sink.blocks:
                for r in range(comm.size):
                    n = window[r].get(key, 0)
                    blocks.append((shard[r], done[r], n))
                    done[r] += n
            return blocks, dict(zip(shard, done))

        with h5py.File(sink.staging.path(sink.final.name), "w", libver=hdf5.LIBVER) as f:
            hdf5.write_header(f, sink.defs, sink.source, sink.schema)
            known = {}      # the file's enum types, found once for all its tables
            for name, columns in sink.schema.items():
                text = {}
                for col in (c.name for c in columns if c.is_object):
                    bad = any(w.get(("not utf-8", name, col)) for win in sink.blocks for w in win)
                    text[col] = (*blocks_of((name, col)), bad)
                hdf5.link_shards(f, name, columns, *blocks_of(name), text, known)
