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
from ..model import Definitions, Schema, Table
from . import hdf5
from .staging import Staging


class HDF5Sink:
    mode = "time"

    def __init__(self, path, source: str = "", overwrite: bool = False,
                 compression: str | None = None, collective: bool | None = None):
        self.final = Path(path)
        self.source = source
        self.overwrite = overwrite
        self.compression = compression
        self.collective = h5py.get_config().mpi if collective is None else collective
        self.parts_name = self.final.name + ".parts"
        self.staging: Staging | None = None

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

    def destinations(self, comm, name, table):  # pragma: no cover - mode is "time"
        raise NotImplementedError("HDF5 output is in global time order")

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        counts = {name: len(t) for name, t in tables.items()}
        everyone = comm.allgather(counts)
        if not comm.parallel:
            with comm.guard():
                with h5py.File(self.staging.path(self.final.name), "w") as f:
                    hdf5.write_header(f, self.defs, self.source, self.schema)
                    for name, table in tables.items():
                        hdf5.write_table(f, name, table, self.schema[name], self.compression)
            comm.check()
        elif self.collective:
            self._write_collective(comm, tables, everyone)
        else:
            self._write_shards(comm, tables, everyone)

    def _write_shards(self, comm: Comm, tables, everyone) -> None:
        shard = f"{self.parts_name}/rank-{comm.rank:05d}.h5"
        with comm.guard():
            with h5py.File(self.staging.path(shard), "w") as f:
                f.attrs["layout"] = hdf5.LAYOUT + "-shard"
                for name, table in tables.items():
                    hdf5.write_table(f, name, table, self.schema[name], self.compression)
        comm.check()
        shapes = {name: {c: np.asarray(t[c]).shape[1:] for c in t.names}
                  for name, t in tables.items()}
        with comm.guard():
            if comm.rank == 0:
                with h5py.File(self.staging.path(self.final.name), "w") as f:
                    hdf5.write_header(f, self.defs, self.source, self.schema)
                    for name in self.schema:
                        shards = [(f"./{self.parts_name}/rank-{r:05d}.h5", everyone[r][name],
                                   shapes[name]) for r in range(comm.size)]
                        hdf5.link_shards(f, name, self.schema[name], shards)
        comm.check()

    def _write_collective(self, comm: Comm, tables, everyone) -> None:  # pragma: no cover
        # Needs h5py built against parallel HDF5; not available from PyPI wheels.
        path = self.staging.path(self.final.name)
        with comm.guard():
            if comm.rank == 0:
                with h5py.File(path, "w") as f:
                    hdf5.write_header(f, self.defs, self.source, self.schema)
        comm.check()
        with h5py.File(path, "a", driver="mpio", comm=comm._c) as f:
            for name, table in tables.items():
                total = sum(e[name] for e in everyone)
                start = sum(e[name] for e in everyone[:comm.rank])
                group = f.require_group(name)
                for col in self.schema[name]:
                    values = np.asarray(table[col.name])
                    ds = group.create_dataset(col.name, shape=(total,) + values.shape[1:],
                                              dtype=hdf5.h5_dtype(col))
                    with ds.collective:
                        ds[start:start + len(values)] = values
                    hdf5._column_attrs(ds, col)
                hdf5._table_attrs(group, self.schema[name], total)

    def commit(self, comm: Comm) -> None:
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
        comm.barrier()
        if comm.rank == 0 and self.staging is not None:
            self.staging.discard()
