"""Writing merged rows to one HDF5 file from many ranks (h5py need not have MPI).

Layouts (``layout=``):

* ``"single"`` (default): one self-contained file at the output path, whatever
  the rank count.  Rank 0 writes its slice of each window straight into the
  final file; rank r > 0 writes its slice into a staging part whose datasets
  have the final file's shape, chunks and filters, at the *global* row index
  (a part allocates only the chunks it touches).  h5py compresses as each rank
  writes, so the costly part runs in parallel.  At commit rank 0 copies every
  chunk a part holds whole as compressed bytes (no decoding), and writes the
  few rows of chunks shared by two ranks (at most two per rank, window and
  column) as values; text columns (variable-length, whose chunks point into
  their own file's heap) are copied as values.  The parts are then deleted
  (they never leave the hidden staging folder).
* ``"parts"``: rank r keeps ``OUT.parts/rank-<r>.h5`` and rank 0 writes ``OUT``
  whose datasets are HDF5 virtual datasets over the parts (relative paths: move
  ``OUT`` and ``OUT.parts`` together).  No copy at commit; ``OUT`` alone is
  unreadable (partrace says which part is missing).
* h5py built with MPI: one file, written collectively (mpio).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import h5py
import numpy as np

from ..engine.mpi import Comm
from ..engine.sink import Sink
from ..errors import UsageError
from ..model import Definitions, Schema, Table
from ..formats.hdf5 import layout as hdf5
from .staging import Staging

LAYOUTS = ("single", "parts")
PARTS_DIR = "parts"     # inside the hidden staging folder
JOIN_CACHE_BYTES = 16 << 20     # holds a shared chunk between its two writers


class HDF5Sink(Sink):
    mode = "time"
    windows = True      # write() appends window after window
    columnwise = True   # write() reads each column of a window once (Table.column_once)
    wants_next_keys = True  # the engine sets next_keys before each write: None per table = no later rows

    def __init__(self, path, source: str = "", overwrite: bool = False,
                 compression: str | None = None, collective: bool | None = None,
                 layout: str | None = None):
        layout = layout or "single"
        if layout not in LAYOUTS:
            raise UsageError(f"--layout {layout}: HDF5 layouts are {', '.join(LAYOUTS)}")
        self.final = Path(path)
        self.source = source
        self.overwrite = overwrite
        self.compression = compression
        self.layout = layout
        self.collective = h5py.get_config().mpi if collective is None else collective
        self.parts_name = self.final.name + ".parts"
        self.staging: Staging | None = None
        self._file: h5py.File | None = None
        self.blocks: list[list[dict[str, int]]] = []   # per window: rows per rank per table
        self.rows: dict[str, int] = {}                 # rows written so far, all ranks
        self.commit_seconds = 0.0                      # rank 0: joining the parts

    @property
    def _split(self) -> bool:
        return self._parallel and not self.collective

    # -- collective steps --------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        self.defs, self.schema = defs, schema
        self._parallel = comm.parallel
        self.rows = dict.fromkeys(schema, 0)
        run_id = comm.bcast(f"{os.getpid()}-{int(time.time())}")
        self.staging = Staging(self.final, run_id)
        with comm.guard():
            if comm.rank == 0:
                self.staging.check_free([self.final, self.final.parent / self.parts_name],
                                        self.overwrite)
                self.staging.create()
                if self._split:
                    name = self.parts_name if self.layout == "parts" else PARTS_DIR
                    self.staging.path(name).mkdir()
        comm.check()

    def _file_name(self, rank: int) -> str:
        if self._split and self.layout == "parts":
            return f"{self.parts_name}/rank-{rank:05d}.h5"
        if self._split and rank > 0:
            return f"{PARTS_DIR}/rank-{rank:05d}.h5"
        return self.final.name

    def _shapes(self, counts: dict[str, int]) -> dict[str, tuple[int, int | None]]:
        """Per table, (rows per chunk, final rows or None), the same on every rank:
        fitted and fixed when the first window is the only one (the engine says no
        table has later rows), else the largest chunks and resizable tables."""
        later = self.next_keys
        only = later is not None and all(k is None for k in later.values())
        return {name: (hdf5.chunk_rows(counts[name]), counts[name]) if only
                else (hdf5.CHUNK_ROWS, None) for name in self.schema}

    def _open(self, comm: Comm, counts: dict[str, int]) -> None:
        # no chunk cache: whole chunks go straight to the file instead of
        # being copied through a 1 MiB cache per dataset (2-4x faster)
        f = h5py.File(self.staging.path(self._file_name(comm.rank)), "w", rdcc_nbytes=0,
                      libver=hdf5.LIBVER)
        if self._file_name(comm.rank) == self.final.name:
            hdf5.write_header(f, self.defs, self.source, self.schema)
        else:
            f.attrs["layout"] = hdf5.LAYOUT + "-shard"
        shapes = self._shapes(counts)
        for name, columns in self.schema.items():
            if self._split and self.layout == "parts":
                shapes[name] = (hdf5.chunk_rows(counts[name]), None)    # rows differ per part
            chunk, rows = shapes[name]
            hdf5.create_table(f, name, columns, chunk, self.compression, rows)
        self._file = f

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        """Append one window: every rank its slice of the global order."""
        everyone = comm.allgather({name: len(t) for name, t in tables.items()})
        self.blocks.append(everyone)
        if self.collective and comm.parallel:
            return self._write_collective(comm, tables, everyone)
        with comm.guard():
            if self._file is None:
                self._open(comm, {n: sum(e[n] for e in everyone) for n in self.schema})
            for name, table in tables.items():
                if self._split and self.layout == "parts":
                    hdf5.append_rows(self._file[name], table, self.schema[name])
                    continue
                base = self.rows[name]
                start = base + sum(e[name] for e in everyone[:comm.rank])
                end = base + sum(e[name] for e in everyone)
                hdf5.write_rows(self._file[name], table, self.schema[name], start, end)
        comm.check()
        for name in self.schema:
            self.rows[name] += sum(e[name] for e in everyone)

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _intervals(self, name: str, size: int) -> list[list[tuple[int, int]]]:
        """Per rank, the global row ranges it wrote of table ``name`` (adjacent ones joined)."""
        out: list[list[tuple[int, int]]] = [[] for _ in range(size)]
        at = 0
        for window in self.blocks:
            for r in range(size):
                n = window[r][name]
                if n:
                    if out[r] and out[r][-1][1] == at:
                        out[r][-1] = (out[r][-1][0], at + n)
                    else:
                        out[r].append((at, at + n))
                    at += n
        return out

    def _join_parts(self, comm: Comm) -> None:
        """Rank 0: copy every part's rows into the final file (whole chunks raw).

        Column by column, rank after rank: a chunk shared by ranks r and r+1 is
        then written twice in a row and stays decoded in the final file's chunk
        cache between the two writes (decoded and encoded once)."""
        parts = [h5py.File(self.staging.path(self._file_name(r)), "r", rdcc_nbytes=0)
                 for r in range(1, comm.size)]
        try:
            with h5py.File(self.staging.path(self.final.name), "a",
                           rdcc_nbytes=JOIN_CACHE_BYTES) as f:
                for name, columns in self.schema.items():
                    ranges = self._intervals(name, comm.size)
                    if not any(ranges[1:]):
                        continue
                    for col in columns:
                        dst = f[name][col.name]
                        for r, part in enumerate(parts, start=1):
                            if ranges[r]:
                                copy_rows(part[name][col.name], dst, col, ranges[r])
        finally:
            for part in parts:
                part.close()
        for r in range(1, comm.size):
            os.unlink(self.staging.path(self._file_name(r)))

    def _write_index(self, comm: Comm) -> None:
        """Rank 0 (layout "parts"): the top file, of virtual datasets over the parts."""
        shard = [f"./{self.parts_name}/rank-{r:05d}.h5" for r in range(comm.size)]
        with h5py.File(self.staging.path(self.final.name), "w", libver=hdf5.LIBVER) as f:
            hdf5.write_header(f, self.defs, self.source, self.schema)
            for name, columns in self.schema.items():
                blocks, done = [], [0] * comm.size
                for window in self.blocks:
                    for r in range(comm.size):
                        rows = window[r][name]
                        blocks.append((shard[r], done[r], rows))
                        done[r] += rows
                hdf5.link_shards(f, name, columns, blocks, dict(zip(shard, done)))

    def _write_collective(self, comm: Comm, tables, everyone) -> None:  # pragma: no cover
        # Needs h5py built against parallel HDF5 (not the PyPI wheels): untested here.
        path = self.staging.path(self.final.name)
        if self._file is None:
            with comm.guard():
                if comm.rank == 0:
                    with h5py.File(path, "w", libver=hdf5.LIBVER) as f:
                        hdf5.write_header(f, self.defs, self.source, self.schema)
            comm.check()
            self._file = h5py.File(path, "a", driver="mpio", comm=comm.mpi)
            for name, columns in self.schema.items():
                hdf5.create_table(self._file, name, columns, hdf5.CHUNK_ROWS, self.compression)
        for name, table in tables.items():
            group = self._file[name]
            base = int(group.attrs["rows"])
            total = sum(e[name] for e in everyone)
            start = base + sum(e[name] for e in everyone[:comm.rank])
            for col in self.schema[name]:
                ds = group[col.name]
                ds.resize(base + total, axis=0)
                with ds.collective:
                    ds[start:start + len(table)] = np.asarray(table.column_once(col.name))
            group.attrs["rows"] = base + total

    def commit(self, comm: Comm) -> None:
        if not self.blocks:     # no window at all: still an (empty) file
            self.write(comm, {name: Table.empty(cols) for name, cols in self.schema.items()})
        with comm.guard():
            self._close()
        comm.check()
        if self._split:
            with comm.guard():
                if comm.rank == 0:
                    began = time.perf_counter()
                    if self.layout == "parts":
                        self._write_index(comm)
                    else:
                        self._join_parts(comm)
                    self.commit_seconds = time.perf_counter() - began
            comm.check()
        with comm.guard():
            if comm.rank == 0:
                names = [self.final.name]
                if self.layout == "parts" and self.staging.path(self.parts_name).exists():
                    names.insert(0, self.parts_name)
                elif (self.final.parent / self.parts_name).exists() and self.overwrite:
                    # an old run's parts would otherwise sit beside the new file
                    import shutil
                    shutil.rmtree(self.final.parent / self.parts_name)
                self.staging.publish(names)
        comm.check()

    def discard(self, comm: Comm) -> None:
        try:
            self._close()
        except Exception:  # noqa: BLE001 - the file is being thrown away
            self._file = None
        comm.barrier()
        if comm.rank == 0 and self.staging is not None:
            self.staging.discard()


def copy_rows(src, dst, col, ranges: list[tuple[int, int]]) -> None:
    """Copy rows ``ranges`` of ``src`` into ``dst`` (same shape, chunks and filters).

    Chunks wholly inside a range go as stored bytes (read_direct_chunk ->
    write_direct_chunk: no decompression); the rows of the chunks at a range's
    ends, which other ranks share, go as values.  Variable-length columns go as
    values (their chunks hold addresses in their own file's heap).
    """
    if col.is_object:
        for a, b in ranges:
            hdf5.write_values(dst, col, hdf5.read_column(src, a, b), a)
        return
    step = src.chunks[0]
    tail = (0,) * (src.ndim - 1)
    for a, b in ranges:
        first, last = -(-a // step), min(b, src.shape[0]) // step   # whole chunks: [first, last)
        if b == src.shape[0] and b % step:
            last += 1       # the dataset's last, partial chunk is whole if the range ends it
        if first >= last:
            dst[a:b] = src[a:b]
            continue
        for c in range(first, last):
            mask, data = src.id.read_direct_chunk((c * step,) + tail)
            dst.id.write_direct_chunk((c * step,) + tail, data, mask)
        if a < first * step:
            dst[a:first * step] = src[a:first * step]
        if min(last * step, b) < b:
            dst[last * step:b] = src[last * step:b]
