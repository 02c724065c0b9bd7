"""Writing merged rows to one logical HDF5 file from many ranks.

* one rank: a single ordinary file;
* many ranks, h5py built with MPI: one file, written collectively (mpio);
* many ranks, serial h5py: rank r writes ``OUT.parts/rank-<r>.h5`` with its
  slice of the global order, and rank 0 writes ``OUT`` whose datasets are
  HDF5 virtual datasets over the shards (relative paths, so the pair can be
  moved together).  Readers see one file either way.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import h5py
import numpy as np

from ..engine.mpi import Comm
from ..engine.sink import Sink
from ..model import Definitions, Schema, Table
from . import hdf5
from .staging import Staging


class HDF5Sink(Sink):
    mode = "time"
    windows = True      # write() appends window after window
    columnwise = True   # write() reads each column of a window once (Table.column_once)

    def __init__(self, path, source: str = "", overwrite: bool = False,
                 compression: str | None = None, collective: bool | None = None):
        self.final = Path(path)
        self.source = source
        self.overwrite = overwrite
        self.compression = compression
        self.collective = h5py.get_config().mpi if collective is None else collective
        self.parts_name = self.final.name + ".parts"
        self.staging: Staging | None = None
        self._file: h5py.File | None = None
        self.blocks: list[list[dict[str, int]]] = []   # per window: rows per rank per table

    # -- collective steps --------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        self.defs, self.schema = defs, schema
        run_id = comm.bcast(f"{os.getpid()}-{int(time.time())}")
        self.staging = Staging(self.final, run_id)
        with comm.guard():
            if comm.rank == 0:
                self.staging.check_free([self.final, self.final.parent / self.parts_name],
                                        self.overwrite)
                self.staging.create()
                if comm.parallel and not self.collective:
                    self.staging.path(self.parts_name).mkdir()
        comm.check()


    def _file_name(self, comm: Comm) -> str:
        if comm.parallel and not self.collective:
            return f"{self.parts_name}/rank-{comm.rank:05d}.h5"
        return self.final.name

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        """Append one window: every rank its slice of the global order."""
        counts = {name: len(t) for name, t in tables.items()}
        self.blocks.append(comm.allgather(counts))
        if self.collective and comm.parallel:
            return self._write_collective(comm, tables, self.blocks[-1])
        with comm.guard():
            if self._file is None:
                # no chunk cache: whole chunks go straight to the file instead of
                # being copied through a 1 MiB cache per dataset (2-4x faster)
                self._file = h5py.File(self.staging.path(self._file_name(comm)), "w",
                                       rdcc_nbytes=0)
                if comm.parallel:
                    self._file.attrs["layout"] = hdf5.LAYOUT + "-shard"
                else:
                    hdf5.write_header(self._file, self.defs, self.source, self.schema)
                for name, columns in self.schema.items():
                    hdf5.create_table(self._file, name, columns, counts[name], self.compression)
            for name, table in tables.items():
                hdf5.append_rows(self._file[name], table, self.schema[name])
        comm.check()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _write_index(self, comm: Comm) -> None:
        """Rank 0: the top file, whose tables are virtual datasets over the shards."""
        shard = [f"./{self.parts_name}/rank-{r:05d}.h5" for r in range(comm.size)]
        with h5py.File(self.staging.path(self.final.name), "w") as f:
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
                    with h5py.File(path, "w") as f:
                        hdf5.write_header(f, self.defs, self.source, self.schema)
            comm.check()
            self._file = h5py.File(path, "a", driver="mpio", comm=comm._c)
            for name, columns in self.schema.items():
                hdf5.create_table(self._file, name, columns, 1 << 16, None)
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
        with comm.guard():
            self._close()
        comm.check()
        if comm.parallel and not self.collective:
            with comm.guard():
                if comm.rank == 0:
                    self._write_index(comm)
            comm.check()
        with comm.guard():
            if comm.rank == 0:
                names = [self.final.name]
                if self.staging.path(self.parts_name).exists():
                    names.insert(0, self.parts_name)
                elif (self.final.parent / self.parts_name).exists() and self.overwrite:
                    # an old run's shards would otherwise sit beside the new file
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
